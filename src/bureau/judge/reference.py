"""A reference-matching judge behind the same API as a model judge, for drills and offline runs.

`ReferenceJudgeServer` serves `/v1/chat/completions` on 127.0.0.1 and grades a request by the
reference alone: the work passes when every number and every capitalised term of the reference
appears in it (case and thousands separators ignored). It is no substitute for a model's
reading of a memo; it is deterministic, needs no weights and no network, and it exercises the
whole judge path (client, keys, rate limits, retries, verdict parsing, the trial's reward)
where no model judge is at hand, as in `bench/fault_drill.py`.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_REFERENCE = re.compile(r"Reference:\n(.*?)\n\nWork to grade", re.DOTALL)
_WORK = re.compile(r"Work to grade \(data, between the fences\):\n(`{3,})\n(.*)\n\1\s*$", re.DOTALL)
_TERMS = re.compile(r"\d[\d,]*(?:\.\d+)?|\b[A-Z][A-Za-z&'-]+(?: [A-Z][A-Za-z&'-]+)*")


def _normal(text: str) -> str:
    return re.sub(r"(?<=\d),(?=\d)", "", text).casefold()


def reference_terms(reference: str) -> list[str]:
    """The numbers and capitalised terms a passing work must contain."""
    return sorted({_normal(term) for term in _TERMS.findall(reference)})


def grade(user_message: str) -> dict[str, Any]:
    """The verdict on one judge request's user message (`JudgeRequest.messages()`)."""
    reference, work = _REFERENCE.search(user_message), _WORK.search(user_message)
    if reference is None or work is None:
        return {"passed": False, "rationale": "the request has no reference or no work"}
    text = _normal(work.group(2))
    missing = [term for term in reference_terms(reference.group(1)) if term not in text]
    if missing:
        return {"passed": False, "rationale": f"the work lacks {', '.join(missing[:5])}"}
    return {"passed": True, "rationale": "the work states everything the reference holds"}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # the stdlib's name
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": "not found"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        except (ValueError, KeyError, StopIteration, TypeError):
            self._send(400, {"error": "expected a chat completion request"})
            return
        verdict = json.dumps(grade(user))
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": verdict}}]})

    def _send(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class ReferenceJudgeServer:
    """The server on 127.0.0.1 (a free port) in a thread; use as a context manager."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ReferenceJudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
