"""Which torch build set-up installs: the PyTorch ROCm index for the installed ROCm (said as such when ROCm is
newer than every index, refused when no index has its major), and which GPUs the machine trains on, judged
from recorded rocminfo / nvidia-smi outputs the way the installer reads them live."""

from pathlib import Path

import pytest

from core.doctor.evidence import Evidence
from core.doctor.facts import facts
from core.setup import install
from core.setup.machine_kind import GpuSeen, choose_kind, machine_from_outputs
from core.setup.torch_build import (
    ROCM_INDEXES,
    Hardware,
    choose_torch,
    index_note,
    read_rocm_version,
    rocm_index_for,
    rocm_index_url,
)

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"


@pytest.mark.parametrize("rocm, index", [
    ("6.0.2", "rocm6.0"),
    ("6.1.3", "rocm6.1"),
    ("6.2.0", "rocm6.2"),
    ("6.2.4", "rocm6.2.4"),
    ("6.3.1", "rocm6.3"),
    ("6.4.1", "rocm6.4"),
    ("7.0.2", "rocm7.0"),
    ("7.1.1", "rocm7.1"),
    ("7.2.1", "rocm7.1"),
    ("7.14.0", "rocm7.1"),  # Unsloth #10657: ROCm 7.14 on the machine
])
def test_newest_index_of_the_same_major_not_newer_than_installed_rocm(rocm, index):
    assert rocm_index_for(rocm)[0] == index


def test_too_old_or_unknown_rocm_has_no_index():
    assert rocm_index_for("5.7.1") is None
    assert rocm_index_for("8.0.0") is None  # no index of that major: never a wheel of another major
    assert rocm_index_url("garbage") is None


@pytest.mark.parametrize("rocm", ["7.2.0", "7.9.0", "7.14.0"])
def test_rocm_newer_than_every_index_gets_the_newest_of_its_major_said_as_such(rocm):
    newest = ROCM_INDEXES[-1][1]
    choice = choose_torch(Hardware("rocm", rocm, "/dev/kfd is present"))
    assert not choice.refused
    assert choice.index_url == f"https://download.pytorch.org/whl/{newest}"
    assert f"ROCm {rocm} on this machine; newest PyTorch index is {newest}; using it" in choice.reason
    assert "carry their own ROCm libraries" in choice.reason


def test_matching_index_is_named_as_matching():
    assert index_note("6.4.1") == "ROCm 6.4.1 on this machine; PyTorch index rocm6.4 matches it"
    assert "rocm6.2.4 matches" in index_note("6.2.4")


@pytest.mark.parametrize("rocm, why", [
    ("5.7.1", "older than every PyTorch ROCm index devtune installs from (the oldest is rocm6.0)"),
    ("8.0.0", "PyTorch publishes no ROCm 8 index yet"),
])
def test_no_index_for_the_major_is_refused_with_the_reason(rocm, why):
    choice = choose_torch(Hardware("rocm", rocm, "/dev/kfd is present"))
    assert choice.refused and choice.index_url is None and choice.packages == ()
    assert why in choice.reason


def test_unknown_rocm_version_takes_the_newest_index_and_says_so():
    choice = choose_torch(Hardware("rocm", None, "/dev/kfd is present"))
    assert not choice.refused and choice.index_url.endswith(ROCM_INDEXES[-1][1])
    assert "ROCm version is unknown" in choice.reason and "/opt/rocm/.info/version" in choice.reason


def test_rocm_choice_uses_index_url_never_extra():
    choice = choose_torch(Hardware("rocm", "6.4.1", "ROCm 6.4.1"))
    cmd = choice.command()
    assert "--index-url https://download.pytorch.org/whl/rocm6.4" in cmd
    assert "--extra-index-url" not in cmd
    assert "torchaudio" in cmd


def test_cpu_and_nvidia_choices():
    assert choose_torch(Hardware("cpu")).index_url.endswith("/cpu")
    assert choose_torch(Hardware("nvidia")).index_url is None


@pytest.mark.parametrize("text, version", [("6.4.1-120\n", "6.4.1"), ("7.14.0-60850\n", "7.14.0")])
def test_read_rocm_version(tmp_path, text, version):
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text(text)
    assert read_rocm_version(tmp_path) == version
    assert read_rocm_version(tmp_path / "missing") is None


def _installer_view(machine: str):
    """The installer's reading of a recorded machine: rocminfo and nvidia-smi as it runs them live."""
    ev = Evidence.load(MACHINES / machine)
    rocminfo, nvidia = ev.command("rocminfo"), ev.command("nvidia_smi_query")
    return ev, machine_from_outputs(
        rocminfo=rocminfo.stdout if rocminfo.ok else None, nvidia_query=nvidia.stdout if nvidia.ok else None,
        kfd=bool((ev.devices.get("/dev/kfd") or {}).get("exists")),
        rocm_version=(ev.files.get("/opt/rocm/.info/version") or "").split("-")[0] or None,
        nvidia_driver=bool(ev.files.get("/proc/driver/nvidia/version")))


def test_ryzen_igpu_beside_an_nvidia_card_installs_the_cuda_build():
    """Transformer Lab #2382: rocminfo exists (ROCm 7.2 installed, /dev/kfd for the Ryzen iGPU) and
    nvidia-smi answers. The iGPU is seen, set aside as integrated, and the NVIDIA build is chosen."""
    _ev, machine = _installer_view("ryzen-igpu-rtx4090")
    assert machine.kind == "nvidia"
    assert machine.evidence == ["nvidia-smi lists 1 GPUs"]
    assert len(machine.set_aside) == 1 and "AMD Radeon Graphics (gfx1036): an integrated GPU" in machine.set_aside[0]
    hw = Hardware(machine.kind, None, ", ".join(machine.evidence), tuple(machine.set_aside))
    choice = choose_torch(hw)
    assert choice.kind == "nvidia" and "rocm" not in choice.command()


@pytest.mark.parametrize("machine", ["ryzen-igpu-rtx4090", "r9700x2-rocm7.2", "mi300x8", "mi250x4",
                                     "nvidia-h100x8", "cpu-only"])
def test_installer_and_doctor_judge_a_machine_alike(machine):
    ev, seen = _installer_view(machine)
    assert seen.kind == facts(ev).kind


IGPU_780M = GpuSeen("amd", "AMD Radeon 780M Graphics", "gfx1103", True, "rocminfo")
RAPHAEL = GpuSeen("amd", "AMD Radeon Graphics", "gfx1036", True, "rocminfo")


@pytest.mark.parametrize("gpus, kind, aside", [
    # the judgement is over what each GPU is (integrated or discrete, a training target or not), not one gfx
    ([IGPU_780M, GpuSeen("nvidia", "NVIDIA GeForce RTX 4070 Laptop GPU", source="nvidia-smi")], "nvidia", [0]),
    ([GpuSeen("amd", "AMD Radeon Graphics", "gfx1036", None, "amd-smi")], "cpu", [0]),  # the gfx says integrated
    ([GpuSeen("amd", "AMD Radeon 8060S Graphics", "gfx1151", True, "rocminfo")], "rocm", []),  # Strix Halo: a target
    ([GpuSeen("amd", "AMD Instinct MI300A", "gfx942", True, "rocminfo")], "rocm", []),  # an APU, and an Instinct
    ([GpuSeen("amd", "AMD Radeon RX 7900 GRE", "gfx1100", False, "rocminfo"), RAPHAEL], "rocm", [1]),
    ([GpuSeen("amd", "AMD Radeon RX 6600", "gfx1032", False, "rocminfo"),
      GpuSeen("nvidia", "NVIDIA RTX A4000", source="nvidia-smi")], "nvidia", [0]),  # off ROCm's list: NVIDIA
    ([GpuSeen("amd", "AMD Instinct MI210", "gfx90a", False, "rocminfo"),
      GpuSeen("nvidia", "NVIDIA T4", source="nvidia-smi")], "rocm", [1]),
])
def test_machine_kind_weighs_each_gpu(gpus, kind, aside):
    machine = choose_kind(gpus)
    assert machine.kind == kind
    assert [line.split(":")[0] for line in machine.set_aside] == [gpus[i].label() for i in aside]


def test_an_integrated_gpu_alone_is_used_only_when_asked_for():
    igpu = [GpuSeen("amd", "AMD Radeon 780M Graphics", "gfx1103", True, "rocminfo")]
    assert choose_kind(igpu, amd_stack=["/dev/kfd is present"]).kind == "cpu"
    assert choose_kind(igpu, amd_stack=["/dev/kfd is present"], override=True).kind == "rocm"


def test_an_amd_stack_without_a_listed_gpu_is_still_an_amd_machine_unless_nvidia_answers():
    assert choose_kind([], amd_stack=["/dev/kfd is present"]).kind == "rocm"
    machine = choose_kind([GpuSeen("nvidia", "NVIDIA L40S", source="nvidia-smi")], amd_stack=["ROCm 7.2.0 is installed"])
    assert machine.kind == "nvidia" and "no tool lists an AMD GPU" in machine.set_aside[0]
    assert choose_kind([], nvidia_driver=True).kind == "nvidia"


def test_installer_refuses_a_rocm_without_an_index_before_creating_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(install, "detect_hardware",
                        lambda: Hardware("rocm", "5.7.1", "/dev/kfd is present, ROCm 5.7.1 is installed"))
    with pytest.raises(SystemExit) as exc:
        install.setup_train(tmp_path / "venv")
    assert "no PyTorch build fits this machine, nothing installed" in str(exc.value)
    assert "ROCm 5.7.1 is older than every PyTorch ROCm index" in str(exc.value)
    assert not (tmp_path / "venv").exists()
    assert "hardware: rocm (/dev/kfd is present" in capsys.readouterr().out


def test_installer_says_which_gpus_it_set_aside(capsys):
    install.say_hardware(Hardware("nvidia", None, "nvidia-smi lists 1 GPUs",
                                  ("AMD Radeon Graphics (gfx1036): an integrated GPU",)))
    out = capsys.readouterr().out
    assert "hardware: nvidia (nvidia-smi lists 1 GPUs)" in out
    assert "set aside: AMD Radeon Graphics (gfx1036): an integrated GPU" in out


@pytest.mark.parametrize("machine, index", [("r9700x2-rocm7.2", "rocm7.1"), ("mi300x8", "rocm7.1"),
                                            ("mi250x4", "rocm6.3")])
def test_installer_and_doctor_pick_the_same_rocm_index(machine, index):
    """The index set-up would install from, read from the machine's recorded tools, is the one the doctor's
    fix names (ROCm 7.2 as the guide says: the newest community wheel index of ROCm 7, said as such)."""
    from core.doctor.fixes import torch_index

    ev, seen = _installer_view(machine)
    rocm = (ev.files.get("/opt/rocm/.info/version") or "").split("-")[0]
    choice = choose_torch(Hardware(seen.kind, rocm, ", ".join(seen.evidence)))
    assert choice.index_url == f"https://download.pytorch.org/whl/{index}" == torch_index(ev)
    assert index_note(rocm) in choice.reason


def test_set_up_decides_with_the_standard_library_only(run_python):
    """make runs the installer with the system Python before any environment exists: deciding the machine's
    kind and its torch build (rocminfo and nvidia-smi parsed by the doctor's parsers) imports nothing else."""
    proc = run_python(
        "import sys, sysconfig\n"
        "before = set(sys.modules)\n"
        "from core.setup.install import say_hardware\n"
        "from core.setup.torch_build import choose_torch, detect_hardware\n"
        "choose_torch(detect_hardware())\n"
        "site = sysconfig.get_paths()['purelib']\n"
        "print([n for n, m in sys.modules.items() if n not in before\n"
        "       and (getattr(m, '__file__', None) or '').startswith(site)])\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
