"""OpenAI-compatible servers for merged models, started detached and found again later.

A server lives in `.devtune/servers/<id>/`:

    server.json   ServerRecord: argv, the env devtune set (never the key), pid + start time (against
                  PID reuse), host, port, model, backend, the API key FILE's path, status
    api_key       the generated key, mode 0600 (the only place it is written)
    stdout.log    stderr.log    the server's output      api.yaml   (llamafactory backend)

`start_server` checks the port, writes the key, launches the backend in its own session (argv list,
output to files) and returns at once; `wait_ready` polls `GET /v1/models` with the key (there is no
/health on LLaMA-Factory's API) while reporting new log lines, and on a failure or a timeout kills
the process group and raises with the log's tail. Quitting devtune stops no server: `list_servers`
re-attaches to those still alive, `stop_server` ends one by its process group.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from core.errors import BadInput, Failed, Unavailable
from core.files.atomic import write_atomic
from core.i18n import _
from core.processes.groups import end_group, leader_is, reap
from core.serve.backends import (
    ServeOptions,
    display_command,
    launch_plan,
    vllm_serve_command,
)
from core.serve.log_follow import LogFollower
from core.train.runs import ProcessRef
from core.workspace.layout import Workspace

STARTING, READY, FAILED, STOPPED, EXITED = "starting", "ready", "failed", "stopped", "exited"
LIVE = (STARTING, READY)


def status_label(status: str) -> str:
    """A server's status in words for people (JSON and `devtune servers` keep the value)."""
    return {STARTING: _("starting"), READY: _("ready"), FAILED: _("failed"), STOPPED: _("stopped"),
            EXITED: _("exited")}.get(status, status)
KEY_FILE = "api_key"


class ServerError(Failed):
    """A server could not be started, reached or stopped; the message says why (exit 1)."""


class ServerNotFound(Unavailable, ServerError):
    """No such server here: none running, no match for the name, or one that runs on another machine (exit 2)."""


class ServerRefBad(BadInput, ServerError):
    """A server named ambiguously, or a damaged server.json (exit 2)."""


class ServerRecord(BaseModel):
    id: str
    backend: str
    model: str  # as given: workspace-relative when inside the workspace
    served_name: str
    host: str
    port: int
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)  # only what devtune set, never the key
    api_key_file: str  # workspace-relative path of the key file (the key itself is never recorded)
    chat_template: str | None = None
    template: str | None = None
    tensor_parallel: int = 1
    lora_modules: dict[str, str] = Field(default_factory=dict)  # served adapter name -> folder (workspace-relative)
    lora_run: str | None = None  # the training run whose adapter is served (`devtune serve --lora RUN`)
    machine: str = Field(default_factory=socket.gethostname)
    process: ProcessRef | None = None
    pgid: int | None = None
    started: float = Field(default_factory=time.time)
    ready_at: float | None = None
    ended: float | None = None
    status: str = STARTING
    note: str = ""

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    @property
    def live(self) -> bool:
        return self.status in LIVE

    def state_change(self):
        """What a server that answers implies for both front-ends: it is the workspace's server (chat, verify
        and the Playground talk to it)."""
        from core.workspace.changes import StateChange

        return StateChange(chosen={"active_server": self.id})

    def summary(self) -> dict:
        """The public facts (`devtune serve --json`, `devtune servers --json`)."""
        return {"id": self.id, "url": self.url, "model": self.served_name, "model_path": self.model,
                "backend": self.backend, "pid": self.process.pid if self.process else None,
                "status": self.status, "host": self.host, "port": self.port,
                "api_key_file": self.api_key_file, "started": self.started, "ready_at": self.ready_at,
                "chat_template": self.chat_template, "lora_modules": self.lora_modules, "lora_run": self.lora_run}


# ---------------------------------------------------------------- files

def server_dir(ws: Workspace, server_id: str) -> Path:
    return ws.servers_dir / server_id


def read_server(ws: Workspace, server_id: str) -> ServerRecord:
    path = server_dir(ws, server_id) / "server.json"
    try:
        return ServerRecord.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ServerNotFound(_("no server {id} in this workspace; `devtune servers` lists them", id=server_id)) from exc
    except ValueError as exc:
        raise ServerRefBad(_("{path} is damaged: {error}", path=str(path), error=str(exc))) from exc


def write_server(ws: Workspace, record: ServerRecord) -> ServerRecord:
    write_atomic(server_dir(ws, record.id) / "server.json", record.model_dump_json(indent=2) + "\n")
    return record


def read_api_key(ws: Workspace, record: ServerRecord) -> str:
    return ws.abs(record.api_key_file).read_text(encoding="utf-8").strip()


def log_tail(ws: Workspace, server_id: str, lines: int = 30) -> str:
    """The last lines of the server's stderr and stdout (vLLM logs to stdout, uvicorn to stderr)."""
    out = []
    for name in ("stderr.log", "stdout.log"):
        try:
            data = (server_dir(ws, server_id) / name).read_bytes()[-20000:]
        except OSError:
            continue
        text = data.decode("utf-8", errors="replace").replace("\r", "\n")
        tail = [line for line in text.splitlines() if line.strip()][-lines:]
        if tail:
            out.append(f"--- {name}\n" + "\n".join(tail))
    return "\n".join(out)


# ---------------------------------------------------------------- ports

def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _new_id(ws: Workspace, name: str, port: int) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:40].strip("-") or "server"
    base = f"{safe}-{port}"
    server_id, n = base, 1
    while server_dir(ws, server_id).exists():
        n += 1
        server_id = f"{base}-{n}"
    return server_id


# ---------------------------------------------------------------- starting

def start_server(ws: Workspace, opts: ServeOptions, *, api_key: str | None = None, env_extra=None,
                 lora_run: str | None = None) -> ServerRecord:
    """Launch the server detached and return its record at once (status `starting`)."""
    ws.ensure()
    if opts.port:
        if not port_free(opts.host, opts.port):
            raise ServerError(_("port {port} on {host} is already in use; choose another with --port, or leave "
                                "it out and devtune picks a free one", port=opts.port, host=opts.host))
    else:
        opts.port = free_port(opts.host)
    key = api_key or secrets.token_urlsafe(24)
    plan = launch_plan(opts, key)
    server_id = _new_id(ws, opts.served_name, opts.port)
    directory = server_dir(ws, server_id)
    directory.mkdir(parents=True)
    key_path = directory / KEY_FILE
    write_atomic(key_path, key + "\n", file_mode=0o600)
    for name, content in plan.files.items():
        write_atomic(directory / name, content)
    record = ServerRecord(
        id=server_id, backend=opts.backend, model=ws.rel(opts.model) if os.path.exists(opts.model) else opts.model,
        served_name=opts.served_name, host=opts.host, port=opts.port, argv=plan.argv, env=plan.recordable_env(),
        api_key_file=ws.rel(key_path), chat_template=ws.rel(opts.chat_template) if opts.chat_template else None,
        template=opts.template, tensor_parallel=opts.tensor_parallel, note="; ".join(plan.notes),
        lora_modules={k: ws.rel(v) for k, v in opts.lora_modules.items()}, lora_run=lora_run,
    )
    write_server(ws, record)
    env = {**os.environ, **plan.env, **(env_extra or {})}
    with open(directory / "stdout.log", "ab") as out, open(directory / "stderr.log", "ab") as err:
        try:
            proc = subprocess.Popen(plan.argv, cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True, close_fds=True)
        except OSError as exc:
            record.status, record.ended = FAILED, time.time()
            record.note = _("could not start {cmd}: {error}", cmd=plan.argv[0], error=str(exc))
            write_server(ws, record)
            raise ServerError(record.note) from exc
    import psutil

    try:
        created = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        created = 0.0
    record.process = ProcessRef(pid=proc.pid, create_time=created)
    record.pgid = proc.pid
    return write_server(ws, record)


def _alive(record: ServerRecord) -> bool:
    if record.process is None:
        return False
    reap(record.process.pid)
    return record.process.alive()


def _probe_ready(record: ServerRecord, key: str) -> bool:
    import httpx

    try:
        resp = httpx.get(record.url + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=2.0)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200


def wait_ready(ws: Workspace, server_id: str, *, timeout: float = 600.0, interval: float = 0.5,
               on_line: Callable[[str], None] | None = None, cancelled: Callable[[], bool] | None = None,
               on_wait: Callable[[float], None] | None = None) -> ServerRecord:
    """Block until the server answers `GET /v1/models` with its key. On an early exit or a timeout the
    process group is killed, the record marked failed, and ServerError raised. When `cancelled()` turns
    true the wait ends and the server is left as it is (still `starting`). `on_wait(seconds)` is called
    on every check with the seconds waited so far (a caller's progress line)."""
    record = read_server(ws, server_id)
    key = read_api_key(ws, record)
    directory = server_dir(ws, server_id)
    follower = LogFollower([directory / "stdout.log", directory / "stderr.log"])
    began = time.monotonic()
    deadline = began + timeout
    while True:
        for line in follower.new_lines():
            if on_line:
                on_line(line)
        if on_wait:
            on_wait(time.monotonic() - began)
        if not _alive(record):
            return _fail(ws, record, _("the server exited during start-up"))
        if _probe_ready(record, key):
            record = read_server(ws, server_id)
            record.status, record.ready_at = READY, time.time()
            return write_server(ws, record)
        if cancelled and cancelled():
            return read_server(ws, server_id)  # the caller stopped waiting; the server goes on loading
        if time.monotonic() > deadline:
            return _fail(ws, record, _("the server was not ready after {s:.0f} s", s=timeout))
        time.sleep(interval)


def _fail(ws: Workspace, record: ServerRecord, why: str) -> ServerRecord:
    _kill_group(record, grace=5.0)
    tail = log_tail(ws, record.id, lines=25)
    record = read_server(ws, record.id)
    record.status, record.ended = FAILED, time.time()
    record.note = why
    write_server(ws, record)
    hint = _diagnose(tail)
    message = why + (f"\n{hint}" if hint else "") + (f"\n{tail}" if tail else "")
    raise ServerError(message)


def _diagnose(tail: str) -> str:
    """One line on the usual causes, found in the log."""
    low = tail.lower()
    if "address already in use" in low or "errno 98" in low:
        return _("the port was taken by another program meanwhile; start again with another --port")
    if "no such file or directory" in low or "does not appear to have a file named config.json" in low \
            or "repo id must be" in low or "not a valid model identifier" in low or "repository not found" in low:
        return _("the model folder was not found or is not a Hugging Face model (config.json missing)")
    if "out of memory" in low or "cannot allocate memory" in low:
        return _("not enough memory for this model; lower --max-model-len, or use more GPUs with --tp")
    if "trust_remote_code" in low or "trust-remote-code" in low:
        return _("this model ships its own code; start it with --trust-remote-code if you trust it")
    if "chat template" in low and "error" in low:
        return _("the chat template could not be loaded; check the file given to --chat-template")
    return ""


# ---------------------------------------------------------------- stopping, listing

def _kill_group(record: ServerRecord, grace: float = 15.0) -> None:
    """SIGTERM to the server's process group, SIGKILL after `grace` seconds; reaps our own child."""
    if record.process is None or not record.pgid or not leader_is(record.pgid, record.process.create_time):
        return
    end_group(record.pgid, record.process.pid, grace)


def stop_server(ws: Workspace, server_id: str, *, grace: float = 15.0) -> ServerRecord:
    record = read_server(ws, server_id)
    if record.machine != socket.gethostname():
        raise ServerNotFound(_("server {id} runs on {machine}; stop it there", id=record.id, machine=record.machine))
    _kill_group(record, grace=grace)
    record = read_server(ws, server_id)
    if record.live:
        record.status, record.ended = STOPPED, time.time()
        write_server(ws, record)
    return record


def refresh_server(ws: Workspace, record: ServerRecord) -> ServerRecord:
    """The record, with a live one whose process is gone marked `exited`."""
    if record.live and record.machine == socket.gethostname() and not _alive(record):
        record.status, record.ended = EXITED, record.ended or time.time()
        record.note = record.note or _("the server process ended by itself; see its stderr.log")
        write_server(ws, record)
    return record


def list_servers(ws: Workspace, *, include_ended: bool = False) -> list[ServerRecord]:
    """Every server of the workspace (live ones only unless asked), newest first."""
    out = []
    if not ws.servers_dir.is_dir():
        return out
    for directory in ws.servers_dir.iterdir():
        if not (directory / "server.json").is_file():
            continue
        try:
            record = refresh_server(ws, read_server(ws, directory.name))
        except ServerError:
            continue
        if include_ended or record.live:
            out.append(record)
    return sorted(out, key=lambda r: r.started, reverse=True)


def find_server(ws: Workspace, ref: str | None = None) -> ServerRecord:
    """A server by id or unique prefix; without one, the wizard's active server if it is live, else
    the newest live one."""
    live = list_servers(ws)
    if ref in (None, "", "last", "latest"):
        if not live:
            raise ServerNotFound(_("no server is running in this workspace; start one with `devtune serve`"))
        try:
            active = ws.load_state().active_server
        except Exception:  # a damaged state file must not stop a chat
            active = None
        return next((r for r in live if r.id == active), live[0])
    everything = list_servers(ws, include_ended=True)
    exact = [r for r in everything if r.id == ref]
    matches = exact or [r for r in everything if r.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ServerNotFound(_("no server matches {ref}; `devtune servers` lists them", ref=ref))
    raise ServerRefBad(_("{ref} matches several servers: {ids}", ref=ref, ids=", ".join(r.id for r in matches[:5])))


def endpoint(ws: Workspace, record: ServerRecord):
    from core.serve.chat import Endpoint

    return Endpoint(url=record.url, model=record.served_name, api_key=read_api_key(ws, record), label=record.id)


def equivalent_commands(ws: Workspace, record: ServerRecord) -> dict[str, str]:
    """The vLLM server's own command line (vLLM backend: the serving python by its path), the exact command
    devtune ran, and a `curl` to try it."""
    from core.serve.chat import ChatParams, Endpoint, build_messages, curl_command

    key_var = "VLLM_API_KEY" if record.backend == "vllm" else "API_KEY"
    out = {"run": display_command(record.argv, record.env, record.api_key_file, key_var)}
    if record.backend == "vllm":
        out["vllm"] = vllm_serve_command(record.argv, record.env, record.api_key_file)
    ep = Endpoint(url=record.url, model=record.served_name)
    out["curl"] = curl_command(ep, build_messages("Hello!"), ChatParams(max_tokens=64),
                               key_file=record.api_key_file, stream=False)
    return out
