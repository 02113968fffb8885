"""DESIGN.md's house rules, proven at run time in fresh interpreters."""

import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UI = ("textual", "rich")
HEAVY = ("torch", "transformers", "tokenizers", "llamafactory", "deepspeed", "vllm", "amdsmi", "pynvml",
         "numpy", "datasets", "peft")


def core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(ROOT / "core")], prefix="core."):
        if info.name in ("core.setup.install",):  # the set-up script runs with the system Python
            continue
        names.append(info.name)
    return names


def _leaked(run_python, statement: str, forbidden) -> list[str]:
    proc = run_python(f"{statement}\nimport sys\nprint(','.join(m for m in {tuple(forbidden)!r} if m in sys.modules))")
    assert proc.returncode == 0, proc.stderr
    return [m for m in proc.stdout.strip().splitlines()[-1].split(",") if m] if proc.stdout.strip() else []


@pytest.mark.parametrize("module", core_modules())
def test_core_never_loads_the_ui_or_heavy_libraries_at_import(run_python, module):
    leaked = _leaked(run_python, f"import {module}", UI + HEAVY)
    assert not leaked, f"import {module} loaded {leaked}"


def test_help_loads_no_ui_and_no_heavy_library(run_python):
    statement = ("import contextlib, io\nfrom cli.main import main\n"
                 "with contextlib.redirect_stdout(io.StringIO()):\n"
                 "    try:\n        main(['--help'])\n    except SystemExit:\n        pass")
    leaked = _leaked(run_python, statement, UI + HEAVY + ("pydantic", "httpx", "yaml"))
    assert not leaked, f"devtune --help loaded {leaked}"


def test_every_subcommand_help_is_light(run_python, devtune_cli):
    from cli.main import build_parser

    _, names = build_parser()
    for name in sorted(names):
        statement = ("import contextlib, io\nfrom cli.main import main\n"
                     "with contextlib.redirect_stdout(io.StringIO()):\n"
                     f"    try:\n        main([{name!r}, '--help'])\n    except SystemExit:\n        pass")
        leaked = _leaked(run_python, statement, UI + HEAVY)
        assert not leaked, f"devtune {name} --help loaded {leaked}"
