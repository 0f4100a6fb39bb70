"""Chat messages: tau2's message model, as small slotted classes.

Pydantic validation happens where messages cross the boundary (task files, results files); inside an
episode messages are created every step, so they are plain objects. Two lossless conversions live here:
to/from the tau2 JSON form (``tau2 run`` results and task histories) and to/from the OpenAI chat format
(assistant ``tool_calls`` with JSON-string arguments, ``tool`` messages with ``tool_call_id``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable, Literal, Optional, Union

Requestor = Literal["assistant", "user"]

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
USER_STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)

#: where a participant message keeps its reasoning: ``raw_data["reasoning_content"]`` -- upstream's message model has
#: no reasoning field, but keeps ``raw_data`` (its own runs store the whole LLM response there), so a results file
#: with reasoning loads in upstream's tools; the content stays what the other side saw
REASONING_KEY = "reasoning_content"


def now_iso() -> str:
    """Local time, ISO-8601 with microseconds and no timezone, as tau2 stamps messages."""
    return datetime.now().isoformat()


class ToolCall:
    """A call of one tool; ``requestor`` is who asked (and who receives the result)."""

    __slots__ = ("id", "name", "arguments", "requestor")

    def __init__(
        self, name: str, arguments: Optional[dict] = None, id: str = "", requestor: Requestor = "assistant"
    ) -> None:
        self.id = id
        self.name = name
        self.arguments = {} if arguments is None else arguments
        self.requestor = requestor

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ToolCall)
            and self.id == other.id
            and self.name == other.name
            and self.arguments == other.arguments
            and self.requestor == other.requestor
        )

    def __repr__(self) -> str:
        return (
            f"ToolCall(name={self.name!r}, arguments={self.arguments!r}, id={self.id!r}, requestor={self.requestor!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "requestor": self.requestor}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        if not isinstance(d, dict) or "name" not in d:
            raise ValueError(f"a tool call needs at least a 'name'; got {d!r}")
        args = d.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ValueError(f"tool call arguments must be an object; got {args!r}")
        req = d.get("requestor") or "assistant"
        if req not in ("assistant", "user"):
            raise ValueError(f"tool call requestor must be 'assistant' or 'user'; got {req!r}")
        return cls(name=d["name"], arguments=args, id=d.get("id") or "", requestor=req)


class Message:
    """Base of the four stored message kinds."""

    __slots__ = ("content", "turn_idx", "timestamp")
    role: str = ""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


class SystemMessage(Message):
    __slots__ = ()
    role = "system"

    def __init__(self, content: Optional[str], turn_idx: Optional[int] = None, timestamp: Optional[str] = None) -> None:
        self.content = content
        self.turn_idx = turn_idx
        self.timestamp = timestamp if timestamp is not None else now_iso()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SystemMessage) and self.content == other.content

    def to_dict(self) -> dict[str, Any]:
        return {"role": "system", "content": self.content, "turn_idx": self.turn_idx, "timestamp": self.timestamp}


class ParticipantMessage(Message):
    """Assistant or user turn: text, tool calls, or both (a mixed message is routed as a tool call)."""

    __slots__ = ("tool_calls", "cost", "usage", "raw_data")

    def __init__(
        self,
        content: Optional[str] = None,
        tool_calls: Optional[list[ToolCall]] = None,
        turn_idx: Optional[int] = None,
        timestamp: Optional[str] = None,
        cost: Optional[float] = None,
        usage: Optional[dict] = None,
        raw_data: Optional[dict] = None,
    ) -> None:
        self.content = content
        self.tool_calls = tool_calls
        self.turn_idx = turn_idx
        self.timestamp = timestamp if timestamp is not None else now_iso()
        self.cost = cost
        self.usage = usage
        self.raw_data = raw_data

    def has_text_content(self) -> bool:
        return self.content is not None and bool(self.content.strip())

    @property
    def reasoning(self) -> Optional[str]:
        """The reasoning the sender produced with this message (kept in ``raw_data``; never part of ``content``)."""
        raw = self.raw_data
        value = raw.get(REASONING_KEY) if isinstance(raw, dict) else None
        return value if isinstance(value, str) else None

    def is_tool_call(self) -> bool:
        """tau2's rule: any non-null ``tool_calls`` (even ``[]``) makes this a tool-call message."""
        return self.tool_calls is not None

    def validate(self) -> None:
        if not (self.has_text_content() or self.is_tool_call()):
            raise ValueError(f"{type(self).__name__} must have either content or tool_calls. Got {self!r}")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ParticipantMessage)
            and self.role == other.role
            and self.content == other.content
            and self.tool_calls == other.tool_calls
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(content={self.content!r}, tool_calls={self.tool_calls!r})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "tool_calls": None if self.tool_calls is None else [tc.to_dict() for tc in self.tool_calls],
            "turn_idx": self.turn_idx,
            "timestamp": self.timestamp,
            "cost": self.cost,
            "usage": self.usage,
            "raw_data": self.raw_data,
        }


class AssistantMessage(ParticipantMessage):
    __slots__ = ()
    role = "assistant"


class UserMessage(ParticipantMessage):
    __slots__ = ()
    role = "user"


class ToolMessage(Message):
    """Result of one tool call; ``id`` echoes the call id, ``requestor`` receives it."""

    __slots__ = ("id", "requestor", "error")
    role = "tool"

    def __init__(
        self,
        id: str,
        content: Optional[str],
        requestor: Requestor = "assistant",
        error: bool = False,
        turn_idx: Optional[int] = None,
        timestamp: Optional[str] = None,
    ) -> None:
        self.id = id
        self.content = content
        self.requestor = requestor
        self.error = error
        self.turn_idx = turn_idx
        self.timestamp = timestamp if timestamp is not None else now_iso()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ToolMessage)
            and self.id == other.id
            and self.content == other.content
            and self.requestor == other.requestor
            and self.error == other.error
        )

    def __repr__(self) -> str:
        return (
            f"ToolMessage(id={self.id!r}, content={self.content!r}, requestor={self.requestor!r}, error={self.error})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": "tool",
            "content": self.content,
            "requestor": self.requestor,
            "error": self.error,
            "turn_idx": self.turn_idx,
            "timestamp": self.timestamp,
        }


AnyMessage = Union[SystemMessage, AssistantMessage, UserMessage, ToolMessage]


# --------------------------------------------------------------------------------- tau2 JSON form


def message_from_dict(d: Any) -> AnyMessage:
    """Read a message in tau2's JSON form (either version; unknown keys are ignored)."""
    if isinstance(d, Message):
        return d
    if not isinstance(d, dict):
        raise ValueError(f"a message must be an object; got {type(d).__name__}")
    role = d.get("role")
    ts = d.get("timestamp")
    if role in ("assistant", "user"):
        calls = d.get("tool_calls")
        cls = AssistantMessage if role == "assistant" else UserMessage
        content = d.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"message content must be a string or null; got {content!r}")
        return cls(
            content=content,
            tool_calls=None if calls is None else [ToolCall.from_dict(c) for c in calls],
            turn_idx=d.get("turn_idx"),
            timestamp=ts,
            cost=d.get("cost"),
            usage=d.get("usage"),
            raw_data=d.get("raw_data"),
        )
    if role == "tool":
        if "tool_messages" in d and "id" not in d:
            raise ValueError("multi-tool messages are transport only and cannot be stored")
        if "id" not in d:
            raise ValueError(f"a tool message needs an 'id'; got keys {sorted(d)}")
        req = d.get("requestor") or "assistant"
        return ToolMessage(
            id=d["id"],
            content=d.get("content"),
            requestor=req,
            error=bool(d.get("error", False)),
            turn_idx=d.get("turn_idx"),
            timestamp=ts,
        )
    if role == "system":
        return SystemMessage(content=d.get("content"), turn_idx=d.get("turn_idx"), timestamp=ts)
    raise ValueError(f"unknown message role {role!r}; expected assistant, user, tool or system")


def messages_from_dicts(items: Iterable[Any]) -> list[AnyMessage]:
    return [message_from_dict(m) for m in items]


def messages_to_dicts(messages: Iterable[AnyMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


# ------------------------------------------------------------------------------ OpenAI chat format


def dumps_arguments(arguments: Any) -> str:
    """``json.dumps(arguments)`` -- the text of a call's ``arguments`` in the OpenAI format."""
    return json.dumps(arguments)


def tool_call_to_openai(tc: ToolCall) -> dict[str, Any]:
    return {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": dumps_arguments(tc.arguments)}}


def to_openai(message: AnyMessage) -> dict[str, Any]:
    """One message in the OpenAI chat-completions format (as tau2 sends it to its LLMs)."""
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.id, "content": message.content}
    if isinstance(message, ParticipantMessage):
        out: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [tool_call_to_openai(tc) for tc in message.tool_calls]
        return out
    return {"role": message.role, "content": message.content}


def to_openai_messages(messages: Iterable[AnyMessage]) -> list[dict[str, Any]]:
    return [to_openai(m) for m in messages]


def from_openai(d: dict[str, Any], requestor: Requestor = "assistant") -> AnyMessage:
    """Read an OpenAI chat message back into a tau2 message.

    Arguments arrive as a JSON string (or already as a dict); a string that does not parse raises
    ``ValueError`` (callers that must not raise turn that into an error observation).
    """
    role = d.get("role")
    if role == "tool":
        return ToolMessage(id=d.get("tool_call_id") or d.get("id") or "", content=d.get("content"), requestor=requestor)
    if role in ("assistant", "user"):
        calls = None
        raw_calls = d.get("tool_calls")
        if raw_calls:
            calls = []
            for raw in raw_calls:
                fn = raw.get("function", raw)
                args = fn.get("arguments")
                if isinstance(args, str):
                    args = json.loads(args) if args.strip() else {}
                if args is None:
                    args = {}
                if not isinstance(args, dict):
                    raise ValueError(f"tool call arguments must decode to an object; got {args!r}")
                calls.append(
                    ToolCall(
                        name=fn["name"],
                        arguments=args,
                        id=raw.get("id") or "",
                        requestor="user" if role == "user" else "assistant",
                    )
                )
        content = d.get("content")
        if isinstance(content, list):  # content parts: keep the text parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        cls = AssistantMessage if role == "assistant" else UserMessage
        return cls(content=content, tool_calls=calls)
    if role == "system":
        return SystemMessage(content=d.get("content"))
    raise ValueError(f"unknown OpenAI message role {role!r}")
