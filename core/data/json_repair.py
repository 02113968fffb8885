"""The slow path: why a record is not valid JSON, and whether it can be recovered.

Only records that `orjson.loads` rejects come here (a few per file, usually), so this module can afford
the standard library's JSON decoder (line/column messages), `ast.literal_eval` and repairs that are
verified by re-parsing. Table A4 rules 2-7, 11, 12 and 24.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from core.data.findings import CONFIRM, NONE, SAFE, Finding, finding
from core.i18n import _

_DECODER = json.JSONDecoder()
_LENIENT = json.JSONDecoder(strict=False)
_STRING_OR_TRAILING_COMMA = re.compile(r'("(?:[^"\\\n]|\\.)*")|,(\s*[}\]])')
_TRAILING_COMMA_ANYWHERE = re.compile(r",\s*[}\]]")  # cheap first look: no match, nothing to remove
_SMART_OPEN = re.compile(r"([{\[,:]\s*)[“”]")
_SMART_CLOSE = re.compile(r"[“”](\s*[:,}\]])")
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_CONTROL = re.compile(r"[\x00-\x1f]")
_FIX_RANK = {SAFE: 0, CONFIRM: 1, NONE: 2}


@dataclass
class JsonDiagnosis:
    """What is wrong with one record and the values that can be recovered from it."""

    findings: list[Finding] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)  # parsed values, after the repairs below
    fix: str = SAFE  # the strongest kind of fix needed to recover `values`: safe | confirm | none
    reason: str = ""  # why nothing could be recovered (for the rejects file)

    def need(self, kind: str) -> None:
        if _FIX_RANK[kind] > _FIX_RANK[self.fix]:
            self.fix = kind


def position(text: str, pos: int, first_line: int) -> tuple[int, int]:
    """(line, 1-based column) of character `pos` in a record that starts on `first_line`."""
    pos = max(0, min(pos, len(text)))
    line = first_line + text.count("\n", 0, pos)
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def duplicate_keys(text: str) -> list[str]:
    """Keys that appear twice in one object anywhere in the value (orjson and json keep the last)."""
    dups: list[str] = []

    def hook(pairs):
        seen = set()
        for k, _v in pairs:
            if k in seen and k not in dups:
                dups.append(k)
            seen.add(k)
        return dict(pairs)

    try:
        json.loads(text, object_pairs_hook=hook)
    except ValueError:
        return []
    return dups


def has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value) or math.isinf(value)
    if isinstance(value, dict):
        return any(has_nonfinite(v) for v in value.values())
    if isinstance(value, list):
        return any(has_nonfinite(v) for v in value)
    return False


def replace_surrogates(value: Any) -> Any:
    """Lone surrogates → U+FFFD (the confirm fix of rule 12)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_surrogates(v) for v in value]
    return value


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _remove_trailing_commas(text: str) -> tuple[str, int | None]:
    if not _TRAILING_COMMA_ANYWHERE.search(text):
        return text, None
    first: list[int] = []

    def repl(m: re.Match) -> str:
        if m.group(1) is not None:
            return m.group(1)
        if not first:
            first.append(m.start())
        return m.group(2)

    out = _STRING_OR_TRAILING_COMMA.sub(repl, text)
    return out, (first[0] if first else None)


def _python_literal(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, (dict, list)):
        return None
    try:
        return json.loads(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return None


def _loads(text: str, decoder: json.JSONDecoder = _DECODER) -> tuple[Any, json.JSONDecodeError | None]:
    try:
        value, end = decoder.raw_decode(text)
    except json.JSONDecodeError as exc:
        return None, exc
    except RecursionError:
        return None, json.JSONDecodeError("nesting too deep", text, 0)
    if text[end:].strip():
        return None, json.JSONDecodeError("Extra data", text, end)
    return value, None


def _split_values(text: str) -> tuple[list[Any], int, str] | None:
    """Several JSON values on one line: the parsed ones, where the rest starts, and the rest."""
    values = []
    pos = len(text) - len(text.lstrip())
    while pos < len(text):
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            break
        values.append(value)
        pos = end + len(text[end:]) - len(text[end:].lstrip())
    if len(values) < 2 and not (values and pos < len(text)):
        return None
    return values, pos, text[pos:]


def diagnose(raw: bytes, line: int) -> JsonDiagnosis:
    """Diagnose a record that orjson rejected (or that it accepted but that may hold NaN / surrogates)."""
    text = raw.decode("utf-8", errors="surrogatepass") if isinstance(raw, bytes) else raw
    return _diagnose_text(text, line, top=True)


def _diagnose_text(text: str, line: int, *, top: bool, col_base: int = 0) -> JsonDiagnosis:
    d = JsonDiagnosis()
    value, err = _loads(text)
    if err is None:
        _accepted_by_stdlib(text, value, line, d)
        return d

    if top and err.msg.startswith("Extra data"):
        split = _split_values(text)
        if split is not None:
            values, rest_at, rest = split
            d.findings.append(finding("multi-object-line", line, _(
                "L{line}: {count} objects on one line; fix puts each on its own line",
                line=line, count=len(values) + (1 if rest.strip() else 0))))
            for v in values:
                sub = JsonDiagnosis()
                _accepted_by_stdlib(json.dumps(v, ensure_ascii=False), v, line, sub)
                d.findings += sub.findings
                d.need(sub.fix)
                d.values += sub.values
            if rest.strip():
                tail = _diagnose_text(rest, line, top=False, col_base=col_base + rest_at)
                d.findings += tail.findings
                d.values += tail.values
                if tail.fix == NONE:
                    d.reason = tail.reason  # the recovered values are kept; the broken rest is rejected
            return d

    # repairs, each verified by re-parsing the whole record
    no_commas, comma_at = _remove_trailing_commas(text)
    if comma_at is not None:
        value, err2 = _loads(no_commas)
        if err2 is None:
            ln, col = position(text, comma_at, line)
            closer = no_commas[comma_at:].lstrip()[:1] or "}"
            d.findings.append(finding("trailing-comma", ln, _(
                "L{line}:{col}: trailing comma before {closer}; fix removes it",
                line=ln, col=col + col_base, closer=closer), column=col + col_base))
            _accepted_by_stdlib(no_commas, value, line, d)
            return d

    value, err3 = _loads(no_commas, _LENIENT)
    if err3 is None:
        m = _CONTROL.search(text)
        ln, col = position(text, m.start() if m else 0, line)
        char = repr(m.group()) if m else "?"
        d.findings.append(finding("control-char", ln, _(
            "L{line}:{col}: unescaped control character {char} inside a string; fix escapes it",
            line=ln, col=col + col_base, char=char), column=col + col_base))
        if comma_at is not None:
            d.findings.append(finding("trailing-comma", ln, _(
                "L{line}: trailing comma before }}; fix removes it", line=ln)))
        _accepted_by_stdlib(no_commas, value, line, d)
        return d

    if "'" in text:
        value = _python_literal(text)
        if value is not None:
            d.findings.append(finding("python-repr", line, _(
                "L{line}: Python dict, not JSON (single quotes or True/None); fix rewrites it as JSON",
                line=line)))
            d.values.append(value)
            return d

    if "“" in text or "”" in text:
        fixed = _SMART_CLOSE.sub(r'"\1', _SMART_OPEN.sub(r'\1"', text))
        value, err4 = _loads(_remove_trailing_commas(fixed)[0])
        if err4 is None:
            d.findings.append(finding("smart-quotes", line, _(
                "L{line}: curly quotes “ ” used as JSON quotes; fix replaces them (with --yes)", line=line)))
            d.need(CONFIRM)
            _accepted_by_stdlib(fixed, value, line, d)
            return d

    # nothing worked: say where and why
    pos = err.pos
    ln, col = position(text, pos, line)
    tail = text[pos:].strip()
    if (err.msg.startswith("Unterminated string") or not tail
            or err.msg.startswith("Expecting") and pos >= len(text.rstrip())):
        what = _("unterminated string") if err.msg.startswith("Unterminated string") else _("ends before the value is complete")
        d.findings.append(finding("truncated", ln, _(
            "L{line}:{col}: truncated: {what}; complete the line by hand, or fix drops it into the rejects file",
            line=ln, col=col + col_base, what=what), column=col + col_base))
        d.reason = _("truncated line")
    else:
        d.findings.append(finding("json-syntax", ln, _(
            "L{line}:{col}: invalid JSON: {msg}; correct it by hand, or fix drops it into the rejects file",
            line=ln, col=col + col_base, msg=err.msg), column=col + col_base))
        d.reason = _("invalid JSON at line {line}, column {col}: {msg}", line=ln, col=col + col_base, msg=err.msg)
    d.fix = NONE
    return d


def _accepted_by_stdlib(text: str, value: Any, line: int, d: JsonDiagnosis) -> None:
    """A value the standard library parses but orjson may not: NaN/Infinity, lone surrogates, duplicate keys."""
    if _LONE_SURROGATE.search(text) or (isinstance(value, (dict, list, str)) and _has_surrogate(json.dumps(
            value, ensure_ascii=False))):
        d.findings.append(finding("lone-surrogate", line, _(
            "L{line}: invalid \\uD800-style escape (a lone surrogate); fix replaces it with U+FFFD (with --yes)",
            line=line)))
        d.need(CONFIRM)
        value = replace_surrogates(value)
    dups = duplicate_keys(text)
    if dups:
        d.findings.append(finding("duplicate-key", line, _(
            "L{line}: key \"{key}\" repeated in one object; datasets refuses it; fix keeps the last (with --yes)",
            line=line, key=dups[0])))
        d.need(CONFIRM)
    d.values.append(value)
