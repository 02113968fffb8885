"""Timestamps as chat exports write them: `2024-03-01 10:02:11`, `[12/31/23, 9:15:02 PM]`, `3/4/24, 09:12`,
`2024年3月1日 下午3:15`, a clock alone under a day line (`2024/03/08(Fri)` then `10:02`), epoch seconds or
milliseconds and ISO strings in JSON. Only gaps between messages are computed from them, so a naive
calendar (no time zone) is enough."""

from __future__ import annotations

import calendar
import re
from datetime import datetime

DATE = r"(?:\d{4}[-/.年]\d{1,2}[-/.月]\d{1,2}日?|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})"
WEEKDAY = (r"(?:\s*[,，]?\s*[（(]?(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?[）)]?"
           r"|\s*[（(]?(?:周|星期)[一二三四五六日天][）)]?)?")
CLOCK = (r"(?:(?:上午|下午|晚上|凌晨|中午)\s*)?\d{1,2}[:：]\d{2}(?:[:：]\d{2})?(?:\.\d+)?"
         r"(?:\s*[AaPp]\.?[Mm]\.?)?(?:Z|[+-]\d{2}:?\d{2})?")
STAMP = rf"(?:{DATE}{WEEKDAY}(?:[,，]?\s*|T){CLOCK}|{CLOCK})"
_DATE = re.compile(DATE)
_CLOCK = re.compile(r"(上午|下午|晚上|凌晨|中午)?\s*(\d{1,2})[:：](\d{2})(?:[:：](\d{2}))?(?:\.\d+)?\s*([AaPp])?")


def has_date(stamp: str) -> bool:
    return _DATE.match(stamp.strip()) is not None


def date_parts(stamp: str) -> tuple[int, int, int] | None:
    """(a, b, c) numbers of the date as written (year first or not)."""
    m = _DATE.match(stamp.strip())
    if not m:
        return None
    nums = [int(x) for x in re.findall(r"\d+", m.group(0))]
    return (nums[0], nums[1], nums[2]) if len(nums) >= 3 else None


def day_first(stamps: list[str]) -> bool:
    """Is `3/4/24` the 3rd of April in this file: some first number above 12 says so."""
    firsts, seconds = [], []
    for s in stamps:
        p = date_parts(s)
        if p and p[0] < 100:
            firsts.append(p[0])
            seconds.append(p[1])
    return any(n > 12 for n in firsts) and not any(n > 12 for n in seconds)


def ymd(stamp: str, dayfirst: bool) -> tuple[int, int, int] | None:
    p = date_parts(stamp)
    if p is None:
        return None
    a, b, c = p
    if a >= 100:
        return a, b, c
    year = c + 2000 if c < 100 else c
    return (year, b, a) if dayfirst else (year, a, b)


def text_seconds(stamp: str, dayfirst: bool, day: tuple[int, int, int] | None) -> float | None:
    """Seconds since the epoch (naive) of a stamp as written, the day from `day` when it has none."""
    date = ymd(stamp, dayfirst) or day
    rest = _DATE.sub("", stamp, count=1)
    m = _CLOCK.search(rest)
    if date is None or m is None:
        return None
    part, hh, mm, ss, ampm = m.groups()
    hour = int(hh) % 24
    if (ampm and ampm.lower() == "p") or part in ("下午", "晚上"):
        hour = hour % 12 + 12
    elif (ampm and ampm.lower() == "a") or part == "凌晨":
        hour = hour % 12
    try:
        return float(calendar.timegm((date[0], date[1], date[2], hour, int(mm), int(ss or 0), 0, 0, 0)))
    except (ValueError, OverflowError):
        return None


def value_seconds(value) -> float | None:
    """Seconds of a JSON/CSV value: epoch seconds or milliseconds (number or digits), or a date string."""
    if isinstance(value, bool) or value is None:
        return None
    digits = isinstance(value, str) and value.strip().isascii() and value.strip().isdigit()  # not "²" or "٣"
    if isinstance(value, (int, float)) or digits:
        n = float(value)
        if 1e12 <= n < 1e14:
            return n / 1000
        return n if 1e8 <= n < 1e11 else None
    if not isinstance(value, str) or not re.match(r"\s*\d", value):
        return None
    text = value.strip()
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return float(calendar.timegm(dt.utctimetuple())) if dt.tzinfo else float(calendar.timegm(dt.timetuple()))
    except ValueError:
        return text_seconds(text, False, None)
