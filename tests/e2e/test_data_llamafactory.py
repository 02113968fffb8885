"""What the Data step writes, LLaMA-Factory reads: every sample in data/, fixed or converted and
registered, goes through LLaMA-Factory's own data pipeline (the tiny model's tokenizer, the llama3
template) without a single "Dropped invalid example"; the built-in template renderer matches
LLaMA-Factory's templates."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from core.data.convert import convert_file
from core.data.fix import fix_file
from core.data.register import register_dataset

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "data"

LOAD = """
import json, sys
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
model_args, data_args, training_args, _f, _g = get_train_args(json.loads(sys.argv[1]))
tok = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(tok["tokenizer"], data_args)
module = get_dataset(template, model_args, data_args, training_args, stage="sft", **tok)
print("EXAMPLES", len(module["train_dataset"]))
"""

BAD_SIGNS = ("Dropped invalid example", "Invalid role tag", "Invalid message count", "Skipping this abnormal",
             "Cannot find valid samples")


def prepared(ws_root: Path) -> dict[str, int]:
    """Each sample made trainable the way the Data step does it; returns {dataset name: rows}."""
    data = ws_root / "data"
    data.mkdir(parents=True)
    for p in list(DATA.iterdir()) + [FIXTURES / "messages.jsonl", FIXTURES / "gbk.jsonl",
                                     FIXTURES / "broken_array.json"]:
        shutil.copy(p, data / p.name)
    rows = {}
    jobs = [
        ("support", lambda out: fix_file(data / "support_messy.jsonl", out, yes=True)),
        ("qa", lambda out: fix_file(data / "qa_pairs.json", out, yes=True)),
        ("sharegpt_fixed", lambda out: fix_file(data / "sharegpt_chats.json", out)),
        ("sharegpt_alpaca", lambda out: convert_file(data / "sharegpt_chats.json", out)),
        ("chatlog", lambda out: convert_file(data / "cs_chatlog_zh.txt", out)),
        ("faq", lambda out: convert_file(data / "faq_gbk.txt", out)),
        ("tickets", lambda out: convert_file(data / "tickets.csv", out)),
        ("messages_alpaca", lambda out: convert_file(data / "messages.jsonl", out)),
        ("messages_fixed", lambda out: fix_file(data / "messages.jsonl", out)),
        ("gbk_fixed", lambda out: fix_file(data / "gbk.jsonl", out, yes=True)),
        ("array", lambda out: fix_file(data / "broken_array.json", out)),
    ]
    for name, make in jobs:
        out = data / f"{name}.jsonl"
        report = make(out)
        assert report.balanced and report.rows_out, name
        result = register_dataset(out, name, data, ws_root=ws_root)
        assert result.report.errors == 0, (name, [f.message for f in result.report.findings])
        rows[name] = report.rows_out
    return rows


def test_every_sample_loads_through_llamafactory(tmp_path, tiny_model, lf_env):
    rows = prepared(tmp_path)
    args = {"model_name_or_path": str(tiny_model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
            "dataset": ",".join(rows), "dataset_dir": str(tmp_path / "data"), "template": "llama3",
            "cutoff_len": 1024, "output_dir": str(tmp_path / "out"), "overwrite_cache": True,
            "preprocessing_num_workers": 1, "report_to": "none"}
    proc = subprocess.run([sys.executable, "-c", LOAD, json.dumps(args)], env=lf_env, capture_output=True,
                          text=True, timeout=900, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    for sign in BAD_SIGNS:
        assert sign not in log, f"{sign!r} in LLaMA-Factory's log:\n{log[-3000:]}"
    examples = int(log.split("EXAMPLES")[-1].split()[0])
    assert examples == sum(rows.values()), (examples, rows)


def test_builtin_renderer_matches_llamafactory_templates():
    from core.data.render import TEMPLATE_NAMES, render_row, render_with_llamafactory
    from core.data.schema import Schema

    rows = [{"instruction": "如何重置密码？", "input": "账号 A", "output": "点击忘记密码。", "history": [["你好", "您好"]],
             "system": "你是客服。"},
            {"instruction": "Hi", "input": "", "output": "Hello", "history": [], "system": ""}]
    schema = Schema(history="history", system="system")
    for name in TEMPLATE_NAMES:
        bos = "<|begin_of_text|>" if name == "llama3" else "<bos>"
        for row in rows:
            assert render_row(row, schema, name) == render_with_llamafactory(row, schema, name, bos=bos), name
