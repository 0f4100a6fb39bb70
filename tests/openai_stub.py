"""A small local OpenAI-compatible chat-completions server for tests (stdlib only, runs in a thread).

Replies are scripted: a list of items consumed in order (then the last repeats), or a callable
``reply(request_json, n) -> item``. An item is one of

- ``"text"``: an assistant message with that content,
- ``{"tool_calls": [{"name": ..., "arguments": {...}}], "content": None}``: tool calls,
- ``{"status": 503, "body": "..."}``: an HTTP error,
- ``{"delay": 2.0, "then": item}``: sleep before answering,
- ``{"raw": "not json"}``: a garbage body with status 200.

Every request body is recorded in ``server.requests``. Usage::

    with OpenAIStub(["hello", "###STOP###"]) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

Item = Union[str, dict]


class OpenAIStub:
    def __init__(self, replies: Union[list[Item], Callable[[dict, int], Item]], model: str = "stub-model") -> None:
        self.replies = replies
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _next(self, body: dict) -> Item:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
        if callable(self.replies):
            return self.replies(body, n)
        if not self.replies:
            return ""
        return self.replies[min(n, len(self.replies) - 1)]

    def _completion(self, item: Item) -> dict[str, Any]:
        if isinstance(item, str):
            message: dict[str, Any] = {"role": "assistant", "content": item}
        else:
            calls = item.get("tool_calls") or []
            message = {"role": "assistant", "content": item.get("content")}
            if calls:
                message["tool_calls"] = [
                    {"id": c.get("id", f"call_{i}"), "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                                  else json.dumps(c.get("arguments", {}))}}
                    for i, c in enumerate(calls)
                ]
        return {
            "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()), "model": self.model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def __enter__(self) -> "OpenAIStub":
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # /v1/models
                self._send(200, json.dumps({"object": "list", "data": [{"id": stub.model, "object": "model"}]}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                item = stub._next(body)
                while isinstance(item, dict) and "delay" in item:
                    time.sleep(float(item["delay"]))
                    item = item.get("then", "")
                if isinstance(item, dict) and "status" in item:
                    self._send(int(item["status"]), item.get("body", json.dumps({"error": {"message": "injected"}})))
                    return
                if isinstance(item, dict) and "raw" in item:
                    self._send(200, str(item["raw"]))
                    return
                self._send(200, json.dumps(stub._completion(item)))

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default backlog (5) resets connections under concurrent tests

            def handle_error(self, request: Any, client_address: Any) -> None:
                # a client that timed out on purpose (injected delays) closes first: not worth a traceback
                if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    return
                super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
