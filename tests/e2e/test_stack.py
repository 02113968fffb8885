"""The stack `make test` installs works: the real LLaMA-Factory trains the tiny model on a CPU for a
few steps, then merges the LoRA adapter with `llamafactory-cli export`."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

LF = str(Path(sys.executable).parent / "llamafactory-cli")

ROWS = [
    {"instruction": "如何重置账户密码？", "input": "", "output": "点击登录页的“忘记密码”，按邮件提示操作即可。"},
    {"instruction": "How long does a refund take?", "input": "", "output": "3 to 5 business days."},
    {"instruction": "支持哪些支付方式？", "input": "", "output": "支付宝、微信支付和银联卡。"},
    {"instruction": "Do you ship internationally?", "input": "", "output": "Yes, to 40 countries."},
]


def test_train_then_export_tiny_model_on_cpu(tmp_path, tiny_model, lf_env):
    data = tmp_path / "data"
    data.mkdir()
    (data / "demo.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS))
    (data / "dataset_info.json").write_text(json.dumps({"demo": {"file_name": "demo.jsonl"}}))
    out = tmp_path / "saves" / "run1"
    train = {
        "model_name_or_path": str(tiny_model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "lora_rank": 8, "lora_target": "all", "dataset": "demo", "dataset_dir": str(data),
        "template": "llama3", "cutoff_len": 256, "preprocessing_num_workers": 1, "output_dir": str(out),
        "logging_steps": 1, "save_steps": 2, "max_steps": 4, "plot_loss": False, "report_to": "none",
        "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, "learning_rate": 1e-3,
        "bf16": False, "overwrite_output_dir": True,
    }
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(train))
    proc = subprocess.run([LF, "train", str(tmp_path / "train.yaml")], env=lf_env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "adapter_model.safetensors").exists()
    log = [json.loads(line) for line in (out / "trainer_log.jsonl").read_text().splitlines()]
    assert log[0]["current_steps"] == 1 and log[0]["total_steps"] == 4 and "loss" in log[0]
    assert (out / "checkpoint-2").is_dir()

    merged = tmp_path / "exports" / "merged"
    export = {"model_name_or_path": str(tiny_model), "adapter_name_or_path": str(out), "template": "llama3",
              "finetuning_type": "lora", "export_dir": str(merged), "export_size": 1, "export_device": "cpu",
              "export_legacy_format": False}
    (tmp_path / "merge.yaml").write_text(yaml.safe_dump(export))
    proc = subprocess.run([LF, "export", str(tmp_path / "merge.yaml")], env=lf_env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (merged / name).exists(), name

    from safetensors.torch import load_file

    base, after = load_file(tiny_model / "model.safetensors"), load_file(merged / "model.safetensors")
    changed = [k for k in base if not (base[k] == after[k]).all()]
    assert changed, "the merge changed no weight"
