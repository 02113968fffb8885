"""The failure rules of `devtune diagnose`, as data: id, patterns, title, explanation, fix, commands.

Patterns are regular expressions searched in each log line. `weight` says how decisive a match is:
a fatal error that names its cause (FORCE_TORCHRUN, Undefined dataset) is near 100, a warning that
only *can* cause trouble (RCCL's iommu=pt) is low, so it ranks below the error that ended the run.
`exit_codes` lets the trainer's exit status alone be evidence (137/-9: SIGKILL, the OOM killer).
`suppresses` names rules made redundant when this one matches (an ISA mismatch explains the
hipErrorNoBinaryForGpu that follows it).

Texts go through `_()` when `rules()` is called, so they follow the current language. Commands and
file names are not translated. Sources of the error texts: tests/fixtures/logs/SOURCES.md.
"""

from __future__ import annotations

from core.i18n import _
from core.train.failure_rule import Rule
from core.train.failure_rules_export import export_serve_rules
from core.train.failure_rules_stages import stage_rules

__all__ = ["Rule", "rules"]


def rules() -> list[Rule]:
    return _training_rules() + stage_rules() + export_serve_rules()


def _training_rules() -> list[Rule]:
    return [
        Rule("gpu-out-of-memory",
             (r"HIP out of memory", r"CUDA out of memory", r"torch\.(?:cuda\.)?OutOfMemoryError", r"hipErrorOutOfMemory",
              r"CUDA error: out of memory"),
             _("GPU out of memory"),
             _("The model, its activations and the optimizer state did not fit in the GPU's memory."),
             _("Lower per_device_train_batch_size (raise gradient_accumulation_steps to keep the batch) or "
               "cutoff_len; keep gradient checkpointing on; use DeepSpeed ZeRO-3 (with offload) across GPUs, or "
               "QLoRA (quantization_bit: 4). Fragmentation: set the allocator option below."),
             ("export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True",
              "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), weight=92),
        Rule("isa-mismatch", (r"The program ISA \S+ is not compatible with the device ISA \S+",),
             _("A GPU library was built for another GPU architecture"),
             _("A compiled extension (flash-attn, bitsandbytes, a custom kernel) holds code for another gfx "
               "target than this GPU's."),
             _("Rebuild or reinstall that extension for this GPU's architecture (rocminfo shows it: gfx90a for "
               "MI210/MI250, gfx942 for MI300X/MI325X, gfx950 for MI350X/MI355X)."),
             ("rocminfo | grep -o -m1 'gfx[0-9a-f]*'",
              "GPU_ARCHS=gfx942 PYTORCH_ROCM_ARCH=gfx942 pip install --no-build-isolation --force-reinstall <package>"),
             weight=97, suppresses=("hip-no-binary",)),
        Rule("hip-no-binary", (r"hipErrorNoBinaryForGpu",),
             _("PyTorch has no code for this GPU (hipErrorNoBinaryForGpu)"),
             _("The installed torch (or an extension) was not built for this GPU's gfx architecture."),
             _("Install the ROCm build of torch that matches the installed ROCm and supports this GPU; on Instinct "
               "GPUs do not set HSA_OVERRIDE_GFX_VERSION. `devtune doctor` shows the matching index URL."),
             ("unset HSA_OVERRIDE_GFX_VERSION",
              "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.4"),
             weight=95),
        Rule("illegal-instruction", (r"Illegal instruction", r"SIGILL\b"),
             _("Illegal instruction: a binary does not match this machine"),
             _("A compiled library ran an instruction this CPU or GPU does not have; with ROCm wheels this is an "
               "unsupported gfx target (rocBLAS on gfx1032, pytorch#125310)."),
             _("Reinstall torch for this GPU and ROCm version; check the GPU is on ROCm's support list."),
             ("python -c \"import torch; print(torch.__version__, torch.version.hip)\"",), weight=85,
             exit_codes=(132, -4)),
        Rule("segfault",
             (r"Fatal Python error: Segmentation fault", r"Signal 11 \(SIGSEGV\)", r"^Segmentation fault(?: \(core dumped\))?$"),
             _("The trainer crashed with a segmentation fault (SIGSEGV)"),
             _("Native code (a compiled library, a GPU kernel or the driver) read memory it does not own. The usual "
               "cause is a binary that does not match the rest: an extension (flash-attn, bitsandbytes, DeepSpeed "
               "ops, a custom kernel) built for another torch, CUDA/ROCm version or GPU architecture, or "
               "HSA_OVERRIDE_GFX_VERSION making ROCm run kernels made for another GPU."),
             _("The innermost frame quoted shows what was running; reinstall that library built for this torch and "
               "GPU (or the matching wheel), unset HSA_OVERRIDE_GFX_VERSION on Instinct GPUs, and run again with "
               "PYTHONFAULTHANDLER=1 if no frame was printed."),
             ("PYTHONFAULTHANDLER=1 FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml",
              "python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.version.hip)\"",
              "unset HSA_OVERRIDE_GFX_VERSION"), weight=86, exit_codes=(139, -11)),
        Rule("force-torchrun", (r"Please use `?FORCE_TORCHRUN=1`? to launch DeepSpeed training",),
             _("DeepSpeed needs FORCE_TORCHRUN=1"),
             _("LLaMA-Factory starts DeepSpeed only under torchrun; with one GPU it does not use torchrun unless "
               "told."),
             _("Launch with FORCE_TORCHRUN=1 in the environment (devtune's Train step sets it for DeepSpeed "
               "configs)."),
             ("FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml",), weight=99),
        Rule("torchrun-not-found",
             (r"No such file or directory: 'torchrun'", r"torchrun: command not found"),
             _("torchrun is not on PATH"),
             _("LLaMA-Factory runs `torchrun` by name for multi-GPU and DeepSpeed training; the virtual "
               "environment's bin folder is not on PATH."),
             _("Put the virtual environment's bin folder first on PATH (or activate it) before launching."),
             ("export PATH=\"$VIRTUAL_ENV/bin:$PATH\"", "source .venv/bin/activate"), weight=99),
        Rule("dataset-undefined", (r"Undefined dataset \S+ in dataset_info\.json",),
             _("The dataset is not registered in dataset_info.json"),
             _("`dataset:` names an entry that dataset_info.json (in dataset_dir) does not have."),
             _("Add an entry for it to dataset_info.json in dataset_dir (Step 1 registers it), or fix the name or "
               "dataset_dir in the YAML."), ("cat data/dataset_info.json",), weight=99),
        Rule("dataset-info-unreadable", (r"Cannot open \S*dataset_info\.json",),
             _("dataset_info.json cannot be read"),
             _("dataset_dir has no readable dataset_info.json, or it is not valid JSON."),
             _("Check dataset_dir in the YAML and that dataset_info.json there is valid JSON."),
             ("python -m json.tool data/dataset_info.json",), weight=99),
        Rule("dataset-no-valid-samples", (r"Cannot find (?:valid|sufficient) samples",),
             _("No valid training example in the dataset"),
             _("Every example was dropped while converting the data (empty or missing output, a wrong format or "
               "columns mapping in dataset_info.json); the 'Dropped invalid example' lines above show which."),
             _("Lint the file to see each bad line, and check `formatting` and `columns` in dataset_info.json."),
             ("devtune data lint data/<file>.jsonl",), weight=98),
        Rule("dataset-json-error",
             (r"JSON parse error", r"json\.decoder\.JSONDecodeError", r"Failed to load JSON from file"),
             _("The dataset file is not valid JSON / JSONL"),
             _("pyarrow could not parse the file; its 'row N' counts blocks, not lines, so it does not say where."),
             _("Lint the file: devtune reports the line numbers of broken lines and can fix common damage."),
             ("devtune data lint data/<file>.jsonl",), weight=96),
        Rule("dataset-missing-column",
             (r"KeyError: '(?:instruction|input|output|conversations|messages|system|history|prompt|query|"
              r"response|chosen|rejected)'",),
             _("A dataset column is missing"),
             _("The file's keys do not match the format declared in dataset_info.json (alpaca needs instruction "
               "and output; sharegpt needs conversations or messages)."),
             _("Convert the file in Step 1, or map its keys with `columns` in its dataset_info.json entry."),
             ("devtune data lint data/<file>.jsonl",), weight=90),
        Rule("dataset-columns-differ", (r"All the data files must have the same columns",),
             _("The dataset's files do not all have the same columns"),
             _("The files of one dataset (a folder or a glob in file_name) are read as one table, so each must have "
               "the same keys; the error names the columns that some file adds or lacks."),
             _("Give every file the same keys (drop or rename the extra ones in Step 1), or register the files as "
               "separate datasets and list them in `dataset:`."), ("devtune data lint data/<file>.json",),
             weight=96),
        Rule("dataset-file-missing", (r"File \S+ not found\.",),
             _("A dataset file is missing"),
             _("dataset_info.json points to a file that is not in dataset_dir."),
             _("Fix file_name in dataset_info.json or move the file into dataset_dir."), weight=95),
        Rule("template-unknown", (r"Template \S+ does not exist",),
             _("Unknown chat template"),
             _("`template:` is not one of LLaMA-Factory's registered templates."),
             _("Use a registered name (llama3, qwen3, qwen3_nothink, ...): the Config step lists them and picks "
               "the model's default."), weight=99),
        Rule("bitsandbytes-rocm",
             (r"Configured (?:CUDA|ROCm) binary not found at \S*libbitsandbytes_rocm", r"libbitsandbytes_rocm\d+",
              r"Could not find the bitsandbytes (?:CUDA|ROCm) binary"),
             _("bitsandbytes has no ROCm binary"),
             _("The installed bitsandbytes has no library for this ROCm version, so QLoRA (quantization_bit) cannot "
               "run."),
             _("Install bitsandbytes 0.50 or newer (PyPI ROCm wheels for ROCm 6.4-7.x), or set BNB_ROCM_VERSION, "
               "or train without quantization_bit."), ("pip install -U 'bitsandbytes>=0.50.0'",), weight=90),
        Rule("shared-memory",
             (r"Error while creating shared memory segment", r"failed to extend /dev/shm",
              r"insufficient shared memory \(shm\)", r"out of shared memory", r"Fatal Python error: Bus error"),
             _("Not enough shared memory (/dev/shm)"),
             _("NCCL/RCCL and the data loader workers exchange data through /dev/shm, which is tiny in a default "
               "container (64 MB)."),
             _("Run the container with --ipc=host (or --shm-size=16g); lower dataloader_num_workers meanwhile."),
             ("df -h /dev/shm", "docker run --ipc=host ..."), weight=88, exit_codes=(135, -7)),
        Rule("nccl-timeout",
             (r"Watchdog caught collective operation timeout", r"ProcessGroupNCCL.*[Tt]imeout",
              r"NCCL (?:communicator|operation) .*timed? ?out"),
             _("A multi-GPU collective timed out"),
             _("One rank stopped answering (it crashed, ran out of memory, was slow loading or saving) and the "
               "others waited until the NCCL/RCCL timeout."),
             _("Look for the first rank's error above; raise ddp_timeout for slow saves; on AMD check iommu=pt "
               "(see below) and run with NCCL_DEBUG=INFO."),
             ("NCCL_DEBUG=INFO FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml",), weight=80,
             symptom=True),
        Rule("nccl-error",
             (r"NCCL error", r"nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidUsage)",
              r"NCCL WARN .*(?:[Ff]ailed|[Ee]rror)"),
             _("NCCL/RCCL communication error"),
             _("The GPUs could not talk to each other (peer access, network interface, or RCCL configuration)."),
             _("Rerun with NCCL_DEBUG=INFO; try NCCL_P2P_DISABLE=1 to test peer-to-peer; pick the interface with "
               "NCCL_SOCKET_IFNAME."),
             ("NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml",),
             weight=70, symptom=True),
        Rule("rccl-iommu",
             (r'Missing "iommu=pt"', r'Missing "amd_iommu=on"', r'Missing "HSA_FORCE_FINE_GRAIN_PCIE=1"'),
             _("RCCL warns: iommu=pt is missing from the kernel command line"),
             _("Without iommu=pt, multi-GPU RCCL traffic on AMD can hang or be unstable (rccl#1026, #1129)."),
             _("Add iommu=pt to GRUB_CMDLINE_LINUX and reboot; as a workaround try NCCL_P2P_DISABLE=1."),
             ("sudoedit /etc/default/grub   # GRUB_CMDLINE_LINUX=\"... iommu=pt\"", "sudo update-grub && sudo reboot"),
             weight=40),
        Rule("disk-full", (r"No space left on device", r"StorageFull", r"\[Errno 28\]"),
             _("The disk is full"),
             _("Saving a checkpoint, the model or the datasets cache failed for lack of space."),
             _("Free space or point output_dir / HF_HOME to a larger volume; save_total_limit keeps fewer "
               "checkpoints."), ("df -h . \"${HF_HOME:-$HOME/.cache/huggingface}\"",), weight=92,
             unless=r"/dev/shm|shared memory"),
        Rule("oom-killer",
             (r"exitcode\s*:\s*-9\b", r"Signal 9 \(SIGKILL\) received", r"Out of memory: Killed process",
              r"^Killed$"),
             _("Killed with SIGKILL: most likely the kernel's OOM killer"),
             _("The trainer was killed with signal 9, which is what Linux does when the machine runs out of RAM "
               "(data preprocessing workers, ZeRO offload, loading a large model on the CPU)."),
             _("Confirm with dmesg; lower preprocessing_num_workers and dataloader_num_workers, use low-CPU-memory "
               "loading, or offload less to the CPU."), ("sudo dmesg -T | grep -i -E 'out of memory|killed process'",
                                                       "free -g"), weight=88, exit_codes=(137, -9)),
        Rule("no-gpu-visible",
             (r"No HIP GPUs are available", r"hipErrorNoDevice", r"Found no NVIDIA driver",
              r"Unable to open /dev/kfd read-write"),
             _("The trainer sees no GPU"),
             _("PyTorch found no GPU: no access to /dev/kfd (the render group), a visibility variable hiding them, "
               "or a CPU build of torch."),
             _("Run devtune doctor: it checks group membership, HIP/ROCR/CUDA_VISIBLE_DEVICES and the torch build."),
             ("devtune doctor", "sudo usermod -aG render,video $USER"), weight=90),
        # ---- checkpoints and resume
        Rule("checkpoint-invalid", (r"Can't find a valid checkpoint at \S+",),
             _("The checkpoint it resumed from cannot be loaded"),
             _("LLaMA-Factory resumes by itself from the last checkpoint in output_dir when overwrite_output_dir is "
               "false. That checkpoint belongs to an earlier run (another method, DeepSpeed stage or number of "
               "GPUs, or a half-written save), so this run cannot load it."),
             _("Give this run its own output_dir, or resume on purpose with the settings the checkpoint was saved "
               "with (method, DeepSpeed stage, number of GPUs); set overwrite_output_dir: true only to throw the "
               "old run away."),
             ("ls -la saves/*/checkpoint-*", "devtune runs"), weight=97),
        Rule("output-dir-not-empty", (r"Output directory already exists and is not empty",),
             _("output_dir holds files but no checkpoint"),
             _("LLaMA-Factory refuses to write into a folder that is not empty and has no checkpoint to resume."),
             _("Point output_dir at a new folder; set overwrite_output_dir: true only if that folder may be "
               "overwritten."), ("ls -la saves/",), weight=97),
        # ---- launch and rendezvous
        Rule("master-port-in-use",
             (r"EADDRINUSE", r"ddress already in use", r"failed to listen on any local network address"),
             _("The rendezvous port is already in use"),
             _("torchrun's MASTER_PORT is taken, by another training run on this host or a process that did not end."),
             _("Pick a free port (MASTER_PORT=29501 ...) or end the process holding it."),
             ("ss -ltnp | grep \"${MASTER_PORT:-29500}\"", "MASTER_PORT=29501 FORCE_TORCHRUN=1 llamafactory-cli train "
              "configs/train.yaml"), weight=95),
        Rule("rendezvous-timeout",
             (r"client socket has timed out after \S+ while trying to connect to",
              r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined",
              r"RendezvousTimeoutError", r"torch\.distributed\.DistNetworkError: .*(?:Connection refused|timed out)"),
             _("The nodes did not meet at the rendezvous"),
             _("Not every node reached MASTER_ADDR:MASTER_PORT in time: a node did not start, MASTER_ADDR is not "
               "reachable from it, a firewall blocks the port, or NNODES / NODE_RANK differ between nodes."),
             _("Start every node with the same NNODES, MASTER_ADDR and MASTER_PORT and its own NODE_RANK; check "
               "that each node reaches MASTER_ADDR on that port."),
             ("nc -zv \"$MASTER_ADDR\" \"${MASTER_PORT:-29500}\"",), weight=90),
        # ---- model access
        Rule("hub-gated-model", (r"Cannot access gated repo", r"GatedRepoError"),
             _("The model is gated on the Hugging Face hub"),
             _("The model's licence must be accepted on its hub page, and the trainer needs a token of that account."),
             _("Accept the licence on the model's page, then log in (or set HF_TOKEN) on every node."),
             ("hf auth login", "export HF_TOKEN=..."), weight=96),
        Rule("hub-repo-not-found", (r"Repository Not Found for url", r"RepositoryNotFoundError"),
             _("The model id does not exist on the Hugging Face hub"),
             _("The hub knows no repository of that name: a typo in model_name_or_path (the URL in the error shows "
               "the name asked for), a renamed model, or a private one this token cannot see. The hub answers 401 "
               "for names it does not know, as for private repositories."),
             _("Copy the exact id from the model's page into model_name_or_path (or use a local folder); for a "
               "private model, log in with a token that can read it."),
             ("hf models info <model>", "hf auth login"), weight=97,
             suppresses=("hub-offline-not-cached",)),
        Rule("hub-offline-not-cached",
             (r"outgoing traffic has been disabled", r"LocalEntryNotFoundError",
              r"couldn't connect to 'https://huggingface\.co'", r"is not a local folder and is not a valid model "
              r"identifier"),
             _("The model is neither a local folder nor in the offline cache"),
             _("model_name_or_path names a hub model that was never downloaded into this cache, while the hub is "
               "off (HF_HUB_OFFLINE=1) or unreachable; or the local path does not exist."),
             _("Download it once where the network is reachable (`hf download NAME`) into the same HF_HOME, "
               "or set model_name_or_path to a local folder."),
             ("HF_HUB_OFFLINE=0 hf download <model>", "echo \"$HF_HOME\" \"$HF_HUB_OFFLINE\""), weight=95),
        Rule("trust-remote-code", (r"set the option `trust_remote_code=True`", r"trust_remote_code=True"),
             _("The model needs its own code (trust_remote_code)"),
             _("This model's config.json points at Python code in its folder (auto_map); transformers runs it only "
               "when told to."),
             _("Read the code in the model folder, then set trust_remote_code: true in the train YAML."),
             weight=94),
        Rule("dependency-version",
             (r"is required for a normal functioning of this module, but found",),
             _("A library version LLaMA-Factory does not support"),
             _("LLaMA-Factory checks the versions of transformers, datasets, accelerate, peft and trl at start."),
             _("Install the version range it names (make setup does), or set DISABLE_VERSION_CHECK=1 at your own "
               "risk."), ("devtune doctor",), weight=93),
        # ---- kernels and attention backends
        Rule("flash-attn-missing",
             (r"the package flash_attn seems to be not installed", r"FlashAttention2 has been toggled on, but it "
              r"cannot be used", r"the package for FlashAttention\d? doesn't seem to be installed"),
             _("flash-attn was asked for but is not installed"),
             _("flash_attn: fa2 in the YAML needs the flash-attn package built for this GPU."),
             _("Use flash_attn: sdpa (PyTorch's own attention, fast on MI300X and recent NVIDIA), or install "
               "flash-attn for this GPU (ROCm: the ROCm/flash-attention build)."), weight=92),
        Rule("flash-attn-abi", (r"flash_attn_2_cuda.*undefined symbol", r"flash_attn.*\.so: undefined symbol"),
             _("flash-attn was built against another PyTorch"),
             _("Its compiled extension does not match the installed torch (an upgrade of torch after flash-attn)."),
             _("Reinstall flash-attn against this torch, or use flash_attn: sdpa."),
             ("pip install --no-build-isolation --force-reinstall flash-attn",), weight=95),
        Rule("hip-invalid-device-function", (r"hipErrorInvalidDeviceFunction", r"HIP error: invalid device function"),
             _("A GPU kernel is missing for this GPU (invalid device function)"),
             _("A library (torch, an extension) has no kernel for this GPU's gfx architecture, often after "
               "HSA_OVERRIDE_GFX_VERSION or a wheel built for other GPUs."),
             _("Install a torch (and extensions) built for this GPU's gfx target, which rocminfo names. A consumer "
               "Radeon the build lacks runs with HSA_OVERRIDE_GFX_VERSION set to the nearest supported target: "
               "HSA_OVERRIDE_GFX_VERSION=11.0.0 for gfx110x-gfx115x, 10.3.0 for gfx103x; on Instinct GPUs (gfx90a, "
               "gfx942) unset it instead."),
             ("rocminfo | grep -o -m1 'gfx[0-9a-f]*'",
              "HSA_OVERRIDE_GFX_VERSION=11.0.0 llamafactory-cli train configs/train.yaml  # a consumer gfx11xx",
              "unset HSA_OVERRIDE_GFX_VERSION  # an Instinct GPU"), weight=93),
        Rule("deepspeed-no-toolkit", (r"CUDA_HOME does not exist, unable to compile CUDA op", r"MissingCUDAException",
                                      r"ROCM_HOME does not exist"),
             _("DeepSpeed cannot build its kernels: no CUDA/ROCm toolkit found"),
             _("DeepSpeed compiles some ops (fused Adam, ...) at first use and needs the toolkit's compiler."),
             _("Install the toolkit (ROCm: hipcc from /opt/rocm), or export CUDA_HOME / ROCM_HOME to it."),
             ("ls /opt/rocm/bin/hipcc", "export ROCM_HOME=/opt/rocm"), weight=90),
        Rule("slurm-time-limit", (r"CANCELLED AT \S+ DUE TO TIME LIMIT",),
             _("The Slurm job reached its time limit"),
             _("Slurm ended the job when its --time ran out; the run stopped wherever it was, and what it trained "
               "since the last checkpoint is lost."),
             _("devtune resume RUN submits it again from the last checkpoint; give it more time (config edit "
               "--time, or the Config form's Slurm time limit) and a smaller save_steps, so less is redone."),
             ("devtune resume RUN", "sacct -j JOB --format=JobID,State,Elapsed,Timelimit"), weight=96),
        Rule("slurm-preempted", (r"CANCELLED AT \S+ DUE TO PREEMPTION", r"JOB \d+ ON \S+ PREEMPTED"),
             _("The Slurm job was preempted"),
             _("A job of higher priority took the nodes; Slurm ended (or requeued) this one."),
             _("devtune resume RUN submits it again from the last checkpoint; ask for a partition or QoS that is "
               "not preemptible (--partition, --sbatch \"--qos=...\"), and save checkpoints often."),
             ("devtune resume RUN", "sacct -j JOB --format=JobID,State,Reason"), weight=96),
        Rule("slurm-node-fail", (r"CANCELLED AT \S+ DUE TO NODE FAILURE", r"NODE_FAIL"),
             _("A node of the Slurm job failed"),
             _("Slurm lost one of the job's nodes (a crash, a reboot, a network partition) and ended the job."),
             _("devtune resume RUN from the last checkpoint; if the same node fails again, leave it out "
               "(--sbatch \"--exclude=NODE\") and tell the cluster's admins."),
             ("sinfo -R", "devtune resume RUN"), weight=95),
        Rule("zero-world-size-changed",
             (r"The checkpoint being loaded used a DP world size of \d+ but the current world size is \d+",),
             _("The ZeRO checkpoint was saved by another number of ranks"),
             _("DeepSpeed shards the optimizer state per rank and cannot re-partition it for another world size."),
             _("Resume with the world size the checkpoint was saved with (the same --gpus and --nodes); to change "
               "it, start a new run from the adapter (adapter_name_or_path) instead of resuming."),
             ("ls saves/RUN/checkpoint-*/global_step*/",), weight=97),
        Rule("peer-rank-died",
             (r"Connection reset by peer", r"Connection closed by peer", r"Socket Timeout.*gloo"),
             _("Another rank went away (its connection closed)"),
             _("This rank lost its connection to another rank in the middle of a collective: the other rank died "
               "first, and its own error is the cause."),
             _("Look for the first rank that failed: its traceback, its exit code or signal (torchrun's Root "
               "Cause block), or the node that lost it (`dmesg` there for the OOM killer)."),
             ("grep -n 'Root Cause\\|exitcode\\|Error' .devtune/runs/RUN/stderr.log | head",), weight=40,
             symptom=True),
        Rule("terminated", (), _("Terminated (SIGTERM) without a stop request"),
             _("Something other than devtune sent SIGTERM: a job scheduler, a shutdown, or a user's kill."),
             _("Resume from the last checkpoint (`devtune resume RUN`); check the scheduler's time limit."),
             weight=50, exit_codes=(143, -15), symptom=True),
        Rule("aborted", (r"^Aborted(?: \(core dumped\))?$",), _("The trainer aborted (SIGABRT)"),
             _("A library called abort(); the lines just before it usually name the cause."),
             _("Read the error printed just before 'Aborted'; rerun with AMD_LOG_LEVEL=3 on ROCm for details."),
             weight=30, exit_codes=(134, -6), symptom=True),
    ]
