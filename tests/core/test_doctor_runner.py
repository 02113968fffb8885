"""The probe layer and the runner: the real probes on this machine, hung tools and probes that never
come back, record and replay, re-checking one check."""

import copy
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from core.files.atomic import FileExistsRefused
from core.doctor import runner
from core.doctor.commands import run_command
from core.doctor.evidence import Evidence
from core.doctor.model import OK, SKIP, WARN
from core.doctor.probes import Probe, DoctorContext, collect_env, find_serve_python
from core.doctor.registry import get_verdict
from core.doctor.runner import CheckJudged, DoctorFinished, ProbeFinished, iter_doctor, replay, run_doctor

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def this_machine(tmp_path_factory, uses_torch):
    """The whole doctor, for real, on this CPU-only machine (once for the module)."""
    from core.workspace.layout import Workspace

    ws = Workspace(tmp_path_factory.mktemp("ws")).ensure()
    ctx = DoctorContext.for_this_machine(ws)
    events = list(iter_doctor(ctx))
    return ctx, events


def test_real_probes_on_this_cpu_machine(this_machine):
    ctx, events = this_machine
    done = events[-1]
    assert isinstance(done, DoctorFinished)
    report, ev = done.report, done.evidence
    checks = {c.id: c for c in report.checks}
    assert report.machine == "cpu"
    assert set(ev.probe_state.values()) == {"done"}, ev.probe_state
    assert checks["platform.machine"].status == WARN
    assert checks["torch.build"].status == OK and "+cpu" in checks["torch.build"].evidence
    assert checks["libraries.llamafactory"].status == OK and "0.9.5" in checks["libraries.llamafactory"].evidence
    assert checks["libraries.deepspeed"].status == OK and "accelerator cpu" in checks["libraries.deepspeed"].evidence
    assert checks["access.kfd"].status == SKIP and checks["rocm.smi"].status == SKIP
    assert not report.failed, [(c.id, c.evidence) for c in report.checks if c.status == "fail"]
    if ctx.serve_python:  # the serving venv is part of this machine's set-up
        assert checks["serving.vllm"].status == OK and "platform: cpu" in checks["serving.vllm"].evidence
    assert ev.host["workspace"] == str(ctx.workspace.root)
    assert ev.plan["source"] == "generic"


def test_checks_arrive_before_the_slow_probes_finish(this_machine):
    _, events = this_machine
    order = [e.name if isinstance(e, ProbeFinished) else e.check.id for e in events
             if isinstance(e, (ProbeFinished, CheckJudged))]
    last_probe = max(i for i, e in enumerate(events) if isinstance(e, ProbeFinished))
    first_check = min(i for i, e in enumerate(events) if isinstance(e, CheckJudged))
    assert first_check < last_probe, order
    # a check is judged only once every probe it needs has finished
    finished = set()
    for event in events:
        if isinstance(event, ProbeFinished):
            finished.add(event.name)
        elif isinstance(event, CheckJudged):
            assert set(get_verdict(event.check.id).needs) <= finished


def test_record_and_replay_give_the_same_report(this_machine, tmp_path):
    _, events = this_machine
    live = events[-1]
    live.evidence.save(tmp_path / "rec")
    again, _ = replay(tmp_path / "rec")
    assert [(c.id, c.status, c.evidence) for c in again.checks] == \
           [(c.id, c.status, c.evidence) for c in live.report.checks]
    with pytest.raises(FileExistsRefused):  # a recording is never overwritten silently
        live.evidence.save(tmp_path / "rec")


def test_recheck_one_check_reruns_only_its_probes(this_machine):
    ctx, events = this_machine
    ev = copy.deepcopy(events[-1].evidence)  # the module's recording stays as the other tests read it
    before_torch, before_ds = ev.commands["torch"], ev.commands["ds_report"]
    verdict = get_verdict("torch.build")
    out = list(iter_doctor(ctx, [verdict], evidence=ev))
    probes = {e.name for e in out if isinstance(e, ProbeFinished)}
    assert probes == set(verdict.needs)
    assert ev.commands["torch"] is not before_torch and ev.commands["ds_report"] is before_ds
    assert [c.id for c in out[-1].report.checks] == ["torch.build"]


def _script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_a_hung_tool_never_hangs_the_doctor(tmp_path):
    """rocminfo hangs; amd-smi answers with an MI300X box's output: the doctor finishes, says which."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir, "rocminfo", "sleep 300\n")
    static = MACHINES / "mi300x8" / "commands" / "amd_smi_static.out"
    version = MACHINES / "mi300x8" / "commands" / "amd_smi_version.out"
    _script(bin_dir, "amd-smi", f'if [ "$1" = static ]; then cat {static}; else cat {version}; fi\n')
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    ctx = DoctorContext(env=env, timeout_scale=0.1)  # rocminfo: 2 s, amd-smi: 3 s
    verdicts = [get_verdict(i) for i in ("rocm.smi", "rocm.arch", "rocm.driver")]
    report, ev = run_doctor(ctx, verdicts)
    assert ev.commands["rocminfo"].timed_out and ev.commands["rocminfo"].returncode is None
    checks = {c.id: c for c in report.checks}
    assert checks["rocm.smi"].status == OK and "lists 8 GPUs" in checks["rocm.smi"].evidence
    assert checks["rocm.arch"].status == OK and "gfx942" in checks["rocm.arch"].evidence


def test_a_probe_that_never_returns_is_given_up_on(monkeypatch):
    release = threading.Event()
    probes = dict(runner.PROBES_BY_NAME)
    probes["plan"] = Probe("plan", 0.2, lambda ctx: release.wait(60) and {})
    monkeypatch.setattr(runner, "PROBES_BY_NAME", probes)
    monkeypatch.setattr(runner, "GRACE_SECONDS", 0.1)
    try:
        events = list(iter_doctor(DoctorContext(), [get_verdict("system.disk")]))
    finally:
        release.set()
    states = {e.name: e.state for e in events if isinstance(e, ProbeFinished)}
    assert states["plan"] == "timeout"
    report = events[-1].report
    assert report.checks[0].status == SKIP and events[-1].evidence.probe_state["plan"] == "timeout"


def test_a_probe_that_raises_is_recorded_and_the_rest_is_judged(monkeypatch):
    def broken(ctx):
        raise RuntimeError("probe bug")

    probes = dict(runner.PROBES_BY_NAME)
    probes["plan"] = Probe("plan", 5, broken)
    monkeypatch.setattr(runner, "PROBES_BY_NAME", probes)
    report, ev = run_doctor(DoctorContext(), [get_verdict("system.disk"), get_verdict("system.shm")])
    assert ev.probe_state["plan"] == "error" and "probe bug" in ev.host["probe_error_plan"]
    assert len(report.checks) == 2


def test_run_command_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    _script(tmp_path, "spawner", f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    result = run_command([str(tmp_path / "spawner")], timeout=1)
    assert result.timed_out and not result.ok
    grandchild = int(pid_file.read_text())
    for _ in range(50):  # the kill is asynchronous: poll until the process is gone
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the grandchild survived the timeout")


def test_run_command_results():
    assert run_command(["definitely-not-a-tool-xyz"], timeout=5).missing
    assert run_command(["/nonexistent/tool"], timeout=5).missing
    result = run_command([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                         timeout=30)
    assert (result.returncode, result.stdout, result.stderr.strip()) == (3, "out\n", "err")
    assert not result.ok and result.ran


def test_variant_machines_extend_their_base():
    ev = Evidence.load(MACHINES / "mi300x8-no-driver")
    assert ev.devices == {"/dev/kfd": {"exists": False}}  # null removed the render nodes
    assert ev.files["/opt/rocm/.info/version"] == "7.2.1-81\n"  # kept from the base
    assert ev.commands["rocminfo"].returncode == 1 and "NOT loaded" in ev.commands["rocminfo"].stdout
    assert "AMDSMI_STATUS_DRIVER_NOT_LOADED" in ev.commands["amd_smi_static"].stderr
    assert ev.commands["amd_smi_static"].stdout == ""  # a variant's output replaces both streams
    assert ev.commands["hipconfig"].stdout.startswith("7.2")


def test_extends_loops_and_missing_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "machine.json").write_text('{"extends": "b"}')
    (tmp_path / "b" / "machine.json").write_text('{"extends": "a"}')
    with pytest.raises(ValueError):
        Evidence.load(tmp_path / "a")
    with pytest.raises(FileNotFoundError):
        Evidence.load(tmp_path)


def test_serving_python_is_found_next_to_the_training_venv(tmp_path):
    serve = tmp_path / "repo" / ".venv-serve" / "bin" / "python"
    serve.parent.mkdir(parents=True)
    serve.write_text("")
    train = str(tmp_path / "repo" / ".venv" / "bin" / "python")
    assert find_serve_python(train, {}) == str(serve)
    assert find_serve_python(train, {"DEVTUNE_SERVE_PYTHON": "/x/python"}) == "/x/python"
    assert find_serve_python(str(tmp_path / "elsewhere" / "bin" / "python"), {}) is None


def test_secrets_never_enter_the_evidence():
    env = collect_env({"HF_TOKEN": "hf_abc", "HF_HOME": "/data/hf", "PATH": "/bin", "NCCL_DEBUG": "INFO",
                       "AWS_SECRET_ACCESS_KEY": "x", "HUGGING_FACE_HUB_TOKEN": "hf_def"})
    assert env == {"HF_HOME": "/data/hf", "HF_TOKEN": "<set>", "NCCL_DEBUG": "INFO"}


def test_a_stopped_run_ends_without_waiting_for_its_probes(monkeypatch):
    release = threading.Event()
    probes = dict(runner.PROBES_BY_NAME)
    probes["plan"] = Probe("plan", 600, lambda ctx: release.wait(60) and {})
    monkeypatch.setattr(runner, "PROBES_BY_NAME", probes)
    stop = threading.Event()
    try:
        events = []
        for event in iter_doctor(DoctorContext(), [get_verdict("system.disk"), get_verdict("system.shm")],
                                 should_stop=stop.is_set):
            events.append(event)
            if isinstance(event, CheckJudged):  # system.shm does not need the hung probe
                stop.set()
    finally:
        release.set()
    assert any(isinstance(e, CheckJudged) and e.check.id == "system.shm" for e in events)
    assert not any(isinstance(e, DoctorFinished) for e in events)
