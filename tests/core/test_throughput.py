"""core.train.throughput: tokens per second from LLaMA-Factory's logs (real CPU runs' trainer_log.jsonl and
hand-made rows), MFU against datasheet peaks, and the advice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.train.throughput import (PEAK_TFLOPS, model_flops_utilisation, tokens_per_second, what_would_raise_it)

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def row(step, secs, tokens=None, **kw):
    r = {"current_steps": step, "total_steps": 100, "loss": 1.0, "elapsed_time": f"0:{secs // 60:02d}:{secs % 60:02d}"}
    if tokens is not None:
        r["total_tokens"] = tokens
    return {**r, **kw}


def test_llamafactorys_own_token_count_over_a_sliding_window():
    rows = [row(s, s * 2, tokens=s * 1000) for s in range(1, 30)]
    rate = tokens_per_second(rows)
    assert rate.tokens_per_s == pytest.approx(500.0) and not rate.estimated and rate.window_steps == 4  # 6 s


def test_an_estimate_from_the_steps_pace_says_so():
    rate = tokens_per_second([row(s, s * 4) for s in range(1, 6)], tokens_per_step=2048)
    assert rate.tokens_per_s == pytest.approx(512.0) and rate.estimated


def test_not_measurable_with_one_step_or_no_token_figure():
    assert not tokens_per_second([row(1, 1, tokens=10)]).measurable
    assert not tokens_per_second([row(s, s) for s in range(1, 5)]).measurable  # no count, no estimate
    assert not tokens_per_second([row(1, 3, tokens=10), row(2, 4, tokens=20)]).measurable  # 1 s: too short


def test_a_resume_restarts_the_window():
    before = [row(s, s * 10, tokens=s * 100) for s in range(1, 15)]  # 10 tokens/s
    after = [row(s, (s - 14) * 2, tokens=1400 + (s - 14) * 100) for s in range(15, 18)]  # 50 tokens/s, clock reset
    assert tokens_per_second(before + after).tokens_per_s == pytest.approx(50.0)


def test_eval_rows_do_not_count():
    rows = [row(1, 2, tokens=1000), {"current_steps": 1, "eval_loss": 2.0}, row(2, 6, tokens=3000)]
    assert tokens_per_second(rows).tokens_per_s == pytest.approx(500.0)


def test_a_real_cpu_run_gives_a_rate_from_its_steps():
    rows = [json.loads(line) for line in (LOGS / "lf_resume" / "trainer_log.jsonl").read_text().splitlines()]
    rate = tokens_per_second(rows, tokens_per_step=2 * 64)
    assert rate.measurable and rate.tokens_per_s > 0


def test_mfu_against_the_datasheet_peak():
    # 8 x MI300X, a 7.6 B model with LoRA (4N FLOPs a token), 40,000 tokens/s in all
    mfu = model_flops_utilisation(40_000, params=7.6e9, gpu="mi300x", devices=8, method="lora")
    assert mfu == pytest.approx(4 * 7.6e9 * 40_000 / (1307.4e12 * 8))
    full = model_flops_utilisation(40_000, params=7.6e9, gpu="mi300x", devices=8, method="full")
    assert full == pytest.approx(mfu * 1.5)
    assert model_flops_utilisation(40_000, params=7.6e9, gpu=None, devices=1, method="lora") is None  # CPU
    assert model_flops_utilisation(None, params=7.6e9, gpu="mi300x", devices=8, method="lora") is None
    assert all(v > 0 for v in PEAK_TFLOPS.values())


def test_advice_from_the_config_and_the_fit():
    ids = {s.id for s in what_would_raise_it({"flash_attn": "disabled"}, memory_headroom=0.6, vendor="amd", mfu=0.1)}
    assert ids == {"packing", "attention", "liger", "batch", "checkpointing"}
    tuned = {"packing": True, "flash_attn": "sdpa", "enable_liger_kernel": True,
             "disable_gradient_checkpointing": True}
    assert [s.id for s in what_would_raise_it(tuned, memory_headroom=0.1, vendor="amd", mfu=0.1)] == ["small"]
    assert what_would_raise_it({}, memory_headroom=0.9, vendor=None, mfu=None) == []  # CPU: not applicable
