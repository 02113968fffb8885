import json
import multiprocessing as mp

import pytest

from core.files.atomic import FileExistsRefused, write_atomic, write_new
from core.workspace.layout import (SCHEMA_VERSION, StateFromNewerDevtune, StateUnreadable, StepStatus, WizardState,
                            Workspace)


def test_layout_is_created(workspace):
    for sub in ("data", "configs", "saves", "exports", ".devtune/runs", ".devtune/servers"):
        assert (workspace.root / sub).is_dir(), sub


def test_resolve_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEVTUNE_WORKSPACE", raising=False)
    assert Workspace.resolve().root == tmp_path.resolve()
    monkeypatch.setenv("DEVTUNE_WORKSPACE", str(tmp_path / "env"))
    assert Workspace.resolve().root == (tmp_path / "env").resolve()
    assert Workspace.resolve(tmp_path / "arg").root == (tmp_path / "arg").resolve()


def test_state_round_trip_and_schema_version(workspace):
    state = workspace.load_state()
    assert state.schema_version == SCHEMA_VERSION and state.current_step == "data"
    state.set_step("data", StepStatus.DONE, "24 rows, clean")
    state.dataset_name = "support"
    workspace.save_state(state)
    again = workspace.load_state()
    assert again.step("data").status is StepStatus.DONE
    assert again.dataset_name == "support"
    assert json.loads(workspace.state_file.read_text())["schema_version"] == SCHEMA_VERSION


def test_unreadable_state_is_kept_aside_not_lost(workspace):
    workspace.state_file.write_text("{not json")
    with pytest.raises(StateUnreadable) as exc:
        workspace.load_state()
    kept = list(workspace.state_dir.glob("state.json.unreadable-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json"
    assert kept[0].name in str(exc.value)
    assert workspace.load_state() == WizardState()


def test_newer_state_is_never_overwritten(workspace):
    workspace.state_file.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "current_step": 7}))
    before = workspace.state_file.read_text()
    with pytest.raises(StateFromNewerDevtune):
        workspace.load_state()
    with pytest.raises(StateFromNewerDevtune):
        workspace.update_state(lambda s: None)
    assert workspace.state_file.read_text() == before


def _bump(root: str, n: int) -> None:
    ws = Workspace(__import__("pathlib").Path(root))
    for _ in range(n):
        ws.update_state(lambda s: s.settings.__setitem__("count", str(int(s.settings.get("count", "0")) + 1)))


def test_lock_serialises_two_processes(workspace):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(str(workspace.root), 40)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert workspace.load_state().settings["count"] == "80"


def test_atomic_write_leaves_old_file_on_error(tmp_path):
    target = tmp_path / "f.txt"
    write_atomic(target, "old")

    class Boom(Exception):
        pass

    from core.files.atomic import atomic_open

    with pytest.raises(Boom):
        with atomic_open(target) as fh:
            fh.write("half")
            raise Boom
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_write_new_refuses_existing(tmp_path):
    target = tmp_path / "mine.jsonl"
    target.write_text("user data")
    with pytest.raises(FileExistsRefused):
        write_new(target, "x")
    assert target.read_text() == "user data"
    write_new(target, "x", force=True)
    assert target.read_text() == "x"


def test_file_mode(tmp_path):
    path = write_atomic(tmp_path / "key", "secret", file_mode=0o600)
    assert (path.stat().st_mode & 0o777) == 0o600
