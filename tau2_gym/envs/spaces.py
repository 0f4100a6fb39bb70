"""Gymnasium spaces for chat environments: message histories, transcripts and assistant actions.

Gymnasium has no space for "a list of chat messages" or "an assistant turn", so these are small custom
spaces. ``contains`` validates structure (cheaply; it never executes anything) and ``sample`` draws
*useful* values from the space's own RNG: :class:`AssistantActionSpace` samples schema-valid calls of the
env's real tools, so a random policy exercises the environment instead of only producing parse errors.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
from gymnasium.spaces import Space

from tau2_gym.core.actions import ActionError, to_assistant_message

_WORDS = (
    "hello",
    "order",
    "flight",
    "refund",
    "please",
    "check",
    "status",
    "account",
    "phone",
    "data",
    "reservation",
    "thanks",
    "cancel",
    "update",
    "help",
    "item",
    "user",
    "task",
    "bill",
    "line",
)
_ROLES = ("system", "user", "assistant", "tool")


def _words(rng: np.random.Generator, lo: int = 1, hi: int = 8) -> str:
    n = int(rng.integers(lo, hi + 1))
    return " ".join(_WORDS[int(i)] for i in rng.integers(0, len(_WORDS), size=n))


def _is_call(c: Any) -> bool:
    if not isinstance(c, dict):
        return False
    fn = c.get("function")
    return (
        isinstance(fn, dict)
        and isinstance(fn.get("name"), str)
        and isinstance(fn.get("arguments"), str)
        and isinstance(c.get("id", ""), str)
    )


def is_chat_message(m: Any) -> bool:
    """An OpenAI chat message as the env emits it (system/user/assistant/tool)."""
    if not isinstance(m, dict):
        return False
    role = m.get("role")
    if role not in _ROLES:
        return False
    content = m.get("content")
    if content is not None and not isinstance(content, str):
        return False
    if role == "tool":
        return isinstance(m.get("tool_call_id"), str)
    calls = m.get("tool_calls")
    if calls is not None:
        return role == "assistant" and isinstance(calls, list) and all(_is_call(c) for c in calls)
    return True


class MessagesSpace(Space[list]):
    """Chat histories: lists of OpenAI-format messages (``system``/``user``/``assistant``/``tool``).

    ``contains`` checks every message's shape; ``sample`` draws a short random conversation (system prompt,
    then user / assistant / tool-call / tool-result turns), ``max_messages`` long at most.
    """

    def __init__(self, max_messages: int = 12, seed: Optional[int] = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_messages = max_messages

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(is_chat_message(m) for m in x)

    def sample(self, mask: Any = None, probability: Any = None) -> list:
        if mask is not None or probability is not None:
            raise NotImplementedError("MessagesSpace.sample takes no mask or probability")
        rng = self.np_random
        out: list[dict[str, Any]] = [{"role": "system", "content": _words(rng, 5, 20)}]
        n = int(rng.integers(0, self.max_messages))
        k = 0
        while len(out) <= n:
            kind = int(rng.integers(0, 3))
            if kind == 0:
                out.append({"role": "user", "content": _words(rng)})
            elif kind == 1:
                out.append({"role": "assistant", "content": _words(rng)})
            else:
                cid = f"call_{k}"
                k += 1
                out.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": cid,
                                "type": "function",
                                "function": {"name": _WORDS[int(rng.integers(len(_WORDS)))], "arguments": "{}"},
                            }
                        ],
                    }
                )
                out.append({"role": "tool", "tool_call_id": cid, "content": _words(rng)})
        return out

    def __repr__(self) -> str:
        return f"MessagesSpace(max_messages={self.max_messages})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessagesSpace) and other.max_messages == self.max_messages


class TranscriptSpace(Space[str]):
    """Any string (a ``role: content`` transcript); ``sample`` draws a few random lines."""

    def __init__(self, seed: Optional[int] = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:  # noqa: ARG002 - Gymnasium's Space.sample signature
        rng = self.np_random
        n = int(rng.integers(1, 6))
        return "\n".join(f"{('user', 'assistant', 'tool')[int(rng.integers(3))]}: {_words(rng)}" for _ in range(n))

    def __repr__(self) -> str:
        return "TranscriptSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TranscriptSpace)


# ------------------------------------------------------------------------------ JSON-schema sampling


def _resolve(schema: dict, defs: dict) -> dict:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return defs.get(ref.split("/")[-1], {})
    return schema


def sample_from_schema(schema: dict, rng: np.random.Generator, defs: Optional[dict] = None, depth: int = 0) -> Any:
    """A random value valid for a (pydantic-generated) JSON schema: enums, refs, anyOf, arrays, objects."""
    defs = defs if defs is not None else schema.get("$defs", {})
    schema = _resolve(schema, defs)
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if _resolve(o, defs).get("type") != "null"] or schema[key]
            return sample_from_schema(options[int(rng.integers(len(options)))], rng, defs, depth + 1)
    if "allOf" in schema and schema["allOf"]:
        return sample_from_schema(schema["allOf"][0], rng, defs, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "string":
        return _WORDS[int(rng.integers(len(_WORDS)))] + str(int(rng.integers(0, 1000)))
    if t == "integer":
        return int(rng.integers(0, 100))
    if t == "number":
        return float(np.round(rng.uniform(0, 100), 2))
    if t == "boolean":
        return bool(rng.integers(0, 2))
    if t == "null":
        return None
    if t == "array":
        if depth > 4:
            return []
        items = schema.get("items", {})
        return [sample_from_schema(items, rng, defs, depth + 1) for _ in range(int(rng.integers(0, 3)))]
    if t == "object" or "properties" in schema:
        if depth > 4:
            return {}
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        out = {}
        for name, sub in props.items():
            if name in required or rng.random() < 0.5:
                out[name] = sample_from_schema(sub, rng, defs, depth + 1)
        return out
    return _WORDS[int(rng.integers(len(_WORDS)))]


class AssistantActionSpace(Space[Any]):
    """Assistant turns: text, tool calls in any accepted form, or raw model text with call markup.

    ``contains(x)`` is true when the env can turn ``x`` into a non-empty assistant message (it parses raw text
    with the env's parser but executes nothing). ``sample()`` returns an OpenAI assistant message calling one
    of ``tools`` with arguments drawn from its JSON schema (a text message with probability
    ``text_probability``); the ``done`` tool is never sampled, so a sampled step does not end an episode.
    """

    def __init__(
        self,
        tools: Sequence[dict] = (),
        parser: Union[str, Callable[..., Any], None] = "auto",
        tokenizer: Any = None,
        text_probability: float = 0.0,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.tools = [t for t in tools if t.get("function", {}).get("name") != "done"]
        self.parser = parser
        self.tokenizer = tokenizer
        self.text_probability = float(text_probability)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:

        try:
            msg = to_assistant_message(x, parser=self.parser, tokenizer=self.tokenizer)
        except ActionError:
            return False
        return msg.has_text_content() or bool(msg.tool_calls)

    def sample(self, mask: Any = None, probability: Any = None) -> dict:
        if mask is not None or probability is not None:
            raise NotImplementedError("AssistantActionSpace.sample takes no mask or probability")
        rng = self.np_random
        if not self.tools or rng.random() < self.text_probability:
            return {"role": "assistant", "content": _words(rng)}
        fn = self.tools[int(rng.integers(len(self.tools)))]["function"]
        args = sample_from_schema(fn.get("parameters", {}), rng)
        cid = f"call_s{int(rng.integers(0, 2**31))}"
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": fn["name"], "arguments": json.dumps(args)}}
            ],
        }

    def __repr__(self) -> str:
        return f"AssistantActionSpace(tools={len(self.tools)}, parser={self.parser!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, AssistantActionSpace)
            and [t["function"]["name"] for t in other.tools] == [t["function"]["name"] for t in self.tools]
            and other.parser == self.parser
        )
