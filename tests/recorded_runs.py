"""A workspace holding a run as a finished or failed LLaMA-Factory run leaves it, from the real
recorded outputs in tests/fixtures/logs and tests/fixtures/runs (trainer_log.jsonl, stdout.log, stderr.log;
a recorded run's train.yaml becomes the run's own config copy, as devtune keeps it)."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.train.runs import RunRecord, RunStatus, freeze_trainer_log, write_record

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOGS = FIXTURES / "logs"
RUNS = FIXTURES / "runs"  # whole recorded runs: lf_dpo (a DPO run), lf_sft_cpu_demo (the demo's SFT run)


def place_recorded_run(ws, name: str, fixture: str, status: RunStatus, exit_code: int | None, started: float,
                       host: str | None = None, *, ended_by_supervisor: bool = False) -> RunRecord:
    """`ended_by_supervisor`: the record also says what devtune's supervisor writes when a run ends (its
    trainer_log lines frozen in the run folder, its throughput over the whole run)."""
    src = LOGS / fixture if (LOGS / fixture).is_dir() else RUNS / fixture
    out = ws.root / "saves" / name
    out.mkdir(parents=True)
    if (src / "trainer_log.jsonl").exists():
        shutil.copy(src / "trainer_log.jsonl", out / "trainer_log.jsonl")
    d = ws.runs_dir / name
    d.mkdir(parents=True)
    for log in ("stdout.log", "stderr.log"):
        (d / log).write_bytes((src / log).read_bytes() if (src / log).exists() else b"")
    config = "configs/train.yaml"
    if (src / "train.yaml").exists():
        shutil.copy(src / "train.yaml", d / "train.yaml")
        config = ws.rel(d / "train.yaml")
    record = RunRecord(id=name, argv=["llamafactory-cli", "train", config], cwd=str(ws.root),
                       config=config, output_dir=f"saves/{name}", status=status, exit_code=exit_code,
                       started=started, ended=started + 30, note="", **({"host": host} if host else {}))
    if ended_by_supervisor:
        from core.train.throughput import run_throughput

        record.log_frozen = freeze_trainer_log(d, record)
        record.throughput = run_throughput(ws, d, record)
    write_record(d, record)
    return record
