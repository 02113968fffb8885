"""The library backends map the real libraries' return shapes; the automatic choice explains itself; on
this GPU-less machine every backend fails cleanly, with nothing printed."""

import sys
from types import SimpleNamespace

import pytest

from core.train.gpu.amd_smi import open_amd_smi_cli
from core.train.gpu.amdsmi_lib import open_amdsmi_lib
from core.train.gpu.backend import GpuBackendUnavailable, run_tool
from core.train.gpu.choose import choose_backend
from core.train.gpu.nvml import open_nvml
from core.train.gpu.rocm_smi import open_rocm_smi
from tests.core.test_gpu_parsers import text

MIB = 1024 * 1024


def fake_amdsmi(n=2, *, metrics=True, process_handles=False):
    """The dict shapes of ROCm/amdsmi py-interface/amdsmi_interface.py ("N/A" for max-uint values)."""
    calls = {"metrics": 0, "vram": 0, "process": 0, "init": 0, "shutdown": 0}

    def metrics_info(h):
        calls["metrics"] += 1
        if not metrics:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        return {"temperature_edge": "N/A", "temperature_hotspot": 45 + h, "temperature_mem": 40,
                "average_gfx_activity": 97, "average_socket_power": "N/A", "current_socket_power": 512 + h,
                "current_gfxclk": 2100, "average_gfxclk_frequency": "N/A", "current_uclk": 1300}

    def vram_usage(h):
        calls["vram"] += 1
        return {"vram_total": 196592, "vram_used": 8000 + h}

    def process_list(h):
        calls["process"] += 1
        if process_handles:
            return ["ph0"]
        return [{"name": "N/A", "pid": 1000 + h, "mem": 0, "engine_usage": {"gfx": 0, "enc": 0},
                 "memory_usage": {"gtt_mem": 1, "cpu_mem": 2, "vram_mem": 7 * MIB}}]

    lib = SimpleNamespace(
        calls=calls,
        amdsmi_init=lambda: calls.__setitem__("init", calls["init"] + 1),
        amdsmi_shut_down=lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        amdsmi_get_processor_handles=lambda: list(range(n)),
        amdsmi_get_gpu_asic_info=lambda h: {"market_name": "AMD Instinct MI300X", "target_graphics_version": "gfx942"},
        amdsmi_get_power_cap_info=lambda h: {"power_cap": 750_000_000, "default_power_cap": 750_000_000},
        amdsmi_get_gpu_device_bdf=lambda h: f"0000:{0x1b + h:02x}:00.0",
        amdsmi_get_gpu_board_info=lambda h: {"product_serial": "692409006566"},
        amdsmi_get_gpu_metrics_info=metrics_info,
        amdsmi_get_gpu_vram_usage=vram_usage,
        amdsmi_get_gpu_process_list=process_list,
        amdsmi_get_gpu_process_info=lambda h, p: {"name": "python", "pid": 4242,
                                                  "memory_usage": {"vram_mem": 3 * MIB}},
        amdsmi_get_gpu_activity=lambda h: {"gfx_activity": 55, "umc_activity": 1, "mm_activity": "N/A"},
        amdsmi_get_temp_metric=lambda h, kind, metric: {"EDGE": 33, "HOTSPOT": 44}[kind],
        amdsmi_get_power_info=lambda h: {"current_socket_power": "N/A", "average_socket_power": 90},
        AmdSmiTemperatureType=SimpleNamespace(EDGE="EDGE", HOTSPOT="HOTSPOT"),
        AmdSmiTemperatureMetric=SimpleNamespace(CURRENT="CURRENT"),
    )
    return lib


def test_amdsmi_library_one_metrics_and_one_vram_call_per_gpu_per_tick():
    lib = fake_amdsmi(2)
    backend = open_amdsmi_lib(lib)
    lib.calls.update(metrics=0, vram=0, process=0)
    for _ in range(5):
        samples = backend.sample()
    assert lib.calls["metrics"] == 10 and lib.calls["vram"] == 10
    assert lib.calls["process"] == 2  # once per GPU in 5 ticks: every PROCESS_EVERY ticks, not every tick
    s = samples[1]
    assert (s.name, s.backend, s.index) == ("AMD Instinct MI300X", "amdsmi", 1)
    assert (s.temp_c, s.temp_sensor) == (46.0, "hotspot")
    assert (s.power_w, s.power_cap_w, s.util_pct) == (513.0, 750.0, 97.0)
    assert (s.vram_used, s.vram_total) == (8001 * MIB, 196592 * MIB)
    assert s.processes[0].pid == 1001 and s.processes[0].name == "N/A"
    assert [x.card for x in samples] == [0, 0]  # one serial shared: one card
    backend.close()
    assert lib.calls["shutdown"] == 1


def test_amdsmi_without_metrics_table_and_rocm_6_0_process_handles():
    backend = open_amdsmi_lib(fake_amdsmi(1, metrics=False, process_handles=True))
    (s,) = backend.sample()
    assert (s.util_pct, s.temp_c, s.temp_sensor, s.power_w) == (55.0, 33.0, "edge", 90.0)
    assert s.processes[0].pid == 4242 and s.processes[0].vram_bytes == 3 * MIB


def test_amdsmi_init_failure_and_no_gpus():
    lib = fake_amdsmi(0)
    with pytest.raises(GpuBackendUnavailable, match="lists no GPU"):
        open_amdsmi_lib(lib)

    def fail():
        raise RuntimeError("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    lib.amdsmi_init = fail
    with pytest.raises(GpuBackendUnavailable, match="DRIVER_NOT_LOADED"):
        open_amdsmi_lib(lib)


def test_real_amdsmi_import_on_a_gpu_less_machine_fails_quietly(run_python):
    """amdsmi prints to stdout and raises KeyError when libamd_smi.so is missing (cpu-stack.md §7)."""
    proc = run_python("from core.train.gpu.amdsmi_lib import open_amdsmi_lib\n"
                      "from core.train.gpu.backend import GpuBackendUnavailable\n"
                      "try:\n    open_amdsmi_lib().close()\nexcept GpuBackendUnavailable as e:\n"
                      "    import sys; print('REASON', e, file=sys.stderr)\n"
                      "else:\n    import sys; print('OPENED', file=sys.stderr)\n")
    assert proc.returncode == 0, proc.stderr
    if "OPENED" in proc.stderr:
        pytest.skip("this machine has an AMD GPU the amdsmi library can read")
    assert proc.stdout == ""  # the binding's own print was held back
    assert "REASON" in proc.stderr and ("libamd_smi" in proc.stderr or "not installed" in proc.stderr)


def fake_nvml(n=2):
    util = SimpleNamespace(gpu=99, memory=40)
    mem = SimpleNamespace(total=81559 * MIB, used=72341 * MIB, free=9218 * MIB)
    return SimpleNamespace(
        NVML_TEMPERATURE_GPU=0, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: n,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=f"00000000:{0x18 + h:02X}:00.0"),
        nvmlDeviceGetUtilizationRates=lambda h: util, nvmlDeviceGetMemoryInfo=lambda h: mem,
        nvmlDeviceGetTemperature=lambda h, s: 56, nvmlDeviceGetPowerUsage=lambda h: 612345,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000,
        nvmlDeviceGetClockInfo=lambda h, c: {1: 1980, 2: 2619}[c],
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=48210 + h, usedGpuMemory=72338 * MIB)],
        nvmlSystemGetProcessName=lambda pid: "python",
    )


def test_nvml_units_mw_to_w_and_bytes():
    (a, b) = open_nvml(fake_nvml()).sample()
    assert (b.name, b.util_pct, b.temp_c, b.temp_sensor) == ("NVIDIA H100 80GB HBM3", 99.0, 56.0, "gpu")
    assert (b.power_w, b.power_cap_w, b.sclk_mhz, b.mclk_mhz) == (612.345, 700.0, 1980, 2619)
    assert (b.vram_used, b.vram_total, b.bdf) == (72341 * MIB, 81559 * MIB, "00000000:19:00.0")
    assert b.processes[0].pid == 48211 and b.processes[0].vram_bytes == 72338 * MIB


def test_real_nvml_on_a_gpu_less_machine():
    pytest.importorskip("pynvml")
    try:
        open_nvml().close()
    except GpuBackendUnavailable as exc:
        assert "NVML" in str(exc) or "Driver" in str(exc)
    else:
        pytest.skip("this machine has an NVIDIA GPU")


def canned(outputs: dict[str, str]):
    def run(argv):
        return outputs[argv[0] + " " + argv[1]]

    return run


def test_amd_smi_cli_backend_from_recorded_outputs():
    run = canned({"amd-smi static": text("amd-smi_static_gpu_data_mi300x_x8.json"),
                  "amd-smi metric": text("amd-smi_metric_gpu_data_mi300x_x8.json"),
                  "amd-smi process": text("amd-smi_process_mi300x_x8.json")})
    backend = open_amd_smi_cli(run)
    samples = backend.sample()
    assert len(samples) == 8 and samples[7].processes[0].pid == 207593
    assert samples[0].name == "AMD Instinct MI300X"


def test_amd_smi_cli_without_render_group_says_so():
    run = canned({"amd-smi static": text("amd-smi_static_nonroot_banner.txt")})
    with pytest.raises(GpuBackendUnavailable, match="render group"):
        open_amd_smi_cli(run)


def test_rocm_smi_backend_from_recorded_outputs():
    run = canned({"rocm-smi --showproductname": text("rocm-smi_static_mi250_x4.json"),
                  "rocm-smi --showuse": text("rocm-smi_metric_mi250_x4.json")})
    assert [s.power_cap_w for s in open_rocm_smi(run).sample()] == [560.0] * 4


def test_run_tool_never_uses_a_shell_and_reports_failures():
    with pytest.raises(GpuBackendUnavailable, match="not found on PATH"):
        run_tool(["devtune-no-such-tool-xyz"])
    with pytest.raises(GpuBackendUnavailable, match="exited 3"):
        run_tool([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"])
    with pytest.raises(GpuBackendUnavailable, match="did not answer"):
        run_tool([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    assert run_tool([sys.executable, "-c", "print('ok')"]).strip() == "ok"


def test_choose_backend_order_and_reason():
    def fails(why):
        def opener():
            raise GpuBackendUnavailable(why)
        return opener

    sentinel = SimpleNamespace(name="rocm-smi", close=lambda: None)
    backend, reason = choose_backend(openers={"amdsmi": fails("libamd_smi.so missing"),
                                              "amd-smi": fails("amd-smi not found on PATH"),
                                              "rocm-smi": lambda: sentinel, "nvml": fails("never asked")})
    assert backend is sentinel
    assert reason.startswith("rocm-smi") and "libamd_smi.so missing" in reason and "never asked" not in reason


def test_choose_backend_with_no_gpu_says_so_plainly(monkeypatch):
    monkeypatch.delenv("DEVTUNE_GPU_BACKEND", raising=False)
    backend, reason = choose_backend()  # the real backends, on this GPU-less machine
    if backend is not None:
        backend.close()
        pytest.skip(f"this machine has a GPU ({reason})")
    assert backend is None
    assert reason.startswith("no GPU on this machine (CPU run)")
    for name in ("amdsmi library", "amd-smi CLI", "rocm-smi", "NVML"):
        assert name in reason


def test_choose_backend_forced_by_environment(monkeypatch, tmp_path):
    from tests.core.test_gpu_parsers import F

    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "none")
    assert choose_backend()[0] is None
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", f"replay:{F / 'replay_h100_x8.jsonl'}")
    backend, reason = choose_backend()
    assert backend.name == "replay" and "not this machine's GPUs" in reason
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "cuda")
    backend, reason = choose_backend()  # checked by core/settings.py: the variable and what it accepts
    assert backend is None and "DEVTUNE_GPU_BACKEND=cuda" in reason and "rocm-smi" in reason
    backend, reason = choose_backend("cuda")  # asked for by name (a flag): said as unknown
    assert backend is None and "unknown GPU backend" in reason
    backend, reason = choose_backend(replay=tmp_path / "missing.jsonl")
    assert backend is None and "no GPU samples" in reason


def _igpu_nvidia_machine():
    """The GPU panels' view of the Ryzen-iGPU + RTX 4090 machine, from its recorded rocminfo and nvidia-smi."""
    from pathlib import Path

    from core.setup.machine_kind import machine_from_outputs

    commands = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines" / "ryzen-igpu-rtx4090" / "commands"
    return machine_from_outputs(rocminfo=(commands / "rocminfo.out").read_text(),
                                nvidia_query=(commands / "nvidia_smi_query.out").read_text(), kfd=True,
                                rocm_version="7.2.0", nvidia_driver=True)


def test_an_nvidia_machine_with_a_ryzen_igpu_samples_nvml_never_the_igpu(monkeypatch):
    monkeypatch.delenv("DEVTUNE_GPU_BACKEND", raising=False)
    opened = []

    def igpu():  # amdsmi would open and list the iGPU: it must not even be tried
        opened.append("amdsmi")
        return SimpleNamespace(name="amdsmi", close=lambda: None)

    nvml = SimpleNamespace(name="nvml", close=lambda: None)
    machine = _igpu_nvidia_machine()
    assert machine.kind == "nvidia"
    backend, reason = choose_backend(openers={"amdsmi": igpu, "amd-smi": igpu, "rocm-smi": igpu, "nvml": lambda: nvml},
                                     machine=machine)
    assert backend is nvml and opened == []
    assert reason.startswith("NVML") and "not sampled: AMD Radeon Graphics (gfx1036): an integrated GPU" in reason


def test_an_nvidia_machine_whose_nvml_fails_shows_no_amd_gpu_instead(monkeypatch):
    monkeypatch.delenv("DEVTUNE_GPU_BACKEND", raising=False)

    def missing():
        raise GpuBackendUnavailable("NVML Shared Library Not Found")

    backend, reason = choose_backend(openers={"amdsmi": lambda: SimpleNamespace(name="amdsmi"), "nvml": missing},
                                     machine=_igpu_nvidia_machine())
    assert backend is None
    assert reason == "none of the nvidia GPU backends works: NVML: NVML Shared Library Not Found"
