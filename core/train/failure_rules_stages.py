"""Failure rules of `devtune diagnose` for the stages around training: launch and rendezvous, model access,
data, kernels and attention backends, host memory, and distributed set-up (see core/train/failure_rules.py
for what a rule's fields mean; sources of the error texts: tests/fixtures/logs/SOURCES.md).
"""

from __future__ import annotations

from core.i18n import _
from core.train.failure_rule import Rule


def stage_rules() -> list[Rule]:
    return [
        # ---- launch and rendezvous
        Rule("master-addr-unresolvable",
             (r"IPv[46] network addresses of \([^,]+, \d+\) cannot be retrieved \(gai error",
              r"socket\.gaierror: \[Errno -?\d+\] (?:Name or service not known|Temporary failure in name resolution)"),
             _("MASTER_ADDR does not resolve to an address"),
             _("torchrun could not look up the rendezvous host's name (getaddrinfo failed), so this node cannot reach "
               "node 0: a typo in MASTER_ADDR, a short host name the node's DNS does not know, or /etc/hosts lacking "
               "it. torchrun keeps retrying until its rendezvous timeout."),
             _("Set MASTER_ADDR to node 0's IP address or a name that resolves on every node (check with getent "
               "hosts); keep NNODES, MASTER_ADDR and MASTER_PORT the same on all nodes."),
             ("getent hosts \"$MASTER_ADDR\"", "hostname -I   # on node 0"), weight=75),
        Rule("process-group-init-timeout",
             (r"Timed out initializing process group in store based barrier",
              r"Timed out waiting \S+ for the store based barrier"),
             _("Not every rank joined the process group in time"),
             _("The ranks that started waited at init_process_group for the others until the timeout: a node that "
               "did not start, more processes expected (NNODES x NPROC_PER_NODE) than were launched, or a rank "
               "still loading the model or preprocessing the data when the others reached the barrier."),
             _("Launch every node with the same NNODES and its NPROC_PER_NODE; if one rank is only slow (a large "
               "dataset being tokenized), preprocess once beforehand (tokenized_path) or raise ddp_timeout."),
             ("grep -n 'world_size\\|worker_count' .devtune/runs/RUN/stderr.log | head",), weight=88),
        # ---- model access
        Rule("model-config-missing",
             (r"does not appear to have a file named config\.json",
              r"Unrecognized model in \S+\. Should have a `model_type` key in its config\.json"),
             _("The model folder has no config.json"),
             _("model_name_or_path points at a folder that is not a complete Hugging Face model: no config.json "
               "(a half-finished download, an adapter folder, or the parent folder of the model)."),
             _("Point model_name_or_path at the folder that holds config.json and the weights; for a LoRA run's "
               "output, use the base model there and the run's folder as adapter_name_or_path; finish the download "
               "with `hf download NAME`."),
             ("ls \"$(grep -m1 model_name_or_path configs/train.yaml | cut -d: -f2 | tr -d ' ')\"",), weight=95),
        Rule("model-type-unknown",
             (r"model type `[^`]+` but Transformers does not recognize this architecture",
              r"does not recognize this architecture",
              r"The checkpoint you are trying to load has model type `[^`]+`",
              r"model type \S+ not recognized"),
             _("The installed transformers does not know this model's architecture"),
             _("config.json names a model_type that this transformers version has no code for: the model is newer "
               "than the installed transformers, or it ships its own code (auto_map) that needs "
               "trust_remote_code."),
             _("Upgrade transformers to a version that lists the model (within LLaMA-Factory's supported range), or "
               "set trust_remote_code: true if the model folder has its own modeling code."),
             ("python -c \"import transformers; print(transformers.__version__)\"", "devtune doctor"), weight=95),
        # ---- data
        Rule("dataset-wrong-stage", (r"The dataset is not applicable in the current training stage",),
             _("The dataset does not fit the training stage"),
             _("A preference dataset (ranking: true in dataset_info.json: chosen and rejected answers) is used for "
               "SFT or pre-training, or a plain dataset for DPO, KTO or reward modelling."),
             _("Use a dataset of the stage's kind: plain instructions or conversations for sft, ranking: true pairs "
               "for dpo, kto (with kto_tag) and rm; or change `stage:`."), ("cat data/dataset_info.json",),
             weight=98),
        Rule("dataset-file-type", (r"Allowed file types: ", r"File types should be identical"),
             _("LLaMA-Factory cannot read this dataset's file type"),
             _("LLaMA-Factory loads arrow, csv, json, jsonl, parquet and txt files, and the files of one dataset must "
               "all be of one type."),
             _("Convert the file in Step 1 (devtune data convert writes JSONL), or point file_name at a supported "
               "file."), ("devtune data convert data/<file>",), weight=97),
        Rule("val-size-with-eval-dataset", (r"Cannot specify `val_size` if `eval_dataset` is not None",),
             _("val_size and eval_dataset are both set"),
             _("The eval set is either split off the training data (val_size) or given as its own dataset "
               "(eval_dataset), not both."),
             _("Remove val_size from the YAML to use the held-out dataset, or remove eval_dataset to split."),
             weight=98),
        Rule("image-token-mismatch",
             (r"The number of (?:images|videos|audios) does not match the number of <(?:image|video|audio)> tokens",),
             _("An example's media placeholders do not match its media"),
             _("A multimodal example has a different number of <image> (or <video>, <audio>) placeholders in its "
               "messages than files in its images (videos, audios) list."),
             _("Give every example exactly one <image> in the text per entry of its images list (the messages "
               "quoted in the error are the example); lint the file to find the others."),
             ("devtune data lint data/<file>.json",), weight=96),
        # ---- kernels and attention backends
        Rule("cuda-no-kernel-image", (r"no kernel image is available for execution on the device",),
             _("A CUDA library has no kernel for this GPU (no kernel image)"),
             _("torch or an extension (flash-attn, bitsandbytes, vLLM's kernels) was built for other GPU "
               "architectures than this one: a new GPU (Blackwell, sm_120) with wheels for older CUDA, or an old "
               "GPU that recent wheels dropped."),
             _("Install torch (and the extension) built for this GPU's compute capability: for RTX 50xx / B200 a "
               "CUDA 12.8+ build; rebuild source-built extensions with TORCH_CUDA_ARCH_LIST set to it."),
             ("python -c \"import torch; print(torch.cuda.get_device_capability(), torch.cuda.get_arch_list())\"",
              "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"), weight=94),
        Rule("flash-attn-s-aux",
             (r"s_aux=s_aux\.to\(query\.dtype\)",),  # its line, not any traceback through flash_attention_forward
             _("transformers 5.6.0 breaks FlashAttention-2 (s_aux is None)"),
             _("transformers 5.6.0's flash_attention_forward calls s_aux.to() on the attention-sink tensor, which "
               "only models with sinks (gpt-oss) have, so any other model fails on its first forward with "
               "'NoneType' object has no attribute 'to' (huggingface/transformers#45588). LLaMA-Factory excludes "
               "that release (hiyouga/LLaMA-Factory#10634, #10610)."),
             _("Install a transformers inside LLaMA-Factory's range other than 5.6.0 (the command below gives "
               "5.5.4), or set flash_attn: sdpa in the train YAML."),
             ("pip install \"transformers>=4.55.0,<5.6.0,!=4.57.0\"", "devtune doctor"), weight=96),
        Rule("sdpa-unsupported",
             (r"does not support an attention implementation through torch\.nn\.functional\.scaled_dot_product_"
              r"attention",),
             _("This model has no SDPA attention"),
             _("flash_attn: sdpa (or auto on a model without it) asks transformers for PyTorch's scaled dot-product "
               "attention, which this model's code does not implement."),
             _("Set flash_attn: disabled (eager attention) for this model, or upgrade transformers if a newer version "
               "adds SDPA for it."), weight=93),
        Rule("liger-missing",
             (r"No module named 'liger_kernel'", r"'liger-kernel' distribution was not found",
              r"No package metadata was found for liger-kernel"),
             _("Liger kernels are enabled but not installed"),
             _("enable_liger_kernel: true needs the liger-kernel package (Triton kernels for CUDA and ROCm)."),
             _("Install liger-kernel into the training environment, or set enable_liger_kernel: false."),
             ("pip install liger-kernel",), weight=96),
        Rule("bitsandbytes-cuda",
             (r"bitsandbytes was compiled without GPU support", r"CUDA Setup failed despite GPU being available",
              r"libbitsandbytes_cuda\d+\S*: cannot open shared object file"),
             _("bitsandbytes has no working CUDA library"),
             _("The installed bitsandbytes loaded its CPU library or none (an old wheel, a CUDA runtime it cannot "
               "find), so QLoRA (quantization_bit) and 8-bit optimizers cannot run on the GPU."),
             _("Install a current bitsandbytes (its wheels carry CUDA libraries), check that torch sees the GPU, or "
               "train without quantization_bit."), ("pip install -U bitsandbytes", "python -m bitsandbytes"),
             weight=90),
        # ---- memory
        Rule("host-out-of-memory",
             (r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory)",),
             _("The host ran out of memory (CPU RAM)"),
             _("An allocation in CPU memory failed: loading the model on the CPU, ZeRO offload, the data "
               "preprocessing workers, or merging an adapter on the CPU need more RAM than is free."),
             _("Free RAM or use a machine with more; lower preprocessing_num_workers; offload less (ZeRO offload "
               "of the optimizer only); export with export_device: auto to merge on the GPU."), ("free -g",),
             weight=92),
        # ---- distributed
        Rule("nccl-version-mismatch", (r"Mismatched NCCL version detected",),
             _("The nodes run different NCCL versions"),
             _("NCCL refuses to build a communicator when ranks use different NCCL versions: the nodes have "
               "different torch builds or nvidia-nccl packages installed."),
             _("Install the same torch and nvidia-nccl-cu12 versions on every node (one image or one lock file); "
               "compare with the command below on each."),
             ("python -c \"import torch; print(torch.__version__, torch.cuda.nccl.version())\"",), weight=97),
    ]
