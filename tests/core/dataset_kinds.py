"""Small datasets of every kind LLaMA-Factory reads, in the shapes of its data/README.md and of its demo
files (dpo_en_demo, kto_en_demo, c4_demo, wiki_demo, mllm_demo, glaive_toolcall), with the dataset_info.json entries
upstream writes for them. Tests write them into their own folders."""

from __future__ import annotations

import json
from pathlib import Path

# a 1x1 PNG: enough for a path to exist (the lint checks paths, not pixels)
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
TOOLS = json.dumps([{"name": "lookup_order", "description": "Find an order", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}])
QUESTIONS = ["How do I reset my password?", "Where is my order?", "Can I change my address?",
             "How long does a refund take?", "Do you ship abroad?", "How do I cancel my plan?"]
GOOD = ["Click 'Forgot password' on the sign-in page and follow the email.",
        "Your order page shows its tracking number and the carrier's link.",
        "Yes: open Settings, Addresses, and edit it before the order ships.",
        "Refunds reach your card within five working days of our approval.",
        "We ship to forty countries; the checkout lists them with their costs.",
        "Open Billing, choose Cancel plan, and confirm; it ends at the period's close."]
BAD = ["No idea.", "Check yourself.", "Maybe.", "It takes a while.", "Sometimes.", "Call someone."]


def sharegpt_dpo_rows():
    return [{"conversations": [{"from": "human", "value": q}], "chosen": {"from": "gpt", "value": g},
             "rejected": {"from": "gpt", "value": b}} for q, g, b in zip(QUESTIONS, GOOD, BAD)]


def alpaca_dpo_rows():
    return [{"instruction": q, "input": "", "chosen": g, "rejected": b} for q, g, b in zip(QUESTIONS, GOOD, BAD)]


def kto_rows():
    rows = []
    for k, (q, g, b) in enumerate(zip(QUESTIONS, GOOD, BAD)):
        good = k % 2 == 0
        rows.append({"messages": [{"role": "user", "content": q},
                                  {"role": "assistant", "content": g if good else b}], "label": good})
    return rows


def pretrain_rows():
    return [{"text": f"{q} {g}"} for q, g in zip(QUESTIONS, GOOD)]


def text_lines():
    """wiki_demo.txt's shape: one document per line (LLaMA-Factory reads a .txt file a row per line)."""
    return [f"{q} {g} {b}" for q, g, b in zip(QUESTIONS, GOOD, BAD)]


def mllm_rows():
    return [{"messages": [{"role": "user", "content": "<image>" + q},
                          {"role": "assistant", "content": g}], "images": ["mllm_demo_data/1.png"]} for q, g in zip(QUESTIONS, GOOD)]


def tool_rows():
    rows = []
    for q, g in zip(QUESTIONS, GOOD):
        call = json.dumps({"name": "lookup_order", "arguments": {"order_id": "A1"}})
        rows.append({"conversations": [{"from": "human", "value": q}, {"from": "function_call", "value": call},
                                       {"from": "observation", "value": json.dumps({"status": "shipped"})},
                                       {"from": "gpt", "value": g}], "tools": TOOLS})
    return rows


# name → (file name, rows, upstream-style dataset_info entry, stage that trains on it)
KINDS = {
    "dpo_sharegpt": ("dpo_en_demo.json", sharegpt_dpo_rows, {
        "formatting": "sharegpt", "ranking": True,
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}}, "dpo"),
    "dpo_alpaca": ("dpo_alpaca.json", alpaca_dpo_rows, {
        "ranking": True, "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen",
                                     "rejected": "rejected"}}, "dpo"),
    "kto": ("kto_en_demo.json", kto_rows, {
        "formatting": "sharegpt", "columns": {"messages": "messages", "kto_tag": "label"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}},
        "kto"),
    "c4": ("c4_demo.jsonl", pretrain_rows, {"columns": {"prompt": "text"}}, "pt"),
    "wiki": ("wiki_demo.txt", text_lines, {"columns": {"prompt": "text"}}, "pt"),
    "mllm": ("mllm_demo.json", mllm_rows, {
        "formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}},
        "sft"),
    "tools": ("glaive_toolcall_en_demo.json", tool_rows, {
        "formatting": "sharegpt", "columns": {"messages": "conversations", "tools": "tools"}}, "sft"),
}


def write_kind(folder: Path, name: str, *, registered: bool = True) -> Path:
    """Write one kind's file (a JSON array for .json, JSON Lines for .jsonl, as upstream does), its media,
    and (registered) its upstream entry in folder/dataset_info.json, keeping the entries already there."""
    file_name, rows, entry, _stage = KINDS[name]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    data = rows()
    if file_name.endswith(".txt"):
        path.write_text("".join(line + "\n" for line in data), encoding="utf-8")
    elif file_name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data), encoding="utf-8")
    else:
        path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    if name == "mllm":
        (folder / "mllm_demo_data").mkdir(exist_ok=True)
        (folder / "mllm_demo_data" / "1.png").write_bytes(PNG)
    if registered:
        info_path = folder / "dataset_info.json"
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
        info[name] = {"file_name": file_name, **entry}
        info_path.write_text(json.dumps(info, indent=2))
    return path
