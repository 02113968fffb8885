"""The trainer's own output: loss dicts on stdout, tqdm progress on stderr.

stdout (transformers 5.x prints the values as strings; LLaMA-Factory's webui mode logs numbers
after a `>> ` prefix, also in running_log.txt):

    {'loss': '8.02', 'grad_norm': '0.5526', 'learning_rate': '0', 'epoch': '0.04'}
    {'eval_loss': '7.51', 'eval_runtime': '0.0208', ..., 'epoch': '0.4167'}
    {'train_runtime': '0.7381', 'train_samples_per_second': '54.19', ..., 'train_loss': '7.513', ...}
    [INFO|2026-11-30 06:48:52] logging.py:144 >> {'loss': 7.6270, 'learning_rate': 1.0000e-03, 'epoch': 0.06}

stderr: tqdm bars separated by `\\r` (`  5%|▌         | 1/20 [00:01<00:19,  1.02s/it]`), the
evaluation bar nested under the training one (followed by `ESC[A`), other bars with a description
(`Running tokenizer on dataset: 100%|...| 2/2 [00:00<00:00, 100.00 examples/s]`), and the HF
Trainer's banner (`Total optimization steps = 20`, `Resuming training from checkpoint with epoch 0
and global step 10`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from core.files.tail import FileTail, LineTail

_DICT = re.compile(r"(\{'[A-Za-z_/]+': .*\})\s*$")
_TQDM = re.compile(
    r"(?P<desc>[^\r\n|]*?)\s*(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*"
    r"\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:]+|\?),\s*(?P<rate>[\d.]+|\?)\s*(?P<unit>[A-Za-z/]+)\]")
_TOTAL_STEPS = re.compile(r"Total optimization steps = ([\d,]+)")
_RESUMED = re.compile(r"Resuming training from checkpoint with epoch \d+ and global step (\d+)")


@dataclass(frozen=True)
class LossDict:
    kind: str  # "train" (loss), "eval" (eval_loss), "summary" (train_runtime), "other"
    values: dict[str, float]


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # also "nan", "inf", "1e+04"
        except ValueError:
            return None
    return None


def parse_loss_dict(line: str) -> LossDict | None:
    match = _DICT.search(line)
    if not match:
        return None
    try:
        raw = ast.literal_eval(match.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    values = {k: v for k, v in ((k, _number(v)) for k, v in raw.items() if isinstance(k, str)) if v is not None}
    if "loss" in values:
        kind = "train"
    elif "eval_loss" in values:
        kind = "eval"
    elif "train_runtime" in values:
        kind = "summary"
    else:
        kind = "other"
    return LossDict(kind, values)


@dataclass(frozen=True)
class TqdmProgress:
    n: int
    total: int
    elapsed_s: float
    remaining_s: float | None
    rate: float | None  # iterations per second (s/it inverted)
    nested: bool  # a bar drawn under another one (tqdm position > 0: the evaluation bar)
    desc: str = ""


def parse_clock(text: str) -> float | None:
    """tqdm's '01:02' / '1:02:03' as seconds."""
    parts = text.split(":")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        return None
    seconds = 0
    for number in numbers:
        seconds = seconds * 60 + number
    return float(seconds)


def parse_tqdm(text: str) -> list[TqdmProgress]:
    """Every tqdm bar state in a piece of stderr, in order."""
    out = []
    for match in _TQDM.finditer(text):
        unit = match.group("unit")
        rate_text = match.group("rate")
        rate = None if rate_text == "?" else float(rate_text)
        if rate is not None and unit.startswith("s/"):
            rate = 1 / rate if rate > 0 else None
        elif unit.startswith("?"):
            rate = None
        rest = text[match.end(): match.end() + 3]
        out.append(TqdmProgress(
            n=int(match.group("n")), total=int(match.group("total")),
            elapsed_s=parse_clock(match.group("elapsed")) or 0.0,
            remaining_s=None if match.group("remaining") == "?" else parse_clock(match.group("remaining")),
            rate=rate, nested=rest.startswith("\x1b[A"), desc=match.group("desc").strip(),
        ))
    return out


class StdoutTail:
    """Loss dicts appended to the trainer's stdout.log (or LLaMA-Factory's running_log.txt)."""

    def __init__(self, path: str | Path) -> None:
        self._lines = LineTail(Path(path))

    @property
    def reset(self) -> bool:
        return self._lines.reset

    def poll(self) -> list[LossDict]:
        out = []
        for raw in self._lines.read_lines():
            if b"{'" not in raw:
                continue
            parsed = parse_loss_dict(raw.decode("utf-8", "replace"))
            if parsed is not None:
                out.append(parsed)
        return out


class StderrTail:
    """The training bar's progress from stderr.log (bars with a description or nested ones are skipped)."""

    KEEP = 4096  # bytes of an unfinished fragment kept for the next poll

    def __init__(self, path: str | Path) -> None:
        self._tail = FileTail(Path(path))
        self._rest = ""
        self.total_steps: int | None = None  # "Total optimization steps = N"
        self.resumed_from: int | None = None  # "... global step N"

    def poll(self) -> list[TqdmProgress]:
        data = self._tail.read_new()
        if self._tail.reset:
            self._rest = ""
        if not data:
            return []
        text = self._rest + data.decode("utf-8", "replace")
        cut = max(text.rfind("\r"), text.rfind("\n"))
        done, self._rest = (text[: cut + 1], text[cut + 1:]) if cut >= 0 else ("", text)
        self._rest = self._rest[-self.KEEP:]
        for match in _TOTAL_STEPS.finditer(done):
            self.total_steps = int(match.group(1).replace(",", ""))
        for match in _RESUMED.finditer(done):
            self.resumed_from = int(match.group(1))
        bars = [b for b in parse_tqdm(done) if not b.nested and not b.desc]
        # an unterminated last fragment is the bar as it stands now: report it without consuming it
        pending = [b for b in parse_tqdm(self._rest) if not b.nested and not b.desc]
        return bars + pending[-1:]

