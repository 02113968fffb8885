"""What `devtune eval RUN` needs running, and starting it when it is not: the one place that decides which servers
an eval of a training run compares, so `devtune eval RUN` works right after `devtune train`, and F6 in the
Playground the same.

- The run's base with its adapter beside it (one vLLM server, `--enable-lora`), where vLLM can serve the adapter as
  a LoRA module (core.serve.plan.plan_lora_server decides it).
- Else (an adapter that also trains embed_tokens/lm_head in full, as the cpu-demo preset's does; a full run; a rank
  vLLM does not take; no vLLM here) the run's merged export against its base, two servers: the export recorded as
  this run's when there is one, else the run merged first (as `devtune merge` does it: export, then its check).

A server already running for a role is used as it is; what is missing is started, said, waited for, and stopped
when the eval ends unless `keep`. `plan_eval_servers` is the decision (nothing started); `ensure_eval_servers`
carries it out and returns `EvalServers`, a context manager whose exit stops what it started.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import Failed
from core.eval.questions import EvalInputError
from core.eval.targets import KEY_ENV, EvalTargets, resolve_targets, server_targets
from core.i18n import _
from core.workspace.layout import Workspace

LORA, MERGED = "lora", "merged"  # the two ways an eval of a run is served
WAIT_SAY_EVERY_S = 15.0  # how often a server still loading is said


@dataclass
class EvalServerPlan:
    """Which servers the eval of a run compares, and which of them run already. Nothing is started."""

    run: str
    route: str  # lora | merged
    base_model: str  # the run's model_name_or_path
    why: str = ""  # merged: why vLLM cannot serve the adapter beside its base (the serve plan's refusal)
    notes: list[str] = field(default_factory=list)  # lora: the serve plan's notes
    lora_options: object = None  # lora: core.serve.backends.ServeOptions of the server to start
    export_dir: str | None = None  # merged: the export (workspace-relative), made first when `merge`
    merge: bool = False  # merged: no export of this run yet
    lora_server: str | None = None  # lora: the live server that serves the run's adapter already
    base_server: str | None = None  # merged: live servers of the base and of the export
    tuned_server: str | None = None

    @property
    def missing(self) -> list[str]:
        """The roles with no live server: "lora", or some of "base" and "tuned"."""
        if self.route == LORA:
            return [] if self.lora_server else [LORA]
        return [role for role, sid in (("tuned", self.tuned_server), ("base", self.base_server)) if not sid]


def _here(ws: Workspace) -> list:
    """The live servers of the workspace that run on this machine (those devtune can use and stop)."""
    from core.serve.servers import list_servers

    host = socket.gethostname()
    return [r for r in list_servers(ws) if r.machine == host]


def _same(ws: Workspace, a: str, b: str) -> bool:
    return Path(ws.abs(a)).resolve() == Path(ws.abs(b)).resolve()


def _serving(ws: Workspace, live: list, model: str) -> str | None:
    """The newest live server of `model` alone (no adapter beside it)."""
    return next((r.id for r in live if not r.lora_modules and _same(ws, r.model, model)), None)


def run_export(ws: Workspace, run_id: str) -> str | None:
    """The newest merged export recorded as this run's (its export record, else its check report), or None."""
    from core.merge.export import load_export_record
    from core.merge.export_check import load_report

    if not ws.exports_dir.is_dir():
        return None
    found = []
    for folder in ws.exports_dir.iterdir():
        if not (folder / "config.json").is_file():
            continue
        record = load_export_record(ws, folder)
        report = load_report(ws, folder) if record is None else None
        origin = record.run_id if record is not None else (report.run_id if report is not None else None)
        if origin == run_id:
            found.append(folder)
    return ws.rel(max(found, key=lambda p: p.stat().st_mtime)) if found else None


def plan_eval_servers(ws: Workspace, run_ref: str | None = None) -> EvalServerPlan:
    """The decision for the eval of a training run (default: the newest): its route, the export it needs and
    the live servers that already serve its roles."""
    from core.merge.export import plan_export
    from core.serve.plan import ServePlanError, plan_lora_server
    from core.train.run_facts import find_train_run, read_train_facts
    from core.train.runs import RunError

    try:
        run = find_train_run(ws, run_ref)
        facts = read_train_facts(ws, run)
    except RunError as exc:
        if run_ref:
            raise EvalInputError(_("{ref} is neither a training run nor a merged model folder ({error})",
                                   ref=run_ref, error=str(exc))) from exc
        raise EvalInputError(str(exc)) from exc
    live = _here(ws)
    try:
        options, run_id, notes = plan_lora_server(ws, run.id)
    except ServePlanError as exc:
        why = str(exc)
    else:
        served = next((r.id for r in live if r.lora_run == run_id), None)
        return EvalServerPlan(run=run_id, route=LORA, base_model=facts.model_name_or_path, notes=notes,
                              lora_options=options, lora_server=served)
    export = run_export(ws, run.id)
    merge = export is None
    if merge:
        export = plan_export(ws, run.id).export_dir  # refused here when the run cannot be merged (still running...)
    return EvalServerPlan(run=run.id, route=MERGED, base_model=facts.model_name_or_path, why=why, export_dir=export,
                          merge=merge, base_server=_serving(ws, live, facts.model_name_or_path),
                          tuned_server=None if merge else _serving(ws, live, export))


@dataclass
class EvalServers:
    """The two sides of an eval and the servers started for it. Leaving its `with` block (or `close()`) stops
    those it started unless `keep`; servers that ran before are never stopped."""

    targets: EvalTargets
    ws: Workspace | None = None
    started: list[str] = field(default_factory=list)  # server ids started for this eval
    keep: bool = False
    changes: list = field(default_factory=list)  # core.workspace.changes.StateChange of a merge made for it
    say: Callable[[str], None] | None = None
    closed: bool = False

    def __enter__(self) -> EvalServers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> list[str]:
        """Stop what was started (unless kept); returns the ids stopped."""
        from core.serve.servers import stop_server

        if self.closed or not self.started or self.ws is None:
            self.closed = True
            return []
        self.closed = True
        say = self.say or (lambda _m: None)
        if self.keep:
            for server_id in self.started:
                say(_("server {id} is left running (--keep-servers); `devtune stop-server {id}` stops it",
                      id=server_id))
            return []
        for server_id in self.started:
            stop_server(self.ws, server_id, grace=5.0)
            say(_("stopped server {id}, started for this eval", id=server_id))
        return list(self.started)

    def state_change(self, report):
        """What the finished eval implies: the report's own change (the base server to compare against next
        time), unless that server was started for this eval and is stopped again."""
        from core.workspace.changes import StateChange

        if report.base.server in self.started and not self.keep:
            return StateChange()
        return report.state_change()


def _merge(ws: Workspace, plan: EvalServerPlan, say: Callable[[str], None], cancelled) -> list:
    """The run merged into plan.export_dir as `devtune merge` does it (export, then the check); the check's
    state change is returned for the front-end to apply."""
    from core.merge.export import plan_export, start_export
    from core.merge.export_check import check_export
    from core.merge.export_progress import export_progress, stage_label, wait_export
    from core.train.runs import RunStatus

    export = plan_export(ws, plan.run, name=Path(plan.export_dir).name)
    for warning in export.warnings:
        say(_("warning: {text}", text=warning))
    record = start_export(ws, export)
    say(_("merging run {id} into {dir} first (export {export}: `devtune merge`)", id=plan.run, dir=export.export_dir,
          export=record.id))
    final = wait_export(ws, record.id, cancelled=cancelled,
                        on_progress=lambda p: say(f"  [{p.fraction:4.0%}] {stage_label(p.stage):<10} {p.detail[:90]}"))
    if final.status is not RunStatus.FINISHED:
        problem = export_progress(ws, record.id).error or final.note or final.status.value
        raise Failed(_("the merge of run {id} failed: {error}; details: devtune diagnose {export}", id=plan.run,
                       error=problem, export=record.id))
    report = check_export(ws, export.export_dir, template=export.template, base_model=export.base_model,
                          adapter=export.adapter, run_id=export.run_id, progress=say)
    if report.verdict == "error":
        raise Failed(_("the merged model {dir} failed its check; `devtune check-export {dir}` shows why",
                       dir=export.export_dir))
    return [report.state_change()]


def _wait(ws: Workspace, server_id: str, say: Callable[[str], None], cancelled, timeout: float):
    from core.serve.servers import wait_ready

    said = [0.0]

    def waiting(seconds: float) -> None:
        if seconds - said[0] >= WAIT_SAY_EVERY_S:
            said[0] = seconds
            say(_("waiting for server {id} to answer ({s:.0f} s)", id=server_id, s=seconds))

    record = wait_ready(ws, server_id, timeout=timeout, cancelled=cancelled, on_wait=waiting)
    if not record.live or record.status != "ready":
        raise Failed(_("stopped before server {id} was ready", id=server_id))
    say(_("server {id} is ready at {url}", id=record.id, url=record.url))
    return record


def ensure_eval_servers(ws: Workspace, run_ref: str | None = None, *, keep: bool = False,
                        say: Callable[[str], None] | None = None, cancelled: Callable[[], bool] | None = None,
                        timeout: float = 900.0) -> EvalServers:
    """The servers the eval of a run needs, running: reused where they run, started (and merged first) where
    not, each thing said. Whatever fails on the way stops what was started, and raises."""
    from core.serve.plan import plan_server
    from core.serve.servers import read_server, start_server, stop_server

    say = say or (lambda _m: None)
    cancelled = cancelled or (lambda: False)
    plan = plan_eval_servers(ws, run_ref)
    if plan.route == LORA:
        for note in plan.notes:
            say(note)
    else:
        say(plan.why)
        say(_("so run {id} is evaluated as its merged export {export} against its base {base}, on two servers",
              id=plan.run, export=plan.export_dir, base=plan.base_model))
    changes, started = [], []
    try:
        if plan.route == MERGED and plan.merge:
            changes = _merge(ws, plan, say, cancelled)
        wanted = {}  # role -> ServeOptions of the server to start
        for role in plan.missing:
            if role == LORA:
                wanted[role] = plan.lora_options
            else:
                opts, notes = plan_server(ws, plan.export_dir if role == "tuned" else plan.base_model)
                for note in notes:
                    say(note)
                wanted[role] = opts
        for role, opts in wanted.items():
            record = start_server(ws, opts, lora_run=plan.run if role == LORA else None)
            started.append(record.id)
            say(_("starting {backend} server {id} for {model} on {url} (for this eval)", backend=record.backend,
                  id=record.id, model=record.model, url=record.url))
        for sid in (plan.lora_server, plan.base_server, plan.tuned_server):
            if sid:
                say(_("using server {id}, already running", id=sid))
        records = {role: _wait(ws, sid, say, cancelled, timeout) for role, sid in zip(wanted, started)}
        for role, sid in (("lora", plan.lora_server), ("base", plan.base_server), ("tuned", plan.tuned_server)):
            if sid:
                records[role] = read_server(ws, sid)
        if plan.route == LORA:
            targets = server_targets(ws, records[LORA])
        else:
            targets = server_targets(ws, records["base"], records["tuned"], plan.run)
    except BaseException:
        for sid in started:
            stop_server(ws, sid, grace=5.0)
        raise
    return EvalServers(targets, ws, started, keep, changes, say)


def eval_servers(ws: Workspace, ref: str | None = None, *, server: str | None = None, base_server: str | None = None,
                 tuned_server: str | None = None, base_model: str | None = None, tuned_model: str | None = None,
                 key_env: str = KEY_ENV, keep: bool = False, say: Callable[[str], None] | None = None,
                 cancelled: Callable[[], bool] | None = None) -> EvalServers:
    """The two sides `devtune eval` compares. Servers named (--server, --base-server/--tuned-server), a merged
    model folder, or no RUN while a server runs: those servers, as core.eval.targets resolves them (nothing is
    started). A RUN, or no RUN and no server running (the newest run): what that run's eval needs, started
    where it is not running (`ensure_eval_servers`)."""
    from core.serve.servers import list_servers

    named = server or base_server or tuned_server
    model_folder = bool(ref) and (ws.abs(ref) / "config.json").is_file()
    if named or model_folder or (not ref and list_servers(ws)):
        return EvalServers(resolve_targets(ws, ref, server=server, base_server=base_server,
                                           tuned_server=tuned_server, base_model=base_model, tuned_model=tuned_model,
                                           key_env=key_env))
    return ensure_eval_servers(ws, ref, keep=keep, say=say, cancelled=cancelled)


def run_dataset(ws: Workspace, run_id: str | None) -> str | None:
    """The dataset an eval of this run asks (its first training dataset), else the Data step's choice."""
    from core.merge.export import ExportError
    from core.train.run_facts import find_train_run, read_train_facts
    from core.train.runs import RunError

    try:
        facts = read_train_facts(ws, find_train_run(ws, run_id))
    except (ExportError, RunError):
        facts = None
    return (facts.dataset[0] if facts and facts.dataset else None) or ws.load_state().dataset_name
