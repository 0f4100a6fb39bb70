"""An OpenEnv server for any registered tau2 env id, and its client (extra ``tau2-gym[openenv]``).

OpenEnv environments are HTTP + WebSocket servers built with ``openenv.core.env_server.create_app`` and driven by
OpenEnv's ``EnvClient`` (TRL, torchforge, SkyRL and others consume them). Here the server holds one loaded env
(domain, task pool, tools, judge, user simulator) and gives every WebSocket connection its own episode on it: a
session's env is a :meth:`~tau2_gym.envs.tau2_env.Tau2Env.sibling` of the loaded one, so a thousand sessions cost
what a thousand episodes cost, not a thousand domains. Every episode runs through the env's public two-phase API
(:meth:`~tau2_gym.envs.tau2_env.Tau2Env.begin_step` ... ``end_step``) -- the one driver; a customer behind an LLM is
awaited, never run on the event loop's thread.

What OpenEnv's server does not do, :class:`_Guard` (an ASGI layer in front of it) does: the optional bearer token,
the per-message size limit and the idle-session expiry; it also answers frames OpenEnv would end a session over
(binary frames, JSON that is not an object, nesting too deep to parse) with an error reply on that session.

>>> from tau2_gym.frameworks.openenv import Tau2Client, Tau2Server   # doctest: +SKIP
>>> server = Tau2Server("tau2/airline-v0").start()                  # doctest: +SKIP
>>> with Tau2Client(server.url).sync() as env:                      # doctest: +SKIP
...     result = env.reset(task_id="0")
...     result = env.step("How can I help?")
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
import logging
import os
import resource
import signal
import socket
import threading
import time
from typing import Any, Optional, Union

import gymnasium as gym
import uvicorn
from fastapi import HTTPException
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import Field
from websockets.asyncio.client import connect as ws_connect

from tau2_gym.core.records import as_dict
from tau2_gym.runner.episode_runner import _offline

logger = logging.getLogger("tau2_gym")

__all__ = [
    "DEFAULT_HOST",
    "Tau2Action",
    "Tau2Client",
    "Tau2Environment",
    "Tau2Observation",
    "Tau2Server",
    "Tau2State",
    "make_app",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


# ---------------------------------------------------------------------------------------------- wire types


class Tau2Action(Action):
    """One agent turn, in any form the env's ``step`` takes."""

    action: Union[str, dict[str, Any], list[dict[str, Any]]] = Field(
        ...,
        description=(
            "text for the customer; an OpenAI assistant message ({'role': 'assistant', 'content': ..., "
            "'tool_calls': [...]}); one call {'name': ..., 'arguments': {...}} or a list of them; or raw model text "
            "with tool-call markup (read by the env's parser)"
        ),
    )


class Tau2Observation(Observation):
    """The agent's view after a reset or a step; at the end also the reward breakdown and the tau2 record.

    ``done`` is ``terminated or truncated``. As in the Gymnasium env, an episode that ends during ``reset`` (the
    customer stops at once) reports ``episode_over=True`` with ``done=False``: the next step returns the terminal
    transition and its reward.
    """

    messages: Union[list[dict[str, Any]], str] = Field(
        default_factory=list,
        description="the agent's view: OpenAI chat messages, system prompt first (obs_format='text': a transcript)",
    )
    tools: Optional[list[dict[str, Any]]] = Field(
        default=None, description="the OpenAI tool schemas the agent may call (in the reset observation)"
    )
    messages_offset: int = Field(
        default=0,
        description=(
            "incremental observations (reset option incremental=true): `messages` holds the view from this index "
            "on, the earlier ones being the previous observation's; 0: the whole view"
        ),
    )
    task_id: Optional[str] = None
    episode_id: Optional[str] = Field(default=None, description="the tau2 episode id")
    step_count: int = Field(default=0, description="upstream's orchestrator step counter")
    num_errors: int = 0
    terminated: bool = False
    truncated: bool = False
    episode_over: bool = False
    termination_reason: Optional[str] = None
    reward_info: Optional[dict[str, Any]] = Field(default=None, description="upstream's reward breakdown")
    tau2_reward: Optional[float] = Field(default=None, description="upstream's reward before the reward mode")
    error: Optional[str] = None
    evaluation_error: Optional[str] = None
    simulation_run: Optional[dict[str, Any]] = Field(
        default=None, description="the finished episode as a tau2 SimulationRun dict (at the end)"
    )


class Tau2State(State):
    """The session's episode: ids, who acts next and how it ended."""

    env_id: Optional[str] = None
    task_id: Optional[str] = None
    status: Optional[str] = Field(default=None, description="'agent', 'user' or 'done'")
    termination_reason: Optional[str] = None


# ---------------------------------------------------------------------------------------------- the server side


class _LoadedEnv:
    """The env the sessions share: made once with ``gym.make``; each session gets a sibling of it (or, for an env
    class without ``sibling``, its own ``gym.make``)."""

    def __init__(self, env_id: str, env_kwargs: Optional[dict[str, Any]] = None) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.base = gym.make(env_id, **self.env_kwargs).unwrapped

    def new_env(self) -> Any:
        sibling = getattr(self.base, "sibling", None)
        env = sibling() if sibling is not None else gym.make(self.env_id, **self.env_kwargs).unwrapped
        if hasattr(env, "copy_observations"):
            env.copy_observations = False  # observations are serialized at once, never changed
        return env


def _reset_options(task_id: Any, task_index: Any, incremental: Any, extra: dict[str, Any]) -> dict[str, Any]:
    if extra:
        raise ValueError(
            f"unknown reset option(s) {sorted(extra)}; reset takes seed, task_id, task_index, episode_id, incremental"
        )
    if not isinstance(incremental, bool):
        raise ValueError(f"incremental must be true or false, got {incremental!r}")
    options: dict[str, Any] = {}
    if task_id is not None:
        options["task_id"] = str(task_id)
    if task_index is not None:
        if isinstance(task_index, bool) or not isinstance(task_index, int):
            raise ValueError(f"task_index must be an integer, got {task_index!r}")
        options["task_index"] = task_index
    return options


@contextlib.contextmanager
def _caller_errors() -> Any:
    """A reset the caller got wrong (unknown task id, index out of range, bad option) is a 422 over HTTP; on a
    WebSocket every exception is an error reply on the session."""
    try:
        yield
    except (ValueError, IndexError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from exc


class Tau2Environment(Environment[Tau2Action, Tau2Observation, Tau2State]):
    """One session's episode, as OpenEnv's ``Environment``. Built by the server per WebSocket connection (and per
    stateless HTTP request) from the loaded env it shares with every other session."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # factory and close() of all sessions on one thread (steps run on the event loop): no thread per session
    REQUIRES_SINGLE_THREAD_EXECUTOR = True

    def __init__(self, loaded: _LoadedEnv) -> None:
        super().__init__()
        self._loaded = loaded
        self._env = loaded.new_env()
        user = getattr(self._env, "user", None)
        # a scripted customer never blocks: its turns run inline; an LLM customer is awaited
        self._inline = user is None or _offline(user) or not hasattr(self._env, "begin_step")
        self._episode_id: Optional[str] = None
        self._steps = 0
        self._started = False  # a reset succeeded: steps have an episode to act on
        self._incremental = False
        self._sent = 0  # messages of the view the client holds (incremental observations)
        self._sent_last: Any = None  # the last of them: the view grew from it only if it is still there

    # -------------------------------------------------------------- reset / step

    def reset(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        task_id: Optional[str] = None,
        task_index: Optional[int] = None,
        incremental: bool = False,
        **kwargs: Any,
    ) -> Tau2Observation:
        with _caller_errors():
            options = _reset_options(task_id, task_index, incremental, kwargs)
            obs, info = self._env.reset(seed=seed, options=options)
        return self._after_reset(obs, info, episode_id, incremental)

    async def reset_async(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        task_id: Optional[str] = None,
        task_index: Optional[int] = None,
        incremental: bool = False,
        **kwargs: Any,
    ) -> Tau2Observation:
        if self._inline:
            return self.reset(seed, episode_id, task_id, task_index, incremental, **kwargs)
        env = self._env
        with _caller_errors():
            env.begin_reset(seed=seed, options=_reset_options(task_id, task_index, incremental, kwargs))
        await self._answer_user()
        obs, info = env.end_reset()
        return self._after_reset(obs, info, episode_id, incremental)

    def step(self, action: Tau2Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Tau2Observation:
        self._check_started()
        self._steps += 1
        return self._observation(*self._env.step(action.action))

    async def step_async(self, action: Tau2Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Tau2Observation:
        if self._inline:
            return self.step(action)
        self._check_started()
        self._steps += 1
        env = self._env
        env.begin_step(action.action)
        await self._answer_user()
        return self._observation(*env.end_step())

    async def _answer_user(self) -> None:
        """The customer's turns of the current phase, awaited (a simulator that raises ends the episode as
        ``user_error``, as :meth:`~tau2_gym.episodes.driver.Episode.run_user` does)."""
        env = self._env
        user = env.user
        while (request := env.pending_user_turn()) is not None:
            try:
                reply: Any = await user.agenerate(request)
            except Exception as exc:  # noqa: BLE001 - a broken simulator ends the episode, not the session
                logger.warning("user simulator %s raised %s: %s", type(user).__name__, type(exc).__name__, exc)
                reply = exc
            env.answer_user(reply)

    def _check_started(self) -> None:
        if not self._started:  # 409 over OpenEnv's stateless HTTP /step (every request a fresh session)
            raise HTTPException(409, "no episode in this session: send a reset first (sessions live on /ws)")

    # -------------------------------------------------------------- observations

    def _after_reset(self, obs: Any, info: dict, episode_id: Optional[str], incremental: Any) -> Tau2Observation:
        self._started = True
        self._steps = 0
        self._episode_id = episode_id
        self._incremental = incremental
        self._sent, self._sent_last = 0, None
        out = self._observation(obs, 0.0, False, False, info)
        out.tools = list(info.get("tools") or [])
        out.reward = None
        return out

    def _observation(self, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict) -> Tau2Observation:
        loop = getattr(self._env, "loop", None)
        offset = 0
        if self._incremental and isinstance(obs, list):
            # the agent's view only grows, its message dicts shared between observations: when the last message
            # the client has is still in place, send what came after it
            sent = self._sent
            if 0 < sent <= len(obs) and obs[sent - 1] is self._sent_last:
                offset = sent
            self._sent, self._sent_last = len(obs), (obs[-1] if obs else None)
        fields: dict[str, Any] = {
            "messages": obs[offset:] if offset else obs,
            "messages_offset": offset,
            "task_id": info.get("task_id"),
            "episode_id": None if loop is None else loop.episode_id,
            "step_count": int(info.get("step_count") or 0),
            "num_errors": int(info.get("num_errors") or 0),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "episode_over": bool(info.get("episode_over", False)),
            "done": bool(terminated or truncated),
            "reward": float(reward),
        }
        if "termination_reason" in info:
            fields["termination_reason"] = info["termination_reason"]
        if terminated or truncated:
            fields["reward_info"] = as_dict(info.get("reward_info"))
            tau2 = info.get("tau2_reward")
            fields["tau2_reward"] = None if tau2 is None else float(tau2)
            fields["error"] = info.get("error")
            fields["evaluation_error"] = info.get("evaluation_error")
            run = info.get("simulation_run")
            fields["simulation_run"] = None if run is None else as_dict(run)
        return Tau2Observation.model_construct(**fields)  # built from the env's own output: nothing to validate

    @property
    def state(self) -> Tau2State:
        env = self._env
        loop = getattr(env, "loop", None)
        return Tau2State(
            episode_id=self._episode_id or (None if loop is None else loop.episode_id),
            step_count=self._steps,
            env_id=self._loaded.env_id,
            task_id=None if loop is None else loop.task.id,
            status=None if loop is None else loop.status,
            termination_reason=None if loop is None else loop.termination_reason,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ours = version("tau2-gym")
        except PackageNotFoundError:
            ours = None
        return EnvironmentMetadata(
            name=self._loaded.env_id,
            description=(
                f"tau2-bench {self._loaded.env_id} (tau2-gym): you are the customer-service agent; a simulated "
                "customer and the domain's tools step inside the env; the reward is upstream's tau2 reward."
            ),
            version=ours,
        )

    def close(self) -> None:
        self._started = False
        self._env.close()


# ---------------------------------------------------------------------------------------------- the guard


def _error_frame(message: str, code: str) -> dict[str, Any]:
    return {"type": "websocket.send", "text": json.dumps({"type": "error", "data": {"message": message, "code": code}})}


class _Guard:
    """ASGI layer in front of OpenEnv's app: bearer token, message size limit, idle expiry, hostile frames.

    A frame it refuses gets an OpenEnv-style error reply (``{"type": "error", "data": {"message", "code"}}``) on its
    own session, which stays open; an idle session gets an error reply and is closed (its slot is freed).
    """

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
        pending: Optional[asyncio.Task] = None

        async def guarded_receive() -> dict:
            nonlocal pending
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(receive())
                    pending.add_done_callback(_consume)
                if idle is None:
                    message = await pending
                else:
                    done, _ = await asyncio.wait((pending,), timeout=idle)
                    if not done:  # idle too long: tell the client, let the app close the session and free its slot
                        await send(_error_frame(f"session expired after {idle:g} s without a message", "SESSION_ERROR"))
                        return {"type": "websocket.disconnect", "code": 1001}
                    message = pending.result()
                pending = None
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


def _consume(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a receive abandoned by an idle expiry never logs "never retrieved"


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
    return None


async def _respond(send: Any, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def make_app(
    env_id: str = "tau2/airline-v0",
    env_kwargs: Optional[dict[str, Any]] = None,
    *,
    max_sessions: int = 1024,
    idle_timeout: Optional[float] = 600.0,
    max_message_bytes: int = 1 << 20,
    token: Optional[str] = None,
) -> Any:
    """The ASGI app serving ``env_id`` (made with ``gym.make(env_id, **env_kwargs)`` once, here): OpenEnv's
    ``create_app`` behind :class:`_Guard`. ``max_sessions`` bounds the concurrent WebSocket sessions (one more
    gets OpenEnv's ``CAPACITY_REACHED`` reply); ``idle_timeout`` seconds without a message close a session (None:
    never); ``max_message_bytes`` bounds a frame or request body; ``token``: clients must send
    ``Authorization: Bearer <token>`` (``/health`` stays open)."""
    if int(max_sessions) < 1:
        raise ValueError(f"max_sessions={max_sessions!r} must be >= 1")
    if idle_timeout is not None and float(idle_timeout) <= 0:
        raise ValueError(f"idle_timeout={idle_timeout!r} must be > 0 (or None: never)")
    if int(max_message_bytes) < 1024:
        raise ValueError(f"max_message_bytes={max_message_bytes!r} must be >= 1024")
    loaded = _LoadedEnv(env_id, env_kwargs)
    inner = create_app(
        functools.partial(Tau2Environment, loaded),
        Tau2Action,
        Tau2Observation,
        env_name=env_id,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=int(max_sessions), session_timeout=None),
    )
    app = _Guard(inner, token=token, max_message_bytes=max_message_bytes, idle_timeout=idle_timeout)
    app.loaded = loaded  # type: ignore[attr-defined]
    return app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Tau2Server:
    """``make_app`` on a bound socket, run by uvicorn: :meth:`run` blocks (``tau2-gym serve``); :meth:`start` runs
    it on a background thread (tests, benchmarks, notebooks) and :meth:`stop` ends it. ``port=0`` picks a free
    port; :attr:`url` is where clients connect. The default host is the loopback interface: another host is
    served only when asked."""

    def __init__(
        self,
        env_id: str = "tau2/airline-v0",
        env_kwargs: Optional[dict[str, Any]] = None,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        max_sessions: int = 1024,
        idle_timeout: Optional[float] = 600.0,
        max_message_bytes: int = 1 << 20,
        token: Optional[str] = None,
        log_level: str = "warning",
    ) -> None:
        self.env_id = env_id
        self.max_sessions = int(max_sessions)
        self.app = make_app(
            env_id,
            env_kwargs,
            max_sessions=max_sessions,
            idle_timeout=idle_timeout,
            max_message_bytes=max_message_bytes,
            token=token,
        )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, int(port)))
        self.host, self.port = host, self.socket.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level=log_level,
            # frames between max_message_bytes and this get the guard's error reply; beyond it the connection
            # is closed (1009) before the frame is buffered whole
            ws_max_size=max(4 * int(max_message_bytes), int(max_message_bytes) + (1 << 20)),
            ws_per_message_deflate=False,  # compression costs more CPU per step than it saves on localhost
            h11_max_incomplete_event_size=64 * 1024,
            backlog=max(2048, 2 * self.max_sessions),
        )
        self.server = uvicorn.Server(config)
        # listening from here on: a client that connects as soon as the URL is printed waits in the backlog
        self.socket.listen(config.backlog)
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self, workers: int = 1) -> None:
        """Serve until interrupted (Ctrl-C / SIGTERM). ``workers`` > 1 forks that many server processes on the one
        listening socket (the kernel hands each new connection to one of them; a session stays in the process
        that accepted it): one process spends about a millisecond of CPU per step, so many sessions waiting on
        fast LLM calls need several cores. The loaded data is shared copy-on-write; ``max_sessions`` is per
        process."""
        _raise_fd_limit(self.max_sessions)
        if workers < 1:
            raise ValueError(f"workers must be >= 1; got {workers}")
        children: list[int] = []
        for _ in range(workers - 1):
            pid = os.fork()
            if pid == 0:  # a worker: serve, then leave without running the parent's clean-up
                code = 0
                try:
                    self.server.run(sockets=[self.socket])
                except BaseException:  # noqa: BLE001 - a worker's failure is its exit status, seen by the parent
                    code = 1
                os._exit(code)
            children.append(pid)
        try:
            self.server.run(sockets=[self.socket])
        finally:
            for pid in children:
                try:
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass

    def start(self, timeout: float = 30.0) -> Tau2Server:
        """Serve on a daemon thread; returns once the server accepts connections."""
        _raise_fd_limit(self.max_sessions)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="tau2-openenv-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenEnv server for {self.env_id} did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.socket.close()

    def __enter__(self) -> Tau2Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _raise_fd_limit(sessions: int) -> None:
    """One socket per session: lift the soft open-file limit toward the hard one when the sessions need it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * sessions + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


# ---------------------------------------------------------------------------------------------- the client


class Tau2Client(EnvClient[Tau2Action, Tau2Observation, Tau2State]):
    """OpenEnv's ``EnvClient`` for a tau2 server: ``step`` takes a :class:`Tau2Action` or any raw action form
    (text, an assistant message dict, calls); ``token`` is sent as a bearer token. Async by default; ``.sync()``
    gives OpenEnv's synchronous wrapper.

    >>> with Tau2Client("http://127.0.0.1:8000").sync() as env:   # doctest: +SKIP
    ...     result = env.reset(task_id="0")
    ...     tools = result.observation.tools
    ...     while not result.done:
    ...         result = env.step(my_policy(result.observation.messages, tools))
    ...     print(result.reward, result.observation.termination_reason)
    """

    def __init__(self, base_url: str, *, token: Optional[str] = None, incremental: bool = True, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._token = token
        self._incremental = incremental
        self._messages: list = []  # the session's view so far (incremental observations are appended to it)

    async def reset(self, **kwargs: Any) -> StepResult[Tau2Observation]:
        """OpenEnv's reset; ``incremental`` (default: the client's) has the server send only the messages each
        step adds -- this client puts the whole view back together, so ``observation.messages`` is always whole."""
        if self._incremental:
            kwargs.setdefault("incremental", True)
        return await super().reset(**kwargs)

    async def connect(self) -> Tau2Client:
        if self._ws is not None:
            return self
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        lowered = self._ws_url.lower()
        local = "://localhost" in lowered or "://127." in lowered or "://[::1]" in lowered
        try:
            self._ws = await ws_connect(
                self._ws_url,
                open_timeout=self._connect_timeout,
                max_size=self._max_message_size,
                additional_headers=headers,
                compression=None,
                proxy=None if local else True,
            )
        except Exception as exc:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
        return self

    async def _receive(self) -> dict[str, Any]:
        assert self._ws is not None
        timeout = getattr(asyncio, "timeout", None)
        if timeout is None:  # Python 3.10: OpenEnv's own way
            return await super()._receive()
        async with timeout(self._message_timeout):  # no task per message, as wait_for makes on 3.11
            raw = await self._ws.recv()
        return json.loads(raw)

    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, Tau2Action):
            return action.model_dump(exclude_defaults=True) | {"action": action.action}
        return {"action": action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Tau2Observation]:
        fields = dict(payload.get("observation") or {})
        messages, offset = fields.get("messages"), int(fields.get("messages_offset") or 0)
        if isinstance(messages, list):
            if offset:
                if offset > len(self._messages):
                    raise RuntimeError(f"incremental observation from message {offset}, but {len(self._messages)} held")
                messages = fields["messages"] = self._messages[:offset] + messages
                fields["messages_offset"] = 0
            self._messages = list(messages)
        reward, done = payload.get("reward"), bool(payload.get("done", False))
        observation = Tau2Observation.model_construct(**fields, reward=reward, done=done)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> Tau2State:
        return Tau2State.model_validate(payload)
