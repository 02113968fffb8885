"""The held-out split's files: read a dataset for the split (core.data.holdout), write its two parts
beside it, and register them as `N` (the train part) and `N_eval` (the held-out part).

    data/support_clean.jsonl     the person's file: read, never changed
    data/support.train.jsonl     the rows to train on          -> dataset_info.json "support"
    data/support.heldout.jsonl   the rows held out             -> dataset_info.json "support_eval"
    data/support.split.json      seed, share, row counts, groups, the sha256 of the source and of both parts

The parts are named after the dataset (`support`), not the source: they belong to that one dataset, so a
second name split from the same file (`--name support_b`) gets files of its own and never changes the
first's rows.

Every row of the source is on exactly one side, as it was written (a JSON Lines row byte for byte; an
element of a JSON array as one compact line), in file order. The parts are rewritten only when devtune
wrote them (their sha256 is in the split record) unless forced: a file the person made under one of
those names is never replaced silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from core.data.holdout import (
    DEFAULT_SEED,
    EVAL_SUFFIX,
    Holdout,
    HoldoutError,
    SplitPlan,
    SplitRow,
    normalised,
    plan_split,
)
from core.data.lint import LintOptions, LintReport, lint_file
from core.data.register import (
    NAME,
    RegisterError,
    RegisterRefused,
    RegisterResult,
    file_name_for,
    read_dataset_info,
    register_dataset,
)
from core.files.atomic import atomic_open, write_atomic
from core.files.digest import file_sha256
from core.i18n import _, _n

SPLIT_SCHEMA = 1
SPLIT_SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True)
class SplitFiles:
    train: Path
    heldout: Path
    record: Path  # <stem>.split.json


def split_files(source: str | os.PathLike, name: str) -> SplitFiles:
    """The files the split of `source` registered as dataset `name` writes, beside the source, named after
    the dataset (one dataset's parts; another name never shares them)."""
    path = Path(source)
    return SplitFiles(path.with_name(f"{name}.train.jsonl"), path.with_name(f"{name}.heldout.jsonl"),
                      path.with_name(f"{name}.split.json"))


@dataclass
class HoldoutResult:
    train: RegisterResult  # `N`
    heldout: RegisterResult  # `N_eval`
    plan: SplitPlan
    files: SplitFiles
    source: Path
    source_sha256: str
    changed: bool  # the parts were written anew (False: the same split as before, byte for byte)

    @property
    def name(self) -> str:
        return self.train.name

    @property
    def report(self) -> LintReport:  # the train part's
        return self.train.report

    def state_change(self, dataset_file: str):
        """As a plain registration's: the train part's name is the workspace's dataset (its held-out part
        is found from it, `NAME_eval`)."""
        return self.train.state_change(dataset_file)

    def to_json(self) -> dict:
        out = self.train.to_json()
        out["source"] = str(self.source)
        out["heldout"] = self.heldout.to_json()
        out["split"] = {**self.plan.to_json(), "record": str(self.files.record), "train_file": str(self.files.train),
                        "heldout_file": str(self.files.heldout), "source_sha256": self.source_sha256,
                        "changed": self.changed}
        return out

    def lines(self) -> list[str]:
        """What the person is told, after the registration itself."""
        out = [self.plan.text()]
        out += [f"  {note}" for note in self.plan.notes]
        out.append(_("  train: {train} → \"{name}\" · held out: {held} → \"{eval_name}\" · {record}",
                     train=self.files.train.name, name=self.train.name, held=self.files.heldout.name,
                     eval_name=self.heldout.name, record=self.files.record.name))
        return out


# ---- reading ------------------------------------------------------------------------------------------

@dataclass
class SplitInput:
    rows: list[SplitRow]
    near_pairs: list[tuple[int, int]]  # (row, earlier row) near duplicates, by position


def _prompt_strings(view, schema) -> list[str]:
    """The prompt side the split compares: instruction + input for alpaca-style rows (not the system
    prompt, history or a rejected answer), the whole conversation before the answer otherwise."""
    from core.data.schema import ALPACA

    parts = view.prompt[:2] if schema.kind == ALPACA else view.prompt
    out: list[str] = []
    stack = list(parts)
    while stack:
        part = stack.pop(0)
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, (tuple, list)):
            stack[:0] = list(part)
    return out


def read_split_input(path: str | os.PathLike, schema) -> SplitInput:
    """Each row's fingerprints and the near-duplicate pairs (the lint's MinHash, every match). Raises
    HoldoutError for a file whose rows cannot be copied as they are (not JSON)."""
    import orjson

    from core.data.duplicates import prompt_hash, text_hash
    from core.data.neardup import near_duplicate_matches
    from core.data.reader import JSON_ARRAY, JSON_STREAM, JSONL, ReadNotes, iter_records, probe_file
    from core.data.row_rules import check_row

    probe = probe_file(path)
    if probe.layout not in (JSONL, JSON_ARRAY, JSON_STREAM):
        raise HoldoutError(_("{file} is not JSON rows ({layout}); convert it first (devtune data convert)",
                             file=path, layout=probe.layout))
    rows: list[SplitRow] = []
    for rec in iter_records(probe, ReadNotes()):
        try:
            value = orjson.loads(rec.raw)
        except orjson.JSONDecodeError:
            raise HoldoutError(_("{file}:{line}: not one JSON value; the held-out split copies rows as they are, so "
                                 "fix the file first (devtune data fix {file} -o NAME.jsonl)", file=path,
                                 line=rec.line)) from None
        view = check_row(value, rec.line, schema, [])
        if view is None:  # a row LLaMA-Factory drops: it belongs with its exact copies only
            key = text_hash(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8", "surrogatepass"))
            rows.append(SplitRow(key, key))
            continue
        prompt = prompt_hash(tuple(normalised(s) for s in _prompt_strings(view, schema)))
        rows.append(SplitRow(prompt, text_hash(normalised(view.output), prompt)))
    pairs = [(m.record, s[0]) for m in near_duplicate_matches(probe, schema) for s in m.similar]
    return SplitInput(rows, pairs)


def split_plan(path: str | os.PathLike, holdout: Holdout, schema, *, seed: int = DEFAULT_SEED) -> SplitPlan:
    got = read_split_input(path, schema)
    return plan_split(got.rows, holdout, seed=seed, near_pairs=got.near_pairs, source=str(path))


# ---- writing ------------------------------------------------------------------------------------------

def read_split_record(files: SplitFiles) -> dict | None:
    try:
        data = json.loads(files.record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ours(path: Path, recorded: dict | None, side: str) -> bool:
    """The file is absent, or is the part devtune wrote (its sha256 is in the split record)."""
    if not path.exists():
        return True
    sha = ((recorded or {}).get(side) or {}).get("sha256")
    try:
        return bool(sha) and file_sha256(path) == sha
    except OSError:
        return False


def check_writable(files: SplitFiles) -> None:
    """Raises RegisterRefused when a part's name is taken by a file devtune did not write (or one edited since)."""
    recorded = read_split_record(files)
    for path, side in ((files.train, "train"), (files.heldout, "heldout")):
        if not _ours(path, recorded, side):
            raise RegisterRefused(_("{path} exists and is not the part devtune wrote (or was edited since); move it "
                                    "away, or pass --force to replace it", path=path))


def write_split(source: Path, plan: SplitPlan, files: SplitFiles, names: tuple[str, str], source_sha: str) -> bool:
    """Write both parts and the record atomically; True when a part's content changed."""
    import orjson

    from core.data.reader import ReadNotes, iter_records, probe_file

    before = read_split_record(files) or {}
    digests = {"train": hashlib.sha256(), "heldout": hashlib.sha256()}
    written = 0
    with atomic_open(files.train, "wb") as train, atomic_open(files.heldout, "wb") as held:
        for n, rec in enumerate(iter_records(probe_file(source), ReadNotes())):
            if n >= plan.rows:
                written = n + 1
                break
            raw = rec.raw if b"\n" not in rec.raw else orjson.dumps(orjson.loads(rec.raw))
            side = "heldout" if plan.heldout[n] else "train"
            (held if side == "heldout" else train).write(raw + b"\n")
            digests[side].update(raw + b"\n")
            written += 1
        if written != plan.rows:  # the file changed under us: keep what was there
            raise HoldoutError(_n("{file} changed while it was split ({n} row read, {rows} planned); run it again",
                                  "{file} changed while it was split ({n} rows read, {rows} planned); run it again",
                                  written, file=source, rows=plan.rows))
    shas = {side: d.hexdigest() for side, d in digests.items()}
    record = {"schema": SPLIT_SCHEMA, "source": source.name, "source_sha256": source_sha, **plan.to_json(),
              "train": {"file": files.train.name, "name": names[0], "rows": plan.train_rows, "sha256": shas["train"]},
              "heldout": {"file": files.heldout.name, "name": names[1], "rows": plan.heldout_rows,
                          "sha256": shas["heldout"]}}
    write_atomic(files.record, json.dumps(record, ensure_ascii=False, indent=2) + "\n")
    return any((before.get(side) or {}).get("sha256") != shas[side] for side in shas)


# ---- registering --------------------------------------------------------------------------------------

def _check_names(info: dict, name: str, source: Path, files: SplitFiles, ddir: Path, force: bool) -> None:
    """`N` may already point at the source or its train part, `N_eval` at the held-out part; anything else
    is someone else's dataset."""
    allowed = {name: {file_name_for(source, ddir), file_name_for(files.train, ddir)},
               name + EVAL_SUFFIX: {file_name_for(files.heldout, ddir)}}
    for key, files_ok in allowed.items():
        old = info.get(key)
        if isinstance(old, dict) and old.get("file_name") not in (None, *files_ok) and not force \
                and not _was_split_part(ddir, str(old.get("file_name")), key):
            raise RegisterRefused(_("\"{name}\" is already registered for {other}; choose another --name or pass "
                                    "--force", name=key, other=old.get("file_name")))


def _was_split_part(ddir: Path, file_name: str, key: str) -> bool:
    """A part an older devtune split as `key` (it named the parts after the source): still this dataset's."""
    for suffix, side in ((".train.jsonl", "train"), (".heldout.jsonl", "heldout")):
        if file_name.endswith(suffix):
            stem = ddir / file_name[:-len(suffix)]
            record = read_split_record(SplitFiles(stem, stem, stem.with_name(stem.name + ".split.json")))
            return bool(record) and (record.get(side) or {}).get("name") == key
    return False


def _part_report(part: Path, whole: LintReport, options: LintOptions | None) -> LintReport:
    """A part's own lint (its rows, token lengths), read as the whole file's format and kind."""
    opts = replace(options or LintOptions(), kind=whole.schema.task)
    return replace(lint_file(part, opts), schema=whole.schema)


def preview_holdout(file: str | os.PathLike, name: str, holdout: Holdout, report: LintReport, *,
                    seed: int = DEFAULT_SEED) -> tuple[SplitPlan, SplitFiles]:
    """The split `register_with_holdout` would make, nothing written."""
    return split_plan(file, holdout, report.schema, seed=seed), split_files(file, name)


def register_with_holdout(file: str | os.PathLike, name: str, dataset_dir: str | os.PathLike, holdout: Holdout, *,
                          seed: int = DEFAULT_SEED, ws_root: str | os.PathLike | None = None, force: bool = False,
                          report: LintReport | None = None, options: LintOptions | None = None) -> HoldoutResult:
    """Split `file`, write its parts beside it and register them as `name` and `name`_eval. Refuses (as
    register_dataset does) a file with lint errors or names taken by other files, unless `force`."""
    path, ddir = Path(file), Path(dataset_dir)
    if not NAME.match(name or ""):
        raise RegisterError(_("dataset name \"{name}\": use letters, digits, _ . - only (LLaMA-Factory splits "
                              "dataset lists on commas)", name=name))
    if not path.is_file():
        raise FileNotFoundError(path)
    if path.suffix.lower() not in SPLIT_SUFFIXES:
        raise RegisterError(_("{file}: a held-out split is made of JSON or JSON Lines rows; convert it to .jsonl "
                              "first, or register it without --holdout", file=path))
    files = split_files(path, name)
    if path.resolve() in {files.train.resolve(), files.heldout.resolve(), files.record.resolve()}:
        raise RegisterError(_("{file}: the split of \"{name}\" would write its parts over the source itself; "
                              "choose another --name", file=path, name=name))
    _check_names(read_dataset_info(ddir), name, path, files, ddir, force)
    if not force:
        check_writable(files)
    report = report or lint_file(path, options or LintOptions())
    if report.errors and not force:
        raise RegisterRefused(_n("{file} has {n} lint error; fix it before splitting it (devtune data fix {file} -o "
                                 "NAME.jsonl), or pass --force",
                                 "{file} has {n} lint errors; fix it before splitting it (devtune data fix {file} -o "
                                 "NAME.jsonl), or pass --force", report.errors, file=path))
    source_sha = file_sha256(path)
    plan = split_plan(path, holdout, report.schema, seed=seed)
    eval_name = name + EVAL_SUFFIX
    changed = write_split(path, plan, files, (name, eval_name), source_sha)
    parts = []
    for part, part_name in ((files.train, name), (files.heldout, eval_name)):
        parts.append(register_dataset(part, part_name, ddir, ws_root=ws_root, force=True,
                                      report=_part_report(part, report, options)))
    return HoldoutResult(parts[0], parts[1], plan, files, path, source_sha, changed)
