"""The NVIDIA equivalents: driver and GPU list, the driver's CUDA against torch's, NVML for monitoring."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts, probe_json
from core.doctor.fixes import pip, torch_install
from core.doctor.parse_tools import parse_version
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host", "nvidia_smi")


def _not_nvidia(ev: Evidence) -> Judgement | None:
    return skip(_("no NVIDIA GPU on this machine")) if facts(ev).kind != "nvidia" else None


@verdict("nvidia.driver", "nvidia", NEEDS, lambda: _("NVIDIA driver answers and lists the GPUs"))
def judge_driver(ev: Evidence) -> Judgement:
    if (na := _not_nvidia(ev)) is not None:
        return na
    f = facts(ev)
    cmd = ev.command("nvidia_smi_query")
    if not f.nvidia_gpus:
        text = cmd.text().strip().splitlines()
        return fail(_("nvidia-smi lists no GPU: {said}", said=(text[0] if text else cmd.describe())[:200]),
                    "sudo modprobe nvidia\n# " + _("if that fails: reinstall the driver and reboot") +
                    "\nsudo apt install --reinstall nvidia-driver && sudo reboot", "")
    driver = f.nvidia_driver.get("driver") or f.nvidia_gpus[0].driver
    mem = f.nvidia_gpus[0].memory_mib
    return ok(_("{gpus}; driver {driver}, CUDA {cuda} (the newest the driver supports); {mem} MiB each",
                gpus=f.describe_gpus(), driver=driver or "?", cuda=f.nvidia_driver.get("cuda") or "?",
                mem=mem or "?"))


@verdict("nvidia.torch_cuda", "nvidia", NEEDS + ("torch",), lambda: _("The driver supports torch's CUDA"))
def judge_torch_cuda(ev: Evidence) -> Judgement:
    if (na := _not_nvidia(ev)) is not None:
        return na
    f = facts(ev)
    probe = probe_json(ev, "torch") or {}
    torch_cuda, driver_cuda = probe.get("cuda"), f.nvidia_driver.get("cuda")
    if not torch_cuda:
        return skip(_("torch is not a CUDA build (see the PyTorch build check)"))
    if not driver_cuda:
        return skip(_("the driver's CUDA version is unknown"))
    t, d = parse_version(torch_cuda) or (0,), parse_version(driver_cuda) or (0,)
    if t[:2] > d[:2]:
        return fail(_("torch {torch} needs CUDA {need}, the driver supports up to CUDA {have}: update the driver "
                      "or install a torch built for an older CUDA", torch=probe.get("version"), need=torch_cuda,
                      have=driver_cuda),
                    torch_install(ev) + "\n# " + _("or update the NVIDIA driver"), "")
    return ok(_("torch CUDA {need} <= driver CUDA {have}", need=torch_cuda, have=driver_cuda))


@verdict("nvidia.nvml", "nvidia", NEEDS + ("packages",), lambda: _("NVML Python binding for GPU monitoring"))
def judge_nvml(ev: Evidence) -> Judgement:
    if (na := _not_nvidia(ev)) is not None:
        return na
    have = (probe_json(ev, "packages") or {}).get("versions") or {}
    if have.get("nvidia_ml_py"):
        return ok(_("nvidia-ml-py {version}", version=have["nvidia_ml_py"]))
    return warn(_("nvidia-ml-py is not installed: the GPU panels fall back to the slower nvidia-smi command"),
                f"{pip(ev)} install nvidia-ml-py", "")
