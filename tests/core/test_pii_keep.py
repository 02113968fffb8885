"""A business's own public contact details are keepable (issue 29, item 12): `fix --yes` masked the company's
hotline and support address (`400-***-8820`, `***@example.com`) and the tuned model learnt the masked text.
Personal data is still masked; the workspace's keep list (.devtune/keep.txt) leaves the kept values alone, in
lint and in fix, from the CLI (`--keep VALUE`) and from core alike."""

import json

from core.data.fix import fix_file
from core.data.lint import lint_file
from core.data.pii_keep import KEEP_FILE, add_keep, keep_for

ROW = {"instruction": "客服电话是多少？", "input": "",
       "output": "请拨打 400-820-8820，或写信到 support@example.com；张先生的手机 13812345678"}


def _data(workspace):
    path = workspace.root / "data" / "kefu.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ROW, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _pii(report) -> list[tuple[str, ...]]:
    return [f.values for f in report.findings if f.rule == "pii"]


def test_without_a_keep_list_every_contact_is_personal_data(workspace):
    path = _data(workspace)
    assert _pii(lint_file(path)) == [("13812345678",), ("400-820-8820",), ("support@example.com",)]
    fix_file(path, workspace.root / "data" / "out.jsonl", yes=True)
    out = json.loads((workspace.root / "data" / "out.jsonl").read_text(encoding="utf-8"))["output"]
    assert "400-***-8820" in out and "***@example.com" in out


def test_kept_values_are_neither_reported_nor_masked_personal_data_still_is(workspace):
    path = _data(workspace)
    assert add_keep(workspace.root, ["400 820 8820", "Support@Example.com"]) == ["400 820 8820", "Support@Example.com"]
    assert add_keep(workspace.root, ["400-820-8820"]) == []  # the same number, however it is written
    assert keep_for(path)  # the list of the workspace that holds the file
    assert _pii(lint_file(path)) == [("13812345678",)]
    fix_file(path, workspace.root / "data" / "out.jsonl", yes=True)
    out = json.loads((workspace.root / "data" / "out.jsonl").read_text(encoding="utf-8"))["output"]
    assert "400-820-8820" in out and "support@example.com" in out and "138****5678" in out


def test_the_cli_keeps_what_the_finding_offers(workspace, devtune_cli):
    path = _data(workspace)
    lint = devtune_cli("-w", str(workspace.root), "data", "lint", str(path), "--json")
    found = [f for f in json.loads(lint.stdout)["findings"] if f["rule"] == "pii"]
    assert any("--keep VALUE" in f["message"] for f in found) and ["support@example.com"] in [f["values"] for f in found]
    done = devtune_cli("-w", str(workspace.root), "data", "fix", str(path), "-o", "data/out.jsonl", "--yes",
                       "--keep", "400-820-8820", "--keep", "support@example.com")
    assert done.returncode in (0, 1), done.stderr
    assert "400-820-8820" in (workspace.root / KEEP_FILE).read_text(encoding="utf-8")
    out = json.loads((workspace.root / "data" / "out.jsonl").read_text(encoding="utf-8"))["output"]
    assert "请拨打 400-820-8820，或写信到 support@example.com" in out and "13812345678" not in out
