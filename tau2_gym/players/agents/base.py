"""The agent-policy interface: a policy answers :class:`~tau2_gym.core.turns.AgentTurnRequest` s.

A request is the agent's side of one episode at one turn: system prompt, the agent's view of the conversation in
OpenAI chat format, the tool schemas, the task and the episode seed. Policies are stateless per request (the
scripted ones keep one plan per episode id), so one instance serves thousands of concurrent episodes:
:meth:`AgentPolicy.agenerate` for asyncio rollouts, :meth:`AgentPolicy.generate_batch` for batched use.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from tau2_gym.core.turns import AgentTurnRequest, PolicyError

__all__ = ["AgentPolicy", "AgentTurnRequest", "PolicyError"]


class AgentPolicy:
    """Base class. Implement :meth:`generate` (or :meth:`agenerate` for I/O-bound policies).

    ``generate`` returns the agent's turn in any form the env accepts (an :class:`AssistantMessage`, an
    OpenAI assistant-message dict, text, tool calls); raise :class:`PolicyError` when it cannot.
    """

    implementation: str = "llm_agent"
    #: True for policies that never block (scripted): rollouts call them inline instead of in a thread
    offline: bool = False

    def generate(self, request: AgentTurnRequest) -> Any:
        raise NotImplementedError

    async def agenerate(self, request: AgentTurnRequest) -> Any:
        """Async entry point; the default runs :meth:`generate` in a worker thread."""
        return await asyncio.to_thread(self.generate, request)

    def generate_batch(self, requests: Sequence[AgentTurnRequest]) -> list[Any]:
        """One action (or the exception) per request."""
        out: list[Any] = []
        for req in requests:
            try:
                out.append(self.generate(req))
            except Exception as exc:  # noqa: BLE001 - returned, not raised
                out.append(exc)
        return out

    def episode_done(self, episode_id: str) -> None:
        """Called once an episode is over (policies with per-episode state drop it here)."""

    def info(self) -> dict[str, Any]:
        """``agent_info`` for a results file."""
        return {"implementation": self.implementation, "llm": None, "llm_args": None}

    def close(self) -> None:
        """Release clients and threads."""
