"""The training libraries: LLaMA-Factory (its version window and generation), the libraries it declares
ranges for, flash-attn, bitsandbytes, DeepSpeed and the amdsmi binding, judged from the training environment.
The ranges are the installed LLaMA-Factory's own (core/doctor/lf_requirements.py), never a list kept here."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts, probe_json
from core.doctor.fixes import pip
from core.doctor.lf_requirements import (
    BROKEN,
    METADATA,
    REQUIREMENTS,
    RUNTIME,
    Declared,
    broken_applies,
    declared_ranges,
    install_spec,
    mismatch,
    stated_exception,
)
from core.doctor.parse_tools import parse_ds_report, parse_version, strip_ansi
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host", "packages", "plan")
LLAMAFACTORY = "llamafactory==0.9.5"
LLAMAFACTORY_WINDOW = ((0, 9, 4), (0, 10))  # devtune drives its v0 CLI and reads its logs: tested on 0.9.x
CORE_LIBRARIES = ("transformers", "datasets", "accelerate", "peft", "trl")  # shown even when inside
BNB_FIRST_ROCM, BNB_FULL_ROCM = (0, 49, 0), (0, 50, 0)


def versions(ev: Evidence) -> dict[str, str]:
    return (probe_json(ev, "packages") or {}).get("versions") or {}


def imported(ev: Evidence, module: str) -> dict | None:
    return ((probe_json(ev, "packages") or {}).get("imports") or {}).get(module)


def lf_declared(ev: Evidence, kinds: tuple[str, ...] = (METADATA, RUNTIME, REQUIREMENTS, BROKEN)) -> list[Declared]:
    """The ranges the installed LLaMA-Factory declares, as the packages probe read them."""
    data = probe_json(ev, "packages") or {}
    return [d for d in declared_ranges(data.get("llamafactory"), data.get("python")) if d.kind in kinds]


def _enabled(ev: Evidence, name: str) -> bool:
    return (ev.env.get(name) or "").lower() in ("true", "y", "1")  # LLaMA-Factory's is_env_enabled


def _packages_problem(ev: Evidence) -> Judgement | None:
    cmd = ev.command("packages")
    if probe_json(ev, "packages") is None:
        return warn(_("could not list the training environment's packages ({what})", what=cmd.describe()),
                    f"{pip(ev)} list", "")
    return None


@verdict("libraries.llamafactory", "libraries", NEEDS, lambda: _("LLaMA-Factory is installed, in devtune's version window"))
def judge_llamafactory(ev: Evidence) -> Judgement:
    if (problem := _packages_problem(ev)) is not None:
        return problem
    have = versions(ev)
    version = have.get("llamafactory")
    install = f"{pip(ev)} install --no-deps {LLAMAFACTORY}"
    if not version:
        return fail(_("LLaMA-Factory is not installed in {python}", python=ev.host.get("train_python", "?")),
                    install, "README, Installation details")
    low, high = LLAMAFACTORY_WINDOW
    v = parse_version(version) or (0,)
    if not low <= v < high:
        return fail(_("LLaMA-Factory {version} is outside the window devtune works with (0.9.4 to 0.9.x)",
                      version=version), install, "")
    if not have.get("torchaudio"):
        return fail(_("LLaMA-Factory {version} is installed, but torchaudio is missing: its mm_plugin imports "
                      "torchaudio unconditionally, so train, export and api fail", version=version),
                    "make setup", "docs/cpu-stack.md")
    lf = (probe_json(ev, "packages") or {}).get("llamafactory") or {}
    use_v1 = lf.get("USE_V1")  # as the training environment sees it
    if (use_v1 or "").lower() in ("true", "y", "1"):  # LLaMA-Factory's is_env_enabled
        return warn(_("LLaMA-Factory {version}, but USE_V1={value} is set: llamafactory-cli then runs its v1 "
                      "(other commands, YAML keys and dataset format), which devtune does not drive; devtune "
                      "writes v0 configs", version=version, value=use_v1),
                    "unset USE_V1", "docs/steps/2-doctor.md, LLaMA-Factory's generations")
    v1 = _(" (its v1 also ships, used only with USE_V1=1)") if lf.get("v1") else ""
    return ok(_("LLaMA-Factory {version}: generation v0, the one devtune drives", version=version) + v1)


@verdict("libraries.llamafactory_deps", "libraries", NEEDS,
         lambda: _("transformers, datasets, accelerate, peft, trl are in LLaMA-Factory's window"))
def judge_lf_deps(ev: Evidence) -> Judgement:
    if (problem := _packages_problem(ev)) is not None:
        return problem
    have = versions(ev)
    data = probe_json(ev, "packages") or {}
    if not have.get("llamafactory"):
        return skip(_("LLaMA-Factory is not installed"))
    if not data.get("llamafactory"):
        return warn(_("the packages probe did not report LLaMA-Factory's declared requirements (a recording "
                      "made by an older devtune): run the doctor again"), "devtune doctor", "")
    declared = lf_declared(ev, (METADATA, RUNTIME, BROKEN))
    wrong = [m for name in sorted({d.package for d in declared})
             if (m := mismatch(name, have, declared)) is not None]
    seen = ", ".join(f"{name} {have.get(name) or '-'}" for name in CORE_LIBRARIES)
    if not wrong:
        return ok(_("{seen}: inside the {n} ranges LLaMA-Factory {version} declares (package metadata, "
                    "check_dependencies)", seen=seen, n=len(declared), version=have["llamafactory"]))
    fix = f"{pip(ev)} install " + " ".join(install_spec(m.package, declared) for m in wrong)
    said = "; ".join(m.describe() for m in wrong)
    refuses = [m for m in wrong if m.refuses]
    breaks = [m for m in wrong if any(d.kind == BROKEN for d in m.ranges) and broken_applies(m.package, have)]
    if refuses and not _enabled(ev, "DISABLE_VERSION_CHECK"):
        return fail(said + ". " + _("LLaMA-Factory refuses to start outside check_dependencies (or needs "
                                    "DISABLE_VERSION_CHECK=1)"), fix, "llamafactory/extras/misc.py check_dependencies")
    if breaks:
        return fail(said, fix, "hiyouga/LLaMA-Factory#10634")
    return warn(said + ". " + (_("DISABLE_VERSION_CHECK=1 lets LLaMA-Factory start anyway") if refuses else
                               _("LLaMA-Factory starts, but this is not the stack it declares")), fix, "")


@verdict("libraries.flash_attn", "libraries", NEEDS, lambda: _("flash-attn (optional) works"))
def judge_flash_attn(ev: Evidence) -> Judgement:
    f = facts(ev)
    if (problem := _packages_problem(ev)) is not None:
        return problem
    version = versions(ev).get("flash_attn")
    info = imported(ev, "flash_attn")
    if f.kind == "cpu":
        return skip(_("not used on a CPU"))
    if not version:
        return ok(_("not installed: LLaMA-Factory uses PyTorch's SDPA attention (flash_attn: auto). On ROCm, "
                    "FlashAttention-2 is not always faster for SFT"), "", "hiyouga/LlamaFactory#8793")
    if info is not None and not info.get("ok"):
        gfx = ";".join(f.gfx_list) or "gfx942"
        rebuild = (f'GPU_ARCHS="{gfx}" {pip(ev)} install --no-build-isolation .   # '
                   + _("in a clone of ROCm/flash-attention")) if f.kind == "rocm" else \
            f"{pip(ev)} install --force-reinstall --no-build-isolation flash-attn"
        return fail(_("flash-attn {version} is installed but does not import: {error}", version=version,
                      error=info.get("error")),
                    f"{pip(ev)} uninstall -y flash-attn   # " + _("LLaMA-Factory then uses SDPA") + "\n" + rebuild,
                    "ROCm/flash-attention#28, #32")
    if f.kind == "rocm":
        triton_env = (ev.env.get("FLASH_ATTENTION_TRITON_AMD_ENABLE") or "").upper() == "TRUE"
        ck = (info or {}).get("cuda_extension")
        if not ck and (info or {}).get("triton_amd") and not triton_env:
            return fail(_("flash-attn {version} is the Triton build (no compiled CK extension), and "
                          "FLASH_ATTENTION_TRITON_AMD_ENABLE is not TRUE: it must stay set at run time",
                          version=version),
                        'export FLASH_ATTENTION_TRITON_AMD_ENABLE="TRUE"', "Dao-AILab/flash-attention README (ROCm)")
        backend = _("Triton backend") if triton_env else _("CK backend") if ck else _("backend unknown")
        return ok(_("flash-attn {version} ({backend})", version=version, backend=backend))
    return ok(_("flash-attn {version}", version=version))


@verdict("libraries.bitsandbytes", "libraries", NEEDS, lambda: _("bitsandbytes works for QLoRA"))
def judge_bnb(ev: Evidence) -> Judgement:
    f = facts(ev)
    if (problem := _packages_problem(ev)) is not None:
        return problem
    version = versions(ev).get("bitsandbytes")
    info = imported(ev, "bitsandbytes") or {}
    wants_qlora = bool((ev.plan or {}).get("quantization_bit"))
    install = f'{pip(ev)} install -U "bitsandbytes>=0.50.0"'
    if f.kind == "cpu":
        return skip(_("QLoRA needs a GPU"))
    if not version:
        if wants_qlora:
            return fail(_("the planned training uses QLoRA (quantization_bit: {bits}) and bitsandbytes is not "
                          "installed", bits=ev.plan.get("quantization_bit")), install, "")
        return skip(_("not installed: needed only for QLoRA"), install)
    v = parse_version(version) or (0,)
    if info and not info.get("ok"):
        return fail(_("bitsandbytes {version} does not import: {error}", version=version, error=info.get("error")),
                    install, "hiyouga/LlamaFactory#8793")
    if f.kind == "rocm":
        libs = [l for l in info.get("libraries", []) if "rocm" in l or "hip" in l]
        if v < BNB_FIRST_ROCM:
            return fail(_("bitsandbytes {version} has no ROCm build (PyPI ROCm wheels start at 0.49.0): QLoRA "
                          "stops with \"Configured CUDA binary not found\"", version=version),
                        install, "hiyouga/LlamaFactory#8793")
        if v < BNB_FULL_ROCM:
            return warn(_("bitsandbytes {version}: its ROCm wheels were a preview (4-bit on CDNA gave NaNs); "
                          "0.50.0 supports every feature on Instinct", version=version),
                        install, "bitsandbytes 0.50.0 release; unsloth PR#7535")
        return ok(_("bitsandbytes {version} with ROCm libraries: {libs}", version=version,
                    libs=", ".join(libs) or "-"))
    declared = lf_declared(ev)
    if (outside := mismatch("bitsandbytes", versions(ev), declared)) is not None:
        return fail(outside.describe() + ". " + _("LLaMA-Factory's QLoRA loader refuses it"),
                    f"{pip(ev)} install {install_spec('bitsandbytes', declared)}", "")
    return ok(_("bitsandbytes {version}", version=version))


@verdict("libraries.deepspeed", "libraries", NEEDS + ("ds_report",), lambda: _("DeepSpeed can build its ops (ds_report)"))
def judge_deepspeed(ev: Evidence) -> Judgement:
    f = facts(ev)
    version = versions(ev).get("deepspeed")
    cmd = ev.command("ds_report")
    declared = lf_declared(ev)
    install = f"{pip(ev)} install {install_spec('deepspeed', declared)}"
    outside = mismatch("deepspeed", versions(ev), declared) if version else None
    if versions(ev) and not version:
        return warn(_("DeepSpeed is not installed: ZeRO-2/3 and multi-GPU full fine-tuning are unavailable"),
                    install, "")
    if cmd.timed_out:
        return warn(_("ds_report did not finish in time"), f"{ev.host.get('train_python', 'python')} -m deepspeed.env_report", "")
    text = strip_ansi(cmd.text())
    if "CUDA_HOME does not exist" in text:
        return fail(_("DeepSpeed looks for CUDA_HOME: an old DeepSpeed that does not know ROCm"),
                    install, "deepspeedai/DeepSpeed#3091")
    report = parse_ds_report(text)
    if not report.ops:
        tail = " | ".join(l for l in text.strip().splitlines()[-2:])
        return warn(_("ds_report printed no op table ({what}): {tail}", what=cmd.describe(), tail=tail[:300]),
                    install, "")
    torch_line = report.info.get("torch version", "?")
    seen = _("DeepSpeed {version}, accelerator {acc}, torch {torch}", version=version or
             report.info.get("deepspeed info", "?").split(",")[0], acc=report.accelerator or "?", torch=torch_line)
    if f.kind != "cpu" and report.accelerator == "cpu":
        return fail(seen + ". " + _("DeepSpeed sees no GPU: fix the PyTorch build first"),
                    "# " + _("see the PyTorch build check") + "\nexport DS_ACCELERATOR=cuda", "")
    if report.ninja_ok is False:
        return fail(seen + ". " + _("ninja is missing: DeepSpeed builds its ops just in time with ninja"),
                    f"{pip(ev)} install ninja", "")
    key_op = "fused_adam" if f.kind != "cpu" else "cpu_adam"
    if report.compatible(key_op) is False:
        hip = "\nexport PATH=/opt/rocm/bin:$PATH   # " + _("hipcc must be on PATH") if f.kind == "rocm" else ""
        return fail(seen + ". " + _("{op} cannot be built here ([NO] in ds_report)", op=key_op),
                    f"{pip(ev)} install -U deepspeed" + hip, "deepspeedai/DeepSpeed#4889, #6600")
    if outside is not None and (stated := stated_exception("deepspeed", version, outside.ranges)) is not None:
        return ok(seen + ". " + _("Outside LLaMA-Factory's {range} on purpose: {why}; devtune's path is proved by "
                                  "{proof}", range=stated.leaves, why=stated.why(), proof=stated.proof), "")
    if outside is not None:
        return warn(seen + ". " + outside.describe() + ". " + _("LLaMA-Factory does not check this range at "
                                                                "start: it is what it was released and tested with"),
                    install, "")
    notes = ""
    fix = ""
    if report.ops.get("async_io", ("", ""))[1] == "NO":
        notes = ". " + _("async_io (ZeRO offload to NVMe) is unavailable: libaio-dev is missing; nothing else needs it")
        fix = "sudo apt install libaio-dev   # " + _("only for ZeRO offload to NVMe")
    return ok(seen + ", " + _("ninja ok, {op} can be built", op=key_op) + notes, fix)


@verdict("libraries.amdsmi", "libraries", NEEDS, lambda: _("amdsmi Python library loads (GPU monitoring)"))
def judge_amdsmi(ev: Evidence) -> Judgement:
    f = facts(ev)
    rocm_path = (ev.env.get("ROCM_PATH") or "/opt/rocm").rstrip("/")
    install = f"{pip(ev)} install {rocm_path}/share/amd_smi"
    if f.kind != "rocm":
        return skip(_("no AMD GPU stack on this machine"))
    if (problem := _packages_problem(ev)) is not None:
        return problem
    info = imported(ev, "amdsmi")
    if info is None:
        return warn(_("amdsmi is not installed in the training environment: the GPU panels fall back to the "
                      "slower amd-smi command"), install, "ROCm/amdsmi README")
    if not info.get("ok"):
        return warn(_("import amdsmi fails: {error} (the library does not match this ROCm, or the PyPI package "
                      "was installed instead of ROCm's own)", error=info.get("error")),
                    f"{pip(ev)} uninstall -y amdsmi\n{install}", "pytorch PR#188724; nvitop#211")
    return ok(_("amdsmi {version} loads", version=info.get("version") or versions(ev).get("amdsmi", "?")))
