"""The evidence the doctor judges: everything gathered from one machine, as plain data.

A whole machine can be written to a folder and replayed from it, which is how the tests judge an
MI250, an MI300X or an H100 box on a CPU-only machine, and how a person can send their machine's
evidence with a support ticket (`devtune doctor --record DIR`, `devtune doctor --replay DIR`).

Folder layout:

    machine.json            host, env, devices, paths, files, which, storage, plan, and for each
                            command its argv, exit code, timed_out, missing, error
    commands/<name>.out     a command's stdout, byte for byte as the tool printed it
    commands/<name>.err     its stderr (when not empty)

`machine.json` may say `"extends": "<sibling folder>"`: the folder is then that machine with the
keys given here replaced (dicts merged key by key; `null` removes a key) and the command outputs
present here replacing the base's. A broken variant (not in the render group, a CUDA wheel on an
AMD box, ...) is a few lines, not a copy.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.files.atomic import write_new
from core.i18n import _

MACHINE_FILE = "machine.json"
COMMANDS_DIR = "commands"
SECTIONS = ("host", "env", "devices", "paths", "files", "which", "storage", "plan")


@dataclass
class CommandResult:
    """One tool run: what was run and what it printed. `missing`: the tool is not installed."""

    argv: list[str] = field(default_factory=list)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    missing: bool = False
    error: str = ""  # could not be started (permission, ...)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.missing and not self.error

    @property
    def ran(self) -> bool:
        return not self.missing and not self.error

    def text(self) -> str:
        return self.stdout + ("\n" + self.stderr if self.stderr else "")

    def meta(self) -> dict:
        d = asdict(self)
        d.pop("stdout")
        d.pop("stderr")
        d.pop("seconds")
        d["argv"] = [("<python probe script>" if "\n" in a else a) for a in self.argv]
        return d

    def command_line(self) -> str:
        return " ".join(a if "\n" not in a else "<script>" for a in self.argv)

    def outcome(self) -> str:
        """How the run ended, in words: "exit 255", "timed out", "not found"."""
        if self.missing:
            return _("not found")
        if self.timed_out:
            return _("timed out")
        if self.error:
            return self.error
        return _("exit {code}", code=self.returncode)

    def describe(self) -> str:
        """The command and how it ended: "`amd-smi static --json` exit 255"."""
        if self.missing:
            return f"{self.argv[0] if self.argv else '?'}: {self.outcome()}"
        return f"`{self.command_line()}` {self.outcome()}"


@dataclass
class Evidence:
    """Everything the probes saw. Each section is plain JSON-able data."""

    host: dict[str, Any] = field(default_factory=dict)  # user, uid, groups, cpu_count, python, ...
    env: dict[str, str] = field(default_factory=dict)  # the relevant variables (secrets redacted)
    devices: dict[str, Any] = field(default_factory=dict)  # /dev/kfd, /dev/dri/renderD*, /dev/nvidia*
    paths: dict[str, Any] = field(default_factory=dict)  # facts about folders (exists, listing)
    files: dict[str, str | None] = field(default_factory=dict)  # path -> content (None: absent)
    which: dict[str, str | None] = field(default_factory=dict)  # tool -> path (None: not found)
    storage: dict[str, Any] = field(default_factory=dict)  # path -> {total, free} bytes
    plan: dict[str, Any] = field(default_factory=dict)  # the planned model, if any
    commands: dict[str, CommandResult] = field(default_factory=dict)
    probe_state: dict[str, str] = field(default_factory=dict)  # probe -> done | timeout | error
    revision: int = 0  # bumped on each update (facts are cached per revision)

    def command(self, name: str) -> CommandResult:
        return self.commands.get(name) or CommandResult(missing=True)

    def update(self, part: dict[str, Any]) -> None:
        """Merge one probe's result: {"files": {...}} or {"commands": {"rocminfo": CommandResult}}."""
        for key, value in part.items():
            if key == "commands":
                self.commands.update(value)
            elif key == "plan":  # one probe owns it: a re-run replaces it
                self.plan = dict(value)
            elif key in SECTIONS:
                getattr(self, key).update(value)
            else:
                raise KeyError(f"unknown evidence section {key!r}")
        self.revision += 1

    # folder form
    def save(self, folder: str | Path, *, force: bool = False) -> Path:
        folder = Path(folder)
        machine = {key: getattr(self, key) for key in SECTIONS}
        machine["commands"] = {name: r.meta() for name, r in sorted(self.commands.items())}
        write_new(folder / MACHINE_FILE, json.dumps(machine, indent=2, sort_keys=True) + "\n", force=force)
        for name, result in self.commands.items():
            if result.stdout:
                write_new(folder / COMMANDS_DIR / f"{name}.out", result.stdout, force=force)
            if result.stderr:
                write_new(folder / COMMANDS_DIR / f"{name}.err", result.stderr, force=force)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "Evidence":
        folder = Path(folder)
        return _from_raw(_load_raw(folder, seen=()))


def _load_raw(folder: Path, seen: tuple[Path, ...]) -> dict:
    folder = folder.resolve()
    if folder in seen:
        raise ValueError(_("{path}: 'extends' loops back on itself", path=folder))
    try:
        machine = json.loads((folder / MACHINE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(_("{path} has no {file}: not a recorded machine", path=folder,
                                  file=MACHINE_FILE)) from None
    outputs: dict[str, dict[str, str]] = {}
    cmd_dir = folder / COMMANDS_DIR
    if cmd_dir.is_dir():
        for path in sorted(cmd_dir.iterdir()):
            stream = {".out": "stdout", ".err": "stderr"}.get(path.suffix)
            if stream:
                outputs.setdefault(path.stem, {})[stream] = path.read_text(encoding="utf-8")
    base_name = machine.pop("extends", None)
    if base_name:
        base = _load_raw(folder.parent / base_name, seen + (folder,))
        merged = _merge(base["machine"], machine)
        merged_outputs = dict(base["outputs"])
        for name, streams in outputs.items():
            merged_outputs[name] = streams  # a variant's output replaces both streams
        for name, meta in machine.get("commands", {}).items():
            if meta is None:
                merged_outputs.pop(name, None)
        return {"machine": merged, "outputs": merged_outputs}
    return {"machine": machine, "outputs": outputs}


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = _merge(base.get(key), value)
        return out
    return over


def _from_raw(raw: dict) -> Evidence:
    machine, outputs = raw["machine"], raw["outputs"]
    ev = Evidence(**{key: dict(machine.get(key) or {}) for key in SECTIONS})
    for name, meta in (machine.get("commands") or {}).items():
        streams = outputs.get(name, {})
        ev.commands[name] = CommandResult(
            argv=list(meta.get("argv") or []),
            returncode=meta.get("returncode"),
            stdout=streams.get("stdout", ""),
            stderr=streams.get("stderr", ""),
            timed_out=bool(meta.get("timed_out")),
            missing=bool(meta.get("missing")),
            error=meta.get("error") or "",
        )
    return ev
