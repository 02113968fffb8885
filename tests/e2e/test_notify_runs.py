"""Word of real runs (issue 33): a CPU training run of the tiny model that finishes, and one that fails, each send
their event from the run's supervisor (no devtune open) to a real HTTP receiver on 127.0.0.1; the failed one
carries its diagnosis's cause and fix."""

import sys
import time
from pathlib import Path

import yaml

from core.notify.destinations import Target, add_target
from core.train.failures import diagnose_record
from core.train.runs import RunStatus, read_record, refresh, run_dir, start_run
from tests.notify_receiver import Receiver

LF = str(Path(sys.executable).parent / "llamafactory-cli")
ROWS = [{"instruction": f"问题 {i}：如何办理业务 {i}？", "input": "", "output": f"请在App里点击业务{i}并按提示操作。"}
        for i in range(8)]
ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def ended(ws, run_id: str, timeout: float = 600):
    deadline = time.monotonic() + timeout
    while (record := refresh(run_dir(ws, run_id))).active:
        assert time.monotonic() < deadline, f"run {run_id} still {record.status} after {timeout} s"
        time.sleep(0.5)
    return record


def arrived(rx: Receiver, kind: str, timeout: float = 60) -> dict:
    """The supervisor sends after it writes run.json: wait for the request itself."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [r.body for r in rx.received if isinstance(r.body, dict) and r.body.get("kind") == kind]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no {kind} event reached the receiver: {[r.body for r in rx.received]}")


def test_a_finished_and_a_failed_run_reach_a_loopback_receiver(long_sft_workspace):
    ws = long_sft_workspace(ROWS, output_dir="saves/ok", save_steps=100, max_steps=3)
    cfg = yaml.safe_load((ws.configs_dir / "train.yaml").read_text())
    (ws.configs_dir / "broken.yaml").write_text(yaml.safe_dump({**cfg, "dataset": "not_registered",
                                                                "output_dir": "saves/bad"}))
    with Receiver() as rx:
        add_target(ws, Target(name="team", format="json", url=f"{rx.url}/hook/b0c7a1f2-9d4e-4f53-8a61-7e2d9c1b5f30"))
        good = start_run(ws, [LF, "train", "configs/train.yaml"], env=ENV, label="ok", config="configs/train.yaml",
                         output_dir="saves/ok")
        bad = start_run(ws, [LF, "train", "configs/broken.yaml"], env=ENV, label="bad",
                        config="configs/broken.yaml", output_dir="saves/bad")
        good_end, bad_end = ended(ws, good.id), ended(ws, bad.id)
        finished, failed = arrived(rx, "finished"), arrived(rx, "failed")
    assert good_end.status is RunStatus.FINISHED, (run_dir(ws, good.id) / "stderr.log").read_text()[-2000:]
    assert bad_end.status is RunStatus.FAILED
    assert finished["run"] == good.id and finished["step"] == 3 and isinstance(finished["last_loss"], float)
    assert finished["duration_s"] > 0 and finished["config"] == "configs/train.yaml"
    first = diagnose_record(ws, read_record(run_dir(ws, bad.id)))[0]
    assert failed["run"] == bad.id and failed["exit_code"] not in (None, 0)
    assert (failed["cause"], failed["fix"]) == (first.title, first.fix) and failed["cause"]
    for run in (good, bad):
        log = (run_dir(ws, run.id) / "notify.jsonl").read_text()
        assert '"arrived": true' in log and "b0c7a1f2" not in log
        assert "b0c7a1f2" not in (run_dir(ws, run.id) / "run.json").read_text()
        assert "b0c7a1f2" not in (run_dir(ws, run.id) / "supervisor.log").read_text()
