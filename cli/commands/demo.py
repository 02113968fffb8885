"""`devtune demo DIR`: seed a demo workspace with the sample data and the tiny CPU model."""

from __future__ import annotations

import sys

from core.i18n import _
from core.errors import EXIT_OK, BadInput


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "demo",
        help=_("seed a demo workspace (sample data + tiny CPU model)"),
        description=_("Seed DIR with devtune's messy sample data and a tiny LLaMA model built locally, so the "
                      "whole journey (data, config, train, merge, serve, chat) runs on a CPU. "
                      "Re-running keeps your edits."),
    )
    add_common(p)
    p.add_argument("dir", metavar="DIR", nargs="?", help=_("the folder to seed (created if missing)"))
    p.set_defaults(handler=run_demo)
    return ["demo"]


def run_demo(args) -> int:
    from core.setup.demo import seed_demo
    from core.workspace.layout import Workspace

    if args.dir is None:
        # `devtune demo` reads as the command, also when the person meant the folder ./demo
        raise BadInput(_("devtune demo needs the folder to seed: `devtune demo DIR`. To open the wizard on a folder "
                         "named demo, run `devtune ./demo` or `devtune -w demo`."))
    ws = Workspace.resolve(args.dir)
    try:
        report = seed_demo(ws, progress=lambda m: print(f"  {m}", file=sys.stderr))
    except (OSError, ValueError) as exc:
        raise BadInput(str(exc)) from exc
    for line in report.lines():
        print(line)
    print("\n" + _("Next: devtune {root}   (or: devtune -w {root} data lint data/support_messy.jsonl)",
                   root=ws.root))
    return EXIT_OK
