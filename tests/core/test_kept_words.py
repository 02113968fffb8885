"""Words kept as data are said in the reader's language (issue 29, item 13): a step's saved summary, an export
check's findings and a GPU sampler's reason, written in English, read in Chinese; a file from before loads."""

from __future__ import annotations

import json

import pytest

from core.data.wording import counted
from core.i18n import said
from core.workspace.state import WizardState
from core.workspace.step_status import StepStatus, peek_state


@pytest.fixture
def english(monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", "en")


def test_a_step_summary_saved_in_english_is_shown_in_chinese(english, tmp_path, monkeypatch):
    from core.data.lint import lint_file
    from core.data.register import registered

    data = tmp_path / "kefu.jsonl"
    data.write_text("".join(json.dumps({"instruction": f"问题 {i}", "input": "", "output": f"回答 {i}"},
                                       ensure_ascii=False) + "\n" for i in range(3)), encoding="utf-8")
    report = lint_file(data)
    state = WizardState()
    registered("data/kefu.jsonl", "kefu", report).apply(state)
    english_line = state.step("data").summary
    assert english_line.startswith("dataset kefu: 3 rows, 0 errors"), english_line
    path = tmp_path / "state.json"
    path.write_text(state.model_dump_json())

    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    loaded = WizardState.model_validate_json(path.read_text())
    shown = loaded.step("data").shown_summary()
    assert shown.startswith("数据集 kefu：3 行，0 个错误") and "warning" not in shown, shown
    assert peek_state(path).step("data").shown_summary() == shown  # the first paint's look at the state


def test_a_state_from_before_loads_and_shows_its_text(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    old = {"schema_version": 1, "steps": {"merge": {"status": "done", "summary": "merged into exports/x",
                                                    "updated": 1.0}}}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(old))
    state = WizardState.model_validate_json(path.read_text())
    assert state.step("merge").status is StepStatus.DONE
    assert state.step("merge").shown_summary() == "merged into exports/x"
    assert peek_state(path).step("merge").shown_summary() == "merged into exports/x"


def test_a_shown_summary_stays_data_when_it_is_saved_again(english, monkeypatch):
    state = WizardState()
    state.set_step("data", StepStatus.DONE, said("merged into {dir}", dir="exports/x"))
    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    again = WizardState()
    again.set_step("data", StepStatus.ATTENTION, state.step("data").shown_summary())  # the Data step's lint put back
    assert again.step("data").summary_key == "merged into {dir}"
    monkeypatch.setenv("DEVTUNE_LANG", "en")
    assert again.step("data").shown_summary() == "merged into exports/x"


def test_an_export_check_saved_in_english_reads_in_chinese(english, tmp_path, monkeypatch):
    from core.merge.export_check import ExportReport, check_files, load_report, save_report
    from core.workspace.layout import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    (ws.root / "exports" / "m").mkdir(parents=True)
    report = ExportReport(export_dir="exports/m", findings=check_files(ws.root / "exports" / "m"))
    save_report(ws, report)
    assert "weights" in [f.what for f in report.findings]

    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    shown = load_report(ws, "exports/m")
    assert [f.what for f in shown.findings] == [f.what for f in load_report(ws, "exports/m").findings]
    assert "weights" not in [f.what for f in shown.findings] and "权重" in [f.what for f in shown.findings]
    weights = next(f for f in shown.findings if f.what == "权重")
    assert weights.detail and "no *.safetensors" not in weights.detail
    assert weights.fix and "re-run" not in weights.fix
    old = ExportReport.model_validate({"export_dir": "exports/m", "findings": [
        {"level": "ok", "what": "weights", "detail": "1 file"}]})  # a check.json from before
    assert old.findings[0].what == "weights"


def test_the_gpu_samplers_no_gpu_reason_reads_in_the_panels_language(english, tmp_path, monkeypatch):
    from core.train.gpu.choose import choose_backend, status_reason
    from core.train.gpu.record import record_until

    def fails():
        from core.train.gpu.backend import GpuBackendUnavailable
        from core.i18n import said as kept

        raise GpuBackendUnavailable(kept("{tool} not found on PATH", tool="rocm-smi"))

    backend, reason = choose_backend("auto", openers={"rocm-smi": fails}, machine=None)
    assert backend is None and "not found on PATH" in reason
    status_file = tmp_path / "gpu.status"
    monkeypatch.setattr("core.train.gpu.choose.choose_backend", lambda prefer=None: (None, reason))
    record_until(tmp_path / "gpu.jsonl", None, status_file)
    status = json.loads(status_file.read_text())
    assert status["reason"] == str(reason)  # the text as written, for readers from before

    monkeypatch.setenv("DEVTUNE_LANG", "zh")
    shown = status_reason(status)
    assert shown.startswith("本机没有 GPU") and "PATH 中找不到 rocm-smi" in shown, shown
    assert status_reason({"reason": "no GPU here"}) == "no GPU here"


def test_counts_and_their_nouns_are_kept_as_data(english):
    rows = counted("row", 2)
    assert rows == "2 rows" and rows.to_data() == {"key": "{n} row", "args": {"n": 2}, "many": "{n} rows"}
