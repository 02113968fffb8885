"""StateWriter: the wizard's changes to `.devtune/state.json`, written in order off the event loop.

Each change is a small function applied to the state. The app applies it to its copy at once (the
screen updates now); the writer thread applies the same function to the file, one after another,
each a read-modify-write under the workspace lock — so a CLI command changing the state meanwhile is
kept, and two quick changes can never be written (or adopted back) out of order.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

from core.workspace.layout import StateError, WizardState, Workspace

Mutation = Callable[[WizardState], None]


class StateWriter:
    def __init__(self, ws: Workspace, on_written: Callable[[WizardState], None],
                 on_error: Callable[[Exception], None]) -> None:
        self.ws = ws
        self.on_written = on_written  # called in the writer thread with the state as written
        self.on_error = on_error
        self._queue: queue.SimpleQueue[Mutation | None] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="devtune-state-writer", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Changes submitted and not written yet."""
        with self._lock:
            return self._pending

    def submit(self, mutate: Mutation) -> None:
        with self._lock:
            self._pending += 1
        self._queue.put(mutate)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is still queued, then stop (called when the app exits)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            mutate = self._queue.get()
            if mutate is None:
                return
            try:
                fresh = self.ws.update_state(mutate)
            except (StateError, OSError) as exc:
                fresh = None
                self.on_error(exc)
            with self._lock:
                self._pending -= 1
                last = self._pending == 0
            if fresh is not None and last:
                self.on_written(fresh)
