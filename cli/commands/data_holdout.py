"""`devtune data register FILE --name N --holdout F [--seed S]`: register FILE split into a train part (`N`)
and a held-out part (`N_eval`), written beside it (core.data.holdout_files). Without --holdout, register
is cli/commands/data.py's run_register, unchanged.

Exit codes as register's: 0 registered, 1 refused (lint errors, a name or a part's file taken, a split that
cannot be made without leaking or below the minimums), 2 a bad --holdout or unreadable input.
"""

from __future__ import annotations

from core.i18n import _
from cli.commands.output import emit_json
from core.errors import EXIT_OK


def add_holdout_arguments(reg) -> None:
    reg.add_argument("--holdout", metavar="SHARE",
                     help=_("also hold out rows for evaluation: a share (0.1 or 10%%, at most 0.5) or a number of "
                            "rows (20); writes NAME.train.jsonl and NAME.heldout.jsonl beside FILE and registers them "
                            "as NAME and NAME_eval, rows that share a prompt or nearly repeat kept on one side"))
    reg.add_argument("--seed", type=int, default=None, metavar="N",
                     help=_("the seed of the held-out split (default 42); the same file and seed give the same split"))


def run_register_holdout(args, ws, path, ddir) -> int:
    from cli.commands.output import reading
    from core.data.holdout import DEFAULT_SEED, Holdout
    from core.data.holdout_files import register_with_holdout

    holdout = Holdout.parse(args.holdout)
    seed = DEFAULT_SEED if args.seed is None else args.seed
    with reading(path):
        result = register_with_holdout(path, args.name, ddir, holdout, seed=seed, ws_root=ws.root, force=args.force)
    from core.workspace.changes import apply_change

    apply_change(ws, result.state_change(ws.rel(path)))  # as the wizard's Register: one state change, core's
    if args.json:
        emit_json(result.to_json())
        return EXIT_OK
    words = {"added": _("added"), "updated": _("updated"), "unchanged": _("already up to date")}
    for part in (result.train, result.heldout):
        print(_("\"{name}\" {action} in {info} → {entry} ({rows})", name=part.name, action=words[part.action],
                info=part.info_file, entry=part.entry, rows=_rows(part.report.rows)))
    for line in result.lines():
        print(line)
    print(_("  use `dataset: {name}` with `dataset_dir: {ddir}`; the Config step adds `eval_dataset: {eval_name}` "
            "for the eval loss", name=result.train.name, ddir=ddir, eval_name=result.heldout.name))
    return EXIT_OK


def _rows(n: int) -> str:
    from core.i18n import _n

    return _n("{n} row", "{n} rows", n)
