"""A real HTTP receiver on 127.0.0.1 for the notification tests (http.server in a thread): it records every
request (path, query, body) and answers from a script of (status, body, headers), then `default`."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    path: str
    query: dict[str, list[str]]
    raw_query: str
    body: dict | list | None
    headers: dict[str, str]


@dataclass
class Receiver:
    script: list[tuple[int, str, dict]] = field(default_factory=list)
    default: tuple[int, str, dict] = (200, '{"code": 0, "errcode": 0, "msg": "success"}', {})
    received: list[Received] = field(default_factory=list)

    def __post_init__(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                parts = urlsplit(self.path)
                try:
                    body = json.loads(data)
                except ValueError:
                    body = None
                receiver.received.append(Received(parts.path, parse_qs(parts.query), parts.query, body,
                                                  dict(self.headers)))
                status, text, headers = receiver.script.pop(0) if receiver.script else receiver.default
                payload = text.encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "Receiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
