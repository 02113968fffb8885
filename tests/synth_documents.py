"""Documents of every kind `data synth` reads, made by the tests themselves (python-docx, fpdf2, GBK bytes)."""

from __future__ import annotations

from pathlib import Path

POLICY_MD = """# Returns

You can return any item within 30 days of delivery. The item must be unused and in its original box.

## Refund time

Refunds reach the original payment method in 3 to 5 working days after the warehouse receives the parcel.

# 发票

电子发票在订单完成后24小时内发送到您的邮箱。如需纸质发票，请联系客服并提供订单号。
"""

FAQ_GBK = "# 配送\n\n订单在付款后48小时内发货。偏远地区需要3到7天送达。\n\n# 退货运费\n\n质量问题的退货运费由我们承担，其他原因由顾客承担。\n"


def write_markdown(folder: Path) -> Path:
    path = folder / "policy.md"
    path.write_text(POLICY_MD, encoding="utf-8")
    return path


def write_gbk_text(folder: Path) -> Path:
    path = folder / "faq_gbk.txt"
    path.write_bytes(FAQ_GBK.encode("gbk"))
    return path


def write_html(folder: Path) -> Path:
    path = folder / "shipping.html"
    path.write_text("<html><head><style>p{color:red}</style><script>var x=1;</script></head><body>"
                    "<h1>Shipping</h1><p>Orders ship within <b>48 hours</b> of payment.</p>"
                    "<h2>Tracking</h2><p>The tracking number arrives by e-mail.</p>"
                    "<table><tr><td>Zone A</td><td>2 days</td></tr></table></body></html>", encoding="utf-8")
    return path


def write_docx(folder: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_heading("Warranty", level=1)
    document.add_paragraph("Every device has a two-year warranty from the date on the invoice.")
    document.add_heading("What is not covered", level=2)
    document.add_paragraph("Damage from water or from a fall is not covered by the warranty.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Battery"
    table.rows[0].cells[1].text = "one year"
    path = folder / "warranty.docx"
    document.save(str(path))
    return path


def write_pdf(folder: Path, pages: int = 2, name: str = "manual.pdf") -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(0, 6, f"Chapter {n}. The device restarts when the power button is held for ten seconds. "
                             f"Page {n} explains how to reset setting number {n} and what the warning light "
                             f"means when it blinks {n} times. " * 6)
    path = folder / name
    pdf.output(str(path))
    return path


def write_outlined_pdf(folder: Path, name: str = "guide.pdf") -> Path:
    """Bookmarks of two levels; the second page's bookmark title is not printed on the page."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    for level, title, body in ((0, "Getting started", "Unpack the device and charge it for two hours first."),
                               (1, "Charging", "The light turns green when the battery is full.")):
        pdf.start_section(title, level=level)
        pdf.multi_cell(0, 6, title, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.start_section("Troubleshooting", level=0)
    pdf.multi_cell(0, 6, "Hold the power button for ten seconds to restart the device.", new_x="LMARGIN",
                   new_y="NEXT")
    path = folder / name
    pdf.output(str(path))
    return path


def write_chinese_docx(folder: Path) -> Path:
    """Word's built-in headings and a style a Chinese Word names 标题 2."""
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    document.add_heading("售后服务", level=1)
    document.add_paragraph("所有设备自发票日期起享受两年保修。")
    style = document.styles.add_style("标题 2", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph("不在保修范围内", style=style)
    document.add_paragraph("进水或摔落造成的损坏不在保修范围内。")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "电池"
    table.rows[0].cells[1].text = "一年"
    path = folder / "售后.docx"
    document.save(str(path))
    return path


def write_scanned_pdf(folder: Path) -> Path:
    """A PDF whose pages hold only drawings: what a scan without OCR looks like to a text extractor."""
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(3):
        pdf.add_page()
        pdf.rect(20, 20, 100, 150, style="F")
    path = folder / "scan.pdf"
    pdf.output(str(path))
    return path


def write_all(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [write_markdown(folder), write_gbk_text(folder), write_html(folder), write_docx(folder),
            write_pdf(folder)]
