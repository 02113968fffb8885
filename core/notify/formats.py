"""The request each platform's robot takes, as its official documentation describes it, and how its reply says
whether the message arrived.

    feishu / lark  custom bot (open.feishu.cn / open.larksuite.com .../open-apis/bot/v2/hook/<token>): JSON
                   `{"msg_type": "post", "content": {"post": {"zh_cn"|"en_us": {"title", "content": [[{"tag":
                   "text", "text"}]]}}}}`; with signature verification on, `timestamp` (seconds, as a string)
                   and `sign` = Base64(HMAC-SHA256(key = timestamp + "\\n" + secret, message = empty)) in the
                   body. Reply `{"code": 0, "msg": "success"}`; an error is HTTP 200 with another code (19021:
                   sign match fail).
    dingtalk       custom robot (oapi.dingtalk.com/robot/send?access_token=...): `{"msgtype": "markdown",
                   "markdown": {"title", "text"}}`; signing ("加签") adds `timestamp` (milliseconds) and `sign` =
                   urlencode(Base64(HMAC-SHA256(key = secret, message = timestamp + "\\n" + secret))) to the query.
                   Reply `{"errcode": 0, "errmsg": "ok"}`; 130101: sent too fast (retried).
    wecom          group robot (qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...): `{"msgtype": "markdown",
                   "markdown": {"content"}}`, content at most 4096 bytes of UTF-8. Reply `{"errcode": 0}`;
                   45009: over the rate limit (retried).
    slack          incoming webhook (hooks.slack.com/services/T/B/X): `{"text", "blocks"}`, `text` the
                   fallback shown in notifications; a header block (plain_text, at most 150 characters) and a
                   mrkdwn section (at most 3000). Reply HTTP 200 with the body `ok`.
    json           the event itself (NotifyEvent.to_dict), POSTed; any 2xx is an arrival.
    command        not HTTP: the event's JSON on the command's stdin (core.notify.send).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field

from core.i18n import current_language
from core.notify.events import NotifyEvent

WEBHOOK_FORMATS = ("feishu", "lark", "dingtalk", "wecom", "slack", "json")
FORMATS = WEBHOOK_FORMATS + ("command",)
SIGNED_FORMATS = ("feishu", "lark", "dingtalk")
WECOM_MAX_BYTES = 4096
SLACK_HEADER_MAX = 150
SLACK_SECTION_MAX = 3000
RATE_LIMIT_CODES = {"dingtalk": (130101,), "wecom": (45009,), "feishu": (9499, 11232), "lark": (9499, 11232)}


@dataclass
class Prepared:
    """One request, ready to POST: the body, and query parameters to add to the target's URL (a signature)."""
    body: dict
    params: dict[str, str] = field(default_factory=dict)


def feishu_sign(secret: str, timestamp: int) -> str:
    """Feishu/Lark: timestamp + "\\n" + secret is the HMAC-SHA256 *key* of an empty message, Base64-encoded."""
    key = f"{timestamp}\n{secret}".encode("utf-8")
    return base64.b64encode(hmac.new(key, b"", digestmod=hashlib.sha256).digest()).decode("utf-8")


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk: HMAC-SHA256 of timestamp + "\\n" + secret keyed by the secret, Base64 (httpx URL-encodes it as a
    query value, which is the docs' urlEncode step)."""
    message = f"{timestamp_ms}\n{secret}".encode("utf-8")
    return base64.b64encode(hmac.new(secret.encode("utf-8"), message, digestmod=hashlib.sha256).digest()).decode()


def _truncate_bytes(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", "ignore") + "..."


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def payload(fmt: str, event: NotifyEvent, *, secret: str | None = None, now: float | None = None) -> Prepared:
    """The request for `event` in format `fmt`; `secret` signs it where the platform signs (feishu, lark,
    dingtalk); `now` (seconds) is the signature's time."""
    import time

    now = time.time() if now is None else now
    title, lines = event.title(), event.lines()
    if fmt in ("feishu", "lark"):
        lang = "zh_cn" if current_language() == "zh" else "en_us"
        body: dict = {"msg_type": "post", "content": {"post": {lang: {
            "title": title, "content": [[{"tag": "text", "text": line}] for line in lines]}}}}
        if secret:
            stamp = int(now)
            body = {"timestamp": str(stamp), "sign": feishu_sign(secret, stamp), **body}
        return Prepared(body)
    if fmt == "dingtalk":
        text = "\n\n".join([f"#### {title}", *lines])
        params = {}
        if secret:
            stamp = int(now * 1000)
            params = {"timestamp": str(stamp), "sign": dingtalk_sign(secret, stamp)}
        return Prepared({"msgtype": "markdown", "markdown": {"title": title, "text": text}}, params)
    if fmt == "wecom":
        content = "\n".join([f"**{title}**", *(f"> {line}" for line in lines)])
        return Prepared({"msgtype": "markdown", "markdown": {"content": _truncate_bytes(content, WECOM_MAX_BYTES)}})
    if fmt == "slack":
        return Prepared({"text": title, "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": _clip(title, SLACK_HEADER_MAX)}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _clip("\n".join(lines), SLACK_SECTION_MAX)}}]})
    if fmt == "json":
        return Prepared(event.to_dict())
    raise ValueError(f"no webhook format {fmt!r}")


@dataclass
class ReplyReading:
    """What a reply says: arrived, worth another try (a rate limit, a server error), and the platform's words."""
    arrived: bool
    retry: bool
    detail: str


def judge_reply(fmt: str, status: int, text: str) -> ReplyReading:
    detail = f"HTTP {status}: {text.strip()[:200]}"
    if status == 429 or status >= 500:
        return ReplyReading(False, True, detail)
    if not 200 <= status < 300:
        return ReplyReading(False, False, detail)
    if fmt == "slack":
        return ReplyReading(text.strip() == "ok", False, detail)
    if fmt == "json":
        return ReplyReading(True, False, detail)
    try:
        reply = json.loads(text)
    except ValueError:
        return ReplyReading(False, False, detail)
    if not isinstance(reply, dict):
        return ReplyReading(False, False, detail)
    code = reply.get("code", reply.get("StatusCode")) if fmt in ("feishu", "lark") else reply.get("errcode")
    if code == 0:
        return ReplyReading(True, False, detail)
    return ReplyReading(False, code in RATE_LIMIT_CODES.get(fmt, ()), detail)
