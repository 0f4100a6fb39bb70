"""A small local OpenAI-compatible chat-completions server for tests (stdlib only, runs in a thread).

Replies are scripted: a list of items consumed in order (then the last repeats), or a callable
``reply(request_json, n) -> item``. An item is one of

- ``"text"``: an assistant message with that content,
- ``{"tool_calls": [{"name": ..., "arguments": {...}}], "content": None}``: tool calls (``reasoning_content`` /
  ``reasoning`` keys are sent as the message's fields of those names, as a server's reasoning parser does),
- ``{"status": 503, "body": "..."}``: an HTTP error,
- ``{"delay": 2.0, "then": item}``: sleep before answering,
- ``{"raw": "not json"}``: a garbage body with status 200.

Every request body is recorded in ``server.requests`` -- except the server check a run sends first
(:data:`tau2_gym.llm.client.PROBE_MESSAGES`), which is answered with ``probe_reply`` (default ``"OK"``) and
recorded in ``server.probes``, so that scripted reply lists line up with the run's real requests. Only
``/v1/chat/completions`` and ``/v1/models`` exist (any other path is a 404, like a base URL without ``/v1``).
Usage::

    with OpenAIStub(["hello", "###STOP###"]) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")

:class:`AsyncOpenAIStub` is the same contract on an asyncio server with HTTP/1.1 keep-alive (a coroutine per
connection, ``asyncio.sleep`` for delays): thousands of requests/s with hundreds in flight, for benchmarks
where the thread-per-connection server above would be the bottleneck. It keeps counts and the first/last
request times instead of the bodies (``keep_requests=True`` keeps them too).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Union

from tau2_gym.llm.client import PROBE_MESSAGES

Item = Union[str, dict]
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
NOT_FOUND = json.dumps({"error": {"message": "Not Found"}})


class OpenAIStub:
    def __init__(
        self,
        replies: Union[list[Item], Callable[[dict, int], Item]],
        model: str = "stub-model",
        probe_reply: Item = "OK",
    ) -> None:
        self.replies = replies
        self.model = model
        self.probe_reply = probe_reply
        self.probes: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _probe(self, body: dict) -> Optional[Item]:
        """``probe_reply`` when ``body`` is a run's server check, else None."""
        if body.get("messages") != [dict(m) for m in PROBE_MESSAGES]:
            return None
        with self._lock:
            self.probes.append(body)
        return self.probe_reply

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
                    {
                        "id": c.get("id", f"call_{i}"),
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": c["arguments"]
                            if isinstance(c.get("arguments"), str)
                            else json.dumps(c.get("arguments", {})),
                        },
                    }
                    for i, c in enumerate(calls)
                ]
            for key in ("reasoning_content", "reasoning"):
                if key in item:
                    message[key] = item[key]
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def __enter__(self) -> OpenAIStub:
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

            def do_GET(self) -> None:
                if self.path.rstrip("/") != MODELS_PATH:
                    self._send(404, NOT_FOUND)
                    return
                self._send(200, json.dumps({"object": "list", "data": [{"id": stub.model, "object": "model"}]}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                if self.path.rstrip("/") != CHAT_PATH:
                    self._send(404, NOT_FOUND)
                    return
                probe = stub._probe(body)
                if probe is not None and not (isinstance(probe, dict) and "status" in probe):
                    # the check's reply does not go through a subclass's _completion (its counts are the run's)
                    self._send(200, json.dumps(OpenAIStub._completion(stub, probe)))
                    return
                item = probe if probe is not None else stub._next(body)
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


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class AsyncOpenAIStub(OpenAIStub):
    """:class:`OpenAIStub` on asyncio with keep-alive connections; runs its loop in a daemon thread.

    ``count``/``first``/``last``/``peak`` give requests served, the ``time.time()`` of the first request's
    arrival and of the last reply, and the most requests in flight at once.
    """

    def __init__(
        self,
        replies: Union[list[Item], Callable[[dict, int], Item]],
        model: str = "stub-model",
        keep_requests: bool = False,
        probe_reply: Item = "OK",
    ) -> None:
        super().__init__(replies, model, probe_reply)
        self.keep_requests = keep_requests
        self.count = 0
        self.first = self.last = 0.0
        self.inflight = self.peak = 0
        self.busy = 0.0  # summed seconds from a request's head read to its reply written
        self._loop: asyncio.AbstractEventLoop | None = None
        self._aserver: asyncio.AbstractServer | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def _next(self, body: dict) -> Item:
        n = self.count  # one loop thread: no lock needed
        self.count += 1
        if self.keep_requests:
            self.requests.append(body)
        if callable(self.replies):
            return self.replies(body, n)
        if not self.replies:
            return ""
        return self.replies[min(n, len(self.replies) - 1)]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.time()
                lines = head.decode("latin-1").split("\r\n")
                method, _, rest = lines[0].partition(" ")
                path = rest.split(" ", 1)[0].rstrip("/")
                length, close = 0, False
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    name = name.strip().lower()
                    if name == "content-length":
                        length = int(value.strip() or 0)
                    elif name == "connection" and value.strip().lower() == "close":
                        close = True
                raw = await reader.readexactly(length) if length else b""
                if path not in (CHAT_PATH, MODELS_PATH) or (method == "GET") != (path == MODELS_PATH):
                    status, out = 404, NOT_FOUND
                elif method == "GET":
                    status, out = 200, json.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]})
                else:
                    status, out = await self._answer(raw)
                data = out.encode()
                writer.write(
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n".encode("latin-1")
                    + data
                )
                self.busy += time.time() - arrived
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, raw: bytes) -> tuple[int, str]:
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        probe = self._probe(body) if isinstance(body, dict) else None
        if isinstance(probe, dict) and "status" in probe:
            return int(probe["status"]), probe.get("body", json.dumps({"error": {"message": "injected"}}))
        if probe is not None:
            return 200, json.dumps(OpenAIStub._completion(self, probe))
        now = time.time()
        if not self.count:
            self.first = now
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        try:
            item = self._next(body)
            while isinstance(item, dict) and "delay" in item:
                await asyncio.sleep(float(item["delay"]))
                item = item.get("then", "")
            if isinstance(item, dict) and "status" in item:
                return int(item["status"]), item.get("body", json.dumps({"error": {"message": "injected"}}))
            if isinstance(item, dict) and "raw" in item:
                return 200, str(item["raw"])
            return 200, json.dumps(self._completion(item))
        finally:
            self.inflight -= 1
            self.last = time.time()

    def __enter__(self) -> AsyncOpenAIStub:
        started = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._aserver = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096))
            self._port = self._aserver.sockets[0].getsockname()[1]
            started.set()
            loop.run_forever()
            self._aserver.close()
            loop.run_until_complete(self._aserver.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="async-openai-stub")
        self._thread.start()
        started.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
