"""`data synth`: pairs per second through devtune's client vs a bare asyncio httpx loop, same server, same run;
and the time to read and chunk a 300-page text PDF (a bookmark per chapter of ten pages).

    .venv/bin/devtune -w WORKSPACE serve models/tiny-llama3          # any server devtune started
    .venv/bin/python bench/synth.py -w WORKSPACE [--server ID] [--chunks 24] [--concurrency 8] [--rounds 3]
    .venv/bin/python bench/synth.py -w WORKSPACE --serve models/tiny-llama3   # start one, measure, stop it

Both sides do the same work on the same chunks: per chunk one questions request, then one answer request per
question, with the same request bodies (a fixed sampling seed, so both get the same replies) at the same concurrency. devtune's
side is `Generator` (journal, caps, retries, progress: a fresh journal each round, so nothing is answered from
it); the bare side is `asyncio` + one `httpx.AsyncClient` + a semaphore, reading the questions with devtune's
`parse_questions` (whitespace-only questions dropped, at most --questions) so that it sends the same answer prompts. Rounds alternate after
a warm-up; the medians and their ratio are printed (target: devtune >= 0.8x bare).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOPICS = ["returns", "refunds", "shipping", "invoices", "warranty", "accounts", "payments", "coupons", "orders",
          "delivery", "repairs", "exchanges"]


def make_markdown(n: int) -> str:
    parts = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        parts.append(f"# {topic.title()} {i}\n\nPolicy {i} on {topic}: requests are handled within {i % 7 + 1} "
                     f"working days. Customers keep the receipt number {1000 + i}. A {topic} request made after "
                     f"{i % 30 + 10} days needs the manager's approval.\n")
    return "\n".join(parts)


async def bare_run(endpoint, prompts, chunks, options) -> tuple[float, int]:
    """The bare loop: the same bodies, asyncio + httpx + a semaphore, nothing else."""
    import httpx

    from core.data.synth.generate import answer_request, parse_questions, questions_request

    sem = asyncio.Semaphore(options.concurrency)
    headers = {"Authorization": f"Bearer {endpoint.api_key}", "Content-Type": "application/json"}
    pairs = 0
    limits = httpx.Limits(max_connections=options.concurrency, max_keepalive_connections=options.concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        async def post(body):
            async with sem:
                resp = await client.post(endpoint.chat_url, json=body, headers=headers)
                resp.raise_for_status()
                return resp.json()["choices"][0]["message"]["content"]

        async def chunk(c):
            nonlocal pairs
            text = await post(questions_request(prompts, c, options.questions).body(endpoint.model, options))
            qs = parse_questions({"content": text})[: options.questions]  # the same answer prompts as devtune's
            replies = await asyncio.gather(*(post(answer_request(prompts, c, q, i).body(endpoint.model, options))
                                             for i, q in enumerate(qs)))
            pairs += len(replies)

        start = time.perf_counter()
        await asyncio.gather(*(chunk(c) for c in chunks))
        return time.perf_counter() - start, pairs


def devtune_run(endpoint, prompts, chunks, options) -> tuple[float, int]:
    from core.data.synth.generate import Generator
    from core.data.synth.journal import Journal

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        journal = Journal(Path(tmp) / "journal")
        Generator(endpoint, prompts, journal, options).run(chunks)
        elapsed = time.perf_counter() - start
    return elapsed, sum(1 for e in journal.entries.values() if e["kind"] == "answer")  # as the bare side counts


def pdf_read_and_chunk(pages: int) -> tuple[float, int, int]:
    from fpdf import FPDF

    from core.data.synth.chunks import chunk_document
    from core.data.synth.documents import read_document

    with tempfile.TemporaryDirectory() as tmp:
        pdf = FPDF()
        pdf.set_font("Helvetica", size=10)
        for n in range(1, pages + 1):
            pdf.add_page()
            if n % 10 == 1:  # a chapter every ten pages, in the outline too (its bookmarks are the headings)
                pdf.start_section(f"Chapter {n // 10 + 1}")
                pdf.set_font("Helvetica", "B", 14)
                pdf.cell(0, 8, f"Chapter {n // 10 + 1}", new_x="LMARGIN", new_y="NEXT")
                pdf.set_font("Helvetica", size=10)
            for p in range(6):
                pdf.multi_cell(0, 5, f"Page {n}, paragraph {p}. " + " ".join(
                    f"The {TOPICS[(n + p + k) % len(TOPICS)]} rule {k} applies to order {n * 100 + k} within "
                    f"{k + 2} days." for k in range(6)), new_x="LMARGIN", new_y="NEXT")
        path = Path(tmp) / "manual.pdf"
        pdf.output(str(path))
        start = time.perf_counter()
        doc = read_document(path)
        chunks = chunk_document(doc)
        return time.perf_counter() - start, len(doc.text), len(chunks)


def main() -> int:
    from core.serve.plan import plan_server
    from core.serve.servers import start_server, stop_server, wait_ready
    from core.workspace.layout import Workspace

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workspace", required=True)
    ap.add_argument("--server", help="server id (default: the active one)")
    ap.add_argument("--serve", metavar="MODEL", help="start a vLLM server for MODEL, measure, stop it")
    ap.add_argument("--chunks", type=int, default=24)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--reply-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pdf-pages", type=int, default=300)
    args = ap.parse_args()

    seconds, chars, n_chunks = pdf_read_and_chunk(args.pdf_pages)
    print(f"PDF of {args.pdf_pages} pages: read + chunk {seconds:.2f} s ({chars:,} characters, {n_chunks} chunks; "
          f"target <= 10 s)")

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


def _compare(ws, server, args) -> int:
    from core.data.synth.chunks import chunk_document
    from core.data.synth.documents import Document
    from core.data.synth.generate import SynthOptions
    from core.data.synth.prompts import workspace_prompts
    from core.serve.servers import endpoint as server_endpoint
    from core.serve.servers import find_server

    ep = server_endpoint(ws, find_server(ws, server))
    prompts = workspace_prompts(ws.configs_dir)
    chunks = chunk_document(Document("bench.md", "markdown", make_markdown(args.chunks)))
    options = SynthOptions(concurrency=args.concurrency, reply_tokens=args.reply_tokens, temperature=0.7, seed=1234)
    devtune_run(ep, prompts, chunks[:4], options)  # warm-up: connections, the server's caches
    asyncio.run(bare_run(ep, prompts, chunks[:4], options))
    ours, bare = [], []
    for _ in range(args.rounds):
        t, n = devtune_run(ep, prompts, chunks, options)
        ours.append(n / t)
        t, n = asyncio.run(bare_run(ep, prompts, chunks, options))
        bare.append(n / t)
    o, b = statistics.median(ours), statistics.median(bare)
    if not b:
        print("the bare loop got no pairs (the model gave no questions): nothing to compare; try another --chunks")
        return 1
    print("  rounds, pairs/s: devtune " + " ".join(f"{x:.2f}" for x in ours) + " · bare " +
          " ".join(f"{x:.2f}" for x in bare))
    print(f"pairs/s at concurrency {args.concurrency}, {len(chunks)} chunks, {args.rounds} rounds on {ep.url} "
          f"({ep.model}): devtune {o:.2f}, bare httpx loop {b:.2f}, ratio {o / b:.2f} (target >= 0.8)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
