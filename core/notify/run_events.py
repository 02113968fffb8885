"""The events of a run and of an eval, sent where the workspace's notify.json says.

    notify_run_end(directory)     the supervisor, when the trainer has ended: finished, or failed with the
                                  diagnosis's first cause and fix (core.train.failures.diagnose_record); a stop
                                  the person asked for sends nothing
    StallWatch(directory, pid)    the supervisor, while the trainer lives: once a minute the stall check of
                                  core.train.stalls (the tail of trainer_log.jsonl and the logs' mtimes; no
                                  stacks), one `stalled` event per stall, again only after progress resumed
    notify_eval(ws, report, log)  core.eval.compare.run_eval, when its verdict is "worse"

Export runs are runs too (kind "export"): the same supervisor sends their finished / failed. Each outcome is a line
of the run's notify.jsonl. None of these raises: a webhook never changes how a run's end is recorded.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from core.notify.events import EVAL_WORSE, FAILED, FINISHED, STALLED, NotifyEvent
from core.notify.send import Delivery, deliver
from core.notify.destinations import load_targets
from core.workspace.layout import Workspace

STALL_CHECK_S = 60.0  # a human rate: the check reads a few kB; a stall is minutes long (core.train.stalls)
LOG_NAME = "notify.jsonl"


def _say(text: str) -> None:
    print(f"devtune notify: {text}", file=sys.stderr, flush=True)  # the supervisor's stderr is supervisor.log


def _progress(directory: Path, record) -> tuple[int | None, int | None, float | None]:
    """(step, total, last loss) from the end of the run's own trainer_log.jsonl."""
    from core.train.metrics import parse_log_line
    from core.train.runs import trainer_log_source

    path, start = trainer_log_source(directory, record)
    try:
        with open(path, "rb") as fh:
            size = path.stat().st_size
            fh.seek(max(start, size - 65536))
            lines = fh.read().splitlines()
    except OSError:
        return None, None, None
    step = total = loss = None
    for raw in reversed(lines):
        row = parse_log_line(raw)
        if row is None:
            continue
        if step is None:
            step, total = row.step, row.total
        if row.loss is not None:
            loss = row.loss
            break
    return step, total, loss


def _cause(ws: Workspace, record) -> tuple[str | None, str | None]:
    """The diagnosis's first title and fix; (None, None) when it finds nothing or cannot read the logs."""
    try:
        from core.train.failures import diagnose_record

        found = diagnose_record(ws, record)
    except Exception as exc:  # the diagnosis must never keep the word from going out
        _say(f"no diagnosis ({type(exc).__name__}: {exc})")
        return None, None
    return (found[0].title, found[0].fix) if found else (None, None)


def run_event(ws: Workspace, directory: Path, record, kind: str | None = None) -> NotifyEvent | None:
    """The event a run's state means (None for a run stopped on request or still going), or `kind`'s."""
    from core.train.runs import RunStatus

    if kind is None:
        kind = {RunStatus.FINISHED: FINISHED, RunStatus.FAILED: FAILED}.get(record.status)
        if kind is None:
            return None
    step, total, loss = _progress(directory, record)
    event = NotifyEvent(kind=kind, run=record.id, run_kind=record.kind, workspace=str(ws.root), host=record.host,
                        config=record.source_config or record.config, status=record.status.value,
                        exit_code=record.exit_code, step=step, total_steps=total, last_loss=loss, note=record.note,
                        duration_s=(record.ended - record.started) if record.ended else None)
    if kind == FAILED:
        event.cause, event.fix = _cause(ws, record)
    return event


def notify_run_end(directory: Path) -> list[Delivery]:
    try:
        from core.train.runs import read_record

        record = read_record(directory)
        ws = Workspace(Path(record.cwd))
        targets = load_targets(ws)
        if not targets:
            return []
        event = run_event(ws, directory, record)
        if event is None:
            return []
        sent = deliver(event, targets, log=directory / LOG_NAME)
        for delivery in sent:
            _say(delivery.line())
        return sent
    except Exception as exc:  # a damaged notify.json, anything: the run's end is already recorded
        _say(f"not sent: {type(exc).__name__}: {exc}")
        return []


class StallWatch:
    """A daemon thread of the supervisor: one stall check a minute while the trainer lives, when a target wants
    `stalled` events; one event per stall."""

    def __init__(self, directory: Path, trainer_pid: int, *, every_s: float = STALL_CHECK_S):
        self.directory, self.pid, self.every_s = directory, trainer_pid, every_s
        self.stop = threading.Event()
        self.sent: list[Delivery] = []
        self.thread = threading.Thread(target=self._loop, name="stall-notify", daemon=True)

    def start(self) -> "StallWatch":
        self.thread.start()
        return self

    def _loop(self) -> None:
        notified = False
        while not self.stop.wait(self.every_s):
            try:
                notified = self.check(notified)
            except Exception as exc:
                _say(f"stall check failed: {type(exc).__name__}: {exc}")

    def check(self, notified: bool) -> bool:
        """One check; returns whether the current stall has been told (so it is told once)."""
        from core.train.runs import read_record, trainer_log_source
        from core.train.stalls import check_stall

        record = read_record(self.directory)
        if record.stop_requested is not None:
            return notified  # a stop on its way is no stall
        ws = Workspace(Path(record.cwd))
        targets = [t for t in load_targets(ws) if STALLED in t.events]
        if not targets:
            return notified
        log, _start = trainer_log_source(self.directory, record)
        stall = check_stall(log, self.pid, None, outputs=(self.directory / "stdout.log",
                                                          self.directory / "stderr.log"), with_stacks=False)
        if stall is None:
            return False
        if notified:
            return True
        event = run_event(ws, self.directory, record, STALLED)
        event.cause = stall.reason
        self.sent += deliver(event, targets, log=self.directory / LOG_NAME)
        return True


def notify_eval(ws: Workspace, report, log: Path) -> list[Delivery]:
    """An eval whose verdict is "worse" (core.eval's EvalReport, read by its fields)."""
    try:
        verdict = report.verdict
        if verdict.outcome != "worse":
            return []
        targets = load_targets(ws)
        if not targets:
            return []
        event = NotifyEvent(kind=EVAL_WORSE, run=report.run, run_kind="eval", workspace=str(ws.root),
                            eval_id=report.id, note=verdict.line)
        return deliver(event, targets, log=log)
    except Exception as exc:
        _say(f"not sent: {type(exc).__name__}: {exc}")
        return []


def send_test(ws: Workspace, name: str | None = None) -> list[Delivery]:
    """`devtune notify test [NAME]`: a test event to every target (or the one named); each outcome recorded in
    .devtune/notify-test.jsonl. Unavailable when there is no target (or none of that name)."""
    from core.errors import Unavailable
    from core.i18n import _
    from core.notify.events import TEST

    targets = load_targets(ws)
    if name is not None:
        targets = [t for t in targets if t.name == name]
        if not targets:
            raise Unavailable(_("no notify target named {name}; `devtune notify list` shows them", name=name))
    if not targets:
        raise Unavailable(_("no notify targets in {path}; add one with `devtune notify add URL --format FORMAT`",
                            path=str(ws.root)))
    return deliver(NotifyEvent(kind=TEST, workspace=str(ws.root)), targets, log=ws.state_dir / "notify-test.jsonl")
