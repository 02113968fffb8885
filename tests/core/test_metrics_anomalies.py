"""Anomalies found from the numbers: on real NaN / loss-0 runs and on shaped series."""

from pathlib import Path

from core.train.anomalies import AnomalyDetector, RunContext
from core.train.metrics import MetricsPoller

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def ids(anomalies):
    return [a.id for a in anomalies]


def test_real_nan_run():
    poller = MetricsPoller(LOGS / "lf_nan_loss" / "trainer_log.jsonl", LOGS / "lf_nan_loss" / "stdout.log")
    poller.poll()
    found = {a.id: a for a in poller.new_anomalies}
    assert found["loss_nan"].step == 4 and found["loss_nan"].severity == "error"
    assert found["grad_norm_nan"].step == 3  # stdout says grad_norm nan one step before the loss
    assert "NaN at step 4" in found["loss_nan"].message
    assert set(ids(poller.metrics.snapshot().anomalies)) >= {"loss_nan", "grad_norm_nan"}


def test_real_loss_zero_run():
    poller = MetricsPoller(LOGS / "lf_loss_zero" / "trainer_log.jsonl", LOGS / "lf_loss_zero" / "stdout.log")
    poller.poll()
    found = {a.id: a for a in poller.new_anomalies}
    assert found["loss_zero"].step == 4 and "exactly 0" in found["loss_zero"].message
    assert "grad_norm_nan" in found


def test_healthy_real_run_has_no_error():
    poller = MetricsPoller(LOGS / "lf_normal" / "trainer_log.jsonl", LOGS / "lf_normal" / "stdout.log")
    poller.poll()
    assert not [a for a in poller.new_anomalies if a.severity == "error"]


def test_each_error_is_reported_once():
    d = AnomalyDetector()
    assert ids(d.feed_loss(1, float("nan"))) == ["loss_nan"]
    assert d.feed_loss(2, float("nan")) == []
    assert ids(d.feed_loss(3, float("inf"))) == ["loss_inf"]


def test_no_decrease_then_recovery_clears_it():
    d = AnomalyDetector(window=20, check_every=1)
    found = []
    for step in range(40):
        found += d.feed_loss(step, 2.0 + 0.01 * (step % 3))
    assert "no_decrease" in ids(found) and "no_decrease" in d.active
    for step in range(40, 80):
        d.feed_loss(step, 2.0 - 0.03 * (step - 40))
    assert "no_decrease" not in d.active


def test_decreasing_noisy_loss_is_not_flagged():
    d = AnomalyDetector(window=50, check_every=1)
    found = []
    for step in range(300):
        found += d.feed_loss(step, 3.0 * 0.995 ** step + 0.05 * ((step * 7919) % 11) / 11)
    assert not found


def test_oscillation_mi300x_symptom():
    d = AnomalyDetector(check_every=1, context=RunContext(device="gpu"))
    found = []
    for step in range(60):
        found += d.feed_loss(step, 1.2 if step % 2 else 2.6)
    (osc,) = [a for a in found if a.id == "oscillation"]
    assert osc.severity == "warning" and "MI300X" in osc.message


def test_throughput_collapse_and_recovery():
    d = AnomalyDetector()
    found = []
    for step in range(20):
        found += d.feed_throughput(step, 2.0)
    assert found == []
    for step in range(20, 23):
        found += d.feed_throughput(step, 0.5)
    assert ids(found) == ["throughput_collapse"]
    for step in range(23, 26):
        d.feed_throughput(step, 2.0)
    assert "throughput_collapse" not in d.active


def test_throughput_from_the_log_feeds_the_detector():
    from core.train.metrics import LogRecord, RunMetrics

    m = RunMetrics()
    records = [LogRecord(step=s, total=400, loss=2.0 - s / 1000, elapsed_s=float(s)) for s in range(1, 200)]
    records += [LogRecord(step=199 + k, total=400, loss=1.8, elapsed_s=199.0 + 10 * k) for k in range(1, 30)]
    found = m.add_records(records)
    assert "throughput_collapse" in ids(found)
    assert m.steps_per_s.ys[0] > 0.9 and m.steps_per_s.ys[-1] < 0.2
