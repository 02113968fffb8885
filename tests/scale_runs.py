"""Helpers for the tests that train the tiny model across processes and nodes through `devtune train`
(tests/e2e/test_train_zero3.py on one machine, tests/e2e/test_slurm.py on the test Slurm cluster)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from tests.core.config_workspace import register_dataset

ROWS = [{"instruction": f"Question number {i} about order {i * 7}?", "input": "",
         "output": f"Answer {i}: order {i * 7} ships in {i % 5 + 1} days."} for i in range(24)]


def scale_workspace(workspace, tiny_model, devtune_cli, *init_args: str, env: dict | None = None,
                    epochs: int = 60, save_steps: int = 10) -> None:
    """The tiny model and a registered dataset, and `config init --preset cpu-demo INIT_ARGS` with a long run
    (the tests stop it) that saves a checkpoint every `save_steps` steps."""
    shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    register_dataset(workspace, "support", ROWS)
    out = devtune_cli("-w", str(workspace.root), "config", "init", "--preset", "cpu-demo", *init_args,
                      env=env or {})
    assert out.returncode == 0, out.stderr
    cfg = workspace.configs_dir / "train.yaml"
    text = re.sub(r"^num_train_epochs: .*$", f"num_train_epochs: {epochs}.0", cfg.read_text(), flags=re.M)
    cfg.write_text(re.sub(r"^save_steps: .*$", f"save_steps: {save_steps}", text, flags=re.M))


def newest_run(devtune_cli, workspace, env: dict | None = None) -> dict:
    out = devtune_cli("-w", str(workspace.root), "runs", "--json", env=env or {})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"][0]


def steps_logged(workspace, run_id: str) -> list[int]:
    """The steps this run's own trainer_log.jsonl lines report (core.train.runs keeps a resume's apart)."""
    from core.train.runs import read_record, run_dir, trainer_log_source

    directory = run_dir(workspace, run_id)
    path, start = trainer_log_source(directory, read_record(directory))
    try:
        data = path.read_bytes()[start:]
    except OSError:
        return []
    return [json.loads(line)["current_steps"] for line in data.decode().splitlines() if line.startswith("{")]


def wait_for_step(workspace, run_id: str, step: int, timeout: float = 300) -> int:
    from core.train.runs import refresh, run_dir

    deadline = time.monotonic() + timeout
    while True:
        steps = steps_logged(workspace, run_id)
        if steps and steps[-1] >= step:
            return steps[-1]
        record = refresh(run_dir(workspace, run_id))
        assert record.active, (f"run ended ({record.status}, {record.note}) before step {step}:\n"
                               + (run_dir(workspace, run_id) / "stderr.log").read_text(errors="replace")[-3000:])
        assert time.monotonic() < deadline, f"no step {step} after {timeout} s"
        time.sleep(0.5)


def wait_ended(workspace, run_id: str, timeout: float = 300):
    from core.train.runs import refresh, run_dir

    deadline = time.monotonic() + timeout
    while (record := refresh(run_dir(workspace, run_id))).active:
        assert time.monotonic() < deadline, f"run {run_id} still {record.status} after {timeout} s"
        time.sleep(0.5)
    return record


def checkpoints(folder: Path) -> list[int]:
    return sorted(int(p.name[11:]) for p in folder.glob("checkpoint-*") if p.name[11:].isdigit())
