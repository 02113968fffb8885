"""A small OpenAI-compatible server on 127.0.0.1 that fails on purpose (fault injection) for the client's
retry, cap and resume tests. It answers structured-output requests with JSON built from the excerpt in the
prompt (questions from its sentences, the answer its first sentence), so the pairs are grounded; it counts
the requests it answered per prompt, so a test can prove nothing was generated twice. `hold_after` holds the
requests after the first N unanswered until `release` (a run caught in the middle, for the Ctrl-C test)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultServer:
    def __init__(self) -> None:
        self.faults: list[str] = []  # consumed one per request: "503", "429", "drop", "401", "400-schema", "404"
        self.fail_after: int | None = None  # answer this many requests, then 503 for every one
        self.hold_after: int | None = None  # answer this many requests, then hold the next ones unanswered
        self.holding = threading.Event()  # set once a request is held
        self.release = threading.Event()  # a held request is let go (its connection closed, never answered)
        self.delay = 0.0
        self.answered: Counter = Counter()  # prompt → 200 replies sent
        self.bodies: list[dict] = []
        self.requests = 0
        self.keys: set[str] = set()  # the Authorization headers seen
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests += 1
                    server.bodies.append(body)
                    server.keys.add(self.headers.get("Authorization", ""))
                    fault = server.faults.pop(0) if server.faults else ""
                    if not fault and server.fail_after is not None and sum(server.answered.values()) >= \
                            server.fail_after:
                        fault = "503"
                    if not fault and server.hold_after is not None and sum(server.answered.values()) >= \
                            server.hold_after:
                        fault = "hold"
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay:
                        time.sleep(server.delay)
                    if fault == "hold":
                        server.holding.set()
                        server.release.wait()
                        fault = "drop"
                    if fault == "drop":
                        self.close_connection = True
                        try:
                            self.connection.shutdown(2)
                        except OSError:  # a held request's client is gone already
                            pass
                        return
                    if fault == "429":
                        return self._json(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
                    if fault == "400-schema":
                        return self._json(400, {"error": {"message": "response_format json_schema is not supported"}})
                    if fault:
                        return self._json(int(fault), {"error": {"message": f"injected {fault}"}})
                    prompt = body["messages"][-1]["content"]
                    kind = body["response_format"]["json_schema"]["name"]
                    excerpt = re.search(r"<excerpt>\n(.*?)\n</excerpt>", prompt, re.DOTALL).group(1)
                    sentences = [s.strip() for s in re.split(r"(?<=[.。])\s*", excerpt.split("\n\n", 1)[-1])
                                 if s.strip()]
                    if kind == "questions":
                        content = {"questions": [f"What about this: {s}?" for s in sentences[:3]]}
                    else:
                        content = {"answer": sentences[0]}
                    with server.lock:
                        server.answered[prompt] += 1
                    text = json.dumps(content, ensure_ascii=False)
                    self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                  "finish_reason": "stop"}],
                                     "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4,
                                               "total_tokens": len(prompt) // 4 + len(text) // 4}})
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _json(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
