"""The Data step keeps a personal-data finding's value when it is the business's own public contact (issue
29, item 12): `k` on the finding puts it on the workspace's keep list, and the lint no longer reports it."""

import json

from screens.data import DataScreen
from tests.tui.helpers import wait_until
from tests.tui.test_data_screen import open_in_tree
from tui.app import DevtuneApp
from tui.widgets.data_findings import DataFindings
from textual.widgets import TabbedContent

ROW = {"instruction": "客服电话是多少？", "input": "", "output": "请拨打 400-820-8820，张先生的手机 13812345678"}


async def test_k_keeps_the_highlighted_findings_value(workspace):
    path = workspace.data_dir / "kefu.jsonl"
    path.write_text(json.dumps(ROW, ensure_ascii=False) + "\n", encoding="utf-8")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await open_in_tree(pilot, screen, path)
        await wait_until(pilot, lambda: screen.report is not None)
        pii = [f for f in screen.report.findings if f.rule == "pii"]
        assert [f.values for f in pii] == [("13812345678",), ("400-820-8820",)]
        screen.query_one("#data-tabs", TabbedContent).active = "tab-findings"
        findings = screen.query_one(DataFindings)
        findings.focus()
        findings.highlighted = screen.report.findings.index(pii[1])  # the hotline, not the person's mobile
        first = screen.report
        await pilot.press("k")
        await wait_until(pilot, lambda: screen.report is not None and screen.report is not first)
        assert "400-820-8820" in (workspace.root / ".devtune" / "keep.txt").read_text(encoding="utf-8")
        assert [f.values for f in screen.report.findings if f.rule == "pii"] == [("13812345678",)]
