"""The user-simulator interface.

Simulators are *stateless*: the environment owns each episode's user state and hands the simulator a
:class:`UserTurnRequest` holding everything needed for the next user message -- the system prompt, the
user's own view of the conversation (role-flipped as tau2 does: the user's own turns as ``assistant``,
the agent's texts as ``user``, the user's tool results as ``tool``), the user tools and the task. That
makes batching trivial: a vector env collects the pending requests of all episodes and calls
:meth:`UserSimulator.generate_batch` (or awaits :meth:`UserSimulator.agenerate` concurrently) once.

A simulator that cannot answer raises :class:`UserSimulatorError`; the environment then ends the
episode as ``user_error`` with the reason in ``info`` -- never an exception out of ``step``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence, Union

from tau2_gym.core.messages import UserMessage
from tau2_gym.core.turns import UserSimulatorError, UserTurnRequest

__all__ = ["UserSimulator", "UserSimulatorError", "UserTurnRequest"]


class UserSimulator:
    """Base class. Implement :meth:`generate`; override the async/batched entry points when faster."""

    implementation: str = "user_simulator"
    #: how a caller holding many episodes (a vector env) should ask: False -- one :meth:`generate_batch` call per
    #: round (a local model batches, a scripted user answers inline); True -- await :meth:`agenerate` for each
    #: episode, all in flight together (requests to a server: each episode goes on as soon as its reply is in)
    answers_concurrently: bool = False

    def generate(self, request: UserTurnRequest) -> UserMessage:
        """Next user message (text, or tool calls with ``requestor='user'``). Raise UserSimulatorError."""
        raise NotImplementedError

    async def agenerate(self, request: UserTurnRequest) -> UserMessage:
        """Async entry point; the default runs :meth:`generate` in a worker thread."""
        return await asyncio.to_thread(self.generate, request)

    def generate_batch(self, requests: Sequence[UserTurnRequest]) -> list[Union[UserMessage, Exception]]:
        """One message (or the exception) per request; the default loops over :meth:`generate`."""
        out: list[Union[UserMessage, Exception]] = []
        for req in requests:
            try:
                out.append(self.generate(req))
            except Exception as exc:  # noqa: BLE001 - returned, not raised: one bad episode must not sink a batch
                out.append(exc)
        return out

    def info(self) -> dict[str, Any]:
        """``user_info`` for a results file: implementation, llm, llm_args."""
        return {"implementation": self.implementation, "llm": None, "llm_args": None}
