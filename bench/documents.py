"""Document converters compared on the files `data synth` reads: what each keeps, and how fast, as ratios to
markitdown (the baseline, measured in the same run).

    .venv/bin/python bench/documents.py [--rounds 5]
    PYTHONPATH=/tmp/docling .venv/bin/python bench/documents.py    # with docling installed apart, e.g.
        pip install --target /tmp/docling "docling-slim[format-office,format-html,format-markdown]"
        pip install --target /tmp/docling pdfminer-six pdfplumber   # markitdown's PDF reader ([pdf] extra)
        pip install --target /tmp/docling --no-deps docling-parse    # docling's PDF backend (its models stay out)

Sides: `devtune` is `read_document` (markitdown's converters for DOCX / PPTX / EPUB / XLSX / HTML, tidied, and
pypdf for PDF), `markitdown` is `MarkItDown().convert` as it comes, `docling` is docling's `DocumentConverter`
exported to Markdown. A side that cannot read a file says why and the run goes on (docling is not a devtune
dependency; its PDF pipeline loads layout models from the Hugging Face hub, which an offline machine cannot
fetch; markitdown reads PDF only with its [pdf] extra, which devtune does not install). The files are
made by tests/synth_documents.py: a deck with a table and speaker notes, Word files (Heading and 标题 styles,
a table), an EPUB, an HTML page, a workbook, PDFs with bookmarks and with numbered sections; two bigger ones
(60 slides, 400 paragraphs) for the speed. For each file: the checks each side passes (what it keeps), then the
median seconds over the rounds after a warm-up, and the ratio to markitdown.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Check = tuple[str, Callable[[str], bool]]


def _squash(text: str) -> str:
    return re.sub(r"[ \t]+", " ", re.sub(r"^\|[ \t]*:?-+[ \t|:-]*$\n?", "", text, flags=re.M))


def _row(*cells: str) -> Callable[[str], bool]:
    want = "| " + " | ".join(cells) + " |"
    return lambda md: want in _squash(md)


def _nested(outer: str, inner: str) -> Callable[[str], bool]:
    """Both titles are Markdown headings, the second one level deeper (whatever level the first is at)."""
    def check(md: str) -> bool:
        levels = {m.group(2).strip(): len(m.group(1)) for m in re.finditer(r"^(#+) (.+)$", md, re.M)}
        return outer in levels and inner in levels and levels[inner] == levels[outer] + 1
    return check


def _big_deck(folder: Path) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for n in range(60):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = f"Topic {n}"
        table = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1.5)).table
        for r in range(3):
            for c in range(2):
                table.cell(r, c).text = f"cell {n}.{r}.{c}"
        slide.notes_slide.notes_text_frame.text = f"Say that topic {n} matters."
    path = folder / "big.pptx"
    deck.save(str(path))
    return path


def _big_docx(folder: Path) -> Path:
    import docx

    document = docx.Document()
    for n in range(400):
        if n % 10 == 0:
            document.add_heading(f"Part {n // 10}", level=1 + (n // 10) % 2)
        document.add_paragraph(f"Paragraph {n}: refunds reach the card within {n % 7 + 1} working days.")
        if n % 40 == 0:
            table = document.add_table(rows=2, cols=2)
            for r in range(2):
                for c in range(2):
                    table.rows[r].cells[c].text = f"v{n}.{r}.{c}"
    path = folder / "big.docx"
    document.save(str(path))
    return path


def files(folder: Path) -> list[tuple[Path, list[Check]]]:
    from tests import synth_documents as make

    zh_pdf = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "synth" / "zh_policy.pdf"
    return [
        (make.write_pptx(folder), [("slide titles as headings", lambda md: all(re.search(rf"^#+ {t}$", md, re.M)
                                                                      for t in ("Refund rules", "Response times"))),
                                   ("table as a table", _row("E-mail", "4 hours")),
                                   ("speaker notes", lambda md: "opened software" in md and "8:00" in md),
                                   ("notes marked as notes", lambda md: bool(re.search(r"^#+ Notes:?$", md, re.M)))]),
        (make.write_docx(folder), [("heading styles", _nested("Warranty", "What is not covered")),
                                   ("table as a table", _row("Battery", "one year"))]),
        (make.write_chinese_docx(folder), [("标题 2 style as a heading", _nested("售后服务", "不在保修范围内")),
                                           ("table as a table", _row("电池", "一年"))]),
        (make.write_epub(folder), [("chapters as headings", _nested("第一章 入职", "1.1 工牌")),
                                   ("table as a table", _row("1-10年", "5天"))]),
        (make.write_html(folder), [("headings", _nested("Shipping", "Tracking")),
                                   ("table row", _row("Zone A", "2 days")),
                                   ("no script or style", lambda md: "var x" not in md and "color:red" not in md)]),
        (make.write_xlsx(folder), [("sheet names", lambda md: "Plans" in md and "Add-ons" in md),
                                   ("rows as a table", _row("Team", "49", "10"))]),
        (make.write_outlined_pdf(folder), [("bookmarks as headings", _nested("Getting started", "Charging")),
                                           ("text", lambda md: "ten seconds" in md)]),
        (zh_pdf, [("CJK text without NUL", lambda md: "七天内可以无理由退货" in md and "\x00" not in md)]),
        (_big_deck(folder), [("60 slide titles", lambda md: sum(ln.startswith("# Topic") for ln in md.splitlines())
                              == 60)]),
        (_big_docx(folder), [("40 headings", lambda md: sum(bool(re.match(r"#+ Part \d", ln))
                                                            for ln in md.splitlines()) == 40)]),
    ]


def sides() -> dict[str, Callable[[Path], str] | str]:
    """name -> convert(path) -> Markdown, or the reason the side cannot run here."""
    from core.data.synth.documents import read_document

    out: dict[str, Callable[[Path], str] | str] = {}
    try:
        from markitdown import MarkItDown

        engine = MarkItDown()
        out["markitdown"] = lambda p: engine.convert(str(p)).markdown
    except ImportError as exc:
        out["markitdown"] = f"not installed ({exc})"
    out["devtune"] = lambda p: read_document(p).text
    try:
        from docling.document_converter import DocumentConverter

        converter = DocumentConverter()
        out["docling"] = lambda p: converter.convert(str(p)).document.export_to_markdown()
    except ImportError as exc:
        out["docling"] = f"not installed ({exc}); see this file's doc for installing it apart"
    return out


def _time(convert: Callable[[Path], str], path: Path, rounds: int) -> tuple[float, str]:
    markdown = convert(path)  # warm-up (imports, models)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        convert(path)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        made = files(Path(tmp))
        converters = sides()
        for name, side in converters.items():
            if isinstance(side, str):
                print(f"{name}: {side}")
        print(f"\n{'file':<16} {'side':<11} {'kept':>5} {'median s':>9} {'× markitdown':>13}  missed")
        totals: dict[str, list[int]] = {}
        for path, checks in made:
            base = None
            for name, side in converters.items():
                if isinstance(side, str):
                    continue
                try:
                    seconds, markdown = _time(side, path, args.rounds)
                except Exception as exc:  # a side that cannot read this kind says why and the run goes on
                    print(f"{path.name:<16} {name:<11} {'-':>5} {'-':>9} {'-':>13}  fails: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}")
                    totals.setdefault(name, [0, 0])[1] += len(checks)
                    continue
                if name == "markitdown":
                    base = seconds
                passed = [label for label, ok in checks if ok(markdown)]
                missed = [label for label, _ok in checks if label not in passed]
                kept = totals.setdefault(name, [0, 0])
                kept[0] += len(passed)
                kept[1] += len(checks)
                ratio = f"{seconds / base:.2f}x" if base else "-"
                print(f"{path.name:<16} {name:<11} {len(passed)}/{len(checks):<3} {seconds:>9.4f} {ratio:>13}  "
                      f"{', '.join(missed)}")
        print("\nkept overall: " + ", ".join(f"{n} {a}/{b}" for n, (a, b) in totals.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
