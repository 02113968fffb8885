"""`devtune data lint|fix|convert|register|stats|synth`: Step 1 without the wizard.

Exit codes: 0 ok, 1 problems found (lint errors, rows waiting for --yes, registration refused),
2 usage error or unreadable input. The report goes to stdout (`--json`: one JSON object), progress
to stderr.
"""

from __future__ import annotations

import sys

from core.i18n import _
from cli.commands.output import emit_json, err
from cli.commands.output import given_path as _path
from cli.commands.output import reading, refuse_input
from core.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE

MAX_LISTED = 200


def register(sub, add_common) -> list[str]:
    p = sub.add_parser("data", help=_("Step 1: lint, fix, convert, register and describe datasets"),
                       description=_("Preview-free dataset tools for LLaMA-Factory: lint with line numbers, safe "
                                     "fixes into a new file, conversion of chat logs / Q&A / CSV / sharegpt to "
                                     "alpaca JSON Lines, registration in dataset_info.json, statistics."))
    add_common(p)
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    lint = dsub.add_parser("lint", help=_("check a dataset file against every rule; exit 1 when there are errors"))
    add_common(lint)
    lint.add_argument("file", metavar="FILE")
    _scan_options(lint)
    lint.add_argument("--near-dups", action="store_true", help=_("also find near duplicates (MinHash; slower)"))
    lint.add_argument("--max-listed", type=int, default=MAX_LISTED, metavar="N",
                      help=_("findings listed in the text report (default {n}; --json lists all)", n=MAX_LISTED))
    _keep_option(lint)
    lint.set_defaults(handler=run_lint)

    fix = dsub.add_parser("fix", help=_("write a fixed copy (never in place) and a rejects file"))
    add_common(fix)
    fix.add_argument("file", metavar="FILE")
    fix.add_argument("-o", "--output", required=True, metavar="OUT",
                     help=_("the fixed JSON Lines file to write (for a .txt of pre-training text, OUT.txt keeps it "
                            "as text)"))
    fix.add_argument("--rejects", metavar="REJ", help=_("rows that could not be kept (default OUT.rejects.jsonl)"))
    fix.add_argument("--yes", action="store_true",
                     help=_("also apply the fixes that need a confirmation (transcode, rename keys, numbers to "
                            "text, drop empty outputs and exact duplicates, mask personal data); it never replaces "
                            "a file: that is --force"))
    fix.add_argument("--force", action="store_true", help=_("replace OUT if it exists"))
    fix.add_argument("--json", action="store_true", help=_("print the summary as JSON"))
    _keep_option(fix)
    fix.set_defaults(handler=run_fix)

    conv = dsub.add_parser("convert", help=_("chat log / Q&A text / CSV / sharegpt / messages → alpaca JSON Lines"))
    add_common(conv)
    conv.add_argument("file", metavar="SRC")
    conv.add_argument("-o", "--output", required=True, metavar="OUT")
    conv.add_argument("--from", dest="source_format", default="auto",
                      choices=("auto", "chatlog", "qa", "csv", "sharegpt", "messages", "transcript"),
                      help=_("the source format (default: detected)"))
    conv.add_argument("--agent", action="append", default=[], metavar="NAME",
                      help=_("a chat transcript's speaker who answers (repeatable; default: detected)"))
    conv.add_argument("--customer", action="append", default=[], metavar="NAME",
                      help=_("a chat transcript's speaker who asks (repeatable; default: detected)"))
    conv.add_argument("--columns", metavar="MAP",
                      help=_("CSV columns, e.g. instruction=customer_question,output=agent_reply[,input=context]"))
    conv.add_argument("--rejects", metavar="REJ",
                      help=_("units that could not be converted (default OUT.rejects.jsonl)"))
    conv.add_argument("--force", action="store_true", help=_("replace OUT if it exists"))
    conv.add_argument("--json", action="store_true", help=_("print the summary as JSON"))
    conv.set_defaults(handler=run_convert)

    reg = dsub.add_parser("register", help=_("add or update the entry in dataset_info.json"))
    add_common(reg)
    reg.add_argument("file", metavar="FILE")
    reg.add_argument("--name", required=True, help=_("the dataset name (what `dataset:` in the train YAML says)"))
    reg.add_argument("--dataset-dir", metavar="DIR", help=_("where dataset_info.json is (default: WORKSPACE/data)"))
    reg.add_argument("--force", action="store_true",
                     help=_("register despite lint errors, or re-point a name registered for another file"))
    reg.add_argument("--json", action="store_true", help=_("print the result as JSON"))
    from cli.commands.data_holdout import add_holdout_arguments

    add_holdout_arguments(reg)
    reg.set_defaults(handler=run_register)

    stats = dsub.add_parser("stats", help=_("rows, lengths, tokens, share above cutoff_len, duplicates, languages"))
    add_common(stats)
    stats.add_argument("file", metavar="FILE")
    _scan_options(stats)
    stats.set_defaults(handler=run_stats)
    from cli.commands.data_synth import synth_parser

    synth_parser(dsub, add_common)
    return ["data"]


def _scan_options(p) -> None:
    p.add_argument("--json", action="store_true", help=_("print one JSON object"))
    p.add_argument("--cutoff-len", type=int, default=None, metavar="N",
                   help=_("LLaMA-Factory's cutoff_len: longer rows are truncated (default: the workspace config's, "
                          "else 2048)"))
    p.add_argument("--tokenizer", metavar="PATH", help=_("count tokens with this tokenizer (model folder or "
                                                         "tokenizer.json) instead of estimating"))
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help=_("worker processes for big JSON Lines files (default: one below 8 MiB, else the number "
                        "of CPUs, up to 8)"))


def _keep_option(p) -> None:
    p.add_argument("--keep", action="append", default=[], metavar="VALUE",
                   help=_("a contact detail that is the business's own and public (a hotline, a support address): "
                          "added to the workspace's keep list (.devtune/keep.txt), never reported or masked as "
                          "personal data (repeat for more)"))


def _kept(args, path) -> None:
    """--keep VALUE: on the keep list of the workspace that holds the file, which lint and fix read."""
    if not args.keep:
        return
    from cli.commands.output import workspace
    from core.data.pii_keep import KEEP_FILE, add_keep, workspace_of

    root = workspace_of(path) or workspace(args).root
    added = add_keep(root, args.keep)
    print(_("kept as the business's own contact details ({file}): {values}", file=str(root / KEEP_FILE),
            values=", ".join(args.keep)) + ("" if added else " " + _("(already on the list)")), file=sys.stderr)


# ------------------------------------------------------------------ helpers


def _jobs(n: int, size: int) -> int:
    from core.data.parallel_scan import jobs_for

    return jobs_for(size, n)


def _lint(args, path):
    from cli.commands.data_progress import LintProgressBar
    from cli.commands.output import workspace
    from core.config.workspace_cutoff import workspace_cutoff_len
    from core.data.lint import LintOptions, lint_file

    size = path.stat().st_size
    progress = LintProgressBar(size)
    try:
        cutoff = args.cutoff_len or workspace_cutoff_len(workspace(args))
        return lint_file(path, LintOptions(cutoff_len=cutoff, tokenizer=args.tokenizer,
                                           near_dups=getattr(args, "near_dups", False), jobs=_jobs(args.jobs, size)),
                         progress)
    finally:
        progress.done()


# ------------------------------------------------------------------ lint

def run_lint(args) -> int:
    path = _path(args)
    if path.name == "dataset_info.json":
        return _lint_registry(args, path)
    refuse_input(path)
    _kept(args, path)
    with reading(path):
        report = _lint(args, path)
    if args.json:
        emit_json(report.to_json())
    else:
        _print_lint(report, args.max_listed)
    _save_registered_summary(args, path, report)
    if report.format == "unknown":  # not a dataset (plain text to convert, CSV, empty)
        return EXIT_PROBLEMS
    return EXIT_PROBLEMS if report.errors else EXIT_OK


def _print_lint(report, max_listed: int) -> None:
    from collections import Counter

    from core.data.wording import counted, format_shown, layout_label
    from core.i18n import _

    print(_("{file}: {rows} · {format} · {encoding} ({reason}) · {layout} · {secs:.2f} s", file=report.file,
            rows=counted("row", report.rows), format=format_shown(report.format), encoding=report.encoding,
            reason=report.encoding_reason, layout=layout_label(report.layout), secs=report.elapsed))
    _print_findings(report.findings[:max_listed])
    rest = report.findings[max_listed:]
    if rest:
        by_rule = Counter(f.rule for f in rest)
        print(_("  … {n} more ({rules}); --json lists them all", n=len(rest),
                rules=", ".join(f"{r} {c}" for r, c in by_rule.most_common())))
    c = report.counts
    fx = report.fixable()
    print(_("{errors}, {warnings}, {info} · {safe} fixed by `devtune data fix`, {confirm} more with --yes",
            errors=counted("error", c["error"]), warnings=counted("warning", c["warning"]),
            info=counted("info", c["info"]), safe=fx["safe"], confirm=fx["confirm"]))
    if report.rows:
        _print_stats_line(report.stats)


def _print_findings(findings) -> None:
    from core.data.wording import severity_label

    for f in findings:
        print(f"  {severity_label(f.severity):<8} {f.rule:<18} {f.message}")


def _print_stats_line(s) -> None:
    from core.data.wording import counted, language_shares, token_source_label
    from core.i18n import _

    print(_("stats: tokens p50 {p50} / p95 {p95} / max {max} ({source}) · {over} > cutoff_len {cutoff} · "
            "{dups} · {conflicts} · {langs}", p50=s.tokens["p50"], p95=s.tokens["p95"], max=s.tokens["max"],
            source=token_source_label(s.token_source), over=counted("row", s.over_cutoff), cutoff=s.cutoff_len,
            dups=counted("duplicate", s.duplicates), conflicts=counted("conflict", s.conflicts),
            langs=language_shares(s.languages)))


def _lint_registry(args, path) -> int:
    import errno
    import os

    from core.data.register import lint_dataset_info
    from core.i18n import _

    if not path.exists():
        with reading(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    findings = lint_dataset_info(path.parent)
    if args.json:
        emit_json({"file": str(path), "rows": None, "format": "dataset_info", "encoding": "utf-8",
                   "findings": [f.to_json() for f in findings], "stats": None})
    else:
        from core.data.wording import counted

        print(_("{file}: dataset registry · {findings}", file=path, findings=counted("finding", len(findings))))
        _print_findings(findings)
    return EXIT_PROBLEMS if any(f.severity == "error" for f in findings) else EXIT_OK


def _save_registered_summary(args, path, report) -> None:
    """A lint of a registered dataset refreshes its summary for the later steps."""
    from core.data.register import refresh_summary
    from cli.commands.output import workspace

    ws = workspace(args)
    try:
        if ws.data_dir.is_dir():
            refresh_summary(report, path, ws.data_dir, ws.root)
    except OSError:
        pass


# ------------------------------------------------------------------ fix / convert

def run_fix(args) -> int:
    from core.data.fix import fix_file

    path, out = _path(args), _path(args, "output")
    rejects = _path(args, "rejects") if args.rejects else None
    refuse_input(path)
    _kept(args, path)
    with reading(path):
        report = fix_file(path, out, rejects=rejects, yes=args.yes, force=args.force,
                          progress=lambda m: print(f"  {m}", file=sys.stderr))
    if args.json:
        emit_json(report.to_json())
    else:
        print("\n".join(report.lines()))
    if not report.balanced:  # never expected: say so loudly rather than lose rows silently
        from core.data.wording import counted

        err(_("internal error: {rows_in} in but {rows_out} + {rejected} out", rows_in=counted("row", report.rows_in),
              rows_out=report.rows_out, rejected=report.rows_rejected))
        return EXIT_USAGE
    if report.nothing_written():
        err(report.nothing_written())
        return EXIT_PROBLEMS
    return EXIT_PROBLEMS if report.pending else EXIT_OK


def run_convert(args) -> int:
    from core.data.convert import convert_file, parse_columns

    path, out = _path(args), _path(args, "output")
    rejects = _path(args, "rejects") if args.rejects else None
    refuse_input(path)
    with reading(path):
        report = convert_file(path, out, source_format=args.source_format, columns=parse_columns(args.columns),
                              rejects=rejects, force=args.force, agents=tuple(args.agent),
                              customers=tuple(args.customer))
    if args.json:
        emit_json(report.to_json())
    else:
        print("\n".join(report.lines()))
    if report.nothing_written():
        err(report.nothing_written())
        return EXIT_PROBLEMS
    return EXIT_OK


# ------------------------------------------------------------------ register / stats

def run_register(args) -> int:
    from cli.commands.output import workspace
    from core.data.register import register_dataset
    from core.i18n import _

    ws = workspace(args)
    path = _path(args)
    ddir = _path(args, "dataset_dir") if args.dataset_dir else ws.data_dir
    refuse_input(path)
    if args.holdout is not None:
        from cli.commands.data_holdout import run_register_holdout

        return run_register_holdout(args, ws, path, ddir)
    with reading(path):
        result = register_dataset(path, args.name, ddir, ws_root=ws.root, force=args.force)
    remember_registered(ws, path, result)
    if args.json:
        emit_json(result.to_json())
    else:
        import json

        from core.data.wording import counted

        words = {"added": _("added"), "updated": _("updated"), "unchanged": _("already up to date")}
        print(_("\"{name}\" {action} in {info}:", name=result.name, action=words[result.action],
                info=result.info_file))
        print(json.dumps({result.name: result.entry}, ensure_ascii=False, indent=2))
        print(_("  {rows} · {format} · {errors}, {warnings} · use `dataset: {name}` with `dataset_dir: {ddir}`",
                rows=counted("row", result.report.rows), format=result.report.format,
                errors=counted("error", result.report.errors), warnings=counted("warning", result.report.warnings),
                name=result.name, ddir=ddir))
    return EXIT_OK


def remember_registered(ws, path, result) -> None:
    """The workspace's dataset is now this one, as the wizard's Register makes it (one state change, core's)."""
    from core.workspace.changes import apply_change

    apply_change(ws, result.state_change(ws.rel(path)))


def run_stats(args) -> int:
    from core.data.wording import counted, format_shown, language_shares, token_source_label
    from core.i18n import _

    path = _path(args)
    refuse_input(path)
    with reading(path):
        report = _lint(args, path)
    s = report.stats
    if args.json:
        emit_json({"file": report.file, "rows": report.rows, "format": report.format, "encoding": report.encoding,
                   "stats": s.to_json()})
        return EXIT_OK
    print(_("{file}: {rows} ({good} can train) · {format} · {encoding}", file=report.file,
            rows=counted("row", report.rows), good=s.rows, format=format_shown(report.format),
            encoding=report.encoding))
    print(_("  characters       p50     p90     p95     p99     max"))
    for name, p in s.fields.items():
        print(f"  {name:<14} {p['p50']:>6}  {p['p90']:>6}  {p['p95']:>6}  {p['p99']:>6}  {p['max']:>6}")
    t = s.tokens
    label = _("tokens")
    print(f"  {label:<14} {t['p50']:>6}  {t['p90']:>6}  {t['p95']:>6}  {t['p99']:>6}  {t['max']:>6}  "
          f"({token_source_label(s.token_source)})")
    print(_("  above cutoff_len {cutoff}: {rows} ({pct:.1%})", cutoff=s.cutoff_len,
            rows=counted("row", s.over_cutoff), pct=s.over_cutoff_share))
    print(_("  duplicates {dups} · conflicting outputs {conflicts}", dups=s.duplicates, conflicts=s.conflicts))
    print(_("  languages: {langs}", langs=language_shares(s.languages, sep=", ", keep_zero=True)))
    bins = s.token_bins
    if bins:
        top = max(c for _lo, _hi, c in bins) or 1
        print(_("  tokens per row"))
        for lo, hi, c in bins:
            print(f"  {lo:>6}-{hi:<6} {'█' * max(0, round(30 * c / top)):<30} {c}")
    return EXIT_OK
