"""Known upstream failures (core/train/known_issues.json): a run's root line matched to a published thread.

    entry = match_known_issue("OSError: [Errno 24] Too many open files")
    entry.link, entry.fix   # the thread and what it found

Matching is by similarity of normalised signatures, not exact text: numbers, hex addresses and paths are
replaced by placeholders (`N`, `HEX`, `PATH`) on both sides, then rapidfuzz's token_set_ratio compares the
tokens, so a signature matches a root line that holds its words with other numbers, paths and hosts around them;
the root line must hold at least 80% of the signature's words (a short root line is no match for a long signature).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core.i18n import current_language

SOURCE = Path(__file__).with_name("known_issues.json")
THRESHOLD = 92  # token_set_ratio of the normalised texts; unrelated errors score 40-75, variants 95-100
COVERAGE = 0.8  # of the signature's words the root line must hold
_HEX = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]*){2,}")
_NUM = re.compile(r"(?<![A-Za-z])\d+(?:\.\d+)*")


@dataclass(frozen=True)
class KnownIssue:
    id: str
    signature: str
    example: str
    cause: str
    cause_zh: str
    fix: str
    fix_zh: str
    link: str

    def cause_text(self) -> str:
        return self.cause_zh if current_language() == "zh" and self.cause_zh else self.cause

    def fix_text(self) -> str:
        return self.fix_zh if current_language() == "zh" and self.fix_zh else self.fix


def normalise(text: str) -> str:
    text = _HEX.sub(" HEX ", text)
    text = _PATH.sub(" PATH ", text)
    return _NUM.sub("N", text)


@lru_cache(maxsize=1)
def known_issues() -> tuple[KnownIssue, ...]:
    data = json.loads(SOURCE.read_text(encoding="utf-8"))
    return tuple(KnownIssue(e["id"], e["signature"], e["example"], e["cause"], e.get("cause_zh", ""), e["fix"],
                            e.get("fix_zh", ""), e["link"]) for e in data["entries"])


def match_known_issue(root: str) -> KnownIssue | None:
    """The entry whose signature is most like this root line, when it is like enough."""
    from rapidfuzz import fuzz
    from rapidfuzz.utils import default_process

    text = normalise(root)
    words = set(default_process(text).split())
    best, score = None, 0.0
    for entry in known_issues():
        signature = normalise(entry.signature)
        wanted = set(default_process(signature).split())
        if len(wanted & words) < COVERAGE * len(wanted):
            continue  # token_set_ratio is 100 for a subset either way: a bare `AssertionError` is no signature
        s = fuzz.token_set_ratio(signature, text, processor=default_process)
        if s > score:
            best, score = entry, s
    return best if score >= THRESHOLD else None
