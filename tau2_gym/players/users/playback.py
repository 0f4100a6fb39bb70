"""A user simulator that plays back the user turns of a recorded trajectory (for :func:`tau2_gym.replay`).

Its ``turn``-th message is a fresh copy of the recorded ``turn``-th user message after the task's opening
(text, or tool calls, which the environment then runs through the domain's user tools, so their results are
recomputed rather than copied). When the record has no further user turn it raises
:class:`~tau2_gym.players.users.base.UserSimulatorError` -- the episode ends as ``user_error`` -- which is also how a
recorded ``user_error`` (the simulator failed at that point) is reproduced.

Unlike the other simulators it holds one episode's script: :meth:`PlaybackUser.load` it before each
``reset``. One instance therefore serves one env at a time (replay drives envs one episode after another).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tau2_gym.core.messages import ToolCall, UserMessage
from tau2_gym.players.users.base import UserSimulator, UserSimulatorError, UserTurnRequest


def copy_user_message(msg: UserMessage) -> UserMessage:
    """A fresh UserMessage with the recorded text, calls (tagged as the user's, ids kept), cost and usage."""
    calls = (
        None
        if msg.tool_calls is None
        else [ToolCall(tc.name, dict(tc.arguments), id=tc.id, requestor="user") for tc in msg.tool_calls]
    )
    return UserMessage(content=msg.content, tool_calls=calls, cost=msg.cost, usage=msg.usage, raw_data=msg.raw_data)


class PlaybackUser(UserSimulator):
    """Says the recorded user messages in order; raises :class:`UserSimulatorError` once they run out.

    Args:
        turns: the recorded user messages (after the task's opening: greeting or message history).
        end_error: the reason given when the turns run out (default: says the record has no more turns).
    """

    implementation = "playback_user"

    def __init__(self, turns: Sequence[UserMessage] = (), end_error: Optional[str] = None) -> None:
        self.turns: list[UserMessage] = list(turns)
        self.end_error = end_error

    def load(self, turns: Sequence[UserMessage], end_error: Optional[str] = None) -> None:
        """Set the script of the next episode."""
        self.turns = list(turns)
        self.end_error = end_error

    def generate(self, request: UserTurnRequest) -> UserMessage:
        if request.turn < len(self.turns):
            return copy_user_message(self.turns[request.turn])
        raise UserSimulatorError(
            self.end_error or f"playback: the record has no user turn {request.turn + 1} (it holds {len(self.turns)})"
        )

    def info(self) -> dict[str, Any]:
        return {"implementation": self.implementation, "llm": None, "llm_args": None}
