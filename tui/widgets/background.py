"""Background work for any widget: `BackgroundWork`, a mixin for a Widget or a Screen (the step base is one).

`run_background(fn, *args, ...)` runs `fn(job, *args)` off the event loop (a thread, or the loop itself for an
`async def`). What it hands back comes home on the event loop, to callbacks of the node that started it:

- its result (a dataclass: what a handler reads by name) to `done(result)`, once, after every progress item;
- its progress, `job.report(item)`, to `progress(item)`. A progress item is a `Progress` Message of a kind that
  declares how a burst of it coalesces (`coalesce=`): `Coalesce.LATEST` (only the newest counts: a count, a
  status line), `Coalesce.BY_KEY` (the newest of each `key()`: one per GPU, per file) or `Coalesce.ALL` (every
  one, in order: log lines, events). The job keeps what it has not sent yet coalesced by that rule and sends
  it at most every HUMAN_RATE seconds (the first item at once, the last ones with the result), so a burst
  reaches the event loop as a few messages, never as a flood; and a node whose loop falls behind drops the
  queued items of a LATEST / BY_KEY kind that a newer one of theirs replaces (`Message.can_replace`, which
  Textual applies to a message and the one queued right behind it);
- a devtune error it raises (core/errors.py's DevtuneError) to `failed(error)`; any other exception ends its
  worker in error. Both then travel up the DOM as a `BackgroundWork.Failed` message until a node shows it
  (`show_background_error`: the step base puts it in the step's error box): never a crash.

A job replaced by a newer one of its `group` (exclusive) is cancelled, and its late progress, result and error
are dropped. A function in the background never touches a widget: it gets plain values and returns plain values.

`poll(fetch, *args, every=...)` calls `fetch(job, *args)` at a human rate and hands each value to `each(value)`
until `until(value)` holds.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, ClassVar

from textual.message import Message
from textual.worker import Worker, WorkerState, get_current_worker

from core.errors import DevtuneError

HUMAN_RATE = 0.25  # seconds: progress reaches the screen at most 4 times a second


class Coalesce(Enum):
    """How a burst of one kind of progress item is thinned before it reaches the event loop."""

    LATEST = "latest"  # only the newest counts
    ALL = "all"  # every one is kept, in order
    BY_KEY = "by key"  # the newest of each key counts


class Progress(Message, namespace="background"):
    """A kind of progress item (subclass it as a dataclass): `class Counted(Progress, coalesce=Coalesce.LATEST)`.

    Every kind is handed to the `progress` callback of the job that reported it (one handler: the job's node's,
    which drops a replaced job's late items), so a kind needs no handler of its own. `handed()` is what the
    callback gets: the item itself, for a typed kind."""

    coalesce: ClassVar[Coalesce] = Coalesce.ALL
    job: Job | None = None  # set by Job.report

    def __init_subclass__(cls, coalesce: Coalesce | None = None, **kwargs) -> None:
        kwargs.setdefault("bubble", False)  # progress is the node's own business
        super().__init_subclass__(**kwargs)
        if coalesce is not None:
            cls.coalesce = coalesce
        cls.handler_name = "on_background_progress"

    def key(self) -> Hashable:
        """The item's key, for a BY_KEY kind (e.g. a GPU's index)."""
        return None

    def merged(self, later: Progress) -> Progress | None:
        """For an ALL kind: `self` and a `later` item of the same kind as one item, or None to keep both."""
        return None

    def handed(self) -> Any:
        return self

    def supersedes(self, older: Progress) -> bool:
        """Whether this item makes `older` (one of its job's, not yet handed on) unnecessary."""
        if type(older) is not type(self) or older.job is not self.job or self.coalesce is Coalesce.ALL:
            return False
        return self.coalesce is Coalesce.LATEST or older.key() == self.key()

    def can_replace(self, message: Message) -> bool:
        """Textual's coalescing of a node's queue: the item queued right behind this one replaces it when it
        supersedes it (the same job's same LATEST kind, or the same key of a BY_KEY kind)."""
        return isinstance(message, Progress) and message.supersedes(self)


@dataclass
class Reported(Progress):
    """A plain value (`job.report(value)` of something that is no Progress kind): every one kept."""

    value: Any

    def handed(self) -> Any:
        return self.value


@dataclass
class Batched(Progress):
    """`job.report_soon(item)`'s items (log lines, streamed text): every one kept, handed on as one list."""

    items: list = field(default_factory=list)

    def merged(self, later: Progress) -> Progress | None:
        return Batched(self.items + later.items) if isinstance(later, Batched) else None

    def handed(self) -> Any:
        return self.items


class Outbox:
    """A job's progress not yet sent, coalesced by each kind's rule, in the order it last changed."""

    def __init__(self) -> None:
        self.items: list[Progress] = []

    def add(self, item: Progress) -> None:
        if item.coalesce is Coalesce.ALL:
            if self.items and type(self.items[-1]) is type(item):
                merged = self.items[-1].merged(item)
                if merged is not None:
                    merged.job = item.job
                    self.items[-1] = merged
                    return
        else:
            self.items = [old for old in self.items if not item.supersedes(old)]
        self.items.append(item)

    def take(self) -> list[Progress]:
        items, self.items = self.items, []
        return items


class Job:
    """What a function in the background gets: report progress, see whether it was cancelled, wait."""

    def __init__(self, node: BackgroundWork, description: str) -> None:
        self.node = node  # the widget or screen that started it, whose callbacks get what it hands back
        self.description = description
        self.worker: Worker | None = None
        self.on_progress: Callable[[Any], None] | None = None
        self.on_done: Callable[[Any], None] | None = None
        self.on_failed: Callable[[DevtuneError], None] | None = None
        self._outbox = Outbox()
        self._sent = 0.0  # when progress last left for the event loop
        self._armed = False  # a late send is scheduled on the event loop
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self.worker is not None and self.worker.is_cancelled

    @property
    def current(self) -> bool:
        """Started and not replaced (nor cancelled): what it hands back is still wanted."""
        return self.worker is not None and not self.worker.is_cancelled

    def report(self, item: Any) -> None:
        """Send progress to the node's `progress` callback, on the event loop, coalesced by its kind's rule
        (a value that is no Progress kind: every one kept). Safe from any thread."""
        if not isinstance(item, Progress):
            item = Reported(item)
        item.job = self
        with self._lock:
            self._outbox.add(item)
            wait = HUMAN_RATE - (time.monotonic() - self._sent)
            arm = wait > 0 and not self._armed
            self._armed = self._armed or arm
        if wait <= 0:
            self.flush()
        elif arm:  # what is left goes when HUMAN_RATE has passed, even if nothing else is reported
            self.node.call_later(self._send_later, wait)

    def report_soon(self, item: Any) -> None:
        """Queue `item` (a log line, streamed text); the items go to the progress callback as one list."""
        self.report(Batched([item]))

    def _send_later(self, wait: float) -> None:  # on the event loop
        def send() -> None:
            with self._lock:
                self._armed = False
            self.flush()

        self.node.set_timer(wait, send)

    def flush(self) -> None:
        """Send what is waiting now (before the result, so that it arrives first)."""
        with self._lock:  # held while posting, so that two flushes cannot cross
            self._sent = time.monotonic()
            for item in self._outbox.take():
                self.post(item)

    def post(self, message: Message) -> None:
        """Post to the node in the order of the calls, from any thread: a thread's post is a callback queued on
        the event loop, so a post made on the loop itself is queued behind those (never ahead of them)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.node.post_message(message)
        else:
            loop.call_soon(self.node.post_message, message)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds` in a thread; False as soon as the job is cancelled."""
        deadline = time.monotonic() + seconds
        while not self.cancelled:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(0.1, left))
        return False


class BackgroundWork:
    """The background API, mixed into a Widget or a Screen (`class Pane(BackgroundWork, Vertical)`)."""

    @dataclass
    class Done(Message, bubble=False, namespace="background"):
        job: Job
        result: Any

    @dataclass
    class Failed(Message, namespace="background"):
        """A job's devtune error (`job` set), or the exception a background worker ended with; it bubbles up to
        the first node whose `show_background_error` shows it."""

        job: Job | None
        error: BaseException
        what: str

    def run_background(self, fn: Callable, *args, group: str, description: str,
                       done: Callable[[Any], None] | None = None, progress: Callable[[Any], None] | None = None,
                       failed: Callable[[DevtuneError], None] | None = None, exclusive: bool = True) -> Worker:
        """Run `fn(job, *args)` off the event loop (an `async def` runs as an async worker on it); `done`,
        `progress` and `failed` are called on the event loop while the job is current."""
        job = Job(self, description)
        job.on_done, job.on_progress, job.on_failed = done, progress, failed

        def ended(result) -> Any:
            job.flush()
            job.post(self.Done(job, result))
            return result

        def refused(exc: DevtuneError) -> None:
            job.flush()
            job.post(self.Failed(job, exc, description))

        if inspect.iscoroutinefunction(fn):
            async def work():
                job.worker = get_current_worker()
                try:
                    result = await fn(job, *args)
                except DevtuneError as exc:
                    return refused(exc)
                except Exception:
                    job.flush()
                    raise
                return ended(result)

            return self.run_worker(work(), group=group, description=description, exclusive=exclusive,
                                   exit_on_error=False)

        def work_in_thread():
            job.worker = get_current_worker()
            try:
                result = fn(job, *args)
            except DevtuneError as exc:
                return refused(exc)
            except Exception:
                job.flush()
                raise
            return ended(result)

        return self.run_worker(work_in_thread, thread=True, group=group, description=description,
                               exclusive=exclusive, exit_on_error=False)

    def poll(self, fetch: Callable, *args, every: float | Callable[[Any], float], group: str, description: str,
             each: Callable[[Any], None], until: Callable[[Any], bool] | None = None,
             then: Callable[[Any], None] | None = None) -> Worker:
        """Call `fetch(job, *args)` in a thread, then every `every` seconds (or `every(value)`: slower for a
        finished run), handing each value to `each` on the event loop; stop when `until(value)` holds
        (`then(value)` follows on the event loop) or the job is cancelled. `until` and `every` run in the
        thread: they look at the value only."""

        def loop(job: Job, *fetch_args):
            while not job.cancelled:
                value = fetch(job, *fetch_args)
                job.report(value)
                job.flush()
                if until is not None and until(value):
                    return value
                if not job.wait(max(HUMAN_RATE, every(value) if callable(every) else every)):
                    break
            return None

        def finished(value) -> None:
            if value is not None and then is not None:
                then(value)

        return self.run_background(loop, *args, group=group, description=description, progress=each,
                                   done=finished)

    def show_background_error(self, failed: Failed) -> bool:
        """Show a background error that reached this node; True when shown (it bubbles no further). A node
        that shows nothing lets it travel on to its parent (the step base shows it in its error box)."""
        return False

    # ---- what comes back, on the event loop -----------------------------------------------------------
    def on_background_progress(self, item: Progress) -> None:
        job = item.job
        if job is not None and job.node is self and job.current and job.on_progress is not None:
            job.on_progress(item.handed())

    def on_background_done(self, message: Done) -> None:
        job = message.job
        if job.node is self and job.current and job.on_done is not None:
            job.on_done(message.result)

    def on_background_failed(self, message: Failed) -> None:
        job = message.job
        if job is not None and not job.current:
            message.stop()
            return
        if job is not None and job.node is self and job.on_failed is not None:
            job.on_failed(message.error)
        if self.show_background_error(message):
            message.stop()

    def _on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.node is self:
            what = event.worker.description or event.worker.name
            self.post_message(self.Failed(None, event.worker.error, what))
