"""The Data step's speaker-roles form over a chat export at 120x40 (pytest-textual-snapshot): the detection line,
every speaker with the rule that decided its role, ticked when it answers, and the buttons readable."""

from tests.snapshots.test_snapshots import SIZE, app_on
from tests.tui.helpers import opened, wait_until
from tests.tui.test_data_roles import GREETS_FIRST


def test_speaker_roles_form_at_120_columns(snap_ws, snap_compare):
    src = snap_ws.data_dir / "whatsapp_dental.txt"
    src.write_text(GREETS_FIRST, encoding="utf-8")

    async def run_before(pilot):
        from screens.data_opened import OpenedNote
        from tui.widgets.speaker_roles import SpeakerRolesScreen

        screen = await opened(pilot, pilot.app)
        screen.open_file(src)
        await wait_until(pilot, lambda: screen.query_one(OpenedNote).opened is not None)
        await wait_until(pilot, lambda: screen.report is not None)
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, SpeakerRolesScreen))
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "data"), terminal_size=SIZE, run_before=run_before)
