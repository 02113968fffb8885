"""Lint a dataset file: every rule of table A4, stats, and a report (`LintReport`) the CLI, the screen
and `fix` share.

    report = lint_file("data/support_messy.jsonl", LintOptions(cutoff_len=1024, jobs=2))

UTF-8 JSON Lines are decoded with msgspec (`jsonl_scan.scan_jsonl_part`), in chunks cut at line starts
and scanned by `jobs` worker processes whose results are merged with global line numbers
(`parallel_scan`); duplicates across chunks are found from the merged fingerprints (`duplicates`). Other
layouts and encodings take the general loop (`scan.scan_records`). Near duplicates and exact token
counts are opt-in passes after the scan.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from core.data.findings import (ERROR, INFO, NONE, SAFE, WARNING, Finding, count_by_severity, finding,
                                   findings_for_pairs, name_rows, sort_findings)
from core.data.duplicates import find_duplicates
from core.data.lint_progress import LintProgress
from core.data.parallel_scan import merge_parts, plan_spans, run_parts
from core.data.pii_keep import keep_for
from core.data.nested_json import NestedRows
from core.data.reader import (CSV, EMPTY, JSON_ARRAY, JSON_STREAM, JSONL, TEXT, FileProbe, ReadNotes,
                                 is_text_file, iter_records, probe_file)
from core.data.scan import PartResult, ScanContext, paused_gc, scan_records, severity_of_key_change
from core.data.schema import ALPACA, FEEDBACK, UNKNOWN, Schema, detect_schema
from core.data.stats import DatasetStats, StatsAccumulator, build_stats
from core.data.text_dataset import text_dataset
from core.data.wording import convert_hint_paths, counted
from core.i18n import _, _n

SCHEMA_SAMPLE_ROWS = 200
ALLOWED_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet", ".arrow", ".txt")


@dataclass
class LintOptions:
    cutoff_len: int = 2048
    tokenizer: str | None = None  # a tokenizer folder (or model folder): exact token counts
    near_dups: bool = False
    jobs: int = 1
    start_method: str | None = None  # fork | spawn | None (fork when this process has no other thread)
    kind: str | None = None  # judge the rows as this kind (schema.KINDS) instead of their entry / detection
    use_entry: bool = True  # the file's own dataset_info.json entry decides the format, columns and tags
    keep: frozenset[str] | None = None  # kept contact details (normalized); None: the file's workspace's list


@dataclass
class LintReport:
    file: str
    rows: int
    format: str
    encoding: str
    encoding_reason: str
    layout: str
    findings: list[Finding]
    stats: DatasetStats
    schema: Schema
    elapsed: float = 0.0
    trainable_rows: int = 0
    duplicate_lines: set[int] = field(default_factory=set)
    duplicate_of: dict[int, int] = field(default_factory=dict)  # line of a duplicate → line of its first copy
    keys: list[str] = field(default_factory=list)  # the keys of the rows, in the order they first appear

    @property
    def counts(self) -> dict[str, int]:
        return count_by_severity(self.findings)

    @property
    def errors(self) -> int:
        return self.counts[ERROR]

    @property
    def warnings(self) -> int:
        return self.counts[WARNING]

    def fixable(self) -> dict[str, int]:
        out = {"safe": 0, "confirm": 0, "none": 0}
        for f in self.findings:
            if f.severity != INFO or f.fix == SAFE:
                out[f.fix] = out.get(f.fix, 0) + 1
        return out

    def to_json(self) -> dict:
        return {
            "file": self.file, "rows": self.rows, "format": self.format, "encoding": self.encoding,
            "encoding_reason": self.encoding_reason, "layout": self.layout,
            "kind": self.schema.task, "kind_from": self.schema.source,
            "counts": self.counts, "findings": [f.to_json() for f in self.findings],
            "stats": self.stats.to_json(),
        }


# ------------------------------------------------------------------ schema from the first rows

def schema_for(path, rows: list, kind: str | None = None, use_entry: bool = True) -> Schema:
    """How LLaMA-Factory reads the file: its own dataset_info.json entry when it has one, else the format
    and kind detected from the first rows (`Schema.source` says which); `kind` overrides the kind."""
    from dataclasses import replace

    from core.data.dataset_entry import find_entry, schema_from_entry

    probe = probe_file(path)
    text = text_dataset(probe, kind, use_entry) if is_text_file(probe) else None
    if text is not None:
        return text.schema
    found = find_entry(path) if use_entry else None
    if found is not None:
        schema = schema_from_entry(found.entry, found.name)
        folder = found.dataset_dir
    else:
        schema = detect_schema(v for _r, v in rows)
        if schema.kind == UNKNOWN:
            schema = Schema()  # judge the rows as alpaca: the findings say which keys are missing
        folder = Path(path).resolve().parent
    if kind and kind != schema.task:
        schema = _as_kind(schema, kind, rows)
    if schema.media:
        schema = replace(schema, media_dir=str(folder))
    return schema


def format_label(schema: Schema) -> str:
    """The format as the report shows it, with the kind of rows, the tools and media columns, and where that
    reading came from: "sharegpt · preference pairs (dpo) · as dataset_info.json entry dpo_demo says",
    "sharegpt · supervised (sft) · tools · detected from the rows" (plain SFT: the format)."""
    from core.data.schema import SUPERVISED

    parts = [schema.label]
    if schema.task != SUPERVISED or not schema.plain:
        parts.append(schema.kind_label)
    columns = [name for name in ("tools", "images", "videos", "audios") if getattr(schema, name)]
    if columns:  # what the rows carry besides the text: "sharegpt · supervised (sft) · tools"
        parts.append(" + ".join(columns))
    if schema.source != "detected":
        parts.append(_("as dataset_info.json entry {name} says", name=schema.source))
    elif len(parts) > 1:
        parts.append(_("detected from the rows"))
    return " · ".join(parts)


def _as_kind(schema: Schema, kind: str, rows: list) -> Schema:
    from dataclasses import replace

    from core.data.schema import FEEDBACK, KTO_TAG_NAMES, PREFERENCE, PRETRAIN, TEXT_NAMES

    keys = {k for _r, v in rows if isinstance(v, dict) for k in v}
    if kind == PRETRAIN:
        text = next((k for k in TEXT_NAMES if k in keys), schema.prompt)
        return replace(schema, kind=ALPACA, task=PRETRAIN, prompt=text, query=None)
    if kind == PREFERENCE:
        return replace(schema, task=PREFERENCE, chosen="chosen", rejected="rejected")
    if kind == FEEDBACK:
        return replace(schema, task=FEEDBACK, kto_tag=next((k for k in KTO_TAG_NAMES if k in keys), "kto_tag"))
    return replace(schema, task=kind, chosen=None, rejected=None, kto_tag=None)


def sample_rows(probe: FileProbe, limit: int = SCHEMA_SAMPLE_ROWS) -> list:
    import orjson

    from core.data.json_repair import diagnose

    rows = []
    for rec in iter_records(probe, ReadNotes()):
        try:
            rows.append((rec, orjson.loads(rec.raw)))
        except orjson.JSONDecodeError:
            for v in diagnose(rec.raw, rec.line).values:
                rows.append((rec, v))
        if len(rows) >= limit:
            break
    return rows


def _expected_keys(rows, schema: Schema) -> tuple[tuple[str, ...], int]:
    for rec, value in rows:
        if isinstance(value, dict) and all(k in value for k in schema.required):
            if rec.raw.count(b'":') != len(value):
                continue
            if not all(isinstance(v, str) for v in value.values()):
                continue
            body = sum(len(v.encode("utf-8", "surrogatepass")) for v in value.values())
            return tuple(value), max(0, len(rec.raw) - body)
    keys = (schema.prompt, schema.query, schema.response) if schema.query else (schema.prompt, schema.response)
    if not schema.plain:
        keys = schema.columns_used
    return keys, 12 * len(keys)


# ------------------------------------------------------------------ file-level findings

def _file_findings(probe: FileProbe, notes: ReadNotes, merged: PartResult, schema: Schema) -> list[Finding]:
    out: list[Finding] = []
    enc = probe.encoding
    if enc.encoding.startswith("utf-16"):
        out.append(finding("encoding", 1, _(
            "L1: bytes are not UTF-8 (the file is UTF-16); training fails at conversion; fix transcodes it "
            "to UTF-8 (with --yes)", )))
    if notes.transcoded_lines:
        line = notes.first_transcoded_line or 1
        out.append(finding("encoding", line, _n(
            "L{line}: bytes are not UTF-8 (decodes as GB18030; {n} line); training fails at conversion; "
            "fix transcodes it to UTF-8 (with --yes)",
            "L{line}: bytes are not UTF-8 (decodes as GB18030; {n} lines); training fails at conversion; "
            "fix transcodes them to UTF-8 (with --yes)", notes.transcoded_lines, line=line)))
    if enc.is_utf8 and (notes.bom or enc.bom):
        out.append(finding("bom", 1, _("L1: UTF-8 BOM at the start of the file; fix removes it")))
    if probe.layout == JSON_ARRAY:
        sev = WARNING
        out.append(finding("json-array", 1, _(
            "L1: the file is a JSON array, not JSON Lines; LLaMA-Factory loads it but its preview and streaming "
            "do not; fix writes JSON Lines"), severity=sev))
    if probe.nested:
        out.append(finding("json-array", 1, nested_note(probe.nested), severity=WARNING))
    if probe.layout == JSON_STREAM:
        out.append(finding("json-array", 1, _(
            "L1: pretty-printed objects one after another, not one per line; datasets cannot load this; fix "
            "writes JSON Lines"), severity=ERROR))
    if notes.array_trailing_comma:
        line, col = notes.array_trailing_comma
        out.append(finding("trailing-comma", line, _(
            "L{line}:{col}: trailing comma before ]; fix removes it", line=line, col=col), column=col))
    for line, col, msg in notes.syntax:
        out.append(finding("json-syntax", line, _(
            "L{line}:{col}: invalid JSON between values: {msg}; fix skips it", line=line, col=col, msg=msg),
            column=col, fix=SAFE))
    blank_text = _("L{line}: blank line; fix removes it")
    out += [finding("blank-line", line, blank_text.format(line=line)) for line in notes.blank_lines]
    if notes.crlf_lines:
        line = notes.first_crlf_line or 1
        out.append(finding("crlf", line, _n(
            "L{line}: CRLF (Windows) line ending on {n} line; fix writes LF",
            "L{line}: CRLF (Windows) line endings on {n} lines; fix writes LF", notes.crlf_lines, line=line)))
    if not notes.final_newline and notes.last_line:
        line = notes.last_line
        out.append(finding("no-final-newline", line, _(
            "L{line}: no newline at the end of the file; fix adds it", line=line)))
    suffix = probe.path.suffix.lower()
    if suffix not in ALLOWED_SUFFIXES:
        out.append(finding("extension", 1, _(
            "L1: LLaMA-Factory does not read \"{suffix}\" files (Allowed file types: json, jsonl, csv, parquet, "
            "arrow, txt); fix writes .jsonl", suffix=suffix or "(none)"), severity=ERROR))
    elif suffix == ".txt" and probe.layout in (JSONL, JSON_ARRAY, JSON_STREAM):
        out.append(finding("extension", 1, _(
            "L1: JSON in a .txt file; LLaMA-Factory reads .txt as plain text; write it as .jsonl (fix -o "
            "name.jsonl)"), severity=ERROR))
    if schema.task == FEEDBACK and schema.kto_tag and sum(merged.kto_tags) and min(merged.kto_tags) == 0:
        value = "true" if merged.kto_tags[1] else "false"
        out.append(finding("kto-tag", 1, _(
            "L1: every \"{key}\" is {value}; KTO learns from both desirable (true) and undesirable (false) "
            "answers: add rows of the other value", key=schema.kto_tag, value=value), severity=WARNING))
    if schema.kind == ALPACA:
        for key, (line, offset) in sorted(merged.keys_first.items(), key=lambda kv: kv[1][0]):
            sev = severity_of_key_change(offset) if offset >= 0 else INFO
            out.append(finding("key-set-change", line, _(
                "L{line}: new key \"{key}\" first appears here; rows before lack it{why}; fix writes the same keys "
                "in every row", line=line, key=key,
                why=_(" (after the first 10 MiB: datasets raises CastError)") if sev == ERROR else ""),
                severity=sev))
        if schema.aliased and schema.plain and schema.source == "detected":
            out.append(finding("missing-keys", 1, _(
                "L1: rows use \"{prompt}\"/\"{response}\", not \"instruction\"/\"output\"; register writes a "
                "columns map, or fix renames them (with --yes)", prompt=schema.prompt, response=schema.response),
                severity=INFO))
    return out


def nested_note(nested: NestedRows) -> str:
    """What lint, fix and convert say about such a file."""
    if not nested.at:  # a top-level array whose elements hold rendered text or a wrapper (nested_json.lifted)
        return _("L1: {rows} in one JSON array, their text as a CMS renders it (`rendered` fields, rich text); fix "
                 "writes them as JSON Lines of plain values", rows=counted("row", nested.rows))
    said = _("L1: {rows} found under {where}, inside one JSON object; fix writes them as JSON Lines",
             rows=counted("row", nested.rows), where=nested.where)
    if nested.ignored:
        said += _("; left out beside them: {keys}", keys=", ".join(nested.ignored[:12]))
    return said


def _not_a_dataset(probe: FileProbe) -> Finding:
    if probe.layout == EMPTY:
        return finding("not-json", 1, _("L1: the file is empty; there is nothing to train on"), fix=NONE)
    src, out = convert_hint_paths(probe.path)
    if probe.layout == CSV:
        return finding("not-json", 1, _(
            "L1: a CSV/TSV table, not JSON; convert it: devtune data convert {file} --from csv -o {out}",
            file=src, out=out), fix=NONE)
    return finding("not-json", 1, _(
        "L1: plain text, not JSON (\"{first}\"); if it is a chat log or Q&A text, convert it: devtune data "
        "convert {file} -o {out}", first=probe.first_line[:40], file=src, out=out), fix=NONE)


# ------------------------------------------------------------------ entry point

def _binary_finding(path, probe, *, binary: bool) -> object:
    """A file that is no dataset as it is: a spreadsheet is rows still to convert (core/data/spreadsheet.py;
    a zip to the encoding guess, so it is named before it), binary data is not a dataset, text may be one."""
    from core.data.spreadsheet import is_spreadsheet

    if not is_spreadsheet(path) and not binary:
        return _not_a_dataset(probe)
    if is_spreadsheet(path):
        return finding("not-json", 1, _("L1: a spreadsheet ({suffix}), not a text dataset: `devtune data convert "
                                        "{file} -o data/NAME.jsonl` turns its sheets into rows",
                                        suffix=Path(path).suffix.lower(), file=Path(path).name), fix=NONE)
    return finding("not-json", 1, _("L1: binary data, not a text dataset"), fix=NONE)


def lint_file(path: str | os.PathLike, options: LintOptions | None = None,
              progress: Callable[[LintProgress], None] | None = None) -> LintReport:
    """Lint one file. Raises OSError when it cannot be read; bad content is reported, never raised."""
    opts = options or LintOptions()
    t0 = time.perf_counter()
    probe = probe_file(path)
    enc = probe.encoding
    text = text_dataset(probe, opts.kind, opts.use_entry) if is_text_file(probe) and enc.encoding != "binary" \
        else None
    if (probe.layout in (TEXT, CSV, EMPTY) or enc.encoding == "binary") and text is None:
        schema = Schema(kind=UNKNOWN)
        empty = build_stats(StatsAccumulator(), rows=0, cutoff_len=opts.cutoff_len, token_source="estimate",
                            duplicates=0, conflicts=0, near_duplicates=None)
        f = _binary_finding(path, probe, binary=enc.encoding == "binary")
        rows = 0
        if probe.layout == CSV and enc.encoding != "binary":  # a table's rows are rows, once converted
            from core.data.csv_table import csv_rows

            rows = csv_rows(probe.path)
        return LintReport(str(path), rows, "unknown", enc.encoding, enc.reason, probe.layout, [f], empty, schema,
                          time.perf_counter() - t0)

    rows = sample_rows(probe)
    schema = text.schema if text is not None else schema_for(probe.path, rows, opts.kind, opts.use_entry)
    keys, overhead = _expected_keys(rows, schema)
    ctx = ScanContext(str(probe.path), schema, keys, overhead, opts.cutoff_len,
                      estimate_too_long=opts.tokenizer is None, size=probe.size,
                      escaped=any(b"\\u" in rec.raw for rec, _v in rows),
                      keep=keep_for(probe.path) if opts.keep is None else opts.keep)

    if probe.layout == JSONL and enc.is_utf8:
        results = run_parts(ctx, plan_spans(probe.path, probe.size, opts.jobs), opts.jobs, opts.start_method,
                            progress)
    else:
        notes = ReadNotes()
        results = [scan_records(ctx, iter_records(probe, notes), notes)]
    with paused_gc():
        merged, fps = merge_parts(results, schema)
        if progress:
            progress(LintProgress("duplicates", 0, 1))
        try:
            dups = find_duplicates(fps)
        finally:
            for fp in fps:
                fp.discard()
        # many findings of one kind: translate the template once, fill it per row
        findings = name_rows(merged.findings + findings_for_pairs("duplicate", _(
            "L{line}: duplicate of L{other}; fix keeps the first (with --yes)"), dups.duplicate_lines, dups.duplicate_of)
            + findings_for_pairs("conflict", _(
                "L{line}: same prompt as L{other} with a different output; keep the right one by hand"),
                dups.conflict_lines, dups.conflict_with), probe.nested)  # rows of one document: by path
        findings += _file_findings(probe, merged.notes, merged, schema)
        findings += text.findings if text is not None else []
        dup_lines = set(dups.duplicate_lines)

    near = None
    if opts.near_dups:
        from core.data.neardup import find_near_duplicates

        pairs = find_near_duplicates(probe, schema, skip_lines=dup_lines, progress=progress)
        near = len(pairs)
        findings += name_rows([finding("near-duplicate", line, _(
            "L{line}: ~{j} similar to L{other}; keep one of them", line=line, j=f"{j:.2f}", other=other))
            for line, other, j in pairs], probe.nested)
    token_source = "estimate"
    if opts.tokenizer:
        from core.data.tokens import count_tokens

        counted = count_tokens(probe, schema, opts.tokenizer, opts.cutoff_len, progress=progress)
        merged.stats.tokens = counted.histogram
        findings = [f for f in findings if f.rule != "too-long"] + name_rows(counted.findings, probe.nested)
        token_source = opts.tokenizer
    with paused_gc():
        sort_findings(findings)
    stats = build_stats(merged.stats, rows=merged.good, cutoff_len=opts.cutoff_len, token_source=token_source,
                        duplicates=len(dups.duplicate_lines), conflicts=len(dups.conflict_lines),
                        near_duplicates=near)
    fmt = format_label(schema)
    keys = list(keys) + [k for k, _v in sorted(merged.keys_first.items(), key=lambda kv: kv[1][0]) if k not in keys]
    return LintReport(str(path), merged.rows, fmt, enc.encoding, enc.reason, probe.layout, findings, stats,
                      schema, time.perf_counter() - t0, merged.good, dup_lines,
                      dict(zip(dups.duplicate_lines, dups.duplicate_of)), keys)


def is_clean(report: LintReport) -> bool:
    return report.errors == 0
