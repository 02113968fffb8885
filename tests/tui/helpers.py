"""Helpers for Pilot tests."""

from __future__ import annotations

import asyncio
import inspect
import time


def _describe(predicate) -> str:
    """The condition as written in the test (its source line), else its docstring or repr."""
    try:
        source = inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        source = ""
    return source or getattr(predicate, "__doc__", None) or repr(predicate)


async def wait_until(pilot, predicate, timeout: float = 20.0, interval: float = 0.05) -> None:
    """Poll `predicate` between pauses until it holds. After `timeout` seconds the test fails, saying which
    condition it was; when the condition's last try raised (a widget not mounted, a missing key, ...),
    that error is raised again, chained, instead of a bare timeout."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        await pilot.pause()
        try:
            if predicate():
                return
            last_error = None
        except Exception as exc:  # the widget may not be mounted yet: try again, remember why
            last_error = exc
        if time.monotonic() > deadline:
            what = _describe(predicate)
            if last_error is not None:
                raise AssertionError(f"condition not met within {timeout} s: {what}\n"
                                     f"its last try raised {type(last_error).__name__}: {last_error}") from last_error
            raise AssertionError(f"condition not met within {timeout} s: {what}")
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
