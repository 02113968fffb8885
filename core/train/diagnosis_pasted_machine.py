"""What the person pasted beside the error about the machine and its tools (core.train.diagnosis_pasted asks these):

- a container started with GPUs whose engine has no NVIDIA runtime (`docker info`'s Runtimes);
- `ollama create` of a Modelfile whose FROM is not a GGUF (a Hugging Face folder, a GGML or PyTorch file);
- a process killed for memory while loading a model about as large as the host's RAM and swap (`free`, `du -sh`);
- SIGBUS while `df` shows a /dev/shm under a GiB.
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train import log_facts
from core.train.diagnosis_families import FamilyFinding
from core.train.diagnosis_pasted_paths import contradiction, launch_of


# --- a container engine without the GPU runtime -------------------------------------------------------------

NO_GPU_RUNTIME = re.compile(r"(?i)could not select device driver .*capabilities: \[\[gpu\]\]|unknown or invalid runtime "
                            r"name: nvidia|Unknown runtime specified nvidia|nvidia-container-cli: initialization error|"
                            r"failed to create shim task: .*nvidia")
GPU_CONTAINER = re.compile(r"\b(?:docker|podman)\b.*(?:--gpus|--runtime[= ]nvidia|--device[= ]nvidia\.com/gpu)")


def container_gpu_runtime(root, text, commands, root_line):
    if not NO_GPU_RUNTIME.search(root):
        return None
    launch = next((c for c in reversed(commands) if GPU_CONTAINER.search(c.command)
                   and (root_line is None or c.line < root_line)), None)
    facts = [_("the command: {command}", command=launch.command[:160])] if launch else []
    runtimes = re.search(r"^\s*Runtimes: (.*)$", text, re.M)
    if runtimes:
        facts.append(_("docker info: Runtimes: {names}", names=runtimes.group(1).strip()))
    toolkit = next((c for c in commands if "nvidia-container" in c.command and c.argv[:1] in (["dpkg"], ["rpm"],
                                                                                            ["apt"], ["dnf"])), None)
    if toolkit is not None and not any("nvidia-container" in t for t in toolkit.output):
        facts.append(_("`{command}` lists no nvidia-container package", command=toolkit.command))
    if runtimes and "nvidia" in runtimes.group(1):
        return None  # the runtime is there: something else
    return contradiction(
        "container-gpu-runtime", _("The container engine has no NVIDIA runtime"),
        _("The host's GPU driver is one thing; a container gets the GPUs only through the NVIDIA Container Toolkit, "
          "which this engine does not have (or is not configured for), so it cannot hand a GPU to the container "
          "(\"{said}\").", said=root[:160]),
        _("Install the NVIDIA Container Toolkit (`nvidia-container-toolkit`), configure the engine for it and "
          "restart it, then start the container again."),
        ["sudo apt-get install -y nvidia-container-toolkit", "sudo nvidia-ctk runtime configure --runtime=docker",
         "sudo systemctl restart docker", "docker info | grep -i runtimes"], facts)


# --- Ollama's import of a folder ----------------------------------------------------------------------------

def ollama_import(root, text, commands, root_line):
    launch = launch_of(commands, root_line)
    if launch is None or not re.search(r"\bollama create\b", launch.command) or not root.startswith(("Error", "error")):
        return None
    modelfile = next((f for f in log_facts.shown_files(commands) if re.search(r"^FROM\s+\S+", f.text, re.M)), None)
    if modelfile is None:
        return None
    source = re.search(r"^FROM\s+(\S+)", modelfile.text, re.M).group(1)
    if source.endswith(".gguf") or ("/" not in source and ":" in source) or re.fullmatch(r"[\w.\-]+", source):
        return None  # a GGUF, or a model of Ollama's own library (`FROM llama3:8b`): no import of weights
    listings = log_facts.listings(commands)
    names = next((v for k, v in listings.items() if k.rstrip("/").endswith(source.strip("./").rstrip("/"))), [])
    weights = [n for n in names if re.search(r"\.(?:safetensors|bin|pt|pth)$", n)]
    facts = [_("{file}: FROM {source} (not a GGUF)", file=modelfile.path, source=source)]
    if weights:
        facts.append(_("{source} holds {files}", source=source, files=", ".join(weights[:4])))
    arch = re.search(r'"architectures":\s*\[\s*"(\w+)"', text)
    if arch:
        facts.append(_("its config.json: {arch}", arch=arch.group(1)))
    if re.search(r"\.(?:bin|ggml|ggmlv3|pt|pth)$", source, re.I):  # one file: an old GGML model, or PyTorch's
        kind = (_("a GGML file, the format before GGUF, which Ollama no longer imports") if "ggml" in source.lower()
                else _("a single weights file that is not a GGUF"))
    elif weights and not any(n.endswith(".safetensors") for n in weights):
        kind = _("PyTorch .bin weights, which Ollama does not import (it takes safetensors or GGUF)")
    else:
        kind = _("a safetensors folder this Ollama's importer does not take (its architecture or layout)")
    return contradiction(
        "ollama-import", _("Ollama could not import {source}", source=source),
        _("`ollama create` converts a Hugging Face folder itself only for some architectures and layouts; {source} "
          "is {kind}, so its import stops (\"{said}\").", source=source, kind=kind, said=root[:160]),
        _("Convert the folder to a GGUF with llama.cpp (`convert_hf_to_gguf.py`, then `llama-quantize` for a "
          "smaller type) and point the Modelfile at it: `FROM ./model.gguf`; devtune does both with `devtune merge "
          "--gguf`."),
        [f"python llama.cpp/convert_hf_to_gguf.py {source} --outtype f16 --outfile model-f16.gguf",
         "llama-quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M", "devtune merge --gguf"], facts)


# --- a model larger than the host's memory ------------------------------------------------------------------

KILLED = re.compile(r"(?i)SIGKILL|\bKilled\b|Out of memory|oom[-_ ]kill|Cannot allocate memory|MemoryError|exit code 137")


def ram_below_model(root, text, commands, root_line):
    if not KILLED.search(root):
        return None
    memory = log_facts.host_memory(commands)
    sizes = log_facts.disk_usage(commands)
    if memory is None or not sizes:
        return None
    ram, swap = memory
    path, size = max(sizes.items(), key=lambda kv: kv[1])
    if size < 0.8 * (ram + swap):
        return None
    facts = [_("host memory: {ram:.0f} GiB RAM, {swap:.0f} GiB swap (the log's free)", ram=ram, swap=swap),
             _("{path}: {size:.0f} GiB (the log's du)", path=path, size=size)]
    return contradiction(
        "ram-below-model", _("The model ({size:.0f} GiB) does not fit in the host's memory ({ram:.0f} GiB)",
                             size=size, ram=ram + swap),
        _("Loading reads the weights through host RAM; {path} is {size:.0f} GiB and the host has {ram:.0f} GiB of RAM "
          "and {swap:.0f} GiB of swap, so the kernel killed the process while it loaded (\"{said}\"). The GPU is "
          "not the limit here.", path=path, size=size, ram=ram, swap=swap, said=root[:120]),
        _("Give the host more RAM (or add swap) for the loading, or load a smaller or quantized model (a 4-bit "
          "quantization_bit, a smaller size of the same family)."),
        ["free -g", f"du -sh {path}", "sudo fallocate -l 64G /swapfile && sudo mkswap /swapfile && sudo swapon /swapfile"],
        facts)


# --- a small /dev/shm ---------------------------------------------------------------------------------------

BUS = re.compile(r"return code = -7\b|SIGBUS|Bus error|exitcode\s*:\s*-7\b|signal 7\b")


def shm_too_small(root, text, commands, root_line):
    if not BUS.search(root):
        return None
    for cmd in commands:
        if not cmd.argv or cmd.argv[0] != "df":
            continue
        for line in cmd.output:
            m = re.match(r"^\S+\s+([\d.]+[KMGT]?)\s+\S+\s+\S+\s+\d+%\s+(/dev/shm)\s*$", line.strip())
            size = log_facts.gib(m.group(1)) if m else None
            if size is None or size >= 1:
                continue
            facts = [_("/dev/shm: {size} (the log's df)", size=m.group(1))]
            return FamilyFinding(
                "shared-memory", _("/dev/shm is {size}: too small for the workers' shared memory", size=m.group(1)),
                _("The ranks and data loaders pass tensors through shared memory (/dev/shm); at {size} (a container's "
                  "default) a write past its end kills the process with SIGBUS (\"{said}\").", size=m.group(1),
                  said=root[:160]),
                _("Give the container more shared memory: `docker run --ipc=host` or `--shm-size=16g` (Kubernetes: an "
                  "emptyDir of medium Memory at /dev/shm), then run again."),
                ["docker run --ipc=host ...", "df -h /dev/shm"], facts, own_cause=True, contradiction=True)
    return None
