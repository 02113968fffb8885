"""What the Train step says about a run holds (issue 21, findings 1-4, 6 and 11): anomalies judged on the
run's own steps, the text and the JSON of `monitor` from one report, a stopped run's record frozen when
a resume writes on, rates that a resume cannot inflate, `diagnose` taking a run id or nothing, and a
run that would train zero steps refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from core.train.runs import RunStatus, find_run, refresh, run_dir, start_run
from tests import processes
from tests.recorded_runs import LOGS, place_recorded_run
from cli.main import main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------- finding 1 and 2

def test_finished_demo_run_has_no_false_alarm_and_text_and_json_agree(workspace, capsys):
    """The real demo run (loss 7.6 -> 0.10, with a real bump half-way): the bump is over, nothing holds now.
    Before: `monitor` printed the bump's old window ("0.9459 -> 1.01") while --json said []."""
    place_recorded_run(workspace, "demo", "lf_demo_cpu", RunStatus.FINISHED, 0, started=1.0)
    code, out, err = cli(capsys, "monitor", "demo", "-w", str(workspace.root))
    assert code == 0 and "!" not in out + err and "loss" in out
    code, out_json, _ = cli(capsys, "monitor", "demo", "--json", "-w", str(workspace.root))
    report = json.loads(out_json)
    assert report["anomalies"] == [] and report["step"] == report["total"] == 640
    assert f"step {report['step']}/{report['total']}" in out and f"loss {report['loss']:.4f}" in out


def test_an_anomaly_that_holds_is_in_both_renderings(workspace, capsys):
    place_recorded_run(workspace, "nan", "lf_nan_loss", RunStatus.FINISHED, 0, started=1.0)
    _c, out, err = cli(capsys, "monitor", "nan", "-w", str(workspace.root))
    _c, out_json, _e = cli(capsys, "monitor", "nan", "--json", "-w", str(workspace.root))
    messages = [a["message"] for a in json.loads(out_json)["anomalies"]]
    text = [line[2:] for line in (out + err).splitlines() if line.startswith("! ")]
    assert messages and sorted(text) == sorted(messages)


# ---------------------------------------------------------------- finding 3

FAKE_TRAINER = r"""
import sys, pathlib
src, out, first, last = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lines = pathlib.Path(src).read_bytes().splitlines(keepends=True)[first:last]
out.mkdir(parents=True, exist_ok=True)
with open(out / "trainer_log.jsonl", "ab") as fh:
    fh.writelines(lines)
"""


def _fake_run(ws, first: int, last: int, **kw):
    src = LOGS / "lf_resume" / "trainer_log.jsonl"  # steps 1-14 (the stopped run), then 11-400 (its resume)
    return start_run(ws, [sys.executable, "-c", FAKE_TRAINER, str(src), str(ws.root / "saves/r"), str(first),
                          str(last)], env={}, label="r", output_dir="saves/r", **kw)


def test_a_stopped_run_keeps_its_own_numbers_after_a_resume(workspace, capsys):
    first = _fake_run(workspace, 0, 14)
    assert processes.wait(lambda: not refresh(run_dir(workspace, first.id)).active, 30)
    before = json.loads(cli(capsys, "monitor", first.id, "--json", "-w", str(workspace.root))[1])
    second = _fake_run(workspace, 14, 10_000, resume_of=first.id)
    assert processes.wait(lambda: not refresh(run_dir(workspace, second.id)).active, 30)
    after = json.loads(cli(capsys, "monitor", first.id, "--json", "-w", str(workspace.root))[1])
    resumed = json.loads(cli(capsys, "monitor", second.id, "--json", "-w", str(workspace.root))[1])
    assert before["step"] == after["step"] == 14 and after["loss"] == before["loss"]
    assert resumed["step"] == 400 and resumed["resume_of"] == first.id
    assert (run_dir(workspace, first.id) / "trainer_log.jsonl").read_bytes().count(b"\n") == 14


# ---------------------------------------------------------------- finding 4

def test_resumed_run_shows_no_rate_from_the_jump_to_its_checkpoint(workspace, capsys):
    """The real resume of lf_resume: HF's bar jumps to step 11 at once (tqdm said thousands of it/s)."""
    record = place_recorded_run(workspace, "again", "lf_resume", RunStatus.FINISHED, 0, started=1.0)
    d = run_dir(workspace, record.id)
    (d / "stderr.log").write_bytes((LOGS / "lf_resume" / "part2.stderr.head.log").read_bytes())
    report = json.loads(cli(capsys, "monitor", "again", "--json", "-w", str(workspace.root))[1])
    rate = report["throughput"]["steps_per_s"]
    assert rate is None or rate < 100  # the tiny model does tens of steps per second at most


# ---------------------------------------------------------------- finding 6

def test_diagnose_takes_a_run_id_and_defaults_to_the_newest_failed_run(workspace, capsys):
    place_recorded_run(workspace, "20260101-000000-bad", "lf_unknown_template", RunStatus.FAILED, 1, started=1.0)
    place_recorded_run(workspace, "20260102-000000-ok", "lf_normal", RunStatus.FINISHED, 0, started=2.0)
    code, out, _err = cli(capsys, "diagnose", "-w", str(workspace.root))
    assert code == 1 and "template" in out.lower()
    assert cli(capsys, "diagnose", "20260101-000000-bad", "-w", str(workspace.root))[:2] == (code, out)
    code, _out, err = cli(capsys, "diagnose", "no-such-run", "-w", str(workspace.root))
    assert code == 2 and "no-such-run" in err


def test_the_failed_runs_note_names_a_diagnose_that_runs(workspace, capsys):
    place_recorded_run(workspace, "20260101-000000-bad", "lf_unknown_template", RunStatus.FAILED, 1, started=1.0)
    record = find_run(workspace, None)
    assert f"`devtune diagnose {record.id}`" in record.note
    code, out, _err = cli(capsys, "diagnose", record.id, "-w", str(workspace.root))
    assert code == 1 and out


# ---------------------------------------------------------------- finding 11

def _checkpoint(out: Path, step: int, max_steps: int, epochs: float = 3.0) -> None:
    ck = out / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": step, "max_steps": max_steps,
                                                       "num_train_epochs": epochs}))


def _wait_ended(ws, run_id: str, timeout: float = 120) -> None:
    import time

    deadline = time.monotonic() + timeout
    while refresh(run_dir(ws, run_id)).active:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_a_new_run_never_resumes_a_checkpoint_it_was_not_asked_to(workspace, capsys, uses_llamafactory):
    """Issue 16: a second run in a folder that holds a finished run's checkpoint used to auto-resume it (or,
    before issue 21, trained zero steps). Now every run gets a folder of its own; the config stays as it is."""
    cfg = workspace.root / "configs" / "train.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    text = ("model_name_or_path: models/m\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
            "dataset: support\ntemplate: llama3\noutput_dir: saves/done\nnum_train_epochs: 3.0\n")
    cfg.write_text(text)
    _checkpoint(workspace.root / "saves" / "done", 90, 90)
    # the config's check reports errors (no model at models/m, no dataset registered): the runs fail at once,
    # which is all this test needs, so it trains them with --force (devtune train refuses them otherwise)
    code, _out, err = cli(capsys, "train", "--detach", "--force", "--config", str(cfg), "-w", str(workspace.root))
    assert code == 0 and "saves/done is not empty" in err and "saves/done-2" in err
    first = find_run(workspace, None)
    assert first.output_dir == "saves/done-2" and first.source_config == "configs/train.yaml"
    copy = (workspace.root / first.config).read_text()
    assert "output_dir: saves/done-2" in copy and first.config in first.argv
    assert cfg.read_text() == text  # the person's config is not touched
    _wait_ended(workspace, first.id)

    _checkpoint(workspace.root / "saves" / "done-2", 5, 90)  # as if that run had saved a checkpoint
    cfg2 = cfg.with_name("again.yaml")
    cfg2.write_text(text.replace("saves/done\n", "saves/done-2\n"))
    code, _out, err = cli(capsys, "train", "--detach", "--force", "--config", str(cfg2), "-w", str(workspace.root))
    second = find_run(workspace, None)
    assert code == 0 and second.output_dir == "saves/done-3"
    assert f"saves/done-2 holds the results of run {first.id}" in err and f"devtune resume {first.id}" in err
    _wait_ended(workspace, second.id)


def test_resume_of_a_finished_run_is_refused():
    from core.config.resume_point import nothing_left_to_train

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        _checkpoint(out, 50, 90)
        assert nothing_left_to_train(out) is None
        _checkpoint(out, 90, 90)
        assert "zero steps" in nothing_left_to_train(out)
        assert nothing_left_to_train(out, epochs=6.0) is None  # the config now asks for more epochs
        assert nothing_left_to_train(out, max_steps=200) is None
