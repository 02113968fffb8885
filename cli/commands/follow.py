"""Following a run on the command line: a progress line (or JSON lines) until it ends or Ctrl-C.

Each update carries the run's `RunSnapshot` (core.train.snapshot, what the Train step renders too); the
text lines and the JSON objects are renderings of it. The anomalies shown are those that hold now, the same list in both forms; while
following, the text prints each one once, when it first holds."""

from __future__ import annotations

import sys
import time

from core.i18n import _
from cli.commands.output import emit_json_line
from core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS


def follow_run(ws, run_id: str, *, as_json: bool, until_end: bool, exit_with_outcome: bool,
               interval: float = 1.0) -> int:
    from core.train.watch import RunWatcher

    watcher = RunWatcher(ws, run_id)
    tty = sys.stderr.isatty() and not as_json
    shown: set[tuple[str, int]] = set()
    last_line = ""
    try:
        while True:
            update = watcher.poll()
            report = update.snapshot
            if as_json:
                emit_json_line(report.to_json())
            else:
                line = report.progress_text()
                if tty:
                    sys.stderr.write("\r" + line[:200].ljust(len(last_line)))
                    sys.stderr.flush()
                elif line != last_line:
                    print(line, flush=True)
                last_line = line
                lines = report.anomaly_lines()
                for anomaly, text in zip(report.anomalies, lines):
                    if (anomaly.id, anomaly.step) not in shown:
                        shown.add((anomaly.id, anomaly.step))
                        print(("\n" if tty else "") + text, file=sys.stderr)
                for text in report.advice_lines():  # what would raise the throughput, once each
                    if ("advice", text) not in shown:
                        shown.add(("advice", text))
                        print(("\n" if tty else "") + text, file=sys.stderr)
                stall = report.stall
                if stall is not None and (stall.kind, stall.step) not in shown:  # once per stall, with its stacks
                    shown.add((stall.kind, stall.step))
                    print(("\n" if tty else "") + "\n".join(lines[len(report.anomalies):]), file=sys.stderr)
            if not update.record.active:
                if tty:
                    sys.stderr.write("\n")
                if not as_json:
                    print("\n".join(report.end_lines()))
                if not exit_with_outcome:
                    return EXIT_OK
                return EXIT_OK if report.status.value == "finished" else EXIT_PROBLEMS
            if not until_end:
                if tty:
                    sys.stderr.write("\n")
                return EXIT_OK
            time.sleep(interval)
    except KeyboardInterrupt:
        print("\n" + _("left run {id} running. Re-attach: devtune monitor {id} --follow   stop it: devtune stop {id}",
                       id=run_id), file=sys.stderr)
        return EXIT_INTERRUPTED
