"""amd-smi and rocm-smi JSON, in every shape the fixtures record, become the same GpuSamples."""

from pathlib import Path

import pytest

from core.train.gpu import amd_smi, rocm_smi
from core.train.gpu.sample import MIB, GpuProcess, GpuSample, as_number, pick_temperature

F = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"


def text(name: str) -> str:
    return (F / name).read_text()


def test_amd_smi_gpu_data_shape_mi300x_reports_hotspot_because_edge_is_absent():
    static = amd_smi.parse_static(text("amd-smi_static_gpu_data_mi300x_x8.json"))
    samples = amd_smi.parse_metric(text("amd-smi_metric_gpu_data_mi300x_x8.json"), 5.0, static)
    assert [s.index for s in samples] == list(range(8))
    first = samples[0]
    assert first.name == "AMD Instinct MI300X"
    assert (first.temp_c, first.temp_sensor) == (42.0, "hotspot")
    assert first.util_pct == 100.0 and first.power_w == 182.0 and first.power_cap_w == 750.0  # limit.ppt0 (26.2)
    assert first.vram_total == 196592 * MIB  # "MB" in amd-smi is MiB
    assert first.vram_used == (7889485824 // MIB) * MIB
    assert (first.sclk_mhz, first.mclk_mhz, first.bdf, first.ts, first.backend) == (2102, 1300, "0000:1b:00.0", 5.0,
                                                                                    "amd-smi")


def test_amd_smi_list_shape_reads_the_same_as_gpu_data():
    listed = amd_smi.parse_metric(text("amd-smi_metric_list_mi300x_x2.json"), 1.0)
    wrapped = amd_smi.parse_metric(text("amd-smi_metric_gpu_data_mi300x_x8.json"), 1.0)[:2]
    for a, b in zip(listed, wrapped, strict=True):
        assert a.to_record() == b.to_record()
    assert listed[0].name == "AMD GPU 0"  # no static info: a plain name, never a guess


def test_amd_smi_mi250_two_gcds_per_card_from_shared_board_serial_and_secondary_die_power():
    static = amd_smi.parse_static(text("amd-smi_static_list_mi250x_x4.json"))
    assert static[0].power_cap_w == 560.0  # early flat limit.socket_power
    samples = amd_smi.parse_metric(text("amd-smi_metric_list_mi250x_x4.json"), 1.0, static)
    assert [s.card for s in samples] == [0, 0, 1, 1]
    assert [s.power_w for s in samples] == [311.0, None, 298.0, None]
    assert all(s.temp_sensor == "edge" for s in samples)


def test_amd_smi_permission_banner_is_skipped_and_na_fields_are_none():
    static = amd_smi.parse_static(text("amd-smi_static_nonroot_banner.txt"))
    assert static[0].name == "" and static[0].power_cap_w is None and static[0].serial is None


def test_amd_smi_process_list():
    procs = amd_smi.parse_process(text("amd-smi_process_mi300x_x8.json"))
    assert procs[3] == [GpuProcess(pid=207588, name="pt_main_thread", vram_bytes=7822258176)]
    none_running = '[{"gpu": 0, "process_list": ["No running processes detected"]}]'
    assert amd_smi.parse_process(none_running) == {0: []}


def test_amd_smi_output_without_json_is_an_error():
    with pytest.raises(ValueError):
        amd_smi.parse_metric("WARNING: nothing here\n", 1.0)


def test_rocm_smi_mi250_secondary_die_and_strings():
    static = rocm_smi.parse_static(text("rocm-smi_static_mi250_x4.json"))
    samples = rocm_smi.parse_metric(text("rocm-smi_metric_mi250_x4.json"), 2.0, static)
    assert len(samples) == 4  # the "system" key is not a GPU
    assert samples[0].name == "AMD INSTINCT MI250 (MCM) OAM AC MBA"
    assert samples[1].power_w is None  # "N/A (Secondary die)"
    assert samples[0].power_w == 311.0 and samples[0].power_cap_w == 560.0
    assert (samples[0].temp_c, samples[0].temp_sensor) == (34.0, "edge")
    assert samples[0].vram_total == 68702699520 and samples[0].vram_used == 53248 * MIB
    assert (samples[0].sclk_mhz, samples[0].mclk_mhz, samples[0].bdf) == (1700, 1600, "0000:29:00.0")


def test_rocm_smi_mi300x_junction_is_hotspot_and_socket_power():
    samples = rocm_smi.parse_metric(text("rocm-smi_metric_mi300x_x4.json"), 1.0)
    assert (samples[2].temp_c, samples[2].temp_sensor) == (37.0, "hotspot")
    assert samples[3].power_w == 136.0 and samples[0].name == "AMD Instinct MI300X"


def test_rocm_smi_2019_lowercase_units():
    (s,) = rocm_smi.parse_metric(text("rocm-smi_metric_legacy_rocm2.json"), 1.0)
    assert (s.temp_c, s.temp_sensor, s.power_w, s.util_pct) == (77.0, "edge", 222.0, None)


@pytest.mark.parametrize("value, expected", [
    (42, 42.0), ("42.0", 42.0), ({"value": 7, "unit": "W"}, 7.0), ({"value": "N/A", "unit": "mV"}, None),
    ("N/A", None), ("N/A (Secondary die)", None), ("(800Mhz)", 800.0), (True, None), (float("nan"), None),
    ("133.0W", 133.0), (None, None),
])
def test_as_number(value, expected):
    assert as_number(value) == expected


def test_temperature_preference_edge_then_hotspot_then_mem():
    assert pick_temperature("N/A", 50, 40) == (50.0, "hotspot")
    assert pick_temperature(30, 50, 40) == (30.0, "edge")
    assert pick_temperature(None, "N/A", 40) == (40.0, "mem")
    assert pick_temperature() == (None, None)


def test_sample_record_round_trip_is_compact_and_tolerant():
    s = GpuSample(ts=1.5, backend="nvml", index=2, name="X", util_pct=99.0, vram_used=10, vram_total=20,
                  processes=[GpuProcess(pid=7, name="python", vram_bytes=None)], power_w=float("nan"))
    rec = s.to_record()
    assert "temp_c" not in rec and "power_w" not in rec  # None and non-finite left out
    back = GpuSample.from_record({**rec, "future_field": 1, "temp_sensor": "weird"})
    assert back.to_record() == rec and back.temp_sensor is None
    assert back.vram_fraction == 0.5
