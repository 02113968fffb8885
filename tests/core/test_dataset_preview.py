"""Reader, line index, preview pages and the template renderer."""

import json
import threading
from pathlib import Path

import pytest

from core.data.encoding import guess_encoding_bytes
from core.data.index import LineIndex, head_lines
from core.data.preview import Preview
from core.data.reader import ReadNotes, iter_records, probe_file
from core.data.render import BUILTIN, render_row, row_messages
from core.data.schema import Schema

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "data"


@pytest.mark.parametrize("raw,encoding", [
    (b'{"a": "b"}\n', "utf-8"),
    ("\ufeff{}".encode("utf-8"), "utf-8-sig"),
    ('{"a": "中"}\n'.encode("utf-16"), "utf-16-le"),
    ('{"a": "中"}\n'.encode("utf-16-be"), "utf-16-be"),
    ('{"a": "中"}\n'.encode("utf-16-le"), "utf-16-le"),
    ('{"a": "中文内容"}\n'.encode("gb18030"), "gb18030"),
    (b"\x00\x01\x02\x00" * 50 + b"\x00" * 100, "binary"),
])
def test_encoding_decisions_are_said(raw, encoding):
    guess = guess_encoding_bytes(raw, complete=True)
    assert guess.encoding == encoding and guess.reason


def test_reader_keeps_line_numbers_across_layouts(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"a": 1}\r\n\r\n{"a": 2}{"a": 3}\n\n{"a": 4}')
    notes = ReadNotes()
    recs = list(iter_records(probe_file(p), notes))
    assert [r.line for r in recs] == [1, 3, 5]
    assert notes.blank_lines == [2, 4] and notes.crlf_lines == 2 and not notes.final_newline
    assert [r.offset for r in recs] == [0, 12, 30]
    arr = tmp_path / "a.json"
    arr.write_text('[\n  {"a": 1},\n\n  {"a":\n   2}\n]\n')
    recs = list(iter_records(probe_file(arr), ReadNotes()))
    assert [(r.line, json.loads(r.raw)) for r in recs] == [(2, {"a": 1}), (4, {"a": 2})]


def test_one_line_array_bigger_than_a_buffer(tmp_path):
    rows = [{"instruction": f"q{i}", "input": "", "output": "x" * 300} for i in range(20000)]
    p = tmp_path / "big.json"
    p.write_text(json.dumps(rows))
    recs = list(iter_records(probe_file(p), ReadNotes()))
    assert len(recs) == 20000 and all(r.line == 1 for r in recs)
    assert json.loads(recs[-1].raw)["instruction"] == "q19999"


def test_line_index_pages_while_it_grows(tmp_path):
    p = tmp_path / "lines.jsonl"
    p.write_text("".join(json.dumps({"i": i}) + "\n" for i in range(50000)) + '{"i": "last"}')
    idx = LineIndex(p)
    assert idx.known_lines == 0 and idx.line_count() is None
    t = threading.Thread(target=idx.build)
    t.start()
    t.join()
    assert idx.complete and idx.line_count() == 50001
    assert [json.loads(x)["i"] for x in idx.lines(49998, 5)] == [49998, 49999, "last"]
    assert head_lines(p, 2) == [b'{"i": 0}', b'{"i": 1}']


def test_preview_jsonl_and_array(tmp_path):
    pv = Preview(DATA / "support_messy.jsonl")
    first = pv.first_page(5)
    assert [r.line for r in first] == [1, 2, 3, 4, 5]
    assert first[0].value["instruction"] == "如何重置账户密码？"  # BOM stripped
    assert first[3].error == "blank line"
    pv.build()
    assert pv.complete and pv.total() == 33
    assert pv.page(5, 1)[0].error.startswith("L6:")  # the trailing comma, repaired for display
    assert pv.page(5, 1)[0].value["output"].startswith("因商品")
    assert pv.position_of_line(30) == 29
    cells = pv.page(29, 1)[0].cells(pv.schema)
    assert len(cells) == 3
    arr = Preview(DATA / "qa_pairs.json")
    arr.build()
    assert arr.total() == 10 and arr.schema.prompt == "question"
    assert arr.position_of_line(10) == 2 and arr.page(2, 1)[0].line == 10
    gbk = Preview(FIXTURES / "gbk.jsonl")
    assert gbk.first_page(1)[0].value["instruction"] == "如何重置密码？"


def test_builtin_templates_render_like_llamafactory_writes_them():
    row = {"instruction": "如何重置密码？", "input": "账号 A", "output": "点击忘记密码。",
           "history": [["你好", "您好"]], "system": "你是客服。"}
    s = Schema(history="history", system="system")
    system, msgs = row_messages(row, s)
    assert system == "你是客服。" and [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[2]["content"] == "如何重置密码？\n账号 A"
    llama3 = render_row(row, s, "llama3")
    assert llama3.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n你是客服。<|eot_id|>")
    assert llama3.endswith("点击忘记密码。<|eot_id|>")
    qwen = render_row({"instruction": "hi", "input": "", "output": "hello"}, Schema(), "qwen")
    assert qwen.startswith("<|im_start|>system\nYou are Qwen")
    assert set(BUILTIN) >= {"llama3", "qwen", "alpaca", "default"}
