"""The ASGI layer in front of OpenEnv's app: what OpenEnv's server does not do (bearer token, message size limit,
idle expiry, hostile frames, the shape of a step named in words).

A frame it refuses gets an OpenEnv-style error reply (``{"type": "error", "data": {"message", "code"}}``) on its
own session, which stays open; an idle session gets an error reply and is closed (its slot is freed). OpenEnv's
own clients show only an error's ``message``, so a step of the wrong shape is answered here with a message that
names the expected one (:func:`~tau2_gym.frameworks.openenv.models.action_shape_error`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
from typing import Any, Awaitable, Optional

from tau2_gym.frameworks.openenv.models import action_shape_error

__all__ = ["Guard"]


def _error_frame(message: str, code: str) -> dict[str, Any]:
    return {"type": "websocket.send", "text": json.dumps({"type": "error", "data": {"message": message, "code": code}})}


class Guard:
    """ASGI layer in front of OpenEnv's app: bearer token, message size limit, idle expiry, hostile frames, step
    shapes. ``token``: every request but ``/health`` needs ``Authorization: Bearer <token>`` (the header OpenEnv's
    ``EnvClient(headers=...)`` sends on its WebSocket handshake)."""

    #: the served env (a LoadedEnv), set by the app's builder for those that need it (tests, the Task API)
    loaded: Any = None

    def __init__(
        self,
        app: Any,
        *,
        token: Optional[str],
        max_message_bytes: int,
        idle_timeout: Optional[float],
    ) -> None:
        self.app = app
        self.token = token
        self.max_message_bytes = int(max_message_bytes)
        self.idle_timeout = idle_timeout

    def _authorized(self, scope: dict) -> bool:
        if self.token is None:
            return True
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                expected = f"Bearer {self.token}".encode()
                return hmac.compare_digest(value, expected)
        return False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("path") != "/health" and not self._authorized(scope):
            await _respond(send, 401, {"detail": "missing or wrong bearer token"})
            return
        for name, value in scope.get("headers") or ():
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
                if length < 0 or length > self.max_message_bytes:
                    await _respond(send, 413, {"detail": f"request body over {self.max_message_bytes} bytes"})
                    return
        seen = 0
        refused = False

        async def counted_receive() -> dict:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body") or b"")
                if seen > self.max_message_bytes and not refused:
                    refused = True
                    await _respond(send, 413, {"detail": f"request body over {self.max_message_bytes} bytes"})
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict) -> None:
            if not refused:
                await send(message)

        await self.app(scope, counted_receive, guarded_send)

    async def _websocket(self, scope: dict, receive: Any, send: Any) -> None:
        if not self._authorized(scope):
            first = await receive()
            if first["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 1008, "reason": "missing or wrong bearer token"})
            return
        limit, idle = self.max_message_bytes, self.idle_timeout

        async def guarded_receive() -> dict:
            while True:
                if idle is None:
                    message = await receive()
                else:
                    try:  # one timer per message; the server's receive (a queue) is safe to cancel
                        message = await _within(idle, receive())
                    except asyncio.TimeoutError:  # idle too long: tell the client, let the app close the session
                        await send(_error_frame(f"session expired after {idle:g} s without a message", "SESSION_ERROR"))
                        return {"type": "websocket.disconnect", "code": 1001}
                if message["type"] != "websocket.receive":
                    return message
                problem = _frame_problem(message, limit)
                if problem is None:
                    return message
                await send(_error_frame(*problem))

        async def guarded_send(message: dict) -> None:
            if message["type"] != "websocket.close":
                await send(message)
                return
            try:
                await send(message)
            except Exception:  # noqa: BLE001 - closing a connection the client already closed: nothing to close
                pass

        await self.app(scope, guarded_receive, guarded_send)


async def _within(seconds: float, awaitable: Awaitable[dict]) -> dict:
    """``await awaitable``, or ``asyncio.TimeoutError`` after ``seconds`` (``asyncio.timeout``: no task per call;
    Python 3.10 has only ``wait_for``)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.10


def _frame_problem(message: dict, limit: int) -> Optional[tuple[str, str]]:
    """Why a WebSocket frame is refused (message, code), or None to pass it on to OpenEnv."""
    text = message.get("text")
    if text is None:
        size = len(message.get("bytes") or b"")
        if size > limit:
            return f"message of {size} bytes is over the limit of {limit} bytes", "VALIDATION_ERROR"
        return "binary frames are not accepted: send JSON text", "VALIDATION_ERROR"
    if len(text) > limit:  # characters >= bytes / 4: the byte count only when it can matter
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            return f"message of {size} bytes is over the limit of {limit} bytes", "VALIDATION_ERROR"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"Invalid JSON: {exc}", "INVALID_JSON"
    except (RecursionError, ValueError) as exc:
        return f"Invalid JSON: {type(exc).__name__}", "INVALID_JSON"
    if not isinstance(value, dict):
        return f"a message is a JSON object with a 'type', got {type(value).__name__}", "VALIDATION_ERROR"
    if value.get("type") == "step":
        problem = action_shape_error(value.get("data"))
        if problem is not None:
            return problem, "VALIDATION_ERROR"
    return None


async def _respond(send: Any, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
