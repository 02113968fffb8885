"""Failure families: a cause and a fix reasoned from the root exception and the facts of the run, for failures
no rule was written for.

A rule of core.train.failure_rules knows one message. A family knows a class of failures by what a person must
do about them, and fills in the facts of this run and machine:

- version-skew: `cannot import name X from Y`, `No module named 'Y.sub'`, `module 'Y' has no attribute X`,
  `C.__init__() got an unexpected keyword argument 'k'` (a saved file written by a newer library): both
  packages, their installed versions (core.train.diagnosis_versions), the range the caller declares, the pin.
- resource-exhaustion: host RAM (the OOM killer's SIGKILL), GPU memory, disk (ENOSPC) and disk quota, shared
  memory (/dev/shm), open files (EMFILE), processes and threads (EAGAIN): which resource, its size here.
- rendezvous-network: ports (EADDRINUSE), names (DNS), addresses nothing answers on, timeouts, for every launcher.
- gpu-runtime-abort: the GPU runtime or a GPU library failed (HIP/HSA, rocBLAS, hipBLASLt, MIOpen, cuBLAS,
  illegal memory access): the library, the GPU architecture it names, what to match.
- device-mismatch: a model split across devices in one process (no-trainable-grad: core.train.diagnosis_families_machine).

version-skew also reads a model's files that the installed library is too old for (a tokenizer class, a tokenizer.json
format, a config field), and a call whose argument the other library removed; resource-exhaustion also GPU memory
and a Slurm job's cgroup limit; gpu-runtime-abort also the ROCm runtime's GPU hang. The families of a run's setup
(interconnect, checkpoint files, datasets, precision, builds...) are in core.train.diagnosis_families_setup.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from core.i18n import _


@dataclass
class FamilyFinding:
    id: str
    title: str
    explanation: str
    fix: str
    commands: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # what this run and machine say, as evidence lines
    overrides: tuple[str, ...] = ()  # rules this finding corrects when they came first (a full /dev/shm: no full disk)
    same_as: tuple[str, ...] = ()  # rules that already say what this finding says: it adds nothing after them
    own_cause: bool = False  # this run's log decides the cause: a thread matched by the root line alone is not it
    contradiction: bool = False  # the environment contradicts itself (core.train.diagnosis_environment): first


FAMILIES = ("version-skew", "resource-exhaustion", "rendezvous-network", "gpu-runtime-abort", "device-mismatch",
            "no-trainable-grad", "native-heap-corruption", "embedding-index", "interconnect", "collective-timeout",
            "checkpoint-file", "precision", "dataset-format", "extension-build",  # these eight: _setup
            "hub-download", "driver-too-old", "lora-target", "cache-dir-unwritable",  # these: _machine
            "config-contradiction", "missing-dependency",  # these two: _config
            "file-cut-short",  # _machine
            "setting-documented-cause", "wrong-command-keys", "named-setting", "hardware-limit",
            "library-advice", "old-release", "unsupported-feature",
            "model-files", "missing-command",
            "wrong-directory", "multinode-loopback", "host-unresolved", "file-system", "zero3-no-launcher",
            "config-drift", "dataset-columns", "wrong-path-kind", "remote-code-files",
            "not-writable", "container-gpu-runtime", "pip-conflict", "ollama-import",
            "ram-below-model", "driver-library-mismatch",
            "config-field-rejected")  # core.train.diagnosis_validation
# the settings families above are core.train.diagnosis_settings (from the libraries' own settings, knobs.json); the
# last group core.train.diagnosis_pasted (what the log's shell commands showed) and diagnosis_environment (pip)
SITE = re.compile(r"(?:site|dist)-packages/([A-Za-z_][\w]*)/")
IMPORT_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
NO_SUBMODULE = re.compile(r"No module named '(\w+(?:\.\w+)+)'")
NO_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
# a class of a module lacks a member (gguf's `MODEL_ARCH.ARCEE`): the module is read from the failing source line
TYPE_ATTRIBUTE = re.compile(r"type object '(\w+)' has no attribute '(\w+)'")
BAD_KWARG = re.compile(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'")
HOSTPORT = re.compile(r"\(([\w.:-]+), (\d+)\)|\b((?:\d{1,3}\.){3}\d{1,3}|[a-z][\w.-]*):(\d{2,5})\b|port: (\d+)")
IPV4 = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}")
ERROR_WORDS = re.compile(r"(?i)error|fail|refused|timed out|timeout|unreachable|rendezvous|connect|MASTER_ADDR")
LOG_RECORD = re.compile(r"^\s*\[(?:INFO|WARNING|DEBUG)\b|^(?:INFO|DEBUG) ")  # a logger's record, not an error
GFX = re.compile(r"\b(gfx[0-9a-f]{3,4})\b")
# the installed library cannot read what a model's files declare: they were written for a newer one
NEWER_FORMAT = re.compile(r"Tokenizer class (\w+) does not exist or is not currently imported|"
                          r"data did not match any variant of untagged enum (\w+)|`(rope_scaling)` must be a dictionary")
LOADS_SAVED = re.compile(r"from_pretrained|from_json_file|from_dict|load_adapter|from_peft_type|_from_config")
LIBRARIES = ("accelerate", "peft", "transformers", "datasets", "trl", "deepspeed", "vllm", "bitsandbytes",
             "tokenizers", "safetensors", "torch")


def family_finding(root: str, frames: str, *, exit_signal: str | None = None, python: str | None = None,
                   log_text: str = "") -> FamilyFinding | None:
    """The family of this root line (`frames`: the traceback's lines, where the caller and the context show)."""
    for reason in (_version_skew, _resources, _network, _gpu_runtime, _placement):
        found = reason(root, frames, exit_signal=exit_signal, python=python, log_text=log_text)
        if found is not None:
            return found
    return None


def _caller(frames: str, provider: str) -> str | None:
    """The package whose code made the failing call: the innermost site-packages frame not of the provider."""
    packages = [p.lower() for p in SITE.findall(frames)]
    top = provider.split(".")[0].lower()
    inner = [p for p in packages if p != top]
    return inner[-1] if inner else None


def _version_skew(root, frames, *, python, log_text, **_kw) -> FamilyFinding | None:
    from core.train.diagnosis_versions import declared, dist_of, installed, satisfies

    fmt = NEWER_FORMAT.search(root)
    if fmt is not None:
        return _reader_too_old(fmt, frames, python=python, log_text=log_text)
    m = IMPORT_NAME.search(root) or NO_SUBMODULE.search(root) or NO_ATTRIBUTE.search(root)
    typed = TYPE_ATTRIBUTE.search(root)
    if m is None and typed is not None:
        used = re.search(r"\b([A-Za-z_][\w.]*)\." + re.escape(typed.group(1)) + r"\." + re.escape(typed.group(2)), frames)
        if used is not None and used.group(1).split(".")[0] not in ("self", "cls"):
            m = NO_ATTRIBUTE.search(f"module '{used.group(1)}' has no attribute '{typed.group(2)}'")
    kwarg = BAD_KWARG.search(root)
    if m is None and kwarg is None:
        return None
    if kwarg is not None and not LOADS_SAVED.search(frames):
        return _call_skew(kwarg, frames, python=python, log_text=log_text)
    if kwarg is not None:
        provider_pkg = (SITE.findall(frames) or [None])[-1]
        if provider_pkg is None:
            return None
        provider, name = dist_of(provider_pkg), kwarg.group(2)
        caller = None
    else:
        module = m.group(2) if m.re is IMPORT_NAME else m.group(1)
        name = m.group(1) if m.re is IMPORT_NAME else m.group(2) if m.re is NO_ATTRIBUTE else module
        provider = dist_of(module)
        caller_pkg = _caller(frames, module)
        caller = dist_of(caller_pkg) if caller_pkg else None
    script = None
    if caller is None and kwarg is None:  # the user's own script called it (llama.cpp's converter, a train.py)
        own = [f for f in re.findall(r'File "([^"]+)", line \d+', frames)
               if not SITE.search(f) and not re.search(r"/lib/python3\.\d+/", f)]
        script = own[-1].rsplit("/", 1)[-1] if own else None
    dists = [provider] + ([caller] if caller else [])
    facts_of = installed(dists, python=python, log_text=log_text)
    have = facts_of[provider]
    facts = [_("{package} {version} installed (from {source})", package=provider, version=have.version or "?",
               source=have.source)]
    spec = None
    if caller:
        who = facts_of[caller]
        spec = declared(who, provider)
        facts.append(_("{package} {version} installed (from {source})", package=caller,
                       version=who.version or "?", source=who.source))
        facts.append(_("{caller} declares {provider}{spec}", caller=caller, provider=provider, spec=spec)
                     if spec else _("{caller} declares no version range for {provider}", caller=caller,
                                    provider=provider))
    inside = satisfies(have.version, spec)
    if kwarg is not None:
        pin = f'pip install -U "{provider}"'
        why = _("{cls} of the installed {package} does not know `{name}`: the saved file (adapter_config.json, "
                "config.json) was written by a newer {package} than this one.", cls=kwarg.group(1), package=provider,
                name=name)
        fix = _("Upgrade {package} on this machine to the version that saved the file (or newer), then run again.",
                package=provider)
    elif spec and inside is False:
        pin = f'pip install "{provider}{spec}"'
        why = _("{caller} uses `{name}` of {provider}, which the installed {provider} {version} does not have; "
                "{caller} declares {provider}{spec}, and {version} is outside it.", caller=caller, name=name,
                provider=provider, version=have.version, spec=spec)
        fix = _("Install {provider} inside the range {caller} declares (the command below), or a {caller} "
                "release made for {provider} {version}.", provider=provider, caller=caller, version=have.version)
    else:
        pin = f'pip install -U "{provider}"' if caller or script else f'pip install --force-reinstall "{provider}"'
        why = _("{caller} uses `{name}` of {provider}, which the installed {provider} {version} does not have: "
                "the two were released for different versions of each other.", caller=caller or script or _("the code"),
                name=name, provider=provider, version=have.version or "?")
        fix = _("Make the pair agree: upgrade {provider} (the command below), or pin {caller} to the release "
                "made for {provider} {version}; `pip check` lists what else disagrees.", provider=provider,
                caller=caller or script or _("the caller"), version=have.version or "?")
    title = _("Version skew: {caller} and {provider} do not match", caller=caller or script or _("a saved file"),
              provider=provider)
    return FamilyFinding("version-skew", title, why, fix, [pin, "pip check"], facts)


def _reader_too_old(fmt: re.Match, frames: str, *, python, log_text) -> FamilyFinding:
    """A model's file names a class, a format or a field the installed library does not know yet."""
    from core.train.diagnosis_versions import dist_of, installed

    name = next(g for g in fmt.groups() if g)
    provider = "tokenizers" if fmt.group(2) else dist_of((SITE.findall(frames) or ["transformers"])[-1])
    have = installed([provider], python=python, log_text=log_text)[provider]
    facts = [_("{package} {version} installed (from {source})", package=provider, version=have.version or "?",
               source=have.source)]
    why = _("The model's files use `{name}`, which the installed {provider} {version} cannot read: they were written "
            "for a newer {provider}.", name=name, provider=provider, version=have.version or "?")
    fix = _("Upgrade {provider} (the command below) to a release that knows this model, within the range "
            "LLaMA-Factory declares; `pip check` lists what must move with it.", provider=provider)
    return FamilyFinding("version-skew", _("Version skew: the model's files need a newer {provider}",
                                           provider=provider), why, fix, [f'pip install -U "{provider}"', "pip check"],
                         facts)


def _call_skew(kwarg: re.Match, frames: str, *, python, log_text) -> FamilyFinding | None:
    """A library's code passes an argument the installed other library does not take (removed or not yet added)."""
    from core.train.diagnosis_versions import declared, dist_of, installed

    packages = SITE.findall(frames)
    if not packages:
        return None
    caller = dist_of(packages[-1])
    cls, arg = kwarg.group(1), kwarg.group(2)
    callee = next((lib for lib in LIBRARIES if lib != caller  # Accelerator -> accelerate, PeftModel -> peft
                   and len(os.path.commonprefix([cls.lower(), lib])) >= max(4, len(lib) - 1)), None)
    dists = [caller] + ([callee] if callee else [])
    facts_of = installed(dists, python=python, log_text=log_text)
    facts = [_("{package} {version} installed (from {source})", package=d, version=facts_of[d].version or "?",
               source=facts_of[d].source) for d in dists]
    spec = declared(facts_of[caller], callee) if callee else None
    if spec:
        facts.append(_("{caller} declares {provider}{spec}", caller=caller, provider=callee, spec=spec))
    other = callee or _("the library that defines {cls}", cls=cls)
    why = _("{caller} passes `{arg}` to {cls}, which the installed {other} does not take: {other} is newer (it "
            "removed the argument) or older (it did not have it yet) than the release {caller} was written for.",
            caller=caller, arg=arg, cls=cls, other=other)
    fix = _("Install the {other} release {caller} was made for (the range it declares, or the one before the "
            "argument was removed), or upgrade {caller} to a release that no longer passes it.", other=other,
            caller=caller)
    pin = f'pip install "{callee}{spec}"' if callee and spec else f'pip install -U "{caller}"'
    return FamilyFinding("version-skew", _("Version skew: {caller} and {other} do not match", caller=caller,
                                           other=other), why, fix, [pin, "pip check"], facts)


def _limit_fact(which: int, label: str) -> str | None:
    try:
        import resource

        soft, _hard = resource.getrlimit(which)
    except (ImportError, OSError, ValueError):
        return None
    return _("{limit} on this machine: {value}", limit=label, value="unlimited" if soft < 0 else soft)


def _free_fact(path: str) -> str | None:
    import shutil

    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return _("{path} on this machine: {free} GiB free of {total} GiB", path=path, free=round(usage.free / 2**30, 1),
             total=round(usage.total / 2**30, 1))


def _resources(root, frames, *, exit_signal, log_text="", **_kw) -> FamilyFinding | None:
    text = root + "\n" + frames
    overrides: tuple[str, ...] = ()
    same_as: tuple[str, ...] = ()
    if re.search(r"Errno 28\]|No space left on device|StorageFull", root):
        if re.search(r"SemLock|/dev/shm|multiprocessing/(?:queues|synchronize|heap)|shm_open", text):
            kind, fix = _("shared memory (/dev/shm)"), _("Enlarge /dev/shm (docker run --shm-size=16g, or a "
                                                         "bigger tmpfs), or lower dataloader_num_workers.")
            facts, commands = [_free_fact("/dev/shm")], ["df -h /dev/shm"]
            overrides = ("disk-full",)
        else:
            kind, fix = _("disk space"), _("Free space where output_dir and the caches are (old checkpoints, "
                                           "~/.cache/huggingface), set save_total_limit, or write to a bigger disk.")
            facts, commands = [_free_fact(".")], ["df -h . ~/.cache/huggingface"]
    elif re.search(r"Errno 122\]|Disk quota exceeded|EDQUOT", root):
        kind, fix = _("disk quota"), _("Your quota on that file system is used up although the disk may have room: "
                                       "delete old checkpoints or write output_dir to a file system with quota left.")
        facts, commands = [], ["quota -s", "du -sh saves/* | sort -h | tail"]
    elif re.search(r"Errno 24\]|Too many open files|EMFILE", root):
        kind, fix = _("open files"), _("Raise the open-file limit before starting the run (ulimit -n 65536), or "
                                       "lower dataloader_num_workers and preprocessing_num_workers.")
        facts, commands = [_limit_fact(7, "ulimit -n")], ["ulimit -n 65536"]
    elif re.search(r"can't start new thread|Errno 11\]|Resource temporarily unavailable|EAGAIN", root):
        kind, fix = _("processes and threads"), _("The limit of processes and threads was reached: lower "
                                                  "preprocessing_num_workers and dataloader_num_workers, or raise "
                                                  "the limit (ulimit -u, a container's pids limit).")
        facts, commands = [_limit_fact(6, "ulimit -u")], ["ulimit -u", "cat /sys/fs/cgroup/pids.max"]
    elif re.search(r"(?:CUDA|HIP|GPU|cuda|hip)\w*(?: driver)? error: out of memory|OutOfMemoryError|"
                   r"hipErrorOutOfMemory|CUBLAS_STATUS_ALLOC_FAILED", root):
        serving = re.search(r"vllm|EngineCore", frames + log_text[-6000:])
        kind = _("GPU memory")
        fix = (_("vLLM could not fit the model and its cache: lower --gpu-memory-utilization or --max-model-len, free "
                 "the GPU of other processes, or serve a smaller or quantized model.") if serving else
               _("Lower per_device_train_batch_size or cutoff_len, keep gradient checkpointing on, or spread the "
                 "model with DeepSpeed ZeRO-3; QLoRA (quantization_bit: 4) needs far less."))
        facts, commands = [], ["nvidia-smi || rocm-smi --showmeminfo vram"]
        same_as = ("gpu-out-of-memory", "vllm-gpu-memory-utilization", "vllm-kv-cache-too-small")
    elif re.search(r"oom[-_]kill event|OOM Killed|task \d+: Out Of Memory", root + "\n" + log_text[-4000:]):
        kind, fix = _("the job's memory limit (Slurm cgroup)"), _("Slurm's cgroup killed a task that went over the "
                                                                  "job's memory: ask for more (#SBATCH --mem, "
                                                                  "--mem-per-gpu), or use less host RAM (fewer ranks "
                                                                  "per node while loading, low_cpu_mem_usage, "
                                                                  "fewer preprocessing workers).")
        facts, commands = [], ["sacct -j $SLURM_JOB_ID --format=JobID,State,MaxRSS,ReqMem"]
        overrides = ("oom-killer",)  # the kernel's OOM killer rule says dmesg and workers; this is the job's limit
    elif re.search(r"DefaultCPUAllocator: (?:can't|not enough memory)|Cannot allocate memory|Errno 12\]", root) or (
            exit_signal == "SIGKILL" and root.startswith(("SIGKILL", "Killed"))):
        kind, fix = _("host memory (RAM)"), _("The machine ran out of RAM: every rank loads the model into host "
                                              "memory first; use fewer ranks per node, DeepSpeed ZeRO-3 without CPU "
                                              "offload, a smaller cutoff_len, or add RAM or swap.")
        facts, commands = [_meminfo_fact()], ["dmesg -T | grep -i -E 'killed process|out of memory' | tail"]
    else:
        return None
    why = _("The run used up {resource}.", resource=kind)
    return FamilyFinding("resource-exhaustion", _("Out of {resource}", resource=kind), why, fix, commands,
                         [f for f in facts if f], overrides, same_as)


def _meminfo_fact() -> str | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            total = next((int(line.split()[1]) for line in fh if line.startswith("MemTotal:")), None)
    except (OSError, ValueError):
        return None
    return _("RAM on this machine: {gib} GiB", gib=round(total / 2**20, 1)) if total else None


def _endpoint(text: str) -> str | None:
    """The first host:port of these lines that is an address (an IP, localhost, a dotted host name; a port), not
    a logger's `module.path:line` (`llamafactory.hparams.parser:468 >>`)."""
    for m in HOSTPORT.finditer(text):
        if m.group(5):
            return f"port {m.group(5)}"
        host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        logger = text[m.end():m.end() + 4].lstrip().startswith(">>") or re.search(r"[^/]/$", text[max(0, m.start() - 2):m.start()]) is not None
        if (host == "localhost" or IPV4.fullmatch(host) or "." in host) and 0 < int(port) < 65536 and not logger:
            return f"{host}:{port}"
    return None


def _error_lines(log_text: str) -> str:
    """The lines of the log's tail that report an error: where a rendezvous's endpoint is printed."""
    return "\n".join(t for t in log_text[-4000:].split("\n") if ERROR_WORDS.search(t) and not LOG_RECORD.match(t))


def _network(root, frames, *, log_text, **_kw) -> FamilyFinding | None:
    where = _endpoint(root) or _endpoint(frames) or _endpoint(_error_lines(log_text)) or "MASTER_ADDR:MASTER_PORT"
    host, _sep, port = where.rpartition(":") if ":" in where else ("", "", where.split()[-1])
    context = root + "\n" + log_text[-6000:]
    if re.search(r"EADDRINUSE|Address already in use|errno: 98", root):
        kind = _("the port is already in use")
        fix = _("Another process (often an earlier run that did not exit) listens on {where}: stop it, or start "
                "with another MASTER_PORT.", where=where)
        commands = [f"ss -ltnp | grep ':{port} '", "MASTER_PORT=29512 FORCE_TORCHRUN=1 llamafactory-cli train ..."]
    elif re.search(r"gai error|Name or service not known|Temporary failure in name resolution|Unable to find "
                   r"address|host not found|nodename nor servname", context):
        kind = _("the host name does not resolve")
        fix = _("This node cannot resolve {host}: set MASTER_ADDR (or the rendezvous endpoint) to the master's IP "
                "address, or add the name to /etc/hosts on every node.", host=host or where)
        commands = [f"getent hosts {host}" if host else "getent hosts $MASTER_ADDR", "hostname -I"]
    elif re.search(r"timed out|errno: 110|Connection timed out|RendezvousConnectionError|Connection refused|"
                   r"errno: 111|failed to connect", root):
        kind = _("nothing answered at the rendezvous address")
        fix = _("This node could not reach {where}: start the master node's job first, check the address is the "
                "master's reachable IP (not 127.0.0.1 or a container-private one) and that the firewall lets the "
                "port through.", where=where)
        commands = [f"nc -zv {host} {port}" if host else "nc -zv $MASTER_ADDR $MASTER_PORT"]
    else:
        return None
    return FamilyFinding("rendezvous-network", _("Rendezvous failed: {reason}", reason=kind),
                   _("The processes of the run could not meet over the network at {where}.", where=where), fix,
                   commands, [_("rendezvous endpoint: {where}", where=where)])


def _gpu_runtime(root, frames, *, log_text, **_kw) -> FamilyFinding | None:
    lib = re.search(r"Memory access fault|illegal memory access|misaligned address|unspecified launch failure|"
                    r"HSA_STATUS_ERROR_\w+|rocBLAS|rocblaslt|hipBLASLt|MIOpen|miopenStatus\w+|CUBLAS_STATUS_\w+|"
                    r"hipErrorIllegal\w+|hipErrorLaunchFailure|HW Exception by GPU|GPU Hang", root + "\n" + frames)
    if lib is None:
        return None
    gfx = GFX.search(root) or GFX.search(log_text[-20000:])
    arch = gfx.group(1) if gfx else None
    name = lib.group(0)
    facts = [_("GPU architecture named in the log: {arch}", arch=arch)] if arch else []
    if re.search(r"Cannot read|Could not load|Code object build failed|No such file", root + log_text[-4000:]):
        why = _("{library} has no kernels for this GPU{arch}: the installed ROCm or torch build does not support "
                "this architecture.", library=name, arch=f" ({arch})" if arch else "")
        fix = _("Use a ROCm and torch build whose support list has this GPU's architecture; on a consumer card "
                "HSA_OVERRIDE_GFX_VERSION can map it to a supported one; for hipBLASLt only, "
                "TORCH_BLAS_PREFER_HIPBLASLT=0 falls back to rocBLAS.")
        commands = ["rocminfo | grep -o -m1 'gfx[0-9a-f]*'", "export TORCH_BLAS_PREFER_HIPBLASLT=0"]
    elif name in ("HW Exception by GPU", "GPU Hang"):
        why = _("The GPU stopped responding: a kernel ran without end (the ROCm runtime's hang detection), and the "
                "process aborted. Driver or firmware faults, a ROCm bug, or a failing GPU cause it; the code rarely.")
        fix = _("Check the kernel log for amdgpu errors on that GPU, update the ROCm driver and firmware, and rerun "
                "with AMD_SERIALIZE_KERNEL=3 to name the kernel that hung; a GPU that hangs again under another "
                "run needs its host's support.")
        commands = ["sudo dmesg -T | grep -i -E 'amdgpu|gpu hang|reset' | tail", "rocm-smi --showallinfo | head -40"]
    elif name.startswith("HSA_STATUS_ERROR_OUT_OF_RESOURCES"):
        why = _("The ROCm runtime could not allocate its queues or signals (too many processes on one GPU, or "
                "/dev/kfd limits).")
        fix = _("Run one process per GPU, lower dataloader workers that touch the GPU, check the memlock and "
                "process limits; a wedged driver needs a reboot.")
        commands = ["ulimit -l", "rocm-smi --showpids"]
    else:
        why = _("A GPU kernel failed ({library}) and the process aborted: a torch or extension build for another "
                "GPU, CUDA or ROCm version, HSA_OVERRIDE_GFX_VERSION on a GPU it does not fit, a dtype the GPU "
                "lacks (bf16 before Ampere), or a bug of the kernel.", library=name)
        fix = _("Run again with the kernels serialised so the error names the kernel that faulted "
                "(AMD_SERIALIZE_KERNEL=3 on ROCm, CUDA_LAUNCH_BLOCKING=1 on CUDA); reinstall the extension built "
                "for this torch and GPU, and unset HSA_OVERRIDE_GFX_VERSION on Instinct GPUs.")
        commands = ["AMD_SERIALIZE_KERNEL=3 CUDA_LAUNCH_BLOCKING=1 FORCE_TORCHRUN=1 llamafactory-cli train ...",
                    "python -c \"import torch; print(torch.__version__, torch.version.hip, torch.version.cuda)\""]
    return FamilyFinding("gpu-runtime-abort", _("The GPU runtime failed: {error}", error=root[:160]), why, fix, commands,
                   facts)


def _placement(root, frames, **_kw) -> FamilyFinding | None:
    if "Expected all tensors to be on the same device" in root:
        devices = re.search(r"devices?, (\S+) and (\S+?)!?$", root)
        where = f"{devices.group(1)} / {devices.group(2)}" if devices else "?"
        return FamilyFinding("device-mismatch", _("One process holds the model on several devices ({devices})",
                                            devices=where),
                       _("The model was split across devices inside one process: several GPUs visible to a run "
                         "started without torchrun (DataParallel), or layers offloaded to the CPU by device_map."),
                       _("Start one process per GPU (FORCE_TORCHRUN=1, or set CUDA_VISIBLE_DEVICES / "
                         "HIP_VISIBLE_DEVICES to one GPU), and offload with DeepSpeed ZeRO instead of device_map."),
                       ["FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml"])
    return None
