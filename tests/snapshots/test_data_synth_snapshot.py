"""The Data step's "From documents" view at 120x40, with chunks listed and pairs to review: every field's title
readable, the output field and the question column wide enough to read (pytest-textual-snapshot)."""

from core.data.synth.dataset import Candidate, review
from core.data.synth.filters import Pair
from core.data.synth.generate import SynthProgress
from screens.data_synth import SynthOutcome
from tests.snapshots.test_snapshots import SIZE, app_on
from tests.synth_documents import write_all
from tests.tui.helpers import opened, wait_until

PAIRS = [  # (chunk index, question, answer): hand-written replies, put through the real filters
    (0, "How many days do I have to return an item?", "You can return any item within 30 days of delivery."),
    (1, "When does the refund reach my card?",
     "Refunds reach the original payment method in 3 to 5 working days after the warehouse receives the parcel."),
    (1, "When does my refund reach my card?", "In 3 to 5 working days."),
    (2, "电子发票什么时候发送？", "电子发票在订单完成后24小时内发送到您的邮箱。"),
    (2, "可以开纸质发票吗？", "可以，我们免费邮寄纸质发票。"),
]


def test_from_documents_view_at_120_columns(snap_ws, snap_compare):
    write_all(snap_ws.root / "docs")

    async def run_before(pilot):
        from textual.widgets import DataTable, Input

        screen = await opened(pilot, pilot.app)
        await pilot.press("d")
        view = screen.query_one("DataSynth")
        view.query_one("#synth-sources", Input).value = "docs/policy.md"
        await pilot.click("#synth-chunks-button")
        await wait_until(pilot, lambda: view.query_one("#synth-chunks", DataTable).row_count == 3)
        plan = view._plan(None, "docs/policy.md", snap_ws)
        candidates = [Candidate(Pair(q, a, plan.chunks[i].text), plan.chunks[i], "fake-model") for i, q, a in PAIRS]
        review(candidates)
        progress = SynthProgress(chunks_total=3, chunks_done=3, pairs=5, requests=8, prompt_tokens=2400,
                                 completion_tokens=600, elapsed_s=10.0)
        view._generated(SynthOutcome(snap_ws.data_dir / "from_docs.jsonl", plan.chunks, candidates,
                                                  progress, "fake-model"))
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "data"), terminal_size=SIZE, run_before=run_before)
