"""`devtune demo` prints no library chatter: DeepSpeed's "[WARNING] Setting accelerator to CPU" (it comes
from transformers -> accelerate -> deepspeed while the tiny model is built) is silenced with DeepSpeed's own
logger, and transformers' shard progress bar with its own setting (core/setup/library_logs.py)."""

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None or
                                importlib.util.find_spec("transformers") is None,
                                reason="needs the training stack (.venv)")


def test_the_demo_command_prints_only_its_own_lines(devtune_cli, tmp_path, uses_torch):
    done = devtune_cli("demo", str(tmp_path / "demo"))
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "[WARNING]" not in output and "Setting accelerator" not in output and "Writing model shards" not in output
    assert "tiny model built" in done.stdout


def test_quieting_devtunes_own_process_leaves_its_childrens_environment_alone(monkeypatch, uses_torch):
    """The export and training processes devtune starts keep their progress bars (the Merge step reads them)."""
    import os
    import subprocess
    import sys

    from core.setup.library_logs import quiet_library_logs

    for name in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    quiet_library_logs()
    assert dict(os.environ) == before
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('HF_HUB_DISABLE_PROGRESS_BARS'))"],
                           capture_output=True, text=True)
    assert child.stdout.strip() == "None"
