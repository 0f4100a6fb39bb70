"""The tau2 OpenEnv server: OpenEnv's app for one loaded env behind the guard, run by uvicorn (OpenEnv's
``server/app.py``; ``tau2-gym serve`` runs it).

>>> from tau2_gym.frameworks.openenv import Tau2Client, Tau2Server   # doctest: +SKIP
>>> server = Tau2Server("tau2/airline-v0").start()                  # doctest: +SKIP
>>> with Tau2Client(server.url).sync() as env:                      # doctest: +SKIP
...     result = env.reset(task_id="0")
...     result = env.step("How can I help?")
"""

from __future__ import annotations

import functools
import importlib.util
import ipaddress
import os
import resource
import signal
import socket
import threading
import time
from typing import Any, Optional

import uvicorn
from openenv.core.env_server import create_app
from openenv.core.env_server.types import ConcurrencyConfig

from tau2_gym.frameworks.openenv.environment import LoadedEnv, Tau2Environment
from tau2_gym.frameworks.openenv.guard import Guard
from tau2_gym.frameworks.openenv.models import Tau2Action, Tau2Observation, Tau2State

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "LOOPS", "Tau2Server", "is_loopback", "make_app"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: the event loops uvicorn runs a server on; ``auto`` is uvloop when it is installed (the openenv extra installs
#: it: the loop and its transports are a share of every served step), else asyncio's
LOOPS = ("auto", "asyncio", "uvloop")


def event_loop(loop: str) -> str:
    """The loop ``loop`` (one of :data:`LOOPS`) names here: ``asyncio`` or ``uvloop``."""
    if loop not in LOOPS:
        raise ValueError(f"loop={loop!r}: expected one of {', '.join(LOOPS)}")
    if loop != "asyncio" and importlib.util.find_spec("uvloop") is None:
        if loop == "uvloop":
            raise ValueError("loop='uvloop' needs the uvloop package: pip install uvloop")
        return "asyncio"
    return "uvloop" if loop == "auto" else loop


def make_app(
    env_id: str = "tau2/airline-v0",
    env_kwargs: Optional[dict[str, Any]] = None,
    *,
    max_sessions: int = 1024,
    idle_timeout: Optional[float] = 600.0,
    max_message_bytes: int = 1 << 20,
    token: Optional[str] = None,
    expose_gold: bool = False,
) -> Any:
    """The ASGI app serving ``env_id`` (made with ``gym.make(env_id, **env_kwargs)`` once, here): OpenEnv's
    ``create_app`` behind the :class:`~tau2_gym.frameworks.openenv.guard.Guard`. ``max_sessions`` bounds the
    concurrent WebSocket sessions (one more gets OpenEnv's ``CAPACITY_REACHED`` reply); ``idle_timeout`` seconds
    without a message close a session (None: never); ``max_message_bytes`` bounds a frame or request body;
    ``token``: clients must send ``Authorization: Bearer <token>`` (``/health`` stays open); ``expose_gold``: the
    Task API serves the tasks' gold actions and assertions too."""
    if int(max_sessions) < 1:
        raise ValueError(f"max_sessions={max_sessions!r} must be >= 1")
    if idle_timeout is not None and float(idle_timeout) <= 0:
        raise ValueError(f"idle_timeout={idle_timeout!r} must be > 0 (or None: never)")
    if int(max_message_bytes) < 1024:
        raise ValueError(f"max_message_bytes={max_message_bytes!r} must be >= 1024")
    loaded = LoadedEnv(env_id, env_kwargs, expose_gold=expose_gold)
    inner = create_app(
        functools.partial(Tau2Environment, loaded),
        Tau2Action,
        Tau2Observation,
        env_name=loaded.name,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=int(max_sessions), session_timeout=None),
        state_cls=Tau2State,
    )
    app = Guard(inner, token=token, max_message_bytes=max_message_bytes, idle_timeout=idle_timeout)
    app.loaded = loaded
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
    port; :attr:`url` is where clients connect; ``loop``: one of :data:`LOOPS` (:attr:`loop`: the one it runs on).
    The default host is the loopback interface: another host is served only when asked."""

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
        expose_gold: bool = False,
        log_level: str = "warning",
        loop: str = "auto",
    ) -> None:
        self.env_id = env_id
        self.loop = event_loop(loop)  # checked before the env is loaded
        self.max_sessions = int(max_sessions)
        self.app = make_app(
            env_id,
            env_kwargs,
            max_sessions=max_sessions,
            idle_timeout=idle_timeout,
            max_message_bytes=max_message_bytes,
            token=token,
            expose_gold=expose_gold,
        )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, int(port)))
        self.host, self.port = host, self.socket.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level=log_level,
            loop=self.loop,
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
        that accepted it): a process's CPU per step bounds its steps/s (docs/performance.md), so many sessions
        waiting on fast LLM calls need several cores. The loaded data is shared copy-on-write; ``max_sessions`` is per
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
