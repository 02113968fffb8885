"""The exact commands the doctor proposes, built from what it saw (the user's name, the venv's
python, the detected ROCm). The PyTorch index rules are core.setup.torch_build's, shared with set-up."""

from __future__ import annotations

import shlex

from core.doctor.evidence import Evidence
from core.doctor.facts import facts
from core.setup.torch_build import Hardware, choose_torch


def user(ev: Evidence) -> str:
    return ev.host.get("user") or "$USER"


def pip(ev: Evidence, python: str | None = None) -> str:
    """`<venv python> -m pip`: the fix lands in the environment the doctor looked at."""
    py = python or ev.host.get("train_python") or "python"
    return f"{shlex.quote(py)} -m pip"


def in_container(ev: Evidence) -> str | None:
    return ev.host.get("container")


# PyTorch's CUDA wheel indexes (download.pytorch.org/whl/cuXYZ)
CUDA_INDEXES = ((11, 8), (12, 1), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0))


def cuda_index_for(driver_cuda: str | None) -> str | None:
    """The newest PyTorch CUDA index the driver supports ('12.7' -> 'cu126')."""
    from core.doctor.parse_tools import parse_version

    have = parse_version(driver_cuda)
    fitting = [v for v in CUDA_INDEXES if have and v <= have[:2]]
    return "cu{}{}".format(*fitting[-1]) if fitting else None


def torch_install(ev: Evidence, *, reinstall: bool = True) -> str:
    """Uninstall whatever torch is there, then install the build that fits this machine."""
    f = facts(ev)
    hw = Hardware(f.kind, f.rocm_version, ", ".join(f.kind_evidence))
    choice = choose_torch(hw)
    if choice.refused:  # no PyTorch wheel fits this ROCm: the fix is ROCm itself
        from core.i18n import _

        return "# " + choice.reason + "\n# " + _("install a ROCm that PyTorch publishes wheels for") + \
            ": https://rocm.docs.amd.com/projects/install-on-linux/en/latest/"
    args = list(choice.pip_args())
    if f.kind == "nvidia":
        index = cuda_index_for(f.nvidia_driver.get("cuda"))
        # PyPI's default Linux wheel is a CUDA build; with the driver's CUDA known, take the index that fits it
        args = ["install", "torch", "torchaudio"] + (["--index-url", f"https://download.pytorch.org/whl/{index}"]
                                                     if index else [])
    lines = []
    if reinstall:
        lines.append(f"{pip(ev)} uninstall -y torch torchvision torchaudio")
    lines.append(f"{pip(ev)} " + " ".join(args))
    return "\n".join(lines)


def torch_index(ev: Evidence) -> str | None:
    f = facts(ev)
    if f.kind != "rocm":
        return None
    return choose_torch(Hardware("rocm", f.rocm_version, "")).index_url


def add_to_groups(ev: Evidence, groups: list[str]) -> str:
    from core.i18n import _

    if in_container(ev):
        adds = " ".join(f"--group-add {g}" for g in groups)
        return (f"docker run --device=/dev/kfd --device=/dev/dri {adds} ...   # "
                + _("start the container again with the GPU devices and groups"))
    return (f"sudo usermod -aG {','.join(groups)} {user(ev)}\n"
            "# " + _("then log out and log in again (a new SSH login): groups are read at login"))


def repo_root(ev: Evidence) -> str:
    """The devtune checkout (for `make serve-env`), from the training venv's path."""
    from pathlib import Path

    py = ev.host.get("train_python") or ""
    parts = Path(py).parts
    if len(parts) >= 4 and parts[-2] == "bin":
        return str(Path(*parts[:-3]))
    return "."


def demo_fix(ev: Evidence) -> str:
    """What a machine without a GPU can run: the demo, seeded beside the workspace the doctor looked at, never
    inside it (`devtune demo ./demo` run in a workspace nested a demo in it), by a path that is right wherever
    the command is run. Without a workspace: ./demo, beside where the doctor ran."""
    from pathlib import Path

    workspace = ev.host.get("workspace")
    target = shlex.quote(str(Path(workspace).parent / "devtune-demo")) if isinstance(workspace, str) else "./demo"
    return f"devtune demo {target} && devtune {target}"
