"""Tool-call parsers for raw model text.

A policy that emits raw text (a local model, a raw-text gym action) writes tool calls as markup inside
that text. :func:`parse_tool_calls` turns such text into message parts: ``content`` (the prose around the
calls), ``tool_calls`` (``None`` when the text has no call markup at all) and ``error`` (set -- never
raised -- when there *is* call markup but it cannot be read: bad JSON, no name, arguments not an object).
On an error ``tool_calls`` is ``None`` and ``content`` is the whole text, so a caller that wants to show the
text can, and a caller that wants to report the error has the reason.

Built-in parsers:

- ``"hermes"``: Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, any
  number of them, anywhere in the text (an unclosed last block is accepted when its body parses).
- ``"json"``: the whole text (optionally in a ```json fence) is a call, a list of calls, or an OpenAI-style
  ``{"tool_calls": [...], "content": ...}`` object; calls may be flat (``name``/``arguments``, or
  ``parameters`` as Llama writes) or OpenAI-shaped (``{"type": "function", "function": {...}}``) with
  arguments as an object or a JSON string.
- ``"transformers"``: the tokenizer's own response parser (``tokenizer.parse_response`` driven by its
  ``response_template``, or the older ``response_schema``), when the installed transformers and the
  tokenizer have one.
- ``"auto"``: ``transformers`` when the tokenizer has a response template, else ``hermes`` when the text
  has ``<tool_call>`` markup, else ``json`` when the text looks like a JSON call, else plain content.

A callable is accepted in place of a name: ``fn(text) -> ParsedCall`` (or ``fn(text, tokenizer)``);
:func:`register_parser` adds a named one. Calls without an id get ``call_<n>`` (n = position in the text).

Reasoning (``<think>`` blocks, a ``reasoning_content`` field) is split from the content here too, by
:func:`split_reasoning` and :func:`reasoning_text` -- the one place every path that turns model output into a
message uses (:func:`tau2_gym.core.actions.to_assistant_message`, the user simulators, the HF policy), so that a
model's thoughts never reach the customer, the scorer or the judge.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from tau2_gym.core.messages import Requestor, ToolCall

__all__ = [
    "ParsedCall",
    "parse_tool_calls",
    "register_parser",
    "available_parsers",
    "has_response_parser",
    "split_reasoning",
    "reasoning_text",
    "join_reasoning",
    "THINK_OPEN",
    "THINK_CLOSE",
]


@dataclass(slots=True)
class ParsedCall:
    """Result of parsing one model output (see the module docstring for the contract)."""

    content: Optional[str]
    tool_calls: Optional[list[ToolCall]]
    error: Optional[str] = None
    reasoning: Optional[str] = None  # reasoning text a response template separated out (e.g. <think>)

    @property
    def ok(self) -> bool:
        return self.error is None


class _MarkupError(ValueError):
    """Call markup was found but could not be read."""


class _SetupError(ValueError):
    """The parser cannot run at all (unknown name, tokenizer without a response parser): a caller bug."""


ParserFn = Callable[..., ParsedCall]
_REGISTRY: dict[str, ParserFn] = {}


def register_parser(name: str, fn: ParserFn) -> None:
    """Make ``fn(text[, tokenizer]) -> ParsedCall`` available as ``parse_tool_calls(text, name)``."""
    if not callable(fn):
        raise TypeError(f"parser {name!r} must be callable; got {type(fn).__name__}")
    _REGISTRY[name] = fn


def available_parsers() -> list[str]:
    return ["auto", "hermes", "json", "transformers", *sorted(_REGISTRY)]


# ----------------------------------------------------------------------------------------- helpers


def _clip(value: Any, limit: int = 200) -> str:
    """repr of a value, shortened so error strings stay readable in observations and logs."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 15] + f"... ({len(text)} chars)"


def _none_if_blank(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    text = text.strip()
    return text or None


def _decode_arguments(raw: Any, where: str) -> dict:
    """Arguments as a dict: objects pass, JSON strings are decoded, absent means no arguments."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _MarkupError(
                f"{where}: arguments are not valid JSON ({exc.msg} at char {exc.pos}): {_clip(raw)}"
            ) from None
    if not isinstance(raw, dict):
        raise _MarkupError(f"{where}: arguments must be a JSON object, got {type(raw).__name__}: {_clip(raw)}")
    return raw


def _call_from_obj(obj: Any, index: int, where: str) -> ToolCall:
    """One call from a flat ``{name, arguments}`` or OpenAI ``{id, type, function: {...}}`` object."""
    if not isinstance(obj, dict):
        raise _MarkupError(f"{where}: a tool call must be a JSON object, got {type(obj).__name__}: {_clip(obj)}")
    call_id = obj.get("id")
    fn = obj.get("function")
    body = fn if isinstance(fn, dict) else obj
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _MarkupError(f"{where}: tool call has no 'name' string: {_clip(obj)}")
    if "arguments" in body:
        args = _decode_arguments(body["arguments"], where)
    else:
        args = _decode_arguments(body.get("parameters"), where)
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{index}"
    return ToolCall(name=name, arguments=args, id=call_id)  # the name as sent: lookup is exact, as upstream


def _calls_from_json_value(value: Any, start: int, where: str) -> tuple[list[ToolCall], Optional[str]]:
    """Calls (and any ``content``) from a decoded JSON value of one of the accepted shapes."""
    content = None
    if isinstance(value, dict) and "tool_calls" in value and "name" not in value:
        items = value["tool_calls"]
        c = value.get("content")
        content = c if isinstance(c, str) else None
        if items is None:
            items = []
        if not isinstance(items, list):
            raise _MarkupError(f"{where}: 'tool_calls' must be a list, got {type(items).__name__}")
        if not items and content is None:
            raise _MarkupError(f"{where}: no tool calls and no content")
    elif isinstance(value, list):
        items = value
        if not items:
            raise _MarkupError(f"{where}: empty list of tool calls")
    else:
        items = [value]
    return [_call_from_obj(obj, start + i, where) for i, obj in enumerate(items)], content


def _loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _MarkupError(f"{where}: invalid JSON ({exc.msg} at char {exc.pos}): {_clip(text)}") from None


def _retag(calls: list[ToolCall], requestor: Requestor) -> list[ToolCall]:
    for call in calls:
        call.requestor = requestor
    return calls


# -------------------------------------------------------------------------------------- reasoning

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINK_TAG = re.compile(r"</?think>")


def split_reasoning(text: str) -> tuple[Optional[str], Optional[str]]:
    """``(content, reasoning)`` of a model's text: ``<think>`` blocks are reasoning, the rest is content.

    Why one function: whatever path a reply takes (a text action, an OpenAI message, a server reply, a local
    model), its thoughts must be cut out the same way before anyone -- the customer, COMMUNICATE, the judge -- reads
    the content. The outcome is defined for every input, never an exception:

    * no tag at all: the text is the content, unchanged (``reasoning`` None);
    * ``<think>...</think>`` blocks anywhere, any number: their insides are reasoning, the text around them content;
    * a ``</think>`` without an opening tag: everything before it is reasoning (the template's generation prompt
      opened the block, as Qwen3's and DeepSeek-R1's do);
    * an unclosed ``<think>`` (generation cut at the token limit): everything after it is reasoning;
    * nested blocks: the outermost block decides (inner tags are part of the reasoning text).

    With tags, the content is stripped of surrounding whitespace and is None when nothing is left; the reasoning
    is the blocks' texts, stripped, joined by a newline (None when they are all blank).
    """
    if _THINK_TAG.search(text) is None:
        return text, None
    parts: list[tuple[bool, str]] = []  # (is reasoning, text), in order
    depth, pos = 0, 0
    for match in _THINK_TAG.finditer(text):
        piece = text[pos : match.start()]
        pos = match.end()
        if match.group() == THINK_OPEN:
            parts.append((depth > 0, piece))
            depth += 1
        elif depth > 0:
            parts.append((True, piece))
            depth -= 1
        else:  # a close without an open: the reply began inside a block
            parts = [(True, p) for _, p in parts]
            parts.append((True, piece))
    parts.append((depth > 0, text[pos:]))
    content = "".join(p for thought, p in parts if not thought).strip()
    reasoning = "\n".join(p.strip() for thought, p in parts if thought and p.strip())
    return content or None, reasoning or None


def reasoning_text(value: Any) -> Optional[str]:
    """A reasoning field (``reasoning_content``, ``reasoning``) as text: a string as it is, a list of text parts
    (strings or ``{"text"|"thinking": str}`` dicts) joined; anything else -- a number, an object, blanks -- is no
    reasoning (None). Never raises: a server's odd field must not end an episode."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("thinking"))
                if isinstance(text, str):
                    texts.append(text)
        joined = "".join(texts)
        return joined if joined.strip() else None
    return None


def join_reasoning(*pieces: Optional[str]) -> Optional[str]:
    """Several reasoning texts of one reply (a field and ``<think>`` blocks), in order, newline-joined."""
    kept = [p for p in pieces if p]
    return "\n".join(kept) if kept else None


# ----------------------------------------------------------------------------------------- hermes

_HERMES_OPEN = "<tool_call>"
_HERMES_CLOSE = "</tool_call>"
_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _parse_hermes(text: str) -> ParsedCall:
    if _HERMES_OPEN not in text:
        return ParsedCall(content=_none_if_blank(text), tool_calls=None)
    calls: list[ToolCall] = []
    pieces: list[str] = []
    pos = 0
    for n, match in enumerate(_HERMES_BLOCK.finditer(text)):
        pieces.append(text[pos : match.start()])
        pos = match.end()
        value = _loads(match.group(1).strip(), f"<tool_call> block {n}")
        new, _ = _calls_from_json_value(value, len(calls), f"<tool_call> block {n}")
        calls.extend(new)
    rest = text[pos:]
    if _HERMES_OPEN in rest:  # an unclosed last block (generation stopped at the closing tag)
        before, _, body = rest.partition(_HERMES_OPEN)
        pieces.append(before)
        value = _loads(body.strip(), "unclosed <tool_call> block")
        new, _ = _calls_from_json_value(value, len(calls), "unclosed <tool_call> block")
        calls.extend(new)
    else:
        pieces.append(rest)
    return ParsedCall(content=_none_if_blank("".join(pieces)), tool_calls=calls)


# ------------------------------------------------------------------------------------------- json

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    match = _FENCE.match(stripped)
    return match.group(1) if match else stripped


def _parse_json(text: str) -> ParsedCall:
    body = _strip_fence(text)
    if not body:
        return ParsedCall(content=None, tool_calls=None)
    if body[0] not in "{[":
        return ParsedCall(content=_none_if_blank(text), tool_calls=None)
    value = _loads(body, "JSON tool call")
    calls, content = _calls_from_json_value(value, 0, "JSON tool call")
    return ParsedCall(content=_none_if_blank(content), tool_calls=calls or None)


_JSON_CALL_HINT = re.compile(r'"(?:name|tool_calls|function)"\s*:')


def _looks_like_json_call(text: str) -> bool:
    body = _strip_fence(text)
    return bool(body) and body[0] in "{[" and _JSON_CALL_HINT.search(body) is not None


# ----------------------------------------------------------------------------------- transformers


def has_response_parser(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` can parse responses itself (transformers ``parse_response`` + a template)."""
    if tokenizer is None or not callable(getattr(tokenizer, "parse_response", None)):
        return False
    return (
        getattr(tokenizer, "response_template", None) is not None
        or getattr(tokenizer, "response_schema", None) is not None
    )


@functools.lru_cache(maxsize=16)
def _parameter_names(fn: Callable[..., Any]) -> frozenset[str]:
    """The parameter names of a tokenizer class's ``parse_response`` (read once per class: it is asked every turn)."""
    return frozenset(inspect.signature(fn).parameters)


def _parse_transformers(text: str, tokenizer: Any, prefix: Optional[str], tools: Optional[list]) -> ParsedCall:
    if not has_response_parser(tokenizer):
        raise _SetupError(
            "parser 'transformers' needs a tokenizer with parse_response and a response_template "
            "(transformers >= 5) or response_schema; pass parser='hermes' or 'json' for this model"
        )
    fn = tokenizer.parse_response
    params = _parameter_names(getattr(fn, "__func__", fn))
    kwargs: dict[str, Any] = {}
    if "prefix" in params:  # newer API: the prompt tells the parser what the template pre-wrote
        kwargs["prefix"] = prefix if prefix is not None else ""
    if "tools" in params and tools:
        kwargs["tools"] = tools
    try:
        message = fn(text, **kwargs)
    except Exception as exc:
        raise _MarkupError(f"tokenizer response parser: {type(exc).__name__}: {exc}") from exc
    if not isinstance(message, dict):
        raise _MarkupError(f"tokenizer response parser returned {type(message).__name__}, expected a dict")
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    reasoning = message.get("reasoning_content") or message.get("thinking")
    raw_calls = message.get("tool_calls")
    calls = None
    if raw_calls:
        if not isinstance(raw_calls, list):
            raw_calls = [raw_calls]
        calls = [_call_from_obj(obj, i, "tokenizer response parser") for i, obj in enumerate(raw_calls)]
    return ParsedCall(
        content=_none_if_blank(content if isinstance(content, str) else None),
        tool_calls=calls,
        reasoning=_none_if_blank(reasoning if isinstance(reasoning, str) else None),
    )


# ------------------------------------------------------------------------------------------ entry


def _run_callable(fn: Callable[..., Any], text: str, tokenizer: Any) -> ParsedCall:
    try:
        n_params = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        n_params = 1
    out = fn(text, tokenizer) if n_params >= 2 else fn(text)
    if not isinstance(out, ParsedCall):
        raise _SetupError(f"custom parser {fn!r} returned {type(out).__name__}; it must return a ParsedCall")
    return out


def parse_tool_calls(
    text: str,
    parser: Union[str, Callable[..., ParsedCall]] = "auto",
    tokenizer: Any = None,
    *,
    prefix: Optional[str] = None,
    tools: Optional[list] = None,
    requestor: Requestor = "assistant",
) -> ParsedCall:
    """Split model text into content and tool calls; never raises for bad model output.

    ``prefix`` (the prompt) and ``tools`` are only used by the ``transformers`` parser; ``requestor`` tags
    the returned calls. An unknown parser name is a programming error and raises ``ValueError``.
    """
    if text is None:
        text = ""
    if not isinstance(text, str):
        return ParsedCall(
            content=None, tool_calls=None, error=f"model output must be a string, got {type(text).__name__}"
        )
    try:
        if callable(parser):
            result = _run_callable(parser, text, tokenizer)
        elif parser == "hermes":
            result = _parse_hermes(text)
        elif parser == "json":
            result = _parse_json(text)
        elif parser == "transformers":
            result = _parse_transformers(text, tokenizer, prefix, tools)
        elif parser == "auto":
            if has_response_parser(tokenizer):
                result = _parse_transformers(text, tokenizer, prefix, tools)
            elif _HERMES_OPEN in text:
                result = _parse_hermes(text)
            elif _looks_like_json_call(text):
                result = _parse_json(text)
            else:
                result = ParsedCall(content=_none_if_blank(text), tool_calls=None)
        elif parser in _REGISTRY:
            result = _run_callable(_REGISTRY[parser], text, tokenizer)
        else:
            raise _SetupError(
                f"unknown tool-call parser {parser!r}; choose one of {available_parsers()} or pass a callable"
            )
    except _MarkupError as exc:
        return ParsedCall(content=_none_if_blank(text), tool_calls=None, error=str(exc))
    except _SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - a custom parser failing is bad output, not a crash
        return ParsedCall(content=_none_if_blank(text), tool_calls=None, error=f"{type(exc).__name__}: {exc}")
    if result.tool_calls is not None:
        _retag(result.tool_calls, requestor)
    return result
