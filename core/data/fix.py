"""Fix a dataset into a new JSON Lines file, never in place, atomically.

Every input row ends in the output or in the rejects file (with its line number and the reason):
rows in = rows out + rows rejected, always. Safe fixes are applied by default; fixes that change
meaning or could be wrong (transcoding, renaming keys, numbers to text, dropping empty outputs and exact
duplicates, masking personal data, undoing mojibake, curly quotes, lone surrogates, repeated keys) only with
`yes`.

    report = fix_file("data/support_messy.jsonl", "data/support_clean.jsonl", yes=True)

Pass 1 is `lint_file` (schema, keys, what is wrong); pass 2 reads the records again and writes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

from core.errors import BadInput
from core.files.atomic import FileExistsRefused
from core.data import content
from core.data.fix_output import FixReport, RowWriter, default_rejects_path
from core.data.json_repair import diagnose, duplicate_keys
from core.data.findings import CONFIRM, SAFE
from core.data.html_text import html_remnants, strip_html
from core.data.lint import LintOptions, LintReport, lint_file
from core.data.pii_keep import keep_for
from core.data.reader import CSV, EMPTY, TEXT, TEXT_COLUMN, ReadNotes, is_text_file, iter_records, probe_file
from core.data.scan import key_count
from core.data.source_kind import is_chat_transcript
from core.data.row_rules import check_row
from core.data.schema import ALIASES, ALPACA, PRETRAIN, Schema
from core.i18n import _, _n


# Every text mask_pii or unmangle changes holds one of these: a digit or "@" (phone, ID, e-mail), or the
# Ã, Â or â that Latin-1 mojibake starts with (what unmangle can undo).
_PII_OR_MOJIBAKE = re.compile("[0-9@\u00c3\u00c2\u00e2]")


def confirmed_fixes() -> str:
    """What a confirmation (`--yes`, the Data step's box) adds to the safe fixes, in words: the one list both
    front-ends say."""
    return _("transcode, rename keys, numbers to text, drop empty outputs and exact duplicates, mask personal "
             "data (not the workspace's kept contacts)")


class FixRefused(BadInput):
    """The fix cannot run as asked (same file, output exists, not a JSON dataset); the message says why."""


def fix_file(source: str | os.PathLike, output: str | os.PathLike, *, rejects: str | os.PathLike | None = None,
             yes: bool = False, force: bool = False, dry_run: bool = False, preview: int = 0,
             lint: LintReport | None = None, progress: Callable[[str], None] | None = None,
             keep: frozenset[str] | None = None) -> FixReport:
    """Write the fixed rows of `source` to `output` (JSON Lines) and the rest to `rejects`. `keep`: contact
    details left unmasked (normalized, core.data.pii_keep; None: the list of the workspace holding `source`)."""
    src, out = Path(source), Path(output)
    rej = Path(rejects) if rejects else default_rejects_path(out)
    if out.exists() and out.resolve() == src.resolve() or rej.exists() and rej.resolve() == src.resolve():
        raise FixRefused(_("{out} is the input file; fix never writes in place: choose another -o", out=out))
    if out.resolve() == rej.resolve():
        raise FixRefused(_("the output and the rejects file are the same file ({path})", path=out))
    if not dry_run and out.exists() and not force:
        raise FileExistsRefused(out)
    probe = probe_file(src)
    report = lint
    if probe.layout == TEXT and is_text_file(probe):
        report = report or lint_file(src, LintOptions(keep=keep))
    if is_chat_transcript(src):  # JSON or CSV: its rows are messages, not examples
        raise _convert_first(src, _("{file} is a chat export, not a dataset; convert it first: `devtune data "
                                    "convert {file} -o {out}`"))
    if probe.layout in (TEXT, CSV, EMPTY) and not (report and report.schema.text_file):
        raise _convert_first(src, _("{file} is not a JSON dataset ({layout}); convert it first: devtune data "
                                    "convert {file} -o {out}"), layout=probe.layout)
    text_out = out.suffix.lower() == ".txt"
    if text_out and not (report and report.schema.text_file):
        raise FixRefused(_("{out}: LLaMA-Factory reads a .txt file as plain text, a row per line; fix writes JSON "
                           "rows: choose a .jsonl name", out=out))
    report = report or lint_file(src, LintOptions(keep=keep))
    result = FixReport(str(src), str(out), str(rej))
    fixer = _RowFixer(report.schema, yes, result, report, keep_for(src) if keep is None else keep)
    with RowWriter(result, dry_run, preview, force, text_column=TEXT_COLUMN if text_out else None,
                   nested=probe.nested) as writer:
        for n, rec in enumerate(iter_records(probe, ReadNotes())):
            if progress and n % 100000 == 0 and n:
                progress(_n("fix: {n} row", "fix: {n} rows", n))
            fixer.record(rec, writer)
        result.written = not dry_run
    return result


def _convert_first(src: Path, message: str, **fields: str) -> FixRefused:
    """The refusal of a file that `devtune data convert` turns into a dataset, with the command that does."""
    from core.data.wording import convert_hint_paths

    hint_src, hint_out = convert_hint_paths(src)
    return FixRefused(message.format(file=hint_src, out=hint_out, **fields))


class _RowFixer:
    def __init__(self, schema: Schema, yes: bool, report: FixReport, lint: LintReport,
                 keep: frozenset[str] = frozenset()) -> None:
        self.schema = schema
        self.yes = yes
        self.keep = keep  # contact details the workspace keeps (not masked)
        self.r = report
        # exact duplicates, dropped only with `yes`: the pairs lint found (its fingerprints: xxhash of the
        # prompt and the output, the same in every process), each confirmed by the content of the fixed rows
        self.duplicate_of = lint.duplicate_of
        self.firsts = set(lint.duplicate_of.values())
        self.first_content: dict[int, bytes] = {}  # line of a first copy (written) → its content
        canon = ["instruction", "input", "output"]
        if schema.history:
            canon.append("history")
        if schema.system:
            canon.append("system")
        # rows of other kinds, or with tools / media / a tag, are kept as they are: their entry names the columns
        self.canonical = canon if schema.kind == ALPACA and schema.plain else []
        self.whole_row = not schema.plain  # duplicates: the whole row (a prompt may have many pairs)
        self.verbatim = {k for k in (schema.tools, schema.images, schema.videos, schema.audios, schema.kto_tag) if k}
        known = {schema.prompt, schema.query, schema.response, schema.history, schema.system, *canon}
        self.extra_keys = [k for k in lint.keys if k not in known] if self.canonical else []
        self.unfixed: list[str] = []  # the fixes `yes` would apply to the row at hand (without yes)
        self.trimmed: Any = None  # the unanswered last turn cut from the row at hand

    # -- records
    def record(self, rec, w: RowWriter) -> None:
        import orjson

        raw = rec.raw
        how = rec.decoded
        rules: list[str] = []
        if how == "invalid":
            self.r.rows_in += 1
            w.reject(rec.line, _("bytes are neither UTF-8 nor GB18030"), "encoding", raw)
            return
        if how in ("gb18030", "utf-16"):
            if not self.yes:
                self.r.pending["encoding"] += 1
                self.r.rows_in += 1
                w.reject(rec.line, _("not UTF-8 ({how}); transcoding needs a confirmation", how=how), "encoding", raw)
                return
            rules.append("encoding")
        try:
            values = [orjson.loads(raw)]
            kind = SAFE
            if key_count(values[0]) != raw.count(b'":') and duplicate_keys(raw.decode("utf-8", "replace")):
                kind = CONFIRM
                rules.append("duplicate-key")
            rest_reason = ""
        except orjson.JSONDecodeError:
            d = diagnose(raw, rec.line)
            values, kind, rest_reason = d.values, d.fix, d.reason
            rules += [f.rule for f in d.findings]
            if not values:
                self.r.rows_in += 1
                w.reject(rec.line, d.reason or _("invalid JSON"), d.findings[0].rule if d.findings else "json-syntax",
                         raw)
                return
        self.r.rows_in += len(values) + (1 if rest_reason else 0)
        if kind == CONFIRM and not self.yes:
            for rule in rules:
                self.r.pending[rule] += 1
            for _v in values:
                w.reject(rec.line, _("needs a confirmation: {rules}", rules=", ".join(dict.fromkeys(rules))), rules[0], raw)
            if rest_reason:
                w.reject(rec.line, rest_reason, "truncated", raw)
            return
        for value in values:
            self.value(value, rec.line, raw, rules, w)
        if rest_reason:
            w.reject(rec.line, rest_reason, "truncated", raw)

    # -- one parsed row
    def value(self, value: Any, line: int, raw: bytes, rules: list[str], w: RowWriter) -> None:
        rules = list(rules)
        self.unfixed = []
        self.trimmed = None
        row = self.canonical_row(value, line, rules)
        if isinstance(row, str):  # a reason to reject
            w.reject(line, row, rules[-1] if rules else "missing-keys", raw)
            return
        first = self.duplicate_of.get(line)
        if first is not None and self.first_content.get(first) == self.content(row):
            if self.yes:
                w.reject(line, _("duplicate of L{other}", other=first), "duplicate", raw)
                return
            self.unfixed.append("duplicate")  # --yes drops it
        elif line in self.firsts and line not in self.first_content:
            self.first_content[line] = self.content(row)
        for rule in dict.fromkeys(rules):
            self.r.changes[rule] += 1
        for rule in dict.fromkeys(self.unfixed):
            self.r.kept_unfixed[rule] += 1
        w.row(row)
        if self.trimmed is not None:
            w.trimmed(line, self.trimmed)

    def content(self, row: dict) -> bytes:
        """What makes two fixed rows the same: the columns LLaMA-Factory reads (alpaca), the whole row
        (rows with tools, media, a tag or another kind), the turns and the system prompt (sharegpt)."""
        import orjson

        if self.canonical:
            return orjson.dumps([row.get(k, "") for k in row if k not in self.extra_keys])
        if self.whole_row:
            return orjson.dumps(row, option=orjson.OPT_SORT_KEYS)
        return orjson.dumps([row.get(self.schema.messages), row.get(self.schema.system or "", "")])

    def canonical_row(self, value: Any, line: int, rules: list[str]) -> dict | str:
        schema = self.schema
        if not isinstance(value, dict):
            rules.append("not-an-object")
            return _("not a JSON object")
        findings: list = []
        view = check_row(value, line, schema, findings)
        by_rule = {f.rule: f for f in findings}
        if view is None:
            f = findings[0] if findings else None
            rules.append(f.rule if f else "missing-keys")
            return f.message if f else _("cannot be read as a {kind} row", kind=schema.kind)
        if view.fix == CONFIRM and not self.yes:
            names = [f.rule for f in findings if f.fix == CONFIRM]
            for rule in names:
                self.r.pending[rule] += 1
            rules += names
            return _("needs a confirmation: {rules}", rules=", ".join(names))
        rules += [f.rule for f in findings if f.fix in (SAFE, CONFIRM) and f.rule != "whitespace"]
        if not self.canonical:
            row = {k: v if k in self.verbatim else self._clean_strings(v, rules) for k, v in value.items()}
            if "dangling-turn" in by_rule:  # the unanswered last turn goes, the answered exchanges stay
                self.trimmed = value[schema.messages][-1]
                row[schema.messages] = row[schema.messages][:-1]
            if schema.task == PRETRAIN and not str(row.get(schema.prompt) or "").strip():
                if self.yes:
                    rules.append("empty-output")
                    return _("empty text")
                self.unfixed.append("empty-output")  # --yes drops it
            return row
        row = self._alpaca(value, schema, rules, by_rule)
        response = "output" if "output" in row else schema.response
        if not str(row.get(response, "")).strip():
            if self.yes:
                rules.append("empty-output")
                return _("empty output")
            self.unfixed.append("empty-output")  # --yes drops it
        return row

    def _alpaca(self, value: dict, schema: Schema, rules: list[str], by_rule: dict) -> dict:
        src = value
        prompt_key, response_key, query_key = schema.prompt, schema.response, schema.query
        if (schema.prompt not in value or schema.response not in value):
            found = next(((p, r) for p, r in ALIASES if p in value and r in value), None)
            prompt_key, response_key = found  # check_row accepted it, so an alias pair is there
            query_key = next((q for q in ("input", "context", "query") if q in value and q not in found), None)
            rules.append("missing-keys")
        rename = self.yes or not schema.aliased
        names = ("instruction", "input", "output") if rename else (schema.prompt, schema.query, schema.response)
        row: dict[str, Any] = {}
        for name, key in zip(names, (prompt_key, query_key, response_key)):
            if name is None:
                continue
            v = src.get(key, "") if key else ""
            row[name] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v)) \
                if not isinstance(v, str) else v
        if schema.history and isinstance(src.get(schema.history), list):
            row["history"] = src[schema.history]
        elif "history" in self.canonical:
            row["history"] = []
        if schema.system:
            s = src.get(schema.system)
            row["system"] = s if isinstance(s, str) else ""
        for k in self.extra_keys:  # columns LLaMA-Factory does not read: kept, the same in every row
            row[k] = src.get(k)
        if rename and (query_key is None or query_key not in value):
            rules.append("missing-input")
        if rename and schema.aliased:
            rules.append("missing-keys")
        if not rename:  # --yes renames the keys to instruction/input/output
            self.unfixed.append("missing-keys")
            if query_key is None or query_key not in value:
                self.unfixed.append("missing-input")
        return self._clean_strings(row, rules)

    def _clean_strings(self, row: Any, rules: list[str]) -> Any:
        if isinstance(row, str):
            cleaned = content.clean_whitespace(row)
            if cleaned != row:
                rules.append("whitespace")
            if self.yes:
                masked = content.mask_pii(cleaned, self.keep)
                if masked != cleaned:
                    rules.append("pii")
                fixed = content.unmangle(masked)
                if fixed != masked:
                    rules.append("mojibake")
                plain = strip_html(fixed)
                if plain != fixed:
                    rules.append("html")
                return plain
            if _PII_OR_MOJIBAKE.search(cleaned):  # what --yes would change (most texts skip the exact checks)
                masked = content.mask_pii(cleaned, self.keep)
                if masked != cleaned:
                    self.unfixed.append("pii")
                if content.unmangle(masked) != masked:
                    self.unfixed.append("mojibake")
            if html_remnants(cleaned, 1):
                self.unfixed.append("html")
            return cleaned
        if isinstance(row, dict):
            return {k: self._clean_strings(v, rules) for k, v in row.items()}
        if isinstance(row, list):
            return [self._clean_strings(v, rules) for v in row]
        return row
