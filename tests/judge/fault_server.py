"""A scripted OpenAI-compatible chat endpoint on 127.0.0.1, for the judge client's tests.

Each request takes the next behaviour from the script (the last one repeats): a verdict, a
429 with or without Retry-After, a 5xx, a body that is not JSON, a truncated body, a reply that
is not a verdict, a hang, or a 400/401. Every request is recorded with its key and the time
of `clock` when it arrived.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    key: str
    at: float
    body: dict[str, Any]


def chat_body(content: str) -> bytes:
    return json.dumps(
        {"id": "x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content},
             "finish_reason": "stop"}]}
    ).encode()  # fmt: skip


VERDICT_YES = json.dumps({"passed": True, "rationale": "matches the reference"})
VERDICT_NO = json.dumps({"passed": False, "rationale": "the figure differs"})


class FaultServer:
    def __init__(self, script: list[tuple[str, Any]], clock: Callable[[], float] = time.monotonic):
        self.script = list(script)
        self.seen: list[Seen] = []
        self.clock = clock
        self._lock = threading.Lock()
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                key = self.headers.get("authorization", "").removeprefix("Bearer ")
                with server._lock:
                    server.seen.append(Seen(key, server.clock(), body))
                    step = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                server.respond(self, *step)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def respond(self, handler: BaseHTTPRequestHandler, kind: str, arg: Any = None) -> None:
        # The client may give up first (its timeout): then there is no one to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._respond(handler, kind, arg)

    def _respond(self, handler: BaseHTTPRequestHandler, kind: str, arg: Any) -> None:
        def send(status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(body)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(body)

        if kind == "verdict":
            send(200, chat_body(arg))
        elif kind == "429":
            send(429, b'{"error": "rate limited"}', {"retry-after": str(arg)} if arg else {})
        elif kind in ("500", "503", "400", "401"):
            send(int(kind), b'{"error": "no"}')
        elif kind == "not_json":
            send(200, b"<html>Bad Gateway</html>")
        elif kind == "truncated":
            body = chat_body(VERDICT_YES)
            handler.send_response(200)
            handler.send_header("content-length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body[: len(body) // 2])
            handler.wfile.flush()
            handler.close_connection = True
        elif kind == "hang":
            self._release.wait(arg)
            send(200, chat_body(VERDICT_YES))
        else:
            raise ValueError(kind)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
