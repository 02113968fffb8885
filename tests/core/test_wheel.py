"""The wheel holds every file the app reads: built from this checkout, installed (not editable) into a fresh
virtual environment, it answers `devtune --help`, seeds the demo from its own sample data, and opens every
step of the wizard headless with no error.

The fresh environment has no packages of its own: a .pth file lends it the test environment's third-party
libraries (a .pth line adds a folder to sys.path without running that folder's own .pth files, so the
test environment's editable devtune stays out), and the wheel is installed with --no-deps. Nothing of
the checkout is on its sys.path: every devtune module and data file comes from the installed wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("uses_install")

OPEN_EVERY_STEP = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path

    import tui
    assert Path(tui.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), tui.__file__

    from core.setup.demo import seed_demo
    from core.workspace.layout import Workspace
    from tui.app import DevtuneApp

    ws = Workspace(Path(sys.argv[1]))
    seed_demo(ws, with_model=False)

    async def main():
        app = DevtuneApp(ws, watch_terminal=False)
        async with app.run_test(size=(120, 40)) as pilot:
            for number, step in enumerate(app.steps, 1):
                await pilot.press(str(number))
                for _ in range(400):
                    await pilot.pause(0.05)
                    if app.current_mode == step.id and app.screen.is_mounted:
                        break
                else:
                    raise SystemExit(f"step {step.id} did not open")
                error = app.screen.query_one("#step-error")
                assert not error.has_class("-visible"), (step.id, str(error.render()))
                print("opened", step.id, type(app.screen).__name__, flush=True)

    asyncio.run(main())
""")


def build_wheel(out: Path) -> Path:
    """The wheel of the checkout's own files (those git tracks or would track), built in a copy of them: a
    build folder or egg-info left in the checkout by an earlier build cannot lend the wheel a file."""
    import shutil

    source = out / "source"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, source / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out / "dist")], check=True, capture_output=True, text=True, timeout=300)
    return next((out / "dist").glob("devtune-*.whl"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory, wheel) -> Path:
    """A fresh virtual environment with devtune installed from its wheel."""
    work = tmp_path_factory.mktemp("venv")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "test_environment_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", "--no-index",
                    str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    return venv


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DEVTUNE_", "VIRTUAL_ENV"))}
    return {**env, "DEVTUNE_LANG": "en"}


def test_the_wheel_holds_every_file_the_app_reads(wheel):
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = [p.relative_to(ROOT).as_posix() for pkg in ("core", "cli", "tui", "screens")
              for p in (ROOT / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    missing = [w for w in wanted if w not in names]
    assert not missing, f"files of the source tree the wheel lacks (pyproject.toml's package-data): {missing}"
    samples = [p.name for p in (ROOT / "data").iterdir() if p.is_file()]
    assert all(any(n.endswith(f".data/data/share/devtune/data/{s}") for n in names) for s in samples), samples


def test_the_installed_wheel_runs_help_and_opens_every_step(installed, tmp_path):
    help_out = subprocess.run([str(installed / "bin" / "devtune"), "--help"], capture_output=True, text=True,
                              cwd=tmp_path, env=clean_env(), timeout=120)
    assert help_out.returncode == 0, help_out.stderr
    assert "Step 1" in help_out.stdout
    opened = subprocess.run([str(installed / "bin" / "python"), "-c", OPEN_EVERY_STEP, str(tmp_path / "ws")],
                            capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=600)
    assert opened.returncode == 0, opened.stdout + opened.stderr
    assert [line.split()[1] for line in opened.stdout.splitlines() if line.startswith("opened")] == \
        ["data", "doctor", "config", "train", "merge", "playground"]
    assert (tmp_path / "ws" / "data" / "support_messy.jsonl").is_file()  # the samples came with the wheel
