"""Two real recorded runs of the demo's config that differ in their learning rate, placed in a workspace as devtune
leaves ended runs, each with its own YAML copy as the recording says it was trained (tests/fixtures/logs/SOURCES.md):
`lf_eval_overfit` (the cpu-demo preset with a held-out split: lr 1e-2, 80 epochs, logging_steps 5, eval_steps 50;
the eval loss is lowest at step 50 and climbs) and `lf_eval_falling` (lr 1e-3, 6 epochs, logging_steps 1,
eval_steps 3; both losses fall to the end). Used by the comparison's core, CLI, Train step and snapshot tests."""

from __future__ import annotations

import re

from core.train.runs import RunStatus, write_record
from tests.recorded_runs import RUNS, place_recorded_run

FAST = "20260101-000000-lr-1e-2"
SLOW = "20260101-010000-lr-1e-3"
EVAL_KEYS = "eval_dataset: support_eval\neval_strategy: steps\n"  # what the preset wires for a held-out split
SETTINGS = {FAST: ("lf_eval_overfit", {"learning_rate": "0.01", "num_train_epochs": "80.0", "logging_steps": "5",
                                       "eval_steps": "50"}),
            SLOW: ("lf_eval_falling", {"learning_rate": "1.0e-3", "num_train_epochs": "6.0", "logging_steps": "1",
                                       "eval_steps": "3"})}


def demo_yaml(values: dict[str, str], output_dir: str) -> str:
    """The cpu-demo preset's YAML (tests/fixtures/runs/lf_sft_cpu_demo/train.yaml) with a held-out set and
    `values` set."""
    text = (RUNS / "lf_sft_cpu_demo" / "train.yaml").read_text()
    text = text.replace("### output\n", f"### eval\n{EVAL_KEYS}eval_steps: 0\n\n### output\n")
    for key, value in {**values, "output_dir": output_dir}.items():
        text, n = re.subn(rf"^{key}: .*$", f"{key}: {value}", text, flags=re.M)
        assert n == 1, key
    return text


def place_compared_runs(ws, started: float = 1767225600.0) -> list:
    """Both runs, FAST started an hour before SLOW; returns their records (FAST first)."""
    records = []
    for i, (name, (fixture, values)) in enumerate(SETTINGS.items()):
        record = place_recorded_run(ws, name, fixture, RunStatus.FINISHED, 0, started + 3600 * i)
        d = ws.runs_dir / name
        (d / "train.yaml").write_text(demo_yaml(values, f"saves/{name}"))
        record = record.model_copy(update={"config": ws.rel(d / "train.yaml"), "ended": started + 3600 * i + 40 + i})
        write_record(d, record)
        records.append(record)
    return records
