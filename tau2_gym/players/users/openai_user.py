"""An LLM user simulator over any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang, ...).

It sends what upstream tau2's user simulator sends -- the user system prompt plus the role-flipped
conversation, the user's tools with ``tool_choice="auto"`` when there are any, ``temperature`` 0.0 by
default and the episode seed -- and turns the reply into a :class:`~tau2_gym.core.messages.UserMessage`
(content, tool calls re-tagged ``requestor="user"`` with their ids, cost, usage, the whole response as
``raw_data``).

Failures are handled here rather than by the client library so that every path is explicit:

- connection errors, timeouts, HTTP 408/409/429/5xx and unreadable replies (non-JSON body, no choices,
  tool-call arguments that are not a JSON object) are retried ``max_retries`` times with exponential
  backoff and jitter (a ``Retry-After`` header is honoured up to ``backoff_max``);
- other HTTP errors (400, 401, 404, ...) fail at once;
- an *empty* reply (no text, no tool calls) is re-requested immediately up to ``empty_retries`` times, as
  NVIDIA's tau2 does; upstream tau2 has no such retry and aborts the simulation on the empty message.
  When the budget is spent we raise, which the environment records as a ``user_error`` episode end --
  the same outcome class as upstream's abort, without killing the run.

Every failure ends as :class:`~tau2_gym.players.users.base.UserSimulatorError` whose message names the endpoint,
the model, the reason and the number of attempts.

``openai`` is an optional dependency (``pip install tau2-gym[openai]``); it is imported on first use.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from tau2_gym.core.messages import ToolCall, UserMessage
from tau2_gym.players.users.base import UserSimulator, UserSimulatorError, UserTurnRequest

logger = logging.getLogger(__name__)

__all__ = ["OpenAIUserConfig", "OpenAIUserSimulator"]

#: upstream tau2's default user-simulator model
DEFAULT_USER_MODEL = "gpt-4.1-2025-04-14"
_RETRYABLE_STATUS = frozenset({408, 409, 429})


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            "OpenAIUserSimulator needs the 'openai' package: pip install 'tau2-gym[openai]' (or pip install openai)"
        ) from exc
    return openai


@dataclass
class OpenAIUserConfig:
    """Settings of :class:`OpenAIUserSimulator`. Print it to see every value."""

    model: str = field(default=DEFAULT_USER_MODEL, metadata={"help": "Model name sent to the endpoint."})
    base_url: Optional[str] = field(
        default=None, metadata={"help": "Endpoint base URL, e.g. http://localhost:8000/v1 (None: OpenAI / $OPENAI_BASE_URL)."})
    api_key_env: Optional[str] = field(
        default="OPENAI_API_KEY", metadata={"help": "Name of the env var holding the API key (unset: 'EMPTY', fine for local servers)."})
    api_key: Optional[str] = field(
        default=None, repr=False,
        metadata={"help": "Literal API key (tau2 run's llm-args `api_key`); wins over api_key_env; never recorded."})
    temperature: Optional[float] = field(default=0.0, metadata={"help": "Sampling temperature (upstream: 0.0); None: not sent."})
    top_p: Optional[float] = field(default=None, metadata={"help": "Nucleus sampling; None: not sent."})
    max_tokens: Optional[int] = field(default=None, metadata={"help": "Completion token limit; None: not sent."})
    seed: Optional[int] = field(default=None, metadata={"help": "Seed when the request carries none (the episode seed wins)."})
    tool_choice: str = field(default="auto", metadata={"help": "tool_choice sent when the user has tools (upstream: auto)."})
    llm_args: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Extra chat.completions.create arguments, e.g. {'reasoning_effort': 'low'}."})
    extra_body: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Extra JSON body fields for non-OpenAI servers (e.g. vLLM chat_template_kwargs)."})
    default_headers: dict[str, str] = field(default_factory=dict, metadata={"help": "Extra HTTP headers on every request."})
    timeout: float = field(default=120.0, metadata={"help": "Seconds before one request times out (then it is retried)."})
    max_retries: int = field(default=3, metadata={"help": "Retries after connection errors/timeouts/429/5xx/bad bodies (upstream: 3)."})
    backoff_base: float = field(default=1.0, metadata={"help": "First retry delay in seconds; doubles each retry."})
    backoff_max: float = field(default=30.0, metadata={"help": "Cap on one retry delay (also on Retry-After)."})
    jitter: float = field(default=0.5, metadata={"help": "Fraction of each delay drawn at random (0: none, 1: full jitter)."})
    empty_retries: int = field(default=3, metadata={"help": "Immediate re-requests after an empty reply (NVIDIA tau2: 3)."})
    max_concurrency: int = field(default=32, metadata={"help": "Requests in flight at once in generate_batch / agenerate."})
    cache: Optional[str] = field(
        default="auto", metadata={"help": "Reply cache (tau2_gym.llm.cache, one SQLite file): 'auto' = the default file ($TAU2_GYM_CACHE_DIR/llm-cache.sqlite, else ~/.cache/tau2-gym/) for temperature-0 requests (user simulator only: an agent client never caches unless given a path); a path = that file for temperature-0 or seeded requests; None/'off' = no cache."})
    cache_dir: Optional[str] = field(
        default=None, metadata={"help": "Older name of `cache` (a path); wins over `cache` when set."})
    transport: str = field(
        default="auto", metadata={"help": "HTTP client of the async path: 'auto' (a minimal HTTP/1.1 client for http:// endpoints, aiohttp for https when installed, else the SDK), 'aiohttp', 'openai' (the SDK). Sync calls use the SDK."})
    input_cost_per_token: float = field(default=0.0, metadata={"help": "USD per prompt token for `cost` (unless the server reports usage.cost or price_table knows the model)."})
    output_cost_per_token: float = field(default=0.0, metadata={"help": "USD per completion token for `cost`."})
    price_table: Optional[str] = field(
        default=None, metadata={"help": "JSON/YAML file of prices in litellm's model_cost shape ({model: {input_cost_per_token, output_cost_per_token}}); see tau2_gym.llm.cost for the order of precedence."})

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.empty_retries < 0:
            raise ValueError(f"max_retries and empty_retries must be >= 0; got {self.max_retries}, {self.empty_retries}")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1; got {self.max_concurrency}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be in [0, 1]; got {self.jitter}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds; got {self.timeout}")
        if self.transport not in ("auto", "aiohttp", "openai"):
            raise ValueError(f"transport must be 'auto', 'aiohttp' or 'openai'; got {self.transport!r}")
        if self.price_table is not None:
            from tau2_gym.llm.cost import load_price_table

            load_price_table(self.price_table)  # a bad file fails here, at construction, not mid-run
        if self.transport == "aiohttp":
            from tau2_gym.llm.http import available

            if not available():
                raise ImportError("transport='aiohttp' needs aiohttp: pip install aiohttp (or transport='auto')")

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        lines = []
        for f in dataclasses.fields(self):
            value = "'***'" if f.name == "api_key" and self.api_key else repr(getattr(self, f.name))
            lines.append(f"{f.name} = {value}  # {f.metadata.get('help', '')}")
        return "\n".join(lines)


class _BadResponse(Exception):
    """The server answered, but not with a usable chat completion (retryable)."""


class _BadToolCall(_BadResponse):
    """A reply whose tool call cannot be read (arguments not a JSON object, no name): the model's output, not
    the server's fault -- a user reply is retried as a bad response; an agent reply is the policy's action."""


class _Deadline(Exception):
    """The whole request (not one socket read) outlived ``timeout``: httpx's timeouts are per read."""


class _EmptyResponse(Exception):
    """A well-formed reply with neither text nor tool calls."""


async def _close_at_loop_end(client: Any) -> Any:
    """Started once per loop client, this async generator is finalised by the loop's
    ``shutdown_asyncgens`` (``asyncio.run`` does it): the client is closed inside its loop, before the loop
    closes, even when nobody calls ``aclose``."""
    try:
        yield
    finally:
        try:
            await client.close()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


def _usage(raw_data: dict) -> Optional[dict]:
    """``{"completion_tokens", "prompt_tokens"}`` of a reply dict (None when it reports no usage)."""
    u = raw_data.get("usage")
    if not isinstance(u, dict):
        return None
    return {"completion_tokens": u.get("completion_tokens"), "prompt_tokens": u.get("prompt_tokens")}


class _Attempts:
    """Retry bookkeeping for one ``generate`` call, shared by the sync and async paths."""

    def __init__(self, sim: "OpenAIUserSimulator") -> None:
        self.sim = sim
        self.failures = 0
        self.empties = 0
        self.last_reason = ""

    @property
    def attempts(self) -> int:
        return self.failures + self.empties + 1

    def on_empty(self) -> None:
        """Either return (ask again now) or raise after the empty-reply budget."""
        self.empties += 1
        if self.empties > self.sim.config.empty_retries:
            raise self.sim._error("empty response (no content and no tool calls)", self.attempts - 1)
        logger.warning("user LLM %s returned an empty response; re-requesting (%d/%d)",
                       self.sim.config.model, self.empties, self.sim.config.empty_retries)

    def on_error(self, exc: BaseException) -> float:
        """Delay before the next attempt, or raise ``UserSimulatorError`` when this error is final."""
        reason, retryable, retry_after = self.sim._classify(exc)
        if not retryable or self.failures >= self.sim.config.max_retries:
            raise self.sim._error(reason, self.attempts) from exc
        delay = self.sim._backoff(self.failures, retry_after)
        self.failures += 1
        logger.warning("user LLM %s: %s; retry %d/%d in %.2fs", self.sim.config.model, reason,
                       self.failures, self.sim.config.max_retries, delay)
        return delay


class OpenAIUserSimulator(UserSimulator):
    """Stateless LLM user over an OpenAI-compatible endpoint; thread-safe, concurrent in batch and async use."""

    implementation = "user_simulator"

    def __init__(self, config: Optional[OpenAIUserConfig] = None, **overrides: Any) -> None:
        base = config if config is not None else OpenAIUserConfig()
        self.config = dataclasses.replace(base, **overrides) if overrides else base
        self._openai = _import_openai()
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._executor: Optional[ThreadPoolExecutor] = None
        self._per_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]]" = (
            weakref.WeakKeyDictionary())
        self._rng = random.Random()
        self.cache: Any = None
        setting = self.config.cache_dir if self.config.cache_dir else self.config.cache
        if setting == "auto" and self.implementation != "user_simulator":
            setting = None  # an agent client sharing this code: a policy's replies change as it trains
        if setting is not None:
            from tau2_gym.llm.cache import open_cache

            self.cache = open_cache(setting, self.config.llm_args.get("temperature", self.config.temperature))

    def __repr__(self) -> str:
        return f"OpenAIUserSimulator({self.config!r})"

    # ------------------------------------------------------------------------------ clients

    def _api_key(self) -> str:
        if self.config.api_key:
            return self.config.api_key
        name = self.config.api_key_env
        return (os.environ.get(name) if name else None) or "EMPTY"

    def _client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"api_key": self._api_key(), "timeout": self.config.timeout, "max_retries": 0}
        if self.config.base_url:
            kw["base_url"] = self.config.base_url
        if self.config.default_headers:
            kw["default_headers"] = dict(self.config.default_headers)
        return kw

    def _sync_client(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._openai.OpenAI(**self._client_kwargs())
        return self._client

    async def _loop_state(self) -> tuple[Any, asyncio.Semaphore]:
        """An async client and a semaphore for the running loop (async clients are loop-bound): a lean
        transport of :mod:`tau2_gym.llm.http` (plain HTTP/1.1 for http:// endpoints, aiohttp when installed)
        unless ``transport='openai'``, else AsyncOpenAI."""
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            from tau2_gym.llm import http as chat_http

            gate = asyncio.Semaphore(self.config.max_concurrency)
            client: Any = None
            if self.config.transport != "openai":
                client = chat_http.make_client(self.config.base_url, self._api_key(), self.config.default_headers,
                                               self.config.timeout, prefer=self.config.transport)
            if client is None:
                client = self._openai.AsyncOpenAI(**self._client_kwargs())
            closer = _close_at_loop_end(client)
            state = (client, gate, closer)
            self._per_loop[loop] = state
            await closer.__anext__()  # now asyncio.run's shutdown_asyncgens closes the client with the loop
        return state[0], state[1]

    async def _acreate(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """One request under the whole-request deadline (httpx's timeout is per read: a dripping server resets
        it). ``chat_http`` bounds the request itself; the SDK's request is wrapped in ``wait_for``."""
        if not isinstance(client, self._openai.AsyncOpenAI):
            return await client.create(kwargs)  # tau2_gym.llm.http: the reply's JSON dict
        try:
            return await asyncio.wait_for(client.chat.completions.create(**kwargs), self.config.timeout)
        except asyncio.TimeoutError as exc:
            raise _Deadline(f"request exceeded {self.config.timeout}s") from exc

    def close(self) -> None:
        """Release the thread pool and the sync HTTP client (async clients die with their loop)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close the async client of the running loop."""
        state = self._per_loop.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[2].aclose()  # its finally closes the client

    # ------------------------------------------------------------------------------ request / response

    def request_kwargs(self, request: UserTurnRequest) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments for one request (public so callers can log/inspect)."""
        cfg = self.config
        kw: dict[str, Any] = {"model": cfg.model, "messages": request.openai_messages()}
        if request.tools:
            kw["tools"] = request.tools
            kw["tool_choice"] = cfg.tool_choice
        if cfg.temperature is not None:
            kw["temperature"] = cfg.temperature
        if cfg.top_p is not None:
            kw["top_p"] = cfg.top_p
        if cfg.max_tokens is not None:
            kw["max_tokens"] = cfg.max_tokens
        kw.update(cfg.llm_args)
        seed = request.seed if request.seed is not None else cfg.seed
        if seed is not None:  # the episode seed overrides any configured one, as upstream's set_seed does
            kw["seed"] = seed
        if cfg.extra_body:
            kw["extra_body"] = dict(cfg.extra_body)
        return kw

    @staticmethod
    def _arguments(raw: Any, name: str) -> dict:
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return {}
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise _BadToolCall(f"tool call {name!r} has arguments that are not valid JSON ({exc.msg}): {raw[:200]!r}")
        if not isinstance(raw, dict):
            raise _BadToolCall(f"tool call {name!r} has arguments that are not a JSON object: {str(raw)[:200]!r}")
        return raw

    def _to_message(self, response: Any) -> UserMessage:
        """The reply (the JSON dict, or an SDK ``ChatCompletion``) as a message; unusable replies raise."""
        if isinstance(response, (str, bytes)):
            raise _BadResponse(f"unreadable response body: {str(response)[:200]!r}")
        raw_data = response if isinstance(response, dict) else (
            response.to_dict() if hasattr(response, "to_dict") else response.model_dump())
        choices = raw_data.get("choices")
        if not choices or not isinstance(choices, list):
            raise _BadResponse("response has no choices")
        choice = choices[0]
        msg = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(msg, dict):
            raise _BadResponse("response choice has no message")
        role = msg.get("role")
        if role not in (None, "assistant"):
            raise _BadResponse(f"response message has role {role!r}, expected 'assistant'")
        if choice.get("finish_reason") == "length":
            logger.warning("LLM %s: output might be incomplete due to the token limit", self.config.model)
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise _BadResponse(f"response content is not a string: {type(content).__name__}")
        calls: list[ToolCall] = []
        raw_calls = msg.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise _BadResponse(f"response tool_calls is not a list: {type(raw_calls).__name__}")
        for raw in raw_calls:
            fn = raw.get("function") if isinstance(raw, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or not name:
                raise _BadToolCall(f"tool call without a function name: {raw!r}"[:300])
            calls.append(ToolCall(name=name, arguments=self._arguments(fn.get("arguments"), name),
                                  id=raw.get("id") or "", requestor="user"))
        if (content is None or not content.strip()) and not calls:
            raise _EmptyResponse()
        return UserMessage(content=content, tool_calls=calls or None, usage=(usage := _usage(raw_data)),
                           cost=self._cost(raw_data, usage), raw_data=raw_data)

    def _cost(self, raw_data: dict, usage: Optional[dict]) -> float:
        from tau2_gym.llm.cost import message_cost  # the order of precedence lives there

        return message_cost(raw_data, usage, self.config.model, self.config.price_table,
                            (self.config.input_cost_per_token, self.config.output_cost_per_token))

    # ------------------------------------------------------------------------------ failure policy

    def _classify(self, exc: BaseException) -> tuple[str, bool, Optional[float]]:
        """(reason, retryable, retry-after seconds) for an exception raised by one attempt."""
        oa = self._openai
        from tau2_gym.llm import http as chat_http

        if isinstance(exc, (_BadResponse, chat_http.Unreadable)):
            return str(exc), True, None
        if isinstance(exc, chat_http.HTTPStatus):
            reason = str(exc)
            if exc.status in (401, 403):
                reason += f" (the API key is read from ${self.config.api_key_env})"
            return reason, exc.status in _RETRYABLE_STATUS or exc.status >= 500, exc.retry_after
        if isinstance(exc, chat_http.Unreachable):
            return f"connection error ({exc})", True, None
        if isinstance(exc, (_Deadline, chat_http.Deadline, oa.APITimeoutError)):
            return f"request timed out after {self.config.timeout}s", True, None
        if isinstance(exc, oa.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
            return f"connection error ({detail})", True, None
        if isinstance(exc, oa.APIStatusError):
            status = exc.status_code
            reason = f"HTTP {status}: {exc.message}"
            if status in (401, 403):
                reason += f" (the API key is read from ${self.config.api_key_env})"
            retry_after = None
            try:
                header = exc.response.headers.get("retry-after")
                retry_after = float(header) if header is not None else None
            except (AttributeError, TypeError, ValueError):
                retry_after = None
            return reason, status in _RETRYABLE_STATUS or status >= 500, retry_after
        if isinstance(exc, (ValueError, oa.APIResponseValidationError)):  # non-JSON / invalid body
            return f"unreadable response body ({type(exc).__name__}: {str(exc)[:200]})", True, None
        return f"{type(exc).__name__}: {exc}", False, None

    def _backoff(self, failures: int, retry_after: Optional[float]) -> float:
        cfg = self.config
        delay = min(cfg.backoff_max, cfg.backoff_base * (2 ** failures))
        delay *= 1.0 - cfg.jitter * self._rng.random()
        if retry_after is not None:
            delay = max(delay, min(cfg.backoff_max, retry_after))
        return max(0.0, delay)

    def _error(self, reason: str, attempts: int) -> UserSimulatorError:
        where = self.config.base_url or "the default OpenAI endpoint"
        return UserSimulatorError(
            f"user simulator model {self.config.model!r} at {where}: {reason} (after {attempts} attempt(s))")

    # ------------------------------------------------------------------------------ entry points

    def _from_cache(self, kwargs: dict[str, Any], key: Optional[str]) -> Optional[UserMessage]:
        """A cached reply as a message (cost 0.0: nothing was paid; usage as the reply recorded), or None."""
        if key is None:
            return None
        raw = self.cache.get(kwargs, key)
        if raw is None:
            return None
        try:
            msg = self._to_message(raw)
        except Exception as exc:  # noqa: BLE001 - a bad entry is a miss
            logger.warning("user cache entry unusable (%s: %s); asking the model again", type(exc).__name__, exc)
            return None
        msg.cost = 0.0
        return msg

    def _reply(self, kwargs: dict[str, Any], response: Any, key: Optional[str]) -> UserMessage:
        msg = self._to_message(response)
        if key is not None and isinstance(getattr(msg, "raw_data", None), dict):
            self.cache.put(kwargs, msg.raw_data, key)
        return msg

    def _cache_key(self, kwargs: dict[str, Any]) -> Optional[str]:
        """The request's cache key, computed once for the lookup and the store (None: not cached)."""
        return None if self.cache is None else self.cache.key(kwargs)

    def cache_stats(self) -> Optional[dict[str, Any]]:
        """Hits, misses and entries stored by this simulator's reply cache, where it is (``on`` False without
        one: ``cache`` off, or ``"auto"`` at a temperature other than 0)."""
        return {"on": False} if self.cache is None else self.cache.stats()

    def generate(self, request: UserTurnRequest) -> UserMessage:
        kwargs = self.request_kwargs(request)
        key = self._cache_key(kwargs)
        cached = self._from_cache(kwargs, key)
        if cached is not None:
            return cached
        client = self._sync_client()
        tries = _Attempts(self)
        while True:
            try:
                return self._reply(kwargs, self._bounded_sync(client, kwargs), key)
            except _EmptyResponse:
                tries.on_empty()
            except Exception as exc:  # noqa: BLE001 - classified; unknown errors become UserSimulatorError
                time.sleep(tries.on_error(exc))

    def _bounded_sync(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """One sync request with a whole-request deadline.

        The request runs in a daemon thread so that a server dripping bytes (which resets httpx's per-read
        timer) cannot hold the caller past ``timeout``; the abandoned thread ends at the next read timeout.
        """
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = client.chat.completions.create(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                box["error"] = exc

        worker = threading.Thread(target=run, name="tau2-llm-request", daemon=True)
        worker.start()
        worker.join(self.config.timeout)
        if worker.is_alive():
            raise _Deadline(f"request exceeded {self.config.timeout}s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    async def agenerate(self, request: UserTurnRequest) -> UserMessage:
        kwargs = self.request_kwargs(request)
        key = self._cache_key(kwargs)
        cached = self._from_cache(kwargs, key)
        if cached is not None:
            return cached
        client, gate = await self._loop_state()
        tries = _Attempts(self)
        async with gate:
            while True:
                try:
                    return self._reply(kwargs, await self._acreate(client, kwargs), key)
                except _EmptyResponse:
                    tries.on_empty()
                except Exception as exc:  # noqa: BLE001
                    await asyncio.sleep(tries.on_error(exc))

    def generate_batch(self, requests: Sequence[UserTurnRequest]) -> list[Union[UserMessage, Exception]]:
        """All requests in flight at once (up to ``max_concurrency``); one message or exception each, in order."""
        if not requests:
            return []
        if len(requests) == 1:
            return super().generate_batch(requests)
        if self._executor is None:
            with self._client_lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.config.max_concurrency, thread_name_prefix="tau2-user")
        futures = [self._executor.submit(self.generate, r) for r in requests]
        out: list[Union[UserMessage, Exception]] = []
        for fut in futures:
            try:
                out.append(fut.result())
            except Exception as exc:  # noqa: BLE001 - returned, not raised
                out.append(exc)
        return out

    def info(self) -> dict[str, Any]:
        cfg = self.config
        args: dict[str, Any] = {}
        if cfg.temperature is not None:
            args["temperature"] = cfg.temperature
        if cfg.top_p is not None:
            args["top_p"] = cfg.top_p
        if cfg.max_tokens is not None:
            args["max_tokens"] = cfg.max_tokens
        args.update(cfg.llm_args)
        if cfg.seed is not None:
            args["seed"] = cfg.seed
        if cfg.base_url:
            args["api_base"] = cfg.base_url
        return {"implementation": self.implementation, "llm": cfg.model, "llm_args": args}
