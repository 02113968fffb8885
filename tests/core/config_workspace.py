"""Helpers for the Config tests: a workspace as the Data step leaves it (a registered, summarised dataset)."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"

ROWS = [
    {"instruction": "如何重置账户密码？", "input": "",
     "output": "点击登录页的“忘记密码”，按邮件提示操作即可。"},
    {"instruction": "How long does a refund take?", "input": "", "output": "3 to 5 business days."},
    {"instruction": "支持哪些支付方式？", "input": "", "output": "支付宝、微信支付和银联卡。"},
    {"instruction": "Do you ship internationally?", "input": "", "output": "Yes, to 40 countries."},
]


def register_dataset(ws, name: str = "support", rows: list[dict] | None = None, *, lint_errors: int = 0,
                     percentiles: dict[str, int] | None = None, summarise: bool = True) -> Path:
    """data/<name>_clean.jsonl registered in dataset_info.json, with the Data step's summary."""
    from core.data.summary import DatasetSummary, save_summary

    rows = ROWS if rows is None else rows
    file = ws.data_dir / f"{name}_clean.jsonl"
    file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    info_file = ws.data_dir / "dataset_info.json"
    info = json.loads(info_file.read_text()) if info_file.exists() else {}
    info[name] = {"file_name": file.name}
    info_file.write_text(json.dumps(info, indent=2))
    if summarise:
        st = os.stat(file)
        save_summary(ws.root, DatasetSummary(
            name=name, file=f"data/{file.name}", size=st.st_size, mtime=st.st_mtime, format="alpaca",
            rows=len(rows), lint_errors=lint_errors, lint_warnings=0, tokenizer="models/tiny-llama3",
            token_percentiles=percentiles or {"p50": 30, "p90": 40, "p95": 45, "p99": 50, "max": 60}))
    return file


def fake_model(ws, name: str = "tiny-llama3", template: str = "llama3") -> Path:
    """A model folder with only its config.json (enough for shapes, templates and checks; not to train)."""
    folder = ws.models_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 32,
        "vocab_size": 3000, "tie_word_embeddings": False}))
    (folder / "devtune_model.json").write_text(json.dumps({"name": name, "template": template}))
    return folder
