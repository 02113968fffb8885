"""The one table of status marks in the wizard: every widget that marks something good, doubtful, bad,
not applicable or still to come uses the same mark and theme colour for it, whatever its vocabulary
(a step is `done`, a doctor check `ok`, a finding an `error`, a merge check a `warning`, ...)."""

from __future__ import annotations

# kind -> (mark, theme variable without "$")
KINDS: dict[str, tuple[str, str]] = {
    "good": ("✓", "success"),
    "doubt": ("!", "warning"),
    "bad": ("✗", "error"),
    "note": ("·", "text-muted"),
    "skip": ("–", "text-muted"),
    "pending": ("…", "text-muted"),
    "running": ("⟳", "accent"),
}

# every status word used in the wizard -> its kind
STATUS_KIND: dict[str, str] = {
    "ok": "good", "done": "good", "passed": "good", "fits": "good",
    "warn": "doubt", "warning": "doubt", "attention": "doubt", "tight": "doubt",
    "fail": "bad", "error": "bad", "failed": "bad", "does_not_fit": "bad",
    "info": "note", "not_started": "note",
    "skip": "skip",
    "pending": "pending", "unknown": "pending",
    "running": "running",
}


def _kind(status: str) -> tuple[str, str]:
    return KINDS[STATUS_KIND.get(status, "note")]


def mark(status: str) -> str:
    """The mark of a status: ✓ ! ✗ · – … ⟳"""
    return _kind(status)[0]


def colour(status: str) -> str:
    """The theme variable of a status, without "$" (for CSS variables lookups): success, warning, ..."""
    return _kind(status)[1]


def style(status: str, *, bold: bool = False) -> str:
    """A Content style for the status: "$success", or "bold $error"."""
    return f"bold ${colour(status)}" if bold else f"${colour(status)}"
