"""House rules proven over the whole tree: no shell anywhere, and secrets (HF_TOKEN, API keys) never
reach the YAML files, run records or logs devtune writes."""

import ast
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("core", "cli", "tui", "screens", "bench", "tests")
SHELL_CALLS = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput")}


def python_files():
    for folder in SOURCE_DIRS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_no_code_path_uses_a_shell():
    offenders = []
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} shell={ast.unparse(kw.value)}")
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and (func.value.id, func.attr) in SHELL_CALLS:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {func.value.id}.{func.attr}()")
    assert not offenders, "argv lists only, never a shell:\n" + "\n".join(offenders)


SECRET = "hf_devtuneSECRETtoken0123456789"


def _files_under(folder: Path):
    return [p for p in folder.rglob("*") if p.is_file()]


def test_hf_token_never_reaches_configs_run_records_or_logs(workspace, monkeypatch):
    from core.config.files import save_config
    from core.config.presets import preset_spec
    from core.train.runs import refresh, run_dir, start_run
    from core.train.launch import training_env

    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", SECRET)
    spec = preset_spec("cpu-demo", ["support"])
    save_config(workspace, spec)
    env = training_env(workspace, {"OMP_NUM_THREADS": "1"}, "saves/x")
    assert SECRET not in repr(env)
    # the trainer inherits the token (it needs it for gated models) without devtune recording it
    probe = "import os,sys; print('token present' if os.environ.get('HF_TOKEN') else 'no token'); sys.exit(0)"
    rec = start_run(workspace, [sys.executable, "-c", probe], env=env, label="secret", output_dir="saves/x")
    deadline = time.time() + 60
    while refresh(run_dir(workspace, rec.id)).active and time.time() < deadline:
        time.sleep(0.1)
    assert "token present" in (run_dir(workspace, rec.id) / "stdout.log").read_text()
    leaked = [str(p.relative_to(workspace.root)) for p in _files_under(workspace.root)
              if SECRET.encode() in p.read_bytes()]
    assert not leaked, f"HF_TOKEN written to {leaked}"
