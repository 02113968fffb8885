"""What a person pasted beside the error: the shell commands in a log, where they ran, and what they showed.

A log sent for help is rarely the program's output alone. Between its lines sit shell prompts and the short
commands people run to show their set-up; those are facts about this run that no error message carries:

    (llama) PS C:\\Users\\esmail> dir data                      # PowerShell: the working directory
    [user@login01 Qwen-VL]$ squeue -u user                      # the nodes the jobs ran on
    user@host:~/LLaMA-Factory$ cat examples/merge_lora/x.yaml   # the config as it was
    $ mount | grep /mnt/pool                                    # the file system under the model

`shell_commands` splits a log into those commands (prompt, working directory, host, command, output lines);
the helpers below read the common ones: files shown by `cat`/`head`/`grep` (parsed as YAML or JSON when they are),
paths a listing showed to exist or not to exist, mounts, host lookups. They only read; what the facts mean for a
failure is decided in core.train.diagnosis_pasted.
"""

from __future__ import annotations

import json
import ntpath
import posixpath
import re
import shlex
from dataclasses import dataclass, field

ENV = r"(?:\([\w.\-/]+\)\s+)?"  # a conda or venv name before the prompt
PROMPTS = (
    re.compile(ENV + r"PS (?P<cwd>[A-Za-z]:\\[^>]*)>\s?(?P<cmd>.*)$"),  # PowerShell
    re.compile(ENV + r"(?P<cwd>[A-Za-z]:\\[^>]*|[A-Za-z]:)>(?P<cmd>.*)$"),  # cmd.exe
    re.compile(ENV + r"\[(?P<user>[\w.\-]+)@(?P<host>[\w.\-]+) (?P<base>[^\]]+)\][$#] ?(?P<cmd>.*)$"),  # RHEL bash
    re.compile(ENV + r"(?P<user>[\w.\-]+)@(?P<host>[\w.\-]+):(?P<cwd>[~/][^$#]*?)[$#] ?(?P<cmd>.*)$"),  # Debian bash
    re.compile(ENV + r"(?P<user>[\w.\-]+)@(?P<host>[\w.\-]+) (?P<base>[~\w.\-/]+) [%#] (?P<cmd>.*)$"),  # macOS zsh
    re.compile(ENV + r"\$ (?P<cmd>.*)$"),  # a bare prompt (not `#`: a comment in a pasted file)
    re.compile(ENV + r"(?:❯|➜ +(?P<base>[\w.\-~/]+)(?: git:\([^)]*\))?(?: ✗)?) (?P<cmd>.*)$"),  # starship, oh-my-zsh
)
LOG_LINE = re.compile(r"^\s*(?:\[?\d{2,4}[-/]\d\d[-/]\d\d|\[(?:INFO|WARNING|ERROR|DEBUG)|(?:INFO|WARNING|ERROR)[ :|])")


@dataclass
class ShellCommand:
    line: int  # the prompt's line number in the log (1-based)
    command: str
    cwd: str | None = None  # as the prompt printed it, or as `cd` set it
    host: str | None = None
    output: list[str] = field(default_factory=list)
    user: str | None = None

    @property
    def argv(self) -> list[str]:
        posix = not (self.cwd and windows(self.cwd)) and "\\" not in self.command
        try:
            parts = shlex.split(self.command, posix=posix)
            return parts if posix else [p.strip("\"'") for p in parts]
        except ValueError:
            return self.command.split()


def shell_commands(text: str | list[tuple[int, str]]) -> list[ShellCommand]:
    """Every prompt line with the lines printed after it, up to the next prompt (`text`: a log, or its numbered
    lines)."""
    found: list[ShellCommand] = []
    cwd: str | None = None
    numbered = list(enumerate(text.splitlines(), 1)) if isinstance(text, str) else text
    for number, raw in numbered:
        line = raw.rstrip("\r")
        prompt = _prompt(line)
        if prompt is None:
            if found and len(found[-1].output) < 400:
                found[-1].output.append(line)
            continue
        command, seen_cwd, host, user = prompt
        cwd = seen_cwd or cwd
        found.append(ShellCommand(number, command.strip(), cwd, host, user=user))
        cwd = _after_cd(command.strip(), cwd)
    return found


def _prompt(line: str) -> tuple[str, str | None, str | None, str | None] | None:
    if LOG_LINE.match(line):
        return None
    for pattern in PROMPTS:
        m = pattern.match(line)
        if m is None:
            continue
        groups = m.groupdict()
        command = groups["cmd"]
        if pattern is PROMPTS[1] and (not command or command.startswith(">")):
            return None  # a `>` in text ("C:\\x>" with nothing typed is a prompt only with a command after it)
        cwd = groups.get("cwd") or groups.get("base")
        return command, cwd, groups.get("host"), groups.get("user")
    return None


def _after_cd(command: str, cwd: str | None) -> str | None:
    first = command.split("&&")[0].strip()
    m = re.match(r"cd(?:\s+/d)?\s+(\S+)$", first)
    if m is None or cwd is None:
        return cwd
    return join(cwd, m.group(1).strip("\"'"))


def windows(path: str) -> bool:
    return bool(re.match(r"[A-Za-z]:\\|\\\\|[A-Za-z]:$", path)) or ("\\" in path and "/" not in path)


def join(cwd: str, path: str) -> str:
    """`path` as seen from `cwd`, in the shell's own syntax (Windows or POSIX)."""
    if windows(cwd) or windows(path):
        return ntpath.normpath(ntpath.join(cwd, path.replace("/", "\\")))
    if cwd.startswith("~") and not path.startswith(("/", "~")):
        return posixpath.normpath(posixpath.join(cwd, path))
    return posixpath.normpath(posixpath.join(cwd, path))


def absolute(path: str) -> bool:
    return path.startswith(("/", "~", "\\\\")) or bool(re.match(r"[A-Za-z]:[\\/]", path))


@dataclass
class ShownFile:
    path: str  # as the command named it, joined to the working directory when known
    text: str
    partial: bool  # a grep, head or tail: only some lines


READERS = {"cat": False, "type": False, "Get-Content": False, "head": True, "tail": True, "grep": True}


def shown_files(commands: list[ShellCommand]) -> list[ShownFile]:
    """Files whose text a command printed: `cat F`, `head F`, `grep PATTERN F` (one file each)."""
    shown = []
    for cmd in commands:
        argv = cmd.argv
        if not argv or argv[0] not in READERS or "|" in argv:
            continue
        operands = [a for a in argv[1:] if not a.startswith("-") and not a.isdigit()]  # `head -c 240 F`
        if argv[0] == "grep" and operands:
            operands = operands[1:]  # the pattern
        if len(operands) != 1 or not cmd.output:
            continue
        path = operands[0]
        full = join(cmd.cwd, path) if cmd.cwd and not absolute(path) else path
        lines = [re.sub(r"^\d+[:-]", "", t) if argv[0] == "grep" and "-n" in " ".join(argv) else t
                 for t in cmd.output]
        shown.append(ShownFile(full, "\n".join(lines).strip("\n"), READERS[argv[0]]))
    return shown


def parsed(file: ShownFile) -> dict | None:
    """A shown YAML or JSON file as a mapping (a grep's `key: value` lines too); None when it is neither."""
    text = file.text
    if file.path.endswith(".json") or text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    if re.search(r"\.(ya?ml|cfg|conf)$", file.path) or re.search(r"^[A-Za-z_][\w.]*:\s", text, re.M):
        import yaml  # deferred: only logs with a pasted YAML need it

        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = {k: v.strip() for k, v in re.findall(r"^([A-Za-z_][\w.]*):[ \t]*(.*)$", text, re.M)}
        if isinstance(value, dict):
            return value
    assigned = dict(re.findall(r"^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(\S*)", text, re.M))
    return assigned or None


MISSING = (
    re.compile(r"cannot access '([^']+)': No such file or directory"),
    re.compile(r"Cannot find path '([^']+)' because it does not exist"),
    re.compile(r"(?:No such file or directory|File Not Found)\W+'?([^'\s]+)'?$"),
)


def listed_paths(commands: list[ShellCommand]) -> tuple[set[str], set[str]]:
    """Paths a listing showed to exist, and paths a command said do not exist (both with its working directory)."""
    exist: set[str] = set()
    missing: set[str] = set()
    for cmd in commands:
        argv = cmd.argv
        if not argv or argv[0] not in ("ls", "dir", "Get-ChildItem", "gci", "stat", "test", "ll"):
            continue
        out = "\n".join(cmd.output)
        said_missing = {m for pattern in MISSING for m in pattern.findall(out)}
        for path in said_missing:
            missing.add(join(cmd.cwd, path) if cmd.cwd and not absolute(path) else path)
        if said_missing or not out.strip() or re.search(r"(?i)not found|no such file|cannot find", out):
            continue
        for operand in (a for a in argv[1:] if not a.startswith(("-", "/b", "/B"))):
            exist.add(join(cmd.cwd, operand) if cmd.cwd and not absolute(operand) else operand)
        for directory in re.findall(r"^\s*Directory: (.+?)\s*$", out, re.M):  # PowerShell's listing header
            for name in re.findall(r"^[-da][-a-z]{4,5}\s+\S+\s+\S+(?:\s+[AP]M)?\s+(?:\d+\s+)?(\S+)\s*$", out, re.M):
                exist.add(ntpath.join(directory, name))
    return exist, missing


LONG = re.compile(r"^[-dlcbps][rwxsStT-]{9}[@+.]?\s+\d+\s+\S+\s+\S+\s+[\d.,]+[KMGT]?\s+\w{3}\s+\d+\s+[\d:]+\s+(.+?)"
                  r"(?: -> .*)?$")


def listings(commands: list[ShellCommand]) -> dict[str, list[str]]:
    """What `ls [DIR]` showed in a folder: folder (joined to the working directory) -> names in it."""
    found: dict[str, list[str]] = {}
    for cmd in commands:
        argv = cmd.argv
        if not argv or argv[0] not in ("ls", "ll") or "|" in argv:
            continue
        operands = [a for a in argv[1:] if not a.startswith("-")]
        if len(operands) > 1 or not cmd.output or any(re.search(r"(?i)no such file|cannot access", t)
                                                      for t in cmd.output):
            continue
        folder = operands[0] if operands else (cmd.cwd or ".")
        if operands and cmd.cwd and not absolute(folder):
            folder = join(cmd.cwd, folder)
        lines = [t for t in cmd.output if t.strip() and not t.startswith("total ")]
        long = [LONG.match(t) for t in lines]
        if any(long):
            names = [m.group(1).strip() for m in long if m]
        else:
            names = [n for t in lines for n in t.split()]
        if names and not (len(names) == 1 and operands and names[0] in (operands[0], operands[0].rstrip("/"))):
            found[folder.rstrip("/") or "/"] = names
    return found


MODE = re.compile(r"^([dl-])([r-][w-][xsS-])([r-][w-][xsS-])([r-][w-][xtT-])[@+.]?\s+\d+\s+(\S+)\s+(\S+)\s+.*?"
                  r"\s(/\S*)$")


def modes(commands: list[ShellCommand]) -> list[tuple[str, str, str, str, str | None]]:
    """(path, mode, owner, group, the prompt's user) of each absolute path an `ls -l`/`ls -ld` line showed."""
    found = []
    for cmd in commands:
        for line in cmd.output:
            m = MODE.match(line.strip())
            if m:
                found.append((m.group(7), "".join(m.group(1, 2, 3, 4)), m.group(5), m.group(6), cmd.user))
    return found


UNIT = {"": 1, "B": 1 / 2**30, "K": 1 / 2**20, "M": 1 / 2**10, "G": 1, "T": 2**10, "P": 2**20}


def gib(size: str, default_unit: str = "G") -> float | None:
    """'65G', '1.5T', '62Gi', '900M' as GiB (a bare number in `default_unit`)."""
    m = re.fullmatch(r"([\d.]+)\s*([BKMGTP]?)i?B?", size.strip(), re.I)
    if m is None:
        return None
    return float(m.group(1)) * UNIT[(m.group(2) or default_unit).upper()]


def host_memory(commands: list[ShellCommand]) -> tuple[float, float] | None:
    """(RAM, swap) in GiB from `free -g`/`-m`/`-h` output."""
    for cmd in commands:
        if not cmd.argv or cmd.argv[0] != "free":
            continue
        unit = "M" if "-m" in cmd.argv else "K" if len(cmd.argv) == 1 or "-k" in cmd.argv else "G"
        mem = next((re.split(r"\s+", t.strip()) for t in cmd.output if t.startswith("Mem:")), None)
        swap = next((re.split(r"\s+", t.strip()) for t in cmd.output if t.startswith("Swap:")), None)
        if mem and len(mem) > 1:
            total = gib(mem[1], unit)
            swapped = gib(swap[1], unit) if swap and len(swap) > 1 else 0.0
            if total is not None:
                return total, swapped or 0.0
    return None


def disk_usage(commands: list[ShellCommand]) -> dict[str, float]:
    """{path: GiB} from `du -sh PATH` output."""
    found = {}
    for cmd in commands:
        if not cmd.argv or cmd.argv[0] != "du":
            continue
        for line in cmd.output:
            m = re.match(r"^([\d.]+[KMGTP]?)\s+(\S+)$", line.strip())
            if m and gib(m.group(1)) is not None:
                found[m.group(2).rstrip("/")] = gib(m.group(1))
    return found


def mounts(commands: list[ShellCommand]) -> list[tuple[str, str, str]]:
    """(mount point, file-system type, options) from `mount`, `df -T` or `findmnt` output."""
    found = []
    for cmd in commands:
        for line in cmd.output:
            m = re.match(r"^(\S+) on (\S+) type (\S+) \(([^)]*)\)", line)  # mount
            if m:
                found.append((m.group(2), m.group(3), m.group(4)))
                continue
            if cmd.argv[:2] == ["df", "-T"] or (cmd.argv and cmd.argv[0] == "df" and "T" in "".join(cmd.argv[1:2])):
                d = re.match(r"^(\S+)\s+(\S+)\s+\d+\s+\d+\s+\d+\s+\d+%\s+(\S+)$", line)
                if d:
                    found.append((d.group(3), d.group(2), ""))
    return found


def unresolved_hosts(commands: list[ShellCommand]) -> list[str]:
    """Host names a lookup in the log did not find: `getent hosts X` printing nothing (or exit 2), `ping X`'s
    "Name or service not known", `nslookup`'s NXDOMAIN, `host`'s "not found"."""
    found = []
    for cmd in commands:
        argv = cmd.argv
        out = "\n".join(cmd.output)
        if argv[:2] == ["getent", "hosts"] and len(argv) > 2:
            name = argv[2].rstrip(";")
            if not re.search(r"^\d[\d.:a-f]*\s+\S*" + re.escape(name), out, re.M):
                found.append(name)
        for name in re.findall(r"(?:ping|ssh|curl): (?:Could not resolve host: )?([\w.\-]+): (?:Name or service not "
                               r"known|Temporary failure in name resolution|nodename nor servname)", out):
            found.append(name)
        for name in re.findall(r"\*\* server can't find ([\w.\-]+): NXDOMAIN|Host ([\w.\-]+) not found", out):
            found.append(next(n for n in name if n))
    return list(dict.fromkeys(found))
