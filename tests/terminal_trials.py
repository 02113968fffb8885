"""The trials of tests/e2e/test_terminal_loss.py: drive the real wizard under a pty (tests/pty_session.py) to a
moment, take its terminal away, and check what is left: the wizard, its descendants (bar the detached runs
and servers, told apart by run.json and server.json), the CPU it burned after the hang-up, the state file,
the run that was going."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from core.serve.servers import list_servers, stop_server
from core.train.run_control import stop_run
from core.train.runs import list_runs, read_record, refresh, run_dir
from core.workspace.layout import Workspace
from core.workspace.state import WizardState
from tests.pty_session import Descendant, PtySession, cpu_seconds

DEVTUNE = str(Path(sys.executable).parent / "devtune")
SIZES = ((80, 24), (120, 40))
MOMENTS = ("starting", "step", "help", "confirm", "lint", "lf-check", "merge", "serve")
ENDINGS = ("hang-up", "ctrl+q")
EXIT_WITHIN = 10.0
CPU_AFTER_HANGUP_MAX = 1.0  # seconds of CPU between the hang-up and the exit
F1, F5, F6, F8 = b"\x1bOP", b"\x1b[15~", b"\x1b[17~", b"\x1b[19~"
CTRL_Q = b"\x11"
BIG_FILE_BYTES = 66 << 20  # above the Data step's auto-lint size: linted when F5 asks, in worker processes


@dataclass
class TrialResult:
    moment: str
    size: tuple[int, int]
    ending: str = "hang-up"
    exit_seconds: float | None = None
    cpu_after: float = 0.0
    leftovers: list[str] = field(default_factory=list)
    helpers: int = 0  # descendants leading their own session (not runs or servers)
    children: int = 0  # descendants in the wizard's session (a lint's workers)
    detached: int = 0  # runs' and servers' processes
    state_ok: bool = True
    run_alive: bool = True
    started: bool = False  # the long action was seen under way (its process, record or dialog)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return (self.exit_seconds is not None and self.exit_seconds <= EXIT_WITHIN and not self.leftovers
                and self.cpu_after <= CPU_AFTER_HANGUP_MAX and self.state_ok and self.run_alive)


@dataclass
class Trials:
    ws: Workspace
    sleeper: str  # a detached run going through every trial
    trained: str | None = None  # a finished LoRA run of the tiny model (what Merge merges)


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def term_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TEXTUAL"))}
    bin_dir = str(Path(sys.executable).parent)
    env.update(TERM="xterm-256color", LANG="C.UTF-8", DEVTUNE_LANG="en", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return env


def write_big_file(path: Path) -> None:
    rng = random.Random(0)
    words = ("refund order shipping account password invoice delivery return warranty discount coupon payment "
             "card address phone email").split()
    with open(path, "w", encoding="utf-8") as fh:
        size, i = 0, 0
        while size < BIG_FILE_BYTES:
            row = {"instruction": f"Customer {i}: " + " ".join(rng.choice(words) for _ in range(12)) + "?",
                   "input": "", "output": f"Answer {i}: " + " ".join(rng.choice(words) for _ in range(40)) + "."}
            line = json.dumps(row) + "\n"
            fh.write(line)
            size, i = size + len(line), i + 1



def stop_servers(ws: Workspace) -> None:
    for server in list_servers(ws):
        try:
            stop_server(ws, server.id, grace=3)
        except Exception:  # noqa: BLE001 - cleaning up: a server that cannot be stopped is killed below
            pass


def detached_sessions(ws: Workspace) -> set[int]:
    """The sessions of devtune's detached runs and servers, from run.json and server.json: their supervisors,
    trainers and servers lead them."""
    sessions: set[int] = set()
    if ws.runs_dir.is_dir():
        for directory in ws.runs_dir.iterdir():
            try:
                record = read_record(directory)
            except Exception:  # noqa: BLE001 - a run folder being written: its supervisor is matched below
                continue
            sessions |= {ref.pid for ref in (record.supervisor, record.trainer) if ref is not None}
            sessions |= {record.pgid} if record.pgid else set()
    for server in list_servers(ws, include_ended=True):
        sessions |= {server.process.pid} if server.process is not None else set()
        sessions |= {server.pgid} if server.pgid else set()
    return sessions


def is_detached(ws: Workspace, proc: psutil.Process, sessions: set[int]) -> bool:
    """A process of a run or a server: in the session of one devtune recorded, or (started a moment before
    the hang-up, its pid not yet written) in one led by a supervisor of a run folder or a server started in
    a server folder of this workspace."""
    try:
        sid = os.getsid(proc.pid)
    except OSError:
        return False
    if sid in sessions:
        return True
    try:
        leader = psutil.Process(sid)
        argv = leader.cmdline()
        if "core.train.supervisor" in argv and any(a.startswith(str(ws.runs_dir)) for a in argv):
            return True
        return Path(leader.cwd()).parent == ws.servers_dir
    except (psutil.Error, OSError):
        return False


def classify(term: PtySession, ws: Workspace, result: TrialResult) -> None:
    """Count what the wizard had started: helpers (their own sessions), children in its session, runs' and
    servers' processes."""
    sessions = detached_sessions(ws)
    for d in list(term.seen.values()):
        if d.session in sessions:
            result.detached += 1
        elif d.session == term.proc.pid:
            result.children += 1
        else:
            result.helpers += 1


def leftovers(term: PtySession, ws: Workspace) -> list[tuple[Descendant, psutil.Process]]:
    sessions = detached_sessions(ws)
    return [(d, p) for d, p in term.still_alive() if not is_detached(ws, p, sessions)]


def hang_up_and_check(term: PtySession, t: Trials, result: TrialResult) -> TrialResult:
    ws, pid = t.ws, term.proc.pid
    term._closing.set()
    term._reader.join(2)
    before = cpu_seconds(pid)
    term.hang_up()
    deadline = term.hung_up_at + EXIT_WITHIN
    last = before
    while time.monotonic() < deadline and term.proc.poll() is None:
        now = cpu_seconds(pid)
        if now is not None:
            last = now
        time.sleep(0.05)
    if term.proc.poll() is not None:
        result.exit_seconds = round(time.monotonic() - term.hung_up_at, 2)
    else:
        result.detail = f"still running {EXIT_WITHIN:.0f} s after the hang-up"
    result.cpu_after = round((last or 0.0) - (before or 0.0), 2) if before is not None else 0.0
    term._sampler.join(2)
    # Every descendant recorded, and every process left in the wizard's session, gone by the deadline.
    wait_for(lambda: not leftovers(term, ws) and not [p for p in term.session_processes() if p.pid != pid],
             timeout=max(1.0, deadline - time.monotonic()))
    left = leftovers(term, ws)
    left += [(None, p) for p in term.session_processes()
             if p.pid != pid and p.status() != psutil.STATUS_ZOMBIE and all(p.pid != q.pid for _d, q in left)]
    result.leftovers = [f"{p.pid} {' '.join(p.cmdline()[:4])[:160]}" for _d, p in left if p.is_running()]
    for _d, p in left:  # so that one failure does not spill into the next trials
        try:
            p.kill()
        except psutil.Error:
            pass
    classify(term, ws, result)
    if ws.state_file.exists():
        try:
            WizardState.model_validate_json(ws.state_file.read_bytes())
        except ValueError as exc:
            result.state_ok, result.detail = False, f"state.json: {exc}"
    result.run_alive = refresh(run_dir(ws, t.sleeper)).active
    return result


STEP_IDS = ("data", "doctor", "config", "train", "merge", "playground")


def prepare(t: Trials, moment: str, rng: random.Random) -> None:
    """The wizard's state for the moment: the step it opens on (any), the file the Data step opens, the run
    Train and Merge show."""
    run = t.trained if moment == "merge" and t.trained else t.sleeper

    def mutate(state: WizardState) -> None:
        state.current_step = rng.choice(STEP_IDS)
        state.dataset_file = "data/big.jsonl" if moment == "lint" else "data/support_clean.jsonl"
        state.active_run, state.active_server, state.export_dir = run, None, None

    t.ws.update_state(mutate)


def clean_up(t: Trials, moment: str) -> None:
    """Stop what the trial started detached (an export, a server): they are meant to survive the wizard, and
    the next trial starts from the same workspace."""
    ws = t.ws
    if moment == "merge":
        for run in list_runs(ws):
            if run.kind == "export" and run.active:
                stop_run(ws, run.id, graceful_timeout=2, term_timeout=2)
        if t.trained:
            shutil.rmtree(ws.exports_dir / t.trained, ignore_errors=True)
    if moment == "serve":
        stop_servers(ws)


STEP_OF = {"lint": 1, "lf-check": 3, "confirm": 4, "merge": 5, "serve": 6}


def plain(term: PtySession) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.text())


F5_LABEL = {"data": "F5 Lint", "doctor": "F5 Run every check", "config": "F5 Save config", "train": "F5 Start run",
            "merge": "F5 Merge the adapter", "playground": "F5 Start a server"}  # each step's footer


def go_to_step(term: PtySession, ws: Workspace, step: int) -> None:
    """Press the step's digit until the wizard is there: its footer is drawn, or the state file names it. A
    digit pressed once the step is open could land in a text field, so it is pressed again only when neither
    came in 4 s."""
    target = STEP_IDS[step - 1]
    if ws.load_state().current_step == target:  # the step it opened on
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        mark = len(term.text())
        term.send(str(step).encode())
        if wait_for(lambda: ws.load_state().current_step == target or F5_LABEL[target] in plain_since(term, mark),
                    timeout=4):
            return
    raise AssertionError(f"the wizard did not go to step {step}:\n{plain(term)[-2000:]}")


def plain_since(term: PtySession, mark: int) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.text()[mark:])


def action_started(term: PtySession, ws: Workspace, moment: str, since: float) -> bool:
    """What shows that the long action is under way: its process, its run or server record, its dialog."""
    seen = list(term.seen.values())
    if moment == "lint":
        return any(d.session == term.proc.pid and "multiprocessing" in d.cmdline for d in seen)
    if moment == "lf-check":
        return any("lf_argcheck" in d.cmdline for d in seen)
    if moment == "merge":
        return (any(r.kind == "export" and r.started >= since for r in list_runs(ws))
                or any("export_probe" in d.cmdline for d in seen))
    if moment == "serve":
        return any(r.started >= since for r in list_servers(ws, include_ended=True))
    if moment == "confirm":
        return "Stop run" in plain(term)
    return True


def drive(term: PtySession, t: Trials, rng: random.Random, moment: str, step: int | None,
          gated: bool = False) -> None:
    """Bring the wizard to `moment` and leave it there a random while. `gated`: a long action's random while
    starts once it is seen under way (the default run proves each action is hit; the soak draws freely)."""
    if moment == "starting":
        time.sleep(rng.uniform(0.0, 1.5))
        return
    assert term.wait_for_output(), term.text()[-2000:]
    # the first step is open (its footer has F5, the splash's has not): a step key pressed during the splash,
    # before the state is loaded, opens the step with a partial state (found here; reported, not ours)
    assert wait_for(lambda: "F5" in plain(term).rsplit("\x1b[?1049h", 1)[-1], timeout=30), plain(term)[-2000:]
    go_to_step(term, t.ws, step or STEP_OF.get(moment) or rng.randint(1, 6))
    since = time.time()
    if moment == "step":
        time.sleep(rng.uniform(0.0, 3.0))
        return
    if moment == "help":
        time.sleep(rng.uniform(0.2, 1.0))
        term.send(F1)
        time.sleep(rng.uniform(0.0, 1.0))
        return
    time.sleep(rng.uniform(1.0, 2.0))  # the step reads its runs, servers, config
    if moment == "confirm":  # "Stop run sleeper?" on the Train step, left unanswered
        key = F8
    else:  # a long action: F5 (lint, merge, serve) or F6 (LLaMA-Factory's check; Merge: the check again)
        key = F6 if moment == "lf-check" or (moment == "merge" and rng.random() < 0.3) else F5
    term.send(key)
    if gated:  # pressed again while the step is still reading what the action needs (Config: its spec)
        deadline = time.monotonic() + 60
        while not wait_for(lambda: action_started(term, t.ws, moment, since), timeout=4):
            assert time.monotonic() < deadline, f"{moment} did not start:\n{plain(term)[-2000:]}"
            term.send(key)
        time.sleep(rng.uniform(0.0, 1.0))
    else:
        time.sleep(rng.uniform(0.3, 1.5) if moment == "confirm" else rng.uniform(0.0, 6.0))


def trial(t: Trials, rng: random.Random, size: tuple[int, int], moment: str, ending: str = "hang-up",
          step: int | None = None, gated: bool = False) -> TrialResult:
    cols, rows = size
    result = TrialResult(moment, size, ending)
    prepare(t, moment, rng)
    began = time.time()
    try:
        with PtySession([DEVTUNE, "-w", str(t.ws.root)], cols=cols, rows=rows, env=term_env(),
                        cwd=t.ws.root) as term:
            drive(term, t, rng, moment, step, gated)
            if ending == "ctrl+q":
                term.send(CTRL_Q)
                time.sleep(rng.uniform(0.0, 2.0) if step is None else rng.uniform(0.0, 0.15))
            hang_up_and_check(term, t, result)
            result.started = action_started(term, t.ws, moment, began)
            return result
    finally:
        clean_up(t, moment)


def median_max(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s" if values else "-"


def describe(results: list[TrialResult]) -> str:
    bad = [r for r in results if not r.ok]
    lines = [(f"{len(results)} trials: {len(results) - len(bad)} left nothing behind; leftover processes: "
              f"{sum(len(r.leftovers) for r in results)}"),
             f"exit after the hang-up: {median_max([r.exit_seconds for r in results if r.exit_seconds is not None])}",
             f"CPU after the hang-up: {median_max([r.cpu_after for r in results])}",
             ("sizes: " + ", ".join(f"{c}x{r} {sum(x.size == (c, r) for x in results)}" for c, r in SIZES)
              + "; endings: " + ", ".join(f"{e} {sum(x.ending == e for x in results)}" for e in ENDINGS))]
    for moment in MOMENTS:
        of = [r for r in results if r.moment == moment]
        if of:
            lines.append(f"  {moment:<9} {len(of):>3} trials; under way in {sum(r.started for r in of)}; "
                         f"saw helpers in {sum(r.helpers > 0 for r in of)}, "
                         f"own-session children in {sum(r.children > 0 for r in of)}, "
                         f"runs/servers in {sum(r.detached > 0 for r in of)}")
    lines += [f"FAILED {r.moment} {r.size} {r.ending}: exit={r.exit_seconds} cpu={r.cpu_after} "
              f"leftovers={r.leftovers} state_ok={r.state_ok} run_alive={r.run_alive} {r.detail}" for r in bad]
    return "\n".join(lines)
