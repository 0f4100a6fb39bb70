"""Turning a policy's action into tau2's assistant message -- without ever raising for bad model output.

Accepted forms (see README "Actions" for the outcome of every malformed kind):

* ``str``: raw model text; tool-call markup is parsed by :func:`tau2_gym.core.parsing.parse_tool_calls` (the env's
  ``parser``), or by upstream's gym rules with ``parser="tau2"`` (a JSON ``{"name", "arguments"}`` call, a
  ``name(k=v, ...)`` call, else text);
* a dict: an OpenAI assistant message (``role``/``content``/``tool_calls``; arguments as a JSON string or an
  object), a tau2 message dict, a single ``{"name", "arguments"}`` call or a single OpenAI call
  (``{"type": "function", "function": {...}}``);
* a list of calls (dicts or :class:`~tau2_gym.core.messages.ToolCall`), a ``ToolCall``, an ``AssistantMessage``.

What cannot become a message raises :class:`ActionError` here; the env turns that into the record upstream
would make (the episode ends as ``agent_error``). Calls that are well-formed but wrong (unknown tool, bad
arguments) are *not* errors here: the environment answers them with an ``Error: ...`` tool message.

Reasoning is split from the content on every form, here, once (:func:`tau2_gym.core.parsing.split_reasoning`):
``<think>`` blocks in any text (also inside an OpenAI message's content, and before tool-call markup is parsed:
a call written inside a thought is not made), and an OpenAI message's ``reasoning_content`` / ``reasoning`` field
(a server with a reasoning parser; :func:`tau2_gym.core.parsing.reasoning_text` reads odd values as none). The
reasoning is kept on the message as ``raw_data["reasoning_content"]``
(:attr:`~tau2_gym.core.messages.ParticipantMessage.reasoning`); the content is what the customer sees.
"""

from __future__ import annotations

import ast
import json
import re
import reprlib
from typing import Any, Callable, Optional, Union

from tau2_gym.core.messages import REASONING_KEY, AssistantMessage, ToolCall, dumps_arguments
from tau2_gym.core.parsing import join_reasoning, parse_tool_calls, reasoning_text, split_reasoning

MAX_ARGUMENT_DEPTH = 100  # nesting levels of a call's arguments; deeper is an ActionError, never a RecursionError

#: an agent reply with neither text nor a tool call ends the episode as ``agent_error`` (upstream's orchestrator
#: refuses such a message); the run's ``info[EMPTY_REPLY_KEY]`` says which kind it was
EMPTY_REPLY_KEY = "empty_agent_reply"
EMPTY_REPLY, REASONING_ONLY_REPLY = "empty", "reasoning_only"
EMPTY_REPLY_ERRORS = {
    EMPTY_REPLY: "agent sent an empty message (no text, no tool calls)",
    REASONING_ONLY_REPLY: "agent sent only reasoning (no text, no tool calls)",
}

_short = reprlib.Repr()
_short.maxlevel, _short.maxstring, _short.maxother, _short.maxdict, _short.maxlist = 4, 160, 160, 8, 8


def _show(value: Any) -> str:
    """A bounded ``repr`` for error messages: a huge or deeply nested action cannot blow up the message."""
    try:
        return _short.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__
        return f"<{type(value).__name__}>"


def _too_deep(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether containers nest deeper than ``limit`` (iteratively: a deep value cannot overflow the check)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if type(item) is dict:
            children = item.values()
        elif type(item) is list or type(item) is tuple:
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class ActionError(ValueError):
    """An action that cannot be turned into an assistant message.

    ``record`` is what is kept in the trajectory for the record (the raw text, when there is one).
    """

    def __init__(self, reason: str, record: Optional[AssistantMessage] = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.record = record


class _Ids:
    """Ids for calls that come without one: ``call_<n>``, n counting the episode's agent calls."""

    __slots__ = ("n", "fill")

    def __init__(self, fill: bool) -> None:
        self.n = 0
        self.fill = fill

    def take(self, given: Any) -> str:
        self.n += 1
        if given is None or given == "":
            return f"call_{self.n - 1}" if self.fill else ""
        return given if isinstance(given, str) else _show(given)  # repr == str for numbers; bounded for the rest


def _arguments(raw: Any, name: str) -> dict:
    """A call's arguments as a dict that JSON round-trips; what cannot be one is an ActionError.

    Nesting beyond :data:`MAX_ARGUMENT_DEPTH` and integers beyond Python's int-string limit are refused
    here, so that no later step (encoding the observation, hashing the DB, writing results) can fail on them.
    """
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ActionError(
                f"tool call {_show(name)}: arguments are not valid JSON ({exc.msg}): {_show(raw)}"
            ) from None
        except (ValueError, RecursionError) as exc:  # a huge integer literal; nesting past the parser's limit
            raise ActionError(
                f"tool call {_show(name)}: arguments cannot be read "
                f"({_show(str(exc)) if not isinstance(exc, RecursionError) else 'nested too deeply'})"
            ) from None
        if not isinstance(raw, dict):
            raise ActionError(
                f"tool call {_show(name)}: arguments must be a JSON object, got {type(raw).__name__}: {_show(raw)}"
            )
    elif not isinstance(raw, dict):
        raise ActionError(
            f"tool call {_show(name)}: arguments must be a JSON object, got {type(raw).__name__}: {_show(raw)}"
        )
    if _too_deep(raw):
        raise ActionError(f"tool call {_show(name)}: arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    try:
        dumps_arguments(raw)  # = json.dumps: serialisable (also for keys, NaN, and ints within the digit limit)?
    except (TypeError, ValueError, RecursionError) as exc:
        raise ActionError(f"tool call {_show(name)}: arguments are not JSON-serialisable ({_show(str(exc))})") from None
    return raw


def _call(obj: Any, ids: _Ids) -> ToolCall:
    """One call from a ToolCall, a flat ``{name, arguments}`` dict or an OpenAI ``{function: {...}}`` dict."""
    if isinstance(obj, ToolCall):
        name, args, given = obj.name, obj.arguments, obj.id
    elif isinstance(obj, dict):
        fn = obj.get("function")
        body = fn if isinstance(fn, dict) else obj
        name = body.get("name")
        given = obj.get("id")
        args = body.get("arguments", body.get("parameters"))
    else:
        raise ActionError(f"a tool call must be a dict or a ToolCall, got {type(obj).__name__}: {_show(obj)}")
    if not isinstance(name, str) or not name.strip():
        raise ActionError(f"tool call without a 'name' string: {_show(obj)}")
    # the name is kept as sent: ' get_users ' is an unknown tool, as upstream's exact lookup has it
    return ToolCall(name, _arguments(args, name), ids.take(given), "assistant")


def _content(raw: Any) -> Optional[str]:
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, list):  # OpenAI content parts: keep the text parts
        parts = []
        for part in raw:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise ActionError(f"unsupported content part {_show(part)}; only text parts are accepted")
        return "".join(parts)
    raise ActionError(f"message content must be a string, a list of text parts or null; got {type(raw).__name__}")


def _calls(raw: Any, ids: _Ids) -> Optional[list[ToolCall]]:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ActionError(f"'tool_calls' must be a list, got {type(raw).__name__}")
    calls = [_call(c, ids) for c in raw]
    return calls or None  # an empty list means no calls (as tau2's LLM wrapper reads a response)


#: the fields of an OpenAI-style message that carry reasoning (vLLM/SGLang reasoning parsers, DeepSeek, OpenRouter)
REASONING_FIELDS = ("reasoning_content", "reasoning")


def field_reasoning(d: Any) -> Optional[str]:
    """The reasoning an OpenAI-style message dict carries in a field of its own (None when none is readable)."""
    if not isinstance(d, dict):
        return None
    return join_reasoning(*(reasoning_text(d.get(name)) for name in REASONING_FIELDS))


def raw_reasoning(raw: Any) -> Optional[str]:
    """The reasoning recorded in a message's ``raw_data``: our key, else the server response's own message."""
    if not isinstance(raw, dict):
        return None
    own = reasoning_text(raw.get(REASONING_KEY))
    if own is not None:
        return own
    choices = raw.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    return field_reasoning(choice.get("message") if isinstance(choice, dict) else None)


def with_reasoning(raw: Optional[dict], reasoning: Optional[str]) -> Optional[dict]:
    """``raw`` (a new dict) with the reasoning under :data:`~tau2_gym.core.messages.REASONING_KEY`."""
    if reasoning is None:
        return raw
    return {**(raw or {}), REASONING_KEY: reasoning}


def _split(content: Optional[str], reasoning: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(content, reasoning) with the content's ``<think>`` blocks moved after the given reasoning."""
    if content is None:
        return None, reasoning
    content, thought = split_reasoning(content)
    return content, join_reasoning(reasoning, thought)


def reasoned(content: Optional[str], raw_data: Any) -> tuple[Optional[str], Any]:
    """``(content, raw_data)`` of a participant message with its reasoning out of the content: ``<think>`` blocks
    and a reasoning field of the server response in ``raw_data`` end up in ``raw_data["reasoning_content"]`` (a
    new dict when anything moved). The agent's actions and the customer's messages both pass here."""
    content, reasoning = _split(content, raw_reasoning(raw_data))
    if reasoning is not None and (not isinstance(raw_data, dict) or raw_data.get(REASONING_KEY) != reasoning):
        raw_data = with_reasoning(raw_data if isinstance(raw_data, dict) else None, reasoning)
    return content, raw_data


def _from_dict(d: dict, ids: _Ids) -> AssistantMessage:
    role = d.get("role")
    if role is None:
        if ("name" in d or "function" in d) and "tool_calls" not in d:
            return AssistantMessage(content=None, tool_calls=[_call(d, ids)])
        if not ({"content", "tool_calls"} & d.keys()):
            raise ActionError(
                f"cannot read the action dict with keys {sorted(d)}: expected an assistant message "
                "(content/tool_calls) or a tool call (name/arguments)"
            )
    elif role != "assistant":
        raise ActionError(f"the agent can only send assistant messages; got role {_show(role)}")
    content = _content(d.get("content"))  # before the calls: its error is the one reported
    calls = _calls(d.get("tool_calls"), ids)
    content, reasoning = _split(content, field_reasoning(d))
    cost, usage = d.get("cost"), d.get("usage")
    return AssistantMessage(
        content,
        calls,
        cost=cost if isinstance(cost, (int, float)) else None,
        usage=usage if isinstance(usage, dict) else None,
        raw_data=with_reasoning(None, reasoning),
    )


# ------------------------------------------------------------------------ upstream gym's string rules

_FUNCTIONAL = re.compile(r"^(\w+)\s*\((.*)\)$", re.DOTALL)


def _literal(node: Optional[ast.AST]) -> Any:  # None: the key of a ``**x`` entry, unsupported
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _literal(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(x) for x in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):
        return node.id
    raise ValueError(f"unsupported expression {type(node).__name__}")


def parse_tau2_action(text: str) -> tuple[Optional[str], Optional[list[dict]]]:
    """upstream ``parse_action_string``: a JSON call, else ``name(k=v, ...)`` (positional args dropped), else text."""
    stripped = text.strip()
    if not stripped:
        return None, None
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):  # not JSON, an over-long integer, nesting past the parser's limit
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str) and isinstance(obj.get("arguments"), dict):
        return None, [{"name": obj["name"], "arguments": obj["arguments"], "id": obj.get("id") or ""}]
    match = _FUNCTIONAL.match(stripped)
    if match:
        try:
            args: dict = {}
            if match.group(2).strip():
                tree = ast.parse(f"f({match.group(2)})", mode="eval")
                call = tree.body
                if not isinstance(call, ast.Call):
                    raise ValueError("not a call")
                for kw in call.keywords:
                    args[kw.arg] = _literal(kw.value)
            return None, [{"name": match.group(1), "arguments": args, "id": ""}]
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            pass  # not a call upstream's parser reads: the text goes to the customer
    return text, None


# ------------------------------------------------------------------------------------------- entry


def to_assistant_message(
    action: Any,
    *,
    parser: Union[str, Callable[..., Any], None] = "auto",
    tokenizer: Any = None,
    fill_ids: bool = True,
    first_id: int = 0,
    timestamp: Optional[str] = None,
) -> AssistantMessage:
    """A fresh AssistantMessage for ``action`` (never the caller's object); raises :class:`ActionError`.

    ``timestamp`` is the message's (default: now); the turn loop, which stamps what it is handed, passes ``""``.
    """
    ids = _Ids(fill_ids)
    ids.n = first_id
    msg = _to_message(action, parser, tokenizer, ids)
    if timestamp is not None:
        msg.timestamp = timestamp
    return msg


def _to_message(
    action: Any, parser: Union[str, Callable[..., Any], None], tokenizer: Any, ids: _Ids
) -> AssistantMessage:
    if isinstance(action, str):
        return _from_text(action, parser, tokenizer, ids)
    if isinstance(action, AssistantMessage):
        calls = None if action.tool_calls is None else [_call(tc, ids) for tc in action.tool_calls] or None
        content, raw = reasoned(_content(action.content), action.raw_data)
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            cost=action.cost,
            usage=action.usage,
            raw_data=raw,
        )
    if isinstance(action, ToolCall):
        return AssistantMessage(content=None, tool_calls=[_call(action, ids)])
    if isinstance(action, dict):
        return _from_dict(action, ids)
    if isinstance(action, (list, tuple)):
        if not action:
            raise ActionError("an empty list of tool calls is not an action")
        return AssistantMessage(content=None, tool_calls=[_call(c, ids) for c in action])
    if action is None:
        raise ActionError("the action is None (no text, no tool calls)")
    raise ActionError(
        f"unsupported action type {type(action).__name__}; send text, a tool call or an assistant "
        "message (see the env's docstring)"
    )


def _from_text(text: str, parser: Union[str, Callable[..., Any], None], tokenizer: Any, ids: _Ids) -> AssistantMessage:
    # reasoning first: markup inside a thought is not an action, and a thought never reaches the customer
    body, reasoning = split_reasoning(text)
    body = "" if body is None else body
    if parser == "tau2":
        content, raw_calls = parse_tau2_action(body)
        calls = None if raw_calls is None else [_call(c, ids) for c in raw_calls]
        return AssistantMessage(content=content, tool_calls=calls, raw_data=with_reasoning({"action": text}, reasoning))
    if parser is None or parser == "none":
        return AssistantMessage(
            content=body if reasoning is None else body or None, raw_data=with_reasoning(None, reasoning)
        )

    parsed = parse_tool_calls(body, parser, tokenizer)
    if parsed.error is not None:
        raise ActionError(
            f"malformed tool-call markup: {parsed.error}",
            record=AssistantMessage(content=body, raw_data=with_reasoning(None, reasoning)) if body.strip() else None,
        )
    calls = None if parsed.tool_calls is None else [_call(tc, ids) for tc in parsed.tool_calls] or None
    reasoning = join_reasoning(reasoning, getattr(parsed, "reasoning", None))
    return AssistantMessage(content=parsed.content, tool_calls=calls, raw_data=with_reasoning(None, reasoning))
