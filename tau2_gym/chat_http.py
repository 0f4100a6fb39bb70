"""A lean async chat-completions transport (aiohttp) for rollouts at high concurrency.

Why not the ``openai`` SDK on this path: per request it type-walks the whole request body against its
TypedDicts (``maybe_transform``) and builds pydantic models of the reply -- about 4 ms of CPU per request
with a tau2 conversation -- and its httpx connection pool scans every idle connection per request. The
rollout's event loop runs on one core, so at 256 episodes in flight against a server answering in 200 ms
(1,280 requests/s) the SDK caps the run at ~20% of what the server allows; aiohttp posts the same JSON for
~0.2 ms; for plain ``http://`` endpoints without a proxy (a local vLLM/SGLang, the usual RL setup) a minimal
HTTP/1.1 keep-alive client on asyncio streams (:class:`_Plain`) does it for ~0.05 ms. The SDK stays the client of
the sync paths and the fallback for ``https://`` when aiohttp is not installed.

The contract is the SDK's where it matters to the failure policy: the same URL (``base_url`` +
``/chat/completions``; ``OPENAI_BASE_URL`` or OpenAI's endpoint by default), ``Authorization: Bearer``,
``extra_body`` merged into the JSON body, the reply as the parsed JSON dict (what ``ChatCompletion.to_dict()``
gives). Failures raise :class:`HTTPStatus` (with ``Retry-After``), :class:`Unreachable` or
:class:`Unreadable`; the caller classifies and retries them.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Optional

__all__ = ["available", "make_client", "ChatHTTP", "HTTPStatus", "Unreachable", "Unreadable"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def available() -> bool:
    """Whether aiohttp can be imported."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


class HTTPStatus(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, message: str, retry_after: Optional[float]) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.retry_after = status, message, retry_after


class Unreachable(Exception):
    """No answer: connection refused/reset, DNS, TLS."""


class Unreadable(Exception):
    """A 2xx answer whose body is not a JSON object."""


def _error_message(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"][:300]
    if isinstance(err, str):
        return err[:300]
    return text[:300]


def endpoint(base_url: Optional[str]) -> str:
    """The chat-completions URL for a base URL (the SDK's default when None)."""
    base = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    return base + "/chat/completions"


def plain_http(url: str) -> bool:
    """Whether ``url`` is ``http://`` with no proxy configured for it: the minimal client can post there."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    return "http" not in getproxies() or bool(proxy_bypass(parts.hostname))


def make_client(base_url: Optional[str], api_key: str, headers: Optional[dict[str, str]] = None,
                timeout: float = 120.0, prefer: str = "auto") -> Optional[Any]:
    """The fastest transport for the endpoint: :class:`_Plain` (http, no proxy; not with ``prefer='aiohttp'``),
    else :class:`ChatHTTP` (aiohttp) when installed, else None (the caller uses the SDK)."""
    url = endpoint(base_url)
    if prefer == "auto" and plain_http(url):
        return _Plain(url, api_key, headers, timeout)
    if available():
        return ChatHTTP(base_url, api_key, headers, timeout)
    return None


def _request_headers(api_key: str, headers: Optional[dict[str, str]]) -> dict[str, str]:
    return {"Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Bearer {api_key}",
            **(headers or {})}


def _body(kwargs: dict[str, Any]) -> bytes:
    body = dict(kwargs)
    extra = body.pop("extra_body", None)
    if extra:
        body.update(extra)
    return json.dumps(body).encode("utf-8")


def _parse(status: int, raw: bytes, retry_after: Optional[str]) -> dict:
    text = raw.decode("utf-8", errors="replace")
    if status >= 400:
        try:
            after = float(retry_after) if retry_after is not None else None
        except ValueError:
            after = None
        raise HTTPStatus(status, _error_message(text), after)
    try:
        out = json.loads(text)
    except ValueError:
        raise Unreadable(f"unreadable response body: {text[:200]!r}") from None
    if not isinstance(out, dict):
        raise Unreadable(f"response body is not a JSON object: {text[:200]!r}")
    return out


class _Plain:
    """HTTP/1.1 POSTs over asyncio streams with a keep-alive pool, for ``http://`` endpoints (no TLS/proxy).

    Replies with ``Content-Length``, chunked bodies and close-delimited bodies are read; a kept-alive
    connection the server closed meanwhile is retried once on a fresh one (only when not a byte of the reply
    arrived). A request cut off midway (cancelled, timed out) closes its connection.
    """

    def __init__(self, url: str, api_key: str, headers: Optional[dict[str, str]], timeout: float) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.url = url
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}"]
        lines += [f"{k}: {v}" for k, v in _request_headers(api_key, headers).items()]
        self._head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        self._timeout = timeout
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def create(self, kwargs: dict[str, Any]) -> dict:
        data = _body(kwargs)
        request = self._head + str(len(data)).encode() + b"\r\n\r\n" + data
        for attempt in (0, 1):
            reused = bool(self._idle)
            if reused:
                conn = self._idle.pop()
            else:
                try:
                    conn = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self._timeout)
                except asyncio.TimeoutError:
                    raise Unreachable(f"connect to {self.host}:{self.port} timed out after {self._timeout}s") from None
                except OSError as exc:
                    raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
            reader, writer = conn
            keep = False
            started = False
            try:
                writer.write(request)
                await writer.drain()
                status_line = await reader.readline()
                if not status_line:
                    raise ConnectionResetError("the server closed the connection")
                started = True
                lines = []
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    lines.append(line)
                status, headers = self._head_of(status_line, b"".join(lines))
                body = await self._read_body(reader, headers)
                keep = headers.get("connection", "").lower() != "close" and status_line.startswith(b"HTTP/1.1")
                return _parse(status, body, headers.get("retry-after"))
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
                if reused and not started and attempt == 0:
                    continue  # a stale kept-alive connection: once more on a fresh one
                raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
            finally:
                if keep:
                    self._idle.append(conn)
                else:
                    writer.close()
        raise Unreachable("no connection")  # pragma: no cover - the loop returns or raises

    @staticmethod
    def _head_of(status_line: bytes, rest: bytes) -> tuple[int, dict[str, str]]:
        try:
            status = int(status_line.split(None, 2)[1])
        except (IndexError, ValueError):
            raise Unreadable(f"not an HTTP status line: {status_line[:100]!r}") from None
        headers: dict[str, str] = {}
        for line in rest.decode("latin-1").splitlines():
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return status, headers

    @staticmethod
    async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int((await reader.readline()).split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        if "content-length" in headers:
            return await reader.readexactly(int(headers["content-length"]))
        headers["connection"] = "close"  # delimited by the close
        return await reader.read()

    async def close(self) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()


class ChatHTTP:
    """POSTs chat-completions bodies on one aiohttp session (bound to the event loop that created it)."""

    def __init__(self, base_url: Optional[str], api_key: str, headers: Optional[dict[str, str]] = None,
                 timeout: float = 120.0) -> None:
        import aiohttp

        self.url = endpoint(base_url)
        self._headers = _request_headers(api_key, headers)
        # no connection cap here: the caller's semaphore bounds requests in flight. The proxy settings of the
        # environment (HTTP(S)_PROXY, NO_PROXY) are read once here: aiohttp's trust_env re-reads them and
        # ~/.netrc in a worker thread on every request.
        self._proxy: Optional[str] = None
        self._proxy_auth: Any = None
        try:
            from aiohttp.helpers import get_env_proxy_for_url
            from yarl import URL

            proxy, self._proxy_auth = get_env_proxy_for_url(URL(self.url))
            self._proxy = str(proxy)
        except (LookupError, ImportError, ValueError):
            pass
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout))
        self._aiohttp = aiohttp

    async def create(self, kwargs: dict[str, Any]) -> dict:
        """One chat completion: ``kwargs`` as for ``chat.completions.create`` (``extra_body`` merged in)."""
        data = _body(kwargs)
        aiohttp = self._aiohttp
        try:
            async with self._session.post(self.url, data=data, headers=self._headers, proxy=self._proxy,
                                          proxy_auth=self._proxy_auth) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("retry-after")
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return _parse(status, raw, retry_after)

    async def close(self) -> None:
        await self._session.close()
        await asyncio.sleep(0)  # let the connector's transports close inside the loop
