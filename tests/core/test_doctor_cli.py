"""`devtune doctor`: JSON and text output, --only, exit codes, --replay, --record, --save."""

import json
import re
from pathlib import Path

from core.doctor.report import save_report
from core.doctor.runner import replay

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"


def test_json_on_this_machine_only_torch(devtune_cli, tmp_path):
    out = devtune_cli("doctor", "--json", "--only", "torch,platform", "-w", str(tmp_path))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {c["category"] for c in data["checks"]} == {"torch", "platform"}
    for check in data["checks"]:
        assert {"id", "title", "category", "status", "evidence", "fix"} <= set(check)
    assert data["summary"]["machine"] == "cpu" and data["summary"]["fail"] == 0
    assert data["summary"]["total"] == len(data["checks"])


def test_usage_errors_exit_2(devtune_cli, tmp_path):
    out = devtune_cli("doctor", "--only", "gpus")
    assert out.returncode == 2 and "unknown category gpus" in out.stderr
    out = devtune_cli("doctor", "--check", "access.nope")
    assert out.returncode == 2 and "unknown check" in out.stderr
    out = devtune_cli("doctor", "--replay", str(tmp_path))
    assert out.returncode == 2 and "not a recorded machine" in out.stderr


def test_replay_of_a_broken_machine_exits_1_with_the_fix(devtune_cli):
    out = devtune_cli("doctor", "--replay", str(MACHINES / "mi300x8-cuda-wheel"))
    assert out.returncode == 1
    assert "[FAIL] PyTorch build fits this machine" in out.stdout
    assert "--index-url https://download.pytorch.org/whl/rocm7.1" in out.stdout
    assert "GPU device access" in out.stdout and "NVIDIA driver and CUDA: not applicable" in out.stdout


def test_replay_of_a_healthy_machine_exits_0(devtune_cli):
    out = devtune_cli("doctor", "--replay", str(MACHINES / "mi250x4"), "--json", "--only", "rocm")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert [c["status"] for c in data["checks"]] == ["ok"] * 4
    assert data["summary"]["machine_summary"] == "8 x AMD Instinct MI250X/MI250 (gfx90a), ROCm 6.3.3"


def test_save_and_record(devtune_cli, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    out = devtune_cli("doctor", "--replay", str(MACHINES / "mi300x8-not-in-render-group"), "--save",
                      "--record", str(tmp_path / "rec"), "-w", str(ws))
    assert out.returncode == 1
    saved = list(ws.glob("doctor-report-*.md"))
    assert len(saved) == 1 and re.fullmatch(r"doctor-report-\d{8}-\d{6}\.md", saved[0].name)
    text = saved[0].read_text()
    assert "sudo usermod -aG render alice" in text and "## Evidence" in text
    assert (tmp_path / "rec" / "machine.json").exists()
    again, _ = replay(tmp_path / "rec")
    assert again.failed


def test_saved_reports_never_overwrite(tmp_path):
    report, ev = replay(MACHINES / "cpu-only")
    first = save_report(tmp_path, report, ev, now=1_700_000_000)
    second = save_report(tmp_path, report, ev, now=1_700_000_000)
    assert first != second and first.exists() and second.name.endswith("-2.md")
    assert first.read_text() == second.read_text()
