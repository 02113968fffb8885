"""The result of one `devtune eval`: the one object that the CLI's text and `--json`, the Markdown report and the
wizard's Eval tab all render, and its files in `.devtune/evals/<id>/` (report.json, rows.jsonl, report.md).

Per set (heldout, train): the rows asked and, for base and tuned, the mean chrF, BLEU and ROUGE-L (0..1), the share
of exact matches, the judge's mean score (1..5) when a judge was asked, and how many rows the tuned model did worse
on than its base. Per row: the question, the reference, both answers with their scores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from core.files.atomic import write_atomic
from core.i18n import _, _n
from core.workspace.layout import Workspace

METRICS = ("chrf", "bleu", "rouge_l", "exact", "judge")
METRIC_NAMES = {"chrf": "chrF", "bleu": "BLEU", "rouge_l": "ROUGE-L", "exact": "exact", "judge": "judge 1-5"}


def metric_label(metric: str) -> str:
    """A metric's name for people: the scores' own names (chrF, BLEU, ROUGE-L) stay; the others are words."""
    return {"exact": _("exact"), "judge": _("judge 1-5")}.get(metric) or METRIC_NAMES[metric]
SETS = ("heldout", "train")
WORSE_BY = 0.05  # the band: a tuned chrF this much below the base's is worse (a row, or the verdict's mean); as
# much above it is better; in between, the same
WORSE, SAME, BETTER, NOT_MEASURED = "worse", "same", "better", "not measured"


def set_label(name: str) -> str:
    return {"heldout": _("held-out"), "train": _("training")}.get(name, name)


class SideAnswer(BaseModel):
    answer: str = ""
    error: str | None = None
    chrf: float = 0.0
    bleu: float = 0.0
    rouge_l: float = 0.0
    exact: bool = False
    judge: int | None = None
    judge_reason: str | None = None
    judge_error: str | None = None


class EvalRow(BaseModel):
    set: str  # heldout | train
    source: str  # dataset name and row number
    question: str
    reference: str
    base: SideAnswer = Field(default_factory=SideAnswer)
    tuned: SideAnswer = Field(default_factory=SideAnswer)

    @property
    def worse(self) -> bool:
        """The tuned model answered this worse than its base: by the judge when it graded both, else by chrF."""
        if self.base.judge is not None and self.tuned.judge is not None:
            return self.tuned.judge < self.base.judge
        return self.tuned.chrf < self.base.chrf - WORSE_BY


class SideMetrics(BaseModel):
    chrf: float = 0.0
    bleu: float = 0.0
    rouge_l: float = 0.0
    exact: float = 0.0  # share of rows
    judge: float | None = None  # mean of the judged rows
    judged: int = 0
    errors: int = 0

    def value(self, metric: str) -> float | None:
        return getattr(self, metric)


class SetSummary(BaseModel):
    rows: int = 0
    base: SideMetrics = Field(default_factory=SideMetrics)
    tuned: SideMetrics = Field(default_factory=SideMetrics)
    worse: int = 0  # rows where the tuned model did worse than its base


class EvalVerdict(BaseModel):
    """Is the tuned model worse than its base? Decided on the held-out questions when any was asked, else on
    the training ones (`set` says which), by the mean chrF with a band of WORSE_BY: worse, the same, better,
    or not measured (no question of that set asked, or every answer of a side failed)."""

    outcome: str  # worse | same | better | not measured
    set: str | None = None  # heldout | train: the questions it was decided on
    rows: int = 0
    base: float | None = None  # mean chrF
    tuned: float | None = None
    band: float = WORSE_BY
    errors: int = 0  # failed answers, in either set (a failed answer scores 0)
    ok: bool = False  # measured, not worse and every answer came back: exit 0, the step done
    line: str = ""  # the sentence the CLI, the report and the Eval tab show
    mark: str = ""  # the short form, beside the step in the stepper

    def to_json(self) -> dict:
        return self.model_dump(mode="json")


def decided_on(sets: dict[str, SetSummary]) -> str:
    """The set the verdict is decided on: the held-out questions when any was asked, else the training ones."""
    held = sets.get("heldout")
    return "heldout" if held is not None and held.rows else "train"


def eval_verdict(sets: dict[str, SetSummary]) -> EvalVerdict:
    name = decided_on(sets)
    summary = sets.get(name) or SetSummary()
    where = set_label(name)
    errors = sum(s.base.errors + s.tuned.errors for s in sets.values())
    if not summary.rows:
        return EvalVerdict(outcome=NOT_MEASURED, line=_("no question was answered"),
                           mark=_("eval: no question was answered"))
    if summary.base.errors == summary.rows or summary.tuned.errors == summary.rows:
        line = _("not measured: every answer of one model failed on the {where} questions; their errors are in "
                 "rows.jsonl", where=where)
        return EvalVerdict(outcome=NOT_MEASURED, set=name, rows=summary.rows, errors=errors, line=line,
                           mark=_("eval: not measured ({where})", where=where))
    base, tuned = summary.base.chrf, summary.tuned.chrf
    gain = round(tuned - base, 4)
    outcome = BETTER if gain > WORSE_BY else WORSE if gain < -WORSE_BY else SAME
    text = {BETTER: _("the tuned model beats its base on the {where} questions (chrF {base:.2f} → {tuned:.2f})",
                      where=where, base=base, tuned=tuned),
            WORSE: _("the tuned model is worse than its base on the {where} questions (chrF {base:.2f} → "
                     "{tuned:.2f}); docs/verify.md says what to change", where=where, base=base, tuned=tuned),
            SAME: _("the tuned model scores like its base on the {where} questions (chrF {base:.2f} → {tuned:.2f})",
                    where=where, base=base, tuned=tuned)}[outcome]
    label = {BETTER: _("better"), WORSE: _("worse"), SAME: _("same")}[outcome]
    mark = _("eval: {where} chrF {base:.2f} → {tuned:.2f}, {outcome}", where=where, base=base, tuned=tuned,
             outcome=label)
    if errors:
        mark += " · " + _n("{n} answer failed", "{n} answers failed", errors)
    return EvalVerdict(outcome=outcome, set=name, rows=summary.rows, base=base, tuned=tuned, errors=errors,
                       ok=outcome != WORSE and not errors, line=text, mark=mark)


class TargetInfo(BaseModel):
    url: str
    model: str
    server: str | None = None


class HarnessTask(BaseModel):
    task: str
    metric: str
    base: float | None = None
    tuned: float | None = None

    @property
    def delta(self) -> float | None:
        return None if self.base is None or self.tuned is None else self.tuned - self.base


class EvalReport(BaseModel):
    id: str
    created: float = Field(default_factory=time.time)
    dataset: str
    heldout: str | None = None  # the held-out set's registered name
    note: str = ""  # said when there is no held-out set
    base: TargetInfo
    tuned: TargetInfo
    judge: TargetInfo | None = None
    run: str | None = None
    train_total: int = 0  # training rows the sample was drawn from
    seed: int = 0
    sets: dict[str, SetSummary] = Field(default_factory=dict)
    lm_eval: list[HarnessTask] = Field(default_factory=list)
    lm_eval_error: str | None = None
    errors: int = 0  # answers that failed (no reply)
    stopped: str = ""  # why it ended early: cancelled | error ('' when every question was asked)
    folder: str = ""  # .devtune/evals/<id>, workspace-relative

    def to_json(self) -> dict:
        return self.model_dump(mode="json")

    def state_change(self):
        """What an eval implies for both front-ends: the base model's server it compared against, when that was
        a server of its own, is the one a plain `devtune eval` (and the next F6) compares against again."""
        from core.workspace.changes import StateChange

        if self.base.server and self.base.server != self.tuned.server:
            return StateChange(chosen={"eval_base_server": self.base.server})
        return StateChange()

    def metric_names(self) -> list[str]:
        return [m for m in METRICS if m != "judge" or self.judge is not None]

    def header(self) -> list[str]:
        return [_("set"), _("model")] + [metric_label(m) for m in self.metric_names()]

    def table(self) -> list[list[str]]:
        """Per set, a row for base, one for tuned and one for the difference, a column per metric: the CLI's
        table, the Markdown report's and the wizard's."""
        out = []
        metrics = self.metric_names()
        for name in SETS:
            summary = self.sets.get(name)
            label = f"{set_label(name)} ({summary.rows if summary else 0})"
            if summary is None or not summary.rows:
                out.append([label, "-"] + ["-"] * len(metrics))
                continue
            base = [summary.base.value(m) for m in metrics]
            tuned = [summary.tuned.value(m) for m in metrics]
            out.append([label, _("base")] + [_fmt(v) for v in base])
            out.append(["", _("tuned")] + [_fmt(v) for v in tuned])
            out.append(["", "Δ"] + ["-" if b is None or t is None else f"{t - b:+.2f}" for b, t in zip(base, tuned)])
        return out

    @computed_field
    @property
    def verdict(self) -> EvalVerdict:
        """Is the tuned model worse than its base? core.eval's one answer: the CLI's exit code and `--json`,
        the Markdown report and the Playground's line and mark all render it."""
        return eval_verdict(self.sets)

    def lines(self) -> list[str]:
        out = [_("eval {id} · dataset {dataset}", id=self.id, dataset=self.dataset),
               _("base:  {model} at {url}", model=self.base.model, url=self.base.url),
               _("tuned: {model} at {url}", model=self.tuned.model, url=self.tuned.url)]
        if self.judge:
            out.append(_("judge: {model} at {url}", model=self.judge.model, url=self.judge.url))
        if self.note:
            out.append(self.note)
        out += [""] + _text_table([self.header()] + self.table()) + ["", self.verdict.line]
        worse = sum(s.worse for s in self.sets.values())
        if worse:
            out.append(_n("{n} row where the tuned model did worse than its base: see {file}",
                          "{n} rows where the tuned model did worse than its base: see {file}", worse,
                          file=f"{self.folder}/report.md"))
        if self.lm_eval or self.lm_eval_error:
            out += [""] + self.harness_lines()
        if self.errors:
            out.append(_n("{n} answer failed; its error is in {file}", "{n} answers failed; their errors are in {file}",
                          self.errors, file=f"{self.folder}/rows.jsonl"))
        return out

    def harness_lines(self) -> list[str]:
        if self.lm_eval_error:
            return [_("lm-eval: {error}", error=self.lm_eval_error)]
        rows = [[_("task"), _("metric"), _("base"), _("tuned"), "Δ"]]
        rows += [[t.task, t.metric, _fmt(t.base), _fmt(t.tuned), "-" if t.delta is None else f"{t.delta:+.3f}"]
                 for t in self.lm_eval]
        return [_("lm-evaluation-harness:")] + _text_table(rows)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _text_table(rows: list[list[str]]) -> list[str]:
    """Columns aligned in display cells (a Chinese label takes two per character)."""
    from core.i18n import display_width, pad_cells

    widths = [max(display_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(pad_cells(cell, w, right=i > 0) for i, (cell, w) in enumerate(zip(r, widths))) for r in rows]


def worse_rows(rows: list[EvalRow]) -> list[EvalRow]:
    """The rows where the tuned model did worse than its base, the biggest loss first."""
    return sorted((r for r in rows if r.worse), key=lambda r: r.tuned.chrf - r.base.chrf)


def markdown(report: EvalReport, rows: list[EvalRow]) -> str:
    """report.md: the table, the verdict, the lm-eval tasks and every row the tuned model did worse on."""
    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    out = [f"# devtune eval {report.id}", "", "- " + (_("dataset: `{name}` (held-out: `{heldout}`)", name=report.dataset,
                                                        heldout=report.heldout) if report.heldout
                                                      else _("dataset: `{name}`", name=report.dataset)),
           "- " + _("base: `{model}` at {url}", model=report.base.model, url=report.base.url),
           "- " + _("tuned: `{model}` at {url}", model=report.tuned.model, url=report.tuned.url)]
    if report.judge:
        out.append("- " + _("judge: `{model}` at {url}", model=report.judge.model, url=report.judge.url))
    if report.note:
        out += ["", f"> {report.note}"]
    header = report.header()
    out += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in report.table()]
    out += ["", report.verdict.line]
    if report.lm_eval or report.lm_eval_error:
        out += ["", "## lm-evaluation-harness", ""] + ["    " + line for line in report.harness_lines()]
    worse = worse_rows(rows)
    out += ["", f"## {_('Rows where the tuned model did worse than its base')} ({len(worse)})"]
    for r in worse:
        out += ["", f"### {set_label(r.set)} · {r.source}", "", f"**{_('question')}:** {cell(r.question)}", "",
                f"**{_('reference')}:** {cell(r.reference)}", "",
                f"**{_('base')}** (chrF {r.base.chrf:.2f}): {cell(r.base.error or r.base.answer)}", "",
                f"**{_('tuned')}** (chrF {r.tuned.chrf:.2f}): {cell(r.tuned.error or r.tuned.answer)}"]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class EvalResult:
    """One evaluation: the report (sets, verdict, targets) and its rows (each question's answers and scores),
    as `run_eval` returns it and `load_eval` / `saved_eval` read it back."""

    report: EvalReport
    rows: list[EvalRow]


# ---------------------------------------------------------------- files

def evals_dir(ws: Workspace) -> Path:
    return ws.state_dir / "evals"


def new_eval_id(ws: Workspace) -> str:
    base = time.strftime("%Y%m%d-%H%M%S")
    eval_id, n = base, 1
    while (evals_dir(ws) / eval_id).exists():
        n += 1
        eval_id = f"{base}-{n}"
    return eval_id


def save_eval(ws: Workspace, report: EvalReport, rows: list[EvalRow]) -> Path:
    import orjson

    folder = evals_dir(ws) / report.id
    report.folder = ws.rel(folder)
    write_atomic(folder / "rows.jsonl", b"".join(orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in rows))
    write_atomic(folder / "report.json", report.model_dump_json(indent=2) + "\n")
    write_atomic(folder / "report.md", markdown(report, rows))
    return folder


def load_eval(ws: Workspace, eval_id: str) -> EvalResult:
    import orjson

    folder = evals_dir(ws) / eval_id
    report = EvalReport.model_validate_json((folder / "report.json").read_bytes())
    rows = [EvalRow.model_validate(orjson.loads(line)) for line in (folder / "rows.jsonl").read_bytes().splitlines()
            if line.strip()]
    return EvalResult(report=report, rows=rows)


def saved_eval(ws: Workspace, eval_id: str | None = None) -> EvalResult:
    """A saved evaluation (the latest when `eval_id` is None); EvalInputError says why it cannot be read."""
    from core.eval.questions import EvalInputError

    ids = saved_ids(ws)
    if not ids:
        raise EvalInputError(_("no evaluation is saved in {folder}; run `devtune eval` first",
                               folder=ws.rel(evals_dir(ws))))
    eval_id = eval_id or ids[-1]
    if eval_id not in ids:
        raise EvalInputError(_("no evaluation {id} in {folder} (the latest: {ids})", id=eval_id,
                               folder=ws.rel(evals_dir(ws)), ids=", ".join(ids[-5:])))
    folder = evals_dir(ws) / eval_id
    try:
        return load_eval(ws, eval_id)
    except (OSError, ValueError) as exc:
        raise EvalInputError(_("{folder} cannot be read ({error}); run `devtune eval` again",
                               folder=ws.rel(folder), error=str(exc).splitlines()[0])) from exc


def saved_ids(ws: Workspace) -> list[str]:
    folder = evals_dir(ws)
    return sorted(p.name for p in folder.iterdir() if (p / "report.json").is_file()) if folder.is_dir() else []


def latest_eval(ws: Workspace) -> str | None:
    found = saved_ids(ws)
    return found[-1] if found else None
