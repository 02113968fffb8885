"""Facts of a run's Python environment for the version-skew family: installed versions, the range a package
declares for another, and the pin that satisfies it.

The run's own environment decides: the versions the log printed (`llamafactory-cli env`'s "- PEFT version:
0.17.1", pip's "peft==0.17.1"), then importlib.metadata of the run's interpreter (a devtune run records the
trainer's argv, whose interpreter is beside it), else of this interpreter (devtune's own, which holds
LLaMA-Factory when the run was started by devtune).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

PRINTED = re.compile(r"(?i)(?:^|[\s`-])(transformers|peft|torch|pytorch|accelerate|datasets|trl|deepspeed|vllm|"
                     r"bitsandbytes|llamafactory|flash[-_]attn|tokenizers|huggingface[-_]hub|safetensors)`?"
                     r"(?: version:|==| )\s*v?(\d+\.\d+[\w.+-]*)")
_QUERY = ("import json,sys\nfrom importlib import metadata as m\nout={}\nfor d in sys.argv[1:]:\n"
          "  try: out[d]=[m.version(d), m.requires(d) or []]\n  except Exception: out[d]=None\nprint(json.dumps(out))")


@dataclass
class Installed:
    dist: str
    version: str | None
    source: str  # "the log" / the interpreter's path
    requires: list[str]


def dist_of(module: str) -> str:
    """The distribution that installs a top-level module (transformers.modeling_utils -> transformers)."""
    top = module.split(".")[0]
    from importlib import metadata

    names = metadata.packages_distributions().get(top)
    return (names[0] if names else top.replace("_", "-")).lower()


def printed_versions(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for m in PRINTED.finditer(text):
        name = m.group(1).lower().replace("_", "-")
        found.setdefault("torch" if name == "pytorch" else name, m.group(2))
    for name, version in re.findall(r"^Name: ([\w.\-]+)\s*\nVersion: (\S+)", text, re.M):  # `pip show X`
        found.setdefault(name.lower().replace("_", "-"), version)
    return found


def installed(dists: list[str], *, python: str | None = None, log_text: str = "") -> dict[str, Installed]:
    printed = printed_versions(log_text)
    meta: dict = {}
    source = python or "this interpreter"
    if python:
        try:
            done = subprocess.run([python, "-c", _QUERY, *dists], capture_output=True, text=True, timeout=20)
            meta = json.loads(done.stdout or "{}")
        except (OSError, ValueError, subprocess.SubprocessError):
            meta = {}
    else:
        from importlib import metadata

        for d in dists:
            try:
                meta[d] = [metadata.version(d), metadata.requires(d) or []]
            except metadata.PackageNotFoundError:
                meta[d] = None
    out = {}
    for d in dists:
        got = meta.get(d)
        if d in printed:
            out[d] = Installed(d, printed[d], "the log", got[1] if got else [])
        else:
            out[d] = Installed(d, got[0] if got else None, source, got[1] if got else [])
    return out


def declared(caller: Installed, provider: str) -> str | None:
    """The version range `caller` declares for `provider` ('>=4.49.0,<=4.56.2'), None when it declares none."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in caller.requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower().replace("_", "-") == provider and (req.marker is None or _marker_ok(req.marker)):
            return str(req.specifier) or None
    return None


def _marker_ok(marker) -> bool:
    try:
        return bool(marker.evaluate({"extra": ""}))
    except Exception:  # noqa: BLE001 - a marker naming an unknown variable: not this environment's requirement
        return False


def satisfies(version: str | None, spec: str | None) -> bool | None:
    if not version or not spec:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidSpecifier, InvalidVersion):
        return None
