"""Rows inside one JSON document: an API response or CMS dump such as `{code, msg, data: {list: [...], total}}`.

`find_rows` picks the largest array of objects with consistent keys under any key path (`data`, `items`,
`results`, `hits.hits`, `data.list`, ...; arrays inside rows are not searched, so a conversation's turns are
never taken for rows) and names the keys beside it (paging metadata, status codes) that are left out.
`flat_row` turns one element into a row: a wrapper every element has (`_source` of Elasticsearch,
`attributes` of Strapi and JSON:API, `fields` of Contentful, `properties` of Notion) is lifted into the row, and
rendered or rich text (`{"rendered": ...}` of WordPress, Notion's `[{plain_text}]`) becomes its text.

The reader (core/data/reader.py) streams the elements (core/data/jsonvalues.py `iter_nested_values`) and
numbers them 1, 2, 3... (a minified document is one line); lint, fix and convert name each by
`NestedRows.element` (`data.items[3]`), never by a line. This module only decides where they are and how one
becomes a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 6
WRAPPERS = ("_source", "attributes", "fields", "properties")  # the element's content lives in this object


@dataclass(frozen=True)
class NestedRows:
    at: tuple[str, ...]  # the key path of the rows' array
    rows: int
    ignored: tuple[str, ...]  # dotted paths of the keys beside it, left out (paging metadata...)
    unwrap: str = ""  # a WRAPPERS key lifted into each row

    @property
    def where(self) -> str:
        return ".".join(self.at)

    def element(self, number: int) -> str:
        """Where row `number` (1-based, as the reader numbers these rows: a document has no line per row) is:
        `data.items[3]` for the fourth, `[3]` in a top-level array."""
        return f"{self.where}[{int(number) - 1}]"


def _consistent(items: list) -> bool:
    """Every element an object, and one key shared by all of them."""
    if not items or not all(isinstance(x, dict) and x for x in items):
        return False
    common = set(items[0])
    for x in items[1:]:
        common &= x.keys()
        if not common:
            return False
    return True


def lifted(element: Any) -> bool:
    """Does an element of a top-level array hold its text as a CMS renders it (WordPress `{"rendered": ...}`,
    Notion rich text) or inside a wrapper, so that it must go through `flat_row` to be a row?"""
    if not isinstance(element, dict):
        return False
    if any(isinstance(element.get(w), dict) for w in WRAPPERS):
        return True
    return any(isinstance(v, (dict, list)) and isinstance(_plain(v), str) for v in element.values())


def find_rows(doc: Any) -> NestedRows | None:
    """The rows' array of a JSON object, or None when it holds none. The largest wins; a tie goes to the
    shallower one. A top-level array is its own rows' array when its elements must be lifted (`lifted`:
    a WordPress `/wp/v2/posts` response); any other array is read as it is."""
    if isinstance(doc, list):
        if not _consistent(doc) or not lifted(doc[0]):
            return None
        unwrap = next((w for w in WRAPPERS if all(isinstance(x.get(w), dict) for x in doc)), "")
        return NestedRows((), len(doc), (), unwrap)
    if not isinstance(doc, dict):
        return None
    best: tuple[int, int, tuple[str, ...]] | None = None

    def walk(node: dict, at: tuple[str, ...]) -> None:
        nonlocal best
        if len(at) >= MAX_DEPTH:
            return
        for key, value in node.items():
            here = at + (str(key),)
            if isinstance(value, list) and _consistent(value):
                score = (len(value), -len(here))
                if best is None or score > best[:2]:
                    best = (*score, here)
            elif isinstance(value, dict):
                walk(value, here)

    walk(doc, ())
    if best is None:
        return None
    at = best[2]
    ignored: list[str] = []
    node: Any = doc
    for depth, key in enumerate(at):
        ignored += [".".join(at[:depth] + (str(k),)) for k in node if str(k) != key]
        node = node[key]
    unwrap = next((w for w in WRAPPERS if all(isinstance(x.get(w), dict) for x in node)), "")
    return NestedRows(at, len(node), tuple(ignored), unwrap)


def _plain(value: Any) -> Any:
    """Rendered or rich text as its text; anything else as it is."""
    if isinstance(value, dict):
        if set(value) <= {"rendered", "protected", "raw"} and isinstance(value.get("rendered"), str):
            return value["rendered"]  # WordPress REST: {"rendered": "<p>..</p>", "protected": false}
        kind = value.get("type")
        if isinstance(kind, str) and kind in value:  # Notion: {"type": "title", "title": [{plain_text}]}
            return _plain(value[kind])
    if isinstance(value, list) and value and all(isinstance(x, dict) and "plain_text" in x for x in value):
        return "".join(str(x["plain_text"]) for x in value)
    return value


def flat_row(element: Any, unwrap: str) -> Any:
    """One element as a row: the wrapper's keys lifted beside the element's own, rich text as text."""
    if not isinstance(element, dict):
        return element
    row = dict(element)
    inner = row.pop(unwrap, None) if unwrap else None
    if isinstance(inner, dict):
        row = {**{k: v for k, v in row.items() if not isinstance(v, (dict, list))}, **inner}
    return {k: _plain(v) for k, v in row.items()}

