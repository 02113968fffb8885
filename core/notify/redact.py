"""A webhook's URL is its password: Feishu's and Slack's carry the key in the path, DingTalk's and WeCom's in the
query (`access_token`, `key`). What devtune writes (notify.jsonl, `notify list`, an error message) shows the URL
with every query value and every key-like path segment masked, and any text is scrubbed of the secrets it may
quote (`scrub`)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_KEYLIKE = re.compile(r"[A-Za-z0-9_\-.~]{12,}")  # a token: long, no spaces (Slack's T…/B… ids are 9-11 long)
_WORDS = re.compile(r"[a-z]+(-[a-z]+)*")  # a path word (hook, robot, send, services, open-apis)


def _segment(part: str) -> str:
    """A path segment as shown: a word (hook, open-apis) or a short one (v2) as is, a key (long, or with digits
    and at least 6 characters) masked."""
    if not part or _WORDS.fullmatch(part) or len(part) < 6:
        return part
    return MASK if _KEYLIKE.fullmatch(part) or any(c.isdigit() for c in part) else part


def redact_url(url: str) -> str:
    """scheme://host[:port]/path with key-like segments and every query value masked; no user info, no fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return MASK
    netloc = f"{host}:{port}" if port else host
    path = "/".join(_segment(p) for p in parts.path.split("/"))
    query = "&".join(f"{q.split('=', 1)[0]}={MASK}" for q in parts.query.split("&") if q)
    return urlunsplit((parts.scheme, netloc, path, query, ""))


def url_secrets(url: str) -> list[str]:
    """The pieces of `url` that are secret: the whole URL, each query value, each masked path segment, user info."""
    out = [url]
    try:
        parts = urlsplit(url)
    except ValueError:
        return out
    out += [q.split("=", 1)[1] for q in parts.query.split("&") if "=" in q and q.split("=", 1)[1]]
    out += [p for p in parts.path.split("/") if p and _segment(p) == MASK]
    if parts.password:
        out.append(parts.password)
    return out


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret in it replaced (longest first, so a URL goes whole before its pieces)."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
