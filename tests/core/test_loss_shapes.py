"""Anomalies on real trainer logs whose right verdict is known (issue 21): recorded from LLaMA-Factory
0.9.5 on the tiny CPU model (tests/fixtures/logs/SOURCES.md says how each was made). No false alarm on
a decreasing loss; a flat one is called flat, with numbers that say so; NaN and 0 losses are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.train.metrics import MetricsPoller

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def judged(fixture: str):
    poller = MetricsPoller(LOGS / fixture / "trainer_log.jsonl")
    poller.poll()
    detector = poller.metrics.detector
    window = {"no_decrease", "diverging", "oscillation"}
    return ([a for a in detector.events if a.id in window] + [a for a in detector.events if a.id not in window],
            {k: v for k, v in detector.active.items() if k != "throughput_collapse"})


def test_decreasing_loss_raises_nothing_at_any_step():
    events, active = judged("lf_shape_decr")  # lr 2e-3 cosine: 7.7 -> 3.0 over 130 steps
    assert events == [] and active == {}


def test_the_demo_run_is_judged_on_what_holds_now():
    """The demo (lr 1e-2): 7.6 -> 0.58, a real bump to 1.3 around step 300, then down to 0.10."""
    events, active = judged("lf_demo_cpu")
    assert active == {}
    rising = [a for a in events if a.id == "diverging"]
    assert rising and 250 <= rising[0].step <= 400  # the bump, while it happened


@pytest.mark.parametrize("fixture", ["lf_shape_flat", "lf_shape_rise"])
def test_a_flat_loss_is_called_flat_and_the_numbers_agree(fixture):
    """lr 1e-7 (nothing learnt) and lr 0.2 after warm-up (stuck around 5.3): neither falls any more."""
    events, active = judged(fixture)
    assert set(active) == {"no_decrease"}
    message = active["no_decrease"].message
    first, last, noise = (float(x) for x in
                          __import__("re").search(r"trend ([\d.]+) -> ([\d.]+), .* ±([\d.]+)\)", message).groups())
    assert abs(last - first) < noise  # what the message claims: a change within the noise


def test_nan_and_zero_losses_are_errors():
    events, active = judged("lf_nan_loss")
    assert active["loss_nan"].severity == "error" and active["loss_nan"].step == 4
    events, active = judged("lf_loss_zero")
    assert active["loss_zero"].severity == "error"
