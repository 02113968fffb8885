"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

# Tests never reach the network and never use the person's caches or language.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ["DEVTUNE_LANG"] = "en"
os.environ["TEXTUAL_ANIMATIONS"] = "none"


@pytest.fixture
def workspace(tmp_path):
    from core.workspace.layout import Workspace

    return Workspace(tmp_path / "ws").ensure()


@pytest.fixture
def run_python():
    """Run a snippet in a fresh interpreter of the test environment."""

    def run(code: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, timeout=120, **kw)

    return run


@pytest.fixture
def devtune_cli():
    """Run the installed `devtune` console script."""

    def run(*args: str, **kw) -> subprocess.CompletedProcess:
        env = {**os.environ, **kw.pop("env", {})}
        return subprocess.run([str(VENV_BIN / "devtune"), *args], capture_output=True, text=True,
                              timeout=kw.pop("timeout", 300), env=env, **kw)

    return run


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny LLaMA model, built once per test session (a few seconds)."""
    from core.setup.tinymodel import build_tiny_model

    out = tmp_path_factory.mktemp("tiny") / "tiny-llama3"
    return build_tiny_model(out, ROOT / "data")
