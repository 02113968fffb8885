"""The two models `devtune eval` compares, base and tuned, as endpoints.

- One vLLM server that serves the base and, beside it, a LoRA run's adapter (`devtune serve --lora RUN`): the base
  answers under the served name, the tuned model under the adapter's name.
- Two servers: `--base-server` and `--tuned-server`, each a server id of this workspace or the URL of any
  OpenAI-compatible server (its key from the variable `--api-key-env` names, default DEVTUNE_EVAL_KEY).
- A RUN or MODEL reference: the live server that serves that run's adapter, or the live servers of that merged
  model and of its base (from the export's check report). When none is running, the error names the command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from core.eval.questions import EvalInputError
from core.i18n import _
from core.serve.chat import Endpoint
from core.workspace.layout import Workspace

BASE, TUNED = "base", "tuned"
KEY_ENV = "DEVTUNE_EVAL_KEY"


@dataclass(frozen=True)
class Target:
    side: str  # base | tuned
    endpoint: Endpoint
    server_id: str | None = None  # a devtune server, when it is one
    tokenizer: str | None = None  # a local folder with the model's tokenizer (lm-eval's local-completions)
    lora_server: bool = False  # from a server with LoRA enabled (the tuned side is then its adapter)

    def info(self) -> dict:
        return {"url": self.endpoint.url, "model": self.endpoint.model, "server": self.server_id}


@dataclass(frozen=True)
class EvalTargets:
    base: Target
    tuned: Target
    run: str | None = None  # the training run behind the tuned model, when known

    @property
    def one_lora_server(self) -> bool:
        return self.base.server_id is not None and self.base.server_id == self.tuned.server_id and self.tuned.lora_server


def _from_record(ws: Workspace, record, side: str) -> Target:
    from core.serve.servers import endpoint

    if not record.live:
        raise EvalInputError(_("server {id} is {status}; start it again with `devtune serve`", id=record.id,
                               status=record.status))
    ep = endpoint(ws, record)
    local = ws.abs(record.model)
    tokenizer = str(local) if (local / "config.json").is_file() else None
    if side == TUNED and record.lora_modules:
        name = next(iter(record.lora_modules))
        return Target(side, Endpoint(ep.url, name, ep.api_key, label=f"{record.id}:{name}"), record.id, tokenizer,
                      lora_server=True)
    return Target(side, ep, record.id, tokenizer, lora_server=bool(record.lora_modules))


def _from_url(url: str, side: str, model: str | None, key_env: str) -> Target:
    from core.serve.chat import ChatError, list_models

    key = os.environ.get(key_env) or None
    base = url.rstrip("/").removesuffix("/v1")
    if not model:
        try:
            models = list_models(base, key, timeout=10.0)
        except ChatError as exc:
            raise EvalInputError(str(exc)) from exc
        if len(models) != 1:
            raise EvalInputError(_("{url} serves {n} models ({names}); name the {side} one with --{side}-model",
                                   url=base, n=len(models), names=", ".join(models[:8]) or "-", side=side))
        model = models[0]
    return Target(side, Endpoint(base, model, key, label=base))


def _server_or_url(ws: Workspace, ref: str, side: str, model: str | None, key_env: str) -> Target:
    from core.serve.servers import ServerError, find_server

    if ref.startswith(("http://", "https://")):
        return _from_url(ref, side, model, key_env)
    try:
        target = _from_record(ws, find_server(ws, ref), side)
    except ServerError as exc:
        raise EvalInputError(str(exc)) from exc
    if model:
        target = Target(side, Endpoint(target.endpoint.url, model, target.endpoint.api_key, target.endpoint.label),
                        target.server_id, target.tokenizer, target.lora_server)
    return target


def lora_server_hint(ws: Workspace, run_ref: str | None = None) -> str:
    """How to serve the base and the tuned model of this run (default: the newest) from one server, as core's
    serve plan decides it: `devtune serve --lora RUN` where it serves the adapter as a LoRA module, else the plan's
    refusal, which says what to do instead (an adapter that trains embed_tokens/lm_head in full is no LoRA module)."""
    from core.serve.plan import ServePlanError, plan_lora_server

    try:
        _opts, run_id, _notes = plan_lora_server(ws, run_ref)
    except ServePlanError as exc:
        return str(exc)
    return _("serve the base and run {id}'s adapter from one server with `devtune serve --lora {id}`", id=run_id)


def _lora_targets(ws: Workspace, record) -> EvalTargets:
    if not record.lora_modules:
        from core.serve.verify import run_of_server

        raise EvalInputError(_("server {id} serves one model ({model}); evaluate it against its base with "
                               "--base-server ID --tuned-server ID, or: {how}", id=record.id,
                               model=record.served_name, how=lora_server_hint(ws, run_of_server(ws, record))))
    return EvalTargets(_from_record(ws, record, BASE), _from_record(ws, record, TUNED), record.lora_run)


def server_targets(ws: Workspace, base, tuned=None, run: str | None = None) -> EvalTargets:
    """Base and tuned from live servers (core.serve.servers.ServerRecord): one that serves a LoRA run beside its
    base (`tuned` None), or the base's server and the tuned model's."""
    if tuned is None:
        return _lora_targets(ws, base)
    return EvalTargets(_from_record(ws, base, BASE), _from_record(ws, tuned, TUNED), run)


def _base_of_export(ws: Workspace, model: str) -> tuple[str | None, str | None]:
    """(base model path, run id) of a merged export, from its check report."""
    from core.merge.export import ExportError
    from core.train.run_facts import find_train_run, read_train_facts
    from core.merge.export_check import load_report
    from core.train.runs import RunError

    report = load_report(ws, ws.abs(model))
    if report is None or not report.run_id:
        return None, None
    try:
        return read_train_facts(ws, find_train_run(ws, report.run_id)).model_name_or_path, report.run_id
    except (ExportError, RunError):
        return None, report.run_id


def _same_model(ws: Workspace, a: str, b: str) -> bool:
    return Path(ws.abs(a)).resolve() == Path(ws.abs(b)).resolve()


def remembered_base(remembered: str | None, tuned) -> str | None:
    """The base server a tuned server (core.serve.servers.ServerRecord) is compared against when none is named:
    the one the last eval compared against (workspace state `eval_base_server`), unless the tuned server serves
    its base beside its adapter (one LoRA server) or is that server itself. A plain `devtune eval` and the
    Playground's "compare with" both follow it."""
    if tuned is None or tuned.lora_modules or not remembered or remembered == tuned.id:
        return None
    return remembered


def resolve_targets(ws: Workspace, ref: str | None = None, *, server: str | None = None,
                    base_server: str | None = None, tuned_server: str | None = None, base_model: str | None = None,
                    tuned_model: str | None = None, key_env: str = KEY_ENV) -> EvalTargets:
    from core.serve.servers import ServerError, find_server, list_servers

    if base_server or tuned_server:
        if not (base_server and tuned_server):
            raise EvalInputError(_("name both --base-server and --tuned-server (a server id or a URL each)"))
        return EvalTargets(_server_or_url(ws, base_server, BASE, base_model, key_env),
                           _server_or_url(ws, tuned_server, TUNED, tuned_model, key_env))
    if server or not ref:
        try:
            record = find_server(ws, server)
        except ServerError as exc:
            raise EvalInputError(str(exc) + "\n" + _("{how}, or name two servers with --base-server ID "
                                                    "--tuned-server ID", how=lora_server_hint(ws))) from exc
        remembered = remembered_base(ws.load_state().eval_base_server, record)
        if remembered:
            return EvalTargets(_server_or_url(ws, remembered, BASE, base_model, key_env),
                               _from_record(ws, record, TUNED))  # the base the last eval compared against
        return _lora_targets(ws, record)
    live = list_servers(ws)
    if (ws.abs(ref) / "config.json").is_file():  # a merged model
        tuned = next((r for r in live if _same_model(ws, r.model, ref)), None)
        base_path, run = _base_of_export(ws, ref)
        base = next((r for r in live if base_path and _same_model(ws, r.model, base_path)), None)
        if tuned is None or base is None:
            missing = [f"devtune serve {ref}"] if tuned is None else []
            missing += [f"devtune serve {ws.rel(base_path)}"] if base is None and base_path else []
            if base is None and not base_path:
                raise EvalInputError(_("devtune does not know the base of {model} (it has no export check report); "
                                       "serve the base and name both servers with --base-server and --tuned-server",
                                       model=ref))
            raise EvalInputError(_("start the servers first: {commands}", commands="; ".join(missing)))
        return server_targets(ws, base, tuned, run)
    from core.train.run_facts import find_train_run
    from core.train.runs import RunError

    try:
        run = find_train_run(ws, ref)
    except RunError as exc:
        raise EvalInputError(_("{ref} is neither a training run nor a merged model folder ({error})", ref=ref,
                               error=str(exc))) from exc
    record = next((r for r in live if r.lora_run == run.id), None)
    if record is None:
        raise EvalInputError(_("no server serves run {id}'s adapter; start one with `devtune serve --lora {id}`",
                               id=run.id))
    return _lora_targets(ws, record)
