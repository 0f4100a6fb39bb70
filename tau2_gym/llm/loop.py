"""An event loop of its own in a daemon thread: how synchronous callers use the async LLM path.

A vector env's step or a batch of user turns is synchronous code, but its requests should travel the way a
rollout's do -- the async transport (:mod:`tau2_gym.llm.http`), one connection pool, one concurrency gate, the
same retries -- rather than through a thread per request. :class:`LoopThread` runs one loop for the life of its
owner (so connections are kept alive across batches) and runs coroutines on it for any calling thread,
including one that runs an event loop of its own (a notebook).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import Any, Coroutine, Optional, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread, pid: int) -> None:
    """Finalise async generators on the loop (the loop clients' closers: :mod:`tau2_gym.llm.client`), stop it,
    close it. Called by :meth:`LoopThread.close` or when the owner is collected or the interpreter exits."""
    if pid != os.getpid() or loop.is_closed():  # a forked child: the thread is not ours to stop
        return
    if thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(10)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    if not thread.is_alive():
        loop.close()


class LoopThread:
    """One event loop running in a daemon thread, started on first use and again after a fork."""

    def __init__(self, name: str = "tau2-llm-loop") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._pid = 0
        self._finalizer: Optional[weakref.finalize] = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if needed)."""
        if self._loop is None or self._pid != os.getpid():
            with self._lock:
                if self._loop is None or self._pid != os.getpid():
                    self._start()
        assert self._loop is not None
        return self._loop

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name=self.name, daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._thread, self._pid = loop, thread, os.getpid()
        self._finalizer = weakref.finalize(self, _stop, loop, thread, self._pid)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here). A caller interrupted
        while waiting cancels it."""
        loop = self.loop()
        if threading.current_thread() is self._thread:
            coro.close()  # never to run: no "never awaited" warning
            raise RuntimeError(f"{self.name}: run() called from the loop's own thread would wait for ever")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop the loop (its clients are closed inside it first); the next :meth:`run` starts a new one."""
        with self._lock:
            finalizer, self._finalizer = self._finalizer, None
            self._loop = self._thread = None
        if finalizer is not None:
            finalizer()

    def __repr__(self) -> str:
        state: Any = "running" if self._loop is not None else "idle"
        return f"LoopThread({self.name!r}, {state})"
