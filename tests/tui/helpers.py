"""Helpers for Pilot tests."""

from __future__ import annotations

import asyncio
import time


async def wait_until(pilot, predicate, timeout: float = 20.0, interval: float = 0.05) -> None:
    """Poll `predicate` between pauses until it holds (fails the test after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause()
        try:
            if predicate():
                return
        except Exception:  # the widget may not be mounted yet
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {getattr(predicate, '__doc__', predicate)}")
        await asyncio.sleep(interval)


def stepper_text(app) -> str:
    from tui.widgets.stepper import Stepper

    return str(app.screen.query_one(Stepper).render())


async def opened(pilot, app, timeout: float = 30.0):
    """The step screen, once the wizard has loaded the state and opened it (the first frame is a splash)."""
    from screens.base import StepScreen

    await wait_until(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.is_mounted, timeout)
    await pilot.pause()
    return app.screen
