"""The background API for any widget (tui/widgets/background.py): typed results, typed progress coalesced by each
kind's declared rule (latest / every one / latest per key), so a burst never floods the event loop and the
result still comes after the last progress item; a widget that is no step screen runs work as a step does,
and its errors reach the step's error box."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from textual.app import App
from textual.widgets import Static

from core.errors import Failed as FailedError
from screens.base import StepScreen
from tests.tui.helpers import wait_until
from tests.tui.test_step_base import WorkApp
from tui.widgets.background import BackgroundWork, Batched, Coalesce, Job, Outbox, Progress

BURST = 20_000


@dataclass
class Counted(Progress, coalesce=Coalesce.LATEST):
    n: int


@dataclass
class GpuSeen(Progress, coalesce=Coalesce.BY_KEY):
    index: int
    util: int

    def key(self):
        return self.index


@dataclass
class Line(Progress):  # every one kept
    text: str


@dataclass
class CountResult:
    total: int
    reported: int


class Counter(BackgroundWork, Static):
    """A plain widget with its own background work."""

    def on_mount(self) -> None:
        self.seen: list = []
        self.result: CountResult | None = None
        self.errors: list = []

    def start(self, fn, *args, group: str = "count"):
        return self.run_background(fn, *args, group=group, description="Counting", progress=self._progress,
                                   done=self._done, failed=self.errors.append)

    def _progress(self, item) -> None:
        self.seen.append(item)
        if isinstance(item, Counted):
            self.update(f"counted {item.n}")

    def _done(self, result: CountResult) -> None:
        self.result = result
        self.update(f"{self.render()} · done {result.total}")


def count_burst(job: Job, n: int) -> CountResult:
    for i in range(n):
        job.report(Counted(i))
    return CountResult(total=n, reported=n)


class CounterApp(App):
    def compose(self):
        yield Counter("", id="counter")


# ---- the rules, without an event loop ---------------------------------------------------------------
def test_each_kind_coalesces_by_its_declared_rule():
    job = object()
    box = Outbox()
    for item in [Counted(1), Line("a"), GpuSeen(0, 10), GpuSeen(1, 20), Counted(2), GpuSeen(0, 30), Line("b"),
                 Batched(["x"]), Batched(["y"]), Counted(3)]:
        item.job = job
        box.add(item)
    left = box.take()
    assert [type(i).__name__ for i in left] == ["Line", "GpuSeen", "GpuSeen", "Line", "Batched", "Counted"]
    assert [(g.index, g.util) for g in left if isinstance(g, GpuSeen)] == [(1, 20), (0, 30)]  # newest per key
    assert [i.text for i in left if isinstance(i, Line)] == ["a", "b"]  # every one, in order
    assert next(i for i in left if isinstance(i, Batched)).handed() == ["x", "y"]  # one list, in order
    assert left[-1].n == 3 and box.take() == []  # only the newest count


def test_textual_drops_a_queued_item_only_for_a_newer_one_of_the_same_job_and_kind():
    a, b = object(), object()
    old, new, other_job = Counted(1), Counted(2), Counted(3)
    old.job = new.job = a
    other_job.job = b
    assert old.can_replace(new) and not old.can_replace(other_job)  # Textual: `old` gives way to `new` behind it
    gpu0, gpu0_later, gpu1 = GpuSeen(0, 1), GpuSeen(0, 2), GpuSeen(1, 3)
    gpu0.job = gpu0_later.job = gpu1.job = a
    assert gpu0.can_replace(gpu0_later) and not gpu0.can_replace(gpu1)
    first, second = Line("a"), Line("b")
    first.job = second.job = a
    assert not first.can_replace(second)


# ---- a plain widget's work, in a running app ----------------------------------------------------------
async def test_a_burst_shows_its_latest_count_then_the_result():
    app = CounterApp()
    async with app.run_test(size=(60, 5)) as pilot:
        counter = app.query_one(Counter)
        counter.start(count_burst, BURST)
        await wait_until(pilot, lambda: counter.result is not None)
        assert counter.result == CountResult(total=BURST, reported=BURST)
        counts = [item.n for item in counter.seen]
        assert counts[-1] == BURST - 1  # the newest count was shown before the result came
        assert counts == sorted(counts) and len(counts) < BURST // 100  # in order, and thinned: no flood
        assert str(counter.render()) == f"counted {BURST - 1} · done {BURST}"


async def test_every_line_and_the_newest_of_each_key_arrive_before_the_result():
    def mixed(job: Job) -> CountResult:
        for i in range(5_000):
            job.report(GpuSeen(i % 4, i))
            job.report(Line(f"line {i}"))
        return CountResult(total=5_000, reported=10_000)

    app = CounterApp()
    async with app.run_test(size=(60, 5)) as pilot:
        counter = app.query_one(Counter)
        counter.start(mixed)
        await wait_until(pilot, lambda: counter.result is not None)
        assert [i.text for i in counter.seen if isinstance(i, Line)] == [f"line {i}" for i in range(5_000)]
        newest = {}
        for item in counter.seen:
            if isinstance(item, GpuSeen):
                newest[item.index] = item.util
        assert newest == {0: 4_996, 1: 4_997, 2: 4_998, 3: 4_999}
        assert sum(isinstance(i, GpuSeen) for i in counter.seen) < 20_000 // 4


async def test_queued_items_of_a_latest_kind_give_way_to_the_newest_on_the_event_loop():
    """Items already waiting in a widget's queue (its loop fell behind) are thinned by Textual itself."""
    app = CounterApp()
    async with app.run_test(size=(60, 5)) as pilot:
        counter = app.query_one(Counter)
        job = Job(counter, "queued")
        job.on_progress = counter._progress
        held = threading.Event()
        job.worker = counter.run_worker(held.wait, thread=True, group="hold", exit_on_error=False)
        for i in range(1_000):  # posted on the loop at once: all queued before the widget reads one
            item = Counted(i)
            item.job = job
            counter.post_message(item)
        try:
            await wait_until(pilot, lambda: counter.seen and counter.seen[-1].n == 999)
            assert len(counter.seen) < 1_000
        finally:
            held.set()


async def test_a_replaced_widget_job_hands_back_nothing():
    release = threading.Event()

    def slow(job: Job) -> CountResult:
        job.report(Counted(-1))
        release.wait(5)
        return CountResult(total=-1, reported=1)

    app = CounterApp()
    async with app.run_test(size=(60, 5)) as pilot:
        counter = app.query_one(Counter)
        counter.start(slow)
        counter.start(count_burst, 3)  # the same group: the slow one is cancelled
        await wait_until(pilot, lambda: counter.result is not None)
        release.set()
        await pilot.pause(0.3)
        assert counter.result.total == 3 and all(item.n >= 0 for item in counter.seen)


# ---- a widget inside a step: its errors reach the step's error box ------------------------------------
class PaneScreen(StepScreen):
    STEP_ID = "work"

    def compose_body(self):
        yield Counter("", id="counter")


class PaneApp(WorkApp):
    def get_default_screen(self):
        return PaneScreen()


async def test_a_widgets_devtune_error_lands_in_the_steps_error_box(workspace):
    def refuse(job: Job) -> None:
        raise FailedError("the server at 127.0.0.1:9 refused the connection; start it again (devtune serve)")

    app = PaneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.state_loaded)
        screen = app.screen
        counter = screen.query_one(Counter)
        counter.start(refuse)
        await wait_until(pilot, lambda: screen.query_one("#step-error").has_class("-visible"))
        assert "refused the connection" in str(screen.query_one("#step-error").render())
        assert [str(e) for e in counter.errors] == [
            "the server at 127.0.0.1:9 refused the connection; start it again (devtune serve)"]
        assert app.state.step("work").status.value == "attention"


async def test_the_error_box_draws_commands_as_terms_and_never_reads_markup(workspace):
    """A message's `commands` lose their backticks (drawn bold, as every catalog message is), and brackets from a
    log (`[rank0]:`, `[/]`) are text, not Rich markup."""
    def refuse(job: Job) -> None:
        raise FailedError("[rank0]: [/] failed; run `devtune diagnose RUN`")

    app = PaneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        screen.query_one(Counter).start(refuse)
        await wait_until(pilot, lambda: screen.query_one("#step-error").has_class("-visible"))
        shown = str(screen.query_one("#step-error").render())
        assert "[rank0]: [/] failed; run devtune diagnose RUN" in shown and "`" not in shown, shown


async def test_a_widgets_crash_is_shown_not_raised(workspace):
    def crash(job: Job) -> None:
        raise ZeroDivisionError("division by zero")

    app = PaneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        screen.query_one(Counter).start(crash)
        await wait_until(pilot, lambda: screen.query_one("#step-error").has_class("-visible"))
        assert "Counting failed: ZeroDivisionError: division by zero" in str(screen.query_one("#step-error").render())
        assert app.is_running
