"""Keep the message catalogs complete: every literal `_("...")` (and both of `_n("one", "many", n)`; `said` and
`said_n`, the kept forms, alike) in the source must be in both.

    python -m core.i18n.catalog_keys            # report keys missing from en.json / zh.json (exit 1 if any)
    python -m core.i18n.catalog_keys --update   # add missing keys to en.json (identity) and list what zh lacks;
                                           # drop keys no longer used from both

The English catalog maps each key to itself (the key is the English text); having it as a file
makes "missing from either catalog" checkable and lets wording be fixed without touching code.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from core.files.atomic import write_atomic
from core.i18n import LOCALES_DIR

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("core", "cli", "tui", "screens")


def extract_keys(root: Path = ROOT) -> dict[str, str]:
    """{message: "file:line"} for every `_()` call whose first argument is a string literal."""
    found: dict[str, str] = {}
    for folder in SOURCE_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                literals = {"_": 1, "_n": 2, "said": 1, "said_n": 2}.get(node.func.id, 0)  # _(key, ...), _n(one, ...)
                for arg in node.args[:literals]:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found.setdefault(arg.value, f"{path.relative_to(root)}:{node.lineno}")
    return found


def load(lang: str) -> dict[str, str]:
    path = LOCALES_DIR / f"{lang}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def save(lang: str, catalog: dict[str, str]) -> None:
    text = json.dumps(dict(sorted(catalog.items())), ensure_ascii=False, indent=1) + "\n"
    write_atomic(LOCALES_DIR / f"{lang}.json", text)


def missing(keys: dict[str, str]) -> dict[str, list[str]]:
    return {lang: sorted(k for k in keys if not load(lang).get(k)) for lang in ("en", "zh")}


def main(argv: list[str]) -> int:
    keys = extract_keys()
    if "--update" in argv:
        en = {k: k for k in keys}
        save("en", en)
        zh = {k: v for k, v in load("zh").items() if k in keys}
        save("zh", zh)
    gaps = missing(keys)
    for lang, items in gaps.items():
        for key in items:
            print(f"{lang}: missing {key!r}  ({keys[key]})")
    print(f"{len(keys)} messages; missing: en {len(gaps['en'])}, zh {len(gaps['zh'])}", file=sys.stderr)
    return 1 if any(gaps.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
