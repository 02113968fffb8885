"""Every hint runs as printed (issue 21, finding 6): the `devtune ...` commands that train, runs, monitor,
diagnose, stop, resume, check-export, config check and doctor suggest in their output are collected and
run from the workspace folder, as the person would paste them. Starting a process (a training run, an
export) is replaced by a recorder: reaching it means the command was accepted and did its checks.

A hint with a placeholder in capitals (RUN, NAME.jsonl, HOST) is a template, not a command: it is not
run, but its command and flags must exist."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from core.train.runs import RunStatus
from tests.core.config_workspace import fake_model, register_dataset
from tests.recorded_runs import place_recorded_run
from cli.main import build_parser, main

BACKTICKED = re.compile(r"`(devtune [^`]+)`")
BARE = re.compile(r"(?<![\w`/-])(devtune [a-z][\w-]*(?: (?! )[^\s`'\"）)，。；;]+)*)")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b|<[^>]+>")


def suggested_commands(text: str) -> list[str]:
    found = BACKTICKED.findall(text)
    rest = BACKTICKED.sub(" ", text)
    found += [m.rstrip(".,:") for m in BARE.findall(rest)]
    return list(dict.fromkeys(c.strip() for c in found))


def test_the_collector_finds_backticked_and_bare_commands():
    text = ("failed; `devtune diagnose r1` explains the logs\n"
            "  follow it: devtune monitor r1 --follow    stop it: devtune stop r1\n"
            "Merge it (`devtune merge r1`), or ...: devtune config init.")
    assert suggested_commands(text) == ["devtune diagnose r1", "devtune merge r1", "devtune monitor r1 --follow",
                                        "devtune stop r1", "devtune config init"]


class Started(Exception):
    pass


@pytest.fixture
def hint_workspace(workspace, monkeypatch):
    """A workspace as the README's journey leaves it part-way: data registered, a config, a failed run, a
    stopped run, a finished run; processes are not started (recorded instead)."""
    import core.merge.export as export
    import core.train.launch as launch
    import core.train.runs as runs

    started: list[list[str]] = []

    def record_start(ws, argv, **kw):
        started.append(list(argv))
        raise Started(" ".join(argv))

    for module in (runs, launch, export):
        monkeypatch.setattr(module, "start_run", record_start)
    fake_model(workspace)
    register_dataset(workspace)
    assert main(["config", "init", "--preset", "cpu-demo", "--model", "models/tiny-llama3",
                 "-w", str(workspace.root)]) == 0
    place_recorded_run(workspace, "20260101-000000-bad", "lf_unknown_template", RunStatus.FAILED, 1, started=1.0)
    place_recorded_run(workspace, "20260102-000000-stopped", "lf_nan_loss", RunStatus.STOPPED, 0, started=2.0)
    place_recorded_run(workspace, "20260103-000000-done", "lf_normal", RunStatus.FINISHED, 0, started=3.0)
    (workspace.root / "saves" / "20260103-000000-done" / "adapter_config.json").write_text("{}")
    monkeypatch.chdir(workspace.root)
    return workspace


SOURCES = [
    ("runs",), ("monitor", "20260101-000000-bad"), ("monitor", "20260102-000000-stopped"), ("diagnose",),
    ("diagnose", "20260101-000000-bad"), ("stop", "20260103-000000-done"), ("resume", "20260103-000000-done"),
    ("check-export", "exports/nope"), ("config", "check", "--no-llamafactory"), ("config", "show"),
    ("train", "--detach", "--config", "configs/missing.yaml"),
]


def _output(capsys, argv) -> str:
    capsys.readouterr()
    try:
        main(list(argv))
    except (Started, SystemExit):
        pass
    out = capsys.readouterr()
    return out.out + out.err


def test_every_suggested_command_runs_as_printed(hint_workspace, capsys):
    hints: dict[str, str] = {}
    for argv in SOURCES:
        for command in suggested_commands(_output(capsys, argv)):
            hints.setdefault(command, " ".join(argv))
    assert len(hints) >= 4, hints
    parser, names = build_parser()
    failures = []
    for command, source in hints.items():
        words = shlex.split(command)[1:]
        assert words[0] in names, f"`{command}` (from `devtune {source}`) names no command"
        if PLACEHOLDER.search(command):
            continue
        capsys.readouterr()
        try:
            code = main(words)
        except Started:
            code = 0  # accepted: it got as far as starting the process
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        if code == 2:
            failures.append(f"`{command}` (suggested by `devtune {source}`) exits 2: {out.err.strip()[:300]}")
    assert not failures, "\n".join(failures)


def test_diagnose_of_the_failed_run_from_its_note(hint_workspace, capsys):
    rows = json.loads(_output(capsys, ("runs", "--json")))["runs"]
    note = next(r["note"] for r in rows if r["status"] == "failed")
    (command,) = suggested_commands(note)
    capsys.readouterr()
    assert main(shlex.split(command)[1:]) == 1  # a known failure found, with its fix
    assert "template" in capsys.readouterr().out.lower()
