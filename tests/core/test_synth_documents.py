"""Reading and chunking the documents `data synth` starts from: every kind, both languages, the failures."""

from pathlib import Path

import pytest

from core.data.synth.chunks import chunk_document, count_tokens, sections
from core.data.synth.documents import Document, DocumentError, find_documents, read_document
from core.data.synth.filters import grounding_score
from tests.synth_documents import (
    write_all,
    write_chinese_docx,
    write_docx,
    write_gbk_text,
    write_html,
    write_markdown,
    write_outlined_pdf,
    write_pdf,
    write_scanned_pdf,
)


def test_markdown_keeps_its_headings_and_chunks_by_them(tmp_path):
    doc = read_document(write_markdown(tmp_path))
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["Returns", "Returns > Refund time", "发票"]
    assert chunks[1].text.startswith("Returns > Refund time\n\n") and "3 to 5 working days" in chunks[1].text
    assert [c.language for c in chunks] == ["en", "en", "zh"]
    # the span points back into the document
    assert doc.text[chunks[2].start:chunks[2].end].startswith("电子发票")


def test_gbk_text_is_decoded_as_the_data_step_decodes_it(tmp_path):
    doc = read_document(write_gbk_text(tmp_path))
    assert doc.encoding == "gb18030" and "48小时内发货" in doc.text
    assert [c.heading for c in chunk_document(doc)] == ["配送", "退货运费"]


def test_html_loses_scripts_and_styles_and_keeps_headings(tmp_path):
    doc = read_document(write_html(tmp_path))
    assert "var x" not in doc.text and "color:red" not in doc.text
    assert "# Shipping" in doc.text and "## Tracking" in doc.text and "| Zone A | 2 days |" in doc.text
    assert [c.heading for c in chunk_document(doc)] == ["Shipping", "Shipping > Tracking"]


def test_docx_headings_and_tables(tmp_path):
    doc = read_document(write_docx(tmp_path))
    assert doc.kind == "docx"
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["Warranty", "Warranty > What is not covered"]
    assert "| Battery | one year |" in chunks[1].text


def test_pdf_pages_are_kept_for_provenance(tmp_path):
    doc = read_document(write_pdf(tmp_path, pages=3))
    assert doc.kind == "pdf" and len(doc.pages) == 3
    chunks = chunk_document(doc, budget=120, overlap=20)
    assert len(chunks) > 3
    assert chunks[0].page == 1 and chunks[-1].page == 3
    assert all(c.tokens <= 120 for c in chunks)


ZH_PDF = Path(__file__).parents[1] / "fixtures" / "synth" / "zh_policy.pdf"  # made by make_zh_pdf.py beside it


def test_a_chinese_pdf_reads_without_the_nul_of_its_two_byte_glyphs():
    doc = read_document(ZH_PDF)
    assert "\x00" not in doc.text and "七天内可以无理由退货" in doc.text
    chunks = chunk_document(doc)
    assert [c.language for c in chunks] == ["zh", "zh", "zh"]
    # an answer restating its chunk is grounded (with the NULs in, every CJK term was missed: score 0)
    assert grounding_score("签收后七天内可以无理由退货。", chunks[0].text) == 1.0


def test_a_pdf_outline_gives_the_headings_chunks_follow():
    doc = read_document(ZH_PDF)
    chunks = chunk_document(doc)
    assert [(c.heading, c.page) for c in chunks] == [("退货政策", 1), ("退货政策 > 退款时间", 1), ("发票", 2)]
    assert "三到五个工作日" in chunks[1].text and "三到五个工作日" not in chunks[0].text


def test_an_outline_title_missing_from_its_page_is_put_at_the_top_of_that_page(tmp_path):
    doc = read_document(write_outlined_pdf(tmp_path))
    chunks = chunk_document(doc)
    assert [(c.heading, c.page) for c in chunks] == [("Getting started", 1), ("Getting started > Charging", 1),
                                                     ("Troubleshooting", 2)]
    assert "ten seconds" in chunks[2].text and "Unpack" in chunks[0].text
    assert chunk_document(read_document(write_pdf(tmp_path)))[0].heading == ""  # no outline, no headings


def test_a_chinese_docx_keeps_its_headings_and_tables(tmp_path):
    doc = read_document(write_chinese_docx(tmp_path))
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["售后服务", "售后服务 > 不在保修范围内"]
    assert "| 电池 | 一年 |" in chunks[1].text and all(c.language == "zh" for c in chunks)
    assert grounding_score("进水或摔落造成的损坏不保修。", chunks[1].text) > 0.8


def test_a_scanned_pdf_says_so_instead_of_giving_nothing(tmp_path):
    with pytest.raises(DocumentError, match="no text layer.*scanned.*OCR"):
        read_document(write_scanned_pdf(tmp_path))


def test_damaged_and_unknown_files_name_themselves(tmp_path):
    bad = tmp_path / "broken.docx"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DocumentError, match="broken.docx is not a readable DOCX"):
        read_document(bad)
    pdf = tmp_path / "broken.pdf"
    pdf.write_bytes(b"%PDF-1.4 garbage")
    with pytest.raises(DocumentError, match="broken.pdf"):
        read_document(pdf)
    sheet = tmp_path / "prices.numbers"
    sheet.write_bytes(b"x")
    with pytest.raises(DocumentError, match="prices.numbers: not a document"):
        find_documents([sheet])
    with pytest.raises(DocumentError, match="no such file"):
        find_documents([tmp_path / "missing"])


def test_a_folder_is_walked_in_order_skipping_other_kinds_and_hidden_files(tmp_path):
    made = write_all(tmp_path / "docs")
    (tmp_path / "docs" / "notes.numbers").write_bytes(b"x")
    (tmp_path / "docs" / ".hidden.md").write_text("# x\n\ny\n")
    assert find_documents([tmp_path / "docs"]) == sorted(made)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DocumentError, match="no documents found"):
        find_documents([tmp_path / "empty"])


def test_long_sections_are_windowed_with_overlap_and_within_budget():
    body = " ".join(f"Sentence {i} is about refunds and nothing else at all." for i in range(200))
    doc = Document("x.md", "markdown", "# Refunds\n\n" + body + "\n")
    chunks = chunk_document(doc, budget=100, overlap=25)
    assert len(chunks) > 10
    assert all(c.tokens <= 100 for c in chunks)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end, "consecutive windows share their edge sentences"
        assert a.end - b.start < 25 * 6
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert min(covered) == doc.text.index("Sentence 0") and max(covered) == len(doc.text.rstrip()) - 1


def test_a_sentence_longer_than_the_budget_is_cut_and_cjk_counts_per_character():
    doc = Document("x.txt", "text", "退" * 1000 + "\n")
    chunks = chunk_document(doc, budget=64, overlap=0)
    assert all(c.tokens <= 64 for c in chunks) and sum(len(c.text) for c in chunks) == 1000
    assert count_tokens("退款") == 2 and count_tokens("abcdefgh") == 2


def test_code_fences_hide_headings_and_an_empty_heading_is_no_chunk():
    text = "# Top\n\n## Setup\n\n```\n# not a heading\n```\nRun it.\n"
    assert [h for h, _s, _b in sections(text)] == ["", "Top", "Top > Setup"]
    chunks = chunk_document(Document("x.md", "markdown", text))
    assert [c.heading for c in chunks] == ["Top > Setup"] and "# not a heading" in chunks[0].text


def test_a_library_tripping_over_a_damaged_file_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    import pypdf

    path = write_pdf(tmp_path)

    def trip(self):
        raise KeyError("/Contents")

    monkeypatch.setattr(pypdf.PageObject, "extract_text", lambda self, *a, **k: trip(self))
    with pytest.raises(DocumentError, match=r"manual.pdf cannot be read \(KeyError: '/Contents'\)"):
        read_document(path)
