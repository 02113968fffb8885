"""A workspace holding a run as a finished or failed LLaMA-Factory run leaves it, from the real
recorded outputs in tests/fixtures/logs (trainer_log.jsonl, stdout.log, stderr.log)."""

from __future__ import annotations

import shutil
from pathlib import Path

from core.train.runs import RunRecord, RunStatus, write_record

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"


def place_recorded_run(ws, name: str, fixture: str, status: RunStatus, exit_code: int, started: float,
                       host: str | None = None) -> RunRecord:
    src = LOGS / fixture
    out = ws.root / "saves" / name
    out.mkdir(parents=True)
    if (src / "trainer_log.jsonl").exists():
        shutil.copy(src / "trainer_log.jsonl", out / "trainer_log.jsonl")
    d = ws.runs_dir / name
    d.mkdir(parents=True)
    for log in ("stdout.log", "stderr.log"):
        (d / log).write_bytes((src / log).read_bytes() if (src / log).exists() else b"")
    record = RunRecord(id=name, argv=["llamafactory-cli", "train", "configs/train.yaml"], cwd=str(ws.root),
                       config="configs/train.yaml", output_dir=f"saves/{name}", status=status, exit_code=exit_code,
                       started=started, ended=started + 30, note="", **({"host": host} if host else {}))
    write_record(d, record)
    return record
