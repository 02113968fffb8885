"""Diagnoses reasoned from the libraries' own settings (core.train.diagnosis_settings, setting_mentions, knobs):
each mechanism on several messages as the libraries print them, and on messages it must leave alone."""

import json
import subprocess
from pathlib import Path

import pytest

from core.train import knob_index
from core.train.diagnosis_families_config import RunSettings
from core.train.diagnosis_settings import settings_finding, settings_first_finding, shown_settings
from core.train.failures import diagnose_files, diagnose_text
from core.train.knobs import front_end, knobs, lookup
from core.train.setting_mentions import read

ROOT = Path(__file__).parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
VLLM_FRAMES = '  File "/venv/lib/python3.11/site-packages/vllm/config.py", line 800, in verify\n'
LF_FRAMES = '  File "/venv/lib/python3.11/site-packages/llamafactory/train/tuner.py", line 72, in run\n'


def _traceback(lines: list[str], error: str) -> str:
    return "\n".join(["Traceback (most recent call last):", *lines, error, ""])


# --- the index: what the libraries declare, generated from them ------------------------------------------------

def test_the_index_holds_the_settings_of_every_library_with_its_help():
    libs = {k.lib for k in knobs()}
    assert {"llamafactory", "transformers", "peft", "deepspeed", "vllm"} <= libs
    rank = [k for k in lookup("max_lora_rank") if k.kind == "flag"]
    assert rank and rank[0].flag == "--max-lora-rank" and "64" in rank[0].choices
    (unused,) = [k for k in knobs() if k.name == "ddp_find_unused_parameters"]
    assert "find_unused_parameters" in unused.help and unused.commands == ("train",)
    (attn,) = [k for k in knobs() if k.name == "flash_attn" and k.kind == "yaml"]
    assert {"disabled", "sdpa", "fa2"} <= set(attn.choices)


def test_the_committed_index_is_what_the_installed_llamafactory_declares(uses_llamafactory):
    """Regenerated in this process: a LLaMA-Factory or transformers upgrade that adds, drops or renames a key
    fails here until `make knobs` is run."""
    committed = json.loads(knob_index.INDEX.read_text(encoding="utf-8"))
    mine = {(e["name"], e["lib"]) for e in committed["knobs"] if e["source"] == "llamafactory"}
    assert mine == {(e["name"], e["lib"]) for e in knob_index.llamafactory_knobs()}
    assert {e["name"] for e in committed["knobs"] if e["source"] == "peft"} == {e["name"] for e in knob_index.peft_knobs()}


@pytest.mark.serve
def test_the_committed_index_is_what_the_installed_vllm_declares():
    serve = ROOT / ".venv-serve" / "bin" / "python"
    code = ("import json; from core.train.knob_index import vllm_knobs; "
            "print(json.dumps(sorted([e['kind'], e['name']] for e in vllm_knobs())))")
    out = subprocess.run([str(serve), "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    fresh = json.loads(out.stdout.strip().splitlines()[-1])
    committed = json.loads(knob_index.INDEX.read_text(encoding="utf-8"))
    assert fresh == sorted([e["kind"], e["name"]] for e in committed["knobs"] if e["source"] == "vllm")


def test_the_front_end_is_the_one_the_person_ran():
    rank = lookup("max_lora_rank")
    assert front_end(rank, "vllm").spelled("64") == "--max-lora-rank 64"
    assert front_end(rank, "infer").spelled("64") == "vllm_max_lora_rank: 64"  # llamafactory-cli api, vLLM backend
    assert front_end(lookup("modules_to_save"), "train").name == "additional_target"


# --- reading a message ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("message, libs, setting, wanted", [
    ("LoRA rank 64 is greater than max_lora_rank 16.", {"vllm"}, "max_lora_rank", "64"),
    ("LoRA rank 100 is greater than max_lora_rank 64.", {"vllm"}, "max_lora_rank", "128"),  # its next choice
    ("Total number of attention heads (28) must be divisible by tensor parallel size (8).", {"vllm"},
     "tensor_parallel_size", "4"),
    ("Total number of hidden layers (30) must be divisible by pipeline parallel size (4).", {"vllm"},
     "pipeline_parallel_size", "2"),
    ("You can enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
     "`torch.nn.parallel.DistributedDataParallel`.", {"torch"}, "ddp_find_unused_parameters", "True"),
    ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' "
     "start method", {"vllm", "torch"}, "VLLM_WORKER_MULTIPROC_METHOD", "spawn"),
])
def test_a_message_names_a_setting_and_what_it_needs(message, libs, setting, wanted):
    reading = read(message, libs)
    first = reading.mentions[0]
    assert setting in [k.name for k in first.knobs] or setting in [k.name for m in reading.mentions for k in m.knobs]
    assert (reading.wanted or first.value) == wanted


def test_divisible_lists_every_value_that_satisfies_it():
    reading = read("Total number of attention heads (28) must be divisible by tensor parallel size (8).", {"vllm"})
    assert reading.options == [7, 4, 2, 1] and reading.current == "8"


def test_two_settings_that_exclude_each_other_and_the_librarys_own_advice():
    reading = read("Cannot specify `val_size` if `eval_dataset` is not None.", {"llamafactory"})
    assert reading.conflict and [m.text for m in reading.mentions] == ["val_size", "eval_dataset"]
    assert read("Please use FORCE_TORCHRUN=1 to launch DeepSpeed training.", {"llamafactory"}).advice == [
        "Please use FORCE_TORCHRUN=1 to launch DeepSpeed training."]


@pytest.mark.parametrize("message", [
    "KeyError: 'input_ids'",  # a generic word, no setting
    "CUDA out of memory. Tried to allocate 2.00 GiB",
    "division by zero",
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
])
def test_a_message_without_a_setting_names_none(message):
    reading = read(message, {"torch", "transformers", "llamafactory"})
    assert not reading.mentions and reading.wanted is None


# --- the diagnoses ---------------------------------------------------------------------------------------------------

def test_named_setting_rewrites_the_command_that_was_run():
    log = ("$ vllm serve /models/Qwen2.5-7B --tensor-parallel-size 8 --port 8000\n"
           + _traceback([VLLM_FRAMES], "ValueError: Total number of attention heads (28) must be divisible by tensor "
                        "parallel size (8)."))
    first = diagnose_text(log, "serve.log", exit_code=1)[0]
    assert first.id == "named-setting"
    assert first.commands == ["vllm serve /models/Qwen2.5-7B --tensor-parallel-size 4 --port 8000"]
    assert "7, 4, 2, 1" in first.fix and any("value in this run: 8" in e.text for e in first.evidence)


def test_named_setting_through_llamafactory_is_its_yaml_key():
    log = ("$ llamafactory-cli api examples/inference/qwen_vllm.yaml\n"
           + _traceback([LF_FRAMES, VLLM_FRAMES], "ValueError: LoRA rank 64 is greater than max_lora_rank 32."))
    first = diagnose_text(log, "api.log", exit_code=1)[0]
    assert first.id == "named-setting" and "vllm_max_lora_rank: 64" in first.fix
    assert first.commands == ["llamafactory-cli api examples/inference/qwen_vllm.yaml vllm_max_lora_rank=64"]


def test_keys_of_another_command_and_a_misspelt_key():
    found = diagnose_files([LOGS / "heldout5" / "cfg_train_yaml_to_webchat.log"])[0]
    assert found.id == "wrong-command-keys" and "llamafactory-cli train" in found.title
    typo = diagnose_files([LOGS / "unseen" / "unused_yaml_key.log"], exit_code=1)[0]
    assert typo.id == "wrong-command-keys" and "learning_rat -> learning_rate" in typo.fix
    assert settings_finding("ValueError: Some keys are not used by the HfArgumentParser: ['lora_rnk']", "",
                            log_text="$ llamafactory-cli train x.yaml").fix.count("lora_rank")


def test_a_setting_documented_to_cause_the_failure_comes_first():
    root = "ValueError: Can't find a valid checkpoint at saves/run/checkpoint-125"
    frames = '  File "/v/site-packages/transformers/trainer.py", line 2206, in train\n' \
             "    return inner_training_loop(resume_from_checkpoint=resume_from_checkpoint)\n"
    run = RunSettings(args={"save_only_model": True, "resume_from_checkpoint": "saves/run/checkpoint-125"})
    found = settings_first_finding(root, frames, settings=run)
    assert found.id == "setting-documented-cause" and "save_only_model: true" in found.title
    assert "resuming" in found.explanation and found.contradiction
    # at its default it is no cause; and a setting whose warning is about something else is none either
    assert settings_first_finding(root, frames, settings=RunSettings(args={"save_only_model": False})) is None
    assert settings_first_finding("RuntimeError: CUDA out of memory", "", settings=run) is None


def test_settings_the_log_shows_are_read_only_under_real_names():
    log = ("$ cat train.yaml\nsave_only_model: true\nstage: sft  # the stage\nnot_a_key: 3\n"
           "[INFO|2026] llamafactory >> loading: model\n"
           "$ llamafactory-cli train train.yaml learning_rate=1e-4\n$ vllm serve m --max-lora-rank 32 --enable-lora\n")
    shown = shown_settings(log, {})
    assert shown == {"save_only_model": "true", "stage": "sft", "learning_rate": "1e-4", "max_lora_rank": "32",
                     "enable_lora": "true"}


@pytest.mark.parametrize("error, lib, gpu_line", [
    ("RuntimeError: FlashAttention only supports AMD MI200 GPUs or newer.", "flash_attn", "gfx908"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "flash_attn", "Tesla V100"),
])
def test_a_library_that_refuses_this_gpu_is_turned_off_by_its_setting(error, lib, gpu_line):
    frames = f'  File "/v/site-packages/{lib}/flash_attn_interface.py", line 171, in _fwd\n'
    found = settings_finding(error, frames, log_text=f"$ llamafactory-cli train x.yaml\nGPU: {gpu_line}\n")
    assert found.id == "hardware-limit" and "flash_attn: disabled" in found.fix and "sdpa" in found.fix
    assert found.commands == ["llamafactory-cli train x.yaml flash_attn=disabled"]


def test_a_hardware_limit_of_a_library_no_setting_chooses_is_left_to_others():
    frames = '  File "/v/site-packages/some_kernels/ops.py", line 3, in run\n'
    assert settings_finding("RuntimeError: some_kernels only supports Hopper GPUs or newer.", frames) is None


@pytest.mark.parametrize("error, file", [
    ("OSError: Consistency check failed: file should be of size 3963750880 but has size 3587149413 "
     "(model-00002-of-00008.safetensors).", "model-00002-of-00008.safetensors"),
    ("RuntimeError: Unable to load shards/model-00001-of-00004.bin: expected size 4976698672 bytes, got 1073741824",
     "shards/model-00001-of-00004.bin"),
])
def test_a_file_the_error_gives_two_sizes_for_was_cut_short(error, file):
    first = diagnose_text(_traceback([], error), "train.log", exit_code=1)[0]
    assert first.id == "file-cut-short" and file in first.title and "--force-download" in first.commands[0]


def test_the_librarys_advice_when_it_names_no_setting():
    found = settings_finding("RuntimeError: Cannot find the kernel. Please reinstall the package with "
                             "`pip install kernels --no-build-isolation`.", "")
    assert found.id == "library-advice" and "pip install kernels" in found.fix
    assert settings_finding("RuntimeError: the kernel failed", "") is None


def test_the_index_builder_replaces_one_library_and_keeps_the_others(tmp_path, monkeypatch, uses_torch):
    """`python -m core.train.knob_index peft` (PEFT imports torch) replaces the PEFT entries and keeps every other library's."""
    copy = tmp_path / "knobs.json"
    copy.write_text(knob_index.INDEX.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(knob_index, "INDEX", copy)
    before = json.loads(copy.read_text(encoding="utf-8"))
    index = knob_index.build(["peft"])
    assert [e for e in index["knobs"] if e["source"] != "peft"] == [e for e in before["knobs"] if e["source"] != "peft"]
    assert {e["name"] for e in index["knobs"] if e["source"] == "peft"} >= {"r", "target_modules", "modules_to_save"}


# --- a call whose arguments do not fit the function: two packages of different versions ----------------------------

def _log(pip: list[str], frames: list[str], error: str, extra: list[str] = ()) -> str:
    return "\n".join(["$ pip list | grep -E 'x'", *pip, *extra, "Traceback (most recent call last):", *frames, error, ""])


def test_a_keyword_passed_through_a_decorator_is_the_callers_not_the_decorators():
    log = _log(["datasets                  2.20.0", "pandas                    1.5.3"], [
        '  File "/usr/lib/python3/dist-packages/datasets/packaged_modules/json/json.py", line 155, in _generate_tables',
        '    df = pd.read_json(f, dtype_backend="pyarrow")',
        '  File "/usr/lib/python3/dist-packages/pandas/util/_decorators.py", line 211, in wrapper',
        "    return func(*args, **kwargs)"], "TypeError: read_json() got an unexpected keyword argument 'dtype_backend'")
    first = diagnose_text(log, "train.log", exit_code=1)[0]
    assert first.id == "version-skew" and "datasets" in first.title and "pandas" in first.title
    assert any("pandas 1.5.3" in e.text for e in first.evidence) and "pip check" in first.commands


def test_a_method_of_a_class_whose_module_is_in_the_traceback():
    log = _log(["llmtuner 0.7.1 /root/LLaMA-Factory", "trl 0.9.3"], [
        '  File "/venv/lib/python3.10/site-packages/trl/trainer/dpo_trainer.py", line 1257, in compute_loss',
        "    loss, metrics = self.get_batch_loss_metrics(model, inputs)",
        '  File "/root/LLaMA-Factory/src/llmtuner/train/dpo/trainer.py", line 120, in concatenated_forward',
        "    all_logps = self.get_batch_logps("],
        "TypeError: DPOTrainer.get_batch_logps() got an unexpected keyword argument 'average_log_prob'")
    first = diagnose_text(log, "train.log", exit_code=1)[0]
    assert first.id == "version-skew" and "llmtuner calls `DPOTrainer.get_batch_logps` of trl" in first.title
    assert 'pip install "trl<0.9.3"' in first.commands[0]


def test_a_library_calling_the_persons_override_with_its_new_signature():
    log = _log(["transformers              4.46.0"], [
        '  File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 3600, in training_step',
        "    loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)"],
        "TypeError: CustomTrainer.compute_loss() got an unexpected keyword argument 'num_items_in_batch'",
        ["$ grep -n 'def compute_loss' my_sft.py", "41:    def compute_loss(self, model, inputs, return_outputs=False):"])
    first = diagnose_text(log, "train.log", exit_code=1)[0]
    assert first.id == "version-skew" and "my_sft.py" in first.title and "transformers 4.46.0" in first.fix


def test_a_signature_error_inside_one_package_is_no_skew():
    frames = '  File "/venv/lib/python3.11/site-packages/peft/tuners/lora.py", line 9, in f\n    g(1, 2, 3)\n'
    from core.train.diagnosis_signature import signature_skew

    assert signature_skew("TypeError: g() takes 2 positional arguments but 3 were given", frames) is None


@pytest.mark.parametrize("pip, frame, old", [
    ("llmtuner                  0.7.1.dev0     /home/u/LLaMA-Factory",
     '  File "/home/u/LLaMA-Factory/src/llmtuner/train/dpo/workflow.py", line 64, in run_dpo', True),
    ("", '  File "/home/u/LLaMA-Efficient-Tuning/src/train_sft.py", line 69, in main', True),
    ("llamafactory              0.9.4", '  File "/v/site-packages/llamafactory/train/tuner.py", line 72, in run', False),
])
def test_an_old_llamafactory_failing_in_its_own_code_is_told_to_update(pip, frame, old):
    log = "\n".join(["$ pip list", pip, "Traceback (most recent call last):", frame, "    x()",
                     "AssertionError", ""])
    first = diagnose_text(log, "train.log", exit_code=1)[0]
    assert (first.id == "old-release") is old
    if old:
        assert "git pull && pip install -e ." in first.commands


# --- a program's own error line, when it printed no traceback ---------------------------------------------------------

@pytest.mark.parametrize("log, root", [
    ("$ ollama create m -f Modelfile\ntransferring model data\nError: unknown type\n$ echo $?\n1\n", "Error: unknown type"),
    ("$ sbatch -n 56 job.sh\nsbatch: error: Batch job submission failed: Requested node configuration is not "
     "available\n$ scontrol show node c001\n   CPUTot=56\n", "sbatch: error: Batch job submission failed"),
    ("ERROR: Could not find a version that satisfies the requirement torch==9.9\n", "ERROR: Could not find a version"),
])
def test_a_log_without_a_traceback_still_gets_its_error_line_as_the_root(log, root):
    first = diagnose_text(log, "run.log")[0]
    assert first.id == "root-cause" and first.title.startswith(root) and first.evidence[0].text.startswith(root)


def test_a_logger_record_is_no_error_line():
    assert diagnose_text("ERROR 12-03 10:00:01 [core.py:340] something\nINFO 12-03 done\n", "serve.log") == []


def test_an_unknown_flag_gets_the_flag_that_means_it():
    log = ("$ vllm serve m --enable-lora --lora-path saves/lora\nusage: vllm serve [model_tag] [options]\n"
           "vllm: error: unrecognized arguments: --lora-path saves/lora\n")
    first = diagnose_text(log, "serve.log", exit_code=2)[0]
    assert first.id == "wrong-command-keys" and "--lora-path -> --lora-modules" in first.fix


@pytest.mark.parametrize("command, dist", [("llamafactory-cli", "llamafactory"), ("accelerate", "accelerate"),
                                           ("huggingface-cli", "huggingface_hub")])
def test_a_command_not_found_names_the_package_whose_command_it_is(command, dist):
    log = (f"(lf) u@gpu:~$ {command} train x.yaml\nbash: {command}: command not found\n"
           "(lf) u@gpu:~$ which python\n/home/u/miniconda3/envs/lf/bin/python\n")
    first = diagnose_text(log, "run.log")[0]
    assert first.id == "missing-command" and command in first.title
    assert any(f"package {dist}" in e.text for e in first.evidence)
    assert any("envs/lf" in e.text for e in first.evidence)


def test_an_old_library_check_line_is_an_error_line():
    log = ("THCudaCheck FAIL file=/root/torch/lib/THC/THCGeneral.c line=66 error=35 : CUDA driver version is "
           "insufficient for CUDA runtime version\n\tmain.lua:20: in main chunk\n")
    first = diagnose_text(log, "run.log")[0]
    assert "CUDA driver version is insufficient" in first.evidence[0].text


def test_an_old_release_is_not_blamed_for_a_validation_message():
    log = ("$ pip list\nllmtuner 0.7.1 /home/u/LLaMA-Factory\nTraceback (most recent call last):\n"
           '  File "/home/u/LLaMA-Factory/src/llmtuner/data/loader.py", line 9, in load\n    x()\n'
           '  File "/v/site-packages/datasets/arrow_dataset.py", line 2097, in rename_column\n    raise ValueError(\n'
           "ValueError: Original column name instruction not in the dataset. Current columns in the dataset: "
           "['text', 'meta']\n")
    assert diagnose_text(log, "run.log", exit_code=1)[0].id != "old-release"


def test_a_feature_the_model_does_not_support_switched_on_by_the_run():
    from core.train.failures import diagnose_text

    log = ("$ vllm serve /models/gemma-3-12b-it --enable-lora --lora-modules ft=/ckpt/lora --max-lora-rank 16\n"
           "Traceback (most recent call last):\n  File \"/venv/lib/python3.12/site-packages/vllm/model_executor/"
           "models/gemma3_mm.py\", line 40, in load\n"
           "ValueError: Model Gemma3ForConditionalGeneration does not support LoRA, but LoRA is enabled. Support "
           "for this model may be added in the future.\n")
    first = diagnose_text(log)[0]
    assert first.id == "unsupported-feature" and "Gemma3ForConditionalGeneration" in first.title
    assert first.commands == ["devtune merge", "vllm serve <merged folder>"]
    without = log.replace(" --enable-lora --lora-modules ft=/ckpt/lora --max-lora-rank 16", "")
    assert diagnose_text(without)[0].id != "unsupported-feature"  # the run did not ask for it


def test_an_invalid_choice_names_the_choices_and_a_k_quant_goes_to_llama_quantize():
    from core.train.failures import diagnose_text

    gguf = ("$ python llama.cpp/convert_hf_to_gguf.py merged --outtype q4_k_m --outfile m.gguf\n"
            "usage: convert_hf_to_gguf.py [-h] [--outtype {f32,f16,bf16,q8_0,tq1_0,tq2_0,auto}] model\n"
            "convert_hf_to_gguf.py: error: argument --outtype: invalid choice: 'q4_k_m' (choose from 'f32', 'f16', "
            "'bf16', 'q8_0', 'tq1_0', 'tq2_0', 'auto')\n")
    first = diagnose_text(gguf)[0]
    assert first.id == "wrong-command-keys" and first.commands[1] == "llama-quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M"
    vllm = ("$ vllm serve merged --dtype fp16\nvllm serve: error: argument --dtype: invalid choice: 'fp16' (choose "
            "from 'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')\n")
    first = diagnose_text(vllm)[0]
    assert first.id == "wrong-command-keys" and "float16" in first.fix and "llama-quantize" not in first.fix


def test_clap_invalid_value_of_a_flag_given_on_the_command_line():
    from core.train.failures import diagnose_text

    log = ("$ text-generation-launcher --model-id m --quantize gptq4\n"
           "error: invalid value 'gptq4' for '--quantize <QUANTIZE>'\n  [possible values: awq, eetq, gptq, bitsandbytes]\n")
    first = diagnose_text(log)[0]
    assert first.id == "wrong-command-keys" and "gptq" in first.fix and "export" not in first.fix
