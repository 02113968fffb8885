"""Register: add or update one entry of dataset_info.json atomically, keep the others, refuse what
LLaMA-Factory would choke on, save the summary Config reads; check the registry's entries (rule 14)."""

import json
import shutil
from pathlib import Path

import pytest

from core.data.fix import fix_file
from core.data.register import (RegisterError, RegisterRefused, lint_dataset_info, read_dataset_info, register_dataset,
                                   refresh_summary)
from core.data.lint import lint_file
from core.data.summary import load_summary

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"


@pytest.fixture
def ws(workspace):
    for name in ("support_messy.jsonl", "qa_pairs.json", "sharegpt_chats.json", "dataset_info.json"):
        shutil.copy(DATA / name, workspace.data_dir / name)
    return workspace


def test_register_clean_file_and_summary(ws):
    clean = ws.data_dir / "support_clean.jsonl"
    fix_file(ws.data_dir / "support_messy.jsonl", clean, yes=True)
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"other": {"file_name": "x.jsonl"}}))
    r = register_dataset(clean, "support", ws.data_dir, ws_root=ws.root)
    assert r.action == "added" and r.entry == {"file_name": "support_clean.jsonl"}
    info = read_dataset_info(ws.data_dir)
    assert list(info) == ["other", "support"]
    assert register_dataset(clean, "support", ws.data_dir, ws_root=ws.root).action == "unchanged"
    summary = load_summary(ws.root, "support")
    assert summary.file == "data/support_clean.jsonl" and summary.rows == 29 and summary.lint_errors == 0
    assert summary.format == "alpaca" and not summary.is_stale(ws.root)
    assert set(summary.token_percentiles) == {"p50", "p90", "p95", "p99", "max"}
    assert summary.over_cutoff["2048"] == 0


def test_refuses_files_with_errors_and_bad_names(ws):
    with pytest.raises(RegisterError, match="lint errors"):
        register_dataset(ws.data_dir / "support_messy.jsonl", "messy", ws.data_dir)
    assert read_dataset_info(ws.data_dir) == {}
    r = register_dataset(ws.data_dir / "support_messy.jsonl", "messy", ws.data_dir, force=True)
    assert r.action == "added"
    with pytest.raises(RegisterError, match="dataset name"):
        register_dataset(ws.data_dir / "qa_pairs.json", "a,b", ws.data_dir)
    txt = ws.data_dir / "notes.txt"
    txt.write_text('{"instruction": "q", "output": "a"}\n')
    with pytest.raises(RegisterRefused, match="1 lint error"):  # JSON in a .txt: LLaMA-Factory reads its lines
        register_dataset(txt, "notes", ws.data_dir)


def test_columns_and_tags_written_for_other_formats(ws):
    qa = register_dataset(ws.data_dir / "qa_pairs.json", "qa", ws.data_dir, force=True)
    assert qa.entry == {"file_name": "qa_pairs.json", "columns": {"prompt": "question", "response": "answer"}}
    sg = register_dataset(ws.data_dir / "sharegpt_chats.json", "chats", ws.data_dir)
    assert sg.entry == {"file_name": "sharegpt_chats.json", "formatting": "sharegpt",
                        "columns": {"messages": "conversations"}}


def test_name_for_another_file_needs_force_and_registry_is_ascii(ws):
    register_dataset(ws.data_dir / "sharegpt_chats.json", "数据", ws.data_dir)
    with pytest.raises(RegisterError, match="already registered"):
        register_dataset(ws.data_dir / "qa_pairs.json", "数据", ws.data_dir, force=False)
    raw = (ws.data_dir / "dataset_info.json").read_bytes()
    assert raw.isascii() and "数据" in json.loads(raw)


def test_unreadable_registry_is_not_clobbered(ws):
    (ws.data_dir / "dataset_info.json").write_text('{"a": {"file_name": "x.jsonl"},}')
    with pytest.raises(RegisterError, match=r"dataset_info.json:1:\d+: invalid JSON"):
        register_dataset(ws.data_dir / "sharegpt_chats.json", "chats", ws.data_dir)
    assert (ws.data_dir / "dataset_info.json").read_text() == '{"a": {"file_name": "x.jsonl"},}'


def test_registry_lint(ws):
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({
        "good": {"file_name": "qa_pairs.json", "columns": {"prompt": "question", "response": "answer"}},
        "missing": {"file_name": "nope.jsonl"},
        "text": {"file_name": "notes.txt"},
        "wiki": {"file_name": "notes.txt", "columns": {"prompt": "text"}},
        "badfmt": {"file_name": "qa_pairs.json", "formatting": "chatml", "columns": {"questions": "q"}},
    }, indent=2))
    (ws.data_dir / "notes.txt").write_text("hello\n")
    findings = lint_dataset_info(ws.data_dir)
    msgs = [f.message for f in findings]
    assert any("\"missing\" file nope.jsonl not found" in m for m in msgs)
    assert any("\"text\": a .txt file loads as one \"text\" column" in m for m in msgs)
    assert not any("\"wiki\"" in m for m in msgs)  # upstream's wiki_demo entry reads it
    assert any("formatting \"chatml\"" in m for m in msgs) and any("questions" in m for m in msgs)
    assert not any("\"good\"" in m for m in msgs)
    assert all(f.line > 1 for f in findings)


def test_lint_of_a_registered_file_refreshes_its_summary(ws):
    clean = ws.data_dir / "c.jsonl"
    fix_file(ws.data_dir / "support_messy.jsonl", clean, yes=True)
    register_dataset(clean, "support", ws.data_dir, ws_root=ws.root)
    with clean.open("a", encoding="utf-8") as fh:
        fh.write('{"instruction": "new", "input": "", "output": null}\n')
    assert load_summary(ws.root, "support").is_stale(ws.root)
    refresh_summary(lint_file(clean), clean, ws.data_dir, ws.root)
    s = load_summary(ws.root, "support")
    assert not s.is_stale(ws.root) and s.lint_errors == 1
    assert refresh_summary(lint_file(ws.data_dir / "qa_pairs.json"), ws.data_dir / "qa_pairs.json", ws.data_dir,
                           ws.root) is None


def test_changed_means_the_content_changed(ws):
    """Issue 21 #9: `data fix` run again wrote a byte-identical file, and Config then said "changed"."""
    import os

    clean = ws.data_dir / "support_clean.jsonl"
    fix_file(ws.data_dir / "support_messy.jsonl", clean, yes=True)
    register_dataset(clean, "support", ws.data_dir, ws_root=ws.root)
    summary = load_summary(ws.root, "support")
    fix_file(ws.data_dir / "support_messy.jsonl", clean, yes=True, force=True)  # the same rows, written again
    os.utime(clean, (summary.mtime + 60, summary.mtime + 60))
    assert not summary.is_stale(ws.root)
    data = clean.read_bytes()
    clean.write_bytes(data.replace(b"a", b"b", 1))  # same size, new content
    assert summary.is_stale(ws.root)
    assert summary.model_copy(update={"sha256": None}).is_stale(ws.root)  # a summary from before: by mtime
