"""Fixtures shared by every test folder, and the test tiers.

Tiers by cost, not by folder. A test that starts the real stack (LLaMA-Factory, torch, DeepSpeed, vLLM or
Slurm) or installs packages is marked `stack`, automatically, from the fixtures it uses: `tiny_model`
and `lf_env` (whose users train, export or serve), or one of the `uses_*` fixtures below that a test
requests to say what it starts. `make check` runs everything not marked e2e, serve or stack; `make test`
runs all. In the check tier the screens get recorded services instead of the real ones (the doctor judges
the recorded CPU machine, the Config step reads LLaMA-Factory's recorded template list), and a test that
loads a stack library into the test process without being marked fails with the fixture to request."""

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


STACK_FIXTURES = {"tiny_model", "lf_env", "uses_llamafactory", "uses_torch", "uses_install"}
STACK_MODULES = ("torch", "transformers", "llamafactory", "deepspeed", "vllm", "peft", "datasets")
FIXTURES = ROOT / "tests" / "fixtures"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if STACK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.stack)


def _requires(module: str, what: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{what} ({module}) is not installed in this environment: run `make envs`")


@pytest.fixture(scope="session")
def uses_llamafactory():
    """The test starts LLaMA-Factory (its CLI, its argument parser, its template list)."""
    _requires("llamafactory", "LLaMA-Factory")


@pytest.fixture(scope="session")
def uses_torch():
    """The test starts torch (torchrun, the doctor's real probes, the tiny model built by `devtune demo`)."""
    _requires("torch", "PyTorch")


@pytest.fixture(scope="session")
def uses_install():
    """The test builds a wheel or a virtual environment and installs into it."""


@pytest.fixture(autouse=True)
def _tier(request, monkeypatch):
    """Outside the stack tier: recorded services for the screens, and a check that nothing of the stack was
    loaded into this process by a test that did not say so."""
    if request.node.get_closest_marker("stack") or request.node.get_closest_marker("e2e"):
        yield
        return
    if Path(str(request.node.fspath)).parent.name in ("tui", "snapshots"):  # the screens' services, recorded
        if not os.environ.get("DEVTUNE_DOCTOR_REPLAY"):  # the CPU machine's real probes, recorded
            monkeypatch.setenv("DEVTUNE_DOCTOR_REPLAY", str(FIXTURES / "doctor" / "machines" / "cpu-only"))
        _recorded_template_catalog(monkeypatch)
    before = {m for m in STACK_MODULES if m in sys.modules}
    yield
    loaded = sorted({m for m in STACK_MODULES if m in sys.modules} - before)
    if loaded:
        pytest.fail(f"this test loaded {', '.join(loaded)} into the test process but is not in the stack tier: "
                    "request the fixture that says what it starts (tiny_model, uses_torch, uses_llamafactory, "
                    "... in tests/conftest.py)", pytrace=False)


def _recorded_template_catalog(monkeypatch) -> None:
    """LLaMA-Factory's template list as the installed version printed it (tests/fixtures/config/
    lf_templates.json; tests/core/test_config_lfcheck.py proves the recording is still what it prints)."""
    import json

    from core.config import templates

    recorded = json.loads((FIXTURES / "config" / "lf_templates.json").read_text(encoding="utf-8"))
    if recorded["version"] != templates.installed_llamafactory_version():
        return  # a new LLaMA-Factory: the real list (tests/core/test_config_lfcheck.py says to record it again)
    catalog = templates.TemplateCatalog(tuple(recorded["names"]), dict(recorded["hub"]), "llamafactory",
                                        recorded["version"])
    real = templates.load_catalog

    def recorded_catalog(cache_file=None, *, cached_only: bool = False, **_kw):
        return real(cache_file, cached_only=True) if cached_only else catalog

    monkeypatch.setattr(templates, "load_catalog", recorded_catalog)


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
def devtune_console():
    """Run the installed `devtune` console script in a process of its own (the smoke tests of the entry point,
    and commands whose work must outlive a call: a language switch, a wizard)."""

    def run(*args: str, **kw) -> subprocess.CompletedProcess:
        env = {**os.environ, **kw.pop("env", {})}
        return subprocess.run([str(VENV_BIN / "devtune"), *args], capture_output=True, text=True,
                              timeout=kw.pop("timeout", 300), env=env, **kw)

    return run


@pytest.fixture
def devtune_cli(devtune_console):
    """`devtune ARGS` answered by `cli.main.main(ARGS)` in this process, as a CompletedProcess (returncode,
    stdout, stderr): the same parser, handlers and exit codes as the console script, without a fresh
    interpreter per call. `env=` and `cwd=` apply for the call only. A `--lang` other than English goes to
    the console script: translated module-level texts must not outlive the call in this process."""

    def run(*args: str, **kw) -> subprocess.CompletedProcess:
        if any(a == "--lang" or a.startswith("--lang=") for a in args) or "DEVTUNE_LANG" in kw.get("env", {}):
            return devtune_console(*args, **kw)
        return _in_process(list(args), env=kw.pop("env", {}), cwd=kw.pop("cwd", None), stdin=kw.pop("input", None))

    return run


def _in_process(args: list[str], *, env: dict, cwd, stdin: str | None) -> subprocess.CompletedProcess:
    import contextlib
    import io

    from cli.main import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    saved = sys.stdout, sys.stderr, sys.stdin
    try:
        os.environ.update({k: str(v) for k, v in env.items()})
        if cwd is not None:
            os.chdir(cwd)
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO(stdin or "")
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: --help, a usage error
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    with contextlib.suppress(ValueError):
        out.flush(), err.flush()
    text = lambda stream: stream.buffer.getvalue().decode("utf-8", errors="replace")  # noqa: E731
    return subprocess.CompletedProcess(["devtune", *args], code, text(out), text(err))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny LLaMA model, built once per test session (a few seconds)."""
    from core.setup.tinymodel import build_tiny_model

    out = tmp_path_factory.mktemp("tiny") / "tiny-llama3"
    return build_tiny_model(out, ROOT / "data")
