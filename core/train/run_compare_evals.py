"""The evaluations behind a comparison of runs (core.train.run_compare): each run's latest `devtune eval` (the report
whose `run` is that run, in `.devtune/evals/<id>/`), its scores, how they differ between the runs, and the rows
where the tuned models of two or more runs answered differently."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.eval.eval_report import METRICS, EvalReport, EvalRow, evals_dir, load_eval, saved_ids
from core.workspace.layout import Workspace

DISAGREE_BY = 0.05  # two tuned answers that differ in text and whose chrF is this far apart disagree (the eval's band)


@dataclass
class RunEval:
    """A run's latest evaluation: its verdict and the tuned model's scores on the set the verdict is decided on."""

    id: str
    set: str | None  # heldout | train
    outcome: str  # core.eval's verdict: better | same | worse | not measured
    base_chrf: float | None
    scores: dict[str, float | None]  # METRICS -> the tuned model's mean (judge: None when no judge was asked)
    rows: list[EvalRow] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {"id": self.id, "set": self.set, "outcome": self.outcome, "base_chrf": self.base_chrf,
                "scores": self.scores}


def latest_evals(ws: Workspace, run_ids: list[str]) -> dict[str, str]:
    """run id -> the id of its latest saved evaluation (reports only are read)."""
    import orjson

    wanted, found = set(run_ids), {}
    for eval_id in saved_ids(ws):  # oldest first: a later one replaces an earlier one
        try:
            run = orjson.loads((evals_dir(ws) / eval_id / "report.json").read_bytes()).get("run")
        except (OSError, ValueError):
            continue
        if run in wanted:
            found[run] = eval_id
    return found


def run_eval_of(ws: Workspace, eval_id: str, *, with_rows: bool) -> RunEval | None:
    try:
        result = load_eval(ws, eval_id)
    except (OSError, ValueError):
        return None
    report: EvalReport = result.report
    verdict = report.verdict
    summary = report.sets.get(verdict.set or "")
    scores = {m: (summary.tuned.value(m) if summary is not None and summary.rows else None) for m in METRICS}
    return RunEval(eval_id, verdict.set, verdict.outcome, verdict.base, scores,
                   result.rows if with_rows else [])


def score_diff(evals: dict[str, RunEval]) -> list[dict]:
    """Per metric, each run's tuned score and the spread between the best and the worst (metrics no run has are
    left out)."""
    out = []
    for metric in METRICS:
        values = {run: e.scores.get(metric) for run, e in evals.items()}
        known = [v for v in values.values() if v is not None]
        if not known:
            continue
        out.append({"metric": metric, "values": values, "spread": round(max(known) - min(known), 4)})
    return out


def disagreements(evals: dict[str, RunEval]) -> list[dict]:
    """The rows asked in two or more runs' evaluations (the same set and source) where their tuned models'
    answers differ in text and their chrF is DISAGREE_BY or more apart, the widest spread first."""
    by_row: dict[tuple[str, str], dict[str, EvalRow]] = {}
    for run, e in evals.items():
        for row in e.rows:
            by_row.setdefault((row.set, row.source), {})[run] = row
    out = []
    for (set_name, source), rows in by_row.items():
        if len(rows) < 2:
            continue
        texts = {" ".join((r.tuned.error or r.tuned.answer).split()) for r in rows.values()}
        chrfs = [r.tuned.chrf for r in rows.values()]
        spread = max(chrfs) - min(chrfs)
        if len(texts) < 2 or spread < DISAGREE_BY:
            continue
        first = next(iter(rows.values()))
        out.append({"set": set_name, "source": source, "question": first.question, "reference": first.reference,
                    "spread": round(spread, 4),
                    "answers": {run: {"answer": r.tuned.answer, "error": r.tuned.error, "chrf": round(r.tuned.chrf, 4)}
                                for run, r in rows.items()}})
    return sorted(out, key=lambda d: -d["spread"])
