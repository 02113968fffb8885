"""Checks of the text inside the fields: whitespace, personal data, mojibake, repetition, short outputs
(table A4 rules 20, 21, 26), and the repairs `fix` applies for them.

`core.data.content_hints` finds, cheaply and per block, a superset of the rows with personal data,
zero-width characters or mojibake; only those rows get the exact (slower) checks of `check_texts`.
"""

from __future__ import annotations

import re

from core.data.findings import Finding, finding
from core.data.html_text import html_remnants
from core.i18n import _, _n

ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
_ZW_RE = re.compile(f"[{ZERO_WIDTH}]")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
CN_MOBILE = re.compile(r"(?<![0-9])(?:\+?86[- ]?)?1[3-9][0-9]{9}(?![0-9])")
CN_ID = re.compile(r"(?<![0-9])[1-9][0-9]{5}(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}"
                   r"[0-9Xx](?![0-9A-Za-z])")
INTL_PHONE = re.compile(r"(?<![\w+])\+[1-9][0-9]{0,2}[ -]?(?:\(?[0-9]{1,4}\)?[ -]?){2,4}[0-9]{2,4}(?![0-9])")
US_PHONE = re.compile(r"(?<![0-9])(?:\([0-9]{3}\) ?|[0-9]{3}[-.])[0-9]{3}[-.][0-9]{4}(?![0-9])")
PII_PATTERNS = (("phone", CN_MOBILE), ("phone", INTL_PHONE), ("phone", US_PHONE), ("email", EMAIL),
                ("id", CN_ID))
MOJIBAKE = re.compile("\ufffd|锟斤拷|Ã[\u0080-\u00bf]|â€|Â[\u00a0-\u00bf]")
# An output that loops shows it in its first 100,000 characters; judging only those keeps a 50 MB answer
# from costing seconds of n-gram sets (it is reported as too long anyway).
REPETITION_WINDOW = 100_000


def repetition_ratio(text: str, n: int = 10) -> float:
    """Share of the character n-grams of `text` that repeat an earlier one (0 = none, → 1 = loops)."""
    total = len(text) - n + 1
    if total <= 1:
        return 0.0
    distinct = len({text[i:i + n] for i in range(total)})
    return 1.0 - distinct / total


def repetition_over(text: str, limit: float = 0.6, n: int = 10) -> float | None:
    """`repetition_ratio(text)` when it is above `limit`, else None; most texts are settled by their first
    (1 - limit) share of n-grams: when those are already distinct enough, the ratio cannot exceed limit."""
    total = len(text) - n + 1
    if total <= 1:
        return None
    head = min(total, int((1.0 - limit) * total) + 2)
    seen = {text[i:i + n] for i in range(head)}
    if 1.0 - len(seen) / total <= limit:
        return None
    seen.update({text[i:i + n] for i in range(head, total)})
    ratio = 1.0 - len(seen) / total  # = repetition_ratio(text, n)
    return ratio if ratio > limit else None


def maybe_repetitive(output: str) -> bool:
    """Cheap test for outputs that loop: the last 8 characters occur 4 times or more."""
    return len(output) >= 80 and output.count(output[-8:]) >= 4


def is_short(output: str) -> bool:
    return 0 < len(output.strip()) < 10 and len(output.strip().encode()) < 20


def pii_label(kind: str) -> str:
    return {"phone": _("phone number"), "email": _("e-mail address"), "id": _("ID number")}.get(kind, kind)


def pii_values(text: str, keep: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """kind -> the values of that kind in `text`, leaving out the workspace's kept ones (core.data.pii_keep)."""
    from core.data.pii_keep import normalized

    found: dict[str, list[str]] = {}
    has_plus = "+" in text
    for name, rx in PII_PATTERNS:
        if (name == "email" and "@" not in text) or (rx is INTL_PHONE and not has_plus):
            continue
        for m in rx.finditer(text):
            if not keep or normalized(m.group()) not in keep:
                found.setdefault(name, []).append(m.group())
    return found


def pii_kinds(text: str, keep: frozenset[str] = frozenset()) -> list[str]:
    return list(pii_values(text, keep))


def check_texts(texts, output: str, line: int, out: list[Finding], *, pii: bool = True, short: bool = True,
                keep: frozenset[str] = frozenset()) -> None:
    """The content findings of one row. `texts` are (field, text) pairs, `output` the trained target
    (`short`: say when it is very short; not for pre-training text, whose lines may be short; `keep`: the
    workspace's kept contact details, not personal data)."""
    ws_fields = [f for f, t in texts if t and (t.strip() != t or _ZW_RE.search(t))]
    if ws_fields:
        zw = any(_ZW_RE.search(t) for _f, t in texts)
        edges = any(t.strip() != t for _f, t in texts if t)
        what = (_("leading/trailing whitespace and zero-width characters") if zw and edges
                else _("zero-width characters") if zw else _("leading or trailing whitespace"))
        out.append(finding("whitespace", line, _(
            "L{line}: {what} in {fields}; fix strips it", line=line, what=what, fields=", ".join(ws_fields))))
    if pii:  # a finding per value: each one is masked, or kept as the business's own (core.data.pii_keep)
        found: dict[tuple[str, str], list[str]] = {}
        for f, t in texts:
            for kind, values in pii_values(t, keep).items():
                for v in values:
                    found.setdefault((kind, v), []).append(f)
        for (kind, value), fields in found.items():
            item = finding("pii", line, _(
                "L{line}: {kind} {values} in {fields}; mask it (fix --yes) or remove it before training; a public "
                "contact of the business stays with `devtune data fix FILE --keep VALUE`",
                line=line, kind=pii_label(kind), values=value, fields=", ".join(dict.fromkeys(fields))))
            item.values = (value,)
            out.append(item)
    html = [(f, found) for f, t in texts if t and (found := html_remnants(t))]
    if html:
        out.append(finding("html", line, _(
            "L{line}: HTML in {fields} ({found}); the model learns the markup; fix --yes turns it into plain text",
            line=line, fields=", ".join(f for f, _h in html), found=" ".join(html[0][1]))))
    bad = [f for f, t in texts if MOJIBAKE.search(t)]
    if bad:
        out.append(finding("mojibake", line, _(
            "L{line}: likely mojibake (garbled characters or U+FFFD) in {fields}; check the source encoding",
            line=line, fields=", ".join(bad))))
    if maybe_repetitive(output):
        ratio = repetition_over(output[:REPETITION_WINDOW], 0.6)
        if ratio is not None:
            out.append(finding("repetition", line, _(
                "L{line}: output repeats itself ({pct}% repeated 10-character runs); check the source",
                line=line, pct=int(ratio * 100))))
    if short and is_short(output):
        out.append(finding("short-output", line, _n(
            "L{line}: very short output ({n} character); check it is a real answer",
            "L{line}: very short output ({n} characters); check it is a real answer", len(output.strip()), line=line)))


# ------------------------------------------------------------------ repairs used by fix

def clean_whitespace(text: str) -> str:
    return _ZW_RE.sub("", text).strip()


def mask_pii(text: str, keep: frozenset[str] = frozenset()) -> str:
    """Phone numbers keep their first 3 and last 4 digits, e-mail addresses their domain, IDs their first 6;
    the workspace's kept values (`keep`, normalized: core.data.pii_keep) stay as they are."""
    from core.data.pii_keep import normalized

    def unless_kept(mask):
        return lambda m: m.group() if keep and normalized(m.group()) in keep else mask(m)

    def phone(m: re.Match) -> str:
        s = m.group()
        digits = [i for i, c in enumerate(s) if c.isdigit()]
        shown = set(digits[:3] + digits[-4:])
        return "".join("*" if c.isdigit() and i not in shown else c for i, c in enumerate(s))

    text = CN_ID.sub(unless_kept(lambda m: m.group()[:6] + "*" * (len(m.group()) - 6)), text)
    for rx in (CN_MOBILE, INTL_PHONE, US_PHONE):
        text = rx.sub(unless_kept(phone), text)
    return EMAIL.sub(unless_kept(lambda m: "***@" + m.group().split("@", 1)[1]), text)


def unmangle(text: str) -> str:
    """Undo UTF-8 read as Latin-1/cp1252 when that round-trips; other mojibake is left alone."""
    if not MOJIBAKE.search(text) or "\ufffd" in text or "锟斤拷" in text:
        return text
    for codec in ("cp1252", "latin-1"):
        try:
            return text.encode(codec).decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            continue
    return text
