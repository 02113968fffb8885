"""How far the trainer got, read from its log: the last `N/M [` of HF Trainer's tqdm bar (core.train.root_cause's
diagnosis says "last step reached"; the other bars in a LLaMA-Factory log are not training steps)."""

from __future__ import annotations

import re

PROGRESS = re.compile(r"(?<![\d/])(\d+)/(\d+) \[")
_UNLABELLED = re.compile(r"\s*(?:\d+%\|[^|\r]*\|\s*)?")  # what precedes N/M in the trainer's bar (no label)


def last_progress(numbered: list[tuple[int, str]]) -> tuple[int, int] | None:
    """The last `N/M [` of the trainer's tqdm bar in the log, the one with most steps. Only the trainer's bar
    counts: it has no label, while the tokenizer's, the dataset converter's and the loaders' bars do
    ("Running tokenizer on dataset: 100%|...| 29/29 [": no training step ran)."""
    best: tuple[int, int] | None = None
    for _n, raw in reversed(numbered):
        for m in PROGRESS.finditer(raw):
            if not _UNLABELLED.fullmatch(raw, raw.rfind("\r", 0, m.start()) + 1, m.start()):
                continue  # a labelled bar: not the trainer's steps
            done, total = int(m.group(1)), int(m.group(2))
            if total > 1 and done <= total and (best is None or total >= best[1]):  # later segments win
                best = (done, total)
        if best is not None:
            return best
    return best
