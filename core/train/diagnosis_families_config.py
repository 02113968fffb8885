"""The family `config-contradiction`: a run's settings contradict each other or the machine, read from the run's own
facts when the root line shows the symptom. core.train.diagnosis_report asks it first.

The facts are the run's (RunSettings): its YAML copy and DeepSpeed JSON, its working directory and environment
(a devtune run's record names them), else what the log printed (LLaMA-Factory's "world size" and "Initializing N
distributed tasks", DeepSpeed's config dump, the quantization line, the frames). Each check names the two things
that disagree and which one to change:

- more processes than visible GPUs (invalid device ordinal from local ranks past the last GPU);
- ZeRO-3 with a quantized or device_map load; a DeepSpeed JSON whose train_batch_size is fixed and disagrees with
  micro batch x accumulation x world size;
- a relative dataset_dir resolved from another working directory; a plain-text corpus given to stage sft;
- fp16 trainable weights under fp16 AMP; FlashAttention-2 on a GPU older than Ampere;
- an adapter path that holds a full fine-tune's whole model; a local model path that does not exist, tried as a
  Hub id.

The family `missing-dependency` is here too: a loader's error that names the optional package it needs
(sentencepiece, tiktoken, protobuf) comes before the missing-files guesses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from core.i18n import _
from core.train.diagnosis_families import FamilyFinding

# LLaMA-Factory's own example datasets: registered in its data/dataset_info.json, so "undefined" means that file
# was not the one read (dataset_dir resolved from another directory)
LF_EXAMPLES = ("alpaca_en_demo", "alpaca_zh_demo", "glaive_toolcall_en_demo", "glaive_toolcall_zh_demo",
               "mllm_demo", "mllm_audio_demo", "mllm_video_demo", "mllm_video_audio_demo", "identity",
               "dpo_en_demo", "dpo_zh_demo", "kto_en_demo", "c4_demo", "wiki_demo", "alpaca_en", "alpaca_zh")
OPTIONAL = ("sentencepiece", "tiktoken", "protobuf", "blobfile", "einops", "tiktoken_ext")
NEEDS_PACKAGE = re.compile(r"You need to have (\w+) installed|requires the (\w+) library but it was not found|"
                           r"No module named '(\w+)'|\b(\w+) is not installed")
DS_FIELD = re.compile(r"^\s*(train_batch_size|train_micro_batch_size_per_gpu|gradient_accumulation_steps)\s*"
                      r"\.{2,}\s*(\S+)", re.M)
BATCH = re.compile(r"train_batch_size is not equal to micro_batch_per_gpu \* gradient_acc_step \* world_size "
                   r"(\d+) != (\d+) \* (\d+) \* (\d+)")


@dataclass
class RunSettings:
    """What the run was told: its YAML's arguments, its DeepSpeed JSON, its working directory and environment."""

    args: dict = field(default_factory=dict)
    deepspeed: dict = field(default_factory=dict)
    deepspeed_path: str | None = None
    cwd: Path | None = None
    env: dict = field(default_factory=dict)
    failed_ranks: list[int] = field(default_factory=list)
    doctor: list = field(default_factory=list)  # the newest saved doctor report's failing/warning verdicts


def record_settings(ws, record) -> RunSettings:
    """A devtune run's settings from its record: the YAML copy it trained with and the DeepSpeed JSON it names."""
    from core.config.yaml_in import ImportProblem, load_lf_yaml_text

    facts = RunSettings(cwd=Path(record.cwd) if getattr(record, "cwd", None) else None, env=dict(record.env or {}))
    from core.train.diagnosis_environment import doctor_verdicts

    facts.doctor = doctor_verdicts(ws.root)
    if not record.config:
        return facts
    try:
        facts.args = load_lf_yaml_text(ws.abs(record.config).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ImportProblem):
        return facts
    ds = facts.args.get("deepspeed")
    if isinstance(ds, str):
        path = Path(ds) if Path(ds).is_absolute() or facts.cwd is None else facts.cwd / ds
        try:
            facts.deepspeed, facts.deepspeed_path = json.loads(path.read_text(encoding="utf-8")), ds
        except (OSError, ValueError):
            pass
    return facts


def config_finding(root: str, frames: str, *, log_text: str = "", settings: RunSettings | None = None,
                   **_kw) -> FamilyFinding | None:
    run = settings or RunSettings()
    for reason in (_ds_listed_mismatch, _more_ranks_than_gpus, _zero3_quantized, _ds_batch, _dataset_dir, _text_as_sft, _fp16_weights,
                   _flash_attn_arch, _adapter_is_model, _local_path_as_hub, _optional_package):
        found = reason(root, frames, log_text, run)
        if found is not None:
            return found
    return None


def _finding(title, why, fix, commands, facts, overrides=()) -> FamilyFinding:
    return FamilyFinding("config-contradiction", title, why, fix, commands, [f for f in facts if f],
                         tuple(overrides), own_cause=True)


DS_MISMATCH = re.compile(r"- ds ([\w.]+)=(\S+) vs hf ([\w.|]+)=(\S+)")
DS_ARG = re.compile(r"--deepspeed['\",]*\s+['\"]?([^\s'\",]+\.json)|^deepspeed:\s*(\S+\.json)", re.M)


def _ds_listed_mismatch(root, frames, log_text, run):
    """transformers lists each DeepSpeed JSON value that disagrees with a training argument: `- ds
    bf16.enabled=True vs hf bf16|bf16_full_eval=False`. Either side may be meant; "auto" makes the JSON follow."""
    pairs = DS_MISMATCH.findall(root)
    if not pairs:
        return None
    m = DS_ARG.search(log_text)
    config = (m.group(1) or m.group(2)) if m else "the DeepSpeed JSON"
    said = "; ".join(f"{ds}={dv} vs {hf.split('|')[0]}={hv}" for ds, dv, hf, hv in pairs[:4])
    keys = ", ".join(_nested(ds) for ds, _dv, _hf, _hv in pairs[:4])
    facts = [_("{config}: {key}={value}; the training arguments: {arg}={other}", config=config, key=ds, value=dv,
               arg=hf.split("|")[0], other=hv) for ds, dv, hf, hv in pairs[:4]]
    return _finding(
        _("The DeepSpeed JSON and the training arguments disagree: {said}", said=said),
        _("{config} fixes a value that the training arguments set otherwise ({said}); transformers refuses to "
          "guess which one is meant.", config=config, said=said),
        _("Make them agree: set the value in {config} to \"auto\" ({keys}), so it follows the training arguments; "
          "or pass the training argument that matches the JSON.", config=config, keys=keys),
        [f"grep -n -E '{'|'.join(ds.split('.')[0] for ds, *_r in pairs[:4])}' {config}"], facts)


def _nested(key: str) -> str:
    """`bf16.enabled` as the JSON member a person writes: `"bf16": {"enabled": "auto"}`."""
    inner = '"auto"'
    for part in reversed(key.split(".")):
        inner = f'"{part}": {inner}' if inner.startswith('"auto"') else f'"{part}": {{{inner}}}'
    return inner


def _world(log_text: str, run: RunSettings) -> int | None:
    m = re.findall(r"Initializing (\d+) distributed tasks|world size: (\d+)", log_text)
    said = [int(a or b) for a, b in m]
    env = run.env.get("NPROC_PER_NODE")
    return int(env) if env and env.isdigit() else (max(said) if said else None)


def _visible(run: RunSettings) -> int | None:
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if run.env.get(name):
            return len([d for d in run.env[name].split(",") if d.strip()])
    return None


def _more_ranks_than_gpus(root, frames, log_text, run) -> FamilyFinding | None:
    if not re.search(r"invalid device ordinal|hipErrorInvalidDevice\b", root):
        return None
    procs = _world(log_text, run)
    ranks = run.failed_ranks or [int(r) for r in re.findall(r"^\[rank(\d+)\]: \w*Error: .*invalid device ordinal",
                                                           log_text, re.M)]
    gpus = _visible(run) or (min(ranks) if ranks and min(ranks) > 0 else None)
    facts = [_("processes per node: {n}", n=procs) if procs else None,
             _("GPUs visible: {n} (local ranks {first} and up found no device)", n=gpus, first=gpus) if gpus else None]
    count = gpus if gpus else _("the number of GPUs")
    return _finding(
        _("More processes than GPUs ({procs} ranks, {gpus} visible GPUs): {error}", procs=procs or "?",
          gpus=gpus or "?", error=re.sub(r"^\w+: ", "", root)[:120]),
        _("torchrun started one process per nproc_per_node (NPROC_PER_NODE), and each process takes the GPU of its "
          "local rank; this machine exposes fewer GPUs, so the ranks past the last GPU asked for a device that does "
          "not exist."),
        _("Set nproc_per_node (NPROC_PER_NODE) to {count}, the number of GPUs this machine shows, or list the GPUs "
          "to use in CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES on ROCm) with as many processes as entries.",
          count=count),
        ["nvidia-smi -L || rocm-smi --showid", f"NPROC_PER_NODE={gpus or 'N'} FORCE_TORCHRUN=1 llamafactory-cli "
         "train configs/train.yaml"], facts)


def _zero3_quantized(root, frames, log_text, run) -> FamilyFinding | None:
    if not re.search(r"Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a `device_map`|"
                     r"ZeRO-?3 .*(?:quantiz|device_map)", root):
        return None
    bits = re.search(r"Quantizing model to (\d+) bit", log_text)
    bit = run.args.get("quantization_bit") or (bits.group(1) if bits else None)
    facts = [_("quantization: {bits} bit", bits=bit) if bit else None,
             _("DeepSpeed config: {path}", path=run.deepspeed_path) if run.deepspeed_path else None]
    fix = (_("Drop quantization_bit under ZeRO-3 (LoRA on the bf16 model, ZeRO-3 partitions it), or keep the "
             "quantized (QLoRA) run and use ZeRO-2 or one GPU: a {bits}-bit load needs a device_map.", bits=bit)
           if bit else _("Remove device_map and low_cpu_mem_usage from the model's loading arguments under ZeRO-3, "
                         "or use ZeRO-2 where the model must load with a device_map."))
    return _finding(
        _("ZeRO-3 cannot load a quantized or device_map model"),
        _("ZeRO-3 partitions the weights across ranks while they load, which cannot be combined with a device_map "
          "or low_cpu_mem_usage load; a quantized (bitsandbytes) model asks for one."),
        fix, ["grep -n -E 'quantization_bit|deepspeed|device_map' configs/train.yaml"], facts)


def _ds_batch(root, frames, log_text, run) -> FamilyFinding | None:
    m = BATCH.search(root)
    if m is None:
        return None
    total, micro, accum, world = m.groups()
    dumped = dict(DS_FIELD.findall(log_text))
    where = run.deepspeed_path or _("the DeepSpeed JSON")
    fixed = [k for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
             if run.deepspeed.get(k, dumped.get(k, "auto")) not in ("auto", '"auto"')]
    facts = [_("DeepSpeed train_batch_size: {total}; the run's batch: {micro} per device x {accum} accumulation x "
               "{world} processes = {product}", total=total, micro=micro, accum=accum, world=world,
               product=int(micro) * int(accum) * int(world))]
    if fixed:
        facts.append(_("fixed in {where}: {fields}", where=where, fields=", ".join(fixed)))
    return _finding(
        _("The DeepSpeed JSON fixes train_batch_size {total}, the run's batch is {micro} x {accum} x {world}",
          total=total, micro=micro, accum=accum, world=world),
        _("DeepSpeed checks that train_batch_size equals per-device batch x gradient accumulation x world size; "
          "{where} hard-codes a number the run's own batch settings do not give.", where=where),
        _("Set train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps to \"auto\" in "
          "{where} (LLaMA-Factory's examples do; the trainer then fills them in), or make the three agree with "
          "per_device_train_batch_size and gradient_accumulation_steps.", where=where),
        [f"grep -n -E 'batch_size|accumulation' {run.deepspeed_path or 'configs/ds_config.json'}"], facts)


def _dataset_dir(root, frames, log_text, run) -> FamilyFinding | None:
    m = re.search(r"Undefined dataset (\S+) in dataset_info\.json", root)
    if m is None:
        return None
    name = m.group(1)
    folder = str(run.args.get("dataset_dir") or "data")
    if Path(folder).is_absolute():
        return None
    registry = (run.cwd / folder / "dataset_info.json") if run.cwd else None
    missing_here = registry is not None and not registry.exists()
    if name not in LF_EXAMPLES and not missing_here:
        return None  # a dataset of the person's own: dataset-undefined says to register it
    facts = [_("dataset_dir: {folder} (relative: resolved from the working directory)", folder=folder),
             _("working directory of the run: {cwd}", cwd=run.cwd) if run.cwd else None,
             _("{name} is one of LLaMA-Factory's example datasets (its own data/dataset_info.json has it)",
               name=name) if name in LF_EXAMPLES else None]
    return _finding(
        _("dataset_dir {folder} was read from another working directory", folder=folder),
        _("dataset_dir is the relative `{folder}`, so it is resolved from the directory the run was started in; "
          "that directory's {folder}/dataset_info.json is not the one that registers {name}.", folder=folder,
          name=name),
        _("Start the run from the directory whose {folder}/dataset_info.json registers {name} (for LLaMA-Factory's "
          "examples: cd into the LLaMA-Factory checkout), or set dataset_dir to that folder's absolute path.",
          folder=folder, name=name),
        [f"pwd; ls {folder}/dataset_info.json", f"grep -rl '\"{name}\"' --include=dataset_info.json . ~ 2>/dev/null"
         " | head"], facts, ("dataset-undefined",))


def _first_row_keys(run: RunSettings) -> list[str]:
    """The keys of the first row of the run's dataset file, when its dataset_info.json entry is readable here."""
    if run.cwd is None or not run.args.get("dataset"):
        return []
    folder = run.cwd / str(run.args.get("dataset_dir") or "data")
    name = str(run.args["dataset"]).split(",")[0].strip()
    try:
        entry = json.loads((folder / "dataset_info.json").read_text(encoding="utf-8"))[name]
        with open(folder / entry["file_name"], encoding="utf-8") as fh:
            head = fh.read(65536).lstrip()
        row = json.loads(head.split("\n", 1)[0]) if not head.startswith("[") else json.loads(head)[0]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return []
    return sorted(row) if isinstance(row, dict) else []


def _text_as_sft(root, frames, log_text, run) -> FamilyFinding | None:
    if "Cannot find valid samples" not in root:
        return None
    sft = run.args.get("stage", "sft" if re.search(r"run_sft|stage=\"sft\"", frames) else None) == "sft"
    keys = _first_row_keys(run)
    no_turns = re.search(r"Invalid role tag in \[\]", log_text)
    if not sft or not (no_turns or keys == ["text"] or (keys and set(keys) <= {"text", "id", "meta", "source"})):
        return None
    facts = [_("stage: sft"), _("columns of the first row: {keys}", keys=", ".join(keys)) if keys else None,
             _("the converter found no conversation in the rows: {line}", line=no_turns.group(0)) if no_turns
             else None]
    return _finding(
        _("A plain-text corpus was given to stage sft"),
        _("stage sft trains on instruction/response pairs, and the rows of this dataset hold plain text (a `text` "
          "column, a pre-training corpus), so the converter found no prompt and response in any row and dropped "
          "every sample."),
        _("Train this corpus with stage: pt (continued pre-training; register it with \"columns\": {\"prompt\": "
          "\"text\"}), or convert the data to the alpaca or sharegpt format and register its columns for sft."),
        ["grep -n -E '^stage|^dataset' configs/train.yaml", "devtune data lint data/<file>.jsonl"], facts,
        ("dataset-no-valid-samples",))


def _fp16_weights(root, frames, log_text, run) -> FamilyFinding | None:
    if "Attempting to unscale FP16 gradients" not in root:
        return None
    dtype = re.search(r"compute dtype: (torch\.\w+)", log_text)
    facts = [_("compute dtype of the run: {dtype}", dtype=dtype.group(1)) if dtype else None,
             _("the raising frame: torch's GradScaler (fp16 mixed precision)") if "grad_scaler" in frames else None]
    return _finding(
        _("The trainable weights are fp16 under fp16 mixed precision"),
        _("fp16 mixed precision (AMP) keeps fp32 master weights and scales the loss; its GradScaler refuses to "
          "unscale gradients of parameters that are themselves float16. The model (or its LoRA layers) was loaded "
          "in float16 and trained with fp16: true, so the trainable weights are fp16."),
        _("Keep the trainable parameters in float32: load the model in float32 or cast the LoRA/trainable "
          "parameters up (LLaMA-Factory does so unless pure_bf16 or a float16 torch_dtype forces them), or train "
          "with bf16: true where the GPU has it (Ampere or newer, MI200 or newer)."),
        ["grep -n -E 'fp16|bf16|torch_dtype|pure_bf16' configs/train.yaml"], facts)


def _flash_attn_arch(root, frames, log_text, run) -> FamilyFinding | None:
    if not re.search(r"FlashAttention only supports Ampere GPUs or newer", root):
        return None
    from core.train.diagnosis_families_setup import GPU_NAME

    gpu = GPU_NAME.search(log_text)
    remote = "transformers_modules/" in frames
    facts = [_("GPU: {gpu}", gpu=gpu.group(1) or gpu.group(3)) if gpu else None,
             _("the model runs its own code (trust_remote_code), which calls flash_attn itself") if remote else None]
    fix = _("Turn FlashAttention-2 off: flash_attn: disabled (or sdpa) in the train YAML{remote}; or train on an "
            "Ampere or newer GPU (A100, RTX 30xx/40xx, H100).",
            remote=_(", and for a model with its own code set use_flash_attn: false in its config.json") if remote
            else "")
    return _finding(
        _("FlashAttention-2 on a GPU older than Ampere: {error}", error=re.sub(r"^\w+: ", "", root)[:120]),
        _("FlashAttention-2 has kernels only for NVIDIA Ampere or newer (compute capability 8.0+); this GPU is "
          "older (a V100, a T4, an RTX 20xx), so the kernel refused to run."), fix,
        ["nvidia-smi --query-gpu=name,compute_cap --format=csv", "grep -n flash_attn configs/train.yaml"], facts)


def _adapter_is_model(root, frames, log_text, run) -> FamilyFinding | None:
    m = re.search(r"Can't find '?adapter_config\.json'? at '([^']*)'", root)
    if m is None:
        return None
    path = Path(m.group(1))
    where = path if path.is_absolute() or run.cwd is None else run.cwd / path
    whole = (where / "config.json").exists() and not (where / "adapter_config.json").exists()
    named = re.search(r"(?:^|/)(full|freeze)(?:/|$)", m.group(1)) or run.args.get("finetuning_type") in ("full",
                                                                                                          "freeze")
    if not (whole or named):
        return None
    facts = [_("{path} holds a whole model (config.json, no adapter_config.json)", path=m.group(1)) if whole else
             _("{path} is the output of a full (or freeze) fine-tune", path=m.group(1))]
    return _finding(
        _("An adapter was loaded from a full fine-tune's output"),
        _("{path} was written by a full (or freeze) fine-tune, which saves the whole model and no adapter, so there "
          "is no adapter_config.json to load.", path=m.group(1)),
        _("Use that folder as model_name_or_path and drop adapter_name_or_path (and finetuning_type: lora): the "
          "model is already fine-tuned, there is nothing to merge."),
        [f"ls {m.group(1)}", "grep -n -E 'model_name_or_path|adapter_name_or_path' configs/*.yaml"], facts,
        ("adapter-not-found",))


def _local_path_as_hub(root, frames, log_text, run) -> FamilyFinding | None:
    m = re.search(r"(\S+) is not a local folder and is not a valid model identifier", root)
    if m is None:
        return None
    name = m.group(1).strip("'\"")
    if "/" in name and not name.startswith(("/", "./", "../", "~")):
        return None  # owner/name: a Hub id (hub-repo-not-found says to check its spelling)
    facts = [_("model_name_or_path: {name} (no owner/ part: not a Hub id)", name=name),
             _("working directory of the run: {cwd}", cwd=run.cwd) if run.cwd else None]
    return _finding(
        _("The local model path {name} does not exist", name=name),
        _("model_name_or_path `{name}` names a folder that does not exist from the run's working directory, so "
          "transformers tried it as a Hub id, which does not exist either (the hub answers 401 for names it does "
          "not know).", name=name),
        _("Give the absolute path of the downloaded model folder (the one with config.json), or the full Hub id "
          "(owner/name) of the model."),
        [f"ls -d {name} ; find / -maxdepth 4 -type d -iname '{name.rstrip('/').split('/')[-1]}' 2>/dev/null | head"],
        facts, ("hub-repo-not-found", "hub-offline-not-cached", "hub-gated-model"))


def _optional_package(root, frames, log_text, run) -> FamilyFinding | None:
    if not re.search(r"tokeniz|Tokeniz|ImportError|requires", root):
        return None
    tail = log_text[-6000:]
    said = next((m for m in NEEDS_PACKAGE.finditer(tail)
                 if next(g for g in m.groups() if g).lower() in OPTIONAL), None)
    if said is None:
        return None
    package = next(g for g in said.groups() if g).lower()
    package = "tiktoken" if package.startswith("tiktoken") else package
    line = next(t.strip() for t in tail.split("\n") if said.group(0) in t)
    return FamilyFinding(
        "missing-dependency", _("The optional package {package} is not installed", package=package),
        _("The model's files need {package} to load (a slow sentencepiece or tiktoken tokenizer to convert, a "
          "protobuf-serialized one), and it is not installed in the run's environment; the error names it.",
          package=package),
        _("Install it in the training environment (pip install {package}), then run again.", package=package),
        [f"pip install {package}"], [_("the error says: {line}", line=line[:300])],
        ("tokenizer-not-loadable",), own_cause=True)
