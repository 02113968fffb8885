"""Failure families of what a run's machine, model or libraries cannot do, reasoned from the root line, the
traceback's frames and the log around them (core.train.diagnosis_report asks these before
core.train.diagnosis_families, so a download's timeout is not read as a rendezvous):

- hub-download: a download from the Hugging Face Hub (or a mirror) that timed out or was cut: the host, the file.
- driver-too-old: the GPU driver is older than the CUDA (or ROCm) runtime torch was built with: both versions.
- lora-target: LoRA's target modules are not in the model: the names this model has (its folder, or its family).
- version-skew (a check): a library's newer release refuses what its caller still does (DeepSpeed's ZeRO-3 and
  accelerate's no_sync): both packages and their versions.
- cache-dir-unwritable: a library's cache or database folder is missing or not writable (MIOpen's user db, Triton,
  torch extensions): the variable that moves it.
- no-trainable-grad: nothing requires grad; with gradient checkpointing on a frozen base, the fix for that first.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from core.i18n import _
from core.train.diagnosis_families import SITE, FamilyFinding, _caller

HUB_HOST = re.compile(r"host='([\w.-]*(?:huggingface\.co|hf\.co|hf-mirror\.com)[\w.-]*)'|"
                      r"https?://([\w.-]*(?:huggingface\.co|hf\.co|hf-mirror\.com))")
CUT = re.compile(r"ReadTimeout|Read timed out|ConnectTimeout|Connect(?:ion)? timed out|IncompleteRead|"
                 r"ChunkedEncodingError|Connection broken|Connection reset by peer|RemoteDisconnected")
DRIVER = re.compile(r"NVIDIA driver on your system is too old \(found version (\d+)\)|"
                    r"(CUDA driver version is insufficient for CUDA runtime version)|"
                    r"(hipErrorInsufficientDriver|HIP driver version is insufficient)")
LORA = re.compile(r"Target modules? (.+?) not found in the base model")
REFUSES = re.compile(r"^(?:AssertionError|NotImplementedError|RuntimeError): .*(?:is incompatible with|is not "
                     r"compatible with|is not supported with|no longer supported)")
CACHE_ERROR = re.compile(r"filesystem_error|Permission denied|Read-only file system|No such file or directory|"
                         r"Errno (?:2|13|30)\]")
CACHES = ((re.compile(r"[/.]miopen/|/miopen$"), "MIOpen", ("MIOPEN_USER_DB_PATH", "MIOPEN_CUSTOM_CACHE_DIR")),
          (re.compile(r"/\.triton/"), "Triton", ("TRITON_CACHE_DIR",)),
          (re.compile(r"/torch_extensions/"), "torch extensions", ("TORCH_EXTENSIONS_DIR",)),
          (re.compile(r"/\.nv/ComputeCache"), "CUDA", ("CUDA_CACHE_PATH",)),
          (re.compile(r"/\.cache/vllm/"), "vLLM", ("VLLM_CACHE_ROOT",)),
          (re.compile(r"/matplotlib/|/\.config/matplotlib"), "matplotlib", ("MPLCONFIGDIR",)))
# the attention projections of model families whose names are not q_proj/v_proj (LLaMA-Factory's `all` finds any)
MODULE_NAMES = (("baichuan", "W_pack"), ("chatglm", "query_key_value"), ("glm", "query_key_value"),
                ("falcon", "query_key_value"), ("bloom", "query_key_value"), ("gpt_neox", "query_key_value"),
                ("internlm2", "wqkv"), ("phi3", "qkv_proj"), ("gpt2", "c_attn"), ("qwen-", "c_attn"))
CHECKPOINTING = re.compile(r"[Gg]radient checkpointing|None of the inputs have requires_grad=True")


def machine_finding(root: str, frames: str, *, log_text: str = "", python: str | None = None,
                    **_kw) -> FamilyFinding | None:
    for reason in (_hub_download, _cut_short, _driver_too_old, _lora_target, _refused_by_newer, _cache_dir, _no_grad):
        found = reason(root, frames, log_text, python)
        if found is not None:
            return found
    return None


def _hub_download(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    host = HUB_HOST.search(root)
    if not CUT.search(root) or not (host or "huggingface_hub/" in frames):
        return None
    where = next((g for g in host.groups() if g), None) if host else "huggingface.co"
    files = re.findall(r"([\w.-]+\.(?:safetensors|bin|gguf|pt|json|model))\s*:\s*\d+%", log_text)
    repo = re.findall(r"models--([\w.-]+?)--([\w.-]+?)/", log_text)
    model = f"{repo[-1][0]}/{repo[-1][1]}" if repo else "MODEL_ID"
    facts = [_("download host: {host}", host=where)] + ([_("file being downloaded: {file}", file=files[-1])]
                                                         if files else [])
    return FamilyFinding(
        "hub-download", _("The model's download from {host} timed out", host=where),
        _("The download of the model's files from the Hugging Face Hub stalled past the read timeout or was cut: "
          "the network between this machine and {host}, not the run or its config.", host=where),
        _("Download the model before training with `hf download` (it resumes a cut download) and a longer "
          "HF_HUB_DOWNLOAD_TIMEOUT, or through a mirror (HF_ENDPOINT), then train from the local folder."),
        [f"HF_HUB_DOWNLOAD_TIMEOUT=120 hf download {model} --local-dir models/{model.split('/')[-1]}",
         f"HF_ENDPOINT=https://hf-mirror.com hf download {model}"], facts)


# a message that states a file's expected and actual size: the file on disk is shorter (or longer) than it should be
SIZES = re.compile(r"(?i)(?:should be of size|expected (?:a )?(?:file )?size(?: of)?|expected)\s+(\d{3,})(?: bytes)?"
                   r"[^\d]{1,40}?(?:has size|got|but is|received|actual(?: size)?(?: of)?|found)\s+(\d{3,})")
FILE = re.compile(r"([\w./-]+\.(?:safetensors|bin|gguf|pt|pth|ckpt|json|model|parquet|arrow|jsonl|zip|tar|gz))")


def _cut_short(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    m = SIZES.search(root)
    if m is None:
        return None
    want, have = int(m.group(1)), int(m.group(2))
    name = FILE.search(root)
    file = name.group(1) if name else _("the file")
    repo = re.findall(r"models--([\w.-]+?)--([\w.-]+?)/", log_text) or re.findall(
        r"(?:download|from_pretrained|model_name_or_path:?)\s*\(?['\"]?([\w.-]+)/([\w.-]+)", log_text)
    model = f"{repo[-1][0]}/{repo[-1][1]}" if repo else "MODEL_ID"
    short = have < want
    facts = [_("{file}: {have} bytes, {want} expected ({pct:.0%})", file=file, have=have, want=want,
               pct=have / want if want else 0)]
    return FamilyFinding(
        "file-cut-short", _("{file} is incomplete: {have} of {want} bytes", file=file, have=have, want=want)
        if short else _("{file} is not the file expected: {have} bytes, {want} expected", file=file, have=have,
                        want=want),
        _("The file on disk is {how} than the size it should have: its download or copy was cut (a dropped "
          "connection, a full disk, a killed process), or another file has its name. The run and its config are "
          "not the cause.", how=_("shorter") if short else _("longer")),
        _("Delete the incomplete file and download (or copy) it again, with enough free disk space; a Hub download "
          "re-fetches a bad file with --force-download."),
        [f"hf download {model} {file if name else ''} --force-download".replace("  ", " "), "df -h ."], facts,
        own_cause=True)


def _torch_cuda(log_text: str) -> str | None:
    m = re.search(r"(?:torch|PyTorch)[ =:-]*(?:version:\s*)?v?\d+\.\d+[\w.]*\+cu(\d+)(\d)\b", log_text)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _driver_too_old(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    m = DRIVER.search(root)
    if m is None:
        return None
    if m.group(3):
        return FamilyFinding(
            "driver-too-old", _("The amdgpu driver is older than torch's ROCm runtime"),
            _("The ROCm runtime inside the installed torch needs a newer amdgpu kernel driver than this machine "
              "has: the driver and the torch wheel were made for different ROCm releases."),
            _("Update the amdgpu driver (amdgpu-dkms, or the host's image) to the ROCm release of torch, or "
              "install the torch wheel built for the ROCm this driver supports."),
            ["cat /sys/module/amdgpu/version; python -c \"import torch; print(torch.version.hip)\"",
             "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.2"])
    driver = (f"{int(m.group(1)) // 1000}.{int(m.group(1)) % 1000 // 10}") if m.group(1) else None
    wheel = _torch_cuda(log_text)
    facts = ([_("CUDA the driver supports: {version}", version=driver)] if driver else []) + (
        [_("CUDA torch was built with: {version}", version=wheel)] if wheel else [])
    index = "cu118" if driver and driver.startswith("11.") else "cu121"
    return FamilyFinding(
        "driver-too-old", _("The NVIDIA driver (CUDA {driver}) is older than torch's CUDA {wheel}",
                            driver=driver or "?", wheel=wheel) if wheel else
        _("The NVIDIA driver (CUDA {driver}) is older than the CUDA torch was built with", driver=driver or "?"),
        _("Version skew between the driver and the wheel: the installed torch was built with a newer CUDA runtime "
          "than this NVIDIA driver supports (CUDA {driver}), so torch cannot start the GPU.", driver=driver or "?"),
        _("Update the NVIDIA driver (or the cloud image) to one for torch's CUDA, or install the torch wheel built "
          "for a CUDA this driver supports (the command below)."),
        ["nvidia-smi | head -4; python -c \"import torch; print(torch.__version__, torch.version.cuda)\"",
         f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/{index}"], facts)


def _model_dir(log_text: str) -> Path | None:
    m = re.findall(r"loading (?:configuration )?file (\S+?)/config\.json", log_text) or re.findall(
        r"model_name_or_path[\"':= ]+([^\s\"',]+)", log_text)
    return Path(m[-1]) if m else None


def _module_names(folder: Path | None) -> list[str]:
    """The linear layers' names inside the model's blocks, from its folder's weight index (when it is here)."""
    if folder is None:
        return []
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        try:
            keys = json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        names = {k.split(".")[-2] for k in keys if re.search(r"\.\d+\.", k) and k.endswith(".weight")}
        return sorted(n for n in names if not re.search(r"norm|ln|embed|wte|bias", n, re.I))
    return []


def _lora_target(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    m = LORA.search(root)
    if m is None:
        return None
    folder = _model_dir(log_text)
    names = _module_names(folder)
    source = _("the model's weight index") if names else None
    if not names:
        label = (folder.name if folder else "").lower()
        try:
            label += " " + json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type", "")
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        names = [n for key, n in MODULE_NAMES if key in label][:1]
        source = _("the model's family") if names else None
    facts = ([_("model: {path}", path=folder)] if folder else []) + (
        [_("module names of this model ({source}): {names}", source=source, names=", ".join(names))]
        if names else [])
    own = ",".join(names) if names else _("the model's own module names")
    return FamilyFinding(
        "lora-target", _("LoRA's target modules are not in this model: {error}", error=m.group(0)),
        _("lora_target names modules this model does not have: its layers are named differently (Baichuan's "
          "attention is W_pack, ChatGLM's query_key_value), so PEFT found nothing to attach the adapter to."),
        _("Set lora_target: all (LLaMA-Factory then finds every linear layer), or the model's own names ({names}) "
          "in the train YAML.", names=own),
        ["grep -n lora_target configs/train.yaml",
         f"grep -o '\"[^\"]*\\.weight\"' {folder or 'MODEL_DIR'}/*.index.json | sort -u | head -20"], facts)


def _refused_by_newer(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    """A check a newer release of the raising library added, which its caller's release still trips."""
    from core.train.diagnosis_versions import dist_of, installed

    packages = SITE.findall(frames)
    if not REFUSES.search(root) or not packages:
        return None
    provider = dist_of(packages[-1])
    caller_pkg = _caller(frames, packages[-1])
    if caller_pkg is None:
        return None
    caller = dist_of(caller_pkg)
    have = installed([provider, caller], python=python, log_text=log_text)
    facts = [_("{package} {version} installed (from {source})", package=d, version=have[d].version or "?",
               source=have[d].source) for d in (provider, caller)]
    version = have[provider].version
    return FamilyFinding(
        "version-skew", _("Version skew: {provider} {version} refuses what {caller} does", provider=provider,
                          version=version or "?", caller=caller),
        _("{caller} calls {provider} in a way a newer {provider} release turned into an error: the two were "
          "released for different versions of each other, not a fault of the run's data.", caller=caller,
          provider=provider),
        _("Install the {provider} release before the check (the thread below names the pin), or upgrade {caller} "
          "and transformers to releases that no longer make the call; `pip check` lists what else disagrees.",
          provider=provider, caller=caller),
        ([f'pip install "{provider}<{version}"'] if version and have[provider].source == "the log" else [])
        + [f"pip install -U {caller} transformers", "pip check"], facts)


def _cache_dir(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    if not CACHE_ERROR.search(root):
        return None
    path = re.search(r"[\"'](/[^\"']+)[\"']|(?:^|\s)(/\S+)", root)
    where = next((g for g in path.groups() if g), "") if path else ""
    library = next(((name, names) for pattern, name, names in CACHES if pattern.search(where)), None)
    if library is None:
        return None
    name, variables = library
    folder = re.sub(r"/+[^/]*$", "", where)
    exports = " ".join(f"{v}=/tmp/{name.split()[0].lower()}-cache" for v in variables)
    return FamilyFinding(
        "cache-dir-unwritable", _("{library} cannot write its cache folder {folder}", library=name, folder=folder),
        _("{library} keeps a cache or database under the home directory; that folder is missing or not writable "
          "here (a container's home, a read-only or shared file system), and the library aborted the process.",
          library=name),
        _("Create a writable folder and point {variables} at it in the run's environment (or make {folder} "
          "writable), then run again.", variables=", ".join(variables), folder=folder),
        [f"ls -ld {folder}", f"mkdir -p /tmp/{name.split()[0].lower()}-cache && export {exports}"],
        [_("folder: {path}", path=folder)])


def _no_grad(root: str, frames: str, log_text: str, python) -> FamilyFinding | None:
    if "does not require grad and does not have a grad_fn" not in root:
        return None
    if CHECKPOINTING.search(log_text):
        lines = [t[t.find(m.group(0)):].strip() for t in log_text.split("\n") for m in [CHECKPOINTING.search(t)] if m]
        said = next((t for t in lines if "requires_grad" in t), lines[0] if lines else "")
        return FamilyFinding(
            "no-trainable-grad", _("Gradient checkpointing on a frozen base left the loss without gradients"),
            _("Gradient checkpointing (reentrant) recomputes each block from its inputs; with the base model frozen "
              "(LoRA) the embeddings' output does not require grad, so the checkpointed blocks pass on no gradient "
              "and the loss has no grad_fn."),
            _("Make the inputs require grad before training (model.enable_input_require_grads()), or use "
              "non-reentrant checkpointing (gradient_checkpointing_kwargs: {\"use_reentrant\": false}); to confirm, "
              "turn checkpointing off (LLaMA-Factory: disable_gradient_checkpointing: true)."),
            ["grep -n -E 'gradient_checkpointing|use_reentrant|enable_input_require_grads' configs/train.yaml"],
            [_("the log shows gradient checkpointing: {line}", line=said[:200])] if said else [], own_cause=True)
    return FamilyFinding(
        "no-trainable-grad", _("Nothing in the model requires gradients"),
        _("The loss does not depend on any trainable parameter: the adapter was not attached, every "
          "parameter is frozen, or gradient checkpointing of a frozen model left its inputs without "
          "grad (unsloth with full fine-tuning; old transformers)."),
        _("Check finetuning_type and lora_target, turn use_unsloth off for full fine-tuning, and "
          "update transformers and LLaMA-Factory together."),
        ["pip install -U llamafactory transformers"])
