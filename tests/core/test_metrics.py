"""trainer_log.jsonl tailed by offset into chart series and a progress snapshot, on real LLaMA-Factory logs."""

import math
import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from core.train.metrics import (LogRecord, MetricsPoller, MetricsTail, RunMetrics, Series, SmoothedSeries, parse_duration,
                          parse_log_line)

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def test_parse_real_line_and_durations():
    line = (b'{"current_steps": 5, "total_steps": 93, "loss": 5.7013, "lr": 1.0000000000000002e-06, "epoch": '
            b'0.1646090534979424, "percentage": 5.38, "elapsed_time": "0:02:03", "remaining_time": "0:36:15", '
            b'"throughput": 13061.0, "total_tokens": 1614784}')
    r = parse_log_line(line)
    assert (r.step, r.total, r.loss, r.elapsed_s, r.remaining_s, r.throughput, r.total_tokens) == (
        5, 93, 5.7013, 123.0, 2175.0, 13061.0, 1614784)
    assert parse_duration("1 day, 2:03:04") == 93784.0 and parse_duration("3 days, 0:00:01") == 259201.0
    assert parse_duration("garbage") is None and parse_duration(None) is None
    assert parse_log_line(b"not json") is None and parse_log_line(b'{"loss": 1}') is None


def test_bare_nan_written_by_json_dumps_is_read():
    r = parse_log_line('{"current_steps": 4, "total_steps": 15, "loss": NaN, "lr": 240.0}')
    assert math.isnan(r.loss)
    assert parse_log_line('{"current_steps": 4, "loss": Infinity}').loss == math.inf


def test_tail_partial_line_then_truncation(tmp_path):
    path = tmp_path / "trainer_log.jsonl"
    tail = MetricsTail(path)
    assert tail.poll() == []
    lines = (LOGS / "lf_normal" / "trainer_log.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[1][:30])
    assert [r.step for r in tail.poll()] == [1]
    with open(path, "ab") as fh:
        fh.write(lines[1][30:] + lines[2])
    assert [r.step for r in tail.poll()] == [2, 3]
    assert tail.poll() == []
    path.write_bytes(lines[0])  # overwrite_output_dir: LLaMA-Factory deleted the log, a new run writes it
    assert [r.step for r in tail.poll()] == [1] and tail.reset


def test_normal_run_series_eval_and_snapshot():
    poller = MetricsPoller(LOGS / "lf_normal" / "trainer_log.jsonl", LOGS / "lf_normal" / "stdout.log",
                           LOGS / "lf_normal" / "stderr.log")
    assert poller.poll()
    m = poller.metrics
    assert m.loss.xs == list(range(1, 21)) and m.eval_loss.xs == [5, 10, 15, 20]
    assert m.lr.ys[0] == 0.001 and len(m.grad_norm) == 20
    snap = m.snapshot()
    assert (snap.step, snap.total, snap.fraction) == (20, 20, 1.0)
    assert snap.loss == m.loss.ys[-1] and abs(snap.eval_loss - 7.3947) < 1e-3
    # the whole run took under a second of tqdm's and the log's 1 s clocks: no rate can be measured
    assert snap.steps_per_s is None and snap.tokens_per_s is None and snap.eta_s == 0.0
    assert snap.resumed_at == () and not [a for a in snap.anomalies if a.severity == "error"]
    assert not poller.poll()  # nothing new


def test_resumed_run_keeps_the_latest_value_per_step_and_marks_the_resume(tmp_path):
    m = RunMetrics()
    part1 = [parse_log_line(x) for x in (LOGS / "lf_resume" / "trainer_log.part1.jsonl").read_bytes().splitlines()]
    m.add_records(part1)
    before = dict(zip(m.loss.xs, m.loss.ys))
    assert max(m.loss.xs) == 14
    everything = [parse_log_line(x) for x in (LOGS / "lf_resume" / "trainer_log.jsonl").read_bytes().splitlines()]
    m2 = RunMetrics()
    m2.add_records(everything)
    assert m2.resumes == [11]
    assert m2.loss.xs == list(range(1, 401))  # no duplicate steps, in order
    assert all(m2.loss.ys[i - 1] == before[i] for i in range(1, 11))
    assert len(m2.loss_smooth) == 400 and m2.snapshot().resumed_at == (11,)


def test_incremental_polling_gives_the_same_result_as_one_read(tmp_path):
    src = (LOGS / "lf_resume" / "trainer_log.jsonl").read_bytes()
    path = tmp_path / "trainer_log.jsonl"
    poller = MetricsPoller(path)
    for i in range(0, len(src), 997):  # arbitrary cuts, mid-line too
        with open(path, "ab") as fh:
            fh.write(src[i:i + 997])
        poller.poll()
    once = MetricsPoller(LOGS / "lf_resume" / "trainer_log.jsonl")
    once.poll()
    assert poller.metrics.loss == once.metrics.loss and poller.metrics.resumes == once.metrics.resumes
    assert poller.metrics.loss_smooth.ys == once.metrics.loss_smooth.ys


def test_truncated_log_resets_the_metrics(tmp_path):
    path = tmp_path / "trainer_log.jsonl"
    shutil.copy(LOGS / "lf_normal" / "trainer_log.jsonl", path)
    poller = MetricsPoller(path)
    poller.poll()
    path.write_bytes((LOGS / "lf_nan_loss" / "trainer_log.jsonl").read_bytes().splitlines(keepends=True)[0])
    assert poller.poll()
    assert poller.metrics.loss.xs == [1] and poller.metrics.total == 15


def test_elapsed_adds_up_across_a_resume_and_the_eta_waits_for_a_measured_rate():
    m = RunMetrics()
    m.add_records([LogRecord(step=9, total=100, loss=2.0, elapsed_s=600.0, remaining_s=6000.0),
                   LogRecord(step=10, total=100, loss=1.9, elapsed_s=660.0, remaining_s=5940.0),
                   LogRecord(step=8, total=100, loss=2.1, elapsed_s=20.0, remaining_s=230.0)])
    snap = m.snapshot()
    # LLaMA-Factory's remaining_time after a resume counts the skipped steps as done: not used
    assert m.resumes == [8] and snap.elapsed_s == 680.0 and snap.eta_s is None and snap.step == 8
    m.add_records([LogRecord(step=8 + k, total=100, loss=2.0, elapsed_s=20.0 + 6 * k) for k in range(1, 5)])
    snap = m.snapshot()
    assert snap.steps_per_s == 1 / 6 and snap.eta_s == (100 - 12) * 6


def test_rates_after_a_resume_ignore_the_jump_to_the_checkpoint():
    """HF's bar after a resume: 0 -> 801 in an instant, then 5 steps/s; tqdm's own rate (its EMA) says
    thousands of steps/s for a while. The snapshot's rate is the real one, or none yet."""
    from core.train.output import TqdmProgress

    m = RunMetrics()
    m.add_records([LogRecord(step=800, total=4800, loss=1.0, elapsed_s=900.0)])
    m.add_records([LogRecord(step=805, total=4800, loss=1.0, elapsed_s=2.0)])  # the resumed run's first line
    bars = [TqdmProgress(0, 4800, 0.0, None, None, False), TqdmProgress(801, 4800, 1.0, 0.0, 6326.24, False)]
    m.add_progress(bars)
    assert m.snapshot().steps_per_s is None and m.snapshot().eta_s is None  # not measurable yet
    m.add_progress([TqdmProgress(801 + 5 * t, 4800, 1.0 + t, 1.0, 900.0, False) for t in range(1, 13)])
    snap = m.snapshot()
    assert snap.steps_per_s == 5.0 and snap.eta_s == (4800 - 861) / 5.0


def test_tokens_per_s_from_the_tokens_seen_in_this_segment():
    m = RunMetrics()
    # a resumed run's total_tokens include the checkpoint's: LLaMA-Factory's throughput is then inflated
    m.add_records([LogRecord(step=100 + k, total=400, loss=1.0, elapsed_s=2.0 + 5 * k, throughput=90000.0,
                             total_tokens=1_000_000 + 2000 * k) for k in range(5)])
    assert m.snapshot().tokens_per_s == 400.0


def test_series_replaces_from_a_repeated_step_and_skips_non_finite():
    s = Series()
    for x, y in [(1, 3.0), (2, 2.0), (3, float("nan")), (4, 1.0), (2, 2.5)]:
        s.add(x, y)
    assert s.xs == [1, 2] and s.ys == [3.0, 2.5]


def tensorboard_smooth(values, weight):
    """TensorBoard's vz_line_chart smoothing, transcribed."""
    last, num, out = 0.0, 0, []
    for v in values:
        last = last * weight + (1 - weight) * v
        num += 1
        out.append(last / (1 - weight ** num))
    return out


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=60), st.floats(0.0, 0.99),
       st.integers(1, 59))
def test_smoothing_is_tensorboards_and_survives_a_cut(values, weight, cut):
    s = SmoothedSeries(weight)
    for i, v in enumerate(values):
        s.add(i, v)
    expected = tensorboard_smooth(values, weight)
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) for a, b in zip(s.ys, expected))
    cut = min(cut, len(values))
    s.truncate_from(cut)
    for i, v in enumerate(values[cut:], start=cut):
        s.add(i, v)
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) for a, b in zip(s.ys, expected))
