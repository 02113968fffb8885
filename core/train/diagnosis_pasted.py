"""What the person pasted beside the error decides the cause: the run's set-up, as their own commands showed it.

core.train.log_facts reads the shell commands in a log (prompts, working directory, `cat`, `ls`, `mount`,
`getent`, `squeue`). Each reason below joins one kind of those facts with what the failure is about, whatever
the message's words; none of them knows a message:

- a run of several nodes whose rendezvous address is the loopback (`--master_addr localhost`, `MASTER_ADDR=127.0.0.1`)
  while the jobs ran on different hosts: each node waits for itself;
- a network failure on a machine whose own host name a lookup in the log did not find (`getent hosts` empty);
- a file error (ENODEV, "Operation not supported", mmap) under a mount point of a FUSE or network file system;
- DeepSpeed ZeRO-3 in a process that says `distributed training: False`: no launcher started it;
- a column the loader looked for that the dataset's `dataset_info.json` entry (as shown) does not map, while the
  data file (as shown) has other columns;
- a container started with GPUs (`docker run --gpus`) whose engine has no NVIDIA runtime (`docker info`'s
  Runtimes, no nvidia-container-toolkit package);
- `ollama create` of a Modelfile whose FROM is a Hugging Face folder (not a GGUF) failing in its import: a GGUF
  made by llama.cpp always imports;
- a process killed for memory (SIGKILL, the OOM killer) while loading a model whose folder (`du -sh`) is about as
  large as the host's RAM and swap (`free`) or larger;
- a rank killed by SIGBUS (DeepSpeed's `return code = -7`, "Bus error") while `df /dev/shm` shows a shared memory of
  less than a GiB (a container's 64 MB default);
- an export or chat config that lacks a model setting the training config of the same model had;
- and the paths (core.train.diagnosis_pasted_paths): a relative path from the wrong working directory, a path of
  the wrong kind (a weights file for its folder, a Hub cache root), a model folder without the code its config
  names, a folder the prompt's user cannot write.

Each finding is a contradiction of the run's own set-up, so core.train.diagnosis_report ranks it first.
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train import log_facts
from core.train.diagnosis_families import FamilyFinding
from core.train.diagnosis_pasted_paths import given_path, launch_of, not_writable, remote_code_files, wrong_directory


def pasted_finding(root: str, frames: str, *, lines: list[tuple[int, str]] | None = None,
                   root_line: int | None = None, **_kw) -> FamilyFinding | None:
    """The set-up fact the log's own shell commands show that explains the root line (`lines`: the numbered
    lines of the log that holds it, `root_line` its number), or None."""
    if not lines:
        return None
    full_text = "\n".join(t for _n, t in lines)
    commands = log_facts.shell_commands(lines)
    for reason in (not_writable, _container_gpu_runtime, _ollama_import, _ram_below_model, _shm_too_small, _multinode_loopback, _zero3_plain_process, _unresolved_host, _mount, wrong_directory,
                   given_path, remote_code_files, _dataset_columns, _config_drift):
        found = reason(root, full_text, commands, root_line)
        if found is not None:
            return found
    return None


def _finding(fid, title, explanation, fix, commands, facts) -> FamilyFinding:
    return FamilyFinding(fid, title, explanation, fix, commands, facts, own_cause=True, contradiction=True)


# --- several nodes ------------------------------------------------------------------------------------------

NNODES = re.compile(r"--nnodes[= ](?:\d+:)?(\d+)\b|\bNNODES=(\d+)\b|--num_machines[= ](\d+)\b|\bSLURM_NNODES=(\d+)")
MASTER = re.compile(r"--master[_-]addr[= ]\"?([\w.\-:]+)|\bMASTER_ADDR=\"?([\w.\-:]+)|--rdzv[_-]endpoint[= ]\"?"
                    r"([\w.\-]+):\d+|--main_process_ip[= ]\"?([\w.\-]+)")
LOOPBACK = ("localhost", "127.0.0.1", "0.0.0.0", "::1", "ip6-localhost")
NODE_SEEN = re.compile(r"slurmstepd(?:-[\w.\-]+)?: error: \*\*\* (?:JOB|STEP) [\d.]+ ON ([\w.\-]+)|"
                       r"^\s*\d+\s+\S+\s+\S+\s+\S+\s+[A-Z]{1,2}\s+[\d:\-]+\s+\d+\s+([\w.\-]+)\s*$", re.M)


def _lines_with(text: str, words: tuple[str, ...]) -> str:
    """The lines of `text` holding any of `words`, found with str.find (a regex over a 100 MB log is seconds)."""
    found: dict[int, str] = {}
    for word in words:
        at = text.find(word)
        while at != -1 and len(found) < 2000:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end == -1 else end
            found.setdefault(start, text[start:end])
            at = text.find(word, end)
    return "\n".join(found[k] for k in sorted(found))


def _multinode_loopback(root, text, commands, root_line):
    if not any(word in text for word in ("nnodes", "NNODES", "num_machines")):
        return None  # a literal test first: the patterns below are slow on a 100 MB log
    text = _lines_with(text, ("nnodes", "NNODES", "num_machines", "SLURM_NNODES", "master_addr", "master-addr",
                              "MASTER_ADDR", "rdzv_endpoint", "rdzv-endpoint", "main_process_ip", "slurmstepd",
                              "NODELIST")) + "\n" + "\n".join(line for c in commands for line in c.output[:50])
    nodes = max((int(next(g for g in m.groups() if g)) for m in NNODES.finditer(text)), default=1)
    masters = [next(g for g in m.groups() if g) for m in MASTER.finditer(text)]
    loop = [m for m in masters if m in LOOPBACK]
    if nodes < 2 or not loop or len(set(masters) - set(LOOPBACK)) > 0:
        return None
    hosts = sorted({h for m in NODE_SEEN.finditer(text) for h in m.groups() if h})
    if len(hosts) == 1:
        return None  # one host for every node (a test cluster on one machine): the loopback reaches it
    facts = [_("{n} nodes (--nnodes)", n=nodes), _("rendezvous address: {addr}", addr=loop[0])]
    if hosts:
        facts.append(_("the jobs ran on: {hosts}", hosts=", ".join(hosts)))
    first = hosts[0] if hosts else "<rank-0 node>"
    return _finding(
        "multinode-loopback", _("{n} nodes meet at {addr}: each node waits for itself", n=nodes, addr=loop[0]),
        _("The rendezvous address of a run of {n} nodes is the loopback {addr}, which on every node is that node "
          "itself: no node reaches the rank-0 node, so the run hangs until it is cancelled or times out "
          "(\"{said}\").", n=nodes, addr=loop[0], said=root[:160]),
        _("Set MASTER_ADDR (--master_addr) to the rank-0 node's host name or IP, the same on every node; under "
          "Slurm, start one job for all nodes and take the first host of its node list."),
        ['MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)', f"getent hosts {first}"], facts)


# --- the host name ------------------------------------------------------------------------------------------

NETWORK = re.compile(r"(?i)connect|rendezvous|resolve|getaddrinfo|name or service|timed out|TCPStore|\bstore\b|"
                     r"socket|gloo|nccl|hostname|address")
IP = re.compile(r"\binet (\d+\.\d+\.\d+\.\d+)/\d+")


def _unresolved_host(root, text, commands, root_line):
    if not NETWORK.search(root):
        return None
    names = log_facts.unresolved_hosts(commands)
    if not names:
        return None
    name = names[0]
    ips = [ip for ip in IP.findall(text) if not ip.startswith("127.")]
    facts = [_("a lookup of {name} found nothing (the log's getent/ping)", name=name)]
    hosts_file = next((f for f in log_facts.shown_files(commands) if f.path.endswith("/etc/hosts")), None)
    if hosts_file is not None and name not in hosts_file.text:
        facts.append(_("/etc/hosts has no line for {name}", name=name))
    line = f"{ips[0] if ips else '<this node IP>'} {name}"
    return _finding(
        "host-unresolved", _("The host name {name} resolves nowhere", name=name),
        _("The launcher reaches its peers (and its own store) by host name, and {name} is in no /etc/hosts and no "
          "DNS, so the connection fails (\"{said}\").", name=name, said=root[:160]),
        _("Make {name} resolvable on every node: add `{line}` to /etc/hosts (or to DNS), then check with "
          "`getent hosts {name}`.", name=name, line=line),
        [f"echo '{line}' | sudo tee -a /etc/hosts", f"getent hosts {name}"], facts)


# --- the file system ----------------------------------------------------------------------------------------

FILE_SYSTEM_ERROR = re.compile(r"(?i)No such device|ENODEV|os error 19|Errno 19|Operation not supported|EOPNOTSUPP|"
                               r"os error 95|Errno 95|mmap|Function not implemented|Stale file handle|Bad address|"
                               r"Input/output error|os error 5\b")
REMOTE_FS = re.compile(r"^(?:fuse(?:\.|blk|$)|nfs|cifs|smb|9p|sshfs|s3fs|gcsfuse|virtiofs|davfs|ceph|glusterfs|"
                       r"beegfs|lustre|wekafs|juicefs|alluxio)", re.I)
MMAP_OPTIONS = {"fuse.mergerfs": "cache.files=partial,dropcacheonclose=true",
                "fuse.rclone": "--vfs-cache-mode full", "fuse.sshfs": "-o cache=yes,kernel_cache"}


def _mount(root, text, commands, root_line):
    if not FILE_SYSTEM_ERROR.search(root):
        return None
    remote = [(point, kind, options) for point, kind, options in log_facts.mounts(commands)
              if REMOTE_FS.match(kind) and point != "/"]
    for point, kind, options in remote:
        if not re.search(re.escape(point.rstrip("/")) + r"(?:/|\b)", text.replace(f"on {point} type", "")):
            continue  # no path of this run under that mount
        facts = [_("{point} is a {kind} mount ({options})", point=point, kind=kind, options=options or "-")]
        extra = MMAP_OPTIONS.get(kind)
        fix = _("Copy the model (or the files the error names) to a local disk (ext4, xfs, or /dev/shm) and point "
                "the run there, or remount {point} with options that support mmap{options}.", point=point,
                options=f" ({extra})" if extra else "")
        return _finding(
            "file-system", _("The files are on a {kind} mount that does not support what the loader needs",
                             kind=kind),
            _("The error is the file system's, not the file's: {point} is a {kind} mount, and loaders map weights "
              "into memory (safetensors, torch.load(mmap=True)), which FUSE and network file systems refuse or "
              "support only with some options (\"{said}\").", point=point, kind=kind, said=root[:160]),
            fix, [f"findmnt -T {point}", f"cp -r {point.rstrip('/')}/<model> /local/disk/"], facts)
    return None


# --- ZeRO-3 without a launcher ------------------------------------------------------------------------------

NOT_DISTRIBUTED = re.compile(r"distributed training: False")
ZERO3 = re.compile(r"^deepspeed:\s*\S*(?:z3|zero3|zero_3|stage3)\S*|\"stage\":\s*3\b|--deepspeed[= ]\S*(?:z3|zero3|stage3)",
                   re.M | re.I)
WORLD_ONE = re.compile(r"n_gpu: 1\b|world size: 1\b")


def _zero3_plain_process(root, text, commands, root_line):
    if not NOT_DISTRIBUTED.search(text) or not ZERO3.search(text) or "FORCE_TORCHRUN=1" in text:
        return None
    if re.search(r"distributed training: True|world size: [2-9]", text):
        return None
    config = ZERO3.search(text).group(0).strip()
    facts = [_("the config: {line}", line=config[:120]), _("the run's log: distributed training: False")]
    return _finding(
        "zero3-no-launcher", _("DeepSpeed ZeRO-3 ran in a plain process, without a distributed launcher"),
        _("The config asks for DeepSpeed ZeRO-3, but the run started as one ordinary process (`distributed "
          "training: False`): DeepSpeed never set up, the model's weights stayed partitioned and empty, and the "
          "first layer to use one fails (\"{said}\").", said=root[:160]),
        _("Start it through torchrun: `FORCE_TORCHRUN=1 llamafactory-cli train <config>`; on a single GPU you can "
          "also drop the `deepspeed` line."),
        ["FORCE_TORCHRUN=1 llamafactory-cli train <config>"], facts)


# --- an export config that lost a model setting of training -------------------------------------------------

LOADING = re.compile(r"(?i)config|AutoModel|model|load|class|size mismatch|shape|key|template|processor|token")
EXPORTING = re.compile(r"llamafactory-cli (?:export|chat|webchat|api|eval)|llamafactory-cli .*(?:merge|export)")
NOT_MODEL = re.compile(r"^(?:model_name_or_path|adapter_name_or_path|export_\w+|infer_\w+|output_dir|dataset\w*|"
                       r"eval_\w+|\w*_dir|stage|do_\w+|overwrite_\w+|report_to|logging_\w+|save_\w+|plot_loss|"
                       r"num_train_epochs|learning_rate|lr_scheduler_type|warmup_\w+|per_device_\w+|"
                       r"gradient_\w+|max_samples|val_size|cutoff_len|preprocessing_\w+|lora_\w+|deepspeed|"
                       r"bf16|fp16|ddp_\w+|seed|max_steps|resume_from_checkpoint|run_name)$")


def _train_only(key: str) -> bool:
    """A setting LLaMA-Factory's parsers accept for training alone (core.train.knobs): no export needs it."""
    from core.train.knobs import lookup

    return any(k.lib in ("llamafactory", "transformers") and tuple(k.commands or ()) == ("train",)
               for k in lookup(key))


def _config_drift(root, text, commands, root_line):
    launch = launch_of(commands, root_line)
    if launch is None or not EXPORTING.search(launch.command) or not LOADING.search(root):
        return None
    configs = [(f, log_facts.parsed(f)) for f in log_facts.shown_files(commands)]
    configs = [(f, c) for f, c in configs if c]
    trained = [(f, c) for f, c in configs if "stage" in c or "do_train" in c or "train" in f.path]
    used = [(f, c) for f, c in configs if f.path.split("/")[-1] in launch.command and (f, c) not in trained]
    if not trained or not used:
        return None
    (train_file, train), (use_file, use) = trained[-1], used[-1]
    lost = [k for k, v in train.items() if not NOT_MODEL.match(str(k)) and not _train_only(str(k))
            and v not in (None, False, "")
            and use.get(k) != v and not (use_file.partial and k not in use)]
    if use_file.partial or not lost:
        return None
    pairs = ", ".join(f"{k}: {train[k]}" for k in lost[:4])
    facts = [_("{file} (training) sets {pairs}", file=train_file.path, pairs=pairs),
             _("{file} (this command) does not", file=use_file.path)]
    return _finding(
        "config-drift", _("The export config lacks model settings the training had: {keys}", keys=", ".join(lost[:4])),
        _("The model was trained with {pairs}, and the config of this command loads it without them, so it is "
          "built another way than in training (\"{said}\").", pairs=pairs, said=root[:160]),
        _("Copy those settings from {train} into {used} ({pairs}) and run it again.", train=train_file.path,
          used=use_file.path, pairs=pairs),
        [f"grep -n -E '{'|'.join(lost[:4])}' {train_file.path} {use_file.path}", launch.command], facts)


# --- a dataset's columns ------------------------------------------------------------------------------------

COLUMN = re.compile(r"(?i)column(?: name)? ['\"]?(\w+)['\"]? (?:is )?not (?:in|found in|present in)|"
                    r"KeyError: ['\"](instruction|input|output|conversations|messages|text|prompt|response)['\"]")
ROLE = {"instruction": "prompt", "input": "query", "output": "response", "conversations": "messages",
        "messages": "messages", "text": "prompt", "prompt": "prompt", "response": "response"}
LIKELY = {"prompt": ("text", "content", "question", "prompt", "query", "instruction", "input"),
          "query": ("input", "context"), "response": ("answer", "response", "output", "completion", "target"),
          "messages": ("messages", "conversations", "conversation", "dialog", "chat")}


def _dataset_columns(root, text, commands, root_line):
    m = COLUMN.search(root)
    if m is None:
        return None
    wanted = m.group(1) or m.group(2)
    shown = log_facts.shown_files(commands)
    info = next((f for f in shown if f.path.endswith("dataset_info.json")), None)
    if info is None or '"columns"' in info.text:
        return None
    entry = re.search(r'"([\w.\-]+)":\s*\{', info.text)
    data = next((f for f in shown if re.search(r"\.jsonl?$", f.path) and f.text.lstrip().startswith(("{", "["))), None)
    keys: list[str] = []
    if data is not None:
        first = data.text.lstrip().lstrip("[").splitlines()[0].rstrip(",")
        keys = re.findall(r'"(\w+)":', first.split("{", 1)[-1])[:8] if "{" in first else []
        keys = [k for k in dict.fromkeys(keys) if re.search(r'"' + k + r'":\s*(?:"|\[)', first)]
    current = re.search(r"(?i)current columns[^:\[]*:?\s*\[([^\]]*)\]", root)
    if current:  # the message's own list of the file's columns
        keys = re.findall(r"['\"](\w+)['\"]", current.group(1))
    if not keys or wanted in keys:
        return None
    role = ROLE.get(wanted, "prompt")
    column = next((k for k in LIKELY.get(role, ()) if k in keys), keys[0])
    name = entry.group(1) if entry else "<dataset>"
    facts = [_("{file}: the entry {name} has no \"columns\"", file=info.path, name=name),
             _("{file}: its rows have {keys}", file=data.path if data else _("the dataset"), keys=", ".join(keys))]
    mapping = f'"columns": {{"{role}": "{column}"}}'
    return _finding(
        "dataset-columns", _("The dataset's columns are not mapped: {wanted} is looked for, the file has {keys}",
                             wanted=wanted, keys=", ".join(keys)),
        _("The entry {name} in dataset_info.json gives no \"columns\", so LLaMA-Factory looks for its default "
          "column {wanted}; the file's rows have {keys} (\"{said}\").", name=name, wanted=wanted,
          keys=", ".join(keys), said=root[:160]),
        _("Map the file's columns in the entry {name} of dataset_info.json: add {mapping} (and the other roles "
          "the file has), then run it again.", name=name, mapping=mapping),
        [f"grep -A4 '\"{name}\"' {info.path}"], facts)


# --- a container engine without the GPU runtime -------------------------------------------------------------

NO_GPU_RUNTIME = re.compile(r"(?i)could not select device driver .*capabilities: \[\[gpu\]\]|unknown or invalid runtime "
                            r"name: nvidia|Unknown runtime specified nvidia|nvidia-container-cli: initialization error|"
                            r"failed to create shim task: .*nvidia")
GPU_CONTAINER = re.compile(r"\b(?:docker|podman)\b.*(?:--gpus|--runtime[= ]nvidia|--device[= ]nvidia\.com/gpu)")


def _container_gpu_runtime(root, text, commands, root_line):
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
    return _finding(
        "container-gpu-runtime", _("The container engine has no NVIDIA runtime"),
        _("The host's GPU driver is one thing; a container gets the GPUs only through the NVIDIA Container Toolkit, "
          "which this engine does not have (or is not configured for), so it cannot hand a GPU to the container "
          "(\"{said}\").", said=root[:160]),
        _("Install the NVIDIA Container Toolkit (`nvidia-container-toolkit`), configure the engine for it and "
          "restart it, then start the container again."),
        ["sudo apt-get install -y nvidia-container-toolkit", "sudo nvidia-ctk runtime configure --runtime=docker",
         "sudo systemctl restart docker", "docker info | grep -i runtimes"], facts)


# --- Ollama's import of a folder ----------------------------------------------------------------------------

def _ollama_import(root, text, commands, root_line):
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
    return _finding(
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


def _ram_below_model(root, text, commands, root_line):
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
    return _finding(
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


def _shm_too_small(root, text, commands, root_line):
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
