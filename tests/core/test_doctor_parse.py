"""The doctor's parsers on recorded outputs of the real tools (both amd-smi JSON shapes, rocm-smi,
rocminfo, ds_report, nvidia-smi, id)."""

from pathlib import Path

import pytest

from core.doctor.parse_amd import (normalize_gfx, parse_amd_smi_static, parse_amd_smi_version,
                                   parse_hipconfig_version, parse_rocm_smi_json, parse_rocm_version_file,
                                   parse_rocminfo)
from core.doctor.parse_tools import (kernel_args, parse_ds_report, parse_id_groups, parse_id_user, parse_meminfo,
                                     parse_nvidia_query, parse_nvidia_table, parse_version, strip_ansi)
from core.doctor.scripts import parse_probe_lines

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "doctor"
MACHINES = FIX / "machines"
TOOLS = FIX / "tools"


def out(machine: str, name: str) -> str:
    return (MACHINES / machine / "commands" / name).read_text()


def test_amd_smi_static_gpu_data_shape_rocm7():
    static = parse_amd_smi_static(out("mi300x8", "amd_smi_static.out"))
    assert static.shape == "gpu_data" and not static.error and not static.permission_denied
    assert len(static.gpus) == 8
    assert {g.gfx for g in static.gpus} == {"gfx942"}
    assert static.gpus[0].name == "AMD Instinct MI300X" and static.gpus[0].vram_mb == 196592
    assert static.gpus[7].bdf == "0000:e5:00.0"
    assert static.driver_version == "6.16.13"


def test_amd_smi_static_list_shape_rocm6():
    static = parse_amd_smi_static(out("mi250x4", "amd_smi_static.out"))
    assert static.shape == "list"
    assert [g.index for g in static.gpus] == list(range(8))
    assert {g.gfx for g in static.gpus} == {"gfx90a"}
    assert static.gpus[0].name == "AMD Instinct MI250X/MI250"


def test_amd_smi_static_without_render_access_has_banner_and_na_fields():
    static = parse_amd_smi_static(out("mi300x8-not-in-render-group", "amd_smi_static.out"))
    assert static.permission_denied
    assert static.banner.startswith("Permission needed to access required GPU device node(s)")
    assert len(static.gpus) == 8
    assert all(g.name is None and g.gfx is None and g.vram_mb is None for g in static.gpus)
    assert static.gpus[0].bdf == "0000:05:00.0"  # the bus section is readable without access


def test_amd_smi_static_garbage_is_an_error_not_a_crash():
    assert parse_amd_smi_static("AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded\n").error
    assert parse_amd_smi_static("{not json").error
    assert parse_amd_smi_static('{"something": 1}').error == "unexpected JSON shape"


@pytest.mark.parametrize("name, expected", [
    ("amd-smi-version-24.7.1.txt", {"tool": "24.7.1+8dc45db", "library": "25.1.0.0", "rocm": "6.3.3"}),
    ("amd-smi-version-25.3.0.txt", {"tool": "25.3.0+ede62f2", "library": "25.3.0", "rocm": "6.4.0",
                                    "amdgpu": "6.12.12"}),
    ("amd-smi-version-26.2.2-nonroot.json", {"tool": "26.2.2+e1a6bc5663", "library": "26.2.2", "rocm": "7.2.1",
                                             "amdgpu": "AMDSMI_STATUS_FILE_ERROR - Error opening file"}),
])
def test_amd_smi_version_text_and_json(name, expected):
    assert parse_amd_smi_version((TOOLS / name).read_text()) == expected


def test_amd_smi_version_with_the_inbox_kernel_driver_string():
    parsed = parse_amd_smi_version((TOOLS / "amd-smi-version-26.2.1-inbox-driver.txt").read_text())
    assert parsed["rocm"] == "7.2.0"
    assert parsed["amdgpu"].startswith("Linuxversion6.19.8")


@pytest.mark.parametrize("raw, gfx", [
    ("gfx942:sramecc+:xnack-", "gfx942"), ("gfx9010", "gfx90a"), ("gfx90a", "gfx90a"), ("gfx950", "gfx950"),
    ("gfx1100", "gfx1100"), ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", "gfx90a"), ("gfx908", "gfx908"),
    ("N/A", None), (None, None),
])
def test_normalize_gfx(raw, gfx):
    assert normalize_gfx(raw) == gfx


def test_rocm_smi_product_json_mi250x_prints_gfx9010():
    gpus, driver, error = parse_rocm_smi_json((TOOLS / "rocm-smi-productname-mi250x.json").read_text())
    assert not error and driver is None
    assert [g.gfx for g in gpus] == ["gfx90a", "gfx90a"]
    assert gpus[0].name == "AMD INSTINCT MI250X (MCM) OAM AC MBA"


def test_rocm_smi_lowercase_card_keys_and_secondary_die():
    gpus, driver, error = parse_rocm_smi_json((TOOLS / "rocm-smi-a-mi250-rocm5.json").read_text())
    assert driver == "6.2.4" and len(gpus) == 2 and gpus[1].name.startswith("AMD INSTINCT MI250")
    assert gpus[0].gfx is None  # -a has no GFX Version


def test_rocm_smi_one_line_mi300_shape_with_cards_in_numeric_order():
    gpus, driver, _ = parse_rocm_smi_json(out("mi300x8", "rocm_smi.out"))
    assert driver == "6.16.13" and [g.index for g in gpus] == list(range(8))
    assert gpus[3].name == "AMD Instinct MI300X" and gpus[3].gfx == "gfx942"
    assert parse_rocm_smi_json("\n")[2]  # "WARNING: No AMD GPUs specified" leaves no JSON


def test_rocminfo_gpu_agents_skip_cpus():
    info = parse_rocminfo(out("mi300x8", "rocminfo.out"))
    assert info.module_loaded is True and info.module_version == "6.16.13"
    assert len(info.gpus) == 8 and {g.gfx for g in info.gpus} == {"gfx942"}
    assert info.gpus[0].name == "AMD Instinct MI300X"


def test_rocminfo_failures():
    not_loaded = parse_rocminfo(out("mi300x8-no-driver", "rocminfo.out"))
    assert not_loaded.module_loaded is False and not_loaded.kfd_error == "No such file or directory"
    assert not_loaded.hsa_error == "HSA_STATUS_ERROR_OUT_OF_RESOURCES" and not not_loaded.gpus
    denied = parse_rocminfo(out("mi300x8-not-in-render-group", "rocminfo.out"))
    assert denied.module_loaded is True and denied.kfd_error == "Permission denied"
    assert denied.member_line == "alice is member of video group"
    container = parse_rocminfo((TOOLS / "rocminfo-container-invalid-argument.txt").read_text())
    assert container.kfd_error == "Invalid argument" and container.module_version == "6.7.0"


def test_rocm_versions():
    assert parse_rocm_version_file("7.2.1-81\n") == "7.2.1"
    assert parse_rocm_version_file(None) is None
    assert parse_hipconfig_version("6.4.43482-0f2d60242") == "6.4"
    assert parse_hipconfig_version("7.1.25424-4179531dcd") == "7.1"


def test_ds_report_rocm_table():
    report = parse_ds_report(out("mi300x8", "ds_report.out"))
    assert report.accelerator == "cuda" and report.ninja_ok is True
    assert report.compatible("fused_adam") is True and report.compatible("sparse_attn") is False
    assert report.ops["async_io"] == ("NO", "NO")
    assert "sparse_attn is not compatible with ROCM" in report.warnings
    assert report.info["torch hip version"] == "7.1.25424-4179531dcd"
    assert report.info["torch version"] == "2.10.0+rocm7.1"


def test_ds_report_recorded_on_this_cpu_machine_with_colours():
    raw = out("cpu-only", "ds_report.out")
    assert "\x1b[" in raw
    report = parse_ds_report(raw)
    assert report.accelerator == "cpu" and report.ninja_ok is True
    assert report.compatible("cpu_adam") is True and report.compatible("async_io") is False
    assert "\x1b" not in strip_ansi(raw)


def test_ds_report_old_deepspeed_on_rocm():
    report = parse_ds_report((TOOLS / "ds_report-old-deepspeed-rocm.txt").read_text())
    assert report.compatible("fused_adam") is False
    assert report.info["nvcc version"].startswith("[FAIL] cannot find CUDA_HOME")


def test_nvidia_smi_query_with_and_without_header():
    gpus = parse_nvidia_query(out("nvidia-h100x8", "nvidia_smi_query.out"))
    assert len(gpus) == 8 and gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert gpus[0].memory_mib == 81559 and gpus[0].compute_cap == "9.0" and gpus[0].driver == "565.57.01"
    l40s = parse_nvidia_query((TOOLS / "nvidia-smi-query-with-header-l40s.csv").read_text())
    assert [g.index for g in l40s] == [0, 1] and l40s[1].memory_mib == 46068
    assert parse_nvidia_query((TOOLS / "nvidia-smi-no-driver.txt").read_text()) == []


def test_nvidia_smi_table_header():
    assert parse_nvidia_table(out("nvidia-h100x8", "nvidia_smi.out")) == {"driver": "565.57.01", "cuda": "12.7"}


def test_id_outputs():
    assert parse_id_groups("uid=1000(ubuntu) gid=1000(ubuntu) groups=1000(ubuntu),4(adm),27(sudo),44(video),"
                           "993(render)\n") == ["ubuntu", "adm", "sudo", "video", "render"]
    assert parse_id_groups(out("cpu-only", "id.out")) == ["root"]
    assert parse_id_groups("alice sudo video render\n") == ["alice", "sudo", "video", "render"]
    assert parse_id_groups("") is None
    assert parse_id_user(out("mi300x8-not-in-render-group", "id.out")) == (1001, "alice")


def test_proc_files():
    assert kernel_args("BOOT_IMAGE=/vmlinuz ro iommu=pt quiet -- --init")["iommu"] == "pt"
    assert "--init" not in kernel_args("ro -- --init")
    mem = parse_meminfo("MemTotal:       24684096 kB\nMemAvailable:   21732740 kB\n")
    assert mem == {"MemTotal": 24684096 * 1024, "MemAvailable": 21732740 * 1024}


def test_versions():
    assert parse_version("2.7.1+rocm6.3") == (2, 7, 1)
    assert parse_version("0.49.1") == (0, 49, 1)
    assert parse_version("garbage") is None


def test_probe_lines_survive_library_noise_and_crashes():
    text = ("/opt/rocm/lib/libamd_smi.so: cannot open shared object file\n"
            "\nDEVTUNE-PROBE {\"version\": \"2.7.1+rocm6.3\", \"hip\": \"6.3.42131\"}\n"
            "DEVTUNE-PROBE {broken\n"
            "\nDEVTUNE-PROBE {\"imports\": {\"a\": {\"ok\": true}}}\n"
            "\nDEVTUNE-PROBE {\"imports\": {\"b\": {\"ok\": false}}}\n")
    merged = parse_probe_lines(text)
    assert merged["version"] == "2.7.1+rocm6.3"
    assert merged["imports"] == {"a": {"ok": True}, "b": {"ok": False}}
    assert parse_probe_lines("Illegal instruction (core dumped)\n") is None
