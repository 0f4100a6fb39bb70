"""What a driver hands the players at each turn, and what players raise when they cannot answer.

Players are stateless per request: the episode owns the conversation and sends the agent an
:class:`AgentTurnRequest` and the customer a :class:`UserTurnRequest` holding everything the next message needs.
That is what lets one simulator serve thousands of episodes and a vector env batch their turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from tau2_gym.core.tasks import Task

__all__ = ["AgentTurnRequest", "UserTurnRequest", "PolicyError", "UserSimulatorError"]


class UserSimulatorError(RuntimeError):
    """The simulator could not produce a message (endpoint down, retries exhausted, bad output)."""


class PolicyError(RuntimeError):
    """The policy could not produce the agent's next message (endpoint down, retries spent, bad output)."""


@dataclass
class UserTurnRequest:
    """Everything a user simulator needs to produce the next user message of one episode."""

    episode_id: str
    system_prompt: str
    messages: list[dict[str, Any]]  # user's view, role-flipped, OpenAI chat format, system prompt excluded; the
    # episode's own dicts in a fresh list: read them, do not change them (copy first)
    tools: Optional[list[dict[str, Any]]]  # OpenAI schemas of the user's tools (None: the user has none)
    task: Task
    seed: Optional[int] = None
    turn: int = 0  # number of user messages generated so far in this episode
    extra: dict[str, Any] = field(default_factory=dict)

    def openai_messages(self) -> list[dict[str, Any]]:
        """System prompt + the user's view: what an OpenAI-compatible user model is sent."""
        return [{"role": "system", "content": self.system_prompt}] + self.messages


@dataclass
class AgentTurnRequest:
    """Everything a policy needs for the agent's next message in one episode."""

    episode_id: str
    system_prompt: str
    messages: list[dict[str, Any]]  # the agent's view, OpenAI chat format, system prompt excluded; the episode's
    # own dicts in a fresh list: read them, do not change them (copy first)
    tools: list[dict[str, Any]]  # OpenAI tool schemas the agent may call
    task: Task
    seed: Optional[int] = None
    turn: int = 0  # agent messages generated so far in this episode
    solo: bool = False
    tool_choice: Optional[str] = None  # None: the policy's default ("auto" when there are tools)
    extra: dict[str, Any] = field(default_factory=dict)

    def openai_messages(self) -> list[dict[str, Any]]:
        """System prompt + the agent's view: what an OpenAI-compatible agent model is sent."""
        return [{"role": "system", "content": self.system_prompt}] + self.messages
