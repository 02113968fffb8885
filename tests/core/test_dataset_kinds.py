"""The kinds beyond supervised rows: judged by the file's dataset_info.json entry or detected, each with
its own rules; fix keeps the rows LLaMA-Factory would load; register writes the entry that reads them."""

import json

import pytest

from core.data.fix import fix_file
from core.data.lint import LintOptions, lint_file
from core.data.register import register_dataset
from core.data.schema import FEEDBACK, PREFERENCE, PRETRAIN, SUPERVISED
from tests.core.dataset_kinds import KINDS, write_kind

TASK = {"dpo_sharegpt": PREFERENCE, "dpo_alpaca": PREFERENCE, "kto": FEEDBACK, "c4": PRETRAIN, "wiki": PRETRAIN,
        "mllm": SUPERVISED, "tools": SUPERVISED}


@pytest.mark.parametrize("registered", [True, False])
@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_lints_clean_and_fixes_every_row(name, registered, tmp_path):
    path = write_kind(tmp_path, name, registered=registered)
    report = lint_file(path)
    assert report.errors == 0, [f.message for f in report.findings]
    assert report.schema.task == TASK[name]
    assert report.schema.source == (name if registered else "detected")
    fixed = fix_file(path, tmp_path / "out.jsonl", yes=True)
    assert fixed.rows_rejected == 0 and fixed.rows_out == len(KINDS[name][1]())


@pytest.mark.parametrize("name", list(KINDS))
def test_register_writes_upstreams_entry_for_a_detected_file(name, tmp_path):
    path = write_kind(tmp_path, name, registered=False)
    result = register_dataset(path, name, tmp_path)
    assert result.entry == {"file_name": KINDS[name][0], **KINDS[name][2]}


def test_register_keeps_other_entries_and_keys(tmp_path):
    write_kind(tmp_path, "kto")
    info_path = tmp_path / "dataset_info.json"
    info = json.loads(info_path.read_text())
    info["kto"]["num_samples"] = 4
    info["other"] = {"hf_hub_url": "x/y", "split": "test"}
    info_path.write_text(json.dumps(info))
    path = write_kind(tmp_path, "c4", registered=False)
    register_dataset(path, "c4", tmp_path)
    register_dataset(tmp_path / KINDS["kto"][0], "kto", tmp_path)
    after = json.loads(info_path.read_text())
    assert after["other"] == {"hf_hub_url": "x/y", "split": "test"}
    assert after["kto"]["num_samples"] == 4 and after["kto"]["columns"] == {"messages": "messages", "kto_tag": "label"}
    assert after["c4"] == {"file_name": "c4_demo.jsonl", "columns": {"prompt": "text"}}


def _rewrite(path, rows):
    path.write_text(json.dumps(rows))


def _errors(path):
    return [(f.rule, f.line) for f in lint_file(path).findings if f.severity == "error"]


def test_preference_rules(tmp_path):
    path = write_kind(tmp_path, "dpo_alpaca")
    rows = json.loads(path.read_text())
    rows[1]["rejected"] = 3
    rows[2]["rejected"] = rows[2]["chosen"]
    del rows[3]["chosen"]
    _rewrite(path, rows)
    report = lint_file(path)
    rules = {(f.rule, f.severity) for f in report.findings if f.rule == "preference"}
    assert rules == {("preference", "error"), ("preference", "warning")}
    assert sum(f.rule == "preference" and f.severity == "error" for f in report.findings) == 2
    fixed = fix_file(path, tmp_path / "out.jsonl", yes=True)
    assert fixed.rows_rejected == 2 and fixed.rows_out == 4  # the same answers twice still load


def test_sharegpt_preference_needs_a_prompt_ending_with_the_user(tmp_path):
    path = write_kind(tmp_path, "dpo_sharegpt")
    rows = json.loads(path.read_text())
    rows[0]["conversations"].append({"from": "gpt", "value": "hello"})
    rows[1]["chosen"] = {"from": "human", "value": "x"}
    _rewrite(path, rows)
    rules = {r for r, _line in _errors(path)}
    assert rules == {"sharegpt-roles", "preference"}


def test_kto_tags_are_booleans_with_both_values(tmp_path):
    path = write_kind(tmp_path, "kto")
    rows = json.loads(path.read_text())
    rows[0]["label"] = "yes"
    _rewrite(path, rows)
    assert [r for r, _l in _errors(path)] == ["kto-tag"]
    for r in rows:
        r["label"] = True
    _rewrite(path, rows)
    report = lint_file(path)
    assert report.errors == 0
    assert [f.severity for f in report.findings if f.rule == "kto-tag"] == ["warning"]


def test_media_paths_exist_and_match_the_placeholders(tmp_path):
    path = write_kind(tmp_path, "mllm")
    rows = json.loads(path.read_text())
    rows[0]["images"] = ["mllm_demo_data/missing.png"]
    rows[1]["messages"][0]["content"] = "no placeholder here"
    rows[2]["images"] = ["mllm_demo_data/1.png", "mllm_demo_data/1.png"]
    _rewrite(path, rows)
    messages = [f.message for f in lint_file(path).findings if f.rule == "media"]
    assert len(messages) == 3 and "missing.png" in messages[0], messages
    fixed = fix_file(path, tmp_path / "out.jsonl", yes=True)
    assert fixed.rows_rejected == 3


def test_media_without_its_folder_is_an_error(tmp_path):
    path = write_kind(tmp_path, "mllm")
    for p in (tmp_path / "mllm_demo_data").iterdir():
        p.unlink()
    assert len(_errors(path)) == len(KINDS["mllm"][1]())


def test_tool_calls_parse_and_name_declared_tools(tmp_path):
    path = write_kind(tmp_path, "tools")
    rows = json.loads(path.read_text())
    rows[0]["conversations"][1]["value"] = "lookup_order(A1)"
    rows[1]["conversations"][1]["value"] = json.dumps({"name": "refund", "arguments": {}})
    _rewrite(path, rows)
    report = lint_file(path)
    tools = [(f.line, f.severity) for f in report.findings if f.rule == "tools"]
    assert [s for _l, s in tools] == ["error", "warning"]


def test_pretrain_text_and_kind_override(tmp_path):
    path = write_kind(tmp_path, "c4", registered=False)
    path.write_text(path.read_text() + json.dumps({"text": 5}) + "\n")
    assert _errors(path) == [("pretrain-text", 7)]
    sft = tmp_path / "sft.jsonl"
    sft.write_text(json.dumps({"instruction": "a", "input": "", "output": "b"}) + "\n")
    report = lint_file(sft, LintOptions(kind=PREFERENCE))
    assert [f.rule for f in report.findings if f.severity == "error"] == ["preference"]


def test_supervised_rows_are_read_as_their_entry_says(tmp_path):
    """A question/answer file registered without a columns map: LLaMA-Factory reads instruction/output,
    finds neither, and drops every row, so lint says so (an error, not the 'register writes a map' hint)."""
    (tmp_path / "qa.jsonl").write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    assert lint_file(tmp_path / "qa.jsonl").errors == 0
    (tmp_path / "dataset_info.json").write_text(json.dumps({"qa": {"file_name": "qa.jsonl"}}))
    assert [f.rule for f in lint_file(tmp_path / "qa.jsonl").findings if f.severity == "error"] == ["missing-keys"]


@pytest.mark.parametrize("name", ["dpo_sharegpt", "dpo_alpaca"])
def test_preview_and_render_show_the_prompt_with_both_answers(name, tmp_path):
    from core.data.preview import PreviewRow, columns
    from core.data.render import render_row

    path = write_kind(tmp_path, name)
    schema = lint_file(path).schema
    row = json.loads(path.read_text())[0]
    assert columns(schema) == ["prompt", "chosen", "rejected"]
    assert PreviewRow(1, "", row).cells(schema) == [
        "How do I reset my password?", "Click 'Forgot password' on the sign-in page and follow the email.",
        "No idea."]
    text = render_row(row, schema, "llama3")
    chosen, rejected = text.split("── rejected ──")
    assert "How do I reset my password?" in chosen and "follow the email" in chosen and "No idea." not in chosen
    assert "How do I reset my password?" in rejected and "No idea." in rejected


def test_pretrain_preview_and_stats(tmp_path):
    from core.data.preview import PreviewRow, columns
    from core.data.render import render_row

    path = write_kind(tmp_path, "c4")
    report = lint_file(path)
    row = json.loads(path.read_text().splitlines()[0])
    assert columns(report.schema) == ["text"]
    cells = PreviewRow(1, "", row).cells(report.schema)
    assert len(cells) == 1 and cells[0].startswith(row["text"][:40])
    assert render_row(row, report.schema, "llama3") == row["text"]
    assert list(report.stats.fields) == ["text"] and report.stats.rows == 6


def test_a_txt_file_is_pretraining_text_a_row_per_line_as_llamafactory_reads_it(tmp_path, uses_llamafactory):
    """datasets' text builder (what LLaMA-Factory loads a .txt with): every line a row, an empty one too,
    CRLF and a lone CR end a line, a BOM stays in the first row's text. Lint counts the same rows, warns
    about the empty one and the BOM; plain fix keeps every row (the BOM removed), --yes drops the empty one."""
    from datasets import load_dataset

    path = tmp_path / "notes.txt"
    path.write_bytes("\ufeffFirst document.\r\nSecond document.\rThird one.\n\nFifth, after an empty line.\n"
                     .encode("utf-8"))
    loaded = load_dataset("text", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    report = lint_file(path)
    assert report.rows == len(loaded) == 5 and report.schema.text_file and report.schema.task == PRETRAIN
    assert report.errors == 0, [f.message for f in report.findings]
    assert {(f.rule, f.line) for f in report.findings if f.severity == "warning"} == {("bom", 1), ("empty-output", 4)}
    assert [f.rule for f in report.findings if f.severity == "info" and f.line == 1] == ["pretrain-text"]
    kept = fix_file(path, tmp_path / "kept.txt")
    assert (kept.rows_out, kept.rows_rejected) == (5, 0) and kept.kept_unfixed["empty-output"] == 1
    assert (tmp_path / "kept.txt").read_text(encoding="utf-8").splitlines() == [
        "First document.", "Second document.", "Third one.", "", "Fifth, after an empty line."]
    dropped = fix_file(path, tmp_path / "dropped.jsonl", yes=True)
    assert (dropped.rows_out, dropped.rows_rejected) == (4, 1)
    assert json.loads((tmp_path / "dropped.jsonl").read_text().splitlines()[0]) == {"text": "First document."}
    assert lint_file(tmp_path / "kept.txt").warnings == 1  # the empty row only


def test_txt_files_that_are_not_pretraining_text(tmp_path):
    """An unregistered chat log is left to convert; a .txt entry that reads other columns is an error that
    says which entry reads it; JSON in a .txt is refused; fix writes .txt only from a .txt of text."""
    from core.data.fix import FixRefused
    from core.data.register import lint_dataset_info

    chat = tmp_path / "chat.txt"
    chat.write_text("User: where is my order?\nAgent: on its way.\n", encoding="utf-8")
    assert [f.rule for f in lint_file(chat).findings] == ["not-json"]
    assert lint_file(chat, LintOptions(kind=PRETRAIN)).schema.text_file
    with pytest.raises(FixRefused, match="convert"):
        fix_file(chat, tmp_path / "chat_fixed.jsonl")
    wiki = write_kind(tmp_path, "wiki")
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    info["wiki"]["columns"] = {"prompt": "instruction", "response": "output"}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info))
    errors = [f for f in lint_file(wiki).findings if f.severity == "error"]
    assert [f.rule for f in errors] == ["pretrain-text"] and "entry wiki" in errors[0].message
    assert [f.rule for f in lint_dataset_info(tmp_path)] == ["dataset-info"]
    with pytest.raises(FixRefused, match=".jsonl"):
        fix_file(write_kind(tmp_path, "c4"), tmp_path / "c4.txt")


def test_register_refuses_json_in_a_txt_file(tmp_path):
    from core.data.register import RegisterRefused

    txt = tmp_path / "rows.txt"
    txt.write_text(json.dumps({"instruction": "q", "output": "a"}) + "\n")
    assert [f.rule for f in lint_file(txt).findings if f.severity == "error"] == ["extension"]
    with pytest.raises(RegisterRefused):
        register_dataset(txt, "rows", tmp_path)


@pytest.mark.parametrize("name", ["tools", "mllm"])
def test_the_same_question_with_other_tools_or_media_is_no_conflict(name, tmp_path):
    """glaive_toolcall_en_demo got 25 conflicts for one question asked with different tool lists: the tools
    and the media a row declares are part of its prompt for duplicates and conflicts."""
    path = write_kind(tmp_path, name)
    rows = json.loads(path.read_text())
    other = json.loads(json.dumps(rows[0]))
    key = "conversations" if name == "tools" else "messages"
    other[key][-1]["value" if name == "tools" else "content"] = "Another answer, for another context."
    if name == "tools":
        other["tools"] = json.dumps([{"name": "cancel_order", "parameters": {}}])
        other[key][1]["value"] = json.dumps({"name": "cancel_order", "arguments": {}})
    else:
        (tmp_path / "mllm_demo_data" / "2.png").write_bytes((tmp_path / "mllm_demo_data" / "1.png").read_bytes())
        other["images"] = ["mllm_demo_data/2.png"]
    same = json.loads(json.dumps(rows[0]))
    _rewrite(path, rows + [other, same])
    report = lint_file(path)
    assert report.errors == 0, [f.message for f in report.findings if f.severity == "error"]
    assert [f.rule for f in report.findings if f.rule in ("conflict", "duplicate")] == ["duplicate"]
    other["images" if name == "mllm" else "tools"] = rows[0]["images" if name == "mllm" else "tools"]
    if name == "tools":
        other[key][1] = rows[0][key][1]
    _rewrite(path, rows + [other])
    assert [f.rule for f in lint_file(path).findings if f.rule == "conflict"] == ["conflict"]


def test_the_format_line_names_the_tools_and_media(tmp_path):
    tools = lint_file(write_kind(tmp_path / "t", "tools"))
    assert tools.format == "sharegpt · supervised (sft) · tools · as dataset_info.json entry tools says"
    mllm = lint_file(write_kind(tmp_path / "m", "mllm", registered=False))
    assert mllm.format == "messages · supervised (sft) · images · detected from the rows"
    assert lint_file(write_kind(tmp_path / "c", "c4", registered=False)).format == (
        "alpaca (text) · pre-training text (pt) · detected from the rows")


def test_txt_preview_and_stats_show_its_lines(tmp_path):
    from core.data.preview import Preview, columns

    path = write_kind(tmp_path, "wiki")
    preview = Preview(path)
    assert columns(preview.schema) == ["text"] and preview.schema.text_file
    first = preview.first_page(2)
    assert [r.line for r in first] == [1, 2] and first[0].cells(preview.schema) == [KINDS["wiki"][1]()[0]]
    preview.build()
    assert preview.total() == len(KINDS["wiki"][1]()) and preview.page(5, 1)[0].value == {"text": KINDS["wiki"][1]()[5]}
    report = lint_file(path)
    assert list(report.stats.fields) == ["text"] and report.stats.rows == 6
