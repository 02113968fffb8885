"""The Train step's widgets on their own: the loss chart and the GPU panel, fed from real fixtures."""

from pathlib import Path

from textual.app import App, ComposeResult
from textual.containers import Vertical

from core.train.gpu.history import group_ticks, read_history
from core.train.metrics import MetricsPoller
from tests.tui.helpers import wait_until
from tui.widgets.gpu_panel import GpuPanel, bar, sparkline
from tui.widgets.loss_chart import ChartData, ChartRaster, LossChart, column_ranges

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GPU = FIXTURES / "gpu"
LOGS = FIXTURES / "logs"


class Host(App):
    def compose(self) -> ComposeResult:
        with Vertical():
            yield LossChart(id="chart")
            yield GpuPanel(id="gpu")


def chart_text(chart: LossChart) -> str:
    return "\n".join(chart.render_line(y).text for y in range(chart.size.height))


def metrics(folder: str):
    poller = MetricsPoller(LOGS / folder / "trainer_log.jsonl")
    poller.poll()
    return poller.metrics


async def test_chart_draws_a_resumed_run_with_lr_axis_and_resume_marker():
    app = Host()
    async with app.run_test(size=(120, 44)) as pilot:
        chart = app.query_one(LossChart)
        m = metrics("lf_resume")
        chart.set_data(loss=(m.loss.xs, m.loss.ys), smoothed=(m.loss_smooth.xs, m.loss_smooth.ys),
                       lr=(m.lr.xs, m.lr.ys), resumes=m.resumes)
        await wait_until(pilot, lambda: "resumed at step 11" in chart_text(chart))
        text = chart_text(chart)
        assert "━ loss" in text and "smoothed" in text and "learning rate" in text
        assert any("\u2800" < ch <= "\u28ff" for ch in text)  # braille dots were drawn
        assert "400" in text.splitlines()[chart.size.height - 1]  # the last step on the x axis


async def test_chart_shows_eval_loss_and_waits_before_the_first_step():
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        chart = app.query_one(LossChart)
        await pilot.pause()
        assert "waiting for the first logged step" in chart_text(chart)
        m = metrics("lf_normal")
        chart.set_data(loss=(m.loss.xs, m.loss.ys), eval_loss=(m.eval_loss.xs, m.eval_loss.ys))
        await wait_until(pilot, lambda: "eval loss" in chart_text(chart))


async def test_chart_redraws_on_its_timer_not_per_update():
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        chart = app.query_one(LossChart)
        await pilot.pause()
        before = chart.draws
        xs, ys = [], []
        for step in range(1, 201):  # 200 updates in one go, as a fast log would give
            xs.append(step)
            ys.append(3.0 / step)
            chart.set_data(loss=(xs, ys))
        assert chart.draws == before  # nothing drawn synchronously
        await wait_until(pilot, lambda: "200" in chart_text(chart))
        assert chart.draws - before <= 2
        assert chart.data.loss[0] is not xs  # copied: the caller keeps appending to its own lists


def test_min_max_buckets_keep_a_spike_visible():
    xs = list(range(100_000))
    ys = [1.0] * 100_000
    ys[54_321] = 9.0
    ranges = column_ranges(xs, ys, 0, 99_999, 200)
    spikes = [r for r in ranges if r and r[1] == 9.0]
    assert len(spikes) == 1 and all(r is not None for r in ranges)
    smooth = column_ranges(xs, ys, 0, 99_999, 200, exact=False)
    assert max(r[1] for r in smooth) == 1.0  # sampling mode is for smooth curves only


def test_raster_sizes():
    data = ChartData(loss=([1, 2, 3], [3.0, 2.0, 1.0]))
    rows = ChartRaster(data, 60, 12).draw()
    assert len(rows) == 12 and all(sum(len(t) for t, _ in row) <= 60 for row in rows)
    tiny = ChartRaster(data, 10, 3).draw()
    assert "".join(t for t, _ in tiny[0]).startswith("enlarge")


async def test_gpu_panel_mi300x_shows_hotspot_and_every_gpu():
    app = Host()
    async with app.run_test(size=(130, 44)) as pilot:
        panel = app.query_one(GpuPanel)
        ticks = group_ticks(read_history(GPU / "replay_mi300x_x8.jsonl"))
        panel.update_samples(ticks[0], reason="amdsmi library")
        await pilot.pause()
        text = panel.render_panel(126, now=ticks[0][0].ts).plain
        assert "8 × AMD Instinct MI300X" in text and "amdsmi library" in text
        assert text.count("hotspot") == 8 and "GPU7" in text and "/750 W" in text
        assert "VRAM unbalanced" not in text
        assert "pid 207590 pt_main_thread" in text


async def test_gpu_panel_mi250_cards_and_vram_imbalance_warning():
    app = Host()
    async with app.run_test(size=(130, 44)) as pilot:
        panel = app.query_one(GpuPanel)
        history = read_history(GPU / "replay_mi250x_2cards_4gcd.jsonl")
        panel.load_history(history, reason="replay")
        await pilot.pause()
        text = panel.render_panel(126, now=history[-1].ts).plain
        assert "(2 cards, 4 GCDs)" in text and "card 1" in text
        assert "VRAM unbalanced: GPU 0" in text
        assert "—/560 W" in text  # the second die reports no power
        assert len(panel.history[0]) == 20  # the sparkline history came back with the run


async def test_gpu_panel_h100_and_stale_samples():
    app = Host()
    async with app.run_test(size=(130, 44)) as pilot:
        panel = app.query_one(GpuPanel)
        tick = group_ticks(read_history(GPU / "replay_h100_x8.jsonl"))[0]
        panel.update_samples(tick)
        await pilot.pause()
        text = panel.render_panel(126, now=tick[0].ts + 60).plain
        assert "NVIDIA H100 80GB HBM3" in text and "/700 W" in text and "edge" not in text
        assert "last sample 60 s ago" in text


async def test_gpu_panel_without_gpu_says_so_plainly():
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.query_one(GpuPanel)
        panel.set_no_gpu("amdsmi library: not installed; NVML: NVML Shared Library Not Found")
        await pilot.pause()
        text = panel.render_panel(96).plain
        assert text.startswith("no GPU on this machine (CPU run)") and "NVML" in text
        assert "no GPU on this machine (CPU run)" in str(panel.render())


def test_bar_and_sparkline():
    assert bar(0.5, 10) == "▕█████     ▏"
    assert bar(None, 4) == "▕····▏" and bar(1.2, 2) == "▕██▏"
    assert sparkline([0, 50, 100, None], 10) == "▁▄█ "


def test_gpu_panel_compact_is_one_line_per_gpu():
    panel = GpuPanel(compact=True)
    panel.load_history(read_history(GPU / "replay_mi300x_x8.jsonl"))
    lines = panel.render_panel(120, now=panel.last_update).plain.splitlines()
    assert len(lines) == 1 + 8 and lines[1].startswith("GPU0 UTIL") and "hotspot" in lines[8]


def test_block_index_gives_the_same_ranges_and_follows_appends():
    import random

    from tui.widgets.loss_chart import BlockIndex

    rnd = random.Random(3)
    xs = list(range(10_000))
    ys = [rnd.random() for _ in xs]
    index = BlockIndex()
    index.update(ys[:5_000])
    index.update(ys)  # appended: the blocks are kept and extended
    assert column_ranges(xs, ys, 0, 9_999, 37, index=index) == column_ranges(xs, ys, 0, 9_999, 37)


async def test_chart_appends_new_points_and_copies_a_replaced_series():
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(LossChart)
        xs, ys = [float(i) for i in range(1000)], [1.0 + (i % 7) / 10 for i in range(1000)]
        chart.set_data(loss=(xs, ys))
        own = chart.data.loss[0]
        xs.append(1000.0)
        ys.append(9.0)
        chart.set_data(loss=(xs, ys))
        assert chart.data.loss[0] is own and chart.data.loss[1][-1] == 9.0  # extended in place
        index = chart._loss_index
        cut_x, cut_y = xs[:500] + [500.0], ys[:500] + [7.5]  # a resume replaced the steps from 500 on
        chart.set_data(loss=(cut_x, cut_y))
        assert chart.data.loss[0] is not own and len(chart.data.loss[0]) == 501
        assert chart._loss_index is not index
        await wait_until(pilot, lambda: "7.5" in chart_text(chart))
        ranges = column_ranges(*chart.data.loss, 0, 500, 40, index=chart._loss_index)
        assert max(r[1] for r in ranges if r) == 7.5
        chart.clear()
        assert chart.data.empty


def test_partial_block_index_still_gives_exact_ranges():
    from tui.widgets.loss_chart import BlockIndex

    xs = list(range(50_000))
    ys = [float(i % 101) for i in xs]
    ys[40_000] = 500.0
    index = BlockIndex()
    index.update(ys, max_blocks=100)  # only the first 6,400 points indexed so far
    assert len(index.mins) == 100
    assert column_ranges(xs, ys, 0, 49_999, 50, index=index) == column_ranges(xs, ys, 0, 49_999, 50)


async def test_chart_names_the_lowest_eval_loss_of_an_overfitting_run():
    app = Host()
    async with app.run_test(size=(140, 40)) as pilot:
        chart = app.query_one(LossChart)
        m = metrics("lf_eval_overfit")  # a held-out set on the memorising demo: lowest at step 50, then rising
        chart.set_data(loss=(m.loss.xs, m.loss.ys), eval_loss=(m.eval_loss.xs, m.eval_loss.ys))
        await wait_until(pilot, lambda: "eval loss 7.855 (lowest 6.234 at step 50)" in chart_text(chart))
        m = metrics("lf_eval_falling")  # still falling: the last is the lowest, nothing more to say
        chart.clear()
        chart.set_data(loss=(m.loss.xs, m.loss.ys), eval_loss=(m.eval_loss.xs, m.eval_loss.ys))
        await wait_until(pilot, lambda: "eval loss 6.918" in chart_text(chart))
        assert "lowest" not in chart_text(chart)
