"""Rows in = rows out + rejects for chat transcripts of every layout: generated conversations written as
`TIME NAME` / `NAME TIME` header lines, `[TIME] NAME: text` lines, LINE-style tab lines, JSON message
objects and a CSV message log; each answered conversation is one row, each unanswered tail one reject."""

import csv
import io
import json
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings, strategies as st

from core.data.convert import convert_file

AGENT = "客服-Ann"
CUSTOMERS = ["Bob Lee", "李雷", "Cara", "韩梅梅"]
WORDS = st.sampled_from(["hello", "order", "refund", "退货", "发票", "多久", "thanks", "why", "快递", "size", "ok"])
TEXT = st.lists(WORDS, min_size=2, max_size=5).map(" ".join)
MESSAGE = st.tuples(st.booleans(), TEXT, st.integers(0, 5))  # (by the agent, text, 0: a placeholder instead)
CONVERSATION = st.tuples(st.sampled_from(CUSTOMERS), st.lists(MESSAGE, min_size=1, max_size=7))
LAYOUTS = ("header", "trail", "colon", "tab", "json", "csv")


def _messages(convs):
    start = datetime(2024, 3, 1, 9, 0, 0)
    for c, (customer, msgs) in enumerate(convs):
        for k, (by_agent, text, kind) in enumerate(msgs):
            yield c, start + timedelta(days=c, minutes=k), AGENT if by_agent else customer, \
                "[图片]" if kind == 0 else text


def render(convs, layout: str) -> str:
    msgs = list(_messages(convs))
    if layout == "json":
        return json.dumps({"messages": [{"chat": f"c{c}", "from": who, "text": text, "time": t.isoformat()}
                                        for c, t, who, text in msgs]}, ensure_ascii=False)
    if layout == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["chat_id", "sender", "content", "sent_at"])
        for c, t, who, text in msgs:
            w.writerow([f"c{c}", who, text, t.strftime("%Y-%m-%d %H:%M:%S")])
        return buf.getvalue()
    out, day = [], None
    for _c, t, who, text in msgs:
        if layout == "header":
            out += [f"{t:%Y-%m-%d %H:%M:%S} {who}", text, ""]
        elif layout == "trail":
            out += [f"{who} {t:%Y-%m-%d %H:%M:%S}", text, ""]
        elif layout == "colon":
            out.append(f"[{t.month}/{t.day}/{t:%y}, {t.hour % 12 or 12}:{t:%M:%S} {'AM' if t.hour < 12 else 'PM'}]"
                       f" {who}: {text}")
        else:
            if t.date() != day:
                day = t.date()
                out.append(f"{t:%Y/%m/%d}(Mon)")
            out.append(f"{t:%H:%M}\t{who}\t{text}")
    return "\n".join(out) + "\n"


def expected(convs) -> tuple[int, int]:
    """(rows, rejects): merged turns; the trailing customer turns are the tail; the rest a row when it asks."""
    rows = rejects = 0
    for _customer, msgs in convs:
        roles = [by_agent for by_agent, _t, kind in msgs if kind != 0]
        merged = [r for i, r in enumerate(roles) if i == 0 or roles[i - 1] != r]
        if not merged:
            continue
        tail = 0
        while tail < len(merged) and not merged[len(merged) - 1 - tail]:
            tail += 1
        body = merged[:len(merged) - tail]
        rejects += bool(tail)
        if body:
            asks = False in body
            rows, rejects = rows + asks, rejects + (not asks)
    return rows, rejects


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(CONVERSATION, min_size=1, max_size=4), st.sampled_from(LAYOUTS))
def test_rows_in_are_rows_out_plus_rejects(tmp_path, convs, layout):
    said = {who for _c, _t, who, text in _messages(convs) if text != "[图片]"}
    if len(said) < 2 or sum(1 for _ in _messages(convs)) < 2:
        return  # one voice: nothing tells a transcript from a note
    src = tmp_path / f"chat.{'json' if layout == 'json' else 'csv' if layout == 'csv' else 'txt'}"
    src.write_text(render(convs, layout), encoding="utf-8")
    customers = tuple(sorted(said - {AGENT}))
    report = convert_file(src, tmp_path / "out.jsonl", source_format="transcript", force=True,
                          agents=(AGENT,) if AGENT in said else (), customers=customers)
    assert report.balanced and report.rows_in == report.rows_out + report.rows_rejected
    assert (report.rows_out, report.rows_rejected) == expected(convs)
    if report.rows_out:
        assert "[图片]" not in (tmp_path / "out.jsonl").read_text(encoding="utf-8")
