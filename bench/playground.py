"""Time to first token through devtune's chat client vs. a raw httpx stream, same server, same run.

    .venv/bin/python bench/playground.py -w WORKSPACE [--server ID] [--rounds 30]
    .venv/bin/python bench/playground.py -w WORKSPACE --serve exports/NAME   # start one, measure, stop it

Both sides stream the same request (greedy, a fixed question) over a kept-alive httpx.Client, in
alternating rounds after a warm-up; the raw side stops at the first SSE line that carries content.
Prints the median TTFT of each and their ratio (target: devtune <= 1.1x raw), plus the decode rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUESTION = "怎么申请退款？"


def raw_ttft(client, url: str, headers: dict, body: dict) -> float:
    start = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as resp:
        resp.raise_for_status()
        first = None
        for line in resp.iter_lines():
            if first is None and line.startswith("data:") and '"content":' in line.replace(" ", "") \
                    and '"content":""' not in line.replace(" ", ""):
                first = time.perf_counter() - start
        return first if first is not None else float("nan")


def devtune_ttft(client, endpoint, messages, params) -> tuple[float, float | None]:
    from core.serve.chat import ChatDone, stream_chat

    for event in stream_chat(endpoint, messages, params, client=client):
        if isinstance(event, ChatDone):
            return event.stats.ttft_s, event.stats.tokens_per_s
    return float("nan"), None


def main() -> int:
    import httpx

    from core.serve.chat import ChatParams, build_messages, request_body
    from core.serve.servers import endpoint, find_server, start_server, stop_server, wait_ready
    from core.serve.plan import plan_server
    from core.workspace.layout import Workspace

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workspace", required=True)
    ap.add_argument("--server", help="server id (default: the active one)")
    ap.add_argument("--serve", metavar="MODEL", help="start a vLLM server for MODEL, measure, stop it")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()

    ws = Workspace.resolve(args.workspace)
    started = None
    if args.serve:
        opts, _notes = plan_server(ws, args.serve)
        started = start_server(ws, opts)
        print(f"starting {started.backend} server {started.id} ...", file=sys.stderr)
        wait_ready(ws, started.id, timeout=900)
    try:
        record = find_server(ws, started.id if started else args.server)
        ep = endpoint(ws, record)
        messages = build_messages(QUESTION)
        params = ChatParams(temperature=0.0, max_tokens=args.max_tokens)
        body = request_body(ep, messages, params, stream=True)
        raw, ours, rates = [], [], []
        with httpx.Client(timeout=300) as raw_client, httpx.Client(timeout=300) as our_client:
            for _ in range(3):  # warm-up: connections, server caches
                raw_ttft(raw_client, ep.chat_url, ep.headers(), body)
                devtune_ttft(our_client, ep, messages, params)
            for i in range(args.rounds):
                if i % 2:
                    raw.append(raw_ttft(raw_client, ep.chat_url, ep.headers(), body))
                    t, rate = devtune_ttft(our_client, ep, messages, params)
                else:
                    t, rate = devtune_ttft(our_client, ep, messages, params)
                    raw.append(raw_ttft(raw_client, ep.chat_url, ep.headers(), body))
                ours.append(t)
                if rate:
                    rates.append(rate)
        raw_med, our_med = statistics.median(raw), statistics.median(ours)
        ratio = our_med / raw_med
        result = {"server": record.id, "backend": record.backend, "rounds": args.rounds,
                  "raw_ttft_ms_median": round(raw_med * 1000, 2), "devtune_ttft_ms_median": round(our_med * 1000, 2),
                  "ratio": round(ratio, 3), "target": 1.1, "ok": ratio <= 1.1,
                  "decode_tokens_per_s_median": round(statistics.median(rates), 1) if rates else None}
        print(f"TTFT median over {args.rounds} rounds ({record.backend}, {record.id}):")
        print(f"  raw httpx stream   {result['raw_ttft_ms_median']:8.2f} ms")
        print(f"  devtune client     {result['devtune_ttft_ms_median']:8.2f} ms   ratio {ratio:.3f} (target <= 1.1)")
        if rates:
            print(f"  decode rate        {result['decode_tokens_per_s_median']:8.1f} tokens/s")
        print(json.dumps(result))
        return 0 if result["ok"] else 1
    finally:
        if started is not None:
            stop_server(ws, started.id)


if __name__ == "__main__":
    raise SystemExit(main())
