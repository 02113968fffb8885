"""core.train.throughput: tokens per second from a run's metrics (a real CPU run's trainer_log.jsonl and
hand-made rows), MFU against datasheet peaks, and the advice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.train.metrics import RunMetrics, parse_log_line
from core.config.gpu_catalog import CATALOG, gpu_model, match_gpu
from core.train.throughput import (RunShape, Throughput, model_flops_utilisation, peak_tflops, token_rate,
                                   what_would_raise_it)

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def snapshot_of(rows):
    metrics = RunMetrics()
    metrics.add_records([parse_log_line(json.dumps(r)) for r in rows])
    return metrics.snapshot()


def row(step, secs, tokens=None):
    r = {"current_steps": step, "total_steps": 100, "loss": 1.0, "elapsed_time": f"0:{secs // 60:02d}:{secs % 60:02d}"}
    return {**r, "total_tokens": tokens} if tokens is not None else r


def test_llamafactorys_own_token_count_comes_first():
    snap = snapshot_of([row(s, s * 2, tokens=s * 1000) for s in range(1, 30)])
    rate = token_rate(snap.tokens_per_s, snap.steps_per_s, tokens_per_step=64)
    assert rate.tokens_per_s == pytest.approx(500.0) and not rate.estimated


def test_an_estimate_from_the_steps_pace_says_so():
    snap = snapshot_of([row(s, s * 4) for s in range(1, 10)])
    rate = token_rate(snap.tokens_per_s, snap.steps_per_s, tokens_per_step=2048)
    assert rate.tokens_per_s == pytest.approx(512.0) and rate.estimated


def test_not_measurable_without_a_rate_or_a_token_figure():
    assert not token_rate(None, None, 2048).measurable and token_rate(None, None, 2048).estimated
    assert not token_rate(None, 0.5).measurable  # steps but no size of a step
    snap = snapshot_of([row(1, 1, tokens=10), row(2, 2, tokens=20)])  # 1 s of steps: too short to say
    assert not token_rate(snap.tokens_per_s, snap.steps_per_s).measurable


def test_a_real_cpu_run_gives_a_rate_from_its_steps():
    rows = [json.loads(line) for line in (LOGS / "lf_resume" / "trainer_log.jsonl").read_text().splitlines()]
    snap = snapshot_of(rows)
    rate = token_rate(snap.tokens_per_s, snap.steps_per_s, tokens_per_step=2 * 64)
    assert rate.measurable and rate.estimated and rate.tokens_per_s > 0


def test_mfu_against_the_datasheet_peak():
    # 8 x MI300X, a 7.6 B model with LoRA (4N FLOPs a token), 40,000 tokens/s in all
    mfu = model_flops_utilisation(40_000, params=7.6e9, gpu="mi300x", devices=8, method="lora")
    assert mfu == pytest.approx(4 * 7.6e9 * 40_000 / (1307.4e12 * 8))
    full = model_flops_utilisation(40_000, params=7.6e9, gpu="mi300x", devices=8, method="full")
    assert full == pytest.approx(mfu * 1.5)
    assert model_flops_utilisation(40_000, params=7.6e9, gpu=None, devices=1, method="lora") is None  # CPU
    assert model_flops_utilisation(None, params=7.6e9, gpu="mi300x", devices=8, method="lora") is None


def test_every_catalogue_gpu_has_a_peak_for_each_precision_it_trains_in():
    for gpu in CATALOG:
        bf16, fp16, fp32 = gpu.peak_tflops
        assert fp32 > 0 and fp16 and fp16 >= fp32, gpu.id
        assert (bf16 is not None and bf16 >= fp32) or not gpu.bf16, gpu.id  # every GPU said to do bf16 has its peak
        assert peak_tflops(gpu.id, "bf16") == bf16 and peak_tflops(gpu.id, "pure_bf16") == bf16
        assert peak_tflops(gpu.id, "fp16") == fp16 and peak_tflops(gpu.id, None) == fp32 == peak_tflops(gpu.id, "fp32")
    assert {"rtx4090", "a10g", "h100-pcie", "h100-80"} <= {g.id for g in CATALOG}


def test_mfu_follows_the_runs_precision_and_the_h100_kind():
    assert match_gpu("NVIDIA H100 PCIe").id == "h100-pcie" and match_gpu("NVIDIA H100 80GB HBM3").id == "h100-80"
    sxm = model_flops_utilisation(10_000, params=8e9, gpu="h100-80", devices=1, method="lora", precision="bf16")
    pcie = model_flops_utilisation(10_000, params=8e9, gpu="h100-pcie", devices=1, method="lora", precision="bf16")
    assert pcie == pytest.approx(sxm * 989.4 / 756.5)
    fp32 = model_flops_utilisation(1_000, params=8e9, gpu="h100-80", devices=1, method="lora", precision="fp32")
    assert fp32 == pytest.approx(4 * 8e9 * 1_000 / (gpu_model("h100-80").peak_tflops[2] * 1e12))
    assert model_flops_utilisation(1_000, params=8e9, gpu="t4", devices=1, method="lora", precision="bf16") is None


def test_a_cpu_run_says_mfu_is_not_applicable_and_an_unknown_one_does_not():
    snap = snapshot_of([row(s, s * 2, tokens=s * 1000) for s in range(1, 30)])
    cpu = Throughput.of(snap, RunShape(params=1e6, method="lora", gpu=None, vendor=None, devices=0,
                                       tokens_per_step=None))
    assert not cpu.applicable and cpu.text() == "MFU not applicable (CPU run)" and cpu.advice == ()
    assert cpu.to_json()["tokens_per_s"] == pytest.approx(500.0) and not cpu.to_json()["tokens_estimated"]
    unknown = Throughput.of(snap, None)  # an unreadable config: nothing claimed
    assert unknown.applicable and unknown.mfu is None and unknown.text() == ""
    gpu = Throughput.of(snap, RunShape(params=8e9, method="full", gpu="mi300x", vendor="amd", devices=8,
                                       tokens_per_step=None, precision="bf16"))
    assert gpu.text() == "MFU 0%" and gpu.mfu == pytest.approx(6 * 8e9 * 500 / (1307.4e12 * 8))
    assert any("packing" in line for line in gpu.advice_lines())


def test_advice_from_the_config_and_the_fit():
    ids = {s.id for s in what_would_raise_it({"flash_attn": "disabled"}, memory_headroom=0.6, vendor="amd", mfu=0.1)}
    assert ids == {"packing", "attention", "liger", "batch", "checkpointing"}
    tuned = {"packing": True, "flash_attn": "sdpa", "enable_liger_kernel": True,
             "disable_gradient_checkpointing": True}
    assert [s.id for s in what_would_raise_it(tuned, memory_headroom=0.1, vendor="amd", mfu=0.1)] == ["small"]
    assert what_would_raise_it({}, memory_headroom=0.9, vendor=None, mfu=None) == []  # CPU: not applicable


def test_a_real_cpu_run_with_llamafactorys_count_gives_a_measured_rate():
    """tests/fixtures/runs/lf_dpo: devtune train of the tiny model on this CPU with devtune's config
    (include_num_input_tokens_seen: true): tokens/s is LLaMA-Factory's count, not an estimate."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "lf_dpo" / "trainer_log.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert all("total_tokens" in r for r in rows if "loss" in r)
    snap = snapshot_of(rows)
    rate = token_rate(snap.tokens_per_s, snap.steps_per_s, tokens_per_step=999)
    assert rate.measurable and not rate.estimated and 100 < rate.tokens_per_s < 100_000
    cpu = Throughput.of(snap, RunShape(params=1e6, method="lora", gpu=None, vendor=None, devices=0,
                                       tokens_per_step=None))
    assert cpu.text() == "MFU not applicable (CPU run)"


def test_a_run_that_counts_its_tokens_is_never_estimated(workspace):
    """A config with include_num_input_tokens_seen: its tokens/s is LLaMA-Factory's count or not measurable yet;
    the steps' pace times a typical step is said only for a run that does not count (seen in CI: monitor said
    '~2640 tokens/s (estimate)' in the seconds before the count's window spanned 10 s)."""
    from core.config.files import save_config
    from core.config.presets import preset_spec
    from core.train.throughput import run_shape
    from tests.core.config_workspace import fake_model, register_dataset

    fake_model(workspace)
    register_dataset(workspace)
    spec = preset_spec("cpu-demo", ["support"])
    assert spec.include_num_input_tokens_seen
    save_config(workspace, spec, "configs/counts.yaml")
    save_config(workspace, spec.model_copy(update={"include_num_input_tokens_seen": False}), "configs/estimates.yaml")
    counts, estimates = run_shape(workspace, "configs/counts.yaml"), run_shape(workspace, "configs/estimates.yaml")
    assert counts.tokens_per_step is None and estimates.tokens_per_step > 0
    early = Throughput.from_rates(None, 3.0, counts)  # steps measurable, the count's window not yet
    assert not early.rate.measurable and not early.rate.estimated and early.text() == "MFU not applicable (CPU run)"
    guessed = Throughput.from_rates(None, 3.0, estimates)
    assert guessed.rate.estimated and guessed.rate.tokens_per_s == pytest.approx(3.0 * estimates.tokens_per_step)
