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


def set_language(lang: str) -> None:
    """Switch the language for this process (used by --lang and the tests)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    os.environ["DEVTUNE_LANG"] = lang


def without_backticks(text: str) -> str:
    """`text` for a widget that shows plain text (a dropdown, a label): a Chinese message marks its English
    terms with backticks (stage `sft`), which such a widget would show literally; the terms stay, the marks go."""
    return text.replace("`", "")


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
