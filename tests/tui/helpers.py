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
