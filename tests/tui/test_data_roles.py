"""The Data step with business data as it comes: a chat export says what was detected and its speakers' roles
are corrected in a form, giving exactly the rows the CLI's --agent/--customer give; a workbook opens from the tree
and shows its rows converted, as `devtune data convert` writes them."""

import json
import shutil
from pathlib import Path

from textual.widgets import Button, DataTable, SelectionList, Static

from core.data.convert import convert_file
from screens.data import DataScreen
from screens.data_opened import OpenedNote
from tests.tui.helpers import wait_until
from tests.tui.test_data_screen import open_in_tree
from tui.app import DevtuneApp
from tui.widgets.data_actions import DataActions
from tui.widgets.speaker_roles import SpeakerRolesScreen

ROOT = Path(__file__).resolve().parents[2]
SHEETS = ROOT / "tests" / "fixtures" / "data" / "spreadsheets"
# the business greets first, under a name with no agent-like word: detection takes it for the customer
GREETS_FIRST = """[12/03/2024, 10:15:22] Harbor Dental: Hello! Thanks for contacting Harbor Dental.
[12/03/2024, 10:16:01] Lena Park: Can I move my appointment to Friday?
[12/03/2024, 10:17:30] Harbor Dental: Yes, Friday at 3 pm is free. Shall I book it?
[12/03/2024, 10:18:02] Lena Park: Yes please
[12/03/2024, 10:18:40] Harbor Dental: Done, see you on Friday.
"""


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


def preview_rows(screen) -> list[dict]:
    """The convert preview's rows as the table shows them (instruction, output)."""
    table = screen.query_one("#actions-preview", DataTable)
    keys = [str(c.key.value) for c in table.columns.values()]
    return [dict(zip(keys, table.get_row_at(i))) for i in range(table.row_count)]


def cli_rows(src: Path, tmp: Path, **roles) -> list[dict]:
    out = tmp / "cli.jsonl"
    report = convert_file(src, out, force=True, **roles)
    assert report.rows_out
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


async def test_a_chat_exports_roles_are_corrected_in_the_form_as_the_cli_flags_do(workspace, tmp_path):
    src = workspace.data_dir / "whatsapp_dental.txt"
    src.write_text(GREETS_FIRST, encoding="utf-8")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, src)
        note = screen.query_one(OpenedNote)
        await wait_until(pilot, lambda: note.opened is not None)
        said = text_of(screen, "#data-detected")
        assert "chat export" in said and "1 agent (Lena Park)" in said and "1 customer" in said
        assert screen.query_one("#data-roles", Button).display

        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, SpeakerRolesScreen))
        form = app.screen.query_one(SelectionList)
        assert sorted(form.selected) == ["Lena Park"]  # what detection decided, ticked = answers
        form.deselect("Lena Park")
        form.select("Harbor Dental")
        await pilot.click("#roles-ok")
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen))
        assert screen.roles == (("Harbor Dental",), ("Lena Park",))

        result = lambda: text_of(screen, "#actions-result")  # noqa: E731
        await wait_until(pilot, lambda: "Preview" in result() and "1 agent (Harbor Dental)" in result())
        expected = cli_rows(src, tmp_path, agents=("Harbor Dental",), customers=("Lena Park",))
        shown = preview_rows(screen)
        assert [(r["instruction"], r["output"]) for r in shown] == [(r["instruction"], r["output"]) for r in expected]
        assert expected[0]["output"] == "Done, see you on Friday."
        assert cli_rows(src, tmp_path) != expected  # the correction changed the rows
        await wait_until(pilot, lambda: "1 agent (Harbor Dental)" in text_of(screen, "#data-detected"))

        await pilot.click("#convert-write")  # the write uses the same roles
        out = workspace.root / screen.query_one(DataActions).query_one("#convert-output").value
        await wait_until(pilot, lambda: out.is_file())
        assert [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] == expected


async def test_roles_on_a_file_that_is_no_chat_export_say_so(workspace):
    shutil.copy(ROOT / "data" / "support_messy.jsonl", workspace.data_dir / "support_messy.jsonl")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, workspace.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        assert not screen.query_one(OpenedNote).display
        await pilot.press("a")
        await pilot.pause()
        assert not isinstance(app.screen, SpeakerRolesScreen)
        assert any("no chat export" in str(n.message) for n in app._notifications)


async def test_a_workbook_opens_from_the_tree_and_shows_its_rows_converted(workspace, tmp_path):
    src = workspace.data_dir / "faq.ods"
    shutil.copy(SHEETS / "faq.ods", src)
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, src)  # the tree lists it
        await wait_until(pilot, lambda: "Preview" in text_of(screen, "#actions-result"))
        assert "workbook" in text_of(screen, "#data-detected")
        expected = cli_rows(src, tmp_path)
        shown = preview_rows(screen)
        assert [(r["instruction"], r["output"]) for r in shown if not r.get("rejected")] == [
            (r["instruction"], r["output"]) for r in expected]
