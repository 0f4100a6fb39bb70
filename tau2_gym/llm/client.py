"""One chat-completions client for every LLM call of a run -- agent, customer (user simulator) and NL judge.

:class:`LLMConfig` holds the knobs they share; :class:`ChatClient` sends requests to any OpenAI-compatible
endpoint (OpenAI, vLLM, SGLang, ...) and owns everything between a request body and a usable reply:

- the transport: the ``openai`` SDK for sync calls (under a whole-request deadline), :mod:`tau2_gym.llm.http`
  (aiohttp) for async calls unless ``transport='openai'`` or aiohttp is missing; async clients are per event loop;
- the failure policy, written once for both paths: connection errors, timeouts, HTTP 408/409/429/5xx and
  unreadable replies are retried ``max_retries`` times with exponential backoff and jitter (``Retry-After``
  honoured up to ``backoff_max``); other HTTP errors fail at once; an *empty* reply is re-requested at once up
  to ``empty_retries`` times (NVIDIA's tau2 does; upstream tau2 aborts on it). What is left raises
  :class:`LLMError`, which each caller turns into its own error class;
- the reply cache (:mod:`tau2_gym.llm.cache`, keyed on the server's identity as well as the request), usage
  and cost (:mod:`tau2_gym.llm.cost`), and the gate on requests in flight (``max_concurrency``);
- the server check of :meth:`ChatClient.acheck`: one small request before a run, so that a wrong URL, a server
  that fails every request or a missing key ends the run at once instead of after every episode has failed.

What a reply *means* is the caller's: ``complete(kwargs, parse)`` calls ``parse(reply_dict)``, which returns the
caller's value or raises :class:`BadReply` (retried like a server fault), :class:`EmptyReply` (re-requested) or
its own exception (raised to the caller as is, never retried).

``openai`` is an optional dependency (``pip install tau2-gym[openai]``); it is imported on first use.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import random
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Optional, Sequence, TypeVar, Union

from tau2_gym.core.config import describe
from tau2_gym.core.messages import Requestor, ToolCall
from tau2_gym.llm import http as chat_http
from tau2_gym.llm.cache import ResponseCache, open_cache
from tau2_gym.llm.cost import load_price_table, message_cost
from tau2_gym.llm.loop import LoopThread

__all__ = [
    "LLMConfig",
    "ChatClient",
    "Reply",
    "LLMError",
    "BadReply",
    "BadToolCall",
    "EmptyReply",
    "chat_message",
    "reply_message",
    "usage_of",
    "DEFAULT_MODEL",
    "CLIENT_ARGS",
    "PROBE_MESSAGES",
    "ServerCheckError",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Item = TypeVar("Item")

#: upstream tau2's default model for the agent, the user simulator and the NL judge alike
DEFAULT_MODEL = "gpt-4.1-2025-04-14"
_RETRYABLE_STATUS = frozenset({408, 409, 429})
#: statuses that say "busy", not "wrong": the server check passes on them
_BUSY_STATUS = frozenset({408, 429})
#: the conversation of the server check: the smallest request that proves the endpoint serves the model. The
#: run's own sampling arguments ride along, so a server that would refuse them refuses the check.
PROBE_MESSAGES: tuple[dict[str, str], ...] = ({"role": "user", "content": "Reply with the word OK."},)
_PROBE_TIMEOUT = 30.0

#: keys of ``llm_args`` that configure the client rather than the sampling (tau2 run passes them there, litellm
#: takes them as arguments): the config field each one sets. The field's own name comes last, so it wins over
#: litellm's alias when both are given.
CLIENT_ARGS = {
    "num_retries": "max_retries",
    "api_base": "base_url",
    "timeout": "timeout",
    "max_retries": "max_retries",
    "base_url": "base_url",
    "api_key": "api_key",
}


@dataclass
class LLMConfig:
    """Settings of one :class:`ChatClient`. Print ``describe()`` to see every value."""

    model: str = field(default=DEFAULT_MODEL, metadata={"help": "Model name sent to the endpoint."})
    base_url: Optional[str] = field(
        default=None,
        metadata={"help": "Endpoint base URL, e.g. http://localhost:8000/v1 (None: OpenAI / $OPENAI_BASE_URL)."},
    )
    api_key_env: Optional[str] = field(
        default="OPENAI_API_KEY",
        metadata={"help": "Name of the env var holding the API key (unset: 'EMPTY', fine for local servers)."},
    )
    api_key: Optional[str] = field(
        default=None,
        repr=False,
        metadata={"help": "Literal API key (tau2 run's llm-args `api_key`); wins over api_key_env; never recorded."},
    )
    temperature: Optional[float] = field(
        default=0.0, metadata={"help": "Sampling temperature (upstream: 0.0); None: not sent."}
    )
    top_p: Optional[float] = field(default=None, metadata={"help": "Nucleus sampling; None: not sent."})
    max_tokens: Optional[int] = field(default=None, metadata={"help": "Completion token limit; None: not sent."})
    seed: Optional[int] = field(
        default=None, metadata={"help": "Seed when the request carries none (the episode seed wins)."}
    )
    llm_args: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Extra chat.completions.create arguments, e.g. {'reasoning_effort': 'low'}."},
    )
    extra_body: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Extra JSON body fields for non-OpenAI servers (e.g. vLLM chat_template_kwargs)."},
    )
    default_headers: dict[str, str] = field(
        default_factory=dict, metadata={"help": "Extra HTTP headers on every request."}
    )
    timeout: float = field(
        default=120.0, metadata={"help": "Seconds before one request times out (then it is retried)."}
    )
    max_retries: int = field(
        default=3, metadata={"help": "Retries after connection errors/timeouts/429/5xx/bad bodies (upstream: 3)."}
    )
    backoff_base: float = field(default=1.0, metadata={"help": "First retry delay in seconds; doubles each retry."})
    backoff_max: float = field(default=30.0, metadata={"help": "Cap on one retry delay (also on Retry-After)."})
    jitter: float = field(
        default=0.5, metadata={"help": "Fraction of each delay drawn at random (0: none, 1: full jitter)."}
    )
    empty_retries: int = field(
        default=3, metadata={"help": "Immediate re-requests after an empty reply (NVIDIA tau2: 3)."}
    )
    max_concurrency: int = field(
        default=32, metadata={"help": "Requests in flight at once in generate_batch / agenerate."}
    )
    cache: Optional[str] = field(
        default="auto",
        metadata={
            "help": "Reply cache (tau2_gym.llm.cache, one SQLite file): 'auto' = the default file "
            "($TAU2_GYM_CACHE_DIR/llm-cache.sqlite, else ~/.cache/tau2-gym/) for temperature-0 requests "
            "(an agent client never caches unless given a path); a path = that file for "
            "temperature-0 or seeded requests; None/'off' = no cache."
        },
    )
    transport: str = field(
        default="auto",
        metadata={
            "help": "HTTP client of the async path: 'auto' (a minimal HTTP/1.1 client for http:// endpoints, "
            "aiohttp for https when installed, else the SDK), 'aiohttp', 'openai' (the SDK). Sync calls "
            "use the SDK."
        },
    )
    input_cost_per_token: float = field(
        default=0.0,
        metadata={
            "help": "USD per prompt token for `cost` (unless the server reports usage.cost or price_table "
            "knows the model)."
        },
    )
    output_cost_per_token: float = field(default=0.0, metadata={"help": "USD per completion token for `cost`."})
    price_table: Optional[str] = field(
        default=None,
        metadata={
            "help": "JSON/YAML file of prices in litellm's model_cost shape ({model: {input_cost_per_token, "
            "output_cost_per_token}}); see tau2_gym.llm.cost for the order of precedence."
        },
    )

    def __post_init__(self) -> None:
        self._take_client_args()
        if self.max_retries < 0 or self.empty_retries < 0:
            raise ValueError(
                f"max_retries and empty_retries must be >= 0; got {self.max_retries}, {self.empty_retries}"
            )
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1; got {self.max_concurrency}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be in [0, 1]; got {self.jitter}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds; got {self.timeout}")
        if self.transport not in ("auto", "aiohttp", "openai"):
            raise ValueError(f"transport must be 'auto', 'aiohttp' or 'openai'; got {self.transport!r}")
        if self.price_table is not None:
            load_price_table(self.price_table)  # a bad file fails here, at construction, not mid-run
        if self.transport == "aiohttp" and not chat_http.available():
            raise ImportError("transport='aiohttp' needs aiohttp: pip install aiohttp (or transport='auto')")

    def _take_client_args(self) -> None:
        """Move the client options of ``llm_args`` (:data:`CLIENT_ARGS`) into their fields: they configure the
        client, and in the request body a server would read them as sampling arguments (or reject them). A value
        given there wins over the field's, as in ``tau2 run``; None leaves the field as it is."""
        for key, name in CLIENT_ARGS.items():
            value = self.llm_args.get(key)
            if value is None:
                continue
            if name == "timeout":
                value = float(value)
            elif name == "max_retries":
                value = int(value)
            setattr(self, name, value)
        self.llm_args = {k: v for k, v in self.llm_args.items() if k not in CLIENT_ARGS}

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        return describe(self)


# ---------------------------------------------------------------------------------------------- replies


class LLMError(RuntimeError):
    """A call that failed for good (retries spent, or an error not worth retrying). The message names the role,
    the model, the endpoint, the reason and the attempts; the parts are kept for callers with their own wording."""

    def __init__(self, who: str, model: str, where: str, reason: str, attempts: int, retryable: bool = True) -> None:
        super().__init__(f"{who} model {model!r} at {where}: {reason} (after {attempts} attempt(s))")
        self.who, self.model, self.where, self.reason, self.attempts = who, model, where, reason, attempts
        #: False when the error would repeat on another try (a 4xx such as 404 or 401): episode retries skip it
        self.retryable = retryable


class ServerCheckError(RuntimeError):
    """The server check failed: one line naming the role, the server, what went wrong and the fix."""

    def __init__(self, who: str, where: str, problem: str, fix: str) -> None:
        super().__init__(f"{who} server {where}: {problem}; {fix}")
        self.who, self.where, self.problem, self.fix = who, where, problem, fix


class BadReply(Exception):
    """The server answered, but not with a usable chat completion: retried like a server fault."""


class BadToolCall(BadReply):
    """A tool call that cannot be read (arguments not a JSON object, no name). It is the model's output, not the
    server's fault: a user simulator retries it as a bad reply; an agent's is the policy's action, kept as sent."""


class EmptyReply(Exception):
    """A well-formed reply with neither text nor tool calls: re-requested up to ``empty_retries`` times."""


@dataclass
class Reply(Generic[T]):
    """One completion: ``parse``'s value, the reply as sent, its usage and cost (0.0 when served from the cache:
    nothing was paid)."""

    value: T
    raw: dict
    usage: Optional[dict]
    cost: float
    cached: bool = False


def usage_of(raw: dict) -> Optional[dict]:
    """``{"completion_tokens", "prompt_tokens"}`` of a reply (None when it reports no usage)."""
    u = raw.get("usage")
    if not isinstance(u, dict):
        return None
    return {"completion_tokens": u.get("completion_tokens"), "prompt_tokens": u.get("prompt_tokens")}


def reply_message(raw: Any) -> dict:
    """The assistant message of a reply's first choice, checked; raises :class:`BadReply` when there is none."""
    if not isinstance(raw, dict):
        raise BadReply(f"unreadable response body: {str(raw)[:200]!r}")
    choices = raw.get("choices")
    if not choices or not isinstance(choices, list):
        raise BadReply("response has no choices")
    choice = choices[0]
    msg = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(msg, dict):
        raise BadReply("response choice has no message")
    role = msg.get("role")
    if role not in (None, "assistant"):
        raise BadReply(f"response message has role {role!r}, expected 'assistant'")
    if choice.get("finish_reason") == "length":
        logger.warning("LLM %s: output might be incomplete due to the token limit", raw.get("model"))
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        raise BadReply(f"response content is not a string: {type(content).__name__}")
    return msg


def _arguments(raw: Any, name: str) -> dict:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BadToolCall(
                f"tool call {name!r} has arguments that are not valid JSON ({exc.msg}): {raw[:200]!r}"
            ) from exc
    if not isinstance(raw, dict):
        raise BadToolCall(f"tool call {name!r} has arguments that are not a JSON object: {str(raw)[:200]!r}")
    return raw


def chat_message(raw: Any, requestor: Requestor) -> tuple[Optional[str], Optional[list[ToolCall]]]:
    """(text, tool calls tagged ``requestor``) of a reply. Raises :class:`BadReply` / :class:`BadToolCall` for an
    unusable one and :class:`EmptyReply` when it has neither text nor tool calls."""
    msg = reply_message(raw)
    content = msg.get("content")
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise BadReply(f"response tool_calls is not a list: {type(raw_calls).__name__}")
    calls: list[ToolCall] = []
    for call in raw_calls:
        fn = call.get("function") if isinstance(call, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(fn, dict) or not isinstance(name, str) or not name:
            raise BadToolCall(f"tool call without a function name: {call!r}"[:300])
        calls.append(
            ToolCall(
                name=name, arguments=_arguments(fn.get("arguments"), name), id=call.get("id") or "", requestor=requestor
            )
        )
    if (content is None or not content.strip()) and not calls:
        raise EmptyReply()
    return content, calls or None


def _as_dict(response: Any) -> dict:
    """An SDK reply as the JSON dict the server sent (what the aiohttp transport returns directly)."""
    if isinstance(response, dict):
        return response
    if isinstance(response, (str, bytes)):  # the SDK hands back a body it could not read as JSON
        raise BadReply(f"unreadable response body: {str(response)[:200]!r}")
    return response.to_dict() if hasattr(response, "to_dict") else response.model_dump()


async def _close_at_loop_end(client: Any) -> AsyncIterator[None]:
    """Started once per loop client, this async generator is finalised by the loop's ``shutdown_asyncgens``
    (``asyncio.run`` does it): the client is closed inside its loop, before the loop closes, even when nobody
    calls ``aclose``."""
    try:
        yield
    finally:
        try:
            await client.close()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


# ---------------------------------------------------------------------------------------------- the client


class _Tries:
    """Retry bookkeeping of one call: the same decisions for the sync and the async loop."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.failures = 0
        self.empties = 0

    @property
    def attempts(self) -> int:
        return self.failures + self.empties + 1

    def after_empty(self) -> None:
        """Return (ask again now), or raise :class:`LLMError` once the empty-reply budget is spent."""
        cfg = self.client.config
        self.empties += 1
        if self.empties > cfg.empty_retries:
            raise self.client.error("empty response (no content and no tool calls)", self.attempts - 1)
        logger.warning(
            "%s model %s returned an empty response; re-requesting (%d/%d)",
            self.client.who,
            cfg.model,
            self.empties,
            cfg.empty_retries,
        )

    def after_error(self, exc: BaseException) -> float:
        """The delay before the next attempt, or :class:`LLMError` when this error is final."""
        cfg = self.client.config
        reason, retryable, retry_after = self.client.classify(exc)
        if not retryable or self.failures >= cfg.max_retries:
            raise self.client.error(reason, self.attempts, retryable) from exc
        delay = self.client.backoff(self.failures, retry_after)
        self.failures += 1
        logger.warning(
            "%s model %s: %s; retry %d/%d in %.2fs",
            self.client.who,
            cfg.model,
            reason,
            self.failures,
            cfg.max_retries,
            delay,
        )
        return delay


class ChatClient:
    """Chat completions for one role (``who``: "agent", "user simulator", "judge", named in errors and logs).

    Thread-safe; ``acomplete`` is concurrent up to ``max_concurrency`` requests per event loop, ``batch`` on the
    client's own loop. ``auto_cache=False`` makes ``cache='auto'`` mean no cache (a policy under training: its
    replies change as it learns); an explicit path still caches.
    """

    def __init__(self, config: LLMConfig, who: str = "LLM", auto_cache: bool = True) -> None:
        self.config = config
        self.who = who
        self._openai: Any = None
        self._sync: Any = None
        self._lock = threading.Lock()
        self._batch_loop = LoopThread(f"tau2-llm-{who.replace(' ', '-')}")
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._rng = random.Random()
        #: the model name the server reported to the check (:meth:`acheck`); None before it ran or if it failed
        self.served_model: Optional[str] = None
        #: whether ``served_model`` is known (from the check or the first reply); cache hits are checked against it
        self.identified = False
        setting = config.cache
        if not auto_cache and isinstance(setting, str) and setting.lower() == "auto":
            setting = None
        self.cache: Optional[ResponseCache] = open_cache(
            setting, config.llm_args.get("temperature", config.temperature)
        )

    def __repr__(self) -> str:
        return f"ChatClient({self.who!r}, {self.config!r})"

    # ------------------------------------------------------------------------------ requests

    def request_kwargs(
        self,
        messages: list[dict[str, Any]],
        tools: Optional[list[dict[str, Any]]] = None,
        tool_choice: Optional[str] = None,
        seed: Optional[int] = None,
    ) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments: the messages, the tools with ``tool_choice`` when there are
        any, the configured sampling arguments and ``llm_args``, the seed (``seed`` wins over the configured one,
        as upstream's set_seed does) and ``extra_body``."""
        cfg = self.config
        kw: dict[str, Any] = {"model": cfg.model, "messages": messages}
        if tools:
            kw["tools"] = tools
            if tool_choice is not None:
                kw["tool_choice"] = tool_choice
        if cfg.temperature is not None:
            kw["temperature"] = cfg.temperature
        if cfg.top_p is not None:
            kw["top_p"] = cfg.top_p
        if cfg.max_tokens is not None:
            kw["max_tokens"] = cfg.max_tokens
        kw.update(cfg.llm_args)
        seed = seed if seed is not None else cfg.seed
        if seed is not None:
            kw["seed"] = seed
        if cfg.extra_body:
            kw["extra_body"] = dict(cfg.extra_body)
        return kw

    def recorded_args(self) -> dict[str, Any]:
        """The ``llm_args`` of a results file's ``agent_info``/``user_info``: sampling arguments and the endpoint
        (``api_base``, as tau2 names it); never the key."""
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
        return args

    @property
    def where(self) -> str:
        return self.config.base_url or "the default OpenAI endpoint"

    @property
    def base_url(self) -> str:
        """The endpoint requests go to (the configured one, else ``$OPENAI_BASE_URL``, else OpenAI's)."""
        return chat_http.base_url(self.config.base_url)

    def identity(self) -> dict[str, Any]:
        """Who answers: the endpoint and the model name the server reports (None until the check or the first
        reply said). The endpoint is part of every cache key, so one server's replies are never served as
        another's; the reported model is checked against each entry's own (``ResponseCache.get``)."""
        return {"base_url": self.base_url, "served_model": self.served_model}

    def api_key(self) -> Optional[str]:
        """The literal key, else the env var's value, else None."""
        if self.config.api_key:
            return self.config.api_key
        name = self.config.api_key_env
        return (os.environ.get(name) if name else None) or None

    # ------------------------------------------------------------------------------ transports

    def sdk(self) -> Any:
        """The ``openai`` module, imported on first use (an ImportError that says how to install it)."""
        if self._openai is None:
            try:
                import openai
            except ImportError as exc:
                raise self._missing_sdk() from exc
            self._openai = openai
        return self._openai

    def require_sdk(self) -> None:
        """Raise :meth:`sdk`'s ImportError now if the ``openai`` package is not installed, without importing it:
        a process that only makes async calls (aiohttp) never loads the SDK's hundreds of modules, which every
        full garbage collection would walk."""
        if self._openai is None and importlib.util.find_spec("openai") is None:
            raise self._missing_sdk()

    def _missing_sdk(self) -> ImportError:
        return ImportError(
            f"the {self.who} client needs the 'openai' package: pip install 'tau2-gym[openai]' (or pip install openai)"
        )

    def _client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"api_key": self.api_key() or "EMPTY", "timeout": self.config.timeout, "max_retries": 0}
        if self.config.base_url:
            kw["base_url"] = self.config.base_url
        if self.config.default_headers:
            kw["default_headers"] = dict(self.config.default_headers)
        return kw

    def _sync_client(self) -> Any:
        if self._sync is None:
            with self._lock:
                if self._sync is None:
                    self._sync = self.sdk().OpenAI(**self._client_kwargs())
        return self._sync

    def send(self, kwargs: dict[str, Any]) -> dict:
        """One sync request -- no cache, no retry -- under a whole-request deadline; the reply's JSON dict.

        The SDK's timeout is per socket read, so a server dripping bytes could hold the caller for ever: the
        request runs in a daemon thread and is abandoned after ``timeout`` (the thread ends at its next read
        timeout).
        """
        client = self._sync_client()
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
            raise chat_http.Deadline(f"request exceeded {self.config.timeout}s")
        if "error" in box:
            raise box["error"]
        return _as_dict(box["value"])

    async def _loop_state(self) -> tuple[Any, asyncio.Semaphore]:
        """The async client and the concurrency gate of the running loop (async clients are loop-bound): the
        aiohttp transport of :mod:`tau2_gym.llm.http` unless ``transport='openai'`` or aiohttp is missing, else
        the SDK's AsyncOpenAI."""
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            cfg = self.config
            client: Any = None
            if cfg.transport != "openai":
                key = self.api_key() or "EMPTY"
                client = chat_http.make_client(cfg.base_url, key, cfg.default_headers, cfg.timeout)
            if client is None:
                client = self.sdk().AsyncOpenAI(**self._client_kwargs())
            closer = _close_at_loop_end(client)
            state = (client, asyncio.Semaphore(cfg.max_concurrency), closer)
            self._per_loop[loop] = state
            await closer.__anext__()  # now asyncio.run's shutdown_asyncgens closes the client with the loop
        return state[0], state[1]

    async def _asend(self, client: Any, kwargs: dict[str, Any]) -> dict:
        """One async request under the whole-request deadline: aiohttp's total timeout bounds it; the SDK's
        request runs under ``wait_for``."""
        if isinstance(client, chat_http.ChatHTTP):
            return await client.create(kwargs)
        try:
            response = await asyncio.wait_for(client.chat.completions.create(**kwargs), self.config.timeout)
        except asyncio.TimeoutError as exc:
            raise chat_http.Deadline(f"request exceeded {self.config.timeout}s") from exc
        return _as_dict(response)

    def close(self) -> None:
        """Release the batch loop (its async client is closed inside it) and the sync HTTP client (other async
        clients die with their loop)."""
        self._batch_loop.close()
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        """Close the async client of the running loop."""
        state = self._per_loop.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[2].aclose()  # its finally closes the client

    # ------------------------------------------------------------------------------ server check

    def _key_problem(self) -> Optional[ServerCheckError]:
        if self.config.base_url or self.api_key() or self.base_url != chat_http.DEFAULT_BASE_URL:
            return None
        return ServerCheckError(
            self.who,
            self.base_url,
            f"no API key (${self.config.api_key_env} is not set)",
            f"export {self.config.api_key_env}=..., or give the base URL of your own server",
        )

    def _check_failure(self, exc: BaseException) -> ServerCheckError:
        reason, _, _ = self.classify(exc)
        status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
        if isinstance(exc, chat_http.Unreadable):
            fix = "the endpoint does not answer like an OpenAI-compatible chat server: check the base URL"
        elif status == 404:
            fix = "check the base URL (OpenAI-compatible servers serve /v1/chat/completions: does it end in /v1?)"
        elif status in (401, 403):
            fix = f"check the key in ${self.config.api_key_env}"
        elif isinstance(status, int) and status < 500:
            fix = "check the model name and the LLM arguments"
        elif isinstance(status, int):
            fix = "the server fails requests: look at its log"
        else:
            fix = "is the server running, and are the host and port right?"
        return ServerCheckError(self.who, self.base_url, reason, fix)

    def _checked(self, raw: Optional[dict], exc: Optional[BaseException]) -> dict[str, Any]:
        if exc is None and isinstance(raw, dict) and isinstance(raw.get("choices"), list):
            self._learn_identity(raw)
            return {**self.identity(), "model": self.config.model}
        if exc is None:
            exc = chat_http.Unreadable(f"not a chat completion: {str(raw)[:200]}")
        status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
        if status in _BUSY_STATUS:  # reachable and serving, only busy: the run may start
            return {**self.identity(), "model": self.config.model, "busy": status}
        raise self._check_failure(exc) from exc

    async def acheck(self) -> dict[str, Any]:
        """One small request (:data:`PROBE_MESSAGES` with the run's sampling arguments), never cached or retried:
        a missing key, an unreachable server, an HTTP error other than 408/429 or an unreadable reply raises
        :class:`ServerCheckError`. Learns the model name the server reports (cache hits are checked against it).
        Returns ``{"base_url", "served_model", "model"}``."""
        problem = self._key_problem()
        if problem is not None:
            raise problem
        client, _ = await self._loop_state()
        limit = min(self.config.timeout, _PROBE_TIMEOUT)
        try:
            raw, exc = (
                await asyncio.wait_for(self._asend(client, self.request_kwargs(list(PROBE_MESSAGES))), limit),
                None,
            )
        except asyncio.TimeoutError:
            raw, exc = None, chat_http.Deadline(f"no reply within {limit}s")
        except Exception as error:  # noqa: BLE001 - classified into the check's one-line failure
            raw, exc = None, error
        return self._checked(raw, exc)

    # ------------------------------------------------------------------------------ failure policy

    def classify(self, exc: BaseException) -> tuple[str, bool, Optional[float]]:
        """(reason, retryable, Retry-After seconds) of an exception raised by one attempt."""
        if isinstance(exc, (BadReply, chat_http.Unreadable)):
            return str(exc), True, None
        if isinstance(exc, chat_http.HTTPStatus):
            return self._status_reason(exc.status, str(exc)), self._retryable(exc.status), exc.retry_after
        if isinstance(exc, chat_http.Unreachable):
            return f"connection error ({exc})", True, None
        if isinstance(exc, chat_http.Deadline):
            return f"request timed out after {self.config.timeout}s", True, None
        oa = self._openai  # None: the SDK was never used, so this is not one of its errors
        if oa is not None:
            if isinstance(exc, oa.APITimeoutError):
                return f"request timed out after {self.config.timeout}s", True, None
            if isinstance(exc, oa.APIConnectionError):
                cause = exc.__cause__ or exc.__context__
                detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
                return f"connection error ({detail})", True, None
            if isinstance(exc, oa.APIStatusError):
                try:
                    header = exc.response.headers.get("retry-after")
                    retry_after = float(header) if header is not None else None
                except (AttributeError, TypeError, ValueError):
                    retry_after = None
                status = exc.status_code
                reason = self._status_reason(status, f"HTTP {status}: {exc.message}")
                return reason, self._retryable(status), retry_after
            if isinstance(exc, oa.APIResponseValidationError):
                return f"unreadable response body ({type(exc).__name__}: {str(exc)[:200]})", True, None
        if isinstance(exc, ValueError):  # the SDK reading a non-JSON body
            return f"unreadable response body ({type(exc).__name__}: {str(exc)[:200]})", True, None
        return f"{type(exc).__name__}: {exc}", False, None

    @staticmethod
    def _retryable(status: int) -> bool:
        return status in _RETRYABLE_STATUS or status >= 500

    def _status_reason(self, status: int, reason: str) -> str:
        if status in (401, 403):
            reason += f" (the API key is read from ${self.config.api_key_env})"
        return reason

    def backoff(self, failures: int, retry_after: Optional[float]) -> float:
        """Seconds before retry ``failures + 1``: exponential from ``backoff_base``, capped at ``backoff_max``,
        ``jitter`` of it drawn at random, at least a ``Retry-After`` (itself capped)."""
        cfg = self.config
        delay = min(cfg.backoff_max, cfg.backoff_base * (2**failures))
        delay *= 1.0 - cfg.jitter * self._rng.random()
        if retry_after is not None:
            delay = max(delay, min(cfg.backoff_max, retry_after))
        return max(0.0, delay)

    def error(self, reason: str, attempts: int, retryable: bool = True) -> LLMError:
        return LLMError(self.who, self.config.model, self.where, reason, attempts, retryable)

    # ------------------------------------------------------------------------------ usage, cost, cache

    def cost(self, raw: dict, usage: Optional[dict]) -> float:
        """USD of one reply (the order of precedence lives in :func:`tau2_gym.llm.cost.message_cost`)."""
        cfg = self.config
        return message_cost(
            raw, usage, cfg.model, cfg.price_table, (cfg.input_cost_per_token, cfg.output_cost_per_token)
        )

    def cache_stats(self) -> dict[str, Any]:
        """Hits, misses and entries stored by this client's reply cache, where it is (``on`` False without one:
        ``cache`` off, or ``"auto"`` at a temperature other than 0)."""
        return {"on": False} if self.cache is None else self.cache.stats()

    def _cache_key(self, kwargs: dict[str, Any]) -> Optional[str]:
        """The request's cache key, computed once for the lookup and the store (None: not cached)."""
        if self.cache is None:
            return None
        return self.cache.key(kwargs, {"base_url": self.base_url})

    def adopt_identity(self, known: Sequence[dict[str, Any]]) -> None:
        """Take the server identity another process learned for this endpoint and model (a Ray driver's check),
        so that cache hits are checked against the served model from this client's first request on."""
        for ident in known:
            if ident.get("base_url") == self.base_url and ident.get("model") == self.config.model:
                if ident.get("served_model"):
                    self.served_model, self.identified = ident["served_model"], True
                return

    def _learn_identity(self, raw: dict) -> None:
        served = raw.get("model")
        self.served_model = served if isinstance(served, str) and served else None
        self.identified = True

    def _from_cache(self, kwargs: dict[str, Any], key: Optional[str], parse: Callable[[dict], T]) -> Optional[Reply[T]]:
        if key is None or self.cache is None:
            return None
        raw = self.cache.get(kwargs, key, self.served_model if self.identified else None)
        if raw is None:
            return None
        try:
            value = parse(raw)
        except Exception as exc:  # noqa: BLE001 - an entry the caller cannot use is a miss
            logger.warning(
                "%s cache entry unusable (%s: %s); asking the model again", self.who, type(exc).__name__, exc
            )
            return None
        return Reply(value, raw, usage_of(raw), 0.0, cached=True)

    def _accept(self, kwargs: dict[str, Any], key: Optional[str], raw: dict, parse: Callable[[dict], T]) -> Reply[T]:
        value = parse(raw)
        if not self.identified:
            self._learn_identity(raw)
        if key is not None and self.cache is not None:
            self.cache.put(kwargs, raw, key)
        usage = usage_of(raw)
        return Reply(value, raw, usage, self.cost(raw, usage))

    # ------------------------------------------------------------------------------ entry points

    def complete(self, kwargs: dict[str, Any], parse: Callable[[dict], T]) -> Reply[T]:
        """The reply to ``kwargs`` (from the cache when it holds one), read by ``parse``; raises :class:`LLMError`
        after the retries."""
        key = self._cache_key(kwargs)
        hit = self._from_cache(kwargs, key, parse)
        if hit is not None:
            return hit
        tries = _Tries(self)
        while True:
            try:
                raw = self.send(kwargs)
            except Exception as exc:  # noqa: BLE001 - classified; unknown errors end the call as LLMError
                time.sleep(tries.after_error(exc))
                continue
            try:
                return self._accept(kwargs, key, raw, parse)
            except EmptyReply:
                tries.after_empty()
            except BadReply as exc:
                time.sleep(tries.after_error(exc))

    async def acomplete(self, kwargs: dict[str, Any], parse: Callable[[dict], T]) -> Reply[T]:
        """:meth:`complete` on the running event loop, at most ``max_concurrency`` calls in flight."""
        key = self._cache_key(kwargs)
        hit = self._from_cache(kwargs, key, parse)
        if hit is not None:
            return hit
        client, gate = await self._loop_state()
        tries = _Tries(self)
        async with gate:
            while True:
                try:
                    raw = await self._asend(client, kwargs)
                except Exception as exc:  # noqa: BLE001 - classified by after_error: retried, or raised as an LLMError
                    await asyncio.sleep(tries.after_error(exc))
                    continue
                try:
                    return self._accept(kwargs, key, raw, parse)
                except EmptyReply:
                    tries.after_empty()
                except BadReply as exc:
                    await asyncio.sleep(tries.after_error(exc))

    def batch(self, fn: Callable[[Item], Awaitable[T]], items: Sequence[Item]) -> list[Union[T, Exception]]:
        """``await fn(item)`` for all ``items`` at once, for a synchronous caller: on the client's own event loop
        (:class:`~tau2_gym.llm.loop.LoopThread`, kept for the client's life), so a batch travels like a rollout's
        requests -- the async transport, its kept-alive connections, the ``max_concurrency`` gate, the retries of
        :meth:`acomplete`. One result or exception each, in order (one bad item must not sink the others)."""
        if not items:
            return []
        return self._batch_loop.run(_gather(fn, items))


async def _gather(fn: Callable[[Item], Awaitable[T]], items: Sequence[Item]) -> list[Union[T, Exception]]:
    async def one(item: Item) -> Union[T, Exception]:
        try:
            return await fn(item)
        except Exception as exc:  # noqa: BLE001 - returned, not raised
            return exc

    return list(await asyncio.gather(*(one(item) for item in items)))
