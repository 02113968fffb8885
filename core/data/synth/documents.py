"""Business documents read as text with Markdown headings: the input of the chunker.

Markdown and plain text are decoded as the Data step decodes datasets (UTF-8, UTF-16, GB18030/GBK, decided by
`core.data.encoding`). HTML (decoded the same way), DOCX, PPTX, EPUB and XLSX go through markitdown's converters
(bench/documents.py compares it with docling; docs/steps/1-data.md says why markitdown): headings become `#`
lines (a Word style named 标题 N too), tables Markdown tables; a deck's slides each start with their title as a
`#` line (`# Slide N` for a slide without one) and their speaker notes follow under `## Notes`, and
`Document.pages` keeps where each slide starts, as it keeps a PDF's pages (chunks name the slide they come
from); a workbook's sheets are `##` sections of tables; pictures are dropped (their alt text kept).

PDF stays with pypdf, page by page (markitdown's pdfminer reader keeps neither pages nor the outline): a PDF's
outline (its bookmarks) gives the headings: the line on the bookmark's page that reads as the bookmark's title
becomes a `#` line of the bookmark's depth (or such a line is put at the top of the page when none reads so). A
PDF with no text layer (a scan) is a `DocumentError` that says so, never an empty document. Numbered headings in
any text (`3.1 环境要求`, `第一章`) are found by the chunker (`core.data.synth.headings`), not here.

Control characters (NUL and the like) are dropped from every text: pypdf renders the two-byte glyph codes of an
embedded CJK font (fpdf2, some Word exports) as NUL + character, which would hide every CJK term from the
grounding score.

markitdown and pypdf are imported inside the readers: importing this module costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.data.encoding import BINARY, GB18030, decode_line, guess_encoding_bytes
from core.errors import BadInput
from core.i18n import _

KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".text": "text", ".html": "html",
         ".htm": "html", ".docx": "docx", ".pdf": "pdf", ".pptx": "pptx", ".epub": "epub", ".xlsx": "xlsx"}
CONVERTED = {"docx": ("DocxConverter", "Word", ".docx"), "pptx": ("PptxConverter", "PowerPoint", ".pptx"),
             "epub": ("EpubConverter", "", ".epub"), "xlsx": ("XlsxConverter", "Excel", ".xlsx")}
# kind: (markitdown converter, the program that saves it, suffix)


def kinds_read() -> str:
    return _("Markdown, text, HTML, DOCX, PPTX, EPUB, XLSX or PDF")
SCANNED_CHARS_PER_PAGE = 16  # fewer extracted characters than this per page on average: no text layer


class DocumentError(BadInput):
    """A document cannot be read; the message names the file and what to do."""


@dataclass
class Document:
    path: str  # as given (the provenance names it)
    kind: str  # markdown | text | html | docx | pptx | epub | xlsx | pdf
    text: str  # Markdown-ish: headings as `#` lines, paragraphs separated by blank lines
    encoding: str = ""  # for text files: how the bytes were decoded
    pages: list[int] = field(default_factory=list)  # PDF / PPTX: character offset where each page / slide starts

    def page_at(self, offset: int) -> int | None:
        """1-based page (PDFs) or slide (decks) of a character offset, else None."""
        if not self.pages:
            return None
        page = 1
        for n, start in enumerate(self.pages, 1):
            if start > offset:
                break
            page = n
        return page


def document_kind(path: Path) -> str | None:
    return KINDS.get(path.suffix.lower())


def walk_documents(sources: Iterable[str | Path]) -> list[tuple[Path, bool]]:
    """(path, named) of the documents named (named True) and of those found in the folders named (sorted,
    hidden files skipped). A named file of an unknown kind or a missing path is a DocumentError; files of other
    kinds inside a folder are skipped."""
    found: dict[Path, bool] = {}
    for src in sources:
        path = Path(src).expanduser()
        if path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.is_file() and document_kind(p) and not any(part.startswith(".") for part in
                                                                 p.relative_to(path).parts):
                    found.setdefault(p, False)
        elif path.is_file():
            if not document_kind(path):
                raise DocumentError(_("{path}: not a document devtune reads ({kinds}: {suffixes})", path=path,
                                      kinds=kinds_read(), suffixes=" ".join(sorted(KINDS))))
            found[path] = True
        else:
            raise DocumentError(_("{path}: no such file or folder", path=path))
    if not found:
        raise DocumentError(_("no documents found in {sources} ({kinds})", kinds=kinds_read(),
                              sources=", ".join(str(s) for s in sources)))
    return list(found.items())


def find_documents(sources: Iterable[str | Path]) -> list[Path]:
    """The documents named, folders walked (see `walk_documents`)."""
    return [p for p, _named in walk_documents(sources)]


def read_document(path: str | Path) -> Document:
    path = Path(path)
    kind = document_kind(path)
    if kind is None:
        raise DocumentError(_("{path}: not a document devtune reads ({kinds}: {suffixes})", path=path, kinds=kinds_read(),
                              suffixes=" ".join(sorted(KINDS))))
    try:
        if kind in ("markdown", "text"):
            text, how = _decode(path.read_bytes(), path)
            doc = Document(str(path), kind, _normalize(text), encoding=how)
        elif kind == "html":
            text, how = _decode(path.read_bytes(), path)
            doc = Document(str(path), kind, _normalize(html_to_markdown(text)), encoding=how)
        elif kind in CONVERTED:
            doc = _convert(path, kind)
        else:
            doc = _read_pdf(path)
    except OSError as exc:
        raise DocumentError(_("cannot read {path}: {error}", path=path, error=exc.strerror or exc)) from exc
    except DocumentError:
        raise
    except Exception as exc:  # a damaged file can trip the converter / PDF library anywhere: a reason, not a crash
        raise DocumentError(_("{path} cannot be read ({kind}: {error}); save it again from the program that made "
                              "it", path=path, kind=type(exc).__name__, error=exc)) from exc
    if not doc.text.strip():
        raise DocumentError(_("{path} holds no text", path=path))
    return doc


# ---------------------------------------------------------------- text

def _decode(raw: bytes, path: Path) -> tuple[str, str]:
    guess = guess_encoding_bytes(raw, complete=True)
    if guess.encoding == BINARY:
        raise DocumentError(_("{path} is binary data, not text ({reason})", path=path, reason=guess.reason))
    if guess.encoding == GB18030 or not guess.is_utf8:
        return raw.decode(guess.python_codec, errors="replace").lstrip("\ufeff"), guess.encoding
    try:
        return raw.decode("utf-8").lstrip("\ufeff"), guess.encoding
    except UnicodeDecodeError:  # UTF-8 with some GBK lines: line by line, as the Data step reads them
        return "\n".join(decode_line(line)[0] for line in raw.split(b"\n")), guess.encoding


_BLANKS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # all but \t \n \r


def _normalize(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    text = _CONTROL.sub("", text)
    return _BLANKS.sub("\n\n", text).strip() + "\n"


def html_to_markdown(html: str) -> str:
    from markitdown.converters import HtmlConverter

    return _tidy(HtmlConverter().convert_string(html).markdown)


# ---------------------------------------------------------------- docx, pptx, epub, xlsx: markitdown

# Word names its built-in heading styles in English inside the file, whatever its language; WPS and some
# templates write the Chinese names, which mammoth's default map does not know
_DOCX_STYLE_MAP = "\n".join([f"p[style-name='标题 {n}'] => h{n}:fresh" for n in range(1, 7)]
                            + ["p[style-name='标题'] => h1:fresh", "p[style-name='Title'] => h1:fresh"])
_PICTURE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_SHAPE_NAME = re.compile(r"^(?:Picture|Image|图片|圖片)\s*\d*$", re.IGNORECASE)
_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->$", re.MULTILINE)
_NOTES = re.compile(r"^### Notes:$", re.MULTILINE)


_EMPTY_HEADER = re.compile(r"^\|(?:[ \t]*\|)+\n\|(?:[ \t]*:?-+:?[ \t]*\|)+\n", re.MULTILINE)


def _tidy(markdown: str) -> str:
    """Pictures as their alt text (none when it is only the shape's name); a table's empty header row (a table
    without one) dropped."""
    markdown = _PICTURE.sub(lambda m: "" if _SHAPE_NAME.match(m.group(1).strip()) else m.group(1), markdown)
    return _EMPTY_HEADER.sub("", markdown)


def _convert(path: Path, kind: str) -> Document:
    import zipfile

    import markitdown.converters as converters
    from markitdown import StreamInfo

    name, program, suffix = CONVERTED[kind]
    converter = getattr(converters, name)()
    try:
        with path.open("rb") as stream:
            result = converter.convert(stream, StreamInfo(extension=suffix, filename=path.name),
                                       style_map=_DOCX_STYLE_MAP)
    except (zipfile.BadZipFile, KeyError) as exc:  # not a zip, or a zip without the parts the format needs
        raise DocumentError(_("{path} is not a readable {kind} file ({error}); save it again from {program} as "
                              "{suffix}", path=path, kind=kind.upper(), error=exc,
                              program=program or _("the program that made it"),
                              suffix=suffix)) from exc
    markdown = _tidy(result.markdown)
    if kind == "pptx":
        return _slides(path, markdown)
    return Document(str(path), kind, _normalize(markdown))


def _slides(path: Path, markdown: str) -> Document:
    """A deck's Markdown, slide by slide: a `#` title on each (`# Slide N` when it has none), notes under
    `## Notes`, and where each slide starts."""
    parts = _SLIDE.split(markdown)  # ["", "1", slide 1, "2", slide 2, ...]
    pages: list[int] = []
    out: list[str] = []
    offset = 0
    for number, body in zip(parts[1::2], parts[2::2]):
        body = _normalize(_NOTES.sub("## Notes", body)).strip()
        if not body.startswith("# "):
            body = f"# Slide {number}\n\n{body}".strip()
        pages.append(offset)
        out.append(body + "\n")
        offset += len(body) + 2
    text = "\n".join(out)
    return Document(str(path), "pptx", text, pages=pages)


# ---------------------------------------------------------------- pdf

def _outline(reader) -> dict[int, list[tuple[int, str]]]:
    """Page index -> [(depth, title)] of the PDF's bookmarks, in outline order ({} without an outline)."""
    found: dict[int, list[tuple[int, str]]] = {}

    def walk(items, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
                continue
            title = " ".join(_CONTROL.sub("", str(item.title or "")).split())
            page = reader.get_destination_page_number(item)
            if title and page is not None and page >= 0:
                found.setdefault(page, []).append((min(6, depth), title))

    try:
        walk(reader.outline, 1)
    except Exception:  # a damaged outline is no reason to refuse the text: the PDF is read without headings
        return {}
    return found


def _squash(text: str) -> str:
    return "".join(text.split())


def _mark_headings(text: str, headings: list[tuple[int, str]]) -> str:
    """The page's text with each bookmark's line as a `#` line: the first line at or after the previous
    heading that reads as the title (spaces aside), else a new line there."""
    lines = text.split("\n")
    at = 0
    for depth, title in headings:
        mark = "#" * depth + " " + title
        want = _squash(title)
        hit = next((i for i in range(at, len(lines)) if _squash(lines[i]) == want), None)
        if hit is None:
            lines.insert(at, mark)
            at += 1
        else:
            lines[hit] = mark
            at = hit + 1
    return "\n".join(lines)


def _read_pdf(path: Path) -> Document:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError(_("{path} is encrypted with a password; save an unprotected copy and read that",
                                  path=path))
        outline = _outline(reader)
        pages: list[int] = []
        parts: list[str] = []
        offset = 0
        for n, page in enumerate(reader.pages):
            text = _normalize(page.extract_text() or "")
            if n in outline:
                text = _mark_headings(text, outline[n])
            pages.append(offset)
            parts.append(text)
            offset += len(text) + 1
    except PdfReadError as exc:
        raise DocumentError(_("{path} is not a readable PDF ({error})", path=path, error=exc)) from exc
    text = "\n".join(parts)
    if not pages:
        raise DocumentError(_("{path} has no pages", path=path))
    body = _HEADING_LINE.sub("", text).strip()  # bookmarks alone are no text layer
    if len(body) < SCANNED_CHARS_PER_PAGE * len(pages):
        from core.data.wording import counted

        raise DocumentError(_("{path} has no text layer ({pages}, {chars} of text): it looks scanned. Run OCR on "
                              "it first (e.g. `ocrmypdf {name} out.pdf`) and read the result", path=path,
                              pages=counted("page", len(pages)), chars=counted("character", len(body)),
                              name=path.name))
    return Document(str(path), "pdf", text, pages=pages)


_HEADING_LINE = re.compile(r"^#{1,6} .*$", re.MULTILINE)
