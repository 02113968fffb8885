"""The environment-facts mechanism (core.train.diagnosis_environment): contradictions among what a log printed
about its environment, and the doctor's saved verdicts, are the cause, ranked above a message's usual rule."""

from core.train.diagnosis_environment import doctor_verdicts, environment_finding, read_facts
from core.train.failures import diagnose_text
from core.train.root_cause import find_root_cause

CUDA_ON_AMD = """+ pip list | grep torch
torch                2.5.1+cu121
+ rocm-smi --showproductname
GPU[0]		: Card Series: 		AMD Instinct MI250X
GPU[0]		: gfx Version: 		gfx90a
Traceback (most recent call last):
  File "/srv/env/lib/python3.10/site-packages/torch/cuda/__init__.py", line 314, in _lazy_init
    torch._C._cuda_init()
RuntimeError: No CUDA GPUs are available
"""


def test_cuda_build_on_amd_gpu_is_the_cause_first():
    found = diagnose_text(CUDA_ON_AMD, exit_code=1)
    assert found[0].id == "torch-build-mismatch"
    assert "2.5.1+cu121" in found[0].title and "ROCm" in found[0].fix
    assert any("MI250X" in e.text for e in found[0].evidence)


def test_a_matching_build_is_no_contradiction():
    text = CUDA_ON_AMD.replace("2.5.1+cu121", "2.5.1+rocm6.2")
    assert environment_finding("RuntimeError: No CUDA GPUs are available", "", log_text=text) is None


def test_the_build_does_not_explain_an_unrelated_error():
    assert environment_finding("KeyError: 'instruction'", "", log_text=CUDA_ON_AMD) is None


def test_slurm_job_without_gpu_overrides_the_precision_rule():
    text = """#SBATCH --job-name=sft
#SBATCH --mem=64G
SLURM_JOB_ID=4242
+ nvidia-smi
No devices were found
CUDA_VISIBLE_DEVICES=
Traceback (most recent call last):
  File "/srv/env/lib/python3.10/site-packages/transformers/training_args.py", line 1600, in __post_init__
ValueError: Your setup doesn't support bf16/gpu.
"""
    found = diagnose_text(text, exit_code=1)
    assert found[0].id == "job-without-gpu"
    asked = text.replace("#SBATCH --mem=64G", "#SBATCH --gres=gpu:2")
    assert diagnose_text(asked, exit_code=1)[0].id != "job-without-gpu"


def test_launcher_of_another_python():
    text = """$ which torchrun
/home/ann/.local/bin/torchrun
(train) $ torchrun --nproc_per_node 2 /opt/conda/envs/train/lib/python3.11/site-packages/llamafactory/launcher.py x.yaml
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/runpy.py", line 10, in <module>
ModuleNotFoundError: No module named 'llamafactory'
"""
    facts = read_facts(text)
    assert facts.pythons == ("/usr", "/opt/conda/envs/train")
    assert diagnose_text(text, exit_code=1)[0].id == "launcher-other-python"
    one = text.replace("/home/ann/.local/bin/torchrun", "/opt/conda/envs/train/bin/torchrun")
    assert environment_finding("ModuleNotFoundError: No module named 'llamafactory'", "",
                               log_text=one.replace("/usr/lib/python3/dist-packages", "/opt/conda/envs/train/lib/python3.11/site-packages")) is None


def test_numpy_banner_names_the_module_and_the_pin():
    text = """A module that was compiled using NumPy 1.x cannot be run in
NumPy 2.1.0 as it may crash.
Traceback (most recent call last):
  File "/e/lib/python3.11/site-packages/scipy/__init__.py", line 3, in <module>
  File "/e/lib/python3.11/site-packages/numpy/core/_multiarray_umath.py", line 44, in __getattr__
ImportError: numpy.core.multiarray failed to import
"""
    found = diagnose_text(text, exit_code=1)
    assert found[0].id == "numpy-abi"
    assert "scipy" in found[0].title and "pip install 'numpy<2'" in found[0].commands


def test_bitsandbytes_cpu_library_on_rocm():
    text = """torch 2.4.0+rocm6.1
The installed version of bitsandbytes was compiled without GPU support.
Traceback (most recent call last):
  File "/e/lib/python3.11/site-packages/bitsandbytes/functional.py", line 9, in quantize_4bit
AttributeError: 'NoneType' object has no attribute 'cquantize_blockwise_fp16_nf4'
"""
    found = diagnose_text(text, exit_code=1)
    assert found[0].id == "bitsandbytes-rocm" and "ROCm" in found[0].fix


def test_doctor_report_verdicts_are_read_and_used(tmp_path):
    (tmp_path / "doctor-report-20260101-000000.md").write_text(
        "# devtune doctor report\n\n### ✅ fine\n\n`system.disk` · **ok** · 500 GB free\n\n"
        "### ❌ PyTorch build fits this machine\n\n`torch.build` · **fail** · torch 2.5.1+cu121 on AMD MI300X\n",
        encoding="utf-8")
    verdicts = doctor_verdicts(tmp_path)
    assert [(v.id, v.status) for v in verdicts] == [("torch.build", "fail")]
    found = environment_finding("RuntimeError: Found no NVIDIA driver on your system.", "", doctor=verdicts)
    assert found is not None and found.id == "doctor-verdict" and found.contradiction
    assert any("torch 2.5.1+cu121 on AMD MI300X" in f for f in found.facts)
    assert doctor_verdicts(tmp_path / "none") == []


def test_vllm_worker_prefix_is_read_like_a_rank():
    text = """(VllmWorkerProcess pid=77) INFO 01-02 10:00:00 [worker.py:10] starting
(VllmWorkerProcess pid=77) ERROR 01-02 10:00:01 [utils.py:238] Exception in worker: boom, Traceback (most recent call last):
(VllmWorkerProcess pid=77) ERROR 01-02 10:00:01 [utils.py:238]   File "/e/lib/python3.11/site-packages/vllm/worker.py", line 5, in init
(VllmWorkerProcess pid=77) ERROR 01-02 10:00:01 [utils.py:238]     x()
(VllmWorkerProcess pid=77) ERROR 01-02 10:00:01 [utils.py:238] ValueError: the worker's own error
Traceback (most recent call last):
  File "/e/lib/python3.11/site-packages/vllm/executor.py", line 9, in run
RuntimeError: Worker VllmWorkerProcess pid=77 died while processing init
"""
    cause = find_root_cause([("log", list(enumerate(text.split("\n"), 1)))])
    assert cause.exception.text.startswith("ValueError: the worker's own error")


def test_pip_conflicts_name_the_packages_the_install_broke():
    from core.train.failures import diagnose_text

    log = ("PS D:\\lora-scripts> .\\install.ps1\nSuccessfully installed torch-1.12.1+cu116\n"
           "ERROR: pip's dependency resolver does not currently take into account all the packages that are "
           "installed. This behaviour is the source of the following dependency conflicts.\n"
           "torchtext 0.14.0 requires torch==1.13.0, but you have torch 1.12.1+cu116 which is incompatible.\n"
           "torchaudio 0.13.0+cpu requires torch==1.13.0, but you have torch 1.12.1+cu116 which is incompatible.\n")
    first = diagnose_text(log)[0]
    assert first.id == "pip-conflict" and "torchaudio, torchtext" in first.title and "fresh virtual" in first.fix
    assert any("torchtext 0.14.0 requires torch==1.13.0" in e.text for e in first.evidence)
    # the shape of this machine's own `make envs` (llamafactory installed without its optional dependencies)
    missing = ("ERROR: pip's dependency resolver does not currently take into account all the packages that are "
               "installed. This behaviour is the source of the following dependency conflicts.\n"
               "llamafactory 0.9.5 requires av<=16.0.0,>=10.0.0, which is not installed.\n"
               "llamafactory 0.9.5 requires fire, which is not installed.\n")
    first = diagnose_text(missing)[0]
    assert first.id == "pip-conflict" and first.commands[0] == "pip install 'av<=16.0.0,>=10.0.0' fire"


def test_a_cpu_only_torch_on_an_amd_gpu_and_the_kernel_modules_api_mismatch():
    from core.train.failures import diagnose_text

    log = ("$ python -c 'import torch; print(torch.__version__)'\n2.5.1+cpu\n$ rocminfo | grep gfx\n  Name: gfx942\n"
           "$ llamafactory-cli train x.yaml\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
           "AssertionError: Torch not compiled with CUDA enabled\n")
    first = diagnose_text(log)[0]
    assert first.id == "torch-build-mismatch" and "whl/rocm" in first.commands[0]
    api = ("$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n$ dmesg | tail -1\n"
           "NVRM: API mismatch: the client has the version 535.183.01, but this kernel module has the version "
           "535.161.08.\n")
    first = diagnose_text(api)[0]
    assert first.id == "driver-library-mismatch" and first.commands[0] == "sudo reboot"
