import json

from cli.main import _split_workspace_positional, build_parser


def test_version_and_help(devtune_console):
    """The console script itself (most tests call main() in-process through devtune_cli)."""
    devtune_cli = devtune_console
    out = devtune_cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("devtune ")
    out = devtune_cli("--help")
    assert out.returncode == 0 and "demo" in out.stdout and "Exit codes" in out.stdout


def test_usage_error_exits_2(devtune_console):
    devtune_cli = devtune_console
    out = devtune_cli("demo")  # the command, not a folder named demo: say how to open that one
    assert out.returncode == 2 and "devtune demo DIR" in out.stderr and "devtune ./demo" in out.stderr
    out = devtune_cli("runs", "--no-such-flag")
    assert out.returncode == 2 and "--no-such-flag" in out.stderr


def test_a_wrong_flag_is_reported_with_its_commands_usage():
    """Issue 21: `devtune monitor --bogus` showed the top-level usage (COMMAND ...), not monitor's."""
    import contextlib
    import io

    import pytest

    from cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(["--lang", "en", "monitor", "--bogus"])
    assert exit_.value.code == 2
    assert "usage: devtune monitor" in err.getvalue() and "devtune monitor: error:" in err.getvalue()
    assert "--bogus" in err.getvalue()


def test_positional_workspace_is_not_a_command():
    _, names = build_parser()
    assert _split_workspace_positional(["myws"], names) == ([], "myws")
    assert _split_workspace_positional(["demo", "x"], names) == (["demo", "x"], None)
    assert _split_workspace_positional(["-w", "x", "demo", "y"], names) == (["-w", "x", "demo", "y"], None)
    assert _split_workspace_positional(["--lang", "zh", "myws"], names) == (["--lang", "zh"], "myws")
    assert _split_workspace_positional(["--lang", "zh", "runs"], names) == (["--lang", "zh", "runs"], None)


def test_wizard_refuses_without_a_terminal(devtune_console, tmp_path):
    devtune_cli = devtune_console
    out = devtune_cli(str(tmp_path))
    assert out.returncode == 2 and "terminal" in out.stderr


def test_demo_seeds_and_keeps_edits(devtune_cli, tmp_path, uses_torch):
    ws = tmp_path / "demo"
    first = devtune_cli("demo", str(ws))
    assert first.returncode == 0, first.stderr
    assert (ws / "data" / "support_messy.jsonl").exists()
    assert (ws / "models" / "tiny-llama3" / "model.safetensors").exists()
    meta = json.loads((ws / "models" / "tiny-llama3" / "devtune_model.json").read_text())
    assert meta["template"] == "llama3"
    (ws / "data" / "qa_pairs.json").write_text("[]")
    again = devtune_cli("demo", str(ws))
    assert again.returncode == 0
    assert "kept your edited files" in again.stdout and "qa_pairs.json" in again.stdout
    assert "already built" in again.stdout
    assert (ws / "data" / "qa_pairs.json").read_text() == "[]"
