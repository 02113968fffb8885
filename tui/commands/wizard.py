"""`devtune [WORKSPACE]`: open the wizard."""

from __future__ import annotations

import sys

from tui.commands.output import err, workspace


def run_wizard(args) -> int:
    ws = workspace(args)
    if ws.root.exists() and not ws.root.is_dir():
        err(f"{ws.root} is a file; give a workspace folder")
        return 2
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        err("the wizard needs a terminal; use the subcommands (devtune --help) in scripts")
        return 2
    from tui.app import DevtuneApp

    app = DevtuneApp(ws)
    app.run()
    return app.return_code or 0
