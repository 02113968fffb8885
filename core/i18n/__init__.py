"""Messages in English and Chinese.

Every user-facing string goes through `_()`: the English text is the key, placeholders are
`{name}` filled from keyword arguments after the lookup, so a translation may reorder them:

    _("L{line}: duplicate of L{other}", line=12, other=3)

Catalogs live in `core/i18n/locales/{en,zh}.json`. The language follows `--lang` (which sets
DEVTUNE_LANG), else LC_ALL / LC_MESSAGES / LANG: anything starting with "zh" means Chinese.
tests/core/test_i18n.py extracts every literal `_()` key from the source and fails when one is
missing from either catalog.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

LOCALES_DIR = Path(__file__).resolve().parent / "locales"
LANGUAGES = ("en", "zh")


def current_language() -> str:
    explicit = os.environ.get("DEVTUNE_LANG", "").strip().lower()
    if explicit in LANGUAGES:
        return explicit
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var, "").strip().lower()
        if value:
            return "zh" if value.startswith("zh") else "en"
    return "en"


@lru_cache(maxsize=4)
def catalog(lang: str) -> dict[str, str]:
    try:
        return json.loads((LOCALES_DIR / f"{lang}.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def _(message: str, /, **values: object) -> str:
    return _translate(message, values)


def _translate(message: str, values: dict) -> str:
    lang = current_language()
    text = message
    if lang != "en":
        text = catalog(lang).get(message) or message
    if values:
        try:
            return text.format(**values)
        except (KeyError, IndexError, ValueError):
            return message.format(**values)
    return text


def _n(one: str, many: str, n: int, /, **values: object) -> str:
    """A message about a count: the key `one` when n is 1, else `many` ("1 error", "2 errors"); each is
    a catalog key of its own (Chinese writes both the same). `n` is passed to the text as {n}."""
    return _translate(one if n == 1 else many, {"n": n, **values})


class Said(str):
    """A message that keeps its words as data: the text in the language of the moment it was said (it is a
    str, so it prints, joins and compares as one), and its catalog key with its values, so that what is saved
    (a step's summary in state.json, an export check, a GPU sampler's reason) is said again in the reader's
    language when it is shown (`again()`, `from_data(to_data())`). A value may be a Said itself (a count with
    its noun); any other value is kept as a number or as its text."""

    key: str
    values: dict
    many: str  # the plural key of a count (`said_n`); "" for a plain message

    def __new__(cls, key: str, values: dict | None = None, many: str = "") -> Said:
        values = dict(values or {})
        n = values.get("n")
        text = _translate(many if many and n != 1 else key, values)
        self = super().__new__(cls, text)
        self.key, self.values, self.many = key, values, many
        return self

    def again(self) -> str:
        """The message in the current language (its Said values too)."""
        values = {k: v.again() if isinstance(v, Said) else v for k, v in self.values.items()}
        return _translate(self.many if self.many and values.get("n") != 1 else self.key, values)

    def to_data(self) -> dict:
        """{"key", "args" (and "many")}: JSON for a file; a Said value is such a dict, another value its number
        or text."""
        args = {k: v.to_data() if isinstance(v, Said) else v if isinstance(v, (int, float, bool)) or v is None
                else str(v) for k, v in self.values.items()}
        return {"key": self.key, "args": args, **({"many": self.many} if self.many else {})}

    @classmethod
    def from_data(cls, data: dict) -> Said:
        """A Said from `to_data()`'s dict, worded in the current language."""
        args = {k: cls.from_data(v) if isinstance(v, dict) else v for k, v in (data.get("args") or {}).items()}
        return cls(str(data.get("key", "")), args, str(data.get("many") or ""))

    def __reduce__(self):
        return Said, (self.key, self.values, self.many)


def said(message: str, /, **values: object) -> Said:
    """`_()` for words that are kept (saved to a file, shown later, maybe in another language): the same text
    now, and its key and values to say it again (Said). A catalog key like any `_()` literal."""
    return Said(message, values)


def said_n(one: str, many: str, n: int, /, **values: object) -> Said:
    """`_n()` kept as data (see `said`)."""
    return Said(one, {"n": n, **values}, many)


def reworded(text: str, data: dict | None) -> str:
    """Saved text in the reader's language: `data` (Said.to_data()) said again where it was saved, else the
    text as it was written (a file from before words were kept, or text that was never a catalog message)."""
    if data and data.get("key"):
        try:
            return Said.from_data(data)
        except (TypeError, ValueError, AttributeError):
            return text
    return text


def set_language(lang: str) -> None:
    """Switch the language for this process (used by --lang and the tests)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    os.environ["DEVTUNE_LANG"] = lang


def backtick_parts(text: str) -> list[tuple[str, bool]]:
    """`text` cut at its backticks: (piece, is_term) in order, a term being what a pair of backticks marks
    (`llamafactory-cli train`, stage `sft`). A widget that styles text draws the terms styled
    (tui/widgets/terms.py); one that shows plain text drops the marks (`without_backticks`)."""
    pieces = text.split("`")
    return [(piece, i % 2 == 1) for i, piece in enumerate(pieces) if piece]


def without_backticks(text: str) -> str:
    """`text` for a widget that shows plain text (a dropdown, a label): a Chinese message marks its English
    terms with backticks (stage `sft`), which such a widget would show literally; the terms stay, the marks go."""
    return "".join(piece for piece, _term in backtick_parts(text))


def display_width(text: str) -> int:
    """Terminal cells `text` takes: a Chinese character (East Asian wide or fullwidth) takes two, a combining
    mark none. Tables printed with str.ljust misalign under Chinese labels; pad with `pad_cells`."""
    import unicodedata

    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def pad_cells(text: str, width: int, *, right: bool = False) -> str:
    """`text` padded with spaces to `width` display cells (on the left when `right`)."""
    gap = " " * max(0, width - display_width(text))
    return gap + text if right else text + gap
