"""Every command devtune prints as a fix, or documents as one, works as printed (issue 28).

Collected, by one mechanism, from where devtune says them:
- the failure rules (core/train/failure_rules*.py): each rule's commands, and the commands named in its fix
  and explanation, in both languages;
- the doctor (core/doctor/checks/*.py, core/doctor/fixes.py): the fix of every check on every recorded machine
  (tests/fixtures/doctor/machines), and every fix text in the checks' source, its `{...}` parts rendered from a
  recorded MI300X machine's evidence where they can be;
- the data step's messages (the `_()` texts in core/data/, in both languages) that name a command;
- the docs: the lines of ```sh / ```bash blocks in README.md and docs/**/*.md;
- the serving lines devtune prints for a server it starts (`equivalent: ...`, `command: ...`), from the real
  serving environment's launch plan.

A prose text names a command in backticks (`hf download NAME`), or as a run of words starting with one of
devtune's own programs (devtune data fix {file} -o NAME.jsonl) up to the first plain word.

Each command (each part of a `|`, `&&`, `;` chain) must start with a program of the project's environments
(.venv/bin by name: it is the person's PATH; .venv-serve/bin only by its path, which is not on it), a target of
the Makefile, or a system tool of SYSTEM_TOOLS (with the reason it is not checked here). For a program of the environments, `PROGRAM SUBCOMMAND... --help` must succeed and name every
flag the command passes. Placeholders (RUN, <model>, {file}) stand for positional arguments and are not run.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENVS = (ROOT / ".venv" / "bin", ROOT / ".venv-serve" / "bin")
MACHINES = ROOT / "tests" / "fixtures" / "doctor" / "machines"
EVAL_MACHINE = MACHINES / "mi300x8"  # renders the `{...}` parts of the doctor's fix texts

# Programs that run on the user's machine and not on this CPU machine (or change it), so they are only named here.
SYSTEM_TOOLS = {
    **dict.fromkeys(("export", "unset", "source", "cd", "echo", "newgrp"), "a shell builtin (newgrp: util-linux)"),
    **dict.fromkeys(("ls", "cat", "cp", "rm", "df", "free", "grep", "head", "tail", "sed", "cut", "tr", "id",
                     "hostname", "getent", "dmesg", "sudoedit", "modprobe", "reboot", "ps", "mount", "sysctl", "tee",
                     "env", "groups"),
                    "a core Linux tool (coreutils, util-linux, grep, sed, kmod, procps, systemd, glibc)"),
    "sudo": "runs the rest as root (the rest is checked as a command)",
    "usermod": "shadow's user tool, run with sudo on the GPU host",
    "apt": "Debian/Ubuntu package manager on the GPU host",
    "apt-get": "Debian/Ubuntu package manager on the GPU host",
    "update-grub": "Debian/Ubuntu boot loader tool on the GPU host",
    "amdgpu-install": "AMD's installer of the ROCm stack, on the GPU host",
    "rocminfo": "ROCm's device listing, on an AMD GPU host",
    "amd-smi": "ROCm's GPU tool, on an AMD GPU host",
    "rocm-smi": "ROCm's older GPU tool, on an AMD GPU host",
    "nvidia-smi": "NVIDIA's driver tool, on an NVIDIA GPU host",
    "docker": "the container runtime the GPU host starts containers with",
    "ss": "iproute2's socket listing, on the training host",
    "nc": "netcat, to test a port between nodes",
    "sacct": "Slurm's accounting tool, on a Slurm cluster",
    "sinfo": "Slurm's node listing, on a Slurm cluster",
    "ollama": "the Ollama server a GGUF export is served with",
    "make": "GNU make on the devtune checkout; its target must be one of the Makefile's",
}
# Python modules run with `python -m` that are installed only where the command is printed.
ABSENT_MODULES = {"bitsandbytes": "installed only on a GPU machine (the rule fires when it is there); not on this CPU box"}
# devtune's own programs: named in prose without backticks.
PROSE_PROGRAMS = ("devtune", "hf", "huggingface-cli", "llamafactory-cli")
CONTROL = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", "2>", "2>&1", "&>"}
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*|\.\.\.|.*[<{].*[>}].*)$")


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    source: str  # where devtune says it

    def __str__(self) -> str:
        return f"{' '.join(self.argv)}   [{self.source}]"


# ---- parsing ---------------------------------------------------------------------------------------------------

def split_line(line: str, source: str) -> list[Command]:
    """One shell line -> its commands (the parts of a | && ; chain), without env assignments and redirects."""
    line = re.sub(r"<([\w.-]+)>", r"{\1}", line)  # <model>: a placeholder, not a redirection
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:  # an unclosed quote: the line is not a command
        return []
    out, current, skip_next = [], [], False
    for tok in tokens + [";"]:
        if skip_next:
            skip_next = False
            continue
        if tok in REDIRECTS or re.fullmatch(r"\d?>+&?\d?", tok):
            skip_next = not tok.endswith("&1")
            continue
        if tok in CONTROL:
            if current:
                out.append(Command(tuple(current), source))
            current = []
            continue
        if not current and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tok):
            continue  # VAR=value before the program
        if tok.startswith("[") or tok.endswith("]"):  # optional parts in the docs' usage: [--json] [RUN]
            tok = tok.strip("[]")
            if not tok:
                continue
        current.append(tok)
    return out


def split_text(text: str, source: str) -> list[Command]:
    """A fix or a code block: every line is a shell line (a trailing backslash joins the next)."""
    commands = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        line = line.strip().removeprefix("$ ")
        if line and not line.startswith("#"):
            commands += split_line(line, source)
    return commands


def known_program(word: str) -> bool:
    return word in SYSTEM_TOOLS or any((env / word).exists() for env in ENVS)


def prose_commands(text: str, source: str) -> list[Command]:
    """Commands named in a sentence: `in backticks` (when it starts with a known program), or a run of words
    starting with one of devtune's own programs, up to the first plain word."""
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        words = span.split()
        if words and known_program(words[0]):
            found += split_line(span, source)
    bare = re.sub(r"`[^`\n]+`", " ", text)
    for m in re.finditer(r"(?<![\w./-])(%s) ([^()`;,:\n\u3000-\u9fff\uff00-\uffef]+)" % "|".join(map(re.escape, PROSE_PROGRAMS)), bare):
        kept, past_arguments = [m.group(1)], False
        for word in m.group(2).rstrip(". ").split():
            plain = re.fullmatch(r"[a-z][a-z'’-]*", word) and not kept[-1].startswith("-")
            if plain and past_arguments:
                break  # the sentence goes on ("devtune resume RUN submits it again")
            past_arguments = past_arguments or not plain
            kept.append(word)
        found += split_line(" ".join(kept), source)
    return found


# ---- collecting ------------------------------------------------------------------------------------------------

def rule_commands() -> list[Command]:
    from core.i18n import set_language
    from core.processes.environment import env_restored
    from core.train.failure_rules import rules

    found = []
    with env_restored("DEVTUNE_LANG"):
        for lang in ("en", "zh"):
            set_language(lang)
            for rule in rules():
                source = f"failure rule {rule.id} ({lang})"
                for command in rule.commands:
                    found += split_text(command, source)
                found += prose_commands(rule.fix, source) + prose_commands(rule.explanation, source)
    return found


def _render(node: ast.expr, names: dict) -> str | None:
    """A fix expression as text: literals, `_()` texts, + and f-strings; a `{...}` part is evaluated with the
    recorded machine's evidence where it can be, else kept as a placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _render(node.left, names), _render(node.right, names)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_" and node.args:
        return _render(node.args[0], names)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                try:
                    parts.append(str(eval(compile(ast.Expression(value.value), "<fix>", "eval"), names)))
                except Exception:
                    parts.append("{" + re.sub(r"\W+", "_", ast.unparse(value.value)).strip("_") + "}")
            else:
                parts.append(_render(value, names) or "")
        return "".join(parts)
    if isinstance(node, ast.Name) and node.id in names and isinstance(names[node.id], str):
        return names[node.id]
    if isinstance(node, ast.IfExp):
        return _render(node.body, names)
    return None


def _fix_arguments(function: ast.FunctionDef) -> list[ast.expr]:
    out = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("ok", "warn", "fail", "skip", "Judgement"):
            args = node.args[1:2] if node.func.id != "Judgement" else node.args[2:3]
            out += args + [k.value for k in node.keywords if k.arg == "fix"]
        if isinstance(node, ast.Return) and node.value is not None and function.name in FIX_BUILDERS:
            out.append(node.value)
    for node in ast.walk(function):  # both branches of `a if c else b`
        if isinstance(node, ast.IfExp) and any(node is a or node in ast.walk(a) for a in out):
            out.append(node.orelse)
    return out


FIX_BUILDERS = ("add_to_groups", "torch_install", "_setup")  # functions that return a whole fix


def doctor_commands() -> list[Command]:
    import importlib

    from core.doctor.checks import CHECK_MODULES
    from core.doctor.facts import facts
    from core.doctor.runner import replay

    found = []
    for folder in sorted(p for p in MACHINES.iterdir() if p.is_dir()):
        report, _ev = replay(folder)
        for check in report.checks:
            found += split_text(check.fix, f"doctor {check.id} on {folder.name}")
    _report, ev = replay(EVAL_MACHINE)
    for module in (*CHECK_MODULES, importlib.import_module("core.doctor.fixes")):
        path = Path(module.__file__)
        for function in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)):
            names = {**vars(module), "ev": ev, "f": facts(ev)}
            for node in ast.walk(function):  # the function's locals, as far as the evidence gives them
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        names[node.targets[0].id] = eval(compile(ast.Expression(node.value), "<fix>", "eval"), names)
                    except Exception:
                        rendered = _render(node.value, names)
                        if rendered is not None:
                            names[node.targets[0].id] = rendered
            for arg in _fix_arguments(function):
                text = _render(arg, names)
                if text:  # a program left as `{...}` is one the evidence does not give: the replays show it
                    found += [c for c in split_text(text, f"doctor {path.name}:{arg.lineno} ({function.name})")
                              if not c.argv[0].startswith("{")]
    return found


def data_commands() -> list[Command]:
    from core.i18n import catalog
    from core.i18n.catalog_keys import extract_keys

    found = []
    for key, where in extract_keys().items():
        if where.startswith("core/data/"):
            for lang, text in (("en", key), ("zh", catalog("zh").get(key, ""))):
                found += prose_commands(text, f"{where} ({lang})")
    return found


def doc_commands() -> list[Command]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(?:sh|bash)\n(.*?)^```", text, re.S | re.M):
            line = text.count("\n", 0, m.start()) + 1
            found += split_text(m.group(1), f"{page.relative_to(ROOT)}:{line}")
    return found


def serve_commands() -> list[Command]:
    """What `devtune serve` and the Playground print for a vLLM server of the real serving environment."""
    from core.serve.backends import ServeOptions, serve_env, vllm_plan
    from core.serve.servers import ServerRecord, equivalent_commands
    from core.workspace.layout import Workspace

    env = serve_env()
    if not env.has_vllm:
        return []
    plan = vllm_plan(ServeOptions(model="/ws/exports/m", served_name="m", port=8001), env, "sk-test")
    record = ServerRecord(id="m-8001", backend="vllm", model="exports/m", served_name="m", host="127.0.0.1",
                          port=8001, argv=plan.argv, env=plan.recordable_env(),
                          api_key_file=".devtune/servers/m-8001/api_key")
    cmds = equivalent_commands(Workspace(ROOT), record)
    return [c for key in ("vllm", "run") for c in split_text(cmds[key], f"devtune serve ({key})")]


def all_commands() -> dict[str, list[Command]]:
    return {"rules": rule_commands(), "doctor": doctor_commands(), "data": data_commands(), "docs": doc_commands(),
            "serve": serve_commands()}


# ---- checking --------------------------------------------------------------------------------------------------

def program_of(argv: tuple[str, ...]) -> tuple[Path | None, tuple[str, ...]]:
    """(the program in the project's environments, the rest of the command), or (None, argv)."""
    name = argv[0]
    m = re.search(r"(?:^|/)(\.venv(?:-serve)?)/bin/([^/]+)$", name)
    if m:
        return ROOT / m.group(1) / "bin" / m.group(2), argv[1:]
    if "/" not in name:
        for env in ENVS:
            if (env / name).exists():
                return env / name, argv[1:]
    return None, argv


def off_the_path(name: str) -> str | None:
    """A bare program name the person's shell does not find: it is only in .venv-serve/bin, which is not on
    PATH (the person runs devtune from .venv; `vllm serve` printed bare fails with 'command not found')."""
    if "/" in name or name in SYSTEM_TOOLS or (ENVS[0] / name).exists():
        return None
    if (ENVS[1] / name).exists():
        return f"{name}: only in .venv-serve/bin, which is not on the PATH: print the path that runs"
    return None


def missing_program(command: Command) -> str | None:
    """Why the program of the command cannot run where it is printed, or None."""
    argv = command.argv
    if argv[0] == "sudo" and len(argv) > 1:
        return missing_program(Command(argv[1:], command.source))
    if why := off_the_path(argv[0]):
        return why
    program, rest = program_of(argv)
    if program is None:
        if argv[0] not in SYSTEM_TOOLS:
            return f"{argv[0]}: not in the project's environments nor a named system tool"
        if argv[0] == "make":
            targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.M))
            args, wanted = list(argv[1:]), []
            while args:
                arg = args.pop(0)
                if arg in ("-C", "-f"):
                    args[:1] = []
                elif not arg.startswith("-") and "=" not in arg:
                    wanted.append(arg)
            if unknown := [t for t in wanted if t not in targets]:
                return f"make: no target {', '.join(unknown)} in the Makefile"
        return None
    if not program.exists():
        return f"{program.relative_to(ROOT)} does not exist"
    if program.name.startswith("python") and rest[:1] == ("-c",) and len(rest) > 1:
        try:
            compile(rest[1], "<python -c>", "exec")
        except SyntaxError as exc:
            return f"python -c: {exc}"
    return None


class HelpCache:
    """`ARGV --help` run once per argv (several commands share a program and subcommand)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, ...], tuple[int, str]] = {}
        self._events: dict[tuple[str, ...], threading.Event] = {}

    def help(self, argv: tuple[str, ...]) -> tuple[int, str]:
        with self._lock:
            event = self._events.get(argv)
            owner = event is None
            if owner:
                event = self._events[argv] = threading.Event()
        if owner:
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "NO_COLOR": "1",
                   "COLUMNS": "200", "TERM": "dumb", "DEVTUNE_LANG": "en"}
            try:
                done = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120, env=env,
                                      cwd=ROOT, stdin=subprocess.DEVNULL)
                self._runs[argv] = (done.returncode, done.stdout + done.stderr)
            except subprocess.TimeoutExpired:
                self._runs[argv] = (-1, "timed out")
            event.set()
        event.wait()
        return self._runs[argv]


def lists_subcommand(help_text: str, path: tuple[str, ...], word: str) -> bool:
    """The help lists `word` as a subcommand: in argparse's {a,b}, or first on a line of its command list
    ("  lint   check ...", "|   llamafactory-cli train -h: ...")."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", word):
        return False
    shown = re.escape(Path(path[0]).name) + "".join(r"\s+" + re.escape(p) for p in path[1:])
    listed = r"^[ |]{0,6}(?:%s\s+)?%s(?:[\s,:]|$)" % (shown, re.escape(word))
    return bool(re.search(listed, help_text, re.M) or re.search(r"\{[\w,-]*\b%s\b[\w,-]*\}" % re.escape(word), help_text))


def subcommand_candidates(command: Command) -> tuple[str, ...] | None:
    """The help the command's first word would need if it is a subcommand (run ahead, beside its parent's)."""
    program, rest = program_of(command.argv[1:] if command.argv[0] == "sudo" else command.argv)
    if program is None or program.name.startswith("python") or not rest or not re.fullmatch(r"[a-z][a-z0-9_-]*", rest[0]):
        return None
    return (str(program), rest[0])


def parse_problem(command: Command, helps: HelpCache) -> str | None:
    """Why `PROGRAM SUBCOMMAND... --help` refuses the command (a subcommand or a flag it does not know), or None."""
    argv = command.argv[1:] if command.argv[0] == "sudo" else command.argv
    program, rest = program_of(argv)
    if program is None:
        return None
    path: tuple[str, ...] = (str(program),)
    if program.name.startswith("python"):
        if rest[:1] != ("-m",) or len(rest) < 2:
            return None  # python -c CODE: its syntax is checked with the program
        if rest[1] in ABSENT_MODULES:
            return None
        path, rest = path + ("-m", rest[1]), rest[2:]
    code, text = helps.help(path)
    while code == 0 and rest and lists_subcommand(text, path, rest[0]):
        child = helps.help(path + (rest[0],))
        if child[0] != 0:
            break
        path, rest, (code, text) = path + (rest[0],), rest[1:], child
    shown = " ".join([program.name, *path[1:]])
    if code != 0:
        said = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return f"`{shown} --help` exits {code}: {said[:200]}"
    for flag in (t.split("=", 1)[0] for t in rest if t.startswith("-") and t != "--" and not PLACEHOLDER.match(t)):
        if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(flag), text):
            return f"`{shown} --help` has no {flag}"
    return None


# ---- the tests -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def commands() -> dict[str, list[Command]]:
    return all_commands()


def test_every_source_of_fix_commands_is_collected(commands):
    counts = {where: len(found) for where, found in commands.items()}
    assert all(counts.values()), counts
    programs = {c.argv[0] for found in commands.values() for c in found}
    assert {"devtune", "llamafactory-cli", "sudo"} <= programs, programs


def test_a_program_only_in_the_serving_environment_is_printed_with_its_path():
    assert missing_program(Command(("vllm", "serve", "exports/m"), "t")) is not None
    assert missing_program(Command((str(ENVS[1] / "python"), "-m", "vllm.entrypoints.openai.api_server"), "t")) is None
    assert missing_program(Command(("devtune", "serve"), "t")) is None


def test_every_fix_command_starts_a_program_that_is_there(commands):
    broken = sorted({f"{c}: {why}" for found in commands.values() for c in found if (why := missing_program(c))})
    assert not broken, "\n".join(broken)


def test_every_fix_command_parses(commands, uses_llamafactory, uses_torch):
    """`PROGRAM SUBCOMMAND... --help` for each command of a program in the project's environments."""
    helps = HelpCache()
    todo = sorted({c for found in commands.values() for c in found if program_of(c.argv)[0] or c.argv[0] == "sudo"},
                  key=str)
    ahead = sorted({argv for c in todo if (argv := subcommand_candidates(c))} |
                   {(str(program_of(c.argv)[0]),) for c in todo if program_of(c.argv)[0]})
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(helps.help, ahead))  # the slow ones (LLaMA-Factory's imports torch) side by side
        problems = list(pool.map(lambda c: parse_problem(c, helps), todo))
    broken = sorted({f"{c}: {why}" for c, why in zip(todo, problems) if why})
    assert not broken, f"{len(broken)} of {len(todo)} commands fail as printed:\n" + "\n".join(broken)


def test_the_parser_reads_a_command_the_way_a_shell_does():
    found = split_text('FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml > out.log   # note\n'
                       'sudo dmesg -T | grep -i "out of memory" && free -g\n# a comment', "t")
    assert [c.argv for c in found] == [("llamafactory-cli", "train", "configs/train.yaml"),
                                       ("sudo", "dmesg", "-T"), ("grep", "-i", "out of memory"), ("free", "-g")]
    said = prose_commands("Resume it (devtune resume RUN submits it again), or run `hf auth login`.", "t")
    assert [c.argv for c in said] == [("hf", "auth", "login"), ("devtune", "resume", "RUN")]
