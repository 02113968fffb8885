"""GGUF: the conversion's time and size per type, and llama.cpp's time to first token against vLLM's on the
same model, same question, same machine.

    .venv/bin/python bench/gguf.py -w WORKSPACE --model exports/NAME [--types q8_0,f16,q4_k_m] [--rounds 20]

The model folder is converted with devtune's conversion (core.merge.gguf: llama.cpp's converter, and its
quantize for the k-quants) into <model>-gguf/; the figures are its wall time and the GGUF's size as a share
of the safetensors. Then vLLM serves the folder (core.serve, as the Playground does) and llama.cpp's
OpenAI-compatible server (llama_cpp.server from .venv-gguf) serves the first type's GGUF; both are asked the
same question greedily, streamed, in alternating rounds after a warm-up. Prints the median TTFT of each and
llama.cpp's as a ratio to vLLM's.
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.playground import QUESTION, raw_ttft  # noqa: E402 (the same measure as the Playground bench)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def convert_types(ws, model: str, types: list[str]) -> list[dict]:
    from core.merge.gguf import convert, plan_gguf
    from core.merge.export_check import weights_bytes

    weights = weights_bytes(ws.abs(model))
    out = []
    for quant in types:
        plan = plan_gguf(ws, model, quant)
        started = time.perf_counter()
        written = convert(ws, plan)
        seconds = time.perf_counter() - started
        out.append({"type": quant, "seconds": round(seconds, 2), "bytes": written.size_bytes,
                    "share_of_safetensors": round(written.size_bytes / weights, 3),
                    "estimate_ratio": round(written.size_bytes / written.estimate_bytes, 3),
                    "path": written.path})
        print(f"  {quant:<7} {seconds:6.1f} s  {written.size_bytes / 1e6:8.2f} MB "
              f"({written.size_bytes / weights:.2f} of the safetensors)", file=sys.stderr)
    return out


def start_llamacpp(ws, gguf: str, name: str, key: str) -> tuple[subprocess.Popen, str]:
    from core.merge.gguf import find_tools

    tools = find_tools()
    port = free_port()
    log = open(ws.state_dir / "bench-llamacpp.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen([str(tools.python), "-m", "llama_cpp.server", "--model", str(ws.abs(gguf)),
                             "--model_alias", name, "--host", "127.0.0.1", "--port", str(port), "--api_key", key,
                             "--n_threads", "2", "--n_ctx", "2048"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}/v1"


def wait_http(url: str, key: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/models", headers={"Authorization": f"Bearer {key}"}, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("llama_cpp.server did not answer in time")


def main() -> int:
    import httpx

    from core.serve.chat import ChatParams, build_messages, request_body
    from core.serve.plan import plan_server
    from core.serve.servers import endpoint, start_server, stop_server, wait_ready
    from core.workspace.layout import Workspace

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workspace", required=True)
    ap.add_argument("--model", required=True, help="a merged model folder (safetensors)")
    ap.add_argument("--types", default="q8_0,f16,q4_k_m")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    ws = Workspace.resolve(args.workspace)

    print("conversion:", file=sys.stderr)
    conversions = convert_types(ws, args.model, args.types.split(","))
    gguf = conversions[0]["path"]

    opts, _notes = plan_server(ws, args.model, backend="vllm")
    vllm = start_server(ws, opts)
    key = secrets.token_hex(16)
    llama, llama_url = start_llamacpp(ws, gguf, opts.served_name, key)
    try:
        print(f"starting vLLM ({vllm.id}) and llama_cpp.server ...", file=sys.stderr)
        wait_ready(ws, vllm.id, timeout=900)
        wait_http(llama_url, key, llama)
        ep = endpoint(ws, vllm)
        params = ChatParams(temperature=0.0, max_tokens=args.max_tokens)
        body = request_body(ep, build_messages(QUESTION), params, stream=True)
        sides = {"vllm": (ep.chat_url, ep.headers()),
                 "llama.cpp": (llama_url + "/chat/completions", {"Authorization": f"Bearer {key}"})}
        ttft: dict[str, list[float]] = {k: [] for k in sides}
        with httpx.Client(timeout=300) as client:
            for url, headers in sides.values():
                for _ in range(3):  # warm-up
                    raw_ttft(client, url, headers, body)
            for i in range(args.rounds):
                order = list(sides) if i % 2 else list(sides)[::-1]
                for name in order:
                    url, headers = sides[name]
                    ttft[name].append(raw_ttft(client, url, headers, body))
    finally:
        stop_server(ws, vllm.id)
        llama.terminate()
        llama.wait(timeout=30)
    med = {k: statistics.median(v) for k, v in ttft.items()}
    ratio = med["llama.cpp"] / med["vllm"]
    result = {"model": args.model, "gguf": gguf, "rounds": args.rounds, "conversion": conversions,
              "vllm_ttft_ms_median": round(med["vllm"] * 1000, 2),
              "llamacpp_ttft_ms_median": round(med["llama.cpp"] * 1000, 2), "llamacpp_over_vllm": round(ratio, 3)}
    print(f"TTFT median over {args.rounds} rounds, {QUESTION!r}, greedy:")
    print(f"  vLLM ({args.model})        {result['vllm_ttft_ms_median']:8.2f} ms")
    print(f"  llama.cpp ({Path(gguf).name})  {result['llamacpp_ttft_ms_median']:8.2f} ms   ratio {ratio:.3f}")
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
