"""The model-files family: what the log shows of a model folder decides the cause, whatever the message says.

A person pastes `ls -la`, `head` or a `config.json` beside the error, and those are facts:

- a weights file of a few hundred bytes, or git-lfs's pointer text (`version https://git-lfs.github.com/spec/v1`):
  the repository was cloned without git-lfs, the file is a pointer, not weights ("invalid file magic",
  "header too small", "unknown type", an unpickling error: each loader says it its own way);
- a `quantization_config` (bitsandbytes `load_in_8bit`/`load_in_4bit`, GPTQ, AWQ): the folder holds quantized
  weights, which llama.cpp's converter, ZeRO-3 and a merge cannot use as full-precision ones (a merge onto a
  quantized base leaves bitsandbytes' `.SCB` statistics in the weights; a GPTQ Int4 model is no base for ZeRO-3).
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train.diagnosis_families import FamilyFinding

LFS_TEXT = re.compile(r"version https://git-lfs\.github\.com/spec/v1")
LISTING = re.compile(r"^[-l][rwxsStT-]{9}[@+.]?\s+\d+\s+\S+\s+\S+\s+(\d+)\s+\w{3}\s+\d+\s+[\d:]+\s+"
                     r"(\S+\.(?:gguf|safetensors|bin|pt|pth|ckpt|h5|msgpack))\s*$", re.M)
LOADING = re.compile(r"(?i)magic|header|format|deserializ|unpickl|invalid|corrupt|EOF|not a valid|unknown type|"
                     r"load|zip archive|central directory|too small")
QUANT = re.compile(r'"quant_method":\s*"(\w+)"|"(load_in_[48]bit)":\s*true|BitsAndBytesConfig\((load_in_[48]bit)=True')
BITS = re.compile(r'"(?:bits|w_bit)":\s*(\d+)')
CONVERTER = re.compile(r"convert[-_]hf[-_]to[-_]gguf|convert\.py|llama\.cpp|gguf")
QUANT_ROOT = re.compile(r"(?i)quant|int[48]|\.SCB|Zero-3|zero3|device_map|low_cpu_mem_usage|dtype|Can not map tensor")


def model_files_finding(root: str, frames: str, *, log_text: str = "", **_kw) -> FamilyFinding | None:
    return _lfs_pointer(root, log_text) or _quantized(root, frames, log_text)


def _lfs_pointer(root: str, log_text: str) -> FamilyFinding | None:
    if not LOADING.search(root):
        return None
    small = list(dict.fromkeys((name, int(size)) for size, name in LISTING.findall(log_text) if int(size) < 2048))
    if not small and not LFS_TEXT.search(log_text):
        return None
    facts = [_("{file}: {size} bytes, a weights file that small is a pointer", file=n, size=s) for n, s in small[:3]]
    if LFS_TEXT.search(log_text):
        facts.append(_("the file's text: version https://git-lfs.github.com/spec/v1 (a git-lfs pointer)"))
    files = " ".join(n for n, _s in small[:3]) or "*.gguf *.safetensors"
    return FamilyFinding(
        "model-files", _("The weights file is a git-lfs pointer, not the weights"),
        _("The model was cloned or copied without git-lfs: what is on disk under the weights' name is a pointer of "
          "a few hundred bytes, so every loader rejects it (\"{said}\").", said=root[:160]),
        _("Fetch the real files: install git-lfs and run `git lfs pull` in the clone, or download the model with "
          "`hf download` instead of git; then check the sizes."),
        ["git lfs install && git lfs pull", f"ls -la {files}"], facts, own_cause=True)


def _quantized(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    m = QUANT.search(log_text)
    if m is None or not QUANT_ROOT.search(root):
        return None
    method = m.group(1) or "bitsandbytes"
    flag = m.group(2) or m.group(3)
    bits = flag[8] if flag else (BITS.search(log_text).group(1) if BITS.search(log_text) else "?")
    facts = [_("the model's config: quantization_config, {method}, {bits}-bit", method=method, bits=bits)]
    if CONVERTER.search(frames + "\n" + root) or CONVERTER.search(log_text[-3000:]):
        why = _("The folder holds {method} {bits}-bit weights (a merge onto a quantized base keeps them quantized), "
                "and llama.cpp's converter reads full-precision tensors only.", method=method, bits=bits)
        fix = _("Merge the adapter onto the full-precision base model (an export without quantization_bit, "
                "`devtune merge`), convert that folder, and quantize the GGUF with llama.cpp's own types.")
        commands = ["devtune merge", "llamafactory-cli export configs/merge.yaml  # quantization_bit unset"]
    else:
        why = _("The model is a {method} {bits}-bit quantized checkpoint; training it with ZeRO-3, or merging "
                "into it, needs the full-precision weights.", method=method, bits=bits)
        fix = _("Train the original (unquantized) model and quantize it on the fly with quantization_bit: {bits} "
                "(QLoRA); or keep this model without ZeRO-3.", bits=bits if bits in ("4", "8") else "4")
        commands = ["grep -n -E 'model_name_or_path|quantization_bit|deepspeed' configs/train.yaml"]
    return FamilyFinding("model-files", _("The model folder holds {method} {bits}-bit quantized weights",
                                          method=method, bits=bits), why, fix, commands, facts, own_cause=True)
