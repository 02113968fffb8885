"""Device access on an AMD box: /dev/kfd, /dev/dri/renderD*, the render and video groups."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts
from core.doctor.fixes import add_to_groups, in_container, user
from core.doctor.parse_tools import parse_id_groups, parse_id_user
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host", "id", "id_user")
REF_GROUPS = "ROCm/ROCm-docker#116; ROCm/rocminfo#34 (/dev/kfd restricted to the render group)"
REF_DOCKER = "ROCm/ROCm-docker PR#93"


def _not_amd(ev: Evidence) -> Judgement | None:
    if facts(ev).kind != "rocm":
        return skip(_("no AMD GPU stack on this machine"))
    return None


def _is_root(ev: Evidence) -> bool:
    uid, _name = parse_id_user(ev.command("id").stdout)
    return (uid if uid is not None else ev.host.get("uid")) == 0


def device_groups(ev: Evidence) -> list[str]:
    """The groups that own the GPU device files (render, video), as the files say."""
    groups = {info.get("group") for path, info in ev.devices.items()
              if (path == "/dev/kfd" or path.startswith("/dev/dri/renderD")) and info.get("exists")}
    groups.discard(None)
    groups.discard("root")
    return sorted(groups) or ["render", "video"]


def _device_line(path: str, info: dict) -> str:
    return f"{path} {info.get('mode', '?')} {info.get('group', '?')}"


@verdict("access.kfd", "access", NEEDS, lambda: _("/dev/kfd can be opened read-write"))
def judge_kfd(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    kfd = ev.devices.get("/dev/kfd") or {}
    info = facts(ev).rocminfo
    said = _("rocminfo says: Unable to open /dev/kfd read-write: {error}", error=info.kfd_error) \
        if info and info.kfd_error else ""
    if not kfd.get("exists"):
        if in_container(ev):
            return fail(_("there is no /dev/kfd inside this {container} container: it was started without "
                          "the GPU devices", container=in_container(ev)),
                        "docker run --device=/dev/kfd --device=/dev/dri --group-add video --group-add render "
                        "--ipc=host ...", REF_DOCKER)
        return fail(_("there is no /dev/kfd: the amdgpu kernel driver is not loaded (see the driver check)"),
                    "sudo modprobe amdgpu\nls -l /dev/kfd /dev/dri/renderD*",
                    "ROCm/ROCm#1152")
    if not kfd.get("rw"):
        evidence = _("{device}: user {user} cannot open it read-write", device=_device_line("/dev/kfd", kfd),
                     user=user(ev))
        return fail(evidence + (". " + said if said else ""), add_to_groups(ev, device_groups(ev)), REF_GROUPS)
    if info and info.kfd_error:
        # the file is open to us, yet the KFD refuses: typically a container without the right devices
        return fail(_("{device} is accessible, but {said}", device=_device_line("/dev/kfd", kfd), said=said),
                    "docker run --device=/dev/kfd --device=/dev/dri --group-add video --group-add render ...\n"
                    "sudo dmesg | grep -i -E 'kfd|amdgpu' | tail -20",
                    "ROCm/legacy-rocm-build#4043; ROCm/rocminfo#41")
    return ok(_("{device}: readable and writable by {user}", device=_device_line("/dev/kfd", kfd), user=user(ev)))


@verdict("access.render_nodes", "access", NEEDS, lambda: _("/dev/dri/renderD* render nodes are accessible"))
def judge_render_nodes(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    nodes = {p: i for p, i in ev.devices.items() if p.startswith("/dev/dri/renderD") and i.get("exists")}
    gpus = len(facts(ev).amd_gpus)
    if not nodes:
        if in_container(ev):
            return fail(_("no /dev/dri/renderD* inside this container"),
                        "docker run --device=/dev/kfd --device=/dev/dri --group-add video --group-add render ...",
                        REF_DOCKER)
        return fail(_("no /dev/dri/renderD* render node: the amdgpu driver created no device"),
                    "sudo modprobe amdgpu\nls -l /dev/dri", "ROCm/ROCm#1152")
    denied = sorted(p for p, i in nodes.items() if not i.get("rw"))
    first = next(iter(nodes.items()))
    if denied:
        return fail(_("{denied} of {total} render nodes cannot be opened by {user} ({example})",
                      denied=len(denied), total=len(nodes), user=user(ev), example=_device_line(*first)),
                    add_to_groups(ev, device_groups(ev)), REF_GROUPS)
    text = _("{total} render nodes, all readable and writable ({example})", total=len(nodes),
             example=_device_line(*first))
    if gpus and len(nodes) < gpus:
        return warn(text + ". " + _("but {gpus} GPUs are listed: some GPUs have no render node here",
                                    gpus=gpus),
                    "ls -l /dev/dri\n" + "docker run --device=/dev/dri ...   # " +
                    _("in a container: pass the whole /dev/dri"), REF_DOCKER)
    return ok(text)


@verdict("access.groups", "access", NEEDS, lambda: _("User is in the render and video groups"))
def judge_groups(ev: Evidence) -> Judgement:
    if (na := _not_amd(ev)) is not None:
        return na
    session = parse_id_groups(ev.command("id").stdout)
    login = parse_id_groups(ev.command("id_user").stdout) if ev.command("id_user").ok else None
    name = user(ev)
    if _is_root(ev):
        return ok(_("running as root ({id}): the device files are open to it",
                    id=ev.command("id").stdout.strip() or "uid=0"))
    if session is None:
        return warn(_("could not read this session's groups (`id` gave nothing)"), "id\nls -l /dev/kfd")
    needed = [g for g in device_groups(ev) if g in ("render", "video")] or device_groups(ev)
    missing_now = [g for g in needed if g not in session]
    shown = _("this session's groups: {groups}", groups=" ".join(session) or "-")
    if not missing_now:
        if "video" not in session and "video" not in needed:
            shown += ". " + _("video is not needed here: the GPU device files belong to {groups}",
                              groups=", ".join(needed))
        return ok(shown)
    devices = [i for p, i in ev.devices.items() if (p == "/dev/kfd" or p.startswith("/dev/dri/renderD"))
               and i.get("exists")]
    if devices and all(i.get("rw") for i in devices):
        return ok(shown + ". " + _("not in {groups}, but the GPU device files are open to {user} anyway",
                                   groups=", ".join(missing_now), user=name))
    if login is not None and all(g in login for g in missing_now):
        return fail(
            shown + ". " + _("{user} was added to {groups}, but this login started before that: a group "
                             "change only applies to new logins", user=name, groups=", ".join(missing_now)),
            "# " + _("log out and log in again (a new SSH session), then re-run the doctor") + "\n"
            + f"newgrp {missing_now[0]}   # " + _("or, for this shell only"),
            REF_GROUPS)
    return fail(shown + ". " + _("{user} is not in {groups}, which own /dev/kfd and /dev/dri/renderD*",
                                 user=name, groups=", ".join(missing_now)),
                add_to_groups(ev, missing_now), REF_GROUPS)
