"""Render F1 and the footer of every step in a fresh interpreter (`python -m tests.tui.help_render WS`), so
the labels are read in the language DEVTUNE_LANG names when the screens are imported; prints JSON:
{step: {"help": the help text, "footer": [[key, label], ...]}}."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path


async def render(root: Path) -> dict:
    from textual.widgets._footer import FooterKey

    from core.workspace.layout import Workspace
    from screens import steps as step_registry
    from tests.tui.helpers import opened, wait_until
    from tui.app import DevtuneApp

    ws = Workspace(root).ensure()
    app = DevtuneApp(ws, watch_terminal=False)
    seen = {}
    async with app.run_test(size=(160, 50)) as pilot:
        await opened(pilot, app)
        for step in step_registry.step_ids():
            app.action_goto_step(step)
            await wait_until(pilot, lambda: app.current_mode == step and app.screen.is_mounted
                             and list(app.screen.query(FooterKey)))
            await pilot.pause()
            footer = [[k.key_display, k.description] for k in app.screen.query(FooterKey)]
            await pilot.press("f1")
            await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
            text = str(app.screen.query_one("#help-text").render())
            await pilot.press("escape")
            await wait_until(pilot, lambda: type(app.screen).__name__ != "HelpScreen")
            seen[step] = {"help": text, "footer": footer}
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(render(Path(sys.argv[1]))), ensure_ascii=False))
