"""One whole `devtune eval`: the questions asked to base and tuned (and the judge), every answer scored, the
lm-eval tasks run, the report built and saved in `.devtune/evals/<id>/`. The CLI and the wizard's Eval tab both
call `run_eval`, which returns an `EvalResult` (report, rows); progress is an `EvalProgress` through a plain
callback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.eval.ask import Judge, ask_rows
from core.eval.eval_report import EvalReport, EvalResult, TargetInfo, evals_dir, new_eval_id, save_eval
from core.eval.harness import HarnessError, HarnessOptions, compare_harness, lora_refusal
from core.eval.questions import DEFAULT_TRAIN_SAMPLE, EvalInputError, eval_questions, heldout_note
from core.eval.score import score_rows, summarize
from core.eval.targets import EvalTargets
from core.i18n import _
from core.notify.run_events import notify_eval
from core.serve.client import ClientError, ClientOptions, RequestClient
from core.workspace.layout import Workspace


@dataclass
class EvalOptions:
    train_sample: int = DEFAULT_TRAIN_SAMPLE
    seed: int = 0
    concurrency: int = 8
    retries: int = 3
    timeout_s: float = 300.0
    dataset_dir: str | None = None
    judge: Judge | None = None
    harness: HarnessOptions | None = None


@dataclass
class EvalProgress:
    total: int  # answers to get (two per question)
    done: int = 0
    errors: int = 0
    judged: int = 0
    phase: str = "ask"  # ask | lm-eval | done
    message: str = ""
    elapsed_s: float = 0.0

    def line(self) -> str:
        if self.phase == "lm-eval":
            return self.message
        return _("answers {done}/{total} · errors {errors} · judged {judged} · {s:.0f} s", done=self.done,
                 total=self.total, errors=self.errors, judged=self.judged, s=self.elapsed_s)


def run_eval(ws: Workspace, targets: EvalTargets, dataset: str, options: EvalOptions | None = None, *,
             progress: Callable[[EvalProgress], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> EvalResult:
    options = options or EvalOptions()
    questions = eval_questions(ws, dataset, dataset_dir=options.dataset_dir, train_sample=options.train_sample,
                               seed=options.seed)
    report = EvalReport(id=new_eval_id(ws), dataset=dataset, heldout=questions.heldout_name,
                        note=heldout_note(questions),
                        base=TargetInfo(**targets.base.info()), tuned=TargetInfo(**targets.tuned.info()),
                        judge=TargetInfo(url=options.judge.endpoint.url, model=options.judge.endpoint.model)
                        if options.judge else None, run=targets.run, train_total=questions.train_total,
                        seed=options.seed)
    state = EvalProgress(total=2 * len(questions.all))
    start = time.perf_counter()

    def tick(answer=None) -> None:
        if answer is not None:
            state.done += 1
            state.errors += answer.error is not None
        state.elapsed_s = time.perf_counter() - start
        if progress:
            progress(state)

    rows, fatal, stopped = asyncio.run(_ask(targets, questions.all, options, tick, cancelled))
    if fatal is not None:
        raise EvalInputError(str(fatal))
    state.judged = sum((r.base.judge is not None) + (r.tuned.judge is not None) for r in rows)
    tick()
    score_rows(rows)
    report.sets = summarize(rows)
    report.errors = sum((r.base.error is not None) + (r.tuned.error is not None) for r in rows)
    report.stopped = stopped
    if options.harness and not stopped:
        _harness(ws, report, targets, options.harness, state, tick)
    state.phase = "done"
    tick()
    save_eval(ws, report, rows)
    notify_eval(ws, report, evals_dir(ws) / report.id / "notify.jsonl")  # a verdict "worse" is word to send
    return EvalResult(report=report, rows=rows)


async def _ask(targets, questions, options: EvalOptions, tick, cancelled):
    client_options = ClientOptions(concurrency=options.concurrency, retries=options.retries,
                                   timeout_s=options.timeout_s)
    async with RequestClient(client_options, cancelled=cancelled) as client:
        rows = await ask_rows(client, targets.base, targets.tuned, questions, judge=options.judge, on_answer=tick)
    fatal: ClientError | None = client.fatal
    return rows, fatal, client.stopped


def _harness(ws: Workspace, report: EvalReport, targets: EvalTargets, harness: HarnessOptions, state, tick) -> None:
    from core.serve.backends import serve_env

    refusal = lora_refusal(targets, harness, serve_env().cpu_build)
    if refusal:
        report.lm_eval_error = refusal
        return
    state.phase = "lm-eval"

    def say(text: str) -> None:
        state.message = text
        tick()

    try:
        report.lm_eval = compare_harness(targets, harness, evals_dir(ws) / report.id, progress=say)
    except HarnessError as exc:
        report.lm_eval_error = str(exc)
