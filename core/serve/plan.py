"""What to serve, and how: the model folder (given, or the wizard's latest export), its served name,
the backend (vLLM when the serving environment has it, else `llamafactory-cli api`; llama.cpp's server for a
GGUF folder or file), and the chat template to pass when the export check found that the tokenizer's differs
from training's."""

from __future__ import annotations

from pathlib import Path

from core.errors import BadInput
from core.i18n import _
from core.serve.backends import BACKENDS, ServeOptions, serve_env
from core.workspace.layout import Workspace


class ServePlanError(BadInput):
    pass


def default_model(ws: Workspace) -> str:
    """The wizard's chosen export, else the newest folder in exports/."""
    try:
        chosen = ws.load_state().export_dir
    except Exception:
        chosen = None
    if chosen and (ws.abs(chosen) / "config.json").is_file():
        return chosen
    candidates = [p for p in ws.exports_dir.iterdir() if (p / "config.json").is_file()] if ws.exports_dir.is_dir() else []
    if not candidates:
        raise ServePlanError(_("no merged model in {dir}; run `devtune merge` first, or name a model folder",
                               dir=ws.rel(ws.exports_dir)))
    return ws.rel(max(candidates, key=lambda p: p.stat().st_mtime))


def default_gguf(ws: Workspace) -> str:
    """The newest GGUF folder in exports/ (`devtune merge --gguf` writes exports/<name>-gguf)."""
    from core.serve.backend_llamacpp import gguf_of

    folders = [p for p in ws.exports_dir.iterdir() if gguf_of(p)] if ws.exports_dir.is_dir() else []
    if not folders:
        raise ServePlanError(_("no GGUF in {dir}; run `devtune merge --gguf` first, or name a .gguf file",
                               dir=ws.rel(ws.exports_dir)))
    return ws.rel(max(folders, key=lambda p: p.stat().st_mtime))


def plan_gguf_server(ws: Workspace, model: str | None, *, backend: str | None, port: int, host: str,
                     max_model_len: int | None, served_name: str | None,
                     tensor_parallel: int = 1) -> tuple[ServeOptions, list[str]]:
    """A GGUF (a folder of `devtune merge --gguf`, or a .gguf file) served by llama.cpp's server."""
    from core.serve.backend_llamacpp import gguf_of

    if backend not in (None, "llamacpp"):
        raise ServePlanError(_("{model} is a GGUF: it is served with --backend llamacpp (llama.cpp's server), not "
                               "{name}", model=model, name=backend))
    model = model or default_gguf(ws)
    path = ws.abs(model)
    if gguf_of(path) is None:
        raise ServePlanError(_("{model} is not a GGUF file or a folder holding one; `devtune merge --gguf` writes "
                               "exports/<name>-gguf", model=model))
    name = served_name or (path.stem if path.suffix == ".gguf" else path.name)
    notes = []
    if host not in ("127.0.0.1", "localhost", "::1"):
        notes.append(_("listening on {host}: reachable from other machines (the API key is required)", host=host))
    return ServeOptions(model=str(path), served_name=name, backend="llamacpp", host=host, port=port,
                        tensor_parallel=tensor_parallel, max_model_len=max_model_len), notes


def choose_backend(requested: str | None) -> tuple[str, str]:
    """(backend, note). vLLM is preferred; without it, LLaMA-Factory's API server."""
    if requested:
        if requested not in BACKENDS:
            raise ServePlanError(_("unknown backend {name}; choose one of {names}", name=requested,
                                   names=", ".join(BACKENDS)))
        if requested == "vllm" and not serve_env().has_vllm:
            raise ServePlanError(_("vLLM is not installed in the serving environment (.venv-serve); run "
                                   "`make serve-env`, or use --backend llamafactory"))
        return requested, ""
    if serve_env().has_vllm:
        return "vllm", ""
    return "llamafactory", _("vLLM is not installed here: serving with `llamafactory-cli api` (huggingface backend)")


def plan_server(ws: Workspace, model: str | None = None, *, backend: str | None = None, port: int = 0,
                host: str = "127.0.0.1", tensor_parallel: int = 1, dtype: str | None = None,
                max_model_len: int | None = None, served_name: str | None = None,
                chat_template: str | None = None, template: str | None = None,
                trust_remote_code: bool = False) -> tuple[ServeOptions, list[str]]:
    """The server's options and notes for the person. Nothing is started."""
    from core.merge.export_check import load_report

    from core.serve.backend_llamacpp import gguf_of

    if backend == "llamacpp" or (model and gguf_of(ws.abs(model))):
        return plan_gguf_server(ws, model, backend=backend, port=port, host=host, max_model_len=max_model_len,
                                served_name=served_name, tensor_parallel=tensor_parallel)
    notes: list[str] = []
    model = model or default_model(ws)
    path = ws.abs(model)
    local = path.exists()
    if local and not (path / "config.json").is_file():
        raise ServePlanError(_("{model} is not a Hugging Face model folder (no config.json)", model=model))
    hub_id = model.count("/") == 1 and not model.startswith((".", "/", "~")) and not ws.abs(model.split("/")[0]).exists()
    if not local and not hub_id:
        raise ServePlanError(_("model folder {model} does not exist", model=model))
    chosen, note = choose_backend(backend)
    if note:
        notes.append(note)
    report = load_report(ws, path) if local else None
    if report and report.template:
        template = template or report.template.template
        if report.template.match is False and not chat_template:
            if report.template.fixed_template and ws.abs(report.template.fixed_template).is_file():
                chat_template = report.template.fixed_template
                notes.append(_("the exported chat template differs from training's ({name}); serving with "
                               "--chat-template {file}", name=report.template.template, file=chat_template))
            else:
                notes.append(_("the exported chat template differs from training's ({name}) and no fixed "
                               "template is available: answers may differ from llamafactory chat",
                               name=report.template.template))
    if template is None and local:
        meta = path / "devtune_model.json"  # the tiny demo model records its template
        if meta.is_file():
            import json

            try:
                template = json.loads(meta.read_text(encoding="utf-8")).get("template")
            except ValueError:
                pass
    name = served_name or Path(model.rstrip("/")).name
    if host not in ("127.0.0.1", "localhost", "::1"):
        notes.append(_("listening on {host}: reachable from other machines (the API key is required)", host=host))
    opts = ServeOptions(model=str(path) if local else model, served_name=name, backend=chosen, host=host, port=port,
                        tensor_parallel=tensor_parallel, dtype=dtype, max_model_len=max_model_len,
                        chat_template=str(ws.abs(chat_template)) if chat_template else None, template=template,
                        trust_remote_code=trust_remote_code)
    return opts, notes


VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the --max-lora-rank values vLLM accepts


def plan_lora_server(ws: Workspace, run_ref: str | None = None, *, port: int = 0, host: str = "127.0.0.1",
                     dtype: str | None = None, max_model_len: int | None = None,
                     trust_remote_code: bool = False) -> tuple[ServeOptions, str, list[str]]:
    """A vLLM server for a LoRA run: its base model, and its adapter beside it as a LoRA module (one server
    answers both: the base under the base's name, the tuned model under the adapter's). Returns the options,
    the run's id and the notes. The chat template is the one training saved with the adapter, for both."""
    import json

    from core.merge.export import ExportError
    from core.train.run_facts import find_train_run, read_train_facts
    from core.train.runs import RunError

    try:
        run = find_train_run(ws, run_ref)
        facts = read_train_facts(ws, run)
    except (ExportError, RunError) as exc:
        raise ServePlanError(str(exc)) from exc
    if facts.finetuning_type != "lora":
        raise ServePlanError(_("run {id} trains {kind}, not a LoRA adapter: merge it (`devtune merge`) and serve the "
                               "export", id=run.id, kind=facts.finetuning_type))
    adapter = ws.abs(facts.output_dir or run.output_dir or "")
    config_file = adapter / "adapter_config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServePlanError(_("run {id} has no adapter to serve ({file}: {error}); has it saved one?", id=run.id,
                               file=ws.rel(config_file), error=getattr(exc, "strerror", None) or str(exc))) from exc
    if config.get("modules_to_save"):
        raise ServePlanError(_("run {id}'s adapter also trains {modules} in full (additional_target); vLLM cannot "
                               "serve that as a LoRA module: merge the run (`devtune merge`), serve the export and "
                               "its base, and evaluate the two servers", id=run.id,
                               modules=", ".join(config["modules_to_save"])))
    rank = max([int(config.get("r") or 8), *map(int, (config.get("rank_pattern") or {}).values())])
    max_rank = next((r for r in VLLM_LORA_RANKS if r >= rank), None)
    if max_rank is None:
        raise ServePlanError(_("run {id}'s LoRA rank {rank} is above what vLLM serves ({max})", id=run.id, rank=rank,
                               max=VLLM_LORA_RANKS[-1]))
    template = adapter / "chat_template.jinja"
    opts, notes = plan_server(ws, facts.model_name_or_path, backend="vllm", port=port, host=host, dtype=dtype,
                              max_model_len=max_model_len, trust_remote_code=trust_remote_code or facts.trust_remote_code,
                              chat_template=str(template) if template.is_file() else None, template=facts.template)
    name = adapter.name if adapter.name != opts.served_name else f"{adapter.name}-lora"
    opts.lora_modules = {name: str(adapter)}
    opts.max_lora_rank = max_rank
    notes.append(_("serving {base} and run {id}'s adapter beside it as {name} (one vLLM server, --enable-lora)",
                   base=opts.served_name, id=run.id, name=name))
    return opts, run.id, notes
