"""DESIGN.md's house rules, proven at run time in fresh interpreters."""

import pkgutil
from pathlib import Path


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


def _first_leaks(run_python, steps: dict[str, str], forbidden) -> dict[str, list[str]]:
    """Run each step's statement in turn in ONE fresh interpreter; {step: the forbidden modules it loaded
    first}. Nothing is ever unloaded, so the interpreter is clean at the end exactly when no step loaded
    anything forbidden, and a step that did is named (the first of the steps that share a culprit)."""
    import json

    code = (f"import contextlib, io, json, sys\nforbidden = {tuple(forbidden)!r}\nout = {{}}\n"
            f"steps = {steps!r}\nfor step, statement in steps.items():\n"
            "    before = {m for m in forbidden if m in sys.modules}\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try:\n            exec(statement, {})\n        except SystemExit:\n            pass\n"
            "    new = sorted({m for m in forbidden if m in sys.modules} - before)\n"
            "    if new:\n        out[step] = new\nprint(json.dumps(out))\n")
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_core_never_loads_the_ui_or_heavy_libraries_at_import(run_python):
    """Every core module, imported in one interpreter in turn (a fresh interpreter each cost 120 starts)."""
    modules = core_modules()
    assert len(modules) > 100
    leaked = _first_leaks(run_python, {m: f"import {m}" for m in modules}, UI + HEAVY)
    assert not leaked, f"core modules that load the UI or a heavy library at import: {leaked}"


def test_the_one_interpreter_check_names_the_module_that_leaks(run_python):
    named = _first_leaks(run_python, {"clean": "import core.files.atomic", "leaky": "import textual.app",
                                      "late": "import textual.app"}, ("textual",))
    assert named == {"leaky": ["textual"]}  # the first to load it is named; a later one finds it loaded


def test_help_loads_no_ui_and_no_heavy_library(run_python):
    statement = ("import contextlib, io\nfrom cli.main import main\n"
                 "with contextlib.redirect_stdout(io.StringIO()):\n"
                 "    try:\n        main(['--help'])\n    except SystemExit:\n        pass")
    leaked = _leaked(run_python, statement, UI + HEAVY + ("pydantic", "httpx", "yaml"))
    assert not leaked, f"devtune --help loaded {leaked}"


def test_every_subcommand_help_is_light(run_python):
    from cli.main import build_parser

    _, names = build_parser()
    steps = {name: f"from cli.main import main\nmain([{name!r}, '--help'])" for name in sorted(names)}
    leaked = _first_leaks(run_python, steps, UI + HEAVY)
    assert not leaked, f"`devtune NAME --help` loaded: {leaked}"
