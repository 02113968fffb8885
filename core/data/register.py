"""Register a dataset in `<dataset_dir>/dataset_info.json` (add or update one entry, keep the others,
atomically), check the registry's entries (table A4 rule 14), and save the Data step's summary for the
later steps (`core.data.summary`).

dataset_info.json is written with `ensure_ascii=True`: LLaMA-Factory opens it without an encoding, so
on a zh-CN Windows (cp936) non-ASCII UTF-8 would not read back.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import Refused
from core.files.atomic import write_atomic
from core.data.dataset_info import (
    INFO_FILE,
    RegisterError,
    is_v1_dataset_list,
    read_dataset_info,
    v1_dataset_list_message,
)
from core.data.findings import ERROR, WARNING, Finding, finding
from core.data.lint import LintOptions, LintReport, lint_file
from core.data.summary import DatasetSummary, save_summary
from core.files.digest import file_sha256
from core.i18n import _, _n, said

NAME = re.compile(r"^[\w.\-]+$")
FILE_TYPES = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow",
              ".txt": "text"}
ENTRY_KEYS = {"hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name", "file_name", "formatting",
              "ranking", "subset", "split", "folder", "num_samples", "columns", "tags"}
COLUMN_KEYS = {"prompt", "query", "response", "history", "messages", "system", "tools", "images", "videos",
               "audios", "chosen", "rejected", "kto_tag"}
TAG_KEYS = {"role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag", "function_tag", "system_tag"}


class RegisterRefused(Refused, RegisterError):
    """Registration refused for what lint found or a name taken by another file (exit 1, not 2)."""


@dataclass
class RegisterResult:
    name: str
    entry: dict
    info_file: Path
    action: str  # added | updated | unchanged
    report: LintReport
    summary_file: Path | None

    def state_change(self, dataset_file: str):
        """What registering implies: this is the workspace's dataset now (the Config step trains it)."""
        return registered(dataset_file, self.name, self.report)

    def to_json(self) -> dict:
        return {"name": self.name, "entry": self.entry, "dataset_info": str(self.info_file), "action": self.action,
                "rows": self.report.rows, "format": self.report.format, "errors": self.report.errors,
                "warnings": self.report.warnings,
                "summary": str(self.summary_file) if self.summary_file else None}


def registered(dataset_file: str, name: str, report: LintReport):
    """The state change of a registration, for both front-ends: the chosen dataset and the Data step done."""
    from core.data.wording import counted
    from core.workspace.changes import StateChange, StepMark
    from core.workspace.step_status import StepStatus

    return StateChange(
        chosen={"dataset_file": dataset_file, "dataset_name": name},
        steps={"data": StepMark(StepStatus.DONE, said("dataset {name}: {rows}, {errors}, {warnings}", name=name,
                                                   rows=counted("row", report.rows),
                                                   errors=counted("error", report.errors),
                                                   warnings=counted("warning", report.warnings)))})


def file_name_for(file: Path, dataset_dir: Path) -> str:
    """The entry's file_name: relative to dataset_dir when the file is inside it, else absolute."""
    try:
        return Path(os.path.relpath(file.resolve(), dataset_dir.resolve())).as_posix() \
            if file.resolve().is_relative_to(dataset_dir.resolve()) else str(file.resolve())
    except ValueError:
        return str(file.resolve())


def registered_name(file: Path, dataset_dir: Path) -> str | None:
    """The name under which `file` is registered, if it is."""
    try:
        info = read_dataset_info(dataset_dir)
    except RegisterError:
        return None
    target = file.resolve()
    for name, entry in info.items():
        fn = entry.get("file_name") if isinstance(entry, dict) else None
        if fn and (Path(dataset_dir) / fn).resolve() == target:
            return name
    return None


def summary_for(report: LintReport, name: str, ws_root: Path, file: Path) -> DatasetSummary:
    st = file.stat()
    try:
        rel = str(file.resolve().relative_to(ws_root.resolve()))
    except ValueError:
        rel = str(file.resolve())
    tokens = {k: v for k, v in report.stats.tokens.items() if k in ("p50", "p90", "p95", "p99", "max")}
    kind = report.schema.kind if report.schema.kind in ("alpaca", "sharegpt", "messages") else "unknown"
    token_source = report.stats.token_source
    return DatasetSummary(name=name, file=rel, size=st.st_size, mtime=st.st_mtime, format=kind,
                          kind=report.schema.task, rows=report.rows,
                          lint_errors=report.errors, lint_warnings=report.warnings,
                          tokenizer=None if token_source == "estimate" else token_source,
                          token_percentiles=tokens, over_cutoff=report.stats.over_cutoffs,
                          sha256=file_sha256(file))


def refresh_summary(report: LintReport, file: Path, dataset_dir: Path, ws_root: Path) -> Path | None:
    """After a lint: save the summary when the file is a registered dataset (Config reads it)."""
    name = registered_name(Path(file), Path(dataset_dir))
    if name is None:
        return None
    return save_summary(Path(ws_root), summary_for(report, name, Path(ws_root), Path(file)))


def register_preview(file: str | os.PathLike, name: str, dataset_dir: str | os.PathLike,
                     report: LintReport) -> tuple[dict, str]:
    """The entry that `register_dataset` would write and whether it adds, updates or keeps it."""
    info = read_dataset_info(Path(dataset_dir))
    entry = report.schema.dataset_info_entry(file_name_for(Path(file), Path(dataset_dir)))
    entry = kept_keys(info.get(name), entry)
    old = info.get(name)
    return entry, "unchanged" if old == entry else "updated" if old is not None else "added"


DECIDED_KEYS = ("file_name", "formatting", "ranking", "columns", "tags")


def kept_keys(old: dict | None, entry: dict) -> dict:
    """The new entry, with the keys of the old one that lint does not decide (split, num_samples, subset,
    folder, ...) kept as they were."""
    if not isinstance(old, dict):
        return entry
    kept = {k: v for k, v in old.items() if k not in DECIDED_KEYS}
    return {**entry, **kept} if kept else entry


def register_dataset(file: str | os.PathLike, name: str, dataset_dir: str | os.PathLike, *,
                     ws_root: str | os.PathLike | None = None, force: bool = False,
                     report: LintReport | None = None, options: LintOptions | None = None) -> RegisterResult:
    """Lint `file`, then add or update `name` in dataset_info.json. Refuses a file with lint errors unless
    `force`; refuses a name that points at another file unless `force`."""
    path, ddir = Path(file), Path(dataset_dir)
    if not NAME.match(name or ""):
        raise RegisterError(_("dataset name \"{name}\": use letters, digits, _ . - only (LLaMA-Factory splits "
                              "dataset lists on commas)", name=name))
    if not path.is_file():
        raise FileNotFoundError(path)
    if is_v1_dataset_list(path):
        raise RegisterError(v1_dataset_list_message(path))
    if path.suffix.lower() not in FILE_TYPES:
        raise RegisterError(_("{file}: LLaMA-Factory reads {suffix} files as {kind}, not as a JSON dataset; "
                              "convert or fix it to .jsonl first", file=path, suffix=path.suffix or "(none)",
                              kind=FILE_TYPES.get(path.suffix.lower(), _("unsupported"))))
    info = read_dataset_info(ddir)
    file_name = file_name_for(path, ddir)
    old = info.get(name)
    if old is not None and isinstance(old, dict) and old.get("file_name") not in (None, file_name) and not force:
        raise RegisterRefused(_("\"{name}\" is already registered for {other}; choose another --name or pass --force "
                              "to point it at {file}", name=name, other=old.get("file_name"), file=file_name))
    report = report or lint_file(path, options or LintOptions())
    if report.errors and not force:
        raise RegisterRefused(_n("{file} has {n} lint error; LLaMA-Factory would fail or drop rows. Fix it first "
                                 "(devtune data fix {file} -o NAME.jsonl), or pass --force",
                                 "{file} has {n} lint errors; LLaMA-Factory would fail or drop rows. Fix it first "
                                 "(devtune data fix {file} -o NAME.jsonl), or pass --force", report.errors, file=path))
    entry = kept_keys(old, report.schema.dataset_info_entry(file_name))
    action = "unchanged" if old == entry else "updated" if old is not None else "added"
    if action != "unchanged":
        info[name] = entry
        ddir.mkdir(parents=True, exist_ok=True)
        write_atomic(ddir / INFO_FILE, json.dumps(info, ensure_ascii=True, indent=2) + "\n")
    summary_file = None
    if ws_root is not None:
        summary_file = save_summary(Path(ws_root), summary_for(report, name, Path(ws_root), path))
    return RegisterResult(name, entry, ddir / INFO_FILE, action, report, summary_file)


def lint_dataset_info(dataset_dir: str | os.PathLike) -> list[Finding]:
    """Rule 14: every entry of dataset_info.json names a file LLaMA-Factory can load, in a known format."""
    from core.data.dataset_entry import schema_from_entry
    from core.data.text_dataset import reads_text

    ddir = Path(dataset_dir)
    path = ddir / INFO_FILE
    try:
        info = read_dataset_info(ddir)
    except RegisterError as exc:
        return [finding("dataset-info", 1, str(exc), fix="none")]
    text = path.read_text(encoding="utf-8-sig") if path.exists() else ""
    out: list[Finding] = []
    for name, entry in info.items():
        line = _line_of_key(text, name)
        if not isinstance(entry, dict):
            out.append(finding("dataset-info", line, _("L{line}: dataset_info: \"{name}\" must be an object",
                                                       line=line, name=name)))
            continue
        for key in entry:
            if key not in ENTRY_KEYS:
                out.append(finding("dataset-info", line, _(
                    "L{line}: dataset_info: \"{name}\" has unknown key \"{key}\" (LLaMA-Factory ignores it)",
                    line=line, name=name, key=key), severity=WARNING))
        fn = entry.get("file_name")
        if fn:
            target = ddir / fn
            suffix = Path(fn).suffix.lower()
            if not target.exists():
                out.append(finding("dataset-info", line, _(
                    "L{line}: dataset_info: \"{name}\" file {file} not found", line=line, name=name, file=fn)))
            elif suffix == ".txt" and not reads_text(schema_from_entry(entry, name)):
                out.append(finding("dataset-info", line, _(
                    "L{line}: dataset_info: \"{name}\": a .txt file loads as one \"text\" column, a row per line; "
                    "only \"columns\": {{\"prompt\": \"text\"}} (stage pt) reads it; convert it to .jsonl for "
                    "other kinds", line=line, name=name)))
            elif target.is_file() and suffix not in FILE_TYPES:
                out.append(finding("dataset-info", line, _(
                    "L{line}: dataset_info: \"{name}\": {suffix} is not a file type LLaMA-Factory loads",
                    line=line, name=name, suffix=suffix or "(none)")))
        elif not any(k in entry for k in ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url",
                                            "cloud_file_name")):
            out.append(finding("dataset-info", line, _(
                "L{line}: dataset_info: \"{name}\" has no file_name", line=line, name=name)))
        fmt = entry.get("formatting", "alpaca")
        if fmt not in ("alpaca", "sharegpt", "openai"):
            out.append(finding("dataset-info", line, _(
                "L{line}: dataset_info: \"{name}\" formatting \"{fmt}\" is not alpaca, sharegpt or openai",
                line=line, name=name, fmt=fmt)))
        cols = entry.get("columns", {})
        bad = [k for k in cols if k not in COLUMN_KEYS] if isinstance(cols, dict) else ["columns"]
        if bad:
            out.append(finding("dataset-info", line, _(
                "L{line}: dataset_info: \"{name}\" columns has unknown keys: {keys}", line=line, name=name,
                keys=", ".join(bad))))
        if "tags" in entry and fmt == "alpaca":
            out.append(finding("dataset-info", line, _(
                "L{line}: dataset_info: \"{name}\" has tags but alpaca formatting ignores them", line=line,
                name=name), severity=WARNING))
        bad_tags = [k for k in entry.get("tags", {}) if k not in TAG_KEYS] if isinstance(entry.get("tags"), dict) \
            else []
        if bad_tags:
            out.append(finding("dataset-info", line, _(
                "L{line}: dataset_info: \"{name}\" tags has unknown keys: {keys}", line=line, name=name,
                keys=", ".join(bad_tags))))
    for f in out:
        f.severity = f.severity or ERROR
    return out


def _line_of_key(text: str, key: str) -> int:
    at = text.find(json.dumps(key, ensure_ascii=True) + ":")
    if at < 0:
        at = text.find(json.dumps(key, ensure_ascii=False))
    return text.count("\n", 0, at) + 1 if at >= 0 else 1
