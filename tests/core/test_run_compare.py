"""Runs side by side (core.train.run_compare): two real recorded runs of the demo that differ in their learning rate
(tests/compared_runs.py), the table's columns and order, the curves on each axis, the eval-score diff and the rows
where the tuned models disagree, and `devtune runs compare` rendering the same."""

from __future__ import annotations

import json
import time

import pytest

from core.errors import BadInput
from core.train.run_compare import compare_runs, runs_table
from core.train.runs import RunStatus
from tests.compared_runs import FAST, SLOW, place_compared_runs
from tests.recorded_runs import LOGS, place_recorded_run


def logged(fixture: str, key: str) -> list[tuple[int, float]]:
    out = []
    for line in (LOGS / fixture / "trainer_log.jsonl").read_text().splitlines():
        row = json.loads(line)
        if key in row:
            out.append((row["current_steps"], row[key]))
    return out


def test_two_runs_with_different_learning_rates(workspace):
    place_compared_runs(workspace)
    c = compare_runs(workspace, [FAST, SLOW])
    diff = c.param_diff()
    assert diff["learning_rate"] == {FAST: 0.01, SLOW: 0.001}
    assert set(diff) == {"learning_rate", "num_train_epochs", "logging_steps", "eval_steps"}  # no output_dir
    fast, slow = c.runs
    overfit_eval = logged("lf_eval_overfit", "eval_loss")
    assert fast.best_eval_loss == min(v for _s, v in overfit_eval) and fast.best_eval_step == 50
    assert fast.last_eval_loss == overfit_eval[-1][1] > fast.best_eval_loss  # it overfits
    assert slow.best_eval_loss == slow.last_eval_loss  # falling to the end
    assert fast.last_loss == logged("lf_eval_overfit", "loss")[-1][1]
    xs, ys = c.curves[SLOW]["loss"]
    assert list(zip(xs, ys)) == [(float(s), v) for s, v in logged("lf_eval_falling", "loss")]
    assert c.curves[FAST]["eval_loss"][0] == [float(s) for s, _v in overfit_eval]
    # the shared points lie where both curves are: the slow run's 36 steps
    assert c.at[0]["x"] == 5.0 and c.at[-1]["x"] == 36.0
    at_36 = c.at[-1]["loss"]
    assert at_36[SLOW] == dict(logged("lf_eval_falling", "loss"))[36]
    assert at_36[FAST] == dict(logged("lf_eval_overfit", "loss"))[35]  # its latest value at or before step 36
    from core.train.metrics import parse_duration

    last = json.loads((LOGS / "lf_eval_overfit" / "trainer_log.jsonl").read_text().splitlines()[-1])
    assert fast.duration_s == parse_duration(last["elapsed_time"])  # the trainer's clock, as the progress line says
    assert c.eval_scores == [] and c.disagreements == []


def test_aligned_by_epoch_and_by_tokens(workspace):
    place_compared_runs(workspace)
    c = compare_runs(workspace, [FAST, SLOW], "epoch")
    assert c.curves[SLOW]["loss"][0][-1] == 6.0 and c.at[-1]["x"] == 6.0
    tokens = compare_runs(workspace, [FAST, SLOW], "tokens")  # these two logged no total_tokens
    assert tokens.curves[FAST]["loss"] == ([], []) and tokens.at == []
    assert any("total_tokens" in note for note in tokens.notes)
    # the demo's SFT run and the DPO run did: their curves go by tokens seen, eval points or not
    place_recorded_run(workspace, "20260102-000000-sft", "lf_sft_cpu_demo", RunStatus.FINISHED, 0, time.time() - 60)
    place_recorded_run(workspace, "20260102-000100-dpo", "lf_dpo", RunStatus.FINISHED, 0, time.time() - 30)
    c = compare_runs(workspace, ["20260102-000000-sft", "20260102-000100-dpo"], "tokens")
    xs = c.curves["20260102-000000-sft"]["loss"][0]
    assert xs[0] == 1024.0 and xs == sorted(xs) and len(xs) > 10
    assert {"stage", "learning_rate", "dataset"} <= set(c.params) and "output_dir" not in c.params
    assert c.notes == []


def test_a_run_that_does_not_exist_is_named(workspace):
    place_compared_runs(workspace)
    with pytest.raises(BadInput, match="no-such-run"):
        compare_runs(workspace, [FAST, "no-such-run"])
    with pytest.raises(BadInput, match="two or more"):
        compare_runs(workspace, [FAST, FAST])
    with pytest.raises(BadInput, match="--align"):
        compare_runs(workspace, [FAST, SLOW], "time")


def test_the_table_lists_every_run_with_the_differing_columns_and_sorts(workspace):
    place_compared_runs(workspace)
    place_recorded_run(workspace, "20260103-000000-bad", "lf_no_valid_samples", RunStatus.FAILED, 1, time.time())
    table = runs_table(workspace)
    assert [r.id for r in table.rows] == ["20260103-000000-bad", SLOW, FAST]  # newest first
    assert "learning_rate" in table.params and table.columns[:2] == ["id", "status"]
    by_eval = [r.id for r in table.sorted_by("best_eval_loss")]
    assert by_eval == [FAST, SLOW, "20260103-000000-bad"]  # lowest first; a run without one last
    assert [r.id for r in table.sorted_by("best_eval_loss", descending=True)][-1] == "20260103-000000-bad"
    assert [r.id for r in table.sorted_by("learning_rate")][:2] == [SLOW, FAST]
    row = table.rows[1]
    assert row.cell("status") == "finished" and row.cell("duration_s") == "0:00:03" and row.cell("learning_rate") == "0.001"


def eval_of(ws, run: str, eval_id: str, tuned: list[str]):
    """A saved eval of `run`'s tuned model (the recorded eval's questions, these tuned answers)."""
    from tests.eval_fixture import ROWS, write_eval

    report = write_eval(ws, [(s, src, q, ref, b, t) for (s, src, q, ref, b, _t), t in zip(ROWS, tuned)], eval_id)
    from core.eval.eval_report import load_eval, save_eval

    result = load_eval(ws, eval_id)
    result.report.run = run
    save_eval(ws, result.report, result.rows)
    return report


def test_the_eval_scores_and_the_rows_where_the_tuned_runs_disagree(workspace):
    from tests.eval_fixture import ROWS

    place_compared_runs(workspace)
    references = [r[3] for r in ROWS]
    eval_of(workspace, FAST, "20261201-120000", references)  # every answer right
    worse = list(references)
    worse[2] = "我们会联系仓库为您加急处理"  # the third held-out question answered wrong
    eval_of(workspace, SLOW, "20261201-130000", worse)
    c = compare_runs(workspace, [FAST, SLOW])
    chrf = next(d for d in c.eval_scores if d["metric"] == "chrf")
    assert chrf["values"][FAST] > chrf["values"][SLOW] and chrf["spread"] > 0
    assert [d["source"] for d in c.disagreements] == ["support_qa_eval#3"]
    (row,) = c.disagreements
    assert row["answers"][FAST]["answer"] == references[2] and row["answers"][SLOW]["answer"] == worse[2]
    assert c.runs[0].eval.set == "heldout" and c.runs[0].eval.outcome == "better"
    assert runs_table(workspace).rows[1].value("eval_chrf") == chrf["values"][FAST]


def test_runs_compare_on_the_command_line(workspace, devtune_cli):
    place_compared_runs(workspace)
    ws = ["-w", str(workspace.root)]
    out = devtune_cli(*ws, "runs", "compare", FAST, SLOW, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["params"]["learning_rate"] == {FAST: 0.01, SLOW: 0.001}
    assert data["curves"][FAST]["loss"]["x"][:2] == [5.0, 10.0] and data["align"] == "step"
    assert data["runs"][0]["best_eval_step"] == 50
    text = devtune_cli(*ws, "runs", "compare", FAST, SLOW, "--align", "epoch")
    assert text.returncode == 0, text.stderr
    assert "learning_rate" in text.stdout and "0.001" in text.stdout and "loss (eval loss) by epoch" in text.stdout
    missing = devtune_cli(*ws, "runs", "compare", FAST, "no-such-run")
    assert missing.returncode == 2 and "no-such-run" in missing.stderr
    assert devtune_cli(*ws, "runs", "--json").returncode == 0  # the plain list is still there

