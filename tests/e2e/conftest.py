import os
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def lf_env(tmp_path):
    """The environment devtune gives LLaMA-Factory on a CPU: one thread, caches kept local, offline."""
    cache = tmp_path / "cache"
    return {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "HF_HOME": str(cache / "hf"),
        "XDG_CACHE_HOME": str(cache),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
