"""`devtune [WORKSPACE]`: open the wizard."""

from __future__ import annotations

import os
import sys

from core.i18n import _
from cli.commands.output import workspace
from core.errors import BadInput


def run_wizard(args) -> int:
    ws = workspace(args)
    if ws.root.exists() and not ws.root.is_dir():
        raise BadInput(_("{path} is a file; give a workspace folder", path=ws.root))
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise BadInput(_("the wizard needs a terminal; use the subcommands (devtune --help) in scripts"))
    # Over slow SSH links fewer frames is better; Textual reads this when it is imported.
    os.environ.setdefault("TEXTUAL_FPS", "30")
    from tui.app import DevtuneApp

    app = DevtuneApp(ws)
    app.run()
    return finish(app.return_code or 0)


def finish(code: int) -> int:
    """After the wizard closed: end its helper processes, and leave no thread behind to keep the process
    alive (a thread worker still linting or checking would hold the exit until it finished)."""
    import threading

    from core.processes.helpers import end_helpers

    end_helpers()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        from tui.terminal import exit_now

        exit_now(code)
    return code
