"""How the Data step's reports word their facts, in either language: a count with its noun ("1 row",
"2 rows"), a finding's severity, where token counts came from and the rows' language mix.

The CLI, the screen and the reports (fix, convert, register) all word them here, so "warning" or "1 rows"
cannot come back in one of them alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from core.data.findings import ERROR, INFO, WARNING
from core.i18n import _, said_n

# One `said_n` per noun: both forms are catalog keys (core.i18n.catalog_keys reads the literals); a count is
# kept as data (core.i18n.Said), so a saved summary that holds one is said again in the reader's language.
_COUNTS: dict[str, Callable[[int], str]] = {
    "row": lambda n: said_n("{n} row", "{n} rows", n),
    "line": lambda n: said_n("{n} line", "{n} lines", n),
    "file": lambda n: said_n("{n} file", "{n} files", n),
    "error": lambda n: said_n("{n} error", "{n} errors", n),
    "warning": lambda n: said_n("{n} warning", "{n} warnings", n),
    "info": lambda n: said_n("{n} info", "{n} info", n),
    "finding": lambda n: said_n("{n} finding", "{n} findings", n),
    "duplicate": lambda n: said_n("{n} duplicate", "{n} duplicates", n),
    "conflict": lambda n: said_n("{n} conflict", "{n} conflicts", n),
    "character": lambda n: said_n("{n} character", "{n} characters", n),
    "chunk": lambda n: said_n("{n} chunk", "{n} chunks", n),
    "document": lambda n: said_n("{n} document", "{n} documents", n),
    "pair": lambda n: said_n("{n} pair", "{n} pairs", n),
    "request": lambda n: said_n("{n} request", "{n} requests", n),
    "retry": lambda n: said_n("{n} retry", "{n} retries", n),
    "token": lambda n: said_n("{n} token", "{n} tokens", n),
    "page": lambda n: said_n("{n} page", "{n} pages", n),
}
NOUNS = tuple(_COUNTS)


def counted(noun: str, n: int) -> str:
    """`n` with its noun, singular for one: counted("row", 1) == "1 row" (in Chinese "1 行")."""
    return _COUNTS[noun](n)


def severity_label(severity: str) -> str:
    """error / warning / info as the reader's language says them (the JSON keeps the identifiers)."""
    return {ERROR: _("error"), WARNING: _("warning"), INFO: _("info")}.get(severity, severity)


def token_source_label(source: str) -> str:
    """Where token counts came from: an estimate from characters, or the tokenizer named."""
    return _("estimate") if source == "estimate" else source


_LANGUAGES: dict[str, Callable[[], str]] = {
    "zh": lambda: _("Chinese"),
    "en": lambda: _("English"),
    "mixed": lambda: _("mixed Chinese and English"),
}


def language_shares(languages: Mapping[str, float], *, sep: str = " ", keep_zero: bool = False) -> str:
    """The rows' language mix, "Chinese 74% English 23% mixed Chinese and English 3%" (shares of rows)."""
    return sep.join(f"{_LANGUAGES.get(k, lambda k=k: k)()} {round(v * 100)}%" for k, v in languages.items()
                    if v or keep_zero)


def os_reason(exc: BaseException) -> str:
    """Why the system refused a file, in the reader's language (the OS's own words are English)."""
    import errno

    code = getattr(exc, "errno", None)
    known = {
        errno.ENOENT: lambda: _("No such file or directory"),
        errno.EACCES: lambda: _("Permission denied"),
        errno.EPERM: lambda: _("Operation not permitted"),
        errno.EISDIR: lambda: _("Is a directory"),
        errno.ENOTDIR: lambda: _("Not a directory"),
        errno.ENOSPC: lambda: _("No space left on device"),
        errno.EROFS: lambda: _("Read-only file system"),
        errno.EIO: lambda: _("Input/output error"),
    }
    if code in known:
        return known[code]()
    words = getattr(exc, "strerror", None)
    return _("the system says \"{reason}\"", reason=words) if words else str(exc)


def layout_label(layout: str) -> str:
    """How the file is laid out (core.data.records' JSONL, JSON_ARRAY, ...), in words."""
    from core.data.records import CSV, EMPTY, JSON_ARRAY, JSON_STREAM, JSONL, TEXT

    return {JSONL: "JSON Lines", JSON_ARRAY: _("JSON array"), JSON_STREAM: _("JSON objects one after another"),
            TEXT: _("plain text"), CSV: "CSV/TSV", EMPTY: _("empty file")}.get(layout, layout)


def format_shown(fmt: str) -> str:
    """A lint report's format for people: "unknown" (nothing LLaMA-Factory reads) in words."""
    return _("no dataset format") if fmt == "unknown" else fmt


def convert_hint_paths(path) -> tuple[str, str]:
    """The source as given and a JSON Lines file beside it, quoted for a shell: a hint that runs as printed."""
    import shlex
    from pathlib import Path

    src = Path(path)
    out = src.with_suffix(".jsonl")
    if out == src:  # a JSON Lines source (a chat archive): the hint must not name it as its own output
        out = src.with_name(f"{src.stem}.alpaca.jsonl")
    return shlex.quote(str(src)), shlex.quote(str(out))
