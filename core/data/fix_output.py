"""What `fix` and `convert` write and say: the report (rows in = rows out + rows rejected) and the writer of
the output and the rejects file, both atomic, or nothing at all in a dry run.

A rejected row is named by its line; a row inside one JSON document (core/data/nested_json.py) by its path
and index (`data.items[3]`), in the rejects file ("at") and in the reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.data.findings import name_rows_in
from core.data.nested_json import NestedRows
from core.files.atomic import atomic_open
from core.i18n import _


@dataclass
class FixReport:
    source: str
    output: str
    rejects: str
    rows_in: int = 0
    rows_out: int = 0
    rows_rejected: int = 0
    changes: Counter = field(default_factory=Counter)  # what was repaired: rule → rows
    pending: Counter = field(default_factory=Counter)  # confirm fixes not applied (rows rejected): rule → rows
    kept_unfixed: Counter = field(default_factory=Counter)  # confirm fixes not applied (rows written without)
    reasons: Counter = field(default_factory=Counter)  # why rows were rejected: reason → rows
    trimmed: int = 0  # parts cut from rows that were written (listed in the rejects file, "trimmed": true)
    written: bool = False
    preview: list[dict] = field(default_factory=list)  # the first output rows (for the screen)
    rejected_preview: list[dict] = field(default_factory=list)

    @property
    def balanced(self) -> bool:
        return self.rows_in == self.rows_out + self.rows_rejected

    def not_applied(self) -> dict[str, dict[str, int]]:
        """Every fix `yes` would have applied and this run did not: rule → rows rejected until then, rows
        written as they are."""
        rules = sorted(set(self.pending) | set(self.kept_unfixed))
        return {r: {"rejected": self.pending[r], "kept": self.kept_unfixed[r]} for r in rules}

    def to_json(self) -> dict:
        return {"source": self.source, "output": self.output, "rejects": self.rejects, "rows_in": self.rows_in,
                "rows_out": self.rows_out, "rows_rejected": self.rows_rejected, "changes": dict(self.changes),
                "needs_yes": dict(self.pending), "not_applied": self.not_applied(),
                "rejected_because": dict(self.reasons), "trimmed": self.trimmed, "written": self.written,
                "nothing_written": self.nothing_written()}

    def nothing_written(self) -> str | None:
        """Why no row was written (a command that writes none does not succeed), or None."""
        if self.rows_out:
            return None
        if not self.rows_in:
            return _("no rows were written: {file} holds none", file=self.source)
        reason = self.reasons.most_common(1)[0][0] if self.reasons else ""
        return _("no rows were written: every row went to {rejects} (most often: {reason})",
                 rejects=self.rejects, reason=reason)

    def lines(self) -> list[str]:
        from core.data.wording import counted

        out = [_("{rows_in} in → {rows_out} written to {output}, {rejected} rejected to {rejects}",
                 rows_in=counted("row", self.rows_in), rows_out=self.rows_out, output=self.output,
                 rejected=self.rows_rejected, rejects=self.rejects)]
        for rule, n in sorted(self.changes.items()):
            out.append(_("  fixed    {rule}: {rows}", rule=rule, rows=counted("row", n)))
        for reason, n in self.reasons.most_common():
            out.append(_("  rejected {n}: {reason}", n=n, reason=reason))
        if self.trimmed:
            out.append(_("  trimmed  {n}: an unanswered last turn cut, the row written (listed in the rejects "
                         "file)", n=self.trimmed))
        if self.pending:  # said for both front-ends: --yes, or the Data step's confirmation box
            out.append(_("  not applied without confirmation (rows moved to the rejects file): {what}",
                         what=", ".join(f"{rule} ({n})" for rule, n in sorted(self.pending.items()))))
        if self.kept_unfixed:
            out.append(_("  not applied without confirmation (rows written without the fix): {what}",
                         what=", ".join(f"{rule} ({n})" for rule, n in sorted(self.kept_unfixed.items()))))
        return out


def default_rejects_path(output: Path) -> Path:
    name = output.name
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else output.stem
    return output.with_name(f"{stem}.rejects.jsonl")


class RowWriter:
    """Output and rejects, both atomic; or nothing at all in a dry run (the screen's preview)."""

    def __init__(self, report: FixReport, dry_run: bool, preview: int, force: bool,
                 text_column: str | None = None, nested: NestedRows | None = None) -> None:
        self.r = report
        self.nested = nested  # rows inside one JSON document: named by their path, not a line
        self.text_column = text_column  # a .txt output: that column's text, a line per row
        self.dry_run = dry_run
        self.preview = preview
        self.force = force

    def __enter__(self):
        import orjson

        self.dumps = orjson.dumps
        if self.dry_run:
            self.out = self.rej = None
            return self
        self._out_cm = atomic_open(self.r.output, "wb", overwrite=self.force)
        self._rej_cm = atomic_open(self.r.rejects, "wb", overwrite=True)
        self.out = self._out_cm.__enter__()
        try:
            self.rej = self._rej_cm.__enter__()
        except BaseException as exc:
            self._out_cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, *exc):
        if self.dry_run:
            return False
        try:
            self._rej_cm.__exit__(*exc)
        finally:
            self._out_cm.__exit__(*exc)
        return False

    def row(self, row: dict) -> None:
        self.r.rows_out += 1
        if len(self.r.preview) < self.preview:
            self.r.preview.append(row)
        if self.out is not None and self.text_column:
            self.out.write(str(row.get(self.text_column, "")).encode("utf-8", "surrogatepass") + b"\n")
        elif self.out is not None:
            self.out.write(self.dumps(row) + b"\n")

    def trimmed(self, line: int, part: Any) -> None:
        """What a fix cut from a row it wrote (an unanswered last turn): listed in the rejects file with
        "trimmed": true; the row itself is in the output, so it counts there, not as a reject."""
        self.r.trimmed += 1
        item = {**self._where(line), "rule": "dangling-turn", "trimmed": True,
                "reason": _("the last turn had no answer: trimmed; the answered exchanges were written"),
                "raw": part}
        if len(self.r.rejected_preview) < self.preview:
            self.r.rejected_preview.append(item)
        if self.rej is not None:
            self.rej.write(self.dumps(item) + b"\n")

    def reject(self, line: int, reason: str, rule: str, raw: bytes | str) -> None:
        self.r.rows_rejected += 1
        if self.nested is not None:
            reason = name_rows_in(reason, self.nested)
        self.r.reasons[reason] += 1
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        item = {**self._where(line), "rule": rule, "reason": reason, "raw": text}
        if len(self.r.rejected_preview) < self.preview:
            self.r.rejected_preview.append(item)
        if self.rej is not None:
            self.rej.write(self.dumps(item) + b"\n")

    def _where(self, line: int) -> dict:
        """A rejects-file item's place: {"line": N}, or {"at": "data.items[3]"} for a row of one JSON document."""
        return {"at": self.nested.element(line)} if self.nested is not None else {"line": int(line)}
