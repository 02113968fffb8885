"""One error contract (core/errors.py): every error core raises for a person to act on is a DevtuneError whose
kind gives its exit code; cli.main maps them once, and no command handler picks an exit code by a number."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from core.errors import EXIT_PROBLEMS, EXIT_USAGE, BadInput, DevtuneError, Failed, Refused, Unavailable

ROOT = Path(__file__).resolve().parents[2]
# exceptions that never reach a person: control flow inside one module
INTERNAL = {"core.processes.helpers.HelpersClosed"}


def core_exception_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in core/ whose name says it is an error."""
    found = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith(
                    ("Error", "Refused", "Missing", "Problem", "Mismatch", "Closed", "NotFound", "Bad")):
                found.append((module, node.name))
    return found


def test_every_core_error_is_a_devtune_error_of_one_kind():
    classes = core_exception_classes()
    assert len(classes) > 25
    loose = []
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        if f"{module}.{name}" in INTERNAL or not issubclass(cls, BaseException):
            continue
        if not issubclass(cls, DevtuneError) or cls.exit_code not in (EXIT_PROBLEMS, EXIT_USAGE):
            loose.append(f"{module}.{name}")
    assert not loose, f"errors outside core/errors.py's kinds (base them on BadInput, Unavailable, Refused or Failed): {loose}"


@pytest.mark.parametrize(("kind", "code"), [(BadInput, 2), (Unavailable, 2), (Refused, 1), (Failed, 1)])
def test_main_turns_each_kind_into_its_exit_code_once(kind, code, capsys):
    from cli.main import main

    def handler(_args):
        raise kind("what went wrong, and what to do")

    import cli.main as cli_main

    parser, names = cli_main.build_parser()
    original = cli_main.build_parser
    parser.set_defaults(handler=handler)
    cli_main.build_parser = lambda: (parser, names)
    try:
        assert main([]) == code
    finally:
        cli_main.build_parser = original
    assert capsys.readouterr().err == "devtune: what went wrong, and what to do\n"


def test_a_refusal_keeps_its_own_code_beside_its_family():
    from core.data.holdout import BadHoldout, HoldoutError
    from core.data.register import RegisterError, RegisterRefused
    from core.serve.servers import ServerError, ServerNotFound

    assert RegisterRefused("x").exit_code == 1 and RegisterError("x").exit_code == 2
    assert HoldoutError("x").exit_code == 1 and BadHoldout("x").exit_code == 2
    assert ServerError("x").exit_code == 1 and ServerNotFound("x").exit_code == 2
    assert isinstance(ServerNotFound("x"), ServerError)  # a caller of the family still catches it


def test_no_command_handler_returns_an_exit_code_by_number():
    """Outcomes return EXIT_OK / EXIT_PROBLEMS by name; errors are raised and mapped by cli.main."""
    numbered = []
    for path in sorted((ROOT / "cli" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Return) and node.value is not None:
                parts = [node.value] if not isinstance(node.value, ast.IfExp) else [node.value.body,
                                                                                     node.value.orelse]
                if any(isinstance(p, ast.Constant) and type(p.value) is int for p in parts):
                    numbered.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not numbered, "exit codes by number (use core.errors' names, or raise):\n" + "\n".join(numbered)
