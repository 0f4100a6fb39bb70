"""A lean async chat-completions transport (aiohttp) for rollouts at high concurrency.

Why not the ``openai`` SDK on this path: per request it type-walks the whole request body against its
TypedDicts and builds pydantic models of the reply, and a rollout's event loop runs on one core: at hundreds of
episodes in flight that CPU cost, not the server, bounds the run (``bench/bench_serving.py``;
``docs/performance.md``). The SDK stays the client of the sync paths and the fallback when aiohttp is not
installed.

The contract is the SDK's where it matters to the failure policy: the same URL (``base_url`` +
``/chat/completions``; ``OPENAI_BASE_URL`` or OpenAI's endpoint by default), ``Authorization: Bearer``,
``extra_body`` merged into the JSON body, the reply as the parsed JSON dict (what ``ChatCompletion.to_dict()``
gives). Failures raise :class:`HTTPStatus` (with ``Retry-After``), :class:`Unreachable`, :class:`Unreadable` or
:class:`Deadline`; the caller classifies and retries them. The deadline is aiohttp's ``total`` timeout, which
bounds the whole request (connect, send, every read): a server dripping bytes cannot hold it open, and no
extra task per request is needed, as ``asyncio.wait_for`` would create.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Optional

__all__ = ["available", "make_client", "ChatHTTP", "HTTPStatus", "Unreachable", "Unreadable", "Deadline"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def available() -> bool:
    """Whether aiohttp can be imported."""
    try:
        import aiohttp  # noqa: F401 - only whether it imports
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


class Deadline(Exception):
    """The whole request took longer than its timeout."""


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


def base_url(given: Optional[str]) -> str:
    """The base URL requests go to: ``given``, else ``$OPENAI_BASE_URL``, else OpenAI's (the SDK's order)."""
    return (given or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def endpoint(given: Optional[str]) -> str:
    """The chat-completions URL for a base URL (the SDK's default when None)."""
    return base_url(given) + "/chat/completions"


def make_client(
    base_url: Optional[str],
    api_key: str,
    headers: Optional[dict[str, str]] = None,
    timeout: float = 120.0,
) -> Optional[Any]:
    """:class:`ChatHTTP` (aiohttp) when installed, else None (the caller uses the SDK; every transport but the SDK
    is aiohttp)."""
    if available():
        return ChatHTTP(base_url, api_key, headers, timeout)
    return None


def _request_headers(api_key: str, headers: Optional[dict[str, str]]) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "Authorization": f"Bearer {api_key}",
        **(headers or {}),
    }


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


class ChatHTTP:
    """POSTs chat-completions bodies on one aiohttp session (bound to the event loop that created it)."""

    def __init__(
        self, base_url: Optional[str], api_key: str, headers: Optional[dict[str, str]] = None, timeout: float = 120.0
    ) -> None:
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
        self.timeout = timeout
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=timeout, sock_connect=timeout),
        )
        self._aiohttp = aiohttp

    async def create(self, kwargs: dict[str, Any]) -> dict:
        """One chat completion: ``kwargs`` as for ``chat.completions.create`` (``extra_body`` merged in)."""
        data = _body(kwargs)
        aiohttp = self._aiohttp
        try:
            async with self._session.post(
                self.url, data=data, headers=self._headers, proxy=self._proxy, proxy_auth=self._proxy_auth
            ) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("retry-after")
        except asyncio.TimeoutError as exc:  # aiohttp's total timeout (its socket timeouts subclass it too)
            raise Deadline(f"request exceeded {self.timeout}s") from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return _parse(status, raw, retry_after)

    async def close(self) -> None:
        await self._session.close()
        await asyncio.sleep(0)  # let the connector's transports close inside the loop
