"""`devtune eval`: requests per second through devtune's client vs a bare asyncio httpx loop, same server, same run;
and the time to score 10,000 answer pairs vs a bare sacreBLEU loop.

    .venv/bin/python bench/eval.py -w WORKSPACE [--server ID] [--questions 48] [--concurrency 8] [--rounds 3]
    .venv/bin/python bench/eval.py -w WORKSPACE --serve models/tiny-llama3   # start a vLLM server, measure, stop it

Both sides send the same requests: every question's greedy answer request (core.eval.ask's `answer_body`), once
for the base side and once for the tuned side, at the same concurrency, to the same server. devtune's side is
`ask_rows` over a `RequestClient` (slots, retries, caps, progress, rows built); the bare side is `asyncio` + one
`httpx.AsyncClient` + a semaphore. Rounds alternate after a warm-up; the medians and their ratio are printed
(target: devtune >= 0.8x bare).

Scoring: 5,000 references (Chinese and English customer-service answers, each with a base and a tuned answer:
10,000 pairs) scored by core.eval.score (chrF, BLEU, ROUGE-L and exact match) against a bare loop of
sacreBLEU's `sentence_chrf` + `sentence_bleu` (two of the four measures) on the same pairs (target <= 2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ZH = ["在“我的订单”点击“申请退款”，3到5个工作日原路退回。", "质量问题由我们承担运费，个人原因由您承担。",
      "点击登录页的“忘记密码”，按邮件提示操作即可重置。", "电子发票在订单完成后24小时内发送到您的邮箱。",
      "普通快递3到5天送达，偏远地区需要多1到2天。", "会员积分每消费1元累计1分，可在结算时抵扣。"]
EN = ["Refunds reach your card within 3 to 5 business days.", "Yes, we ship to 40 countries; duties are paid on delivery.",
      "Reset your password from the login page with the emailed code.", "Electronic invoices arrive by e-mail overnight.",
      "Unused items can be returned within thirty days in their original box.", "Phones carry a two-year guarantee."]


def make_pairs(n_refs: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """(reference, base answer, tuned answer): references varied by an order number, answers by edits."""
    rng = random.Random(seed)
    out = []
    for i in range(n_refs):
        ref = (ZH if i % 2 else EN)[i % 6] + (f" 订单号{1000 + i}。" if i % 2 else f" Order {1000 + i}.")
        words = list(ref)
        tuned = "".join(c for c in words if rng.random() > 0.15)
        base = "".join(rng.choice(words) for _ in range(len(words) // 2)) + " " + (EN if i % 2 else ZH)[i % 6]
        out.append((ref, base, tuned))
    return out


def bench_scoring(n_refs: int = 5000) -> None:
    from sacrebleu import sentence_bleu, sentence_chrf

    from core.eval.eval_report import EvalRow, SideAnswer
    from core.eval.score import score_rows

    pairs = make_pairs(n_refs)
    rows = [EvalRow(set="heldout", source=str(i), question="q", reference=ref, base=SideAnswer(answer=b),
                    tuned=SideAnswer(answer=t)) for i, (ref, b, t) in enumerate(pairs)]
    start = time.perf_counter()
    for ref, b, t in pairs:
        tok = "zh" if any("\u4e00" <= c <= "\u9fff" for c in ref) else "13a"
        for answer in (b, t):
            _score = sentence_chrf(answer, [ref]).score
            _score = sentence_bleu(answer, [ref], tokenize=tok).score
    bare = time.perf_counter() - start
    start = time.perf_counter()
    score_rows(rows)
    ours = time.perf_counter() - start
    n = 2 * n_refs
    print(f"scoring {n:,} answer pairs: devtune {ours:.2f} s (chrF, BLEU, ROUGE-L, exact match; target <= 2 s), "
          f"bare sacreBLEU loop {bare:.2f} s (chrF + BLEU only), ratio {ours / bare:.2f}x the bare loop's time")


async def bare_run(base, tuned, questions, concurrency: int) -> tuple[float, int]:
    import httpx

    from core.eval.ask import answer_body

    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        async def post(endpoint, question):
            async with sem:
                for attempt in range(3):  # a keep-alive connection the server just closed: sent again, as devtune's
                    try:
                        resp = await client.post(endpoint.chat_url, json=answer_body(endpoint, question),
                                                 headers={"Authorization": f"Bearer {endpoint.api_key}"})
                        break
                    except httpx.TransportError:
                        if attempt == 2:
                            raise
                resp.raise_for_status()
                return resp.json()["choices"][0]["message"]["content"]

        start = time.perf_counter()
        replies = await asyncio.gather(*(post(ep, q) for q in questions for ep in (base, tuned)))
        return time.perf_counter() - start, len(replies)


def devtune_run(base, tuned, questions, concurrency: int) -> tuple[float, int]:
    from core.eval.ask import ask_rows
    from core.eval.targets import Target
    from core.serve.client import ClientOptions, RequestClient

    async def go():
        async with RequestClient(ClientOptions(concurrency=concurrency)) as client:
            return await ask_rows(client, Target("base", base), Target("tuned", tuned), questions)

    start = time.perf_counter()
    rows = asyncio.run(go())
    elapsed = time.perf_counter() - start
    return elapsed, sum((r.base.error is None) + (r.tuned.error is None) for r in rows)


def _compare(ws, server, args) -> int:
    from core.serve.servers import endpoint as server_endpoint
    from core.serve.servers import find_server
    from core.serve.verify import Question

    ep = server_endpoint(ws, find_server(ws, server))
    questions = [Question(prompt=f"{q} ({i})", expected=a, split="heldout", source=str(i))
                 for i, (a, _b, _t) in enumerate(make_pairs(args.questions)) for q in ["请问：" + a[:8]]]
    devtune_run(ep, ep, questions[:4], args.concurrency)  # warm-up: connections, the server's caches
    asyncio.run(bare_run(ep, ep, questions[:4], args.concurrency))
    ours, bare = [], []
    for _ in range(args.rounds):
        t, n = devtune_run(ep, ep, questions, args.concurrency)
        ours.append(n / t)
        t, n = asyncio.run(bare_run(ep, ep, questions, args.concurrency))
        bare.append(n / t)
        print(f"  round {len(bare)}: devtune {ours[-1]:.2f}, bare {bare[-1]:.2f} requests/s", file=sys.stderr)
    o, b = statistics.median(ours), statistics.median(bare)
    print("  rounds, requests/s: devtune " + " ".join(f"{x:.2f}" for x in ours) + " · bare " +
          " ".join(f"{x:.2f}" for x in bare))
    print(f"requests/s at concurrency {args.concurrency}, {2 * len(questions)} requests, {args.rounds} rounds on "
          f"{ep.url} ({ep.model}): devtune {o:.2f}, bare httpx loop {b:.2f}, ratio {o / b:.2f} (target >= 0.8)")
    return 0


def main() -> int:
    from core.serve.plan import plan_server
    from core.serve.servers import start_server, stop_server, wait_ready
    from core.workspace.layout import Workspace

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workspace", required=True)
    ap.add_argument("--server", help="server id (default: the active one)")
    ap.add_argument("--serve", metavar="MODEL", help="start a vLLM server for MODEL, measure, stop it")
    ap.add_argument("--questions", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=10000, help="answer pairs to score (default 10,000)")
    args = ap.parse_args()

    bench_scoring(args.pairs // 2)
    sys.stdout.flush()
    ws = Workspace.resolve(args.workspace)
    started = None
    if args.serve:
        opts, _notes = plan_server(ws, args.serve)
        started = start_server(ws, opts)
        print(f"starting {started.backend} server {started.id} ...", file=sys.stderr)
        wait_ready(ws, started.id, timeout=900)
    try:
        return _compare(ws, started.id if started else args.server, args)
    finally:
        if started is not None:
            stop_server(ws, started.id)


if __name__ == "__main__":
    raise SystemExit(main())
