"""The environment's own facts, read when a run failed: when two of them contradict each other, that is the cause.

A rule knows a message and gives its usual cause; the same message ("Found no NVIDIA driver", "No module named
'llamafactory'", "bf16 is only supported on GPU") has another cause when the environment contradicts itself. The
facts are what the log printed about its environment:

- the torch build: its `+cuXXX` / `+rocmX.Y` / `+cpu` suffix (pip list, `llamafactory-cli env`);
- the GPUs: a `gfx…` architecture or an AMD Instinct/Radeon name, an NVIDIA name;
- no GPU at all: an empty CUDA_VISIBLE_DEVICES, nvidia-smi failing, a device count of 0, in a Slurm job;
- the Python environments: the prefixes of the launchers (`…/bin/torchrun`, `#!/usr/bin/python3`) and of the
  site-packages in tracebacks (a user site ~/.local belongs to the system Python);
- NumPy's own banner that a module compiled for NumPy 1.x runs under 2.x;
- pip's own list of the installed packages whose requirements the install broke ("X 1.0 requires torch==1.13.0,
  but you have torch 1.12.1 which is incompatible");

and, for `devtune diagnose RUN` on this machine, the failing or warning verdicts of the newest doctor report saved
in the workspace (`doctor-report-*.md`, core.doctor.report). A contradiction (a CUDA build on an AMD GPU, a ROCm
machine with a CUDA-only bitsandbytes, a job with no GPU, a launcher of one Python running another's scripts, an
extension built for NumPy 1.x under 2.x) is a finding core.train.diagnosis_report ranks above any rule that matched
only the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.i18n import _
from core.train.diagnosis_families import SITE, FamilyFinding

TORCH_BUILD = re.compile(r"(?i)\b(?:py)?torch\b[^\n\d+]{0,24}(\d+\.\d+(?:\.\d+)?)\+(cu\d+|rocm[\d.]+|cpu)\b|"
                         r"torch\.__version__[^\n]*\n\s*(\d+\.\d+(?:\.\d+)?)\+(cu\d+|rocm[\d.]+|cpu)\b")
AMD_GPU = re.compile(r"\b(gfx(?:9[0-4][0-9a-f]|1[0-2]\d\d))\b|\b(AMD Instinct[ \w-]*|MI[1-3]\d\dX?\b|Radeon[ \w-]*)")
NVIDIA_GPU = re.compile(r"\bNVIDIA (?:[AHBL]\d{2,3}\w*|GeForce[ \w-]*|RTX[ \w-]*|Tesla[ \w-]*|GH\d+\w*)")
GPU_ROOT = re.compile(r"(?i)cuda|nvidia|\bgpu|driver|device|\bhip\b|rocm|nccl|bf16|fp16|accelerator")
NO_GPU = re.compile(r"^\s*(?:export\s+)?CUDA_VISIBLE_DEVICES=\s*$|No devices were found|NVIDIA-SMI has failed|"
                    r"nvidia-smi: command not found|device_count\(\)\s*[:=]?\s*0\b|is_available\(\)\s*[:=]?\s*False|"
                    r"GPU available: False", re.M)
SLURM = re.compile(r"\bSLURM_JOB_ID\b|\bsbatch\b|\bsrun\b|slurmstepd|#SBATCH")
SLURM_GPUS = re.compile(r"#SBATCH\s+--(?:gres=gpu|gpus|gpus-per-node|gpus-per-task)|\bSLURM_(?:JOB_)?GPUS=\d")
BNB_NO_GPU = re.compile(r"compiled without GPU support|libbitsandbytes_cpu|libbitsandbytes_cuda\d*|"
                        r"CUDA Setup failed|bitsandbytes.*(?:CUDA|GPU) (?:not|is not) (?:found|available)", re.I)
IMPORT_ROOT = re.compile(r"No module named|cannot import name|ModuleNotFoundError|ImportError|command not found")
LAUNCHER = re.compile(r"((?:~|/)[\w./+-]*?)/bin/(?:torchrun|accelerate|deepspeed|llamafactory-cli|python3?(?:\.\d+)?)\b")
PACKAGES = re.compile(r"((?:~|/)[\w./+-]*?)/lib/python3(?:\.\d+)?/(?:site|dist)-packages/")
NUMPY_BANNER = re.compile(r"compiled using NumPy 1\.x cannot be run in\s*NumPy (2\.\d+\.\d+)")
NUMPY_ROOT = re.compile(r"numpy\.core\.multiarray failed to import|_ARRAY_API not found|numpy\.dtype size changed|"
                        r"compiled using NumPy 1\.x")
NUMPY_2 = re.compile(r"(?i)\bnumpy(?:==| version:?\s*| )\s*(2\.\d+\.\d+)")
REPORT_LINE = re.compile(r"^`([\w.]+)` · \*\*[^*]*\*\* · (.*)$")
REPORT_MARK = re.compile(r"^### (❌|⚠️)")
BNB_CHECK, TORCH_CHECKS = "libraries.bitsandbytes", ("torch.build", "torch.devices", "torch.arch", "env.visible_devices",
                                                   "nvidia.torch_cuda")


@dataclass(frozen=True)
class DoctorVerdict:
    id: str
    status: str  # "fail" or "warn"
    evidence: str
    report: str  # the report's file name


def doctor_verdicts(folder: str | Path) -> list[DoctorVerdict]:
    """The failing and warning checks of the newest doctor report saved in `folder` (`devtune doctor --save`)."""
    reports = sorted(Path(folder).glob("doctor-report-*.md"), key=lambda p: p.stat().st_mtime)
    if not reports:
        return []
    try:
        lines = reports[-1].read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out, mark = [], None
    for line in lines:
        m = REPORT_MARK.match(line)
        if line.startswith("### "):
            mark = m.group(1) if m else None
            continue
        found = REPORT_LINE.match(line)
        if found and mark:
            out.append(DoctorVerdict(found.group(1), "fail" if mark == "❌" else "warn", found.group(2).strip(),
                                     reports[-1].name))
            mark = None
    return out


@dataclass
class EnvironmentFacts:
    torch_build: str | None = None  # "cuda" / "rocm" / "cpu"
    torch_version: str | None = None
    amd_gpu: str | None = None
    nvidia_gpu: str | None = None
    no_gpu: str | None = None  # the line that says the process sees none
    slurm: bool = False
    slurm_gpus: bool = False
    pythons: tuple[str, ...] = ()  # distinct Python environments the log's paths belong to, first seen first


def _env_root(prefix: str) -> str:
    """The environment a path prefix belongs to: ~/.local (a user site) is the system Python's."""
    if prefix.endswith("/.local") or prefix in ("/usr/local", "/usr", ""):
        return "/usr"
    return prefix


def read_facts(log_text: str) -> EnvironmentFacts:
    facts = EnvironmentFacts()
    build = TORCH_BUILD.search(log_text)
    if build:
        version, suffix = (build.group(1), build.group(2)) if build.group(1) else (build.group(3), build.group(4))
        facts.torch_version = f"{version}+{suffix}"
        suffix = suffix.lower()
        facts.torch_build = "cuda" if suffix.startswith("cu") else "rocm" if suffix.startswith("rocm") else "cpu"
    amd = AMD_GPU.search(log_text)
    facts.amd_gpu = (amd.group(1) or amd.group(2)).strip() if amd else None
    nvidia = NVIDIA_GPU.search(log_text)
    facts.nvidia_gpu = nvidia.group(0).strip() if nvidia else None
    none = NO_GPU.search(log_text)
    facts.no_gpu = none.group(0).strip() if none else None
    facts.slurm, facts.slurm_gpus = bool(SLURM.search(log_text)), bool(SLURM_GPUS.search(log_text))
    roots: list[str] = []
    for m in sorted(list(LAUNCHER.finditer(log_text)) + list(PACKAGES.finditer(log_text)), key=lambda m: m.start()):
        root = _env_root(m.group(1))
        if root not in roots:
            roots.append(root)
    facts.pythons = tuple(roots)
    return facts


def environment_finding(root: str, frames: str, *, log_text: str = "",
                        doctor: list[DoctorVerdict] | None = None) -> FamilyFinding | None:
    """The contradiction among this run's environment facts that explains the root line, or None."""
    facts = read_facts(log_text)
    doctor = doctor or []
    for reason in (_numpy_abi, _bnb_on_rocm, _torch_build, _no_gpu_in_job, _other_python, _pip_conflicts,
                   _driver_library_mismatch,
                   _doctor_says):
        found = reason(root, frames, log_text, facts, doctor)
        if found is not None:
            found.facts += [_("devtune doctor ({report}): {check} {status}: {evidence}", report=v.report,
                              check=v.id, status=v.status, evidence=v.evidence)
                            for v in doctor if v.id in found.same_as]
            found.same_as = ()
            return found
    return None


def _finding(fid: str, title: str, explanation: str, fix: str, commands: list[str], facts: list[str],
             checks: tuple[str, ...] = ()) -> FamilyFinding:
    return FamilyFinding(fid, title, explanation, fix, commands, facts, same_as=checks, own_cause=True,
                         contradiction=True)


def _numpy_abi(root, frames, log_text, facts, doctor):
    banner = NUMPY_BANNER.search(log_text)
    if not NUMPY_ROOT.search(root) and not (banner and "numpy" in root.lower()):
        return None
    two = banner.group(1) if banner else (NUMPY_2.search(log_text).group(1) if NUMPY_2.search(log_text) else None)
    if two is None:
        return None
    # the innermost package that imported NumPy's C API: the last non-numpy site-packages frame of the traceback
    modules = [p for p in reversed(SITE.findall(frames or log_text)) if p.lower() not in ("numpy", "importlib")]
    module = modules[0] if modules else _("a compiled module")
    return _finding(
        "numpy-abi", _("{module} was built for NumPy 1.x, and NumPy {version} is installed", module=module,
                       version=two),
        _("The log says NumPy {version} is installed, and a compiled module the run imports ({module}) was built "
          "against NumPy 1.x: its binary cannot load under NumPy 2, whatever the error that follows says.",
          version=two, module=module),
        _("Pin NumPy below 2 in the run's environment, or upgrade {module} to a build made for NumPy 2.",
          module=module),
        ["pip install 'numpy<2'", f"pip install -U {module}" if modules else "pip list | grep -i numpy"],
        [_("NumPy installed: {version}", version=two), _("built against NumPy 1.x: {module}", module=module)]
        + ([" ".join(banner.group(0).split())] if banner else []))


def _rocm(facts: EnvironmentFacts) -> str | None:
    if facts.torch_build == "rocm":
        return facts.torch_version
    return facts.amd_gpu if facts.amd_gpu and not facts.nvidia_gpu else None


def _bnb_on_rocm(root, frames, log_text, facts, doctor):
    rocm = _rocm(facts)
    if not rocm or "bitsandbytes" not in (root + frames + log_text).lower() or not BNB_NO_GPU.search(log_text + root):
        return None
    return _finding(
        "bitsandbytes-rocm", _("bitsandbytes has no ROCm library on this AMD GPU"),
        _("The log shows a ROCm machine ({rocm}) and a bitsandbytes whose libraries are CUDA or CPU only: it "
          "falls back to its CPU library, so 4-bit and 8-bit quantization have no GPU kernels here.", rocm=rocm),
        _("Install a ROCm build of bitsandbytes (its multi-backend wheel, or built with -DCOMPUTE_BACKEND=hip for "
          "this GPU), or train without quantization_bit."),
        ["pip uninstall -y bitsandbytes",
         "pip install --force-reinstall 'https://github.com/bitsandbytes-foundation/bitsandbytes/releases/download/"
         "continuous-release_multi-backend-refactor/bitsandbytes-0.44.1.dev0-py3-none-manylinux_2_24_x86_64.whl'"],
        [_("ROCm machine: {rocm}", rocm=rocm)] + ([_("AMD GPU: {gpu}", gpu=facts.amd_gpu)] if facts.amd_gpu else []),
        (BNB_CHECK,))


def _torch_build(root, frames, log_text, facts, doctor):
    if not GPU_ROOT.search(root) or facts.torch_build not in ("cuda", "rocm", "cpu"):
        return None
    if facts.torch_build == "cpu" and (facts.nvidia_gpu or facts.amd_gpu):
        gpu = facts.nvidia_gpu or facts.amd_gpu
        index = "cu124" if facts.nvidia_gpu else "rocm6.2"
        return _finding(
            "torch-build-mismatch", _("A CPU-only build of torch ({version}) on a machine with a GPU ({gpu})",
                                      version=facts.torch_version, gpu=gpu),
            _("The installed torch is built without GPU support ({version}), so it cannot use the {gpu} this machine "
              "has; a plain `pip install torch` on some platforms (Windows, or a wheel from the default index) "
              "gives that build.", version=facts.torch_version, gpu=gpu),
            _("Install the {kind} build of torch in this environment, from PyTorch's {kind} index (one the driver "
              "supports), then check `torch.cuda.is_available()`.", kind="CUDA" if facts.nvidia_gpu else "ROCm"),
            [f"pip install --force-reinstall torch torchvision torchaudio --index-url "
             f"https://download.pytorch.org/whl/{index}",
             'python -c "import torch; print(torch.__version__, torch.cuda.is_available())"'],
            [_("torch build: {version}", version=facts.torch_version), _("GPU: {gpu}", gpu=gpu)], TORCH_CHECKS)
    if facts.torch_build == "cuda" and facts.amd_gpu and not facts.nvidia_gpu:
        return _finding(
            "torch-build-mismatch", _("A CUDA build of torch ({version}) on an AMD GPU", version=facts.torch_version),
            _("The installed torch is a CUDA build ({version}) and this machine's GPU is AMD ({gpu}): a CUDA build "
              "looks for an NVIDIA driver and finds none, so no GPU is usable.", version=facts.torch_version,
              gpu=facts.amd_gpu),
            _("Install the ROCm build of torch in this environment (from PyTorch's ROCm index, matching the "
              "installed ROCm), or train in a ROCm container."),
            ["pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.2",
             "devtune doctor"],
            [_("torch build: {version}", version=facts.torch_version), _("AMD GPU: {gpu}", gpu=facts.amd_gpu)],
            TORCH_CHECKS)
    if facts.torch_build == "rocm" and facts.nvidia_gpu and not facts.amd_gpu:
        return _finding(
            "torch-build-mismatch", _("A ROCm build of torch ({version}) on an NVIDIA GPU",
                                      version=facts.torch_version),
            _("The installed torch is a ROCm build ({version}) and this machine's GPU is NVIDIA ({gpu}): it has no "
              "CUDA runtime, so no GPU is usable.", version=facts.torch_version, gpu=facts.nvidia_gpu),
            _("Install the CUDA build of torch in this environment (from PyTorch's CUDA index, one the driver "
              "supports)."),
            ["pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu124",
             "devtune doctor"],
            [_("torch build: {version}", version=facts.torch_version), _("NVIDIA GPU: {gpu}", gpu=facts.nvidia_gpu)],
            TORCH_CHECKS)
    return None


def _no_gpu_in_job(root, frames, log_text, facts, doctor):
    if not (facts.slurm and facts.no_gpu and not facts.slurm_gpus and GPU_ROOT.search(root)):
        return None
    return _finding(
        "job-without-gpu", _("The Slurm job was given no GPU"),
        _("The run is a Slurm job and its process sees no GPU ({line}), and the job asked for none: the error is "
          "what training does on a CPU, not a limit of a GPU.", line=facts.no_gpu),
        _("Request GPUs for the job (#SBATCH --gres=gpu:N or --gpus-per-node=N) and check nvidia-smi (or "
          "amd-smi) inside the job before training."),
        ["#SBATCH --gres=gpu:1", "srun --gres=gpu:1 nvidia-smi"],
        [_("no GPU in the job: {line}", line=facts.no_gpu)], TORCH_CHECKS)


def _other_python(root, frames, log_text, facts, doctor):
    if not IMPORT_ROOT.search(root) or len(facts.pythons) < 2:
        return None
    first, other = facts.pythons[0], facts.pythons[1]
    return _finding(
        "launcher-other-python", _("The launcher runs another Python than the one with the run's packages"),
        _("The log's paths belong to more than one Python environment ({first} and {other}): the launcher (or "
          "the interpreter it starts) is not the environment the packages were installed in, so the import "
          "fails there.", first=first, other=other),
        _("Use the environment's own launcher (its bin/ first on PATH, or `python -m torch.distributed.run`), "
          "remove the stray one, or install the packages in the Python the launcher uses."),
        ["which -a torchrun python", "python -m torch.distributed.run --help"],
        [_("Python environments in the log: {names}", names=", ".join(facts.pythons))])


def _doctor_says(root, frames, log_text, facts, doctor):
    """No contradiction in the log itself, but the doctor judged this machine's build against it."""
    bnb = [v for v in doctor if v.id == BNB_CHECK and v.status == "fail"]
    if bnb and "bitsandbytes" in (root + frames).lower():
        v = bnb[0]
        return _finding("bitsandbytes-rocm" if facts.amd_gpu or facts.torch_build == "rocm" else "doctor-verdict",
                        _("devtune doctor found bitsandbytes broken on this machine"),
                        _("The doctor's check of bitsandbytes fails on this machine: {evidence}", evidence=v.evidence),
                        _("Apply the doctor's fix for bitsandbytes (devtune doctor shows it), then run again."),
                        ["devtune doctor"], [], (BNB_CHECK,))
    torch = [v for v in doctor if v.id in TORCH_CHECKS and v.status == "fail"]
    if torch and GPU_ROOT.search(root):
        v = torch[0]
        return _finding("doctor-verdict", _("devtune doctor found torch does not fit this machine"),
                        _("The doctor's check {check} fails on this machine: {evidence}", check=v.id,
                          evidence=v.evidence),
                        _("Apply the doctor's fix for {check} (devtune doctor shows it), then run again.", check=v.id),
                        ["devtune doctor"], [], TORCH_CHECKS)
    return None


PIP_HEADER = re.compile(r"pip's dependency resolver does not currently take into account|dependency conflicts")
PIP_CONFLICT = re.compile(r"^(?:\[[^\]]*\] )?([\w.\-]+) ([\w.+!\-]+) requires ([\w.\-]+)((?:[^,\n]|,(?! which| but))*), (?:but you have "
                          r"([\w.\-]+) ([\w.+!\-]+) which is incompatible|which is not installed)\.", re.M)


def _pip_conflicts(root, frames, log_text, facts, doctor):
    """pip installed a package that others already in the environment pin to another version."""
    if not PIP_HEADER.search(root) and not PIP_CONFLICT.search(root):
        return None
    conflicts = PIP_CONFLICT.findall(log_text)
    if not conflicts:
        return None
    lines = [m.group(0) for m in PIP_CONFLICT.finditer(log_text)][:6]
    wanted = [(name, version, req, spec.strip(), have) for name, version, req, spec, _dep, have in conflicts]
    incompatible = [w for w in wanted if w[4]]
    holders = sorted({name for name, *_r in incompatible}) or sorted({name for name, *_r in wanted})
    if incompatible:
        req, have = incompatible[0][2], incompatible[0][4]
        why = _("The install put {req} {have} into an environment that already held {holders}, built for another "
                "{req} ({spec}); pip warns but leaves them broken, and importing them fails or picks the wrong build.",
                req=req, have=have, holders=", ".join(holders), spec=incompatible[0][3])
        fix = _("Install into a fresh virtual environment (the old one keeps the packages of another set-up); or, in "
                "this one, uninstall {holders} if the project does not use them, or install their releases built for "
                "{req} {have}.", holders=", ".join(holders), req=req, have=have)
        commands = ["python -m venv .venv-new && . .venv-new/bin/activate", f"pip uninstall -y {' '.join(holders)}",
                    "pip check"]
    else:
        missing = sorted({f"{req}{spec}" for _n, _v, req, spec, _h in wanted})
        why = _("Installed packages require {missing}, which is not installed.", missing=", ".join(missing))
        fix = _("Install what they require ({missing}), then check with `pip check`.", missing=", ".join(missing))
        commands = [f"pip install {' '.join(repr(m) if any(c in m for c in '<>=!') else m for m in missing)}",
                    "pip check"]
    return _finding("pip-conflict", _("pip left the environment inconsistent: {holders}", holders=", ".join(holders)),
                    why, fix, commands, [_("pip: {line}", line=line) for line in lines])


DRIVER_MISMATCH = re.compile(r"Driver/library version mismatch|API mismatch: the NVIDIA kernel module has version "
                             r"([\d.]+)[^\n]*?(?:component|client) has version ([\d.]+)")


def _driver_library_mismatch(root, frames, log_text, facts, doctor):
    """The NVIDIA libraries were upgraded (an unattended upgrade) while the old kernel module stays loaded."""
    if not DRIVER_MISMATCH.search(root):
        return None
    api = DRIVER_MISMATCH.search(log_text)
    found = [_("kernel module {old}, libraries {new}", old=api.group(1), new=api.group(2))] if api and api.group(1) else []
    upgrades = re.findall(r"^Upgrade: [^\n]*\b(?:nvidia|libnvidia)[\w-]*[^\n]{0,120}", log_text, re.M)
    found += [_("apt history: {line}", line=line[:160]) for line in upgrades[:2]]
    return _finding(
        "driver-library-mismatch", _("The NVIDIA driver's libraries and its loaded kernel module differ"),
        _("The user-space NVIDIA libraries were upgraded (often by an unattended upgrade) while the kernel module of "
          "the old driver is still loaded, so NVML and CUDA refuse to talk to it (\"{said}\").", said=root[:160]),
        _("Reboot the machine (or unload and reload the nvidia kernel modules with no GPU process running); then hold "
          "the driver packages so an unattended upgrade does not do it again."),
        ["sudo reboot", "sudo apt-mark hold 'nvidia-driver-*' 'libnvidia-*'",
         "cat /proc/driver/nvidia/version; nvidia-smi"], found)
