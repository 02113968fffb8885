"""The PyTorch build in the training environment, judged against the machine.

`torch.cuda.is_available()` is True on ROCm too: the build is told apart by `torch.version.hip`
(oobabooga/textgen#3225). The probe runs in a subprocess: a broken torch cannot crash devtune.
"""

from __future__ import annotations

import re

from core.doctor.checks.access import device_groups
from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts, probe_json
from core.doctor.fixes import add_to_groups, torch_index, torch_install
from core.doctor.parse_amd import parse_hipconfig_version
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _
from core.setup.torch_build import index_note

NEEDS = HARDWARE + ("host", "torch", "amd_smi_version", "hipconfig")
VISIBLE = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
REF_WHEEL = "Comfy-Org/comfy-cli#379 (--extra-index-url picks the CUDA wheel); ROCm/legacy-rocm-build#2354"


def build_kind(probe: dict) -> str:
    if probe.get("hip"):
        return "rocm"
    if probe.get("cuda"):
        return "cuda"
    return "cpu"


def describe(probe: dict) -> str:
    parts = [f"torch {probe.get('version', '?')}"]
    if probe.get("hip"):
        parts.append(f"HIP {probe['hip']}")
    if probe.get("cuda"):
        parts.append(f"CUDA {probe['cuda']}")
    return ", ".join(parts)


def crash_text(ev: Evidence) -> str:
    """The last meaningful stderr lines of the torch probe (hipErrorNoBinaryForGpu, Illegal instruction...)."""
    lines = [l.strip() for l in ev.command("torch").stderr.splitlines() if l.strip()]
    return " | ".join(lines[-2:])[:300]


def _probe_or_finding(ev: Evidence) -> tuple[dict | None, Judgement | None]:
    cmd = ev.command("torch")
    probe = probe_json(ev, "torch")
    if cmd.missing or cmd.error:
        return None, fail(_("could not run the training environment's python ({what})", what=cmd.describe()),
                          "make setup", "")
    if cmd.timed_out and not (probe and probe.get("version")):
        return None, warn(_("`import torch` did not finish in time"),
                          f"{ev.host.get('train_python', 'python')} -c 'import torch; print(torch.__version__)'")
    if probe is None or "version" not in probe:
        err = (probe or {}).get("import_error") or crash_text(ev) or cmd.describe()
        if (probe or {}).get("import_error", "").startswith("ModuleNotFoundError"):
            return None, fail(_("torch is not installed in {python}", python=ev.host.get("train_python", "?")),
                              torch_install(ev, reinstall=False), "")
        return None, fail(_("`import torch` fails: {error}", error=err), torch_install(ev), REF_WHEEL)
    return probe, None


@verdict("torch.build", "torch", NEEDS, lambda: _("PyTorch build fits this machine"))
def judge_build(ev: Evidence) -> Judgement:
    probe, problem = _probe_or_finding(ev)
    if problem:
        return problem
    f = facts(ev)
    kind = build_kind(probe)
    seen = describe(probe)
    if f.kind == "rocm":
        if kind == "rocm":
            return ok(_("{torch}: a ROCm build", torch=seen))
        what = _("a CPU-only build") if kind == "cpu" else _("a CUDA (NVIDIA) build")
        return fail(_("{torch} is {what}: it cannot use the AMD GPUs. Install the ROCm build from PyTorch's "
                      "ROCm index with --index-url (never --extra-index-url: pip would pick the CUDA wheel "
                      "from PyPI again)", torch=seen, what=what),
                    torch_install(ev), REF_WHEEL)
    if f.kind == "nvidia":
        if kind == "cuda":
            return ok(_("{torch}: a CUDA build", torch=seen))
        what = _("a CPU-only build") if kind == "cpu" else _("a ROCm (AMD) build")
        why = ""
        if kind == "rocm" and f.amd_gpus:  # an installer that saw rocminfo and took ROCm (Transformer Lab #2382)
            why = ". " + _("ROCm is installed here, but its only GPU is not trained on: {gpus}",
                           gpus="; ".join(f.set_aside))
        return fail(_("{torch} is {what}: it cannot use the NVIDIA GPUs", torch=seen, what=what) + why,
                    torch_install(ev), "transformerlab/transformerlab-app#2382" if why else "")
    if kind == "cpu":
        return ok(_("{torch}: the CPU build, right for this machine", torch=seen))
    return ok(_("{torch}: a GPU build; it runs on the CPU too (it is only larger than the CPU build)", torch=seen))


@verdict("torch.rocm_match", "torch", NEEDS, lambda: _("PyTorch's HIP matches the installed ROCm"))
def judge_rocm_match(ev: Evidence) -> Judgement:
    f = facts(ev)
    if f.kind != "rocm":
        return skip(_("no AMD GPU stack on this machine"))
    probe, problem = _probe_or_finding(ev)
    if problem or build_kind(probe) != "rocm":
        return skip(_("no ROCm build of torch to compare (see the PyTorch build check)"))
    hip = parse_hipconfig_version(probe["hip"])
    rocm = parse_hipconfig_version(f.rocm_version or "")
    if not rocm:
        return warn(_("torch was built with HIP {hip}, and the installed ROCm version is unknown", hip=hip),
                    "cat /opt/rocm/.info/version", "")
    if hip == rocm:
        return ok(_("torch HIP {hip} = ROCm {rocm}", hip=hip, rocm=f.rocm_version))
    index = torch_index(ev)
    expected = index.rsplit("/", 1)[-1] if index else None
    note = index_note(f.rocm_version or "")
    if expected and (expected == f"rocm{hip}" or expected.startswith(f"rocm{hip}.")):
        # no index for every ROCm release: the newest one that fits, said as such
        return ok(_("torch HIP {hip}, from the {index} index. {note}", hip=hip, index=expected, note=note))
    if not expected:
        return warn(_("torch was built for ROCm {hip}, the machine has ROCm {rocm}. {note}", hip=hip,
                      rocm=f.rocm_version, note=note), torch_install(ev), "PyTorch previous versions")
    return warn(_("torch was built for ROCm {hip}, the machine has ROCm {rocm}: the wheel that fits is on "
                  "the {index} index. {note}", hip=hip, rocm=f.rocm_version, index=expected, note=note),
                torch_install(ev), "PyTorch previous versions (ROCm index per release)")


def visible_env(ev: Evidence) -> dict[str, str]:
    return {k: ev.env[k] for k in VISIBLE if k in ev.env}


@verdict("torch.devices", "torch", NEEDS, lambda: _("PyTorch sees every GPU"))
def judge_devices(ev: Evidence) -> Judgement:
    f = facts(ev)
    probe, problem = _probe_or_finding(ev)
    if f.kind == "cpu":
        return skip(_("no GPU: torch runs on the CPU"))
    if problem:
        return skip(_("torch does not import (see the PyTorch build check)"))
    if not f.gpu_count:
        return skip(_("no GPU is listed (see the driver checks)"))
    expected_kind = "rocm" if f.kind == "rocm" else "cuda"
    if build_kind(probe) != expected_kind:
        return skip(_("this torch build cannot use these GPUs (see the PyTorch build check)"))
    err = probe.get("device_error") or ""
    crash = crash_text(ev)
    if "hipErrorNoBinaryForGpu" in crash or "hipErrorNoBinaryForGpu" in err or "no kernel image" in err:
        return fail(_("torch has no kernels for this GPU: {error}", error=err or crash),
                    torch_install(ev), "ROCm/legacy-rocm-build#1530")
    if "No HIP GPUs are available" in err or "hipErrorNoDevice" in err or (probe.get("is_available") is False):
        env = visible_env(ev)
        if any(v.strip() in ("", "-1") for v in env.values()):
            return fail(_("torch sees no GPU: {env} hides them all", env=_env_text(env)),
                        "unset " + " ".join(env), "pytorch PR#142292")
        return fail(_("torch sees no GPU ({error}) although {n} are listed",
                      error=err or "is_available() = False", n=f.gpu_count),
                    add_to_groups(ev, device_groups(ev)) if f.kind == "rocm" else "nvidia-smi",
                    "ROCm/hip#3799; pytorch/pytorch#70036")
    count = probe.get("device_count") or 0
    env = visible_env(ev)
    if "out of memory" in err.lower():
        tool = "amd-smi process" if f.kind == "rocm" else "nvidia-smi"
        return warn(_("torch sees the GPUs, but could not even allocate a test tensor: {error}. Another job "
                      "holds the GPU memory", error=err[:300]), tool, "")
    if err:
        hint = "\n# " + _("or update the NVIDIA driver") if "too old" in err else ""
        return fail(_("torch fails on the GPU: {error}", error=err[:400]), torch_install(ev) + hint, "")
    if count < f.gpu_count:
        if env:
            return ok(_("torch sees {count} of {n} GPUs, as {env} asks", count=count, n=f.gpu_count,
                        env=_env_text(env)))
        return warn(_("torch sees {count} GPUs, {tool} lists {n}", count=count, tool=f.amd_gpu_source or "nvidia-smi",
                      n=f.gpu_count),
                    "env | grep -E 'VISIBLE_DEVICES'\nls -l /dev/dri/renderD*", "")
    names = sorted({d.get("name") or "?" for d in probe.get("devices") or []})
    return ok(_("is_available() = True, {count} devices ({names})", count=count, names=", ".join(names)))


def _env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v!r}" if not v.strip() else f"{k}={v}" for k, v in env.items())


@verdict("torch.arch", "torch", NEEDS, lambda: _("PyTorch has kernels for this GPU architecture"))
def judge_arch(ev: Evidence) -> Judgement:
    f = facts(ev)
    probe, problem = _probe_or_finding(ev)
    if f.kind == "cpu" or problem:
        return skip(_("no GPU torch to compare") if f.kind != "cpu" else _("no GPU: torch runs on the CPU"))
    archs = probe.get("arch_list") or []
    if f.kind == "rocm":
        if build_kind(probe) != "rocm":
            return skip(_("this torch build cannot use these GPUs (see the PyTorch build check)"))
        wanted = f.gfx_list
        if not wanted or not archs:
            return skip(_("the gfx or torch's architecture list is unknown"))
        missing = [g for g in wanted if g not in archs]
        if missing:
            return fail(_("torch {version} was compiled for {archs}, not for {missing}: it would stop with "
                          "hipErrorNoBinaryForGpu", version=probe.get("version"), archs=" ".join(archs),
                          missing=" ".join(missing)),
                        torch_install(ev), "ROCm/flash-attention#120; ROCm/legacy-rocm-build#1623")
        return ok(_("{gfx} is in torch's architecture list ({archs})", gfx=" ".join(wanted), archs=" ".join(archs)))
    if build_kind(probe) != "cuda":
        return skip(_("this torch build cannot use these GPUs (see the PyTorch build check)"))
    caps = sorted({g.compute_cap for g in f.nvidia_gpus if g.compute_cap})
    if not caps or not archs:
        return skip(_("the compute capability or torch's architecture list is unknown"))
    missing = [c for c in caps if not _cuda_has(archs, c)]
    if missing:
        return fail(_("torch {version} has no kernels for compute capability {missing} ({archs})",
                      version=probe.get("version"), missing=" ".join(missing), archs=" ".join(archs)),
                    torch_install(ev), "")
    return ok(_("compute capability {caps} is covered by torch's {archs}", caps=" ".join(caps), archs=" ".join(archs)))


def _cuda_has(archs: list[str], cap: str) -> bool:
    """CUDA's compatibility rules: a cubin for sm_XY runs on any X.Z with Z >= Y (an RTX 4090, 8.9, runs
    sm_86 code), an "a" cubin (sm_90a) only on its own GPU, and PTX (compute_XY) on every newer GPU."""
    major, minor = (int(x) for x in cap.split(".")[:2])
    want = major * 10 + minor
    sms = [(m.group(1), m.group(2)) for a in archs if (m := re.fullmatch(r"sm_(\d+)(a?)", a))]
    ptx = [int(m.group(1)) for a in archs if (m := re.fullmatch(r"compute_(\d+)", a))]
    fits = any(int(sm) == want or (not exact and int(sm) // 10 == major and int(sm) <= want) for sm, exact in sms)
    return fits or any(p <= want for p in ptx)
