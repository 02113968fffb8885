"""The AMD GPU stack: amdgpu driver, amd-smi / rocm-smi, the gfx architecture, the ROCm version."""

from __future__ import annotations

import re

from core.doctor.checks.access import device_groups
from core.doctor.checks.machine import gcd_note
from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, INSTINCT, facts
from core.doctor.fixes import add_to_groups, in_container
from core.doctor.parse_tools import parse_version
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _
from core.setup.machine_kind import INTEGRATED_GFX, RADEON_TARGETS, GpuSeen
from core.setup.torch_build import index_note, rocm_index_for

NEEDS = HARDWARE + ("host", "amd_smi_version", "hipconfig")
INSTALL_DOCS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/"


def _not_amd(ev: Evidence) -> Judgement | None:
    return skip(_("no AMD GPU stack on this machine")) if facts(ev).kind != "rocm" else None


@verdict("rocm.driver", "rocm", NEEDS, lambda: _("amdgpu kernel driver is loaded"))
def judge_driver(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    f = facts(ev)
    seen = []
    loaded = None
    if f.rocminfo and f.rocminfo.module_loaded is not None:
        loaded = f.rocminfo.module_loaded
        seen.append(_("rocminfo says: ROCk module is loaded") if loaded else
                    _("rocminfo says: ROCk module is NOT loaded"))
    modules = ev.files.get("/proc/modules")
    if modules is not None and modules.strip():
        in_modules = any(line.split(" ", 1)[0] == "amdgpu" for line in modules.splitlines())
        seen.append(_("/proc/modules lists amdgpu") if in_modules else _("/proc/modules has no amdgpu"))
        loaded = in_modules if loaded is None else loaded and in_modules
    if ev.paths.get("/sys/module/amdgpu"):
        seen.append(_("/sys/module/amdgpu is present"))
        loaded = True if loaded is None else loaded
    version = (ev.files.get("/sys/module/amdgpu/version") or "").strip() or \
        (f.amd_static.driver_version if f.amd_static else None) or f.amd_smi_version.get("amdgpu")
    if loaded is None and (ev.devices.get("/dev/kfd") or {}).get("exists"):
        loaded = True
        seen.append(_("/dev/kfd is present"))
    if loaded and version and not version.startswith("AMDSMI_STATUS"):
        seen.append(_("driver version {version}", version=version[:40]))
    evidence = "; ".join(seen) or _("nothing tells whether amdgpu is loaded")
    if loaded:
        return ok(evidence)
    if in_container(ev):
        return fail(evidence, "# " + _("the driver belongs to the host: on the host run") + "\nsudo modprobe amdgpu",
                    "ROCm/legacy-rocm-build#2995")
    return fail(evidence + ". " + _("On a cloud machine, open a ticket with the provider if a reboot does not help"),
                "sudo modprobe amdgpu\n# " + _("if that fails: reinstall the driver and reboot") +
                "\nsudo apt install --reinstall amdgpu-dkms && sudo reboot",
                "ROCm/legacy-rocm-build#2995")


@verdict("rocm.smi", "rocm", NEEDS, lambda: _("amd-smi lists the GPUs"))
def judge_smi(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    f = facts(ev)
    cmd = ev.command("amd_smi_static")
    version = f.amd_smi_version.get("tool")
    if cmd.missing:
        rocm_smi = ev.command("rocm_smi")
        if rocm_smi.ok and f.amd_gpu_source == "rocm-smi":
            return warn(_("amd-smi is not installed; rocm-smi lists {n} GPUs (rocm-smi is deprecated in favour "
                          "of amd-smi)", n=len(f.amd_gpus)),
                        "sudo apt install amd-smi-lib", "ROCm/legacy-rocm-build#4374")
        return fail(_("neither amd-smi nor rocm-smi is installed"), "sudo apt install amd-smi-lib",
                    "ROCm/amdsmi README")
    if cmd.timed_out:
        return warn(_("`amd-smi static --json` did not answer in time: the driver or a GPU may be hung"),
                    "sudo dmesg | grep -i amdgpu | tail -20", "")
    text = cmd.text()
    if "No module named" in text:
        missing = re.search(r"No module named '([^']+)'", text)
        mod = missing.group(1) if missing else "yaml"
        return fail(_("amd-smi fails to start: No module named '{module}'", module=mod),
                    f"sudo apt install python3-{mod}" if mod == "yaml" else f"python3 -m pip install {mod}",
                    "ROCm/legacy-rocm-build#3049")
    if "AttributeError" in text and "amdsmi" in text:
        return fail(_("amd-smi fails with an AttributeError in amdsmi: the CLI and its library come from "
                      "different ROCm releases"),
                    "sudo apt install --reinstall amd-smi-lib", "modular/rules_mojo#14")
    static = f.amd_static
    if static and static.permission_denied:
        return fail(_("amd-smi answers, but without access to the GPU device files every field is N/A "
                      "(it printed: Permission needed to access required GPU device node(s))"),
                    add_to_groups(ev, device_groups(ev)), "dell-ai amd-smi non-root output")
    if not static or static.error or not static.gpus:
        said = [l.strip() for l in cmd.stderr.splitlines() if l.strip()]
        why = "; ".join(filter(None, [cmd.describe(), said[-1][:200] if said else "",
                                      static.error if static and not said else ""]))
        return fail(_("amd-smi lists no GPU ({why})", why=why),
                    "amd-smi list\nsudo dmesg | grep -i amdgpu | tail -20", "ROCm/amdsmi")
    shape = "gpu_data" if static.shape == "gpu_data" else _("list")
    return ok(_("amd-smi {version} lists {n} GPUs: {gpus} (JSON shape: {shape})", version=version or "?",
                n=len(static.gpus), gpus=f.describe_gpus(), shape=shape))


@verdict("rocm.arch", "rocm", NEEDS, lambda: _("GPU architecture (gfx) is supported"))
def judge_arch(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    f = facts(ev)
    archs = f.gfx_list
    if not f.amd_gpus:
        return skip(_("no GPU listed (see the driver and amd-smi checks)"))
    if not archs:
        return warn(_("no tool reported the gfx architecture ({source})",
                      source=f.amd_gpu_source or _("no GPU listed")),
                    "rocminfo | grep -m1 -o 'gfx[0-9a-f]*'", "")
    names = "; ".join(f"{g}: {INSTINCT[g][1]} ({INSTINCT[g][0]})" if g in INSTINCT else g for g in archs)
    integrated = [i for i, g in enumerate(f.amd_gpus) if _seen(g, f).integrated and not _seen(g, f).target]
    if len(archs) > 1 and integrated and len(integrated) < len(f.amd_gpus):
        keep = ",".join(str(i) for i in range(len(f.amd_gpus)) if i not in integrated)
        return warn(_("{names}: the integrated GPU is visible to ROCm beside the discrete ones, and a training "
                      "job on all visible devices would include it. Hide it", names=names),
                    f"export ROCR_VISIBLE_DEVICES={keep}   # " + _("the discrete GPUs only"), "")
    if len(archs) > 1:
        return warn(_("mixed architectures on one machine: {names}. One training job must use one architecture",
                      names=names),
                    "export ROCR_VISIBLE_DEVICES=<indexes of one architecture>   # " +
                    _("amd-smi static --json shows each GPU's target_graphics_version"), "")
    gfx = archs[0]
    rocm = parse_version(f.rocm_version)
    if gfx == "gfx950" and rocm and rocm < (7, 0):
        return fail(_("gfx950 (MI350X/MI355X) needs ROCm 7.0 or newer; this machine has ROCm {rocm}",
                      rocm=f.rocm_version),
                    "# " + _("install ROCm 7.x") + f": {INSTALL_DOCS}", "vLLM ROCm docs")
    note = gcd_note(ev)
    if gfx in INSTINCT:
        return ok(names + (". " + note if note else ""))
    if gfx in ("gfx900", "gfx906"):
        return warn(_("{gfx} is no longer supported by current ROCm and PyTorch wheels", gfx=gfx),
                    "# " + _("use an Instinct MI200/MI300 machine for fine-tuning"), "")
    if gfx in RADEON_TARGETS:
        return ok(_("{gfx}: {name}, a Radeon GPU ROCm and PyTorch's ROCm wheels support; devtune is tested on "
                    "Instinct", gfx=gfx, name=RADEON_TARGETS[gfx]))
    if gfx in INTEGRATED_GFX:
        return warn(_("{gfx}: {name}, an integrated GPU that PyTorch's ROCm wheels are not built for; training "
                      "here runs only with HSA_OVERRIDE_GFX_VERSION, and slowly", gfx=gfx, name=INTEGRATED_GFX[gfx]),
                    "# " + _("use a machine with a discrete Instinct or Radeon GPU for fine-tuning"), "")
    return ok(_("{gfx}: not an Instinct GPU; ROCm may support it, devtune is tested on Instinct", gfx=gfx))


def _seen(gpu, f) -> GpuSeen:
    return GpuSeen("amd", gpu.name or "", gpu.gfx, gpu.apu, f.amd_gpu_source)


@verdict("rocm.version", "rocm", NEEDS, lambda: _("ROCm version is known and consistent"))
def judge_version(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    f = facts(ev)
    if not f.rocm_version:
        return fail(_("no ROCm found: no /opt/rocm/.info/version, no amd-smi version, no hipconfig"),
                    "sudo apt install amdgpu-install && sudo amdgpu-install --usecase=rocm   # " + INSTALL_DOCS,
                    "ROCm/ROCm#419")
    seen = "; ".join(f"{src}: {v}" for src, v in f.rocm_versions_seen.items())
    trees = ev.paths.get("rocm_trees") or []
    versioned = [t for t in trees if re.search(r"rocm-\d", t)]
    if len(versioned) > 1:
        return warn(_("ROCm {rocm} ({seen}); several ROCm trees are installed: {trees}. AMD warns that "
                      "multiple ROCm installations may cause amd-smi failures",
                      rocm=f.rocm_version, seen=seen, trees=", ".join(versioned)),
                    f"export ROCM_PATH={ev.paths.get('/opt/rocm') or versioned[-1]}   # " +
                    _("pick one, and remove the others when nothing uses them"), "nvitop#211")
    majors = {tuple((parse_version(v) or (0, 0))[:2]) for v in f.rocm_versions_seen.values()}
    if len(majors) > 1:
        return warn(_("the ROCm tools disagree: {seen}", seen=seen),
                    "ls -ld /opt/rocm*\necho $ROCM_PATH\n# " + _("point ROCM_PATH and PATH at one ROCm"), "")
    note = index_note(f.rocm_version)
    if rocm_index_for(f.rocm_version) is None:  # no PyTorch ROCm wheel for this ROCm's major
        return warn(_("ROCm {rocm} ({seen}). {note}", rocm=f.rocm_version, seen=seen, note=note),
                    "# " + _("install a ROCm that PyTorch publishes wheels for") + f": {INSTALL_DOCS}",
                    "PyTorch previous versions")
    return ok(_("ROCm {rocm} ({seen}). {note}", rocm=f.rocm_version, seen=seen, note=note))
