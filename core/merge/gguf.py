"""A merged folder as a GGUF for llama.cpp and Ollama (`devtune merge --gguf`, the Merge step's GGUF choice).

llama.cpp's converter (core.merge.gguf_convert, in the training environment) writes f16, bf16 or q8_0
directly; q4_k_m and q5_k_m are quantized from an f16 GGUF by llama.cpp itself (`llama_model_quantize` of
llama-cpp-python, .venv-gguf). Everything is written into a temporary folder beside the target and renamed
into exports/<name>-gguf/ at the end (a GGUF of each type converted; the Ollama Modelfile, core.merge.gguf_modelfile,
for the latest);
the free disk space is checked first against the size each type is estimated to take.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core.errors import BadInput, Failed, Refused
from core.i18n import _
from core.processes.helpers import run_helper, track, untrack
from core.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]
GGUF_ENV = ROOT / ".venv-gguf"
# bits per weight of each type as llama.cpp writes it (q8_0: 32 int8 + an f16 scale per block; the k-quants'
# mixes as llama.cpp's quantize reports them for Llama models), and who writes it
QUANTS: dict[str, tuple[float, str]] = {
    "f16": (16.0, "converter"), "bf16": (16.0, "converter"), "q8_0": (8.5, "converter"),
    "q5_k_m": (5.7, "quantize"), "q4_k_m": (4.9, "quantize"),
}
DEFAULT_QUANT = "q8_0"
HEADROOM = 1.10  # free space asked beyond the estimate
META_BYTES = 64 << 10  # header, hyper-parameters and chat template, beside the vocabulary (~tokenizer.json)


@dataclass(frozen=True)
class GgufTools:
    python: Path  # .venv-gguf's python: llama-cpp-python and the gguf package
    converter: Path  # llama.cpp's convert_hf_to_gguf.py, with conversion/ and gguf-py/ beside it


@dataclass(frozen=True)
class GgufPlan:
    export_dir: str  # the merged folder, workspace-relative
    out_dir: str  # exports/<name>-gguf
    file: str  # <name>-<quant>.gguf
    quant: str
    params: int
    estimate_bytes: int  # the GGUF
    need_bytes: int  # free space needed (with an f16 intermediate for the k-quants, and headroom)
    tools: GgufTools


@dataclass(frozen=True)
class GgufProgress:
    stage: str  # convert | quantize | modelfile
    fraction: float  # 0..1 of the whole
    detail: str = ""


@dataclass(frozen=True)
class GgufWritten:
    path: str  # workspace-relative GGUF
    modelfile: str | None
    quant: str
    size_bytes: int
    estimate_bytes: int
    modelfile_note: str  # why no Modelfile was written ("" when it was)
    seconds: float


class GgufError(BadInput):
    """A GGUF conversion was asked for something that cannot be converted (the message says what)."""


def find_tools(root: Path | None = None) -> GgufTools | None:
    root = GGUF_ENV if root is None else root
    python, converter = root / "bin" / "python", root / "share" / "llama.cpp" / "convert_hf_to_gguf.py"
    return GgufTools(python, converter) if python.is_file() and converter.is_file() else None


def find_gguf(folder: Path) -> Path | None:
    """The GGUF the folder's Modelfile names (the latest converted), else the newest."""
    folder = Path(folder)
    try:
        first = (folder / "Modelfile").read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError):
        first = ""
    named = folder / first[len("FROM ./"):] if first.startswith("FROM ./") else None
    if named is not None and named.is_file():
        return named
    files = sorted(folder.glob("*.gguf"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def missing_tools_message(quant: str) -> str:
    return _("GGUF {quant} needs llama.cpp (llama-cpp-python built from source, its converter and the gguf "
             "package) in {env}: run `make gguf-env` in {root} (4 to 10 minutes on 2 cores)",
             quant=quant, env=str(GGUF_ENV), root=str(ROOT))


def count_params(model_dir: Path) -> int:
    """Parameters in the folder's safetensors files, from their headers (no weights read)."""
    total = 0
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise GgufError(_("{dir} has no *.safetensors weights: llama.cpp's converter reads safetensors; re-export "
                          "with export_legacy_format: false", dir=str(model_dir)))
    for f in files:
        with f.open("rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(size))
        for name, info in header.items():
            if name != "__metadata__":
                n = 1
                for dim in info.get("shape", []):
                    n *= int(dim)
                total += n
    return total


def estimate_bytes(params: int, quant: str, vocab_bytes: int = 0) -> int:
    bits, _writer = QUANTS[quant]
    return int(params * bits / 8) + META_BYTES + vocab_bytes


def estimate_for(model_dir: Path, quant: str) -> int:
    """The estimate for a GGUF of `quant` from the merged folder `model_dir`."""
    vocab = Path(model_dir) / "tokenizer.json"
    return estimate_bytes(count_params(model_dir), quant, vocab.stat().st_size if vocab.is_file() else 0)


def need_bytes(params: int, quant: str, vocab_bytes: int = 0) -> int:
    size = estimate_bytes(params, quant, vocab_bytes)
    if QUANTS[quant][1] == "quantize":
        size += estimate_bytes(params, "f16", vocab_bytes)  # the f16 GGUF it is quantized from
    return int(size * HEADROOM)


def shown_size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def gguf_dir_name(export_dir: str | Path) -> str:
    return f"{Path(export_dir).name}-gguf"


def plan_gguf(ws: Workspace, export_dir: str | Path, quant: str = DEFAULT_QUANT, *,
              tools: GgufTools | None = None, free_bytes: int | None = None) -> GgufPlan:
    """What converting `export_dir` to `quant` writes, and whether it can: Refused when llama.cpp is not
    installed or the disk is too small, GgufError for an unknown type or a folder without safetensors."""
    if quant not in QUANTS:
        raise GgufError(_("unknown GGUF type {quant}: choose one of {choices}", quant=quant,
                          choices=", ".join(QUANTS)))
    tools = tools or find_tools()
    if tools is None:
        raise Refused(missing_tools_message(quant))
    src = ws.abs(export_dir)
    params = count_params(src)
    vocab = (src / "tokenizer.json").stat().st_size if (src / "tokenizer.json").is_file() else 0
    out_dir = src.parent / gguf_dir_name(src)
    free = shutil.disk_usage(src.parent).free if free_bytes is None else free_bytes
    need = need_bytes(params, quant, vocab)
    if free < need:
        raise Refused(_("{dir} has {free} free; a {quant} GGUF of {params} parameters needs about {need} there: "
                        "free some space or choose a smaller type (q4_k_m is the smallest)",
                        dir=ws.rel(src.parent), free=shown_size(free), quant=quant, params=f"{params:,}",
                        need=shown_size(need)))
    return GgufPlan(export_dir=ws.rel(src), out_dir=ws.rel(out_dir), file=f"{src.name}-{quant}.gguf", quant=quant,
                    params=params, estimate_bytes=estimate_bytes(params, quant, vocab), need_bytes=need, tools=tools)


_PERCENT = re.compile(r"Writing:\s+(\d+)%")


def _run_streamed(argv: list[str], log: Path, on_percent: Callable[[float, str], None]) -> None:
    """Run `argv` (its own process group, tracked), its output to `log`; tqdm percentages reported."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        track(proc)
        try:
            for chunk in iter(lambda: proc.stdout.read1(4096), b""):
                out.write(chunk)
                for line in re.split(r"[\r\n]", chunk.decode("utf-8", "replace")):
                    m = _PERCENT.search(line)
                    if m:
                        on_percent(int(m.group(1)) / 100, line.strip()[:80])
            code = proc.wait()
        finally:
            untrack(proc)
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-6:])
        raise Failed(_("llama.cpp's converter failed (exit {code}); log: {log}\n{tail}", code=code, log=str(log),
                       tail=tail))


def run_gguf_probe(python: Path, args: list[str], timeout: float = 900) -> dict:
    from core.merge.gguf_probe import MARKER

    proc = run_helper([str(python), "-m", "core.merge.gguf_probe", *args], timeout=timeout, cwd=ROOT)
    if proc.returncode != 0 or MARKER not in proc.stdout:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise RuntimeError(tail or _("exit code {code}", code=proc.returncode))
    return json.loads(proc.stdout.rsplit(MARKER, 1)[1])


def write_modelfile(tools: GgufTools, gguf: Path, stop: list[str]) -> tuple[Path | None, str]:
    """The Modelfile beside `gguf`, from the chat template the GGUF carries; (None, why) when it cannot be."""
    from core.merge.gguf_modelfile import ModelfileError, modelfile_text, template_pieces

    meta = run_gguf_probe(tools.python, ["metadata", str(gguf)], timeout=120)
    template = meta.get("chat_template")
    if not template:
        return None, _("the GGUF carries no chat template (the merged folder has none)")
    try:
        pieces = template_pieces(template, bos_token=meta.get("bos_token") or "",
                                 eos_token=meta.get("eos_token") or "", add_bos=meta.get("add_bos") is not False)
        text = modelfile_text(gguf.name, pieces, [*stop, meta.get("eos_token") or ""])
    except ModelfileError as exc:
        return None, _("its chat template cannot be written as an Ollama template: {error}", error=str(exc))
    path = gguf.parent / "Modelfile"
    path.write_text(text, encoding="utf-8")
    return path, ""


def convert(ws: Workspace, plan: GgufPlan, *, stop: list[str] | None = None,
            progress: Callable[[GgufProgress], None] | None = None) -> GgufWritten:
    """Write plan.out_dir/plan.file and its Modelfile, atomically: into a temporary folder beside it, renamed
    into place at the end. `stop`: the training template's stop words, for the Modelfile."""
    say = progress or (lambda _p: None)
    started = time.monotonic()
    out_dir = ws.abs(plan.out_dir)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log = ws.state_dir / "exports" / Path(plan.export_dir).name / "gguf.log"
    quantize = QUANTS[plan.quant][1] == "quantize"
    first = tmp / (f"{Path(plan.export_dir).name}-f16.gguf" if quantize else plan.file)
    share = 0.6 if quantize else 0.9
    try:
        say(GgufProgress("convert", 0.0, _("converting {dir} with llama.cpp's converter", dir=plan.export_dir)))
        _run_streamed([sys.executable, "-m", "core.merge.gguf_convert", str(plan.tools.converter),
                       str(ws.abs(plan.export_dir)), "--outfile", str(first),
                       "--outtype", "f16" if quantize else plan.quant], log,
                      lambda f, line: say(GgufProgress("convert", f * share, line)))
        if quantize:
            say(GgufProgress("quantize", share, _("quantizing to {quant} with llama.cpp", quant=plan.quant)))
            try:
                run_gguf_probe(plan.tools.python, ["quantize", str(first), str(tmp / plan.file), plan.quant])
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                raise Failed(_("llama.cpp could not quantize to {quant}: {error}", quant=plan.quant,
                               error=str(exc))) from exc
            first.unlink()
        say(GgufProgress("modelfile", 0.95, _("writing the Ollama Modelfile")))
        try:
            modelfile, note = write_modelfile(plan.tools, tmp / plan.file, stop or [])
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            modelfile, note = None, _("the GGUF's metadata could not be read: {error}", error=str(exc))
        _move_into(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    path = out_dir / plan.file
    say(GgufProgress("done", 1.0, ws.rel(path)))
    return GgufWritten(path=ws.rel(path), modelfile=ws.rel(out_dir / modelfile.name) if modelfile else None,
                       quant=plan.quant, size_bytes=path.stat().st_size, estimate_bytes=plan.estimate_bytes,
                       modelfile_note=note, seconds=round(time.monotonic() - started, 2))


def _move_into(tmp: Path, target: Path) -> None:
    """The finished files of `tmp` into `target` (one rename each, the GGUF before the Modelfile that names it);
    the GGUFs of other types already there stay."""
    if not target.exists():
        tmp.rename(target)
        return
    for f in sorted(tmp.iterdir(), key=lambda p: p.name == "Modelfile"):
        os.replace(f, target / f.name)
