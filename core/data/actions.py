"""The Data screen's fix / convert / register actions, each as a preview (nothing written) or a write,
summarised as text lines and a few rows the screen shows as they are."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.i18n import _

PREVIEW_ROWS = 20


@dataclass
class ActionOutcome:
    lines: list[str]
    rows: list[dict] = field(default_factory=list)
    result: Any = None
    error: bool = False
    # a question the person must answer before the write can go on (replace an existing file); run the
    # action again with replace=True when they agree
    confirm: str | None = None


def run(action: str, path: Path, *, write: bool, output: str = "", yes: bool = False, source_format: str = "auto",
        name: str = "", holdout: str = "", ws_root: Path, dataset_dir: Path, replace: bool = False,
        agents: tuple[str, ...] = (), customers: tuple[str, ...] = ()) -> ActionOutcome:
    """Never raises for a problem the person can fix: the outcome says what went wrong.

    `agents` / `customers`: a chat transcript's speakers as the person named them (convert's --agent/--customer).

    `yes` confirms the content fixes that need it; it never allows replacing a file. An existing output is
    replaced only with `replace` (the person confirmed that replacement): otherwise the outcome asks."""
    from core.files.atomic import FileExistsRefused
    from core.data.convert import ConvertError
    from core.data.fix import FixRefused
    from core.data.register import RegisterError

    try:
        if action in ("fix", "convert"):
            out = _output(output, path, ws_root)
            if write and not replace and out.exists():
                return ActionOutcome([_("{out} already exists: nothing written", out=out)], error=True,
                                     confirm=_("{out} already exists. Replace it with the fixed file?", out=out)
                                     if action == "fix" else
                                     _("{out} already exists. Replace it with the converted file?", out=out))
            if action == "fix":
                return _fix(path, out, write=write, yes=yes, replace=replace)
            return _convert(path, out, write=write, source_format=source_format, replace=replace, agents=agents,
                            customers=customers)
        if action == "register" and holdout:
            return _register_holdout(path, name, holdout, write=write, ws_root=ws_root, dataset_dir=dataset_dir)
        if action == "register":
            return _register(path, name, write=write, ws_root=ws_root, dataset_dir=dataset_dir)
    except (FixRefused, FileExistsRefused, ConvertError, RegisterError, OSError) as exc:
        return ActionOutcome([str(exc)], error=True)
    raise ValueError(f"unknown action {action!r}")


def _output(output: str, path: Path, ws_root: Path) -> Path:
    if not output:
        from core.data.fix import FixRefused

        raise FixRefused(_("give an output file name"))
    p = Path(output).expanduser()
    return p if p.is_absolute() else Path(ws_root) / p


def _rows(preview: list[dict], rejected: list[dict]) -> list[dict]:
    rows = [{"line": "", **r} for r in preview[:PREVIEW_ROWS]]
    rows += [{"line": r.get("at", r.get("line")), "rejected": r["reason"], "raw": r["raw"]} for r in rejected[:PREVIEW_ROWS]]
    return rows


def _fix(path: Path, out: Path, *, write: bool, yes: bool, replace: bool) -> ActionOutcome:
    from core.data.fix import fix_file

    report = fix_file(path, out, yes=yes, force=write and replace, dry_run=not write, preview=PREVIEW_ROWS)
    head = _("Preview — nothing written yet.") if not write else _("Written.")
    return ActionOutcome([head] + report.lines(), _rows(report.preview, report.rejected_preview), report)


def _convert(path: Path, out: Path, *, write: bool, source_format: str, replace: bool, agents: tuple[str, ...] = (),
             customers: tuple[str, ...] = ()) -> ActionOutcome:
    from core.data.convert import convert_file

    report = convert_file(path, out, source_format=source_format, dry_run=not write, preview=PREVIEW_ROWS,
                          force=write and replace, agents=agents, customers=customers)
    head = _("Preview — nothing written yet.") if not write else _("Written.")
    return ActionOutcome([head] + report.lines(), _rows(report.preview, report.rejected_preview), report,
                         error=report.rows_out == 0)


def _register(path: Path, name: str, *, write: bool, ws_root: Path, dataset_dir: Path) -> ActionOutcome:
    from core.data.lint import lint_file
    from core.data.register import register_dataset, register_preview
    from core.data.wording import counted

    report = lint_file(path)
    if not write:
        entry, action = register_preview(path, name, dataset_dir, report)
        lines = [_("Preview — {action} \"{name}\" in {info}:", action=action, name=name,
                   info=Path(dataset_dir) / "dataset_info.json"),
                 json.dumps({name: entry}, ensure_ascii=False, indent=2),
                 _("{rows} · {format} · {errors} · {warnings}", rows=counted("row", report.rows),
                   format=report.format, errors=counted("error", report.errors),
                   warnings=counted("warning", report.warnings))]
        if report.errors:
            lines.append(_("Lint errors: fix the file first, LLaMA-Factory would fail or drop rows."))
        return ActionOutcome(lines, error=bool(report.errors))
    result = register_dataset(path, name, dataset_dir, ws_root=ws_root, report=report)
    return ActionOutcome([_("Registered \"{name}\" ({action}): {entry}", name=name, action=result.action,
                            entry=json.dumps(result.entry, ensure_ascii=False)),
                          _("Use dataset: {name} in the Config step.", name=name)], result=result)


def _register_holdout(path: Path, name: str, holdout: str, *, write: bool, ws_root: Path,
                      dataset_dir: Path) -> ActionOutcome:
    """Register with a held-out split: the preview shows the split (rows each side), the write makes it."""
    from core.data.holdout import EVAL_SUFFIX, Holdout, HoldoutError
    from core.data.holdout_files import preview_holdout, register_with_holdout
    from core.data.lint import lint_file

    try:
        share = Holdout.parse(holdout)
        report = lint_file(path)
        if write:
            result = register_with_holdout(path, name, dataset_dir, share, ws_root=ws_root, report=report)
            return ActionOutcome([_("Registered \"{name}\" ({action}) and \"{eval_name}\" ({eval_action}):",
                                    name=name, action=result.train.action, eval_name=result.heldout.name,
                                    eval_action=result.heldout.action)] + result.lines()
                                 + [_("Use dataset: {name} in the Config step; it adds the held-out set for the "
                                      "eval loss.", name=name)], result=result)
        plan, files = preview_holdout(path, name, share, report)
    except HoldoutError as exc:
        return ActionOutcome([str(exc)], error=True)
    lines = [_("Preview — nothing written yet. \"{name}\" ← {train}, \"{eval_name}\" ← {held}, in {info}:",
               name=name, train=files.train.name, eval_name=name + EVAL_SUFFIX, held=files.heldout.name,
               info=Path(dataset_dir) / "dataset_info.json"), plan.text()] + [f"  {n}" for n in plan.notes]
    if report.errors:
        lines.append(_("Lint errors: fix the file first, LLaMA-Factory would fail or drop rows."))
    return ActionOutcome(lines, error=bool(report.errors))
