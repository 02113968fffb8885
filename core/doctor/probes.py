"""Gathering the evidence: each probe runs a tool, reads files or asks a Python environment in a
subprocess, and returns one piece of `Evidence`. Probes never judge; the verdicts do.

Every probe has a timeout. The runner starts them all at once in threads, so the slow ones
(vLLM's import, ds_report) finish while the rest are already shown.
"""

from __future__ import annotations

import glob
import os
import platform
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from core.doctor.commands import run_command
from core.doctor.hf_cache import hf_cache_dir
from core.doctor.planned_model import planned_model
from core.doctor.scripts import PACKAGES_PROBE, SERVE_PROBE, TORCH_PROBE

# Environment variables the verdicts read. Values of secrets are never kept.
ENV_PREFIXES = ("HSA_", "HIP_", "ROCR_", "ROCM_", "CUDA_", "NVIDIA_", "NCCL_", "RCCL_", "PYTORCH_", "HF_",
                "HUGGINGFACE_", "TRANSFORMERS_", "FLASH_ATTENTION_", "BNB_", "VLLM_", "DS_", "TORCH_")
ENV_NAMES = ("GPU_ARCHS", "MAX_JOBS", "USER", "HOME", "XDG_CACHE_HOME", "OMP_NUM_THREADS", "LD_LIBRARY_PATH",
             "DEVTUNE_SERVE_PYTHON", "DISABLE_VERSION_CHECK", "FORCE_TORCHRUN")
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
TOOLS = ("rocminfo", "amd-smi", "rocm-smi", "hipcc", "hipconfig", "nvidia-smi", "nvcc", "ninja", "cmake",
         "gcc", "g++", "make", "ds_report", "llamafactory-cli", "torchrun")
ROCM_TOOLS = ("rocminfo", "amd-smi", "rocm-smi", "hipcc", "hipconfig")


@dataclass
class DoctorContext:
    """Where to look: the workspace, the two Python environments, the process environment."""

    workspace: Any = None  # core.workspace.layout.Workspace | None
    train_python: str = field(default_factory=lambda: sys.executable)
    serve_python: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_scale: float = 1.0  # tests shrink every timeout

    @classmethod
    def for_this_machine(cls, workspace=None, **kw) -> "DoctorContext":
        ctx = cls(workspace=workspace, **kw)
        if ctx.serve_python is None:
            ctx.serve_python = find_serve_python(ctx.train_python, ctx.env)
        return ctx

    def rocm_path(self) -> str:
        return self.env.get("ROCM_PATH") or "/opt/rocm"

    def tool(self, name: str) -> str | None:
        """A tool on PATH, else in the venv's bin (ninja, ds_report), else in ROCm's bin."""
        import shutil

        found = shutil.which(name, path=self.env.get("PATH"))
        if found:
            return found
        for folder in (str(Path(self.train_python).parent), os.path.join(self.rocm_path(), "bin")):
            candidate = os.path.join(folder, name)
            if os.access(candidate, os.X_OK):
                return candidate
        return None


def find_serve_python(train_python: str, env: Mapping[str, str]) -> str | None:
    """$DEVTUNE_SERVE_PYTHON, else `<repo>/.venv-serve/bin/python` next to the training venv."""
    from core.settings import peek

    explicit = peek("serve_python", env)  # `env`: this machine's, or the recorded one a replay judges
    if explicit:
        return explicit
    venv = Path(train_python).parent.parent  # <repo>/.venv/bin/python -> <repo>/.venv
    candidate = venv.parent / ".venv-serve" / "bin" / "python"
    return str(candidate) if candidate.exists() else None


@dataclass(frozen=True)
class Probe:
    name: str
    timeout: float  # seconds; the runner gives up waiting a little after this
    run: Callable[[DoctorContext], dict]


# ---- in-process probes (fast) -------------------------------------------------------------------

def probe_host(ctx: DoctorContext) -> dict:
    import pwd

    uid = os.getuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = ctx.env.get("USER") or str(uid)
    container = None
    if os.path.exists("/.dockerenv"):
        container = "docker"
    elif os.path.exists("/run/.containerenv"):
        container = "podman"
    elif ctx.env.get("KUBERNETES_SERVICE_HOST"):
        container = "kubernetes"
    elif os.path.exists("/singularity") or ctx.env.get("SINGULARITY_CONTAINER") or ctx.env.get("APPTAINER_CONTAINER"):
        container = "apptainer"
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    workspace = str(ctx.workspace.root) if ctx.workspace is not None else None
    return {"host": {
        "user": user, "uid": uid, "hostname": platform.node(), "kernel": platform.release(),
        "machine": platform.machine(), "cpu_count": cpus, "container": container,
        "python": platform.python_version(), "train_python": ctx.train_python,
        "serve_python": ctx.serve_python, "workspace": workspace,
    }, "env": collect_env(ctx.env)}


def collect_env(env: Mapping[str, str]) -> dict[str, str]:
    kept = {}
    for key, value in env.items():
        if key in ENV_NAMES or key.startswith(ENV_PREFIXES):
            if any(word in key.upper() for word in SECRET_WORDS):
                value = "<set>" if value else ""
            kept[key] = value
    return dict(sorted(kept.items()))


def probe_devices(ctx: DoctorContext) -> dict:
    import grp

    devices: dict[str, Any] = {}
    paths = ["/dev/kfd", *sorted(glob.glob("/dev/dri/renderD*")), *sorted(glob.glob("/dev/nvidia[0-9]*"))]
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            devices[path] = {"exists": False}
            continue
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        devices[path] = {"exists": True, "mode": stat.filemode(st.st_mode), "group": group,
                         "rw": os.access(path, os.R_OK | os.W_OK)}
    return {"devices": devices}


def probe_files(ctx: DoctorContext) -> dict:
    rocm = ctx.rocm_path()
    wanted = ["/proc/cmdline", "/proc/meminfo", "/proc/modules", "/sys/module/amdgpu/version",
              "/proc/driver/nvidia/version", "/proc/sys/kernel/numa_balancing",
              os.path.join(rocm, ".info", "version"), "/opt/rocm/.info/version"]
    files: dict[str, str | None] = {}
    for path in dict.fromkeys(wanted):
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            files[path] = None
            continue
        if path == "/proc/modules":  # only the GPU drivers: the rest is noise (and machine-specific)
            text = "".join(line + "\n" for line in text.splitlines() if line.split(" ", 1)[0] in
                           ("amdgpu", "amdkfd", "nvidia", "nvidia_uvm", "nvidia_drm"))
        elif path == "/proc/meminfo":
            text = "".join(line + "\n" for line in text.splitlines()
                           if line.startswith(("MemTotal", "MemAvailable", "SwapTotal")))
        files[path] = text
    rocm_trees = sorted(p for p in glob.glob("/opt/rocm*") if os.path.isdir(p) and not os.path.islink(p))
    paths = {
        "rocm_trees": rocm_trees,
        "/opt/rocm": os.path.realpath("/opt/rocm") if os.path.exists("/opt/rocm") else None,
        "/sys/module/amdgpu": os.path.isdir("/sys/module/amdgpu"),
        "/sys/module/nvidia": os.path.isdir("/sys/module/nvidia"),
        "ROCM_PATH": _dir_state(ctx.env.get("ROCM_PATH")),
        "HIP_PATH": _dir_state(ctx.env.get("HIP_PATH")),
    }
    return {"files": files, "paths": paths}


def _dir_state(path: str | None) -> dict | None:
    if not path:
        return None
    return {"path": path, "exists": os.path.isdir(path)}


def probe_which(ctx: DoctorContext) -> dict:
    """Tools on PATH; and, apart, those found only in the venv's or ROCm's bin (not on PATH)."""
    import shutil

    on_path = {tool: shutil.which(tool, path=ctx.env.get("PATH")) for tool in TOOLS}
    off_path = {tool: ctx.tool(tool) for tool, found in on_path.items() if not found and ctx.tool(tool)}
    return {"which": on_path, "paths": {"off_path_tools": off_path}}


def probe_storage(ctx: DoctorContext) -> dict:
    import tempfile

    where = {"shm": "/dev/shm", "tmp": tempfile.gettempdir(), "hf_cache": hf_cache_dir(ctx.env)}
    if ctx.workspace is not None:
        where["workspace"] = str(ctx.workspace.root)
    storage: dict[str, Any] = {}
    for key, path in where.items():
        existing = _nearest_existing(path)
        entry: dict[str, Any] = {"path": path, "exists": os.path.exists(path)}
        try:
            vfs = os.statvfs(existing)
            entry.update(total=vfs.f_blocks * vfs.f_frsize, free=vfs.f_bavail * vfs.f_frsize,
                         writable=os.access(existing, os.W_OK), measured_at=existing,
                         device=os.stat(existing).st_dev)
        except OSError as exc:
            entry["error"] = f"{type(exc).__name__}: {exc.strerror or exc}"
        storage[key] = entry
    home = ctx.env.get("HF_HOME") or os.path.join(
        ctx.env.get("XDG_CACHE_HOME") or os.path.join(ctx.env.get("HOME") or os.path.expanduser("~"), ".cache"),
        "huggingface")
    token_file = ctx.env.get("HF_TOKEN_PATH") or os.path.join(home, "token")
    return {"storage": storage, "paths": {"hf_token_file": os.path.isfile(token_file)}}


def _nearest_existing(path: str) -> str:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return str(p)


def probe_plan(ctx: DoctorContext) -> dict:

    return {"plan": planned_model(ctx.workspace, ctx.env)}


# ---- tools and Python environments (subprocesses) ------------------------------------------------

def _command(name: str, argv_of: Callable[[DoctorContext], list[str] | None], timeout: float,
             env_of: Callable[[DoctorContext], dict] | None = None) -> Probe:
    def run(ctx: DoctorContext) -> dict:
        from core.doctor.evidence import CommandResult

        argv = argv_of(ctx)
        if not argv:
            return {"commands": {name: CommandResult(argv=[], missing=True)}}
        env = {**ctx.env, **(env_of(ctx) if env_of else {})}
        return {"commands": {name: run_command(argv, timeout=timeout * ctx.timeout_scale, env=env)}}

    return Probe(name, timeout, run)


def _tool_argv(tool: str, *args: str) -> Callable[[DoctorContext], list[str] | None]:
    def argv(ctx: DoctorContext) -> list[str] | None:
        path = ctx.tool(tool)
        return [path, *args] if path else [tool, *args]  # a missing tool is recorded as missing

    return argv


def _user(ctx: DoctorContext) -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return ctx.env.get("USER", "")


def _venv_path(ctx: DoctorContext) -> dict:
    # ds_report and the torch JIT find ninja and torchrun by name: the venv's bin comes first
    return {"PATH": os.pathsep.join([str(Path(ctx.train_python).parent), ctx.env.get("PATH", "")])}


PROBES: tuple[Probe, ...] = (
    Probe("host", 5, probe_host),
    Probe("devices", 5, probe_devices),
    Probe("files", 5, probe_files),
    Probe("which", 5, probe_which),
    Probe("storage", 10, probe_storage),
    Probe("plan", 10, probe_plan),
    _command("id", lambda ctx: ["id"], 5),
    _command("id_user", lambda ctx: ["id", "-nG", _user(ctx)], 5),
    _command("rocminfo", _tool_argv("rocminfo"), 20),
    _command("amd_smi_static", _tool_argv("amd-smi", "static", "--json"), 30),
    _command("amd_smi_version", _tool_argv("amd-smi", "version"), 20),
    _command("rocm_smi", _tool_argv("rocm-smi", "--showproductname", "--showdriverversion", "--showid", "--json"), 20),
    _command("hipconfig", _tool_argv("hipconfig", "--version"), 10),
    _command("nvidia_smi_query", _tool_argv(
        "nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,compute_cap", "--format=csv,noheader"), 20),
    _command("nvidia_smi", _tool_argv("nvidia-smi"), 20),
    _command("ds_report", lambda ctx: [ctx.train_python, "-m", "deepspeed.env_report"], 60, _venv_path),
    _command("torch", lambda ctx: [ctx.train_python, "-c", TORCH_PROBE], 60),
    _command("packages", lambda ctx: [ctx.train_python, "-c", PACKAGES_PROBE], 60),
    _command("serve", lambda ctx: [ctx.serve_python, "-c", SERVE_PROBE] if ctx.serve_python else None, 60),
)

PROBES_BY_NAME = {p.name: p for p in PROBES}
