"""The loss chart's drawing, without Textual: series reduced to pixel columns, drawn in braille cells.

Each series is reduced to the chart's pixel columns first (min and max of every column's bucket, found
with bisect and C-speed min/max on slices, or through a BlockIndex of per-block minima and maxima kept
across redraws, so a spike stays visible), then drawn as vertical runs joined column to column. The
result is rows of (text, layer) runs; tui/widgets/loss_chart.py turns them into styled strips, and
bench/monitor.py times them.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from typing import Sequence

from rich.cells import cell_len

from core.i18n import _

# bits of a braille cell: (x in 0..1, y in 0..3)
_LEFT = (0x01, 0x02, 0x04, 0x40)
_RIGHT = (0x08, 0x10, 0x20, 0x80)
_RUN = [[0] * 16, [0] * 16]  # [x][y0 * 4 + y1] -> mask of the dots y0..y1 in one cell column
for _x, _bits in ((0, _LEFT), (1, _RIGHT)):
    for _a in range(4):
        for _b in range(_a, 4):
            _RUN[_x][_a * 4 + _b] = sum(_bits[_a:_b + 1])
LAYERS = ("resume", "lr", "raw", "eval", "smooth")  # drawing priority, lowest first
_OWNER_NAMES = ("axis", *LAYERS)
_BRAILLE = {0: " ", **{b: chr(0x2800 + b) for b in range(1, 256)}}
_NONZERO = re.compile(rb"[^\x00]+")
_RUNS = re.compile(r"(.)\1*", re.DOTALL)
Points = tuple[Sequence[float], Sequence[float]]


class BlockIndex:
    """Min and max of every block of SIZE values of a series that grows at its end, kept across redraws:
    a column's range then costs its few blocks plus the edges instead of all its points."""

    SIZE = 64

    def __init__(self) -> None:
        self.ys: Sequence[float] = ()
        self.mins: list[float] = []
        self.maxs: list[float] = []

    def update(self, ys: Sequence[float], max_blocks: int | None = None) -> None:
        """Index the blocks completed since the last update, at most `max_blocks` of them (a cold 100k-point
        series is indexed over a few redraws; the part not yet indexed is read directly meanwhile). `ys`
        must extend what was indexed before (LossChart starts a new index when a series is replaced)."""
        done = len(self.mins) * self.SIZE
        if len(ys) < done:  # shorter than what we indexed: it cannot be the same series
            self.mins, self.maxs, done = [], [], 0
        stop = len(ys) - self.SIZE + 1
        if max_blocks is not None:
            stop = min(stop, done + max_blocks * self.SIZE)
        for start in range(done, stop, self.SIZE):
            chunk = ys[start:start + self.SIZE]
            self.mins.append(min(chunk))
            self.maxs.append(max(chunk))
        self.ys = ys

    def minmax(self, a: int, b: int) -> tuple[float, float]:
        """min and max of ys[a:b] (b > a)."""
        size, ys = self.SIZE, self.ys
        first, last = -(-a // size), min(b // size, len(self.mins))
        if first >= last:
            chunk = ys[a:b]
            return min(chunk), max(chunk)
        lo, hi = min(self.mins[first:last]), max(self.maxs[first:last])
        for edge in (ys[a:first * size], ys[last * size:b]):
            if edge:
                lo, hi = min(lo, min(edge)), max(hi, max(edge))
        return lo, hi


def column_ranges(xs: Sequence[float], ys: Sequence[float], x0: float, x1: float, columns: int, exact: bool = True,
                  index: BlockIndex | None = None) -> list[tuple[float, float, float, float] | None]:
    """Per pixel column: (min, max, first, last) of the points falling in it, or None.

    `exact=False` reads only each column's first and last point: enough for smooth curves (the EMA, the
    learning rate) and O(columns) instead of O(points). `index` (built over these ys) speeds up exact mode.
    """
    out: list[tuple[float, float, float, float] | None] = [None] * columns
    if not xs or columns <= 0:
        return out
    span = (x1 - x0) or 1.0
    lo_index = bisect.bisect_left(xs, x0)
    for c in range(columns):
        edge = x0 + span * (c + 1) / columns
        hi_index = bisect.bisect_right(xs, edge, lo_index) if c < columns - 1 else len(xs)
        if hi_index > lo_index:
            first, last = ys[lo_index], ys[hi_index - 1]
            if exact and index is not None and hi_index - lo_index > 2 * BlockIndex.SIZE:
                out[c] = (*index.minmax(lo_index, hi_index), first, last)
            elif exact and hi_index - lo_index > 2:
                chunk = ys[lo_index:hi_index]
                out[c] = (min(chunk), max(chunk), first, last)
            else:
                out[c] = (min(first, last), max(first, last), first, last)
        lo_index = hi_index
    return out


def _bounds(ranges) -> tuple[float, float] | None:
    present = [r for r in ranges if r is not None]
    if not present:
        return None
    return min(r[0] for r in present), max(r[1] for r in present)


@dataclass
class ChartData:
    loss: Points = ((), ())
    smoothed: Points = ((), ())
    eval_loss: Points = ((), ())
    lr: Points = ((), ())
    resumes: tuple[float, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.loss[0] or self.eval_loss[0])


@dataclass
class ChartRaster:
    """The chart as rows of (text, layer) runs; `layer` names a component style ("axis", "smooth", ...)."""

    data: ChartData
    width: int
    height: int
    loss_index: BlockIndex | None = None  # over data.loss's values, when the caller keeps one
    empty_text: str | None = None  # what an empty chart says (default: waiting for the first logged step)
    rows: list[list[tuple[str, str]]] = field(default_factory=list)

    def draw(self) -> list[list[tuple[str, str]]]:
        w, h = self.width, self.height
        if w < 24 or h < 5:
            self.rows = [[(_("enlarge the chart")[:w], "axis")]] + [[("", "axis")] for _ in range(max(0, h - 1))]
            return self.rows
        d = self.data
        left, right = 8, 9 if d.lr[0] else 0
        pw, ph = w - left - right, h - 2  # plot cells
        px, py = pw * 2, ph * 4  # plot pixels
        xs_all = [s[0] for s in (d.loss, d.eval_loss, d.lr) if s[0]]
        x0 = min(s[0] for s in xs_all) if xs_all else 0.0
        x1 = max(s[-1] for s in xs_all) if xs_all else 1.0
        ranges = {
            "raw": column_ranges(*d.loss, x0, x1, px, index=self.loss_index) if d.loss[0] else None,
            "smooth": column_ranges(*d.smoothed, x0, x1, px, exact=False) if d.smoothed[0] else None,
            "eval": column_ranges(*d.eval_loss, x0, x1, px) if d.eval_loss[0] else None,
            "lr": column_ranges(*d.lr, x0, x1, px, exact=False) if d.lr[0] else None,
        }
        bounds = [b for b in (_bounds(ranges[k]) for k in ("raw", "smooth", "eval") if ranges[k]) if b]
        lo, hi = _padded(min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else (0.0, 1.0)
        cells = {name: bytearray(pw * ph) for name in LAYERS}
        for name in ("raw", "smooth", "eval"):
            if ranges[name]:
                self._plot(cells[name], ranges[name], lo, hi, pw, ph, py)
        lr_lo = lr_hi = 0.0
        if ranges["lr"] and _bounds(ranges["lr"]):
            lr_lo, lr_hi = _padded(*_bounds(ranges["lr"]))
            self._plot(cells["lr"], ranges["lr"], lr_lo, lr_hi, pw, ph, py)
        for step in d.resumes:
            if x0 <= step <= x1:
                col = min(px - 1, int((step - x0) / ((x1 - x0) or 1.0) * px))
                for y in range(0, py, 2):
                    cells["resume"][(y // 4) * pw + col // 2] |= (_LEFT if col % 2 == 0 else _RIGHT)[y % 4]
        rows = [self._legend(w)]
        body = self._compose(cells, pw, ph)
        for r in range(ph):
            label = _fmt(hi - (hi - lo) * r / max(1, ph - 1)) if r in (0, ph // 2, ph - 1) else ""
            row = [(label.rjust(left - 1)[: left - 1] + "┤", "axis")]
            row += body[r]
            if right:
                lr_label = _fmt(lr_hi - (lr_hi - lr_lo) * r / max(1, ph - 1)) if r in (0, ph - 1) else ""
                row.append(("├" + lr_label[: right - 1], "lr"))
            rows.append(row)
        rows.append([(_x_axis(x0, x1, left, pw), "axis")])
        self.rows = rows
        return rows

    @staticmethod
    def _plot(cells: bytearray, ranges, lo: float, hi: float, pw: int, ph: int, py: int) -> None:
        scale = (py - 1) / ((hi - lo) or 1.0)
        bottom_px = py - 1

        def ypix(v: float) -> int:
            p = int((hi - v) * scale + 0.5)
            return 0 if p < 0 else bottom_px if p > bottom_px else p

        prev_c, prev_v = -1, 0.0
        for c, rng in enumerate(ranges):
            if rng is None:
                continue
            vmin, vmax, first, last = rng
            top, bottom = ypix(vmax), ypix(vmin)
            if prev_c >= 0:
                if c - prev_c > 1:  # a gap: interpolate the line across it
                    for g in range(prev_c + 1, c):
                        y = ypix(prev_v + (first - prev_v) * (g - prev_c) / (c - prev_c))
                        _vrun(cells, g, y, y, pw)
                joint = ypix(prev_v)  # join with the previous column
                if joint < top:
                    top = joint
                elif joint > bottom:
                    bottom = joint
            _vrun(cells, c, top, bottom, pw)
            prev_c, prev_v = c, last

    @staticmethod
    def _compose(cells: dict[str, bytearray], pw: int, ph: int) -> list[list[tuple[str, str]]]:
        """Rows of (braille text, owning layer) runs; the work is done by bytes operations, not per cell."""
        n = pw * ph
        combined = 0
        owner = bytearray(n)  # index into LAYERS + 1; 0 = nothing drawn
        for k, name in enumerate(LAYERS, 1):
            layer = cells[name]
            combined |= int.from_bytes(layer, "big")
            for run in _NONZERO.finditer(layer):
                owner[run.start():run.end()] = bytes((k,)) * (run.end() - run.start())
        dots = combined.to_bytes(n, "big").decode("latin-1").translate(_BRAILLE)
        owners = owner.decode("latin-1")
        rows = []
        for r in range(ph):
            a = r * pw
            text, own = dots[a:a + pw], owners[a:a + pw]
            rows.append([(text[m.start():m.end()], _OWNER_NAMES[ord(m.group()[0])]) for m in _RUNS.finditer(own)])
        return rows

    def _legend(self, w: int) -> list[tuple[str, str]]:
        """The legend in `w` cells: each series' entry in full when all fit, else in short (no "lowest at"
        detail, no "right axis"), else the entries that fit by rank: loss, eval loss, smoothed, lr, resumes."""
        d = self.data
        if d.empty:
            return [(self.empty_text or _("waiting for the first logged step"), "axis")]
        entries: list[tuple[int, str, str, str]] = []  # (rank, full, short, layer)
        if d.loss[1]:
            text = f"━ {_('loss')} {_fmt(d.loss[1][-1])}  "
            entries.append((0, text, text, "raw"))
        if d.smoothed[1]:
            text = f"━ {_('smoothed')} {_fmt(d.smoothed[1][-1])}  "
            entries.append((2, text, text, "smooth"))
        if d.eval_loss[1]:
            short = f"━ {_('eval loss')} {_fmt(d.eval_loss[1][-1])}"
            entries.append((1, f"{short}{_lowest(d.eval_loss)}  ", short + "  ", "eval"))
        if d.lr[1]:
            short = f"━ {_('lr')} {_fmt(d.lr[1][-1])}"
            entries.append((3, f"━ {_('learning rate')} {_fmt(d.lr[1][-1])} ({_('right axis')})  ", short + "  ", "lr"))
        if d.resumes:
            text = f"┊ {_('resumed at step {steps}', steps=', '.join(_step(s) for s in d.resumes))}"
            entries.append((4, text, text, "resume"))
        for form in (1, 2):
            parts = [(e[form], e[3]) for e in entries]
            if sum(cell_len(t) for t, _layer in parts) <= w:
                return parts
        kept, used = set(), 0
        for rank, _full, short, _layer in sorted(entries):
            if used + cell_len(short) <= w:
                kept.add(rank)
                used += cell_len(short)
        return [(short, layer) for rank, _full, short, layer in entries if rank in kept]


def _lowest(points: Points) -> str:
    """" (lowest 1.23 at step 400)" when the eval loss has been lower than it is now (the step to stop at)."""
    xs, ys = points
    n = min(len(xs), len(ys))
    if n < 2:
        return ""
    at = min(range(n), key=ys.__getitem__)
    if ys[at] >= ys[n - 1]:
        return ""
    return " (" + _("lowest {value} at step {step}", value=_fmt(ys[at]), step=_step(xs[at])) + ")"


def _vrun(cells: bytearray, col: int, top: int, bottom: int, pw: int) -> None:
    """Set the dots of pixel column `col` from pixel row top to bottom."""
    masks = _RUN[col & 1]
    cx = col >> 1
    first, last = top >> 2, bottom >> 2
    if first == last:
        cells[first * pw + cx] |= masks[(top & 3) * 4 + (bottom & 3)]
        return
    cells[first * pw + cx] |= masks[(top & 3) * 4 + 3]
    full = masks[3]
    for cell_row in range(first + 1, last):
        cells[cell_row * pw + cx] |= full
    cells[last * pw + cx] |= masks[bottom & 3]


def _padded(lo: float, hi: float) -> tuple[float, float]:
    """5% room above and below; never below 0 for data that is not negative (loss, learning rate)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0, 1.0
    pad = (hi - lo) * 0.05 if hi != lo else (abs(hi) * 0.05 or 1.0)
    return (lo - pad if lo - pad >= 0 or lo < 0 else 0.0), hi + pad


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.4g}"


def _step(x: float) -> str:
    """A step for an axis: 950, 12.5k, 100k."""
    if abs(x) >= 10_000:
        return f"{x / 1000:.4g}k"
    return f"{x:.0f}" if float(x).is_integer() or abs(x) >= 100 else f"{x:.3g}"


def _x_axis(x0: float, x1: float, left: int, pw: int) -> str:
    line = [" "] * (left + pw)
    marks = [(left, _step(x0))]
    if pw > 30:
        middle = (x0 + x1) / 2
        mid = _step(round(middle) if x1 - x0 > 10 else middle)
        marks.append((left + pw // 2 - len(mid) // 2, mid))
    end = _step(x1)
    marks.append((left + pw - len(end), end))
    for pos, text in marks:
        for i, ch in enumerate(text):
            if 0 <= pos + i < len(line):
                line[pos + i] = ch
    label = _("step")
    if left > len(label):
        line[0:len(label)] = list(label)
    return "".join(line)
