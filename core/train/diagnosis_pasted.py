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
- an export or chat config that lacks a model setting the training config of the same model had;
- the machine's own (core.train.diagnosis_pasted_machine): a container engine without the NVIDIA runtime, Ollama's
  import of what is not a GGUF, a model larger than RAM and swap, SIGBUS with a small /dev/shm;
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
from core.train.diagnosis_pasted_machine import container_gpu_runtime, ollama_import, ram_below_model, shm_too_small
from core.train.diagnosis_pasted_paths import (contradiction, given_path, launch_of, not_writable, remote_code_files,
                                               wrong_directory)


def pasted_finding(root: str, frames: str, *, lines: list[tuple[int, str]] | None = None,
                   root_line: int | None = None, **_kw) -> FamilyFinding | None:
    """The set-up fact the log's own shell commands show that explains the root line (`lines`: the numbered
    lines of the log that holds it, `root_line` its number), or None."""
    if not lines:
        return None
    full_text = "\n".join(t for _n, t in lines)
    commands = log_facts.shell_commands(lines)
    for reason in (not_writable, container_gpu_runtime, ollama_import, ram_below_model, shm_too_small,
                   _multinode_loopback, _zero3_plain_process, _unresolved_host, _mount, wrong_directory,
                   given_path, remote_code_files, _dataset_columns, _config_drift):
        found = reason(root, full_text, commands, root_line)
        if found is not None:
            return found
    return None



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
    return contradiction(
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
    return contradiction(
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
        return contradiction(
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
    return contradiction(
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
    return contradiction(
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
    return contradiction(
        "dataset-columns", _("The dataset's columns are not mapped: {wanted} is looked for, the file has {keys}",
                             wanted=wanted, keys=", ".join(keys)),
        _("The entry {name} in dataset_info.json gives no \"columns\", so LLaMA-Factory looks for its default "
          "column {wanted}; the file's rows have {keys} (\"{said}\").", name=name, wanted=wanted,
          keys=", ".join(keys), said=root[:160]),
        _("Map the file's columns in the entry {name} of dataset_info.json: add {mapping} (and the other roles "
          "the file has), then run it again.", name=name, mapping=mapping),
        [f"grep -A4 '\"{name}\"' {info.path}"], facts)
