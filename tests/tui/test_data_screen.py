"""The Data step in the real app: pick a file in the tree, rows and the rendered prompt, findings that
jump to their row, fix / register with a preview first (and a confirm for --yes), statistics, a big
file paged through its index, and a worker error shown instead of a crash."""

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import Button, Checkbox, Input, Static, TabbedContent

from screens.data import DataScreen
from tests.tui.helpers import stepper_text, wait_until
from tui.app import DevtuneApp
from tui.widgets.data_actions import DataActions
from tui.widgets.data_file_tree import DataFileTree
from tui.widgets.data_findings import DataFindings
from tui.widgets.row_pager import RowPager

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"


@pytest.fixture
def ws(workspace):
    for p in DATA.iterdir():
        shutil.copy(p, workspace.data_dir / p.name)
    return workspace


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def open_in_tree(pilot, screen, path: Path) -> None:
    """Expand the folders down to `path` in the file tree and choose it, as a person would."""
    tree = screen.query_one(DataFileTree)
    tree.focus()
    node = tree.root
    for part in path.relative_to(tree.path).parts:
        await wait_until(pilot, lambda: any(Path(c.data.path).name == part for c in node.children))
        node = next(c for c in node.children if Path(c.data.path).name == part)
        tree.select_node(node)
        await pilot.press("enter")
    await wait_until(pilot, lambda: screen.path == path)


async def test_pick_lint_jump_render(ws):
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, ws.data_dir / "support_messy.jsonl")
        pager = screen.query_one(RowPager)
        await wait_until(pilot, lambda: pager.row_count > 0)
        assert pager.rows_now[0].line == 1 and pager.rows_now[3].error == "blank line"
        assert "utf-8-sig" in text_of(screen, "#data-file-info")
        await wait_until(pilot, lambda: screen.report is not None)  # small files are linted on open
        assert "6 errors" in text_of(screen, "#data-file-info")
        assert "1 Data !" in stepper_text(app)

        prompt = lambda: text_of(screen, "#data-prompt-text")  # noqa: E731
        await wait_until(pilot, lambda: "<|start_header_id|>user<|end_header_id|>" in prompt())
        assert "如何重置账户密码？" in prompt()
        await pilot.press("t")  # next template: qwen
        await wait_until(pilot, lambda: "<|im_start|>user" in prompt())

        screen.query_one("#data-tabs", TabbedContent).active = "tab-findings"
        findings = screen.query_one(DataFindings)
        findings.focus()
        target = findings.lines.index(30)
        findings.highlighted = target
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query_one("#data-tabs", TabbedContent).active == "tab-rows")
        await wait_until(pilot, lambda: pager.rows_now[pager.cursor_row].line == 30)
        assert "The item arrived damaged" in str(pager.get_row_at(pager.cursor_row))

        screen.query_one("#data-tabs", TabbedContent).active = "tab-stats"
        await wait_until(pilot, lambda: "rows can train" in text_of(screen, "#data-stats-text"))
        assert "tokens per row" in str(screen.query_one("#data-hist-tokens").border_title)


async def test_fix_and_register_are_previewed_first(ws):
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        actions = screen.query_one(DataActions)
        result = lambda: str(actions.query_one("#actions-result", Static).render())  # noqa: E731
        out = ws.data_dir / "support_clean.jsonl"
        assert actions.query_one("#fix-output", Input).value == "data/support_clean.jsonl"

        await pilot.press("f")  # preview the fix: nothing is written
        await wait_until(pilot, lambda: "Preview" in result() and "33 rows in → 29 written" in result())
        assert not out.exists()

        actions.query_one("#fix-yes", Checkbox).value = True
        actions.query_one("#fix-write", Button).press()
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("y")
        await wait_until(pilot, lambda: "Written." in result() and out.exists())
        assert "29 written" in result()
        assert len(out.read_text(encoding="utf-8").splitlines()) == 29

        await wait_until(pilot, lambda: screen.path == out and screen.report is not None)  # opened after writing
        assert actions.query_one("#register-name", Input).value == "support"
        await pilot.press("g")  # preview the dataset_info.json entry
        await wait_until(pilot, lambda: "added \"support\"" in result())
        assert "support" not in json.loads((ws.data_dir / "dataset_info.json").read_text())
        actions.query_one("#register-write", Button).press()
        await wait_until(pilot, lambda: "Registered" in result())
        info = json.loads((ws.data_dir / "dataset_info.json").read_text())
        assert info["support"] == {"file_name": "support_clean.jsonl"}
        await wait_until(pilot, lambda: app.state.dataset_name == "support")
        assert app.state.dataset_file == "data/support_clean.jsonl"
        assert "1 Data ✓" in stepper_text(app)
        assert (ws.root / ".devtune" / "datasets" / "support.json").is_file()


async def test_big_file_pages_through_its_index(ws):
    big = ws.data_dir / "big.jsonl"
    row = json.dumps({"instruction": "q", "input": "", "output": "答" * 300}, ensure_ascii=False)
    with big.open("w", encoding="utf-8") as fh:
        for i in range(60000):
            fh.write(row.replace('"q"', f'"q{i}"') + "\n")
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(big)
        pager = screen.query_one(RowPager)
        await wait_until(pilot, lambda: pager.row_count > 0)
        assert pager.rows_now[0].value["instruction"] == "q0"
        await wait_until(pilot, lambda: screen.preview.complete)
        pager.focus()
        await pilot.press("ctrl+end")
        await wait_until(pilot, lambda: pager.rows_now[-1].line == 60000)
        await pilot.press("ctrl+home")
        await wait_until(pilot, lambda: pager.start == 0)
        for _ in range(3):
            await pilot.press("pagedown")
        await pilot.press("down")
        assert pager.rows_now[pager.cursor_row].line > 1
        assert "60000" in str(pager.border_subtitle)


async def test_a_failing_worker_is_shown_not_fatal(ws):
    (ws.data_dir / "folder.jsonl").mkdir()
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(ws.data_dir / "folder.jsonl")
        await wait_until(pilot, lambda: screen.query_one("#step-error").has_class("-visible"))
        assert "Opening the file failed" in text_of(screen, "#step-error")
        screen.open_file(ws.data_dir / "qa_pairs.json")
        await wait_until(pilot, lambda: screen.report is not None)
        assert screen.report.format == "alpaca (question/answer)"


async def test_a_steps_keys_work_wherever_the_focus_is(ws):
    """Found by a new user: after opening a file from the tree and linting it (l), `f` did nothing until
    Tab moved the focus. Now f opens the Fix form and previews, from the row table's focus."""
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        linted = screen.report
        await pilot.press("l")
        await wait_until(pilot, lambda: screen.report is not linted and screen.report is not None)
        assert isinstance(app.focused, RowPager)
        await pilot.press("f")
        result = lambda: str(screen.query_one(DataActions).query_one("#actions-result", Static).render())  # noqa: E731
        await wait_until(pilot, lambda: "33 rows in → 29 written" in result())
        await pilot.pause(0.3)
        assert screen.query_one("#data-tabs", TabbedContent).active == "tab-actions"
        await pilot.press("v")  # and the next key too, from where the focus is now
        await wait_until(pilot, lambda: "Preview" in result() and "alpaca" in result().lower())
        assert screen.query_one("#data-tabs", TabbedContent).active == "tab-actions"

        # while typing in a text field, letters are text, not keys
        field = screen.query_one("#register-name", Input)
        field.focus()
        field.value = ""
        await pilot.press("f", "l")
        assert field.value == "fl"
        assert screen.query_one("#data-tabs", TabbedContent).active == "tab-actions"


async def test_register_with_a_held_out_share_previews_the_split_then_writes_it(ws):
    from core.data.fix import fix_file

    clean = ws.data_dir / "support_clean.jsonl"
    fix_file(ws.data_dir / "support_messy.jsonl", clean, yes=True)
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(clean)
        await wait_until(pilot, lambda: screen.report is not None)
        actions = screen.query_one(DataActions)
        result = lambda: str(actions.query_one("#actions-result", Static).render())  # noqa: E731
        actions.query_one("#register-holdout", Input).value = "0.2"
        await pilot.press("g")  # preview: the split, nothing written
        await wait_until(pilot, lambda: "23 rows to train, 6 held out of 29" in result())
        assert "Preview" in result() and not (ws.data_dir / "support.train.jsonl").exists()
        actions.query_one("#register-write", Button).press()
        await wait_until(pilot, lambda: "Registered" in result())
        info = json.loads((ws.data_dir / "dataset_info.json").read_text())
        assert info["support"] == {"file_name": "support.train.jsonl"}
        assert info["support_eval"] == {"file_name": "support.heldout.jsonl"}
        await wait_until(pilot, lambda: app.state.dataset_name == "support")
        actions.query_one("#register-holdout", Input).value = "0.9"
        await pilot.press("g")
        await wait_until(pilot, lambda: "at most 0.5" in result())


async def test_a_file_over_the_process_threshold_is_linted_by_worker_processes_from_the_screen(ws):
    """A file big enough for `--jobs` lints in worker processes from inside the wizard too, where Textual's
    capture of stderr has no file descriptor (multiprocessing's resource tracker once failed on it)."""
    from core.data.parallel_scan import PROCESS_LINT_BYTES

    row = {"instruction": "How long does a refund take for order {n}?", "input": "",
           "output": "Refunds reach the original payment method within 3 to 5 business days. " * 3}
    big = ws.data_dir / "big.jsonl"
    with open(big, "w") as fh:
        n = 0
        while fh.tell() < PROCESS_LINT_BYTES + 1_000_000:
            fh.write(json.dumps({**row, "instruction": row["instruction"].format(n=n)}) + "\n")
            n += 1
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, big)
        error = screen.query_one("#step-error")
        await wait_until(pilot, lambda: screen.report is not None or error.has_class("-visible"), timeout=240)
        assert not error.has_class("-visible"), text_of(screen, "#step-error")
        assert screen.report.rows == n, screen.report.rows
