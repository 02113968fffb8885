"""Numbers devtune says as a person expects them (issue 29, item 11): a CSV's rows counted, the workspace
config's cutoff_len judged against, epochs not in e-notation, the anomaly advice scaled to the loss and agreeing
with the device and the config, and a failed run's note that does not say "failed" twice."""

import json

from core.train.anomalies import AnomalyDetector, RunContext, people_number


def test_a_csv_table_has_its_rows(workspace, devtune_cli):
    path = workspace.data_dir / "kefu.csv"
    path.write_text("question,answer\n" + "".join(f"问题{i},回答{i}\n" for i in range(40)), encoding="utf-8")
    proc = devtune_cli("-w", str(workspace.root), "data", "lint", str(path), "--json")
    assert json.loads(proc.stdout)["rows"] == 40  # was 0


def test_lint_and_stats_judge_against_the_workspace_configs_cutoff_len(workspace, devtune_cli):
    path = workspace.data_dir / "long.jsonl"
    path.write_text("".join(json.dumps({"instruction": "问" * 300, "input": "", "output": "答"}, ensure_ascii=False)
                            + "\n" for _ in range(3)), encoding="utf-8")
    (workspace.root / "configs").mkdir(exist_ok=True)
    (workspace.root / "configs" / "train.yaml").write_text("cutoff_len: 256\n", encoding="utf-8")
    stats = json.loads(devtune_cli("-w", str(workspace.root), "data", "stats", str(path), "--json").stdout)["stats"]
    assert stats["cutoff_len"] == 256 and stats["over_cutoff"] == 3
    lint = json.loads(devtune_cli("-w", str(workspace.root), "data", "lint", str(path), "--json").stdout)
    assert any(f["rule"] == "too-long" for f in lint["findings"])
    said = devtune_cli("-w", str(workspace.root), "data", "stats", str(path), "--cutoff-len", "4096", "--json")
    assert json.loads(said.stdout)["stats"]["cutoff_len"] == 4096  # a flag still wins


def test_numbers_for_people():
    assert [people_number(x) for x in (120.0, 1500.0, 2.5, 0.05, 1.25)] == ["120", "1500", "2.5", "0.05", "1.25"]


def _oscillate(level: float, context: RunContext) -> list:
    d = AnomalyDetector(check_every=1, context=context)
    found = []
    for step in range(60):
        found += d.feed_loss(step, level * (1.2 if step % 2 else 2.6))
    return [a for a in found if a.id == "oscillation"]


def test_a_converged_loss_does_not_oscillate_and_cpu_advice_names_no_gpu():
    assert not _oscillate(2e-6, RunContext(device="gpu"))  # a DPO loss of 2e-6: its swings are noise
    (cpu,) = _oscillate(1.0, RunContext(device="cpu"))
    assert "MI300X" not in cpu.message and "ROCm" not in cpu.message


def test_the_nan_advice_follows_the_configs_max_grad_norm():
    said = AnomalyDetector(context=RunContext(max_grad_norm=10.0)).feed_loss(3, float("nan"))[0].message
    assert "keep max_grad_norm at 1.0" not in said and "lower max_grad_norm to 1.0 (the config sets 10)" in said
    said = AnomalyDetector(context=RunContext(max_grad_norm=1.0)).feed_loss(3, float("nan"))[0].message
    assert "keep max_grad_norm at 1.0" in said


def test_a_failed_runs_note_does_not_say_failed_again(workspace):
    from core.train.runs import RunRecord, RunStatus, ending_note, status_label

    record = RunRecord(id="r1", argv=["x"], cwd=str(workspace.root), status=RunStatus.FAILED, exit_code=1)
    line = f"{status_label(record.status)}: {ending_note(record)}"
    assert "failed: failed" not in line and "exit" in line


def _line(workspace, *, stop_requested=None, eval_loss=None) -> str:
    from core.train.metrics import ProgressSnapshot
    from core.train.runs import RunRecord, RunStatus
    from core.train.snapshot import snapshot_of

    record = RunRecord(id="r2", argv=["x"], cwd=str(workspace.root), status=RunStatus.RUNNING,
                       stop_requested=stop_requested)
    progress = ProgressSnapshot(step=40, total=640, loss=1.5, eval_loss=eval_loss, elapsed_s=30.0, eta_s=450.0)
    return snapshot_of(record, progress, None).progress_line()


def test_a_run_being_stopped_shows_no_eta_and_the_eval_loss_is_said(workspace):
    assert "ETA 0:07:30" in _line(workspace)
    assert "ETA" not in _line(workspace, stop_requested=1.0)
    assert "eval loss 1.6250" in _line(workspace, eval_loss=1.625)
