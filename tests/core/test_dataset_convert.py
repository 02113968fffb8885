"""Convert: chat logs (sessions into history), Q&A text (GBK too), CSV/TSV with chosen or guessed
columns, sharegpt and messages into alpaca JSON Lines; every unit written or rejected."""

import json
from pathlib import Path

import pytest

from core.files.atomic import FileExistsRefused
from core.data.convert import ConvertError, convert_file, detect_source, parse_columns
from core.data.fix import default_rejects_path
from core.data.lint import lint_file

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "data"


def rows(p: Path) -> list[dict]:
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]


def test_detection():
    assert detect_source(DATA / "cs_chatlog_zh.txt") == "chatlog"
    assert detect_source(DATA / "faq_gbk.txt") == "qa"
    assert detect_source(DATA / "tickets.csv") == "csv"
    assert detect_source(DATA / "sharegpt_chats.json") == "sharegpt"
    assert detect_source(FIXTURES / "messages.jsonl") == "messages"
    assert detect_source(DATA / "qa_pairs.json") == "qa"


def test_chatlog_sessions_become_rows_with_history(tmp_path):
    out = tmp_path / "chat.jsonl"
    r = convert_file(DATA / "cs_chatlog_zh.txt", out)
    got = rows(out)
    assert r.balanced and len(got) == 5 == r.rows_out
    first = got[0]
    assert first["instruction"] == "好的谢谢" and first["output"].startswith("不客气")
    assert first["history"][0][0] == "你好，我的订单一直显示待发货，怎么回事？"  # timestamps and tags gone
    assert len(first["history"]) == 2
    assert got[2]["instruction"] == "收到的杯子碎了\n怎么处理？"  # one speaker's lines joined
    assert all(list(x) == ["instruction", "input", "output", "history"] for x in got)
    report = lint_file(out)
    assert report.errors == 0 and report.schema.history == "history"


def test_english_chatlog_drops_unanswered_and_greeting(tmp_path):
    out = tmp_path / "en.jsonl"
    r = convert_file(FIXTURES / "chatlog_en.txt", out)
    got = rows(out)
    assert [x["instruction"] for x in got] == ["It is 20240611-8841.", "How do I change my address?"]
    assert r.notes and r.ignored_lines == [1]
    assert got[0]["history"] == [["Hi, my parcel has not arrived.",
                                  "Sorry to hear that. Could you give me the order number?"]]


def test_gbk_qa_text(tmp_path):
    out = tmp_path / "faq.jsonl"
    r = convert_file(DATA / "faq_gbk.txt", out)
    got = rows(out)
    assert r.rows_out == 8 and got[0] == {"instruction": "如何重置账户密码？", "input": "",
                                          "output": got[0]["output"]}
    assert got[0]["output"].startswith("您可以点击登录页面")
    assert out.read_bytes().decode("utf-8")  # UTF-8 out whatever came in


def test_csv_guessed_and_chosen_columns(tmp_path):
    out = tmp_path / "t.jsonl"
    r = convert_file(DATA / "tickets.csv", out)
    assert r.rows_out == 16 and rows(out)[0]["instruction"] == "How do I reset my password?"
    tsv = tmp_path / "tsv.jsonl"
    r2 = convert_file(FIXTURES / "tickets.tsv", tsv)
    assert (r2.rows_out, r2.rows_rejected) == (2, 1)
    assert rows(tsv)[0] == {"instruction": "How do I reset my password?", "input": "web",
                            "output": "Use Forgot password on the sign-in page."}
    assert json.loads(default_rejects_path(tsv).read_text().splitlines()[0])["line"] == 4
    chosen = tmp_path / "c.jsonl"
    convert_file(DATA / "tickets.csv", chosen, columns=parse_columns("instruction=category,output=agent_reply"))
    assert rows(chosen)[0]["instruction"] == "general"
    with pytest.raises(ConvertError, match="no column \"nope\""):
        convert_file(DATA / "tickets.csv", tmp_path / "n.jsonl", columns={"instruction": "nope"})


def test_sharegpt_and_messages(tmp_path):
    sg = tmp_path / "sg.jsonl"
    convert_file(DATA / "sharegpt_chats.json", sg)
    got = rows(sg)
    assert got[0]["history"] == [["我想退货。", "好的，请问是什么原因需要退货呢？"]]
    assert got[2]["system"] == "你是一名耐心的电商客服。"
    m = tmp_path / "m.jsonl"
    r = convert_file(FIXTURES / "messages.jsonl", m)
    assert r.balanced and (r.rows_out, r.rows_rejected) == (2, 2)  # a tool turn; a greeting with no answer
    got = rows(m)
    assert got[0]["system"] == "You are a support agent." and got[1]["history"] == [["Refund?",
                                                                                    "3 to 5 business days."]]
    reasons = [json.loads(x)["reason"] for x in default_rejects_path(m).read_text().splitlines()]
    assert "tool" in reasons[0]


def test_refusals(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text("keep\n")
    with pytest.raises(FileExistsRefused):
        convert_file(DATA / "faq_gbk.txt", out)
    assert out.read_text() == "keep\n"
    empty = tmp_path / "e.txt"
    empty.write_text("just some words\nno tags\n")
    with pytest.raises(ConvertError, match="no speaker tags"):
        convert_file(empty, tmp_path / "x.jsonl")
    with pytest.raises(ConvertError):
        parse_columns("instruction")
