"""Memory, disk and caches: /dev/shm, disk and RAM against the planned model, the Hugging Face cache
and its offline / mirror settings, NUMA balancing on AMD GPU hosts."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts
from core.doctor.fixes import in_container
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _

GIB = 1024 ** 3
NEEDS = HARDWARE + ("host", "storage", "plan")
BASIC = HARDWARE + ("host", "storage")
GATED_PREFIXES = ("meta-llama/", "google/gemma", "mistralai/")


def gib(n: float | int | None) -> str:
    if n is None:
        return "?"
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / 1024 ** 2:.0f} MiB"


# ---- the planned model ---------------------------------------------------------------------------

def weights_bytes(plan: dict) -> int:
    if plan.get("weights_bytes"):
        return int(plan["weights_bytes"])
    return int(plan.get("params") or 7e9) * 2  # bf16: 2 bytes per parameter


def _params_text(b: float, source: str | None) -> str:
    """The model's size and where it was read, one whole sentence per source (the plan keeps the source id)."""
    if source == "config.json":
        return _("{b:.1f} B parameters from config.json", b=b)
    if source == "config.json (Hugging Face cache)":
        return _("{b:.1f} B parameters from config.json (Hugging Face cache)", b=b)
    if source == "name":
        return _("{b:.1f} B parameters from name", b=b)
    if source == "generic":
        return _("{b:.1f} B parameters from generic", b=b)
    return _("{b:.1f} B parameters from {source}", b=b, source=source)


def describe_plan(plan: dict) -> str:
    weights = gib(weights_bytes(plan))
    if plan.get("source") != "config":
        return _("no model planned in this workspace yet, so judged against a generic 7B LoRA ({weights} of "
                 "bf16 weights)", weights=weights)
    params = plan.get("params")
    size = _params_text(params / 1e9, plan.get("params_source")) if params else _("weights on disk")
    return _("the planned model {model} ({size}; {weights}, {kind}) from {config}", model=plan.get("model"),
             size=size, weights=weights, kind=plan.get("finetuning_type", "lora"), config=plan.get("config_file"))


def disk_need(plan: dict) -> tuple[int, int]:
    """(bytes needed in the Hugging Face cache, bytes needed in the workspace)."""
    weights = weights_bytes(plan)
    download = 0 if plan.get("local") else weights
    # the merged export is one more copy; a full fine-tuning checkpoint also holds fp32 optimizer states
    checkpoints = weights * 7 if plan.get("finetuning_type") == "full" else weights // 10
    return int(download * 1.1), int((weights + checkpoints) * 1.1)


def ram_need(plan: dict, kind: str) -> int:
    weights = weights_bytes(plan)
    offload = "offload" in str(plan.get("deepspeed") or "")
    if kind == "cpu":  # training itself runs in RAM
        return int(weights * (8 if plan.get("finetuning_type") == "full" else 1.5)) + 2 * GIB
    # merge/export loads the whole model in RAM; ZeRO offload keeps fp32 states there (~14 B/param)
    return weights + 2 * GIB + (weights * 7 if offload else 0)


def _plan_fail(plan: dict):
    return fail if plan.get("source") == "config" else warn


@verdict("system.disk", "system", NEEDS, lambda: _("Free disk for the model, checkpoints and the merged export"))
def judge_disk(ev: Evidence) -> Judgement:
    plan = ev.plan or {}
    if not plan:
        return skip(_("no plan was read"))
    ws, hf = ev.storage.get("workspace") or {}, ev.storage.get("hf_cache") or {}
    need_hf, need_ws = disk_need(plan)
    about = describe_plan(plan)
    if "free" not in hf and "free" not in ws:
        return warn(_("could not measure free disk space ({error})", error=hf.get("error") or ws.get("error") or "?"),
                    "df -h . ~/.cache/huggingface", "")
    same = ws and hf and ws.get("device") is not None and ws.get("device") == hf.get("device")
    if same or not ws:
        where = ws if ws else hf
        need, free = need_hf + need_ws, where.get("free")
        places = where.get("path")
    else:
        problems = [(need_hf, hf), (need_ws, ws)]
        short = [(n, w) for n, w in problems if n and w.get("free") is not None and w["free"] < n]
        if short:
            need, where = short[0]
            free, places = where["free"], where.get("path")
        else:
            need, free = need_hf + need_ws, min(hf.get("free", 0), ws.get("free", 0))
            places = f"{hf.get('path')}, {ws.get('path')}"
    seen = _("{free} free in {where}; {about} needs about {need} (download, checkpoints, merged export)",
             free=gib(free), where=places, about=about, need=gib(need))
    if free is not None and free < need:
        return _plan_fail(plan)(seen, "export HF_HOME=/path/on/a/larger/disk/huggingface   # " +
                                _("and keep the workspace on a disk with room") + "\ndf -h", "")
    return ok(seen)


@verdict("system.ram", "system", NEEDS + ("files",), lambda: _("RAM for loading and merging the model"))
def judge_ram(ev: Evidence) -> Judgement:
    f = facts(ev)
    plan = ev.plan or {}
    total, available = f.meminfo.get("MemTotal"), f.meminfo.get("MemAvailable")
    if not total or not plan:
        return skip(_("the RAM size or the plan is unknown"))
    need = ram_need(plan, f.kind)
    seen = _("{total} RAM ({available} available); {about} needs about {need}", total=gib(total),
             available=gib(available), about=describe_plan(plan), need=gib(need))
    if total < need:
        fix = "free -g\n# " + _("use a machine with more RAM, or merge with export_device: auto on the GPU")
        return _plan_fail(plan)(seen, fix, "")
    if available is not None and available < need:
        return warn(seen + ". " + _("other processes hold the memory now"), "ps aux --sort=-rss | head", "")
    return ok(seen)


@verdict("system.shm", "system", BASIC, lambda: _("/dev/shm is large enough"))
def judge_shm(ev: Evidence) -> Judgement:
    f = facts(ev)
    shm = ev.storage.get("shm") or {}
    size = shm.get("total")
    if size is None:
        return warn(_("/dev/shm could not be measured ({error})", error=shm.get("error") or _("missing")),
                    "df -h /dev/shm", "")
    fix = ("docker run --ipc=host ...   # " + _("or --shm-size=16g; restart the container with it")) \
        if in_container(ev) else "sudo mount -o remount,size=16G /dev/shm"
    seen = _("/dev/shm is {size}", size=gib(size))
    if f.kind == "cpu":
        if size < 256 * 1024 ** 2:
            return warn(seen + ". " + _("data loading workers share memory through it"), fix, "torchtitan#853")
        return ok(seen)
    if size < GIB:
        return fail(seen + ". " + _("NCCL/RCCL and data loader workers need more: 'Error while creating shared "
                                    "memory segment /dev/shm/nccl-...' or 'Unexpected bus error encountered in "
                                    "worker' (a container's default is 64 MB)"),
                    fix, "pytorch/torchtitan#853; LLaMA-Factory ROCm compose (ipc: host)")
    if size < 8 * GIB and f.gpu_count > 1:
        return warn(seen + ". " + _("tight for {n} GPUs; several GB is the norm", n=f.gpu_count), fix, "")
    return ok(seen)


@verdict("system.hf_cache", "system", NEEDS, lambda: _("Hugging Face cache, offline and mirror settings"))
def judge_hf_cache(ev: Evidence) -> Judgement:
    hf = ev.storage.get("hf_cache") or {}
    plan = ev.plan or {}
    env = ev.env
    parts = [_("cache: {path}", path=hf.get("path", "?"))]
    if env.get("HF_ENDPOINT"):
        parts.append(_("mirror HF_ENDPOINT={url}", url=env["HF_ENDPOINT"]))
    offline = env.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if offline:
        parts.append("HF_HUB_OFFLINE=1")
    token = bool(env.get("HF_TOKEN")) or bool(ev.paths.get("hf_token_file"))
    parts.append(_("a token is set (not shown)") if token else _("no token"))
    seen = "; ".join(parts)
    if hf and hf.get("writable") is False:
        return fail(seen + ". " + _("the cache folder cannot be written by this user"),
                    "export HF_HOME=$HOME/hf-cache   # " + _("set it before starting devtune: it is read at import time"),
                    "huggingface_hub docs (environment variables)")
    model = str(plan.get("model") or "")
    hub_model = plan.get("source") == "config" and not plan.get("local")
    if hub_model and offline and not plan.get("cached"):
        return fail(seen + ". " + _("offline mode is on and {model} is not in the cache", model=model),
                    f"HF_HUB_OFFLINE=0 hf download {model}   # " + _("once, where the network is reachable"), "")
    if hub_model and not token and model.startswith(GATED_PREFIXES) and not plan.get("cached"):
        return warn(seen + ". " + _("{model} is gated: downloading it needs a token with access (401/403 otherwise)",
                                    model=model), "hf auth login", "")
    return ok(seen)


@verdict("system.numa", "system", HARDWARE + ("host",), lambda: _("NUMA auto-balancing is off on the GPU host"))
def judge_numa(ev: Evidence) -> Judgement:
    f = facts(ev)
    value = (ev.files.get("/proc/sys/kernel/numa_balancing") or "").strip()
    if f.kind != "rocm" or not f.amd_gpus:
        return skip(_("only tuned on AMD GPU hosts"))
    if value == "1":
        return warn(_("kernel.numa_balancing = 1: AMD recommends turning it off on Instinct hosts (it migrates "
                      "memory pages under running GPU jobs)"),
                    "sudo sysctl -w kernel.numa_balancing=0\n"
                    "echo 'kernel.numa_balancing=0' | sudo tee /etc/sysctl.d/99-numa.conf",
                    "AMD Instinct MI300X workload tuning guide")
    if value == "0":
        return ok(_("kernel.numa_balancing = 0"))
    return skip(_("NUMA balancing is not available on this kernel"))
