"""Numbered headings found for chunking, by one grammar (core/data/synth/headings.py): in plain text, in a PDF's
text layer and in converted documents; the outlines of real public documents (tests/fixtures/synth/outlines,
SOURCES.md there) come out right, the guards keep lists, dates, prices and contents pages out, and the section
path reaches the prompts and the provenance of the generated pairs."""

import json
from pathlib import Path

import pytest

from core.data.synth.chunks import chunk_document, sections
from core.data.synth.documents import Document, read_document
from core.data.synth.generate import SynthOptions
from core.data.synth.headings import find_headings
from core.data.synth.pipeline import SynthRequest, plan_chunks, synthesize
from tests.synth_documents import write_numbered_pdf, write_numbered_text, write_plain_docx, write_pptx
from tests.synth_server import FaultServer

OUTLINES = Path(__file__).parents[1] / "fixtures" / "synth" / "outlines"


def _expected(path: Path) -> list[str]:
    stack: list[str] = []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        depth = (len(line) - len(line.lstrip())) // 2
        del stack[depth:]
        stack.append(line.strip())
        out.append(" > ".join(stack))
    return out


def _paths(text: str) -> list[str]:
    return [path for path, _start, _body in sections(text) if path]


@pytest.mark.parametrize("fixture", sorted(OUTLINES.glob("*/*.txt")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_outlines_come_out_right(fixture):
    assert _paths(fixture.read_text(encoding="utf-8")) == _expected(fixture.with_suffix(".outline"))


def test_the_collection_has_its_sources_and_a_held_apart_part():
    sources = (OUTLINES / "SOURCES.md").read_text(encoding="utf-8")
    fixtures = sorted(OUTLINES.glob("*/*.txt"))
    assert len(fixtures) >= 8 and any(p.parent.name == "held" for p in fixtures)
    for p in fixtures:
        assert f"{p.parent.name}/{p.stem}" in sources and p.with_suffix(".outline").is_file()


def _titles(text: str) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in find_headings(text)]


def test_a_plain_text_manual_is_chunked_by_its_numbered_sections(tmp_path):
    doc = read_document(write_numbered_text(tmp_path))
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["1 范围", "2 规格", "3 安装", "3 安装 > 3.1 环境要求",
                                           "3 安装 > 3.2 安装步骤", "4 维护"]
    assert chunks[3].text.startswith("3 安装 > 3.1 环境要求\n\n环境温度")
    # the steps, the date and the price stay in their sections' text
    assert "1. 关闭进水阀" in chunks[4].text and "2024.03.01" in chunks[1].text and "99.00 元" in chunks[5].text


def test_a_pdf_without_bookmarks_is_chunked_by_its_numbered_sections(tmp_path):
    chunks = chunk_document(read_document(write_numbered_pdf(tmp_path)))
    assert [(c.heading, c.page) for c in chunks] == [
        ("1 Scope", 1), ("2 Installation", 1), ("2 Installation > 2.1 Requirements", 1),
        ("2 Installation > 2.2 Steps", 1), ("3 Maintenance", 1), ("4 Warranty", 2)]
    assert "1. Close the inlet valve" in chunks[3].text


def test_a_word_file_typed_without_heading_styles_gets_its_headings_from_the_numbers(tmp_path):
    chunks = chunk_document(read_document(write_plain_docx(tmp_path)))
    assert [c.heading for c in chunks] == ["第一章 总则", "第一章 总则 > 一、工作时间", "第一章 总则 > 二、请假",
                                           "第二章 奖惩"]


def test_every_numbering_the_issue_names():
    text = "\n\n".join(["第一章 总则", "正文。", "第一节 适用范围", "正文。", "一、对象", "正文。", "（一）正式员工", "正文。",
                        "（二）试用员工", "正文。", "二、期限", "正文。", "第二节 职责", "正文。", "第二章 考勤", "正文。"])
    assert _titles(text) == [(1, "第一章 总则"), (2, "第一节 适用范围"), (3, "一、对象"), (4, "（一）正式员工"),
                             (4, "（二）试用员工"), (3, "二、期限"), (2, "第二节 职责"), (1, "第二章 考勤")]
    english = "Chapter 2 Setup\nText.\nSection 1 Power\nText.\nSection 2 Network\nText.\nChapter 3 Use\nText.\n"
    assert _titles(english) == [(1, "Chapter 2 Setup"), (2, "Section 1 Power"), (2, "Section 2 Network"),
                                (1, "Chapter 3 Use")]
    assert _titles("第一章 總則\n正文。\n第一節 範圍\n正文。\n第二節 職責\n正文。\n") == [
        (1, "第一章 總則"), (2, "第一節 範圍"), (2, "第二節 職責")]
    decimal = "1. Intro\nText.\n1.1 Scope\nText.\n1.1.1 Terms\nText.\n1.2 Audience\nText.\n2. Install\nText.\n"
    assert _titles(decimal) == [(1, "1. Intro"), (2, "1.1 Scope"), (3, "1.1.1 Terms"), (2, "1.2 Audience"),
                                (1, "2. Install")]


def test_markdown_headings_and_numbered_lines_nest_together():
    text = "# Guide\n\n## 3 Install\n\nText.\n\n3.1 Requirements\nText.\n\n3.2 Steps\nText.\n\n## 4 Care\n\nText.\n"
    assert _paths(text) == ["Guide", "Guide > 3 Install", "Guide > 3 Install > 3.1 Requirements",
                            "Guide > 3 Install > 3.2 Steps", "Guide > 4 Care"]
    assert _titles("**1. 总则**\n\n正文。\n\n**2. 考勤**\n\n正文。\n") == [(1, "1. 总则"), (1, "2. 考勤")]


@pytest.mark.parametrize("text", [
    "Do it in this order:\n1. Open the box\n",  # an item after a colon
    "Steps\n1. Open the box\n2. Plug it in\n3. Switch it on\n",  # a list typed line under line
    "Prices\n12.99 dollars for one seat\n99.00 元 每年\n",  # prices
    "Dates\n2024.03.01 release\n2024-03-01 release\n3月1日起执行\n",  # dates
    "Power\n1.5 kW when heating\n3-5 working days to deliver\n",  # a measure, a range
    "Refunds\n1. The refund reaches your card in 5 days.\n",  # a sentence, not a title
    "一、为了规范管理，提高效率，特制定本制度。\n",  # a paragraph that starts with a number
    "Contents ........ 3\n1 Scope ........ 4\n",  # dot leaders
    "```\n1. not a heading\n2. nor this\n```\n",  # code
    "| 1 | Basic | 9 |\n| 2 | Team | 49 |\n",  # a table
])
def test_lists_dates_prices_sentences_and_code_are_no_headings(text):
    assert _titles(text) == []


def test_a_number_that_does_not_follow_on_is_no_heading():
    text = "1 Scope\nText.\n2 Terms\nText.\n12 months later the filter is replaced\nText.\n3 Use\nText.\n"
    assert _titles(text) == [(1, "1 Scope"), (1, "2 Terms"), (1, "3 Use")]
    # a table of contents names the headings before they come: only the ones in the body count
    toc = "Contents\n1 Scope\n2 Use\n\n1 Scope\nText.\n2 Use\nText.\n"
    assert [h.line for h in find_headings(toc)] == [4, 6]
    # the same 一、 under two chapters is no contents
    assert _paths("第一章 招聘\n一、目的\n规范。\n第二章 培训\n一、目的\n提高。\n") == [
        "第一章 招聘", "第一章 招聘 > 一、目的", "第二章 培训", "第二章 培训 > 一、目的"]


def test_a_deck_gives_slide_titles_notes_and_slide_numbers_to_its_chunks(tmp_path):
    plan = plan_chunks([write_pptx(tmp_path)])
    assert [(c.heading, c.page) for c in plan.chunks] == [
        ("Support onboarding", 1), ("Refund rules", 2), ("Refund rules > Notes", 2), ("Response times", 3),
        ("Response times > Notes", 3)]


def test_generated_pairs_keep_their_section(workspace, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    write_numbered_text(docs)
    write_numbered_pdf(docs)
    server = FaultServer()
    try:
        report = synthesize(workspace, SynthRequest([docs], workspace.data_dir / "manual.jsonl",
                                                    SynthOptions(concurrency=2, backoff_s=0.01), min_grounding=0.0,
                                                    api_base=server.url))
        prompts = [b["messages"][-1]["content"] for b in server.bodies]
    finally:
        server.close()
    assert report.rows > 0
    prov = [json.loads(line) for line in
            (workspace.data_dir / "manual.provenance.jsonl").read_text(encoding="utf-8").splitlines()]
    headings = {p["heading"] for p in prov}
    assert {"3 安装 > 3.1 环境要求", "2 Installation > 2.1 Requirements"} <= headings and "" not in headings
    assert any("3 安装 > 3.1 环境要求" in p for p in prompts)


def test_a_document_of_text_alone_still_is_one_section():
    doc = Document("x.txt", "text", "Orders ship in two days.\nRefunds take a week.\n")
    assert [c.heading for c in chunk_document(doc)] == [""]
