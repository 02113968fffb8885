"""Lint findings and the rule table (shared/reference/data-lint-rules-and-baselines.md, table A4).

A finding names its rule, a severity (`error` / `warning` / `info`), the 1-based line that shows it
(and the column when JSON syntax is at fault), a message that says what to do, and the kind of fix
that exists: `safe` (applied by `devtune data fix`), `confirm` (applied with `--yes` or a confirm in
the screen) or `none`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.data.nested_json import NestedRows

ERROR, WARNING, INFO = "error", "warning", "info"
SAFE, CONFIRM, NONE = "safe", "confirm", "none"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(frozen=True)
class Rule:
    id: str
    number: int  # the row of table A4
    severity: str
    fix: str  # safe | confirm | none
    title: str  # short English name, for lists and help


_RULES = (
    Rule("encoding", 1, ERROR, CONFIRM, "not UTF-8"),
    Rule("json-syntax", 2, ERROR, NONE, "invalid JSON"),
    Rule("trailing-comma", 3, ERROR, SAFE, "trailing comma"),
    Rule("python-repr", 4, ERROR, SAFE, "Python dict, not JSON"),
    Rule("control-char", 5, ERROR, SAFE, "raw control character in a string"),
    Rule("smart-quotes", 6, ERROR, CONFIRM, "curly quotes used as JSON quotes"),
    Rule("truncated", 7, ERROR, NONE, "truncated line"),
    Rule("missing-keys", 8, ERROR, CONFIRM, "required key missing or misnamed"),
    Rule("non-string", 9, ERROR, CONFIRM, "field is not a string"),
    Rule("key-set-change", 10, ERROR, SAFE, "key set changes partway"),
    Rule("duplicate-key", 11, ERROR, CONFIRM, "key repeated in one object"),
    Rule("lone-surrogate", 12, ERROR, CONFIRM, "lone surrogate escape"),
    Rule("sharegpt-roles", 13, ERROR, NONE, "conversation roles out of order"),
    Rule("dangling-turn", 13, WARNING, SAFE, "unanswered last turn (trimmed, the rest kept)"),
    Rule("html", 26, WARNING, CONFIRM, "HTML tags or entities in the text"),
    Rule("dataset-info", 14, ERROR, SAFE, "dataset_info.json entry"),
    Rule("not-an-object", 2, ERROR, NONE, "row is not a JSON object"),
    Rule("not-json", 2, ERROR, NONE, "file is not JSON"),
    Rule("empty-output", 15, WARNING, CONFIRM, "empty output"),
    Rule("too-long", 16, WARNING, NONE, "longer than cutoff_len"),
    Rule("duplicate", 17, WARNING, CONFIRM, "exact duplicate"),
    Rule("conflict", 18, WARNING, NONE, "same prompt, different output"),
    Rule("near-duplicate", 19, WARNING, NONE, "near duplicate"),
    Rule("pii", 20, WARNING, CONFIRM, "personal data"),
    Rule("mojibake", 21, WARNING, CONFIRM, "mojibake or U+FFFD"),
    Rule("json-array", 22, WARNING, SAFE, "JSON array, not JSON Lines"),
    Rule("bom", 23, WARNING, SAFE, "byte order mark"),
    Rule("multi-object-line", 24, WARNING, SAFE, "several objects on one line"),
    Rule("blank-line", 25, INFO, SAFE, "blank line"),
    Rule("crlf", 25, INFO, SAFE, "CRLF line endings"),
    Rule("no-final-newline", 25, INFO, SAFE, "no final newline"),
    Rule("missing-input", 25, INFO, SAFE, "no input key"),
    Rule("extension", 22, INFO, SAFE, "file name extension does not match the content"),
    Rule("whitespace", 26, INFO, SAFE, "leading, trailing or zero-width whitespace"),
    Rule("repetition", 26, INFO, NONE, "repeated characters"),
    Rule("short-output", 26, INFO, NONE, "very short output"),
    Rule("preference", 27, ERROR, NONE, "preference row without a prompt and two different answers"),
    Rule("kto-tag", 28, ERROR, NONE, "KTO tag not a boolean, or one value only"),
    Rule("media", 29, ERROR, NONE, "media file missing or placeholders not matching"),
    Rule("tools", 30, ERROR, NONE, "tool call not JSON or naming no declared tool"),
    Rule("pretrain-text", 31, ERROR, NONE, "pre-training row without its text"),
)
RULES: dict[str, Rule] = {r.id: r for r in _RULES}


@dataclass(slots=True)
class Finding:
    rule: str
    severity: str
    line: int
    message: str
    fix: str = NONE
    column: int | None = None
    values: tuple[str, ...] = ()  # what it found, where a person may keep it (personal data: core.data.pii_keep)
    at: str = ""  # a row inside one JSON document: its path and index (`data.items[3]`), said instead of a line

    @property
    def fixable(self) -> bool:
        """A safe fix exists (what `devtune data fix` applies without --yes)."""
        return self.fix == SAFE

    def to_json(self) -> dict:
        out = {"rule": self.rule, "severity": self.severity, "line": self.line, "column": self.column,
               "message": self.message, "fixable": self.fixable, "fix": self.fix}
        if self.values:
            out["values"] = list(self.values)
        if self.at:
            out["at"] = self.at
        return out

    def sort_key(self) -> tuple:
        return (self.line, self.column or 0, SEVERITY_ORDER.get(self.severity, 3), self.rule)


def finding(rule_id: str, line: int, message: str, *, column: int | None = None,
            severity: str | None = None, fix: str | None = None) -> Finding:
    rule = RULES[rule_id]
    return Finding(rule_id, severity or rule.severity, line, message, fix or rule.fix, column)


def findings_for_pairs(rule_id: str, template: str, lines: list[int], others: list[int]) -> list[Finding]:
    """One finding per row at lines[i] that refers to others[i], from a translated template with {line}
    and {other} (duplicates and conflicts: tens of thousands in a large file). A template with the two
    fields plain (no format spec) is cut into its literal pieces once and filled with a %-format."""
    from itertools import repeat
    from string import Formatter

    rule = RULES[rule_id]
    try:
        fields = list(Formatter().parse(template))
    except ValueError:
        fields = []
    names = [name for _lit, name, _spec, _conv in fields if name is not None]
    simple = fields and all(not spec and not conv for _lit, name, spec, conv in fields if name is not None)
    if not simple or sorted(names) != ["line", "other"]:
        messages = [template.format(line=line, other=other) for line, other in zip(lines, others)]
    else:
        lit = [piece.replace("%", "%%") for piece, _name, _spec, _conv in fields]
        fmt = lit[0] + "%s" + lit[1] + "%s" + "".join(lit[2:])
        ordered = zip(others, lines) if names[0] == "other" else zip(lines, others)
        messages = [fmt % pair for pair in ordered]
    return list(map(Finding, repeat(rule_id), repeat(rule.severity), lines, messages, repeat(rule.fix)))


def _line_label() -> re.Pattern:
    """How this language names a line in a message ("L12", "第 12 行"), as a pattern around the number."""
    from core.i18n import _

    before, _mark, after = _("L{line}", line="\x00").partition("\x00")
    guard = r"(?<![A-Za-z0-9_])" if before[:1].isascii() and before[:1].isalpha() else ""
    return re.compile(guard + re.escape(before) + r"(\d+)" + re.escape(after) + r"(?!\d)")


def name_rows_in(message: str, nested: NestedRows) -> str:
    """A message about rows inside one JSON document, each line label ("L4", "第 4 行") turned into the row's
    path in backticks (`data.items[3]`): the reader numbers such rows 1, 2, 3..., a document has no line per row."""
    return _line_label().sub(lambda m: f"`{nested.element(int(m.group(1)))}`", message)


def name_rows(findings: list[Finding], nested: NestedRows | None) -> list[Finding]:
    """Row findings of a file that is one JSON document, named by path (`Finding.at`) instead of a line."""
    if nested is None:
        return findings
    return [replace(f, at=nested.element(f.line), column=None, message=name_rows_in(f.message, nested))
            for f in findings]


def sort_findings(findings: list[Finding]) -> None:
    """Sort in place by `Finding.sort_key` (stable: findings with equal keys keep their order)."""
    findings.sort(key=Finding.sort_key)


def count_by_severity(findings) -> dict[str, int]:
    counts = {ERROR: 0, WARNING: 0, INFO: 0}
    for f in findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    return counts
