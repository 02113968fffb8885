"""Is a merged folder ready to serve? Files, chat template, and (small models) the merge's numbers.

- Files: config.json, the weights (one safetensors file, or shards that all exist as the index lists
  them), a tokenizer, generation_config.json.
- Chat template: the probe conversations rendered with the exported tokenizer's chat template (what
  vLLM will send to the model) against LLaMA-Factory's template of the run (what training saw,
  computed by core.merge.export_probe in the training environment and cached). A difference is the classic
  "vLLM answers differently from llamafactory chat"; the fix is written next to the report:
  LLaMA-Factory's template as a Jinja file that `devtune serve` passes to vLLM's --chat-template.
- Numbers (models up to NUMERIC_MAX_BYTES of weights): the merged model's logits on a probe prompt
  against base + adapter's, within a tolerance that depends on the saved dtype.

The report is saved as `.devtune/exports/<name>/check.json`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from pydantic import Field

from core.files.atomic import write_atomic
from core.i18n import _, said, said_n
from core.i18n.kept_words import KeptWords
from core.merge.chat_template import (
    TemplateRenderError,
    first_difference,
    read_chat_template,
    render_probes,
    special_tokens,
)
from core.processes.helpers import run_helper
from core.workspace.layout import Workspace

NUMERIC_MAX_BYTES = 2 * 1024**3
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}  # max |Δlogit| / max |logit|
OK, WARN, FAIL = "ok", "warning", "error"


def verdict_label(verdict: str) -> str:
    """A check's verdict (ok / warning / error) in words for people; JSON keeps the value."""
    return {OK: _("ok"), WARN: _("warning"), FAIL: _("error")}.get(verdict, verdict)


class ExportFinding(KeptWords):
    level: str  # ok | warning | error
    what: str
    detail: str = ""
    fix: str = ""


class TemplateCheck(KeptWords):
    template: str | None  # LLaMA-Factory's template of the run
    source: str | None  # the file the exported chat template came from
    match: bool | None  # None: could not be compared
    differences: list[dict] = Field(default_factory=list)  # {probe, index, expected, actual}
    fixed_template: str | None = None  # workspace-relative Jinja file that reproduces training's format
    note: str = ""


class NumericCheck(KeptWords):
    ran: bool
    ok: bool | None = None
    max_abs_diff: float | None = None
    relative: float | None = None
    tolerance: float | None = None
    top1_agree: float | None = None
    stored_dtype: str | None = None
    note: str = ""


class ExportReport(KeptWords):
    export_dir: str
    run_id: str | None = None
    checked: float = Field(default_factory=time.time)
    findings: list[ExportFinding] = Field(default_factory=list)
    template: TemplateCheck | None = None
    numeric: NumericCheck | None = None

    @property
    def verdict(self) -> str:
        levels = {f.level for f in self.findings}
        return FAIL if FAIL in levels else WARN if WARN in levels else OK

    def state_change(self):
        """What a checked export implies for both front-ends: it is the workspace's export, and the Merge step
        is done (or needs attention when the check found a problem)."""
        from core.workspace.changes import StateChange, StepMark
        from core.workspace.step_status import StepStatus

        mark = (StepMark(StepStatus.ATTENTION, said("{dir}: the check found a problem", dir=self.export_dir))
                if self.verdict == FAIL else StepMark(StepStatus.DONE, said("merged into {dir}", dir=self.export_dir)))
        return StateChange(chosen={"export_dir": self.export_dir}, steps={"merge": mark})


def report_dir(ws: Workspace, export_dir: str | Path) -> Path:
    return ws.state_dir / "exports" / Path(export_dir).name


def save_report(ws: Workspace, report: ExportReport) -> Path:
    return write_atomic(report_dir(ws, report.export_dir) / "check.json", report.model_dump_json(indent=2) + "\n")


def load_report(ws: Workspace, export_dir: str | Path) -> ExportReport | None:
    """The saved check, its words said in the reader's language (the check may have run in another: KeptWords)."""
    try:
        return ExportReport.model_validate_json((report_dir(ws, export_dir) / "check.json").read_bytes())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- files

def weight_files(d: Path) -> tuple[list[Path], list[str]]:
    """(weight files present, problems). Shards must all exist as their index lists them."""
    problems: list[str] = []
    indexes = sorted(d.glob("*.safetensors.index.json")) + sorted(d.glob("pytorch_model.bin.index.json"))
    if indexes:
        try:
            weight_map = json.loads(indexes[0].read_text(encoding="utf-8")).get("weight_map", {})
        except (OSError, ValueError) as exc:
            return [], [_("{file} cannot be read: {error}", file=indexes[0].name, error=str(exc))]
        shards = sorted(set(weight_map.values()))
        missing = [s for s in shards if not (d / s).is_file()]
        if missing:
            problems.append(_("{n} shard(s) listed in {index} are missing: {files}", n=len(missing),
                              index=indexes[0].name, files=", ".join(missing[:4])))
        return [d / s for s in shards if (d / s).is_file()], problems
    files = sorted(d.glob("*.safetensors")) or sorted(d.glob("pytorch_model*.bin"))
    return files, problems


def check_files(export_dir: Path) -> list[ExportFinding]:
    d = Path(export_dir)
    if not d.is_dir():
        return [ExportFinding(level=FAIL, what=said("merged folder"), detail=said("{dir} does not exist", dir=str(d)),
                        fix=said("run `devtune merge` first"))]
    out: list[ExportFinding] = []
    out.append(ExportFinding(level=OK, what="config.json") if (d / "config.json").is_file() else
               ExportFinding(level=FAIL, what="config.json", detail=said("missing: no server can load the model"),
                       fix=said("re-run the export")))
    files, problems = weight_files(d)
    if problems:
        out.append(ExportFinding(level=FAIL, what=said("weights"), detail="; ".join(problems), fix=said("re-run the export")))
    elif not files:
        out.append(ExportFinding(level=FAIL, what=said("weights"), detail=said("no *.safetensors or *.bin weights"),
                           fix=said("re-run the export")))
    else:
        size = sum(f.stat().st_size for f in files)
        legacy = any(f.suffix == ".bin" for f in files)
        out.append(ExportFinding(level=WARN if legacy else OK, what=said("weights"),
                           detail=said("{files}{legacy}", legacy=said("; legacy .bin format") if legacy else "",
                                       files=said_n("{n} file, {mb:.1f} MB", "{n} files, {mb:.1f} MB", len(files),
                                                    mb=size / 1e6)),
                           fix=said("export with export_legacy_format: false") if legacy else ""))
    tokenizer = [n for n in ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
                 if (d / n).is_file()]
    out.append(ExportFinding(level=OK, what=said("tokenizer"), detail=", ".join(tokenizer)) if tokenizer else
               ExportFinding(level=FAIL, what=said("tokenizer"), detail=said("no tokenizer files"),
                       fix=said("copy the base model's tokenizer files into the folder, or re-run the export")))
    out.append(ExportFinding(level=OK, what="generation_config.json") if (d / "generation_config.json").is_file() else
               ExportFinding(level=WARN, what="generation_config.json",
                       detail=said("missing: servers fall back to their own sampling defaults and stop tokens"),
                       fix=said("copy generation_config.json from the base model")))
    return out


# ---------------------------------------------------------------- the chat template

def _tokenizer_fingerprint(tokenizer_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model"):
        p = tokenizer_dir / name
        if p.is_file():
            h.update(name.encode() + p.read_bytes())
    return h.hexdigest()[:24]


def _lf_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("llamafactory")
    except metadata.PackageNotFoundError:
        return "?"


def _run_probe(args: list[str], timeout: float = 600) -> dict:
    proc = run_helper([sys.executable, "-m", "core.merge.export_probe", *args], timeout=timeout,
                      cwd=Path(__file__).resolve().parents[2])
    marker = "@@devtune-json@@"
    if proc.returncode != 0 or marker not in proc.stdout:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise RuntimeError(tail or _("exit code {code}", code=proc.returncode))
    return json.loads(proc.stdout.rsplit(marker, 1)[1])


def lf_reference(ws: Workspace, tokenizer_dir: Path, template: str) -> dict:
    """LLaMA-Factory's rendering of the probes, cached by tokenizer files, template and version."""
    from core.merge.chat_template import PROBES

    key = hashlib.sha256(json.dumps([_tokenizer_fingerprint(tokenizer_dir), template, _lf_version(),
                                     PROBES], ensure_ascii=False).encode()).hexdigest()[:32]
    cache = ws.cache_dir / "lf_templates" / f"{key}.json"
    try:
        return json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    result = _run_probe(["lf-render", str(tokenizer_dir), template])
    write_atomic(cache, json.dumps(result, ensure_ascii=False, indent=1))
    return result


def compare_templates(reference: dict, chat_template: str | None, tokens: dict[str, str]) -> list[dict]:
    """Differences between LLaMA-Factory's prompts and the chat template's, one per probe."""
    if chat_template is None:
        return [{"probe": "*", "index": 0, "expected": "", "actual": _("(no chat template)")}]
    try:
        rendered = render_probes(chat_template, tokens)
    except TemplateRenderError as exc:
        return [{"probe": "*", "index": 0, "expected": "", "actual": _("(template error: {error})", error=str(exc))}]
    out = []
    for name, expected in reference["prompts"].items():
        diff = first_difference(name, expected, rendered.get(name, ""))
        if diff:
            out.append(diff.__dict__)
    return out


def check_template(ws: Workspace, export_dir: Path, template: str | None, tokenizer_dir: Path | None = None
                   ) -> tuple[TemplateCheck, ExportFinding]:
    source = read_chat_template(export_dir)
    if not template:
        note = said("the run names no LLaMA-Factory template, so it trained with the tokenizer's own chat template")
        return (TemplateCheck(template=None, source=source.file, match=None, note=note),
                ExportFinding(level=OK if source.text else WARN, what=said("chat template"), detail=note,
                        fix="" if source.text else said("pass --chat-template when serving")))
    try:
        reference = lf_reference(ws, Path(tokenizer_dir or export_dir), template)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        note = said("LLaMA-Factory's template {name} could not be rendered: {error}", name=template, error=str(exc))
        return (TemplateCheck(template=template, source=source.file, match=None, note=note),
                ExportFinding(level=WARN, what=said("chat template"), detail=note))
    tokens = special_tokens(export_dir)
    differences = compare_templates(reference, source.text, tokens)
    check = TemplateCheck(template=template, source=source.file, match=not differences, differences=differences)
    if not differences:
        return check, ExportFinding(level=OK, what=said("chat template"),
                              detail=said("{file} renders exactly what training saw with template {name}",
                                       file=source.file, name=template))
    fixed = _write_fixed_template(ws, export_dir, reference, tokens)
    check.fixed_template = fixed
    first = differences[0]
    detail = said("the exported chat template ({file}) differs from LLaMA-Factory's template {name} at character "
               "{index} of probe {probe}: training saw {expected!r}, a server would send {actual!r}",
               file=source.file or "-", name=template, index=first["index"], probe=first["probe"],
               expected=first["expected"], actual=first["actual"])
    if fixed:
        fix = said("devtune serve passes --chat-template {file} (LLaMA-Factory's {name} template as Jinja) to vLLM; "
                "by hand: {python} -m vllm.entrypoints.openai.api_server --model {model} --chat-template {file}. "
                "Or re-export with the template the tokenizer was made for", file=fixed, name=template,
                model=ws.rel(export_dir), python=_serve_python())
    else:
        fix = said("serve with `devtune serve --backend llamafactory` (it formats prompts with template {name}), "
                "or retrain with the template that matches the tokenizer's chat template", name=template)
    check.note = fix
    return check, ExportFinding(level=FAIL, what=said("chat template"), detail=detail, fix=fix)


def _serve_python() -> str:
    """The serving environment's python by its path: `vllm` itself is not on the person's PATH."""
    from core.serve.backends import serve_python_candidates

    return str(serve_python_candidates()[0])


def _write_fixed_template(ws: Workspace, export_dir: Path, reference: dict, tokens: dict[str, str]) -> str | None:
    """LLaMA-Factory's template as Jinja, kept only when it renders the probes exactly as training did."""
    jinja = reference.get("jinja")
    if not jinja:
        return None
    tokens = {**tokens, "bos_token": reference.get("bos_token") or tokens.get("bos_token", ""),
              "eos_token": reference.get("eos_token") or tokens.get("eos_token", "")}
    if compare_templates(reference, jinja, tokens):
        return None
    path = report_dir(ws, export_dir) / "chat_template.jinja"
    write_atomic(path, jinja)
    return ws.rel(path)


# ---------------------------------------------------------------- the numbers

def weights_bytes(d: Path) -> int:
    files, _problems = weight_files(d)
    return sum(f.stat().st_size for f in files)


def check_numerics(ws: Workspace, base: str, adapter: str | None, merged: Path,
                   max_bytes: int = NUMERIC_MAX_BYTES) -> NumericCheck:
    if not adapter:
        return NumericCheck(ran=False, note=said("no adapter was merged (full or freeze fine-tuning)"))
    size = weights_bytes(merged)
    if size > max_bytes:
        return NumericCheck(ran=False, note=said("skipped: {gb:.1f} GB of weights; the numeric check runs on models "
                                              "up to {limit:.1f} GB", gb=size / 1e9, limit=max_bytes / 1e9))
    try:
        result = _run_probe(["logits", str(ws.abs(base)) if ws.abs(base).exists() else base,
                             str(ws.abs(adapter)), str(merged)])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return NumericCheck(ran=False, note=said("the numeric check could not run: {error}", error=str(exc)))
    dtype = result.get("stored_dtype") or "float32"
    tolerance = TOLERANCE.get(dtype, TOLERANCE["bfloat16"])
    relative = result["max_abs_diff"] / max(1.0, result["max_abs_logit"])
    return NumericCheck(ran=True, ok=relative <= tolerance, max_abs_diff=result["max_abs_diff"], relative=relative,
                        tolerance=tolerance, top1_agree=result["top1_agree"], stored_dtype=dtype)


def numeric_finding(check: NumericCheck) -> ExportFinding:
    if not check.ran:
        return ExportFinding(level=OK, what=said("merge numbers"), detail=check.note)
    detail = said("max |Δlogit| {diff:.2e} ({rel:.1e} of the largest logit; tolerance {tol:.0e} for {dtype}); "
               "same top token at {agree:.0%} of positions", diff=check.max_abs_diff, rel=check.relative,
               tol=check.tolerance, dtype=check.stored_dtype, agree=check.top1_agree)
    if check.ok:
        return ExportFinding(level=OK, what=said("merge numbers"), detail=detail)
    return ExportFinding(level=FAIL, what=said("merge numbers"), detail=detail,
                   fix=said("the merged model does not compute what base + adapter compute: check that the base model "
                         "is the one the adapter was trained on, and re-export"))


# ---------------------------------------------------------------- all of it

def check_export(ws: Workspace, export_dir: str | Path, *, template: str | None, base_model: str | None = None,
                 adapter: str | None = None, run_id: str | None = None, numeric: bool = True,
                 progress: Callable[[str], None] | None = None) -> ExportReport:
    say = progress or (lambda _m: None)
    d = ws.abs(export_dir)
    report = ExportReport(export_dir=ws.rel(d), run_id=run_id)
    say(_("checking the files"))
    report.findings = check_files(d)
    if any(f.level == FAIL for f in report.findings):
        save_report(ws, report)
        return report
    say(_("comparing the chat template with LLaMA-Factory's {name}", name=template or "-"))
    base_dir = ws.abs(base_model) if base_model else None
    tokenizer_dir = base_dir if base_dir is not None and (base_dir / "tokenizer_config.json").is_file() else d
    report.template, finding = check_template(ws, d, template, tokenizer_dir)
    report.findings.append(finding)
    if numeric and base_model:
        say(_("comparing the merged model's logits with base + adapter"))
        report.numeric = check_numerics(ws, base_model, adapter, d)
        report.findings.append(numeric_finding(report.numeric))
    save_report(ws, report)
    return report


def model_folder_problem(ws: Workspace, export_dir: str | Path) -> str | None:
    """Why `export_dir` cannot be checked as a merged model at all (None: it is a model folder). The folder
    is looked at before any run: a missing folder is not the newest run's fault."""
    path = ws.abs(export_dir)
    shown = ws.rel(path)
    if not path.exists():
        return _("{dir} does not exist; `devtune merge` writes a merged model into exports/<name>", dir=shown)
    if not path.is_dir():
        return _("{dir} is a file, not a model folder", dir=shown)
    if not (path / "config.json").is_file():
        return _("{dir} is not a model folder: it has no config.json (a merged model has config.json, its "
                 "weights and a tokenizer)", dir=shown)
    return None


def check_for_run(ws: Workspace, export_dir: str | Path, run_id: str | None = None, *, numeric: bool = True,
                  progress: Callable[[str], None] | None = None) -> ExportReport:
    """Check an export against the run it came from: `run_id` when given, else the plan recorded when the
    export started (core.merge.export.load_export_record), else the run its last check named, else the run
    named like the folder, else the newest training run. Raises ExportError when the folder is no model
    folder (unreadable input, whatever the run)."""
    from core.merge.export import ExportError, load_export_record, plan_export
    from core.train.runs import list_runs

    problem = model_folder_problem(ws, export_dir)
    if problem:
        raise ExportError(problem)

    recorded = load_export_record(ws, export_dir) if run_id is None else None
    if recorded is not None:
        return check_export(ws, export_dir, template=recorded.template, base_model=recorded.base_model,
                            adapter=recorded.adapter, run_id=recorded.run_id or None, numeric=numeric,
                            progress=progress)
    if run_id is None:
        previous = load_report(ws, export_dir)
        known = {r.id for r in list_runs(ws) if r.kind == "train"}
        if previous and previous.run_id in known:
            run_id = previous.run_id
        elif Path(export_dir).name in known:
            run_id = Path(export_dir).name
    plan = plan_export(ws, run_id, name=Path(export_dir).name)
    return check_export(ws, export_dir, template=plan.template, base_model=plan.base_model, adapter=plan.adapter,
                        run_id=plan.run_id, numeric=numeric, progress=progress)
