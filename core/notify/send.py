"""Sending one event to its targets, and the record of what was sent.

A webhook is POSTed with httpx, up to ATTEMPTS times: a network error, an HTTP 5xx or 429, or a platform's own
rate-limit code is tried again after BACKOFF_S, doubled each time (a `Retry-After` of at most MAX_WAIT_S is
honoured); anything else (a wrong key, a refused signature) is said at once. A command target runs once, its
argv as given (never a shell), the event's JSON on its stdin and nowhere else.

Each outcome is one JSON line appended to the log the caller names (a run's `notify.jsonl`): the event kind, the
target, where it went (redacted), whether it arrived, after how many attempts, the reply. Neither that line nor
any message carries a secret: every text is scrubbed of the URL's key pieces and the signing secret.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from core.errors import DevtuneError
from core.i18n import _
from core.notify.events import TEST, NotifyEvent
from core.notify.formats import judge_reply, payload
from core.notify.redact import scrub, url_secrets
from core.notify.destinations import Target

ATTEMPTS = 4
BACKOFF_S = 1.0
MAX_WAIT_S = 30.0
TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0


@dataclass
class Delivery:
    event: str
    target: str
    format: str
    to: str  # redacted
    arrived: bool
    attempts: int
    status: int | None = None
    detail: str = ""
    time: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        if self.arrived:
            return _("{target} ({fmt}): arrived ({detail})", target=self.target, fmt=self.format, detail=self.detail)
        if not self.attempts:
            return _("{target} ({fmt}): not sent: {detail}", target=self.target, fmt=self.format, detail=self.detail)
        return _("{target} ({fmt}): not delivered after {n} attempts: {detail}", target=self.target,
                 fmt=self.format, n=self.attempts, detail=self.detail)


def wants(target: Target, event: NotifyEvent) -> bool:
    return event.kind == TEST or event.kind in target.events


def deliver(event: NotifyEvent, targets: list[Target], *, log: Path | None = None, attempts: int = ATTEMPTS,
            backoff_s: float = BACKOFF_S, sleep: Callable[[float], None] = time.sleep) -> list[Delivery]:
    """Send `event` to each target that wants it; never raises for a target that fails (its Delivery says why)."""
    out = []
    for target in targets:
        if not wants(target, event):
            continue
        try:
            if target.format == "command":
                delivery = _run_command(event, target)
            else:
                delivery = _post(event, target, attempts=attempts, backoff_s=backoff_s, sleep=sleep)
        except DevtuneError as exc:  # a URL or secret variable unset, a secret file others can read
            delivery = Delivery(event.kind, target.name, target.format, target.shown(), False, 0, detail=str(exc))
        delivery.time = time.time()
        out.append(delivery)
        if log is not None:
            _record(log, delivery)
    return out


def _record(log: Path, delivery: Delivery) -> None:
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(delivery.to_dict(), ensure_ascii=False) + "\n")
    except OSError:
        pass  # the record is a courtesy: a full disk must not fail the run's end


def _post(event: NotifyEvent, target: Target, *, attempts: int, backoff_s: float, sleep) -> Delivery:
    import httpx

    url = target.resolved_url()
    secret = target.signing_secret()
    secrets = url_secrets(url) + ([secret] if secret else [])
    delivery = Delivery(event.kind, target.name, target.format, target.shown(), False, 0)
    wait = backoff_s
    for attempt in range(1, attempts + 1):
        delivery.attempts = attempt
        request = payload(target.format, event, secret=secret)  # signed afresh: a signature's time is checked
        retry_after = None
        try:
            # merged into the URL's own query (httpx's `params=` would replace DingTalk's access_token)
            signed = httpx.URL(url).copy_merge_params(request.params) if request.params else url
            response = httpx.post(signed, json=request.body, timeout=TIMEOUT_S,
                                  headers={"User-Agent": "devtune-notify"})
        except httpx.TransportError as exc:
            retry, delivery.status = True, None
            delivery.detail = scrub(f"{type(exc).__name__}: {exc}", secrets)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # an invalid URL: no retry makes it valid
            delivery.detail = scrub(f"{type(exc).__name__}: {exc}", secrets)
            return delivery
        else:
            verdict = judge_reply(target.format, response.status_code, response.text)
            delivery.status, delivery.detail = response.status_code, scrub(verdict.detail, secrets)
            if verdict.arrived:
                delivery.arrived = True
                return delivery
            retry = verdict.retry
            retry_after = _retry_after(response.headers.get("Retry-After"))
        if not retry or attempt == attempts:
            return delivery
        sleep(retry_after if retry_after is not None else wait)
        wait *= 2
    return delivery


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= MAX_WAIT_S else None


def _run_command(event: NotifyEvent, target: Target) -> Delivery:
    import subprocess

    from core.processes.helpers import run_helper

    delivery = Delivery(event.kind, target.name, "command", target.shown(), False, 1)
    data = json.dumps(event.to_dict(), ensure_ascii=False)
    try:
        done = run_helper(list(target.command or []), input=data, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        delivery.detail = _("did not end within {s:.0f} s", s=COMMAND_TIMEOUT_S)
        return delivery
    except OSError as exc:
        delivery.detail = _("cannot start {cmd}: {error}", cmd=(target.command or ["?"])[0], error=exc)
        return delivery
    delivery.status = done.returncode
    tail = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or [""]
    delivery.detail = _("exit code {code}", code=done.returncode) + (f": {tail[0][:200]}" if tail[0] else "")
    delivery.arrived = done.returncode == 0
    return delivery
