"""GpuPanel: one compact block per GPU (nvitop-style bars and a utilization sparkline), a VRAM-balance
warning across the cards in use, and the backend with the reason it was chosen.

    GPU0 AMD Instinct MI300X               42°C hotspot   182/750 W   2102 MHz   pid 207590 pt_main_thread
      UTIL ▕██████████▏100%   VRAM ▕▍         ▏  7.3/192.0 GiB   ▁▂▅▇██▇█

It receives GpuSamples from core (a live backend, a recorder's gpu.jsonl, or a replay); it parses
nothing. Temperatures say which sensor they are: MI300-family GPUs have no edge sensor, so theirs is
the hotspot (junction). An MI250's two GCDs are marked as one card. With no GPU the panel says so
plainly ("no GPU on this machine (CPU run)") and shows why.
"""

from __future__ import annotations

import time
from collections import deque

from textual.content import Content
from textual.widgets import Static

from core.train.gpu.balance import vram_imbalance
from core.train.gpu.sample import GpuSample
from core.i18n import _
from tui.widgets.terms import with_terms

HISTORY = 120  # samples of utilization kept per GPU for the sparkline
SPARK = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"
GIB = 1024 ** 3
# (warning, error) thresholds per sensor, °C: hotspot throttles near 100-110 on MI300X, edge lower
TEMP_LIMITS = {"edge": (80, 90), "hotspot": (90, 100), "mem": (85, 95), "gpu": (80, 87)}
STALE_AFTER = 10.0  # seconds without a new sample before the panel says the numbers are old


def sensor_label(sensor: str) -> str:
    """The temperature sensor's name as shown after the degrees ("" for NVIDIA's single sensor)."""
    known = {"edge": _("edge"), "hotspot": _("hotspot"), "mem": _("mem"), "gpu": ""}
    return known.get(sensor, sensor)


def coarse_age(seconds: float) -> str:
    """90 -> "90 s", 600 -> "10 min", 7200 -> "2 h", 200000 -> "2 d"."""
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def bar(fraction: float | None, width: int) -> str:
    """▕███▍      ▏ with eighth-block precision."""
    if fraction is None:
        return "▕" + "·" * width + "▏"
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    inner = "█" * full + (EIGHTHS[part] if part else "")
    return "▕" + inner.ljust(width) + "▏"


def sparkline(values, width: int) -> str:
    tail = list(values)[-width:]
    return "".join(SPARK[min(7, max(0, int(v / 100 * 7.999)))] if v is not None else " " for v in tail)


class GpuPanel(Static):
    DEFAULT_CSS = """
    GpuPanel {
        height: auto;
        padding: 0 1;
        background: $panel;
    }
    """

    def __init__(self, *, compact: bool = False, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        """`compact`: one line per GPU (bars, temperature, power, sparkline), for 8 GPUs on a short terminal."""
        super().__init__("", name=name, id=id, classes=classes)
        self.compact = compact
        self.samples: list[GpuSample] = []
        self.history: dict[int, deque] = {}
        self.reason: str = ""
        self.no_gpu = False
        self.last_update: float | None = None
        self.live = True  # samples are expected to keep coming (False: the history of a run that ended)

    # ------------------------------------------------------------------ input
    def update_samples(self, samples: list[GpuSample], reason: str | None = None) -> None:
        """One tick of samples (from a backend, a recorder's gpu.jsonl, or a replay)."""
        if reason is not None:
            self.reason = reason
        if not samples:
            return
        self.no_gpu = False
        self.samples = sorted(samples, key=lambda s: s.index)
        for s in self.samples:
            self.history.setdefault(s.index, deque(maxlen=HISTORY)).append(s.util_pct)
        self.last_update = max(s.ts for s in samples)
        self.redraw()

    def load_history(self, samples: list[GpuSample], reason: str | None = None) -> None:
        """The recent past of a re-attached run (read_history): fills the sparklines, shows the last tick."""
        from core.train.gpu.history import group_ticks

        ticks = group_ticks(samples)
        for tick in ticks[:-1]:
            for s in tick:
                self.history.setdefault(s.index, deque(maxlen=HISTORY)).append(s.util_pct)
        if ticks:
            self.update_samples(ticks[-1], reason)
        elif reason is not None:
            self.reason = reason
            self.redraw()

    def set_no_gpu(self, reason: str = "") -> None:
        self.no_gpu, self.reason, self.samples = True, reason, []
        self.redraw()

    # ------------------------------------------------------------------ drawing
    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        if self.is_mounted:
            self.update(self.render_panel(self.content_size.width or 100))

    def render_panel(self, width: int, now: float | None = None) -> Content:
        if self.no_gpu or not self.samples:
            title = _("no GPU on this machine (CPU run)") if self.no_gpu else (
                _("waiting for GPU samples") if self.live else _("no GPU samples were recorded for this run"))
            lines = [Content.styled(title, "bold $text-muted" if self.no_gpu else "$text-muted")]
            if self.reason:
                lines.append(with_terms(self.reason[: width * 3]).stylize_before("$text-muted"))  # `terms` styled
            return Content("\n").join(lines)
        lines = [self._header(width, now)]
        imbalance = vram_imbalance(self.samples)
        if imbalance is not None:
            lines.append(Content.styled("⚠ " + imbalance.message, "bold $warning"))
        for s in self.samples:
            lines += self._gpu_lines(s, width)
        return Content("\n").join(lines)

    def _header(self, width: int, now: float | None) -> Content:
        names = sorted({s.name for s in self.samples})
        what = f"{len(self.samples)} × {names[0]}" if len(names) == 1 else _("{n} GPUs", n=len(self.samples))
        cards = {s.card for s in self.samples if s.card is not None}
        if cards:
            what += " " + _("({cards} cards, {n} GCDs)", cards=len(cards), n=len(self.samples))
        parts = [Content.styled(what, "bold")]
        if self.reason:
            parts.append(Content.styled(f"  · {self.reason}"[: max(0, width - len(what) - 2)], "$text-muted"))
        age = (now if now is not None else time.time()) - (self.last_update or 0)
        if self.live and self.last_update is not None and age > STALE_AFTER:
            parts.append(Content.styled("  " + _("last sample {age} ago", age=coarse_age(age)), "$warning"))
        return Content("").join(parts)

    def _gpu_lines(self, s: GpuSample, width: int) -> list[Content]:
        vitals: list[Content] = []  # temperature and power: in both layouts
        if s.temp_c is not None:
            warn, error = TEMP_LIMITS.get(s.temp_sensor or "", (85, 95))
            style = "bold $error" if s.temp_c >= error else "$warning" if s.temp_c >= warn else ""
            label = sensor_label(s.temp_sensor or "")
            vitals.append(Content.styled(f"  {s.temp_c:.0f}°C", style))
            if label:
                vitals.append(Content.styled(f" {label}", "$text-muted"))
        if s.power_w is not None:
            cap = f"/{s.power_cap_w:.0f}" if s.power_cap_w else ""
            vitals.append(Content.styled(f"  {s.power_w:.0f}{cap} W", ""))
        elif s.power_cap_w:
            vitals.append(Content.styled(f"  —/{s.power_cap_w:.0f} W", "$text-muted"))
        bars = self._bars(s, width)
        if self.compact:
            parts = [Content.styled(f"GPU{s.index:<2}", "bold"), *bars, *vitals]
            return [self._with_sparkline(s, parts, width)]
        head = [Content.styled(f"GPU{s.index} ", "bold"), Content.styled(s.name[:28].ljust(28), "")]
        if s.card is not None:
            head.append(Content.styled(" " + _("card {card}", card=s.card), "$text-muted"))
        head += vitals
        optional: list[Content] = []  # dropped from the end when the line would not fit
        if s.sclk_mhz:
            optional.append(Content.styled(f"  {s.sclk_mhz} MHz", "$text-muted"))
        if s.processes:
            top = max(s.processes, key=lambda p: p.vram_bytes or 0)
            more = f" +{len(s.processes) - 1}" if len(s.processes) > 1 else ""
            name = "" if top.name in ("", "N/A") else f" {top.name.rsplit('/', 1)[-1][:18]}"
            optional.append(Content.styled(f"  pid {top.pid}{name}{more}", "$text-muted"))
        used = sum(len(c.plain) for c in head)
        for part in optional:
            if used + len(part.plain) > width:
                break
            head.append(part)
            used += len(part.plain)
        return [Content("").join(head), self._with_sparkline(s, [Content.styled("  ", ""), *bars], width)]

    @staticmethod
    def _bars(s: GpuSample, width: int) -> list[Content]:
        util, frac = s.util_pct, s.vram_fraction
        vram_style = "$primary"
        if frac is not None and frac > 0.9:
            vram_style = "$error"
        elif frac is not None and frac > 0.75:
            vram_style = "$warning"
        bar_w = 10 if width >= 90 else 6
        vram_text = "—"
        if s.vram_used is not None and s.vram_total:
            vram_text = f"{s.vram_used / GIB:5.1f}/{s.vram_total / GIB:.1f} GiB"
        return [Content.styled("UTIL ", "$text-muted"),
                Content.styled(bar(None if util is None else util / 100, bar_w), "$success"),
                Content.styled(f"{util:4.0f}%" if util is not None else "   —", ""),
                Content.styled("   VRAM ", "$text-muted"), Content.styled(bar(frac, bar_w), vram_style),
                Content.styled(f" {vram_text}", "")]

    def _with_sparkline(self, s: GpuSample, parts: list[Content], width: int) -> Content:
        used = sum(len(c.plain) for c in parts)
        spark_w = width - used - 3
        if spark_w >= 8:
            parts.append(Content.styled("   " + sparkline(self.history.get(s.index, ()), spark_w), "$accent"))
        return Content("").join(parts)
