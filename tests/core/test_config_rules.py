"""devtune's own checks of a training config (they hold without LLaMA-Factory installed)."""

import os

import pytest

from core.config.files import preview
from core.config.presets import preset_spec
from core.config.spec import Launch, TrainSpec
from tests.core.config_workspace import fake_model, register_dataset


def codes(ws, spec, **kw) -> dict[str, str]:
    return {f.code: f.severity for f in preview(ws, spec, **kw).findings}


@pytest.fixture
def demo_ws(workspace):
    fake_model(workspace)
    register_dataset(workspace)
    return workspace


def test_the_cpu_demo_preset_is_clean_on_a_prepared_workspace(demo_ws):
    found = codes(demo_ws, preset_spec("cpu-demo"))
    assert not [c for c, s in found.items() if s == "error"], found
    assert found["fit.fits"] == "info" and found["batch.effective"] == "info"


def test_dataset_must_be_registered_present_and_linted_clean(demo_ws):
    spec = preset_spec("cpu-demo", ["support", "nothere"])
    assert codes(demo_ws, spec)["data.unregistered"] == "error"
    register_dataset(demo_ws, "dirty", lint_errors=3)
    assert codes(demo_ws, preset_spec("cpu-demo", ["dirty"]))["data.lint"] == "error"
    register_dataset(demo_ws, "fresh", summarise=False)
    assert codes(demo_ws, preset_spec("cpu-demo", ["fresh"]))["data.unchecked"] == "warning"
    (demo_ws.data_dir / "support_clean.jsonl").write_text('{"instruction": "x", "input": "", "output": "y"}\n')
    os.utime(demo_ws.data_dir / "support_clean.jsonl", (1, 1))
    assert codes(demo_ws, preset_spec("cpu-demo"))["data.stale"] == "warning"
    (demo_ws.data_dir / "dataset_info.json").unlink()
    assert codes(demo_ws, preset_spec("cpu-demo"))["data.no_info"] == "error"


def test_cutoff_len_against_the_token_lengths(demo_ws):
    register_dataset(demo_ws, "long", percentiles={"p50": 300, "p90": 700, "p95": 900, "p99": 1500, "max": 2400})
    short = preset_spec("cpu-demo", ["long"])  # cutoff 256 < p50
    finding = next(f for f in preview(demo_ws, short).findings if f.code == "data.truncated")
    assert finding.severity == "warning" and "2400" in finding.message and finding.fix == "cutoff_len 1536"
    roomy = preset_spec("lora-1gpu", ["support"]).model_copy(update={"cutoff_len": 4096})
    assert codes(demo_ws, roomy)["data.cutoff_large"] == "info"
    # the memory fit is sized by the longest row when it is known
    assert preview(demo_ws, roomy).fit.seq_len == 60 + 32  # the longest row and the template's tokens


def test_template_against_model(demo_ws):
    assert "template.mismatch" in codes(demo_ws, preset_spec("cpu-demo").model_copy(update={"template": "qwen3"}))
    unknown = preset_spec("cpu-demo").model_copy(update={"template": "nope"})
    assert codes(demo_ws, unknown)["template.unknown"] == "error"
    unset = preview(demo_ws, preset_spec("cpu-demo").model_copy(update={"template": None}))
    finding = next(f for f in unset.findings if f.code == "template.unset")
    assert finding.fix == "set template: llama3"
    hub = preset_spec("lora-1gpu").model_copy(update={"template": "default"})
    assert "template.mismatch" in codes(demo_ws, hub)


def test_bf16_where_the_hardware_lacks_it(demo_ws):
    cpu_bf16 = preset_spec("cpu-demo").model_copy(update={"precision": "bf16"})
    assert codes(demo_ws, cpu_bf16)["precision.cpu_bf16"] == "error"
    v100 = preset_spec("lora-1gpu").model_copy(update={"launch": Launch(gpu_model="v100-32")})
    assert codes(demo_ws, v100)["precision.no_bf16"] == "error"
    assert codes(demo_ws, v100, found=[("NVIDIA A100-SXM4-80GB", 80 << 30)]).get("precision.no_bf16") is None
    z3 = preset_spec("zero3-multi-gpu").model_copy(update={"precision": "pure_bf16"})
    assert codes(demo_ws, z3)["precision.pure_bf16_zero3"] == "error"


def test_qlora_with_zero3_caveats(demo_ws):
    q = preset_spec("qlora-70b").model_copy(update={"zero_stage": 3, "launch": Launch(gpus_per_node=4,
                                                                                      gpu_model="mi250-gcd")})
    found = codes(demo_ws, q)
    assert found["qlora.zero3"] == "info" and "qlora.zero3_bits" not in found
    assert codes(demo_ws, q.model_copy(update={"quantization_bit": 8}))["qlora.zero3_bits"] == "error"
    assert codes(demo_ws, q.model_copy(update={"offload": True}))["qlora.zero3_offload"] == "warning"
    on_cpu = preset_spec("cpu-demo").model_copy(update={"finetuning_type": "qlora"})
    assert codes(demo_ws, on_cpu)["qlora.cpu"] == "error"


def test_effective_batch_and_steps(demo_ws):
    spec = preset_spec("cpu-demo")  # 4 rows, batch 4, 80 epochs
    finding = next(f for f in preview(demo_ws, spec).findings if f.code == "batch.effective")
    assert "effective batch 4 = 4 per device × 1 accumulation × 1 process; 4 training rows: 1 step per epoch, 80 steps in all" in finding.message
    assert "1 steps" not in finding.message
    big = spec.model_copy(update={"gradient_accumulation_steps": 4})
    assert codes(demo_ws, big)["batch.too_large"] == "warning"
    z3 = preset_spec("zero3-multi-gpu")
    text = next(f.message for f in preview(demo_ws, z3).findings if f.code == "batch.effective")
    assert text.startswith("effective batch 16 = 1 per device × 2 accumulation × 8 processes")


def test_multi_node_needs_the_address_of_node_0(demo_ws):
    spec = preset_spec("multi-node")
    assert codes(demo_ws, spec)["launch.master_addr"] == "error"
    ok = spec.model_copy(update={"launch": spec.launch.model_copy(update={"master_addr": "10.0.0.1"})})
    assert "launch.master_addr" not in codes(demo_ws, ok)
    assert codes(demo_ws, ok, found=[("AMD Instinct MI300X", 192 << 30)] * 4)["launch.gpus"] == "warning"


def test_output_dir_resume_and_refusal(demo_ws):
    spec = preset_spec("cpu-demo")
    out = demo_ws.root / spec.output_dir
    (out / "checkpoint-100").mkdir(parents=True)
    (out / "checkpoint-20").mkdir()
    resume = next(f for f in preview(demo_ws, spec).findings if f.code == "output.resume")
    assert "checkpoint-100" in resume.message
    for child in out.iterdir():
        child.rmdir()
    (out / "adapter_model.safetensors").write_bytes(b"x")
    assert codes(demo_ws, spec)["output.not_empty"] == "error"
    assert codes(demo_ws, spec.model_copy(update={"overwrite_output_dir": True}))["output.overwrite"] == "warning"
    assert codes(demo_ws, spec.model_copy(update={"output_dir": "elsewhere/run"}))["output.outside"] == "warning"


def test_memory_fit_verdict_is_a_finding_with_what_to_change(demo_ws):
    spec = preset_spec("lora-1gpu").model_copy(update={"model_name_or_path": "meta-llama/Llama-2-70b-hf",
                                                       "launch": Launch(gpu_model="mi250-gcd")})
    finding = next(f for f in preview(demo_ws, spec).findings if f.code.startswith("fit."))
    assert finding.code == "fit.does_not_fit" and finding.severity == "error"
    assert "QLoRA" in finding.fix
    unknown = spec.model_copy(update={"launch": Launch()})
    assert codes(demo_ws, unknown)["fit.no_target"] == "info"


def test_model_folder_must_exist_and_hub_ids_are_noted(demo_ws):
    missing = preset_spec("cpu-demo").model_copy(update={"model_name_or_path": "models/gone"})
    assert codes(demo_ws, missing)["model.missing"] == "error"
    assert "model.hub" in codes(demo_ws, preset_spec("lora-1gpu")) or \
        "model.offline" in codes(demo_ws, preset_spec("lora-1gpu"))


def test_kept_keys_are_reported(demo_ws):
    spec = TrainSpec(model_name_or_path="models/tiny-llama3", output_dir="saves/x", dataset=["support"],
                     template="llama3", extra={"ddp_timeout": 9}, launch=Launch(device="cpu"))
    finding = next(f for f in preview(demo_ws, spec).findings if f.code == "import.kept")
    assert "ddp_timeout" in finding.message


def test_deepspeed_file_of_an_import_must_exist(demo_ws):
    spec = preset_spec("zero3-multi-gpu").model_copy(update={"deepspeed": "examples/deepspeed/ds_z3_config.json"})
    assert codes(demo_ws, spec)["deepspeed.missing"] == "error"
    assert "deepspeed.missing" not in codes(demo_ws, preset_spec("zero3-multi-gpu"))


def test_zero3_says_when_zero2_would_be_enough_and_not_when_it_would_not(demo_ws):
    """Issue 16: the Config step explains when ZeRO-2 is enough; a 70B LoRA on 8 MI300X needs ZeRO-3."""
    small = preset_spec("cpu-demo").model_copy(update={"zero_stage": 3,
                                                       "launch": Launch(device="cpu", gpus_per_node=2)})
    found = codes(demo_ws, small)
    assert found["deepspeed.zero2_enough"] == "info" and found["launch.cpu_many"] == "info"
    big = preset_spec("zero3-multi-gpu").model_copy(update={"launch": Launch(gpus_per_node=8, gpu_model="mi250-gcd")})
    assert "deepspeed.zero2_enough" not in codes(demo_ws, big)
