"""The model-files family (core.train.diagnosis_model_files): what the log shows of a model folder (a listing, a
pointer's text, a config.json) decides the cause, on messages of different loaders."""

import pytest

from core.train.diagnosis_model_files import model_files_finding
from core.train.failures import diagnose_text

LISTING = "-rw-r--r--  1 user  staff   {size} Mar  8 17:02 {name}\n"
POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:4d5e\nsize 4783157600\n"


@pytest.mark.parametrize("error, shown", [
    ("Error: invalid file magic", "$ ls -la\n" + LISTING.format(size=135, name="model.q5_k_m.gguf")),
    ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
     "$ ls -l models/qwen\n" + LISTING.format(size=134, name="model-00001-of-00002.safetensors")),
    ("_pickle.UnpicklingError: invalid load key, 'v'.", "$ head -c 200 pytorch_model.bin\n" + POINTER),
])
def test_a_pointer_in_place_of_the_weights_whatever_the_loader_says(error, shown):
    found = model_files_finding(error, "", log_text=shown + error + "\n")
    assert found.id == "model-files" and "git-lfs" in found.title and "git lfs pull" in found.commands[0]


def test_big_files_and_an_unrelated_error_are_no_pointer():
    shown = LISTING.format(size=4976698672, name="model-00001-of-00002.safetensors")
    assert model_files_finding("SafetensorError: Error while deserializing header: HeaderTooLarge", "",
                               log_text=shown) is None
    assert model_files_finding("RuntimeError: CUDA out of memory", "", log_text=POINTER) is None


@pytest.mark.parametrize("config, error, frames, says", [
    ('"quantization_config": {\n "load_in_8bit": true,\n "quant_method": "bitsandbytes"\n}',
     "ValueError: Can not map tensor 'model.layers.0.mlp.down_proj.SCB'",
     '  File "/home/u/llama.cpp/convert_hf_to_gguf.py", line 299, in prepare_tensors', "full-precision base"),
    ('"quantization_config": {\n "bits": 4,\n "quant_method": "gptq"\n}',
     "ValueError: DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a `device_map`.",
     '  File "/v/site-packages/transformers/modeling_utils.py", line 3100, in from_pretrained', "quantization_bit: 4"),
    ('"quantization_config": {\n "load_in_4bit": true,\n "quant_method": "bitsandbytes"\n}',
     "ValueError: Can not map tensor 'model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__nf4'",
     '  File "/home/u/llama.cpp/convert_hf_to_gguf.py", line 299, in prepare_tensors', "full-precision base"),
])
def test_quantized_weights_where_full_precision_ones_are_needed(config, error, frames, says):
    log = f"$ cat model/config.json\n{config}\nTraceback (most recent call last):\n{frames}\n    x()\n{error}\n"
    first = diagnose_text(log, "run.log", exit_code=1)[0]
    assert first.id == "model-files" and "quantized" in first.title and says in first.fix


def test_a_quantized_model_failing_for_another_reason_is_not_blamed_on_it():
    log = '"quantization_config": {"load_in_4bit": true}\n'
    assert model_files_finding("RuntimeError: NCCL error: unhandled system error", "", log_text=log) is None
