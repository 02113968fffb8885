"""core/settings.py: one checked object for the DEVTUNE_* variables and the workspace's preferences, and no
other module reading those variables on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.errors import BadInput
from core.settings import Preferences, Settings, current, load, peek, theme, variables

ROOT = Path(__file__).resolve().parents[2]
# DEVTUNE_LANG: read by core.i18n before the parser is built (see core/settings.py's docstring).
# core/train/rank_site/sitecustomize.py runs inside each training rank before anything is imported: it cannot
# import devtune (the rank's interpreter need not find it), so it reads the one variable launch.py sets itself
ALLOWED = {ROOT / "core" / "settings.py", ROOT / "core" / "i18n" / "__init__.py",
           ROOT / "core" / "train" / "rank_site" / "sitecustomize.py"}


def test_variables_are_read_typed_and_blank_means_unset():
    s = load({"DEVTUNE_WORKSPACE": "/w", "DEVTUNE_GPU_BACKEND": "nvml", "DEVTUNE_THEME": "  ",
              "DEVTUNE_UNRELATED": "x", "HOME": "/root"})
    assert s == Settings(workspace="/w", gpu_backend="nvml")
    assert s.theme is None
    assert load({}).model_dump() == dict.fromkeys(Settings.model_fields)


def test_the_first_frame_peeks_without_pydantic(run_python):
    assert peek("theme", {"DEVTUNE_THEME": " nord "}) == "nord"
    assert peek("theme", {"DEVTUNE_THEME": " "}) is None and peek("workspace", {}) is None
    assert variables({"DEVTUNE_THEME": "x", "DEVTUNE_SOMETHING_ELSE": "y"}) == {"theme": "x"}
    proc = run_python("import sys, core.settings as s\ns.peek('theme')\nprint('pydantic' in sys.modules)")
    assert proc.returncode == 0 and proc.stdout.split()[-1] == "False", proc.stderr


def test_a_wrong_value_names_the_variable_and_what_it_accepts():
    with pytest.raises(BadInput) as info:
        load({"DEVTUNE_GPU_BACKEND": "cuda"})
    message = str(info.value)
    assert message.startswith("DEVTUNE_GPU_BACKEND=cuda: ")
    assert "rocm-smi" in message and "replay:<folder>" in message
    assert load({"DEVTUNE_GPU_BACKEND": "replay:/tmp/rec"}).gpu_backend == "replay:/tmp/rec"


def test_environment_round_trips_for_a_child_process():
    s = load({"DEVTUNE_SERVE_PYTHON": "/opt/serve/bin/python", "DEVTUNE_DOCTOR_REPLAY": "rec"})
    assert s.environment() == {"DEVTUNE_SERVE_PYTHON": "/opt/serve/bin/python", "DEVTUNE_DOCTOR_REPLAY": "rec"}
    assert load(s.environment()) == s


def test_current_follows_the_process_environment(monkeypatch):
    monkeypatch.delenv("DEVTUNE_GPU_BACKEND", raising=False)
    assert current().gpu_backend is None
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "none")
    assert current().gpu_backend == "none"
    assert current() is current()  # read once for a given environment


def test_the_consumers_read_the_settings(monkeypatch, tmp_path):
    from core.doctor.replay import replay_folder
    from core.train.gpu.choose import choose_backend
    from core.workspace.layout import Workspace

    monkeypatch.setenv("DEVTUNE_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "none")
    monkeypatch.setenv("DEVTUNE_DOCTOR_REPLAY", str(tmp_path / "rec"))
    assert Workspace.resolve().root == tmp_path.resolve()
    assert Workspace.resolve(tmp_path / "other").root == (tmp_path / "other").resolve()  # -w wins
    backend, reason = choose_backend()
    assert backend is None and "DEVTUNE_GPU_BACKEND=none" in reason
    assert replay_folder() == str(tmp_path / "rec") and replay_folder("given") == "given"


def test_the_cli_refuses_a_wrong_variable_before_any_step(devtune_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "cuda")
    out = devtune_cli("-w", str(tmp_path), "runs")
    assert out.returncode == 2
    assert "DEVTUNE_GPU_BACKEND=cuda" in out.stderr


def test_preferences_keep_what_the_wizard_remembers():
    prefs = Preferences.of({"theme": "nord", "data.template": "qwen"})
    assert (prefs.theme, prefs.data_template) == ("nord", "qwen")
    assert Preferences.of(None).data_template == "llama3"
    assert prefs.stored(data_template="glm4") == {"theme": "nord", "data.template": "glm4"}
    assert theme(load({}), prefs) == "nord"
    assert theme(load({"DEVTUNE_THEME": "dracula"}), prefs) == "dracula"  # the variable wins


def _devtune_constants(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str) and node.value.value.startswith("DEVTUNE_"):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _reads_devtune_variable(node: ast.AST, constants: set[str]) -> bool:
    def named(arg: ast.AST) -> bool:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value.startswith("DEVTUNE_")
        return isinstance(arg, ast.Name) and arg.id in constants

    if isinstance(node, ast.Call) and node.args:
        func = node.func
        target = ast.unparse(func)
        if target.endswith(("environ.get", "getenv", "env.get")):
            return named(node.args[0])
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
        return isinstance(node.ctx, ast.Load) and named(node.slice)
    return False


def test_no_other_module_reads_a_devtune_variable():
    offenders = []
    for folder in ("core", "cli", "tui", "screens"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in ALLOWED:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            constants = _devtune_constants(tree)
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                          if _reads_devtune_variable(node, constants)]
    assert not offenders, "read DEVTUNE_* through core.settings.current(): " + ", ".join(offenders)
