"""Is a GGUF the trained model? Its template, its tokens and its answers, against the merged folder.

- Template: the probe conversations rendered with the chat template embedded in the GGUF
  (tokenizer.chat_template, read with the gguf package's GGUFReader) against LLaMA-Factory's template of the
  run (core.merge.export_check.lf_reference), character for character.
- Tokens: the training questions' prompts, rendered with that template, tokenized by the GGUF's vocabulary
  (llama.cpp) and by the merged folder's tokenizer (transformers): the same ids, or the vocabulary did not
  travel (a pre-tokenizer named wrong).
- Answers: llama.cpp answers the training questions greedily, and so does the merged model (transformers,
  float32). Reported: the share of answers that are the same token for token, and the top-token agreement:
  fed the merged model's answer, how often llama.cpp's most likely next token is the merged model's, step by
  step. Below MIN_AGREEMENT for the type, the difference is more than the quantisation explains: a failed check.

The report is saved as `.devtune/exports/<name>-gguf/gguf.json`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from pydantic import Field

from core.i18n import _, said
from core.i18n.kept_words import KeptWords
from core.merge.export_check import FAIL, OK, WARN, ExportFinding, compare_templates, lf_reference, report_dir
from core.merge.gguf import find_gguf  # noqa: F401 (in gguf.py, a leaf the serve plan reads too)
from core.workspace.layout import Workspace

# the least top-token agreement each type must keep (measured on the tiny model: docs/merge-and-serve.md)
MIN_AGREEMENT = {"f16": 0.98, "bf16": 0.95, "q8_0": 0.95, "q5_k_m": 0.85, "q4_k_m": 0.80}
QUESTIONS = 8
MAX_NEW_TOKENS = 48


class GgufAnswer(KeptWords):
    question: str
    merged: str
    gguf: str
    same: bool
    agreement: float  # top-token agreement over this answer's steps
    prompt_tokens_match: bool


class GgufReport(KeptWords):
    path: str
    quant: str
    size_bytes: int
    estimate_bytes: int | None = None
    modelfile: str | None = None
    template_match: bool | None = None
    template_differences: list[dict] = Field(default_factory=list)
    tokens_match: bool | None = None
    exact_match: float | None = None
    agreement: float | None = None
    min_agreement: float | None = None
    answers: list[GgufAnswer] = Field(default_factory=list)
    findings: list[ExportFinding] = Field(default_factory=list)

    @property
    def verdict(self) -> str:
        levels = {f.level for f in self.findings}
        return FAIL if FAIL in levels else WARN if WARN in levels else OK


def quant_of(path: Path) -> str:
    """The type in a devtune GGUF's name (<name>-<quant>.gguf)."""
    from core.merge.gguf import QUANTS

    stem = Path(path).stem
    return next((q for q in QUANTS if stem.endswith("-" + q)), stem.rsplit("-", 1)[-1])


def save_gguf_report(ws: Workspace, report: GgufReport) -> Path:
    from core.files.atomic import write_atomic

    return write_atomic(report_dir(ws, Path(report.path).parent) / "gguf.json", report.model_dump_json(indent=2) + "\n")


def _requests(prompts: list[str], **extra) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")
    with f:
        json.dump({"prompts": prompts, "max_new_tokens": MAX_NEW_TOKENS, **extra}, f, ensure_ascii=False)
    return f.name


def compare_answers(merged: list[dict], gguf: list[dict]) -> tuple[float, float, bool, list[tuple[bool, float, bool]]]:
    """(exact-match rate, top-token agreement, all prompts tokenized alike, per answer (same, agreement,
    prompt alike)) from the two sides' answers (gguf_probe hf-answers / gguf-answers)."""
    per, steps, agreed = [], 0, 0
    for m, g in zip(merged, gguf):
        ref, forced = m["answer_ids"], g["forced_top"]
        hits = sum(1 for a, b in zip(ref, forced) if a == b)
        steps, agreed = steps + len(ref), agreed + hits
        per.append((m["answer_ids"] == g["answer_ids"], hits / len(ref) if ref else 1.0,
                    m["prompt_ids"] == g["prompt_ids"]))
    exact = sum(p[0] for p in per) / len(per) if per else 0.0
    return exact, agreed / steps if steps else 1.0, all(p[2] for p in per), per


def diagnose(report: GgufReport) -> ExportFinding:
    """The answers' finding: agreement within what the type explains, or the first cause that explains more."""
    detail = said("{exact:.0%} of {n} answers the same token for token; top-token agreement {agree:.1%} "
                  "(at least {min:.0%} expected of {quant})", exact=report.exact_match or 0.0, n=len(report.answers),
                  agree=report.agreement or 0.0, min=report.min_agreement or 0.0, quant=report.quant)
    if report.agreement is not None and report.min_agreement is not None and report.agreement >= report.min_agreement:
        return ExportFinding(level=OK, what=said("GGUF answers"), detail=detail)
    if report.template_match is False:
        fix = said("the GGUF's chat template is not the training one: re-export the merged folder with the "
                   "training template (see the chat template finding), then convert again")
    elif report.tokens_match is False:
        fix = said("the GGUF's vocabulary tokenizes the prompts differently from the merged tokenizer: its "
                   "pre-tokenizer (tokenizer.ggml.pre) is not the model's; convert with a llama.cpp that knows "
                   "this tokenizer")
    else:
        fix = said("the answers differ beyond what {quant} explains: convert to q8_0 or f16, and check the merged "
                   "folder with `devtune check-export`", quant=report.quant)
    return ExportFinding(level=FAIL, what=said("GGUF answers"), detail=detail, fix=fix)


def check_gguf(ws: Workspace, gguf: str | Path, *, merged_dir: str | Path, template: str | None,
               run_id: str | None, written=None, progress: Callable[[str], None] | None = None) -> GgufReport:
    """Check the GGUF `gguf` against the merged folder it came from and the run's template and questions."""
    from core.merge.chat_template import render
    from core.merge.gguf import QUANTS, GgufError, estimate_for, find_tools, run_gguf_probe

    say = progress or (lambda _m: None)
    path = ws.abs(gguf)
    quant = quant_of(path)
    estimate = getattr(written, "estimate_bytes", None)
    if estimate is None and quant in QUANTS:
        try:
            estimate = estimate_for(ws.abs(merged_dir), quant)
        except (GgufError, OSError, ValueError):
            estimate = None
    report = GgufReport(path=ws.rel(path), quant=quant, size_bytes=path.stat().st_size, estimate_bytes=estimate,
                        modelfile=(ws.rel(path.parent / "Modelfile") if (path.parent / "Modelfile").is_file()
                                   else None),
                        min_agreement=MIN_AGREEMENT.get(quant))
    tools = find_tools()
    if tools is None:
        from core.merge.gguf import missing_tools_message

        report.findings.append(ExportFinding(level=WARN, what=said("GGUF"), detail=missing_tools_message(quant)))
        return report
    say(_("reading the GGUF's metadata"))
    try:
        meta = run_gguf_probe(tools.python, ["metadata", str(path)], timeout=120)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        report.findings.append(ExportFinding(level=FAIL, what=said("GGUF"),
                                             detail=said("the GGUF cannot be read: {error}", error=str(exc))))
        return save_and_return(ws, report)
    report.findings.append(ExportFinding(level=OK, what=said("GGUF"), detail=said(
        "{file}: {arch}, {quant}, {mb:.1f} MB", file=path.name, arch=meta.get("architecture") or "?", quant=quant,
        mb=report.size_bytes / 1e6)))
    chat_template = meta.get("chat_template")
    tokens = {"bos_token": meta.get("bos_token") or "", "eos_token": meta.get("eos_token") or ""}
    merged = ws.abs(merged_dir)
    if template:
        say(_("comparing the GGUF's chat template with LLaMA-Factory's {name}", name=template))
        try:
            reference = lf_reference(ws, merged, template)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            report.findings.append(ExportFinding(level=WARN, what=said("GGUF chat template"), detail=said(
                "LLaMA-Factory's template {name} could not be rendered: {error}", name=template, error=str(exc))))
        else:
            report.template_differences = compare_templates(reference, chat_template, tokens)
            report.template_match = not report.template_differences
            report.findings.append(_template_finding(report, template))
    elif not chat_template:
        report.findings.append(ExportFinding(level=WARN, what=said("GGUF chat template"),
                                             detail=said("the GGUF carries no chat template")))
    if chat_template and run_id:
        _check_answers(ws, report, tools, merged, path, chat_template, tokens, run_id, say, render)
    return save_and_return(ws, report)


def _template_finding(report: GgufReport, template: str) -> ExportFinding:
    if report.template_match:
        return ExportFinding(level=OK, what=said("GGUF chat template"), detail=said(
            "tokenizer.chat_template renders exactly what training saw with template {name}", name=template))
    first = report.template_differences[0]
    return ExportFinding(level=FAIL, what=said("GGUF chat template"), detail=said(
        "the GGUF's chat template differs from LLaMA-Factory's template {name} at character {index} of probe "
        "{probe}: training saw {expected!r}, llama.cpp and Ollama would send {actual!r}", name=template,
        index=first["index"], probe=first["probe"], expected=first["expected"], actual=first["actual"]),
        fix=said("re-export the merged folder with the training template (its chat template check says how), "
                 "then convert again"))


def _check_answers(ws, report, tools, merged, path, chat_template, tokens, run_id, say, render) -> None:
    from core.merge.gguf import run_gguf_probe
    from core.serve.chat import build_messages
    from core.serve.verify import VerifyError, run_questions

    try:
        questions = [q for q in run_questions(ws, run_id, n=QUESTIONS) if q.split == "train"]
    except VerifyError as exc:
        report.findings.append(ExportFinding(level=WARN, what=said("GGUF answers"), detail=str(exc)))
        return
    prompts = [render(chat_template, build_messages(q.prompt, system=q.system, history=q.history),
                      add_generation_prompt=True, **tokens) for q in questions]
    say(_("the merged model answers {n} training questions (transformers)", n=len(prompts)))
    try:
        hf = run_gguf_probe(Path(sys.executable), ["hf-answers", str(merged), _requests(prompts)])
        say(_("llama.cpp answers them from the GGUF"))
        gg = run_gguf_probe(tools.python, ["gguf-answers", str(path), _requests(
            prompts, reference=[a["answer_ids"] for a in hf["answers"]], stop=hf["stop"])])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        report.findings.append(ExportFinding(level=FAIL, what=said("GGUF answers"), detail=said(
            "the answers could not be compared: {error}", error=str(exc))))
        return
    exact, agreement, alike, per = compare_answers(hf["answers"], gg["answers"])
    report.exact_match, report.agreement, report.tokens_match = exact, agreement, alike
    report.answers = [GgufAnswer(question=q.prompt, merged=m["answer"], gguf=g["answer"], same=p[0],
                                 agreement=p[1], prompt_tokens_match=p[2])
                      for q, m, g, p in zip(questions, hf["answers"], gg["answers"], per)]
    report.findings.append(ExportFinding(level=OK, what=said("GGUF tokens"), detail=said(
        "the GGUF's vocabulary tokenizes every prompt as the merged tokenizer does")) if alike else
        ExportFinding(level=FAIL, what=said("GGUF tokens"), detail=said(
            "the GGUF's vocabulary tokenizes {n} prompt(s) differently from the merged tokenizer",
            n=sum(1 for p in per if not p[2]))))
    report.findings.append(diagnose(report))


def save_and_return(ws: Workspace, report: GgufReport) -> GgufReport:
    save_gguf_report(ws, report)
    return report


# ---------------------------------------------------------------- the actions both front-ends call

def preflight(quant: str) -> None:
    """Refuse before the merge what the conversion would refuse after it: an unknown type, no llama.cpp."""
    from core.errors import Refused
    from core.merge.gguf import QUANTS, GgufError, find_tools, missing_tools_message

    if quant not in QUANTS:
        raise GgufError(_("unknown GGUF type {quant}: choose one of {choices}", quant=quant, choices=", ".join(QUANTS)))
    if find_tools() is None:
        raise Refused(missing_tools_message(quant))


def make_gguf(ws: Workspace, export_dir: str | Path, quant: str, *, template: str | None, run_id: str | None,
              progress: Callable | None = None, message: Callable[[str], None] | None = None) -> GgufReport:
    """Convert the merged folder to a GGUF of `quant` with its Modelfile, then check it (template, tokens,
    answers). `progress` gets core.merge.gguf.GgufProgress, `message` the check's stages."""
    from core.merge.gguf import convert, plan_gguf

    plan = plan_gguf(ws, export_dir, quant)
    stop: list[str] = []
    if template:
        try:
            stop = list(lf_reference(ws, ws.abs(export_dir), template).get("stop_tokens") or [])
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            stop = []
    written = convert(ws, plan, stop=stop, progress=progress)
    report = check_gguf(ws, written.path, merged_dir=export_dir, template=template, run_id=run_id, written=written,
                        progress=message)
    if written.modelfile_note:
        report.findings.append(ExportFinding(level=WARN, what="Modelfile", detail=written.modelfile_note))
        save_gguf_report(ws, report)
    return report


def is_gguf_target(ws: Workspace, target: str | Path) -> bool:
    path = ws.abs(target)
    return path.suffix == ".gguf" or (path.is_dir() and find_gguf(path) is not None)


def check_gguf_target(ws: Workspace, target: str | Path, run_id: str | None = None, *,
                      progress: Callable[[str], None] | None = None) -> GgufReport:
    """`devtune check-export` of a GGUF folder (or file): against the merged folder beside it
    (exports/<name> for exports/<name>-gguf) and the run recorded when that was exported."""
    from core.merge.export import ExportError, load_export_record
    from core.merge.export_check import load_report

    path = ws.abs(target)
    gguf = path if path.suffix == ".gguf" else find_gguf(path)
    if gguf is None or not gguf.is_file():
        raise ExportError(_("{path} holds no .gguf file; `devtune merge --gguf` writes one into exports/<name>-gguf",
                            path=ws.rel(path)))
    folder = gguf.parent
    merged = folder.parent / (folder.name[:-len("-gguf")] if folder.name.endswith("-gguf") else folder.name)
    if not (merged / "config.json").is_file():
        raise ExportError(_("the merged folder {dir} that {file} was converted from is not there: the answers are "
                            "compared with it", dir=ws.rel(merged), file=gguf.name))
    recorded = load_export_record(ws, merged)
    previous = load_report(ws, merged)
    template = recorded.template if recorded else None
    run = run_id or (recorded.run_id if recorded else None) or (previous.run_id if previous else None)
    return check_gguf(ws, gguf, merged_dir=merged, template=template, run_id=run, progress=progress)
