"""The closed-loop check: does the served model answer what it was taught?

Questions come from the run's own dataset (its train YAML's `dataset` and `dataset_dir`), read by
core.eval.questions as LLaMA-Factory reads the rows (the reader `devtune eval` uses too), `n` of them spread
evenly over the data. The run's `eval_dataset`, when it has one, is the held-out split: asked and scored
too, but not part of the verdict (a model is not expected to recite answers it never saw).

Each answer is asked greedily (temperature 0) and scored with chrF against the expected output
(core.serve.similarity; docs/verify.md explains the measure and the thresholds, measured on the tiny
model trained vs. untrained).
"""

from __future__ import annotations

from typing import Callable

from pydantic import BaseModel, Field

from core.errors import BadInput
from core.eval.questions import Question, QuestionsError, dataset_questions, pick
from core.i18n import _, _n
from core.serve.similarity import similarity
from core.workspace.layout import Workspace

PASS_SCORE = 0.5  # an answer counts as "taught" at chrF >= 0.5
VERDICT_SCORE = 0.6  # and the model passes when its mean chrF over training questions reaches 0.6
DEFAULT_N = 20
HELD_OUT = "held-out"  # the split of the eval_dataset's questions


class VerifyError(BadInput):
    """The run's questions cannot be read; the message says what to do (exit 2)."""


class QuestionResult(BaseModel):
    split: str
    source: str
    question: str
    expected: str
    answer: str
    score: float  # chrF, 0..1
    rouge_l: float
    passed: bool
    ttft_s: float | None = None
    tokens: int = 0
    error: str | None = None


class VerifyReport(BaseModel):
    server: str
    model: str
    metric: str = "chrF (character 1-6-grams, beta 2)"
    pass_score: float = PASS_SCORE
    verdict_score: float = VERDICT_SCORE
    results: list[QuestionResult] = Field(default_factory=list)
    score: float = 0.0  # mean chrF over the training questions
    passed_count: int = 0
    held_out_score: float | None = None
    verdict: bool = False
    summary: str = ""


def run_questions(ws: Workspace, run_ref: str | None = None, *, n: int = DEFAULT_N) -> list[Question]:
    """`n` training questions of the run (+ up to `n` held-out ones from its eval_dataset)."""
    from core.train.run_facts import find_train_run, read_train_facts

    run = find_train_run(ws, run_ref)
    facts = read_train_facts(ws, run)
    if not facts.dataset:
        raise VerifyError(_("the run's train YAML names no dataset"))
    dataset_dir = ws.abs(facts.dataset_dir)
    try:
        train = pick(dataset_questions(dataset_dir, facts.dataset, "train"), n)
        held = pick(dataset_questions(dataset_dir, facts.eval_dataset, HELD_OUT), n) if facts.eval_dataset else []
    except QuestionsError as exc:
        raise VerifyError(str(exc)) from exc
    if not train:
        raise VerifyError(_("no usable question/answer pairs in dataset {names}", names=", ".join(facts.dataset)))
    return train + held


# ---------------------------------------------------------------- asking and scoring

def run_of_server(ws: Workspace, record) -> str | None:
    """The training run behind a served export (from its check report; a GGUF's is its merged folder's), when
    devtune merged it."""
    from core.merge.export_check import load_report
    from core.serve.backend_llamacpp import source_model

    report = load_report(ws, source_model(ws.abs(record.model)))
    return report.run_id if report else None


def _max_tokens(expected: str) -> int:
    return max(64, min(1024, 2 * len(expected) + 32))


def ask(endpoint, question: Question, *, client=None, timeout: float = 300.0) -> QuestionResult:
    from core.serve.chat import ChatError, ChatParams, build_messages, complete

    params = ChatParams(system=question.system, temperature=0.0, top_p=1.0, max_tokens=_max_tokens(question.expected))
    messages = build_messages(question.prompt, system=question.system, history=question.history)
    try:
        done = complete(endpoint, messages, params, client=client, timeout=timeout)
    except ChatError as exc:
        return QuestionResult(split=question.split, source=question.source, question=question.prompt,
                              expected=question.expected, answer="", score=0.0, rouge_l=0.0, passed=False,
                              error=str(exc))
    sim = similarity(done.text, question.expected)
    return QuestionResult(split=question.split, source=question.source, question=question.prompt,
                          expected=question.expected, answer=done.text, score=round(sim.chrf, 4),
                          rouge_l=round(sim.rouge_l, 4), passed=sim.chrf >= PASS_SCORE,
                          ttft_s=done.stats.ttft_s, tokens=done.stats.tokens)


def summarize(report: VerifyReport) -> VerifyReport:
    train = [r for r in report.results if r.split == "train"]
    held = [r for r in report.results if r.split != "train"]
    report.score = round(sum(r.score for r in train) / len(train), 4) if train else 0.0
    report.passed_count = sum(r.passed for r in train)
    report.held_out_score = round(sum(r.score for r in held) / len(held), 4) if held else None
    errors = sum(1 for r in report.results if r.error)
    report.verdict = bool(train) and report.score >= VERDICT_SCORE and errors == 0
    if errors:
        report.summary = _n("{n} of {total} questions failed to get an answer; see its error",
                            "{n} of {total} questions failed to get an answer; see their errors",
                            errors, total=len(report.results))
    elif report.verdict:
        report.summary = _("yes: the model answers what it was taught (mean chrF {score:.2f} >= {need:.2f}; "
                           "{passed}/{total} answers at >= {pass_score:.2f})", score=report.score, need=VERDICT_SCORE,
                           passed=report.passed_count, total=len(train), pass_score=PASS_SCORE)
    else:
        report.summary = _("no: the answers are far from the training data (mean chrF {score:.2f} < {need:.2f}; "
                           "{passed}/{total} answers at >= {pass_score:.2f}). Check that the server serves the "
                           "merged model, that the chat template matches training (`devtune merge` checks it), "
                           "and that the loss went down", score=report.score, need=VERDICT_SCORE,
                           passed=report.passed_count, total=len(train), pass_score=PASS_SCORE)
    return report


def verify(endpoint, questions: list[Question], *, server_id: str = "",
           on_result: Callable[[QuestionResult], None] | None = None, cancelled: Callable[[], bool] | None = None
           ) -> VerifyReport:
    import httpx

    report = VerifyReport(server=server_id or endpoint.label, model=endpoint.model)
    with httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        for question in questions:
            if cancelled and cancelled():
                break
            result = ask(endpoint, question, client=client)
            report.results.append(result)
            if on_result:
                on_result(result)
    return summarize(report)
