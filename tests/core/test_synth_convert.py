"""Documents read through markitdown's converters (core/data/synth/documents.py): a PowerPoint deck (titles,
a table, speaker notes), an EPUB, an Excel workbook, HTML and Word tables, and damaged files named with what to
do. The files are made by the tests (python-pptx, openpyxl, a zipped EPUB: tests/synth_documents.py)."""

import pytest

from core.data.synth.chunks import chunk_document
from core.data.synth.documents import DocumentError, find_documents, read_document
from tests.synth_documents import write_epub, write_html, write_pptx, write_xlsx


def test_a_deck_keeps_slide_titles_as_headings_tables_as_tables_and_notes_as_notes(tmp_path):
    doc = read_document(write_pptx(tmp_path))
    assert doc.kind == "pptx" and len(doc.pages) == 3
    lines = doc.text.splitlines()
    assert [line for line in lines if line.startswith("# ")] == ["# Support onboarding", "# Refund rules",
                                                                "# Response times"]
    assert "| Channel | First reply |" in lines and "| E-mail | 4 hours |" in lines
    assert lines[lines.index("## Notes") + 1] == "Remind them that opened software cannot be refunded."
    assert "<!--" not in doc.text
    chunks = chunk_document(doc)
    notes = [c for c in chunks if c.heading.endswith("> Notes")]
    assert [(c.heading, c.page) for c in notes] == [("Refund rules > Notes", 2), ("Response times > Notes", 3)]
    assert "Chat is staffed" in notes[1].text and "Chat is staffed" not in chunks[3].text


def test_a_slide_without_a_title_is_named_by_its_number(tmp_path):
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title placeholder
    box = slide.shapes.add_textbox(0, 0, 100, 100)
    box.text_frame.text = "Call the hotline for any outage."
    path = tmp_path / "blank.pptx"
    deck.save(str(path))
    doc = read_document(path)
    assert doc.text.startswith("# Slide 1\n") and "hotline" in doc.text


def test_an_epub_keeps_its_chapters_and_tables(tmp_path):
    doc = read_document(write_epub(tmp_path))
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks if c.heading] == ["第一章 入职", "第一章 入职 > 1.1 工牌", "第二章 休假"]
    assert "| 1-10年 | 5天 |" in chunks[-1].text


def test_a_workbook_is_a_section_per_sheet_of_tables(tmp_path):
    doc = read_document(write_xlsx(tmp_path))
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["Plans", "Add-ons"]
    assert "| Team | 49 | 10 |" in chunks[0].text and "| Extra storage | 5 |" in chunks[1].text


def test_a_table_without_a_header_row_has_no_empty_one(tmp_path):
    doc = read_document(write_html(tmp_path))
    assert "| Zone A | 2 days |" in doc.text and "|  |" not in doc.text and "---" not in doc.text


def test_html_in_gbk_is_decoded_before_it_is_converted(tmp_path):
    path = tmp_path / "faq.html"
    path.write_bytes("<html><body><h1>退货</h1><p>七天内可以退货。</p></body></html>".encode("gbk"))
    doc = read_document(path)
    assert doc.encoding == "gb18030" and doc.text.startswith("# 退货\n") and "七天内可以退货" in doc.text


@pytest.mark.parametrize(("name", "says"), [("deck.pptx", "not a readable PPTX file.*PowerPoint as .pptx"),
                                            ("book.epub", "not a readable EPUB file"),
                                            ("sheet.xlsx", "not a readable XLSX file.*Excel as .xlsx")])
def test_a_damaged_file_names_itself_and_what_to_do(tmp_path, name, says):
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DocumentError, match=f"{name} is {says}"):
        read_document(path)


def test_a_folder_of_every_kind_is_walked(tmp_path):
    made = [write_pptx(tmp_path), write_epub(tmp_path), write_xlsx(tmp_path), write_html(tmp_path)]
    assert find_documents([tmp_path]) == sorted(made)


def test_a_long_sheet_is_cut_between_rows_and_every_chunk_keeps_the_header(tmp_path):
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "价目表"
    sheet.append(("套餐", "月费", "席位"))
    for n in range(200):
        sheet.append((f"套餐{n}", n * 3, n))
    path = tmp_path / "价目表.xlsx"
    book.save(str(path))
    chunks = chunk_document(read_document(path), budget=128, overlap=16)
    assert len(chunks) > 5 and all(c.tokens <= 128 for c in chunks)
    for c in chunks:
        lines = c.text.splitlines()
        assert lines[:4] == ["价目表", "", "| 套餐 | 月费 | 席位 |", "| --- | --- | --- |"]
        assert all(line.startswith("| 套餐") and line.endswith(" |") for line in lines[4:])  # whole rows only
    assert any("| 套餐199 | 597 | 199 |" in c.text for c in chunks)
