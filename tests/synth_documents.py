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


def write_pptx(folder: Path, name: str = "onboarding.pptx") -> Path:
    """A deck as teams make them: a title slide, a bullet slide with speaker notes, a slide with a table."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    slide.shapes.title.text = "Support onboarding"
    slide.placeholders[1].text = "What every new agent learns in week one"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Refund rules"
    slide.placeholders[1].text = "Refunds within 30 days of delivery\nOriginal box required"
    slide.notes_slide.notes_text_frame.text = "Remind them that opened software cannot be refunded."
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Response times"
    rows = [("Channel", "First reply"), ("E-mail", "4 hours"), ("Chat", "2 minutes")]
    table = slide.shapes.add_table(len(rows), 2, Inches(1), Inches(2), Inches(6), Inches(1.5)).table
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    slide.notes_slide.notes_text_frame.text = "Chat is staffed from 8:00 to 22:00."
    path = folder / name
    deck.save(str(path))
    return path


def write_epub(folder: Path, name: str = "handbook.epub") -> Path:
    """An EPUB 3 of two chapters, zipped as the format asks (mimetype first, stored)."""
    import zipfile

    chapters = [("c1.xhtml", "<h1>第一章 入职</h1><p>新员工在入职第一天领取工牌和电脑。</p>"
                             "<h2>1.1 工牌</h2><p>工牌丢失请在24小时内报告行政部。</p>"),
                ("c2.xhtml", "<h1>第二章 休假</h1><p>年假按工龄计算，每年至少五天。</p>"
                             "<table><tr><th>工龄</th><th>年假</th></tr><tr><td>1-10年</td><td>5天</td></tr></table>")]
    path = folder / name
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml",
                   '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                   'container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/'
                   'oebps-package+xml"/></rootfiles></container>')
        manifest = "".join(f'<item id="c{i}" href="{f}" media-type="application/xhtml+xml"/>'
                           for i, (f, _b) in enumerate(chapters))
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        z.writestr("OEBPS/content.opf",
                   '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
                   'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
                   '<dc:identifier id="id">handbook-1</dc:identifier><dc:title>员工手册</dc:title>'
                   f'<dc:language>zh</dc:language></metadata><manifest>{manifest}</manifest>'
                   f'<spine>{spine}</spine></package>')
        for file, body in chapters:
            z.writestr(f"OEBPS/{file}", '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/'
                                        f'1999/xhtml"><head><title>x</title></head><body>{body}</body></html>')
    return path


def write_xlsx(folder: Path, name: str = "prices.xlsx") -> Path:
    """A price list of two sheets, the header in row 1."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Plans"
    for row in (("Plan", "Monthly price", "Seats"), ("Basic", 9, 1), ("Team", 49, 10)):
        sheet.append(row)
    other = book.create_sheet("Add-ons")
    for row in (("Add-on", "Price"), ("Extra storage", 5)):
        other.append(row)
    path = folder / name
    book.save(str(path))
    return path


def write_numbered_text(folder: Path, name: str = "manual.txt") -> Path:
    """A plain-text manual numbered as standards are (3 / 3.1 / 3.1.1), a step list and a date in its body."""
    path = folder / name
    path.write_text(
        "1 范围\n本手册适用于X200型净水器的安装和日常维护。\n\n"
        "2 规格\n额定电压 220 V，额定功率 1.5 kW。\n2024.03.01 起执行本版本。\n\n"
        "3 安装\n安装前请关闭进水阀。\n\n"
        "3.1 环境要求\n环境温度应在5℃到38℃之间，不得安装在阳光直射处。\n\n"
        "3.2 安装步骤\n按下列顺序操作：\n1. 关闭进水阀\n2. 连接进水管\n3. 打开进水阀并检查是否漏水\n\n"
        "4 维护\n滤芯每六个月更换一次，价格为 99.00 元。\n", encoding="utf-8")
    return path


def write_numbered_pdf(folder: Path, name: str = "installation.pdf") -> Path:
    """A PDF without bookmarks whose sections are numbered in the text (1 / 2 / 2.1 / 2.2), a step list in one."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    for line in ("1 Scope", "This guide covers the installation of the X200 water filter.",
                 "2 Installation", "Close the inlet valve before you start.",
                 "2.1 Requirements", "The room temperature must stay between 5 and 38 degrees.",
                 "2.2 Steps", "Do it in this order:", "1. Close the inlet valve", "2. Connect the inlet hose",
                 "3 Maintenance", "Replace the filter cartridge every six months."):
        pdf.multi_cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.multi_cell(0, 6, "4 Warranty", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 6, "The warranty lasts two years from the date on the invoice.", new_x="LMARGIN",
                   new_y="NEXT")
    path = folder / name
    pdf.output(str(path))
    return path


def write_plain_docx(folder: Path, name: str = "考勤制度.docx") -> Path:
    """A Word file typed without heading styles: numbered bold paragraphs as its headings."""
    import docx

    document = docx.Document()
    for text, bold in (("第一章 总则", True), ("本制度适用于公司全体员工。", False), ("一、工作时间", True),
                       ("工作日为周一至周五，上午九点上班。", False), ("二、请假", True),
                       ("事假需提前一天在系统中提交申请。", False), ("第二章 奖惩", True), ("全勤员工每月奖励二百元。", False)):
        document.add_paragraph().add_run(text).bold = bold
    path = folder / name
    document.save(str(path))
    return path
