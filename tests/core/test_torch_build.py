import pytest

from core.setup.torch_build import Hardware, choose_torch, read_rocm_version, rocm_index_for, rocm_index_url


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
])
def test_newest_index_not_newer_than_installed_rocm(rocm, index):
    assert rocm_index_for(rocm)[0] == index


def test_too_old_rocm_has_no_index():
    assert rocm_index_for("5.7.1") is None
    assert rocm_index_url("garbage") is None


def test_rocm_choice_uses_index_url_never_extra():
    choice = choose_torch(Hardware("rocm", "6.4.1", "ROCm 6.4.1"))
    cmd = choice.command()
    assert "--index-url https://download.pytorch.org/whl/rocm6.4" in cmd
    assert "--extra-index-url" not in cmd
    assert "torchaudio" in cmd


def test_cpu_and_nvidia_choices():
    assert choose_torch(Hardware("cpu")).index_url.endswith("/cpu")
    assert choose_torch(Hardware("nvidia")).index_url is None


def test_read_rocm_version(tmp_path):
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("6.4.1-120\n")
    assert read_rocm_version(tmp_path) == "6.4.1"
    assert read_rocm_version(tmp_path / "missing") is None
