"""An LLM user simulator over any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang, ...).

It sends what upstream tau2's user simulator sends -- the user system prompt plus the role-flipped
conversation, the user's tools with ``tool_choice="auto"`` when there are any, ``temperature`` 0.0 by
default and the episode seed -- and turns the reply into a :class:`~tau2_gym.core.messages.UserMessage`
(content, tool calls re-tagged ``requestor="user"`` with their ids, cost, usage, the whole response as
``raw_data``).

Requests go through the one LLM client of the package (:class:`~tau2_gym.llm.client.ChatClient`): its
retries, backoff, empty-reply re-requests, reply cache and cost apply here. A user tool call that cannot be
read is retried like any unusable reply (the user is not the policy under test). Every failure ends as
:class:`~tau2_gym.players.users.base.UserSimulatorError` whose message names the endpoint, the model, the
reason and the number of attempts; the environment records it as a ``user_error`` episode end -- the same
outcome class as upstream's abort, without killing the run.

``openai`` is an optional dependency (``pip install tau2-gym[openai]``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from tau2_gym.core.messages import ToolCall, UserMessage
from tau2_gym.llm.client import DEFAULT_MODEL, ChatClient, LLMConfig, LLMError, Reply, chat_message
from tau2_gym.players.users.base import UserSimulator, UserSimulatorError, UserTurnRequest

__all__ = ["OpenAIUserConfig", "OpenAIUserSimulator"]

#: upstream tau2's default user-simulator model
DEFAULT_USER_MODEL = DEFAULT_MODEL


@dataclass
class OpenAIUserConfig(LLMConfig):
    """Settings of :class:`OpenAIUserSimulator` (the client's, plus the user's tool choice). Print
    ``describe()`` to see every value."""

    model: str = field(default=DEFAULT_USER_MODEL, metadata={"help": "Model name sent to the endpoint."})
    tool_choice: str = field(
        default="auto", metadata={"help": "tool_choice sent when the user has tools (upstream: auto)."}
    )
    cache_dir: Optional[str] = field(
        default=None, metadata={"help": "Older name of `cache` (a path); wins over `cache` when set."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cache_dir:
            self.cache = self.cache_dir


def _read(raw: dict) -> tuple[Optional[str], Optional[list[ToolCall]]]:
    return chat_message(raw, "user")


class OpenAIUserSimulator(UserSimulator):
    """Stateless LLM user over an OpenAI-compatible endpoint; thread-safe, concurrent in batch and async use."""

    implementation = "user_simulator"
    answers_concurrently = True

    def __init__(self, config: Optional[OpenAIUserConfig] = None, **overrides: Any) -> None:
        base = config if config is not None else OpenAIUserConfig()
        self.config = dataclasses.replace(base, **overrides) if overrides else base
        self.client = ChatClient(self.config, who="user simulator")
        self.client.require_sdk()  # a missing openai package is said now, not at the first user turn

    def __repr__(self) -> str:
        return f"OpenAIUserSimulator({self.config!r})"

    def __reduce__(self) -> tuple:
        # it travels as its settings (to a vector env's worker processes): the client's loop, locks and
        # connections are the sending process's own
        return (type(self), (self.config,))

    def with_max_concurrency(self, n: int) -> OpenAIUserSimulator:
        """The same simulator with a gate of ``n`` requests in flight (how a vector env splits the gate
        between its worker processes)."""
        return type(self)(dataclasses.replace(self.config, max_concurrency=n))

    def request_kwargs(self, request: UserTurnRequest) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments for one request (public so callers can log/inspect)."""
        return self.client.request_kwargs(
            request.openai_messages(), request.tools, self.config.tool_choice, request.seed
        )

    @staticmethod
    def _message(reply: Reply[tuple[Optional[str], Optional[list[ToolCall]]]]) -> UserMessage:
        content, calls = reply.value
        return UserMessage(content=content, tool_calls=calls, usage=reply.usage, cost=reply.cost, raw_data=reply.raw)

    def generate(self, request: UserTurnRequest) -> UserMessage:
        try:
            return self._message(self.client.complete(self.request_kwargs(request), _read))
        except LLMError as exc:
            raise UserSimulatorError(str(exc)) from exc

    async def agenerate(self, request: UserTurnRequest) -> UserMessage:
        try:
            return self._message(await self.client.acomplete(self.request_kwargs(request), _read))
        except LLMError as exc:
            raise UserSimulatorError(str(exc)) from exc

    def generate_batch(self, requests: Sequence[UserTurnRequest]) -> list[Union[UserMessage, Exception]]:
        """All requests in flight at once (up to ``max_concurrency``) on the client's own event loop, through the
        async transport a rollout uses; one message or exception each, in order."""
        return self.client.batch(self.agenerate, requests)

    def cache_stats(self) -> dict[str, Any]:
        """Hits, misses and entries stored by this simulator's reply cache (``on`` False without one)."""
        return self.client.cache_stats()

    def close(self) -> None:
        """Release the batch loop and the sync HTTP client (async clients die with their loop)."""
        self.client.close()

    async def aclose(self) -> None:
        """Close the async client of the running loop."""
        await self.client.aclose()

    def info(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "llm": self.config.model,
            "llm_args": self.client.recorded_args(),
        }
