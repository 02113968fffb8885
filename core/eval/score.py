"""Every answer of an evaluation scored against its reference (core.serve.similarity's measures: chrF, BLEU,
ROUGE-L, exact match), and the means per set and side that the report shows.

A reference is read once for both of its answers (base and tuned). An answer that failed (no reply) scores 0
and counts as an error; the judge's mean is over the rows it graded.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.eval.eval_report import SETS, EvalRow, SetSummary, SideAnswer, SideMetrics
from core.serve.similarity import measures


def score_side(side: SideAnswer, reference: str) -> None:
    if side.error is not None:
        side.chrf = side.bleu = side.rouge_l = 0.0
        side.exact = False
        return
    s = measures().score(side.answer, reference)
    side.chrf, side.bleu, side.rouge_l, side.exact = s.chrf, s.bleu, s.rouge_l, s.exact


def score_rows(rows: Iterable[EvalRow]) -> None:
    for row in rows:
        score_side(row.base, row.reference)
        score_side(row.tuned, row.reference)


def side_metrics(answers: list[SideAnswer]) -> SideMetrics:
    n = len(answers)
    if not n:
        return SideMetrics()
    judged = [a.judge for a in answers if a.judge is not None]
    return SideMetrics(chrf=round(sum(a.chrf for a in answers) / n, 4), bleu=round(sum(a.bleu for a in answers) / n, 4),
                       rouge_l=round(sum(a.rouge_l for a in answers) / n, 4),
                       exact=round(sum(a.exact for a in answers) / n, 4),
                       judge=round(sum(judged) / len(judged), 3) if judged else None, judged=len(judged),
                       errors=sum(a.error is not None for a in answers))


def summarize(rows: list[EvalRow]) -> dict[str, SetSummary]:
    out = {}
    for name in SETS:
        mine = [r for r in rows if r.set == name]
        out[name] = SetSummary(rows=len(mine), base=side_metrics([r.base for r in mine]),
                               tuned=side_metrics([r.tuned for r in mine]), worse=sum(r.worse for r in mine))
    return out
