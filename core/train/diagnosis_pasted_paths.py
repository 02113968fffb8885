"""The paths in what the person pasted beside the error (core.train.diagnosis_pasted asks these first):

- a relative path not found from the prompt's working directory while a listing shows it under another folder;
- a path given that is not the kind of folder the tool reads (a weights file for its folder, a Hub cache
  repository's root for a snapshot folder);
- a model folder whose config.json `auto_map` names code files its listing lacks;
- "Permission denied" about a folder whose `ls -ld` shows it is not writable for the prompt's user.
"""

from __future__ import annotations

import ntpath
import re

from core.i18n import _
from core.train import log_facts
from core.train.diagnosis_families import FamilyFinding

NOT_FOUND = re.compile(r"(?i)no such file|not found|no file named|does not exist|cannot open|can't find|couldn't find|unable to "
                       r"(?:open|find|load)|FileNotFoundError|Errno 2\b|not a (?:file|directory)|is not a local folder")
QUOTED_PATH = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"|((?:\.{1,2}[\\/])?[\w.\-]+(?:[\\/]+[\w.\-]+)+)")


def contradiction(fid, title, explanation, fix, commands, facts) -> FamilyFinding:
    """A finding of what the log showed of the set-up: it decides the cause, ranked first."""
    return FamilyFinding(fid, title, explanation, fix, commands, facts, own_cause=True, contradiction=True)


def launch_of(commands: list[log_facts.ShellCommand], root_line: int | None) -> log_facts.ShellCommand | None:
    """The command that ran the failing program: the last one before the root line (the last one if unknown)."""
    before = [c for c in commands if root_line is None or c.line < root_line]
    return before[-1] if before else None


# --- the working directory ---------------------------------------------------------------------------------

def _relative_paths(root: str) -> list[str]:
    found = []
    for m in QUOTED_PATH.finditer(root):
        path = next(g for g in m.groups() if g)
        path = path.replace("\\\\", "\\").strip()
        if log_facts.absolute(path) or "://" in path or not re.search(r"[\\/]|\.\w{2,5}$", path):
            continue
        found.append(path)
    return list(dict.fromkeys(found))


def _parts(path: str) -> list[str]:
    return [p for p in re.split(r"[\\/]+", path) if p and p != "."]


def _holder(relative: str, shown: set[str]) -> str | None:
    """The folder under which a listing showed `relative` (or its first folders): where it resolves."""
    want = [p.lower() for p in _parts(relative)]
    for path in sorted(shown):
        have = _parts(path)
        low = [p.lower() for p in have]
        for k in range(len(want), 0, -1):
            if len(low) > k and low[-k:] == want[:k]:
                sep = "\\" if log_facts.windows(path) else "/"
                head = sep.join(have[:-k])
                return head + sep if re.fullmatch(r"[A-Za-z]:", head) else (head or sep)
    return None


def _same(a: str, b: str) -> bool:
    return ntpath.normcase(a.rstrip("\\/")) == ntpath.normcase(b.rstrip("\\/"))


def wrong_directory(root, text, commands, root_line):
    if not NOT_FOUND.search(root):
        return None
    launch = launch_of(commands, root_line)
    if launch is None or not launch.cwd:
        return None
    exist, missing = log_facts.listed_paths(commands)
    for relative in _relative_paths(root):
        holder = _holder(relative, exist)
        first = log_facts.join(launch.cwd, _parts(relative)[0])
        shown_missing = any(_same(first, m) or _same(log_facts.join(launch.cwd, relative), m) for m in missing)
        if holder is None and not shown_missing:
            continue
        if holder is not None and _same(holder, launch.cwd):
            continue  # it is where it should be: the working directory is not the cause
        facts = [_("the command `{command}` ran in {cwd} (its prompt)", command=launch.command[:120], cwd=launch.cwd)]
        if shown_missing:
            facts.append(_("{path} does not exist (the log's listing)", path=first))
        if holder is not None:
            facts.append(_("{path} is under {folder} (the log's listing)", path=relative, folder=holder))
            fix = _("Start it from {folder}, where the relative path {path} resolves (`cd {folder}`, then the same "
                    "command), or give the absolute path {absolute}.", folder=holder, path=relative,
                    absolute=log_facts.join(holder, relative))
            commands_out = [f"cd {holder}", launch.command]
        else:
            fix = _("Start it from the folder that holds {path} (for LLaMA-Factory: the repository's root, where "
                    "`data/` is), or give an absolute path.", path=relative)
            commands_out = [launch.command]
        return contradiction(
            "wrong-directory", _("Started from the wrong directory: {path} is relative", path=relative),
            _("The program looked for the relative path {path} from its working directory {cwd}, where it is not "
              "(\"{said}\").", path=relative, cwd=launch.cwd, said=root[:160]),
            fix, commands_out, facts)
    return None


# --- a path of the wrong kind -------------------------------------------------------------------------------

WANTED = re.compile(r"['\"]?([\w.\-]+\.(?:json|safetensors|bin|model|py|txt|gguf))['\"]?")
GIVEN = re.compile(r"(?<![\w:])[\"']?((?:/|~/|\./|[A-Za-z]:\\)[^\s\"']+)")
WEIGHTS = re.compile(r"\.(?:safetensors|bin|gguf|pt|pth|ckpt)$")


def _given(commands, launch) -> list[str]:
    texts = [launch.command] + [f.text for f in log_facts.shown_files(commands)]
    return list(dict.fromkeys(p.rstrip(",;") for t in texts for p in GIVEN.findall(t)))


def _listed(listings: dict[str, list[str]], folder: str) -> list[str] | None:
    folder = folder.rstrip("/")
    for shown, names in listings.items():
        if shown == folder or folder.endswith("/" + shown) or shown.endswith("/" + folder.removeprefix("~/")):
            return names
    return None


def _where(commands, launch, path: str) -> str:
    """The shown file that names `path` (a Modelfile, a YAML), else the command."""
    named = next((f.path for f in log_facts.shown_files(commands) if path in f.text), None)
    return named or f"`{launch.command[:80]}`"


def given_path(root, text, commands, root_line):
    wanted = WANTED.findall(root) if NOT_FOUND.search(root) or "can't find" in root.lower() else []
    launch = launch_of(commands, root_line)
    if not wanted or launch is None:
        return None
    listings = log_facts.listings(commands)
    for given in _given(commands, launch):
        path = log_facts.join(launch.cwd, given) if launch.cwd and given.startswith("./") else given
        names = _listed(listings, path)
        if names is not None and {"blobs", "snapshots"} <= set(names):
            snaps = [f for f in listings if f.rstrip("/").startswith(path.rstrip("/") + "/snapshots/")]
            snapshot = snaps[0] if snaps else path.rstrip("/") + "/snapshots/<revision>"
            facts = [_("{path} holds {names}: the root of a Hub cache repository", path=path, names=" ".join(names))]
            return contradiction(
                "wrong-path-kind", _("{path} is a Hub cache repository, not a model folder", path=path),
                _("The Hub's cache keeps a model as blobs, refs and snapshots; the files a loader reads ({file}) "
                  "are in a snapshot folder, not at the repository's root, so nothing is found there (\"{said}\").",
                  file=wanted[0], said=root[:160]),
                _("Give the snapshot folder instead: {snapshot}/ (or the model id with HF_HOME pointing at the "
                  "cache).", snapshot=snapshot),
                [f"ls {snapshot}/", launch.command.replace(given, snapshot + "/")], facts)
        other = [w for w in wanted if w != path.rsplit("/", 1)[-1]]
        if WEIGHTS.search(path) and other:
            parent = given.rsplit("/", 1)[0]
            beside = _listed(listings, path.rsplit("/", 1)[0]) or []
            if other[0] not in beside:
                continue
            wanted = other
            facts = [_("{path} is a file; {file} is beside it in {folder}", path=path, file=wanted[0],
                       folder=parent)]
            return contradiction(
                "wrong-path-kind", _("A file is given where its folder is wanted: {path}", path=path),
                _("The tool reads a folder ({file} and the weights beside it), and was given the weights file "
                  "itself, so it looks for {file} where there is none (\"{said}\").", file=wanted[0],
                  said=root[:160]),
                _("Give the folder that holds both, in {where}: {folder}", folder=parent,
                  where=_where(commands, launch, path)),
                [f"ls {parent}", launch.command], facts)
    return None


# --- a model folder without the code its config names -------------------------------------------------------

AUTO_MAP = re.compile(r'"Auto\w+":\s*\[?"(?:([\w.\-]+/[\w.\-]+)--)?(\w+)\.\w+"')
REMOTE_ROOT = re.compile(r"(?i)\.py\b|configuration_|modeling_|remote code|trust_remote_code|auto_map|dynamic_module")


def remote_code_files(root, text, commands, root_line):
    if not REMOTE_ROOT.search(root):
        return None
    launch = launch_of(commands, root_line)
    listings = log_facts.listings(commands)
    for shown in log_facts.shown_files(commands):
        if not shown.path.endswith("config.json"):
            continue
        named = AUTO_MAP.findall(shown.text)
        folder = shown.path.rsplit("/", 1)[0]
        names = _listed(listings, folder)
        if not named or names is None:
            continue
        missing = sorted({f"{module}.py" for _repo, module in named} - set(names))
        if not missing:
            continue
        repo = next((r for r, _m in named if r), None)
        facts = [_("{config}: auto_map names {files}", config=shown.path, files=", ".join(missing)),
                 _("{folder} holds no {files} (the log's listing)", folder=folder, files=", ".join(missing))]
        get = (f'hf download {repo} --include "*.py" --local-dir {folder}' if repo
               else f"cp <base model folder>/*.py {folder}/")
        return contradiction(
            "remote-code-files", _("The model folder lacks the code its config names: {files}",
                                   files=", ".join(missing)),
            _("config.json's auto_map loads the model's classes from {files}{origin}, and the folder has no such "
              "file (a fine-tuned copy saved without the base model's code), so trust_remote_code has nothing to "
              "run (\"{said}\").", files=", ".join(missing), origin=f" ({repo})" if repo else "",
              said=root[:160]),
            _("Put the base model's code files into {folder} (or save the base model's config with "
              "trust_remote_code=True into it), then load it again.", folder=folder),
            [get] + ([launch.command] if launch else []), facts)
    return None


# --- a folder the user cannot write -------------------------------------------------------------------------

DENIED = re.compile(r"(?i)permission denied|EACCES|Errno 13|operation not permitted|read-only file system")
SHARED = ("/dev/shm", "/tmp", "/var/tmp")


def not_writable(root, text, commands, root_line):
    shown = log_facts.modes(commands)
    if not shown:
        return None  # no `ls -ld` in the log: nothing to reason from (and no scan of a long log)
    denied = [t for t in text.splitlines() if DENIED.search(t)]
    if not denied:
        return None
    for path, mode, owner, group, user in shown:
        if user in (None, "root") or not mode.startswith("d"):
            continue
        if mode[8] == "w" or (owner == user and mode[2] == "w") or (group == user and mode[5] == "w"):
            continue
        name = path.rstrip("/").rsplit("/", 1)[-1]
        said = next((t.strip() for t in denied if path in t or re.search(r"\b" + re.escape(name), t)), None)
        if said is None:
            continue
        shared = path in SHARED
        fix_command = f"sudo chmod 1777 {path}" if shared else f"sudo chown {user} {path}"
        facts = [_("{path}: {mode} {owner} {group}, and the prompt's user is {user}", path=path, mode=mode,
                   owner=owner, group=group, user=user), _("the log: {line}", line=said[:160])]
        return contradiction(
            "not-writable", _("{path} is not writable for {user}", path=path, user=user),
            _("{path} belongs to {owner} with mode {mode}, so {user}'s processes cannot create files in it "
              "(\"{said}\"); what failed after that is a consequence (\"{root}\").", path=path, owner=owner,
              mode=mode, user=user, said=said[:120], root=root[:120]),
            _("Make it writable: `{command}`{why}, then run it again.", command=fix_command,
              why=_(" (a shared folder is world-writable with the sticky bit)") if shared else ""),
            [fix_command, f"ls -ld {path}"], facts)
    return None
