"""Following a run on the command line: a progress line (or JSON lines) until it ends or Ctrl-C."""

from __future__ import annotations

import sys
import time

from core.i18n import _
from tui.commands.output import emit_json_line


def follow_run(ws, run_id: str, *, as_json: bool, until_end: bool, exit_with_outcome: bool,
               interval: float = 1.0) -> int:
    from core.train.gpu.history import group_ticks
    from core.train.runs import status_label
    from core.train.watch import RunWatcher, progress_line, update_json

    watcher = RunWatcher(ws, run_id)
    tty = sys.stderr.isatty() and not as_json
    latest_gpus: list = []
    last_line = ""
    try:
        while True:
            update = watcher.poll()
            if update.gpu_samples:
                latest_gpus = group_ticks(update.gpu_samples)[-1]
            if as_json:
                emit_json_line(update_json(update, latest_gpus))
            else:
                line = f"[{status_label(update.record.status)}] {progress_line(update.snapshot)}"
                if tty:
                    sys.stderr.write("\r" + line[:200].ljust(len(last_line)))
                    sys.stderr.flush()
                elif line != last_line:
                    print(line, flush=True)
                last_line = line
                for anomaly in update.anomalies:
                    print(("\n" if tty else "") + f"! {anomaly.message}", file=sys.stderr)
            if not update.record.active:
                if tty:
                    sys.stderr.write("\n")
                return _report_end(update, as_json, exit_with_outcome)
            if not until_end:
                if tty:
                    sys.stderr.write("\n")
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        print("\n" + _("left run {id} running. Re-attach: devtune monitor {id} --follow   stop it: devtune stop {id}",
                       id=run_id), file=sys.stderr)
        return 130


def _report_end(update, as_json: bool, exit_with_outcome: bool) -> int:
    record = update.record
    if not as_json:
        from core.train.runs import status_label

        print(f"{record.id}: {status_label(record.status)}" + (f" — {record.note}" if record.note else ""))
        for d in update.diagnoses[:3]:
            print(f"\n{d.title}\n  {d.fix}")
            for ev in d.evidence[:2]:
                where = f"{ev.file}:{ev.line}" if ev.line else ev.file
                print("  " + _("evidence ({where}): {text}", where=where, text=ev.text))
    if not exit_with_outcome:
        return 0
    return 0 if record.status.value == "finished" else 1
