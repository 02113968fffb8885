"""Experiment trackers a run reports to: LLaMA-Factory's (transformers') own `report_to`, each in the mode that needs
no account, with its files in the workspace and the command that opens or syncs them.

    report_to: tensorboard,mlflow      (the YAML; `devtune config init --report-to tensorboard,mlflow`)

| tracker     | mode without an account                                      | opened or synced with |
|-------------|--------------------------------------------------------------|-----------------------|
| tensorboard | event files in trackers/tensorboard/<run id>/                | tensorboard --logdir  |
| mlflow      | a SQLite store, trackers/mlflow.db (experiment "devtune")    | mlflow ui             |
| swanlab     | SwanLab's local mode, trackers/swanlab/ (LLaMA-Factory's own use_swanlab) | swanlab watch |
| wandb       | W&B offline, trackers/wandb/                                 | wandb sync            |

transformers reads where to write from the environment (TENSORBOARD_LOGGING_DIR, MLFLOW_TRACKING_URI, WANDB_MODE...),
so `launch_env` gives each run its own; a resumed run keeps the environment it was started with, so it goes on
writing into the same place. tensorboard and mlflow are installed with the training environment (the `trackers`
extra); swanlab and wandb are chosen by the person, and the config check says when they are not installed.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

from core.i18n import _

TRACKERS_DIR = "trackers"


@dataclass(frozen=True)
class Tracker:
    id: str  # report_to's value (swanlab: LLaMA-Factory's use_swanlab instead)
    module: str  # what must import in the training environment
    package: str  # what to install when it does not
    installed_by_devtune: bool

    def where(self) -> str:
        """Where its files go, relative to the workspace."""
        return {"tensorboard": f"{TRACKERS_DIR}/tensorboard/", "mlflow": f"{TRACKERS_DIR}/mlflow.db",
                "swanlab": f"{TRACKERS_DIR}/swanlab/", "wandb": f"{TRACKERS_DIR}/wandb/"}[self.id]

    def open_command(self) -> str:
        """The command, run in the workspace, that opens (or syncs) what the runs wrote."""
        return {"tensorboard": f"tensorboard --logdir {TRACKERS_DIR}/tensorboard",
                "mlflow": f"mlflow ui --backend-store-uri sqlite:///{TRACKERS_DIR}/mlflow.db",
                "swanlab": f"swanlab watch {TRACKERS_DIR}/swanlab",
                "wandb": f"wandb sync {TRACKERS_DIR}/wandb/wandb/offline-run-*"}[self.id]

    def mode(self) -> str:
        return {"tensorboard": _("event files, no account"), "mlflow": _("a local SQLite store, no server"),
                "swanlab": _("SwanLab's local mode, no account"),
                "wandb": _("W&B offline mode: synced later, if ever")}[self.id]


TRACKERS: dict[str, Tracker] = {t.id: t for t in (
    Tracker("tensorboard", "tensorboard", "tensorboard", True),
    Tracker("mlflow", "mlflow", "mlflow", True),
    Tracker("swanlab", "swanlab", "swanlab", False),
    Tracker("wandb", "wandb", "wandb", False),
)}
NO_TRACKER = ("none", "")


class UnknownTracker(ValueError):
    pass


def parse_report_to(value) -> list[str]:
    """'tensorboard,mlflow', ['tensorboard'], 'none' or None -> the trackers named, in order, each once.
    Raises UnknownTracker naming what is not one (LLaMA-Factory's `all` is refused: it reports to whatever
    happens to be installed)."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out: list[str] = []
    for item in (str(i).strip().lower() for i in items):
        if item in NO_TRACKER:
            continue
        if item not in TRACKERS:
            raise UnknownTracker(_("unknown tracker {name}: choose from {known} (or none)", name=item,
                                   known=", ".join(TRACKERS)))
        if item not in out:
            out.append(item)
    return out


def report_to_value(trackers: list[str]) -> str:
    """What the YAML's report_to says: 'none', or the transformers trackers joined by commas (swanlab is LLaMA-
    Factory's use_swanlab, never in report_to: its parser removes it there)."""
    named = [t for t in trackers if t != "swanlab"]
    return ",".join(named) if named else "none"


def yaml_keys(trackers: list[str]) -> dict:
    """The LLaMA-Factory keys besides report_to: SwanLab's local mode."""
    if "swanlab" not in trackers:
        return {}
    return {"use_swanlab": True, "swanlab_mode": "local", "swanlab_logdir": f"{TRACKERS_DIR}/swanlab",
            "swanlab_project": "devtune"}


def chosen(report_to, extra: dict | None = None) -> list[str]:
    """The trackers a spec reports to (report_to, plus swanlab when use_swanlab is set); unknown names are left out
    here (the config check names them)."""
    try:
        out = parse_report_to(report_to)
    except UnknownTracker:
        out = [t for t in str(report_to).split(",") if t.strip() in TRACKERS]
    if (extra or {}).get("use_swanlab") and "swanlab" not in out:
        out.append("swanlab")
    return out


def launch_env(root, trackers: list[str], run_id: str) -> dict[str, str]:
    """The environment that puts each tracker's files in the workspace (root: its absolute folder), for this run."""
    base = root / TRACKERS_DIR
    env: dict[str, str] = {}
    if "tensorboard" in trackers:
        env["TENSORBOARD_LOGGING_DIR"] = str(base / "tensorboard" / run_id)
    if "mlflow" in trackers:
        env["MLFLOW_TRACKING_URI"] = f"sqlite:///{base / 'mlflow.db'}"
        env["MLFLOW_EXPERIMENT_NAME"] = "devtune"
        env["MLFLOW_TAGS"] = json.dumps({"devtune.run": run_id})
    if "wandb" in trackers:
        env.update(WANDB_MODE="offline", WANDB_DIR=str(base / "wandb"), WANDB_PROJECT="devtune", WANDB_NAME=run_id)
    if "swanlab" in trackers:
        env["SWANLAB_MODE"] = "local"
    return env


def prepare(root, trackers: list[str]) -> None:
    """The folders the trackers write into (W&B and the SQLite store do not create their parent)."""
    for tracker in trackers:
        where = root / TRACKERS[tracker].where()
        (where if where.suffix == "" else where.parent).mkdir(parents=True, exist_ok=True)


def missing(trackers: list[str]) -> list[Tracker]:
    """The chosen trackers whose library does not import here (the training environment is devtune's own)."""
    return [TRACKERS[t] for t in trackers if importlib.util.find_spec(TRACKERS[t].module) is None]


def rule_trackers(spec, ctx) -> list:
    """The config check (core.config.rules): an unknown tracker, one not installed here, and where each writes."""
    import sys
    from pathlib import Path

    from core.config.rule_context import ConfigFinding

    out = []
    trackers = chosen(spec.report_to, spec.extra)
    others = [t.strip() for t in str(spec.report_to or "").split(",") if t.strip() and t.strip().lower() not in
              (*TRACKERS, *NO_TRACKER)]
    if others:
        # transformers knows more (comet_ml, clearml, neptune, trackio, all...): passed on as they are
        out.append(ConfigFinding("warning", "trackers.unmanaged", _(
            "report_to names {names}: devtune sets up only {known} (local or offline, files in trackers/); the "
            "others report with their own accounts and settings, or stop the run if they are not installed",
            names=", ".join(others), known=", ".join(TRACKERS)), "report_to"))
    pip = Path(sys.executable).parent / "pip"
    absent = missing(trackers)
    for tracker in absent:
        out.append(ConfigFinding("error", "trackers.missing", _(
            "report_to names {name}, but {module} is not installed in the training environment: the run would stop "
            "before its first step", name=tracker.id, module=tracker.module), "report_to",
            _("install it: {command}; or report to tensorboard or mlflow, which devtune installs",
              command=f"{pip} install {tracker.package}")))
    for tracker in (TRACKERS[t] for t in trackers if TRACKERS[t] not in absent):
        out.append(ConfigFinding("info", "trackers.where", _(
            "{name}: {mode}, in {where}; open it from the workspace: {command}", name=tracker.id, mode=tracker.mode(),
            where=tracker.where(), command=tracker.open_command()), "report_to"))
    return out
