"""The devtune workspace: a folder laid out as LLaMA-Factory users expect, plus devtune's state.

    data/                   dataset_dir: JSONL files and dataset_info.json
    configs/                train YAML, DeepSpeed JSON, merge YAML, serve settings
    saves/<run>/            LLaMA-Factory output_dir of each run
    exports/<name>/         merged models
    models/                 local base models (the demo's tiny model)
    .devtune/state.json     the wizard's state (WizardState, atomic, locked)
    .devtune/runs/<run>/    run.json, stdout.log, stderr.log, gpu.jsonl
    .devtune/servers/<id>/  server.json, stdout.log, stderr.log, api key file
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from core.errors import BadInput
from core.files.atomic import write_atomic
from core.i18n import _
from core.workspace.step_status import StepStatus  # noqa: F401  (re-exported: `from core.workspace.layout import StepStatus`)

if TYPE_CHECKING:
    from core.workspace.state import WizardState

# pydantic is imported with the state model, only when the state is loaded or saved: `devtune --help`
# and the wizard's first frame do without it (core.workspace.step_status reads the file with json alone).
_LAZY = {"WizardState": "core.workspace.state", "StepRecord": "core.workspace.state", "SCHEMA_VERSION": "core.workspace.state"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'core.workspace.layout' has no attribute {name!r}")


ENV_WORKSPACE = "DEVTUNE_WORKSPACE"


class StateError(BadInput):
    """The state file cannot be used as it is (message says why and what was done)."""


class StateFromNewerDevtune(StateError):
    """The state was written by a newer devtune: never overwritten by this one."""


class StateUnreadable(StateError):
    """The state file was damaged; it was moved aside (kept, not lost) and a fresh state starts."""


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def resolve(cls, arg: str | os.PathLike | None = None) -> "Workspace":
        """-w/--workspace wins, then $DEVTUNE_WORKSPACE, then the current folder."""
        from core.settings import peek

        chosen = arg or peek("workspace") or os.getcwd()
        return cls(Path(chosen).expanduser().resolve())

    # layout
    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def configs_dir(self) -> Path:
        return self.root / "configs"

    @property
    def saves_dir(self) -> Path:
        return self.root / "saves"

    @property
    def exports_dir(self) -> Path:
        return self.root / "exports"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def state_dir(self) -> Path:
        return self.root / ".devtune"

    @property
    def runs_dir(self) -> Path:
        return self.state_dir / "runs"

    @property
    def servers_dir(self) -> Path:
        return self.state_dir / "servers"

    @property
    def cache_dir(self) -> Path:
        """HF_HOME, XDG_CACHE_HOME, TORCH_EXTENSIONS_DIR for the processes devtune launches."""
        return self.state_dir / "cache"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def ensure(self) -> "Workspace":
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(_("workspace {path} is a file, not a folder", path=self.root))
        for d in (self.data_dir, self.configs_dir, self.saves_dir, self.exports_dir,
                  self.runs_dir, self.servers_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self

    def rel(self, path: str | os.PathLike) -> str:
        """A path as the person should read it: relative to the workspace when inside it."""
        p = Path(path)
        try:
            return str(p.resolve().relative_to(self.root))
        except ValueError:
            return str(p)

    def abs(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        return p if p.is_absolute() else self.root / p

    # state
    @contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock on the state (flock): two devtune processes never interleave writes."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "state.lock", "a") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def load_state(self) -> "WizardState":
        """The saved state, or a fresh one. A state file that cannot be read is kept aside, not lost."""
        from pydantic import ValidationError

        from core.workspace.state import SCHEMA_VERSION, WizardState

        try:
            raw = self.state_file.read_bytes()
        except FileNotFoundError:
            return WizardState()
        try:
            state = WizardState.model_validate_json(raw)
        except ValidationError as exc:
            version = _peek_version(raw)
            if version is not None and version > SCHEMA_VERSION:
                raise StateFromNewerDevtune(_(
                    "{path} was written by a newer devtune (schema {version}, this one reads {ours}); "
                    "upgrade devtune or use another workspace", path=self.state_file, version=version,
                    ours=SCHEMA_VERSION)) from exc
            kept = self.state_file.with_name(f"state.json.unreadable-{int(time.time())}")
            os.replace(self.state_file, kept)
            raise StateUnreadable(_("{path} could not be read ({error}); it was kept as {kept} and a fresh state "
                                    "started", path=self.state_file, error=exc.errors()[0]["msg"],
                                    kept=kept.name)) from exc
        if state.schema_version > SCHEMA_VERSION:
            raise StateFromNewerDevtune(_("{path} was written by a newer devtune (schema {version})",
                                          path=self.state_file, version=state.schema_version))
        return state

    def save_state(self, state: "WizardState") -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.state_file, state.model_dump_json(indent=2) + "\n")

    def update_state(self, mutate: Callable[["WizardState"], None]) -> "WizardState":
        """Read, change and write the state under the lock; returns the new state."""
        with self.locked():
            try:
                state = self.load_state()
            except StateUnreadable:
                from core.workspace.state import WizardState

                state = WizardState()  # the damaged file was kept aside by load_state
            mutate(state)
            self.save_state(state)
            return state


def _peek_version(raw: bytes) -> int | None:
    import json

    try:
        value = json.loads(raw).get("schema_version")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None
