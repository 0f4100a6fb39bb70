"""Offline user simulators: fixed replies (:class:`ScriptedUser`) and a task-following oracle (:class:`OracleUser`).

Both are stateless like every simulator here: all they know comes from the :class:`UserTurnRequest` (the
user's role-flipped view, the task, the turn number), so one instance serves any number of episodes.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional, Sequence, Union

from tau2_gym.core.messages import STOP, USER_STOP_TOKENS, ToolCall, UserMessage
from tau2_gym.core.tasks import Action, StructuredUserInstructions, Task
from tau2_gym.players.users.base import UserSimulator, UserTurnRequest

Reply = Union[str, dict, UserMessage, ToolCall, Sequence[ToolCall]]


def to_user_message(reply: Any) -> UserMessage:
    """A fresh UserMessage from a scripted reply: text, a UserMessage, a ToolCall (list) or a message dict."""
    if isinstance(reply, UserMessage):
        calls = (
            None
            if reply.tool_calls is None
            else [ToolCall(tc.name, dict(tc.arguments), id=tc.id, requestor="user") for tc in reply.tool_calls]
        )
        return UserMessage(content=reply.content, tool_calls=calls, cost=reply.cost, usage=reply.usage)
    if isinstance(reply, str):
        return UserMessage(content=reply)
    if isinstance(reply, ToolCall):
        reply = [reply]
    if isinstance(reply, (list, tuple)):
        return UserMessage(
            content=None,
            tool_calls=[
                ToolCall(tc.name, dict(tc.arguments), id=tc.id, requestor="user")
                if isinstance(tc, ToolCall)
                else ToolCall.from_dict({**tc, "requestor": "user"})
                for tc in reply
            ],
        )
    if isinstance(reply, dict):
        calls = reply.get("tool_calls")
        return UserMessage(
            content=reply.get("content"),
            cost=reply.get("cost"),
            tool_calls=None
            if calls is None
            else [ToolCall.from_dict({**_flat(c), "requestor": "user"}) for c in calls],
        )
    raise TypeError(f"cannot use {type(reply).__name__} as a scripted user reply")


def _flat(call: dict) -> dict:
    fn = call.get("function")
    if isinstance(fn, dict):
        args = fn.get("arguments")
        return {
            "id": call.get("id", ""),
            "name": fn.get("name"),
            "arguments": json.loads(args) if isinstance(args, str) and args.strip() else (args or {}),
        }
    return call


class ScriptedUser(UserSimulator):
    """Says ``replies[turn]`` on its ``turn``-th message, then ``then`` (default ``###STOP###``) forever.

    ``replies`` is a list (shared by all episodes), a dict ``{task_id: list}``, or a callable
    ``fn(request) -> reply`` for anything smarter.
    """

    implementation = "scripted_user"

    def __init__(
        self,
        replies: Union[Sequence[Reply], dict[str, Sequence[Reply]], Callable[[UserTurnRequest], Reply]] = (),
        then: Optional[Reply] = STOP,
    ) -> None:
        self.replies = replies
        self.then = then

    def generate(self, request: UserTurnRequest) -> UserMessage:
        if callable(self.replies):
            return to_user_message(self.replies(request))
        script = self.replies.get(request.task.id, ()) if isinstance(self.replies, dict) else self.replies
        if request.turn < len(script):
            return to_user_message(script[request.turn])
        if self.then is None:
            raise IndexError(f"scripted user ran out of replies after {len(script)} turns (task {request.task.id!r})")
        return to_user_message(self.then)

    def info(self) -> dict[str, Any]:
        return {"implementation": self.implementation, "llm": None, "llm_args": None}


def opening_line(task: Task) -> str:
    """What the oracle user says first: the reason for the call (with known info), or the instructions --
    without the stop tokens free-form instructions may quote (it would end the conversation at once)."""
    instr = task.user_scenario.instructions
    if isinstance(instr, StructuredUserInstructions):
        text = instr.reason_for_call.strip()
        if instr.known_info:
            text += "\n" + instr.known_info.strip()
        return text
    text = str(instr)
    for token in USER_STOP_TOKENS:
        text = text.replace(token, "")
    return text.strip()


def user_gold_actions(task: Task) -> list[Action]:
    ec = task.evaluation_criteria
    return [a for a in (ec.actions or []) if a.requestor == "user"] if ec is not None else []


class OracleUser(UserSimulator):
    """A user that follows the task and performs its user-side gold actions when the agent asks for them.

    Turn 0: states the request (:func:`opening_line`). Afterwards: if the agent's last text names the next
    user-side gold action not yet performed, it calls that tool (one call per turn, in gold order, while the
    agent's request names the next one), then says ``done_text``; on any other agent text it ends the
    conversation with ``###STOP###``. Deterministic and offline: the reference user for tests and the demo.
    """

    implementation = "oracle_user"

    def __init__(self, done_text: str = "I did that. What's next?", stop_text: str = STOP) -> None:
        self.done_text = done_text
        self.stop_text = stop_text

    def generate(self, request: UserTurnRequest) -> UserMessage:
        if request.turn == 0:
            return UserMessage(content=opening_line(request.task))
        msgs = request.messages
        performed = sum(len(m.get("tool_calls") or ()) for m in msgs if m["role"] == "assistant")
        pending = user_gold_actions(request.task)[performed:]
        asked = next((m.get("content") or "" for m in reversed(msgs) if m["role"] == "user"), "")
        if pending and pending[0].name in asked:
            action = pending[0]
            return UserMessage(
                content=None,
                tool_calls=[
                    ToolCall(action.name, dict(action.arguments), id=f"user_call_{performed}", requestor="user")
                ],
            )
        if msgs and msgs[-1]["role"] == "tool":
            return UserMessage(content=self.done_text)
        return UserMessage(content=self.stop_text)

    def info(self) -> dict[str, Any]:
        return {"implementation": self.implementation, "llm": None, "llm_args": None}
