"""Failure families of a run's setup: what a person must change in the machine, the files or the config, reasoned
from the root line, the traceback's frames and the log around them (core.train.diagnosis_families asks these after
its own families).

- native-heap-corruption: glibc's heap checks ("free(): invalid pointer", "double free or corruption"): two native
  libraries disagree.
- embedding-index: a kernel's assertion that an index is past its table (`srcIndex < srcSelectDimSize`, "index out of
  range in self"): token ids beyond the model's embeddings.
- interconnect: the GPUs or nodes cannot use the link NCCL/gloo chose: peer-to-peer, the network interface,
  InfiniBand/RoCE; read from NCCL's "Last error:" and WARN lines.
- collective-timeout: a collective timed out while one rank was still busy with a phase the log names
  (tokenizing, saving, loading), not because a rank failed.
- checkpoint-file: a saved file that cannot be read (not the weights, cut short) or does not fit the model (shapes).
- precision: a kernel that needs fp16/bf16 run in another dtype.
- dataset-format: an error raised by LLaMA-Factory's dataset converters: the dataset_info.json entry does not
  describe the file.
- extension-build: a JIT-compiled op (DeepSpeed, torch extensions) whose compiler failed.
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train.diagnosis_families import FamilyFinding

HEAP = re.compile(r"(?:free|malloc|realloc|munmap_chunk|malloc_consolidate)\(\): |double free or corruption|"
                  r"corrupted size vs\. prev_size|stack smashing detected")
INDEX = re.compile(r"srcIndex < srcSelectDimSize|index out of range in self|indexSelect\w*: .*[Aa]ssert")
TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)")
PHASES = ((re.compile(r"Running tokenizer on dataset|Converting format of dataset|Generating \w+ split|"
                      r"Preprocessing|tokeniz", re.I), "preprocessing"),
          (re.compile(r"Saving model checkpoint|Saving checkpoint|save_pretrained|_save_checkpoint"), "saving"),
          (re.compile(r"Loading checkpoint shards|Loading weights"), "loading"))
# the GPU lacks bfloat16 (NVIDIA before Ampere, compute capability 8.0; AMD before MI200, gfx90a)
NO_BF16 = re.compile(r"doesn't support bf16|[Bb][Ff](?:loat)?16 is (?:only|not) supported|does not support "
                     r"(?:bf16|bfloat16)|bf16.{0,40}(?:requires|needs) (?:an )?Ampere")
GPU_NAME = re.compile(r"Your (.+?) GPU has compute capability (\d+\.\d+)|\b((?:Tesla|Quadro|GeForce|NVIDIA) [\w -]+?"
                      r"|Instinct MI\d+\w*)(?:[,.)]|\s*GPU|$)")
RAISED_IN = re.compile(r'File "([^"]+)", line \d+, in (\w+)')
DATASET_CODE = re.compile(r"(?:llamafactory|llmtuner)/data/(?:aligner|converter|parser|loader)\.py$")


def setup_finding(root: str, frames: str, *, log_text: str = "", **_kw) -> FamilyFinding | None:
    for reason in (_heap, _embedding_index, _interconnect, _collective_timeout, _checkpoint_file, _precision,
                   _dataset_format, _extension_build):
        found = reason(root, frames, log_text)
        if found is not None:
            return found
    return None


def _heap(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    if not HEAP.search(root):
        return None
    return FamilyFinding(
        "native-heap-corruption", _("The C library found the heap corrupted: {error}", error=root[:120]),
        _("Native code wrote past or freed memory it did not own, and glibc aborted the process. In a training run "
          "this is almost always two native libraries that disagree: an extension (flash-attn, bitsandbytes, "
          "DeepSpeed ops, apex) built for another torch, or two copies of the C++ runtime (conda's and pip's "
          "libstdc++)."),
        _("Reinstall the compiled extensions for the installed torch (pip install --force-reinstall --no-cache-dir "
          "<package>), do not mix conda and pip builds of torch, and run once with PYTHONFAULTHANDLER=1 (or under "
          "gdb) to see which library's frame was running."),
        ["PYTHONFAULTHANDLER=1 FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml",
         "python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.version.hip)\"; pip list "
         "2>/dev/null | grep -i -E 'flash|bitsandbytes|deepspeed|apex|xformers'"])


def _embedding_index(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    if not (INDEX.search(root) or ("device-side assert" in root and INDEX.search(log_text))):
        return None
    return FamilyFinding(
        "embedding-index", _("A token id is past the end of the model's embedding table"),
        _("A GPU kernel checked that an index is inside its table and it was not: in a language model this is the "
          "embedding lookup of an input id larger than the model's vocabulary. The tokenizer has more tokens than "
          "the model's embeddings (added special tokens, a template's new tokens, another model's tokenizer), or a "
          "dataset holds ids already tokenized for another model."),
        _("Use the tokenizer that came with the model; when tokens were added on purpose set resize_vocab: true so "
          "the embeddings grow with them; check new_special_tokens and the template. Rerun with "
          "CUDA_LAUNCH_BLOCKING=1 (AMD_SERIALIZE_KERNEL=3 on ROCm) to see the op in the traceback."),
        ["python -c \"from transformers import AutoConfig, AutoTokenizer as T; m='MODEL'; "
         "print(len(T.from_pretrained(m)), AutoConfig.from_pretrained(m).vocab_size)\""])


def _last_error(log_text: str) -> str:
    """NCCL's "Last error:" line and its WARN lines, where the library says what failed."""
    lines = [re.sub(r"^(?:\d+: )?\[rank\d+\]:\s?", "", t) for t in log_text.split("\n")]
    said = [lines[i + 1] for i, t in enumerate(lines[:-1]) if t.strip() == "Last error:"]
    return "\n".join(said + [t for t in lines if "NCCL WARN" in t or "ProcessGroupGloo" in t])


def _interconnect(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    if not re.search(r"NCCL|RCCL|[Gg]loo", root):
        return None
    detail = root + "\n" + _last_error(log_text)
    if re.search(r"peer access is not supported|P2P/IPC.*(?:failed|error)|failed to open CUDA IPC handle", detail):
        kind = _("the GPUs cannot reach each other peer-to-peer")
        fix = _("This machine's GPUs have no peer-to-peer path (consumer cards, a PCIe topology or a VM without P2P): "
                "set NCCL_P2P_DISABLE=1 in the environment of every rank, so NCCL goes through host memory.")
        commands = ["nvidia-smi topo -m", "NCCL_P2P_DISABLE=1 FORCE_TORCHRUN=1 llamafactory-cli train ..."]
    elif re.search(r"no socket interface found|connectFullMesh failed|NCCL_SOCKET_IFNAME .*(?:not found|no)", detail):
        kind = _("no usable network interface")
        fix = _("NCCL or gloo picked (or was told, by NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME) a network interface "
                "that does not exist here or does not reach the other nodes: set both variables to the interface "
                "that carries the nodes' own addresses, the same on every node.")
        commands = ["ip -br addr", "export NCCL_SOCKET_IFNAME=eth0 GLOO_SOCKET_IFNAME=eth0"]
    elif re.search(r"ibv_\w+ failed|NET/IB\b.*(?:[Ee]rror|failed)|mlx5.*(?:error|failed)", detail):
        kind = _("the InfiniBand/RoCE link failed")
        fix = _("NCCL chose an InfiniBand/RoCE device that does not work from this node: select the right adapter "
                "and GID (NCCL_IB_HCA, NCCL_IB_GID_INDEX for RoCE), or fall back to TCP with NCCL_IB_DISABLE=1 to "
                "confirm.")
        commands = ["ibv_devinfo | grep -E 'hca_id|state|link_layer'", "NCCL_IB_DISABLE=1 NCCL_DEBUG=INFO ..."]
    else:
        return None
    return FamilyFinding("interconnect", _("The GPUs could not communicate: {reason}", reason=kind),
                         _("The collective library reported why it could not set up its link; the line is quoted "
                           "below."), fix, commands,
                         [line.strip() for line in _last_error(log_text).split("\n")[:2] if line.strip()])


def _collective_timeout(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    if "collective operation timeout" not in root:
        return None
    head = log_text[: log_text.find("collective operation timeout")]
    phase = None
    for line in reversed(head.split("\n")[-40:]):
        phase = next((name for pattern, name in PHASES if pattern.search(line)), None)
        if phase:
            break
    if phase is None:
        return None  # a rank stalled in training: core.train.failure_rules' nccl-timeout says what to look for
    ms = TIMEOUT_MS.search(root) or TIMEOUT_MS.search(log_text)
    minutes = round(int(ms.group(1)) / 60000) if ms else None
    waited = _("{minutes} min", minutes=minutes) if minutes is not None else _("the timeout")
    doing = {"preprocessing": _("tokenizing and converting the dataset"), "saving": _("saving a checkpoint"),
             "loading": _("loading the model")}[phase]
    fix = {"preprocessing": _("Tokenize once before the distributed run (a single-process run with tokenized_path "
                              "set, then train from it), raise preprocessing_num_workers, or raise ddp_timeout (in "
                              "seconds) above the time preprocessing takes."),
           "saving": _("Raise ddp_timeout above the time a save takes, save less often (save_steps), or write "
                       "output_dir to a faster disk."),
           "loading": _("Raise ddp_timeout above the time loading takes, or keep the model on a local disk rather "
                        "than a network file system.")}[phase]
    return FamilyFinding(
        "collective-timeout", _("A collective timed out while a rank was {doing}", doing=doing),
        _("No rank failed: one rank was still {doing} when the others had waited {waited} for it at a collective, "
          "and the watchdog ended the run.", doing=doing, waited=waited), fix,
        ["grep -n 'ddp_timeout\\|tokenized_path\\|preprocessing_num_workers' configs/train.yaml"],
        [_("phase when it timed out: {doing}", doing=doing)])


def _checkpoint_file(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    if re.search(r"SafetensorError: Error while deserializing header|PytorchStreamReader failed|"
                 r"invalid load key|Unable to load weights from pytorch checkpoint", root):
        return FamilyFinding(
            "checkpoint-file", _("A weights file cannot be read: it is not what it claims to be"),
            _("The file's header is not a valid checkpoint: a git-lfs pointer of a few hundred bytes (cloned without "
              "git-lfs), an interrupted download, an HTML error page saved under the file's name, or a file cut "
              "short by a full disk."),
            _("Download the model again with huggingface-cli download (or git lfs pull in a git clone), compare the "
              "files' sizes with the hub's, and free disk space if a save was cut short."),
            ["ls -la MODEL_DIR", "huggingface-cli download MODEL_ID --local-dir MODEL_DIR"])
    if "Error(s) in loading state_dict" in root and "size mismatch" in root + "\n" + log_text:
        shape = re.search(r"size mismatch for ([\w.]+): copying a param with shape (torch\.Size\(\[[^]]*\]\)) from "
                          r"checkpoint, the shape in current model is (torch\.Size\(\[[^]]*\]\))", log_text)
        facts = [_("{param}: {saved} in the file, {here} in the model", param=shape.group(1), saved=shape.group(2),
                   here=shape.group(3))] if shape else []
        return FamilyFinding(
            "checkpoint-file", _("The saved weights do not fit this model (size mismatch)"),
            _("The checkpoint or adapter was trained on another base model, or with a resized vocabulary "
              "(embed_tokens / lm_head with more rows), so its tensors have other shapes than this model's."),
            _("Load it on the base model it was trained on (adapter_config.json's base_model_name_or_path) with the "
              "tokenizer saved beside it; a vocabulary that was resized needs resize_vocab: true and that tokenizer."),
            ["grep base_model_name_or_path ADAPTER_DIR/adapter_config.json"], facts)
    return None


def _precision(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    if NO_BF16.search(root):
        return _no_bf16(root, frames, log_text)
    if not re.search(r"only supports? (?:fp16 and bf16|float16 and bfloat16)|expected scalar type \w+ but found|"
                     r"not implemented for '(?:Half|BFloat16)'", root):
        return None
    dtype = re.search(r"compute dtype: (torch\.\w+)", log_text)
    facts = [_("compute dtype of the run: {dtype}", dtype=dtype.group(1))] if dtype else []
    return FamilyFinding(
        "precision", _("A kernel was given a dtype it does not support"),
        _("The kernel (FlashAttention, a fused op) runs only in half precision, or got tensors of two dtypes: the "
          "run computes in another dtype than the kernel needs."),
        _("Set bf16: true (or fp16: true on GPUs without bf16) in the train YAML so the model computes in half "
          "precision, or choose another attention implementation (flash_attn: sdpa)."),
        ["grep -n -E 'bf16|fp16|flash_attn' configs/train.yaml"], facts)


def _no_bf16(root: str, frames: str, log_text: str) -> FamilyFinding:
    gpu = GPU_NAME.search(root) or GPU_NAME.search(log_text)
    facts = ([_("GPU: {gpu}, compute capability {cc}", gpu=gpu.group(1), cc=gpu.group(2)) if gpu.group(1) else
              _("GPU: {gpu}", gpu=gpu.group(3))] if gpu else [])
    serving = re.search(r"vllm/", frames) is not None
    fix = (_("Serve in float16: --dtype half on the vllm serve command line (or dtype: half in its config).")
           if serving else _("Train in fp16 instead: fp16: true and no bf16: true in the train YAML (or rent a GPU "
                             "with bf16: NVIDIA Ampere or newer, AMD MI200/gfx90a or newer)."))
    return FamilyFinding(
        "precision", _("This GPU has no bfloat16: {error}", error=re.sub(r"^\w+: ", "", root).split(". ")[0][:120]),
        _("bfloat16 needs an NVIDIA GPU of compute capability 8.0 or more (Ampere: A100, RTX 30xx, newer) or an AMD "
          "MI200 (gfx90a) or newer; this GPU (a T4, a V100, an older card) lacks the dtype, so the run refused it."),
        fix, ["vllm serve MODEL --dtype half" if serving else "grep -n -E 'bf16|fp16' configs/train.yaml",
              "nvidia-smi --query-gpu=name,compute_cap --format=csv"], facts)


def _dataset_format(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    raised = RAISED_IN.findall(frames)
    if not raised or not DATASET_CODE.search(raised[-1][0]) or not re.match(r"(?:KeyError|ValueError|TypeError)",
                                                                              root):
        return None
    dataset = re.findall(r"Loading dataset ([^\s]+?)\.{3}", log_text)
    facts = [_("dataset being converted: {name}", name=dataset[-1])] if dataset else []
    return FamilyFinding(
        "dataset-format", _("The dataset file does not match its dataset_info.json entry"),
        _("LLaMA-Factory's converter ({function}) failed on a row: the entry's formatting, columns or tags "
          "(role_tag, content_tag, user_tag, assistant_tag) name other keys or values than the file holds, or some "
          "rows break the format.", function=raised[-1][1]),
        _("Open one row of the file beside its dataset_info.json entry and make them agree: sharegpt files with "
          "role/content messages need tags {\"role_tag\": \"role\", \"content_tag\": \"content\", \"user_tag\": "
          "\"user\", \"assistant_tag\": \"assistant\"}, from/value files human/gpt; devtune lint finds the rows that "
          "break it."),
        ["devtune lint DATASET_FILE", "python -m json.tool data/dataset_info.json | less"], facts)


def _extension_build(root: str, frames: str, log_text: str) -> FamilyFinding | None:
    m = re.search(r"Error building extension '(\w+)'", root)
    if m is None:
        return None
    said = [t.strip() for t in log_text.split("\n") if re.search(r"\berror\b:|FAILED: |fatal error|cannot find -l",
                                                                  t)][:2]
    return FamilyFinding(
        "extension-build", _("The op {op} could not be compiled", op=m.group(1)),
        _("DeepSpeed (or another torch extension) compiles this op with ninja the first time it is used, and the "
          "compiler failed: no C++ compiler, no CUDA/ROCm toolkit matching torch's, or headers and libraries it "
          "cannot find. The compiler's own error is above the traceback."),
        _("Read the compiler's first error; install the toolkit matching torch's CUDA/ROCm version and set "
          "CUDA_HOME/ROCM_HOME, or install DeepSpeed with the op prebuilt (DS_BUILD_CPU_ADAM=1, DS_BUILD_FUSED_ADAM=1), "
          "or turn off the feature that needs it (offload_optimizer for cpu_adam)."),
        ["python -c \"import torch; print(torch.version.cuda, torch.version.hip)\"; which nvcc hipcc c++",
         "DS_BUILD_CPU_ADAM=1 pip install --no-cache-dir --force-reinstall deepspeed", "ds_report"], said)
