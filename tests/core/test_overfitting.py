"""The overfitting warning: the eval loss rising while the training loss falls, on real runs of the tiny model
with a held-out set (tests/fixtures/logs/SOURCES.md) where the verdict is known, and on shaped series."""

import math
from pathlib import Path

from core.train.anomalies import AnomalyDetector, EvalPoint, overfitting
from core.train.metrics import LogRecord, MetricsPoller, RunMetrics

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def poll(folder: str) -> MetricsPoller:
    poller = MetricsPoller(LOGS / folder / "trainer_log.jsonl")
    poller.poll()
    return poller


def test_the_memorising_demo_overfits_and_the_warning_names_the_step_to_stop_at():
    poller = poll("lf_eval_overfit")
    (found,) = [a for a in poller.new_anomalies if a.id == "overfitting"]
    assert found.severity == "warning" and found.stop_at == 50  # the lowest eval loss, 6.234
    assert found.step == 150  # the second evaluation above it is the first moment it can be said
    now = {a.id: a for a in poller.metrics.snapshot().anomalies}["overfitting"]
    assert now.step == 150 and now.stop_at == 50  # still active at the end, its numbers follow the run
    for text in ("6.234 at step 50", "7.855 at step 480", "Stop at step 50", "fewer epochs (num_train_epochs 8.3)",
                 "lower learning_rate", "more data"):
        assert text in now.message
    assert len(poller.metrics.eval_loss) == 10


def test_no_false_alarm_on_runs_whose_eval_loss_falls_or_levels_off():
    for folder in ("lf_eval_falling", "lf_eval_plateau", "lf_normal"):
        poller = poll(folder)
        assert len(poller.metrics.eval_loss) >= 4, folder
        assert "overfitting" not in {a.id for a in poller.new_anomalies}, folder


def points(evals, trains, step=10):
    return [EvalPoint((i + 1) * step, e, t, None) for i, (e, t) in enumerate(zip(evals, trains))]


def test_the_verdict_on_shaped_series():
    falling_train = [3.0, 2.5, 2.1, 1.8, 1.5, 1.2]
    assert overfitting(points([2.9, 2.6, 2.5, 2.6, 2.8, 3.0], falling_train))[0].step == 30
    # one evaluation above the lowest is not yet a rise
    assert overfitting(points([2.9, 2.6, 2.5, 2.7], falling_train)) is None
    # a noisy plateau (within 3%) is not a rise
    assert overfitting(points([2.9, 2.6, 2.50, 2.52, 2.51, 2.53], falling_train)) is None
    # both rising: that is divergence (the loss windows say so), not overfitting
    assert overfitting(points([2.9, 2.6, 2.5, 2.6, 2.8, 3.0], [3.0, 2.5, 2.1, 2.3, 2.6, 3.0])) is None
    # the eval loss coming back below its old lowest point clears it
    assert overfitting(points([2.9, 2.6, 2.5, 2.6, 2.8, 2.4], falling_train)) is None


def test_a_resume_replaces_the_evaluations_after_its_checkpoint():
    d = AnomalyDetector()
    for step, value in ((10, 2.0), (20, 1.8), (30, 1.9), (40, 2.1)):
        d.feed_loss(step, 3.0 - step / 20)
        d.feed_eval_loss(step, value)
    assert "overfitting" in d.active
    d.forget_after_resume()
    d.feed_loss(25, 1.7)
    d.feed_eval_loss(25, 1.7)  # resumed from checkpoint-20: its evaluations after step 20 are gone
    assert [p.step for p in d.evals] == [10, 20, 25] and "overfitting" not in d.active
    assert d.feed_eval_loss(30, math.nan) == []


def test_eval_lines_feed_the_detector_through_the_run_metrics():
    m = RunMetrics()
    records = []
    for step in range(1, 201):
        records.append(LogRecord(step=step, total=200, loss=3.0 * 0.99 ** step, epoch=step / 20))
        if step % 20 == 0:
            records.append(LogRecord(step=step, total=200, eval_loss=2.0 - step / 400 if step <= 80
                                     else 1.8 + (step - 80) / 200, epoch=step / 20))
    found = m.add_records(records)
    (warning,) = [a for a in found if a.id == "overfitting"]
    assert warning.stop_at == 80 and "num_train_epochs 4" in warning.message
