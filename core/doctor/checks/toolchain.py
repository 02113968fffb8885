"""The build toolchain for just-in-time ops and source builds: ninja, a C++ compiler, cmake, hipcc
(ROCm) or nvcc (NVIDIA), ROCM_PATH / HIP_PATH, and MAX_JOBS against the RAM."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts
from core.doctor.fixes import pip
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host", "which")
GIB = 1024 ** 3
GIB_PER_JOB = 4  # a rule of thumb for one compile job of flash-attn / DeepSpeed kernels


def _found(ev: Evidence, tool: str) -> str | None:
    return ev.which.get(tool) or (ev.paths.get("off_path_tools") or {}).get(tool)


@verdict("toolchain.build", "toolchain", NEEDS, lambda: _("ninja, a C++ compiler and cmake are available"))
def judge_build(ev: Evidence) -> Judgement:
    ninja, cxx, cmake = _found(ev, "ninja"), ev.which.get("g++"), ev.which.get("cmake")
    seen = ", ".join(f"{name}: {path or '-'}" for name, path in (("ninja", ninja), ("g++", cxx), ("cmake", cmake)))
    fixes = []
    if not ninja:
        fixes.append(f"{pip(ev)} install ninja")
    if not cxx:
        fixes.append("sudo apt install build-essential")
    if fixes:
        return fail(seen + ". " + _("DeepSpeed builds its ops just in time with ninja and a C++ compiler "
                                    "(on a CPU too: deepspeed_shm_comm)"), "\n".join(fixes), "docs/cpu-stack.md")
    if not cmake:
        return warn(seen + ". " + _("cmake is needed only to build bitsandbytes from source (3.31.6 or newer)"),
                    f"{pip(ev)} install cmake", "bitsandbytes build docs")
    return ok(seen)


@verdict("toolchain.gpu_compiler", "toolchain", NEEDS + ("files",), lambda: _("GPU compiler (hipcc / nvcc) and its paths"))
def judge_gpu_compiler(ev: Evidence) -> Judgement:
    f = facts(ev)
    if f.kind == "cpu":
        return skip(_("no GPU on this machine"))
    if f.kind == "nvidia":
        nvcc = ev.which.get("nvcc")
        if nvcc:
            return ok(_("nvcc: {path}", path=nvcc))
        return ok(_("nvcc is not on PATH: fine with prebuilt wheels; needed only to build CUDA extensions "
                    "(flash-attn from source)"), "export PATH=/usr/local/cuda/bin:$PATH")
    for var in ("ROCM_PATH", "HIP_PATH"):
        state = ev.paths.get(var)
        if state and not state.get("exists"):
            return fail(_("{var}={path} does not exist: torch's extension builder and hipcc look there first",
                          var=var, path=state.get("path")),
                        f"export {var}=/opt/rocm" if var == "ROCM_PATH" else f"unset {var}", "torch _find_rocm_home")
    hipcc = ev.which.get("hipcc")
    off = (ev.paths.get("off_path_tools") or {}).get("hipcc")
    paths = " ".join(f"{v}={ev.env[v]}" for v in ("ROCM_PATH", "HIP_PATH") if ev.env.get(v))
    if hipcc:
        return ok(_("hipcc: {path}", path=hipcc) + (f"; {paths}" if paths else ""))
    if off:
        bin_dir = off.rsplit("/", 1)[0]
        return warn(_("hipcc is at {path} but not on PATH: DeepSpeed's JIT ops and source builds will not find it",
                      path=off),
                    f"export PATH={bin_dir}:$PATH   # " + _("add it to ~/.bashrc too"), "")
    return warn(_("hipcc is not installed: DeepSpeed's fused ops and flash-attn builds need it"),
                "sudo apt install rocm-hip-sdk", "")


@verdict("toolchain.max_jobs", "toolchain", NEEDS + ("files",), lambda: _("MAX_JOBS fits the RAM for source builds"))
def judge_max_jobs(ev: Evidence) -> Judgement:
    f = facts(ev)
    total = f.meminfo.get("MemTotal")
    cpus = int(ev.host.get("cpu_count") or 1)
    if not total:
        return skip(_("the RAM size is unknown"))
    gib = total / GIB
    safe = max(1, int(gib // GIB_PER_JOB))
    value = ev.env.get("MAX_JOBS")
    basis = _("{cpus} cores, {gib:.0f} GiB RAM, about {per} GiB per compile job", cpus=cpus, gib=gib, per=GIB_PER_JOB)
    if value is None:
        if cpus > safe:
            return warn(_("MAX_JOBS is not set, so builds run {cpus} jobs at once ({basis}): building flash-attn "
                          "or DeepSpeed ops could run out of memory", cpus=cpus, basis=basis),
                        f"export MAX_JOBS={safe}", "Dao-AILab/flash-attention README (MAX_JOBS)")
        return ok(_("MAX_JOBS not set; {basis}: enough RAM for one job per core", basis=basis))
    try:
        jobs = int(value)
    except ValueError:
        return fail(_("MAX_JOBS={value} is not a number", value=value), f"export MAX_JOBS={safe}", "")
    if jobs > safe:
        return warn(_("MAX_JOBS={jobs} with {basis}: builds could run out of memory", jobs=jobs, basis=basis),
                    f"export MAX_JOBS={safe}", "Dao-AILab/flash-attention README (MAX_JOBS)")
    return ok(_("MAX_JOBS={jobs} ({basis})", jobs=jobs, basis=basis))
