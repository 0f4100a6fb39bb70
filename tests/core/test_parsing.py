"""Tool-call parsing of raw model text (tau2_gym.core.parsing)."""

from __future__ import annotations

import json

import pytest

from tau2_gym.core.messages import ToolCall
from tau2_gym.core.parsing import ParsedCall, available_parsers, parse_tool_calls, register_parser


def calls(result: ParsedCall) -> list[tuple]:
    return [(c.id, c.name, c.arguments, c.requestor) for c in result.tool_calls]


def hermes(name: str, args=None, **extra) -> str:
    body = {"name": name, "arguments": {} if args is None else args, **extra}
    return f"<tool_call>{json.dumps(body)}</tool_call>"


# ------------------------------------------------------------------------------------ hermes


def test_hermes_single_call_without_text():
    r = parse_tool_calls(hermes("get_user_details", {"user_id": "u1"}), "hermes")
    assert r == ParsedCall(content=None, tool_calls=[ToolCall("get_user_details", {"user_id": "u1"}, id="call_0")])


def test_hermes_several_calls_keep_order_and_get_sequential_ids():
    text = hermes("a", {"x": 1}) + "\n" + hermes("b") + "\n" + hermes("c", {"y": [1, 2]})
    r = parse_tool_calls(text, "hermes")
    assert calls(r) == [
        ("call_0", "a", {"x": 1}, "assistant"),
        ("call_1", "b", {}, "assistant"),
        ("call_2", "c", {"y": [1, 2]}, "assistant"),
    ]
    assert r.content is None and r.error is None


def test_hermes_text_around_calls_becomes_content():
    r = parse_tool_calls("Let me check.\n" + hermes("a") + "\nOne moment.", "hermes")
    assert r.content == "Let me check.\n\nOne moment."
    assert [c.name for c in r.tool_calls] == ["a"]


def test_hermes_multiline_json_and_explicit_id_are_read():
    text = '<tool_call>\n{\n  "id": "abc",\n  "name": "a",\n  "arguments": {"k": "v"}\n}\n</tool_call>'
    assert calls(parse_tool_calls(text, "hermes")) == [("abc", "a", {"k": "v"}, "assistant")]


def test_hermes_arguments_given_as_json_string_or_parameters_key():
    assert calls(parse_tool_calls('<tool_call>{"name": "a", "arguments": "{\\"k\\": 1}"}</tool_call>', "hermes")) == [
        ("call_0", "a", {"k": 1}, "assistant")
    ]
    assert calls(parse_tool_calls('<tool_call>{"name": "a", "parameters": {"k": 2}}</tool_call>', "hermes")) == [
        ("call_0", "a", {"k": 2}, "assistant")
    ]
    assert calls(parse_tool_calls('<tool_call>{"name": "done"}</tool_call>', "hermes")) == [
        ("call_0", "done", {}, "assistant")
    ]


def test_hermes_unclosed_final_block_is_accepted_when_it_parses():
    r = parse_tool_calls('Sure. <tool_call>{"name": "a", "arguments": {"k": 1}}', "hermes")
    assert r.content == "Sure." and calls(r) == [("call_0", "a", {"k": 1}, "assistant")]


def test_hermes_block_holding_a_list_yields_several_calls():
    r = parse_tool_calls('<tool_call>[{"name": "a"}, {"name": "b", "arguments": {"z": 0}}]</tool_call>', "hermes")
    assert calls(r) == [("call_0", "a", {}, "assistant"), ("call_1", "b", {"z": 0}, "assistant")]


def test_plain_text_has_no_calls():
    r = parse_tool_calls("  Hello, I need help with my phone.  ", "hermes")
    assert r == ParsedCall(content="Hello, I need help with my phone.", tool_calls=None, error=None)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('<tool_call>{"name": "a", "arguments": {"k": 1}</tool_call>', "invalid JSON"),
        ('<tool_call>{"arguments": {"k": 1}}</tool_call>', "no 'name'"),
        ('<tool_call>{"name": "", "arguments": {}}</tool_call>', "no 'name'"),
        ('<tool_call>{"name": 5, "arguments": {}}</tool_call>', "no 'name'"),
        ('<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "a", "arguments": "not json"}</tool_call>', "not valid JSON"),
        ('<tool_call>{"name": "a", "arguments": "[1]"}</tool_call>', "must be a JSON object"),
        ('<tool_call>"just a string"</tool_call>', "must be a JSON object"),
        ("<tool_call></tool_call>", "invalid JSON"),
        ("<tool_call>[]</tool_call>", "empty list"),
        ("ok " + hermes("a") + ' <tool_call>{"name": "b", "arguments": {</tool_call>', "block 1"),
        ('<tool_call>{"name": "a", "arguments": {"k": ', "unclosed <tool_call> block"),
    ],
)
def test_hermes_malformed_markup_sets_error_and_never_raises(text, fragment):
    r = parse_tool_calls(text, "hermes")
    assert r.error is not None and fragment in r.error
    assert r.tool_calls is None  # no partial execution of a half-parsed message
    assert r.content == text.strip()


# ------------------------------------------------------------------------------------ json


def test_json_flat_call_and_list_of_calls():
    assert calls(parse_tool_calls('{"name": "a", "arguments": {"k": 1}}', "json")) == [
        ("call_0", "a", {"k": 1}, "assistant")
    ]
    r = parse_tool_calls('[{"name": "a"}, {"name": "b", "arguments": {"k": 2}}]', "json")
    assert calls(r) == [("call_0", "a", {}, "assistant"), ("call_1", "b", {"k": 2}, "assistant")]
    assert r.content is None


def test_json_openai_tool_calls_shape_with_string_arguments_and_content():
    text = json.dumps(
        {
            "content": "Checking now.",
            "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "a", "arguments": json.dumps({"k": 1})}},
                {"type": "function", "function": {"name": "b", "arguments": ""}},
            ],
        }
    )
    r = parse_tool_calls(text, "json")
    assert r.content == "Checking now."
    assert calls(r) == [("call_9", "a", {"k": 1}, "assistant"), ("call_1", "b", {}, "assistant")]


def test_json_openai_shape_with_no_calls_is_content_only():
    r = parse_tool_calls('{"content": "just talking", "tool_calls": []}', "json")
    assert r == ParsedCall(content="just talking", tool_calls=None)
    assert parse_tool_calls('{"content": "x", "tool_calls": null}', "json").tool_calls is None


def test_json_in_a_markdown_fence():
    r = parse_tool_calls('```json\n{"name": "a", "arguments": {"k": true}}\n```', "json")
    assert calls(r) == [("call_0", "a", {"k": True}, "assistant")]


def test_json_parser_leaves_non_json_text_as_content():
    assert parse_tool_calls("Hi there", "json") == ParsedCall(content="Hi there", tool_calls=None)
    assert parse_tool_calls("   ", "json") == ParsedCall(content=None, tool_calls=None)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('{"name": "a", "arguments": {', "invalid JSON"),
        ('{"foo": 1}', "no 'name'"),
        ("[1, 2]", "must be a JSON object"),
        ("[]", "empty list"),
        ('{"tool_calls": "a"}', "must be a list"),
        ('{"tool_calls": []}', "no tool calls and no content"),
        ('{"tool_calls": [{"type": "function", "function": {"arguments": "{}"}}]}', "no 'name'"),
        ('{"name": "a", "arguments": 3}', "must be a JSON object"),
    ],
)
def test_json_malformed_sets_error(text, fragment):
    r = parse_tool_calls(text, "json")
    assert r.error is not None and fragment in r.error and r.tool_calls is None


# ------------------------------------------------------------------------------------ auto and dispatch


def test_auto_picks_hermes_then_json_then_plain_text():
    assert calls(parse_tool_calls("x " + hermes("a"))) == [("call_0", "a", {}, "assistant")]
    assert calls(parse_tool_calls('{"name": "a", "arguments": {}}')) == [("call_0", "a", {}, "assistant")]
    assert parse_tool_calls("My number is 555.").tool_calls is None


def test_auto_treats_json_without_call_keys_as_text_but_broken_call_json_as_error():
    r = parse_tool_calls('{"order": "#W1"} is what I have')
    assert r == ParsedCall(content='{"order": "#W1"} is what I have', tool_calls=None)
    assert parse_tool_calls('{"note": 1}').tool_calls is None and parse_tool_calls('{"note": 1}').error is None
    broken = parse_tool_calls('{"name": "a", "arguments": {')
    assert broken.error is not None and "invalid JSON" in broken.error


def test_requestor_tags_every_call():
    r = parse_tool_calls(hermes("a") + hermes("b"), requestor="user")
    assert [c.requestor for c in r.tool_calls] == ["user", "user"]


def test_empty_and_none_text():
    assert parse_tool_calls("") == ParsedCall(content=None, tool_calls=None)
    assert parse_tool_calls(None) == ParsedCall(content=None, tool_calls=None)  # type: ignore[arg-type]
    assert parse_tool_calls(b"x").error is not None  # type: ignore[arg-type]


def test_long_malformed_text_is_clipped_in_the_error():
    r = parse_tool_calls("<tool_call>{" + "x" * 5000 + "</tool_call>", "hermes")
    assert r.error is not None and len(r.error) < 400 and "chars)" in r.error


def test_unknown_parser_name_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown tool-call parser 'nope'"):
        parse_tool_calls("x", "nope")


def test_callable_parser_is_used_and_its_failures_become_errors():
    def stub(text):
        return ParsedCall(content=None, tool_calls=[ToolCall("fixed", {"t": text})])

    r = parse_tool_calls("anything", stub, requestor="user")
    assert calls(r) == [("", "fixed", {"t": "anything"}, "user")]

    def boom(text):
        raise RuntimeError("parser crashed")

    r = parse_tool_calls("anything", boom)
    assert r.error == "RuntimeError: parser crashed" and r.content == "anything" and r.tool_calls is None
    with pytest.raises(ValueError, match="must return a ParsedCall"):
        parse_tool_calls("x", lambda text: "not a ParsedCall")


def test_registered_parser_receives_the_tokenizer():
    seen = {}

    def with_tok(text, tokenizer):
        seen["tok"] = tokenizer
        return ParsedCall(content=text, tool_calls=None)

    register_parser("test-two-arg", with_tok)
    assert "test-two-arg" in available_parsers()
    assert parse_tool_calls("hey", "test-two-arg", tokenizer="TOK").content == "hey" and seen["tok"] == "TOK"


# ------------------------------------------------------------------------------------ transformers adapter


class OldStyleTokenizer:
    """transformers 4.x shape: ``response_schema`` and ``parse_response(response, schema=None)``."""

    response_schema = {"x-regex": "..."}

    def __init__(self, message):
        self.message = message

    def parse_response(self, response, schema=None):
        if isinstance(self.message, Exception):
            raise self.message
        return self.message


class NewStyleTokenizer:
    """transformers 5.x shape: ``response_template`` and ``parse_response(..., prefix=, tools=)``."""

    response_template = {"fields": {}}

    def __init__(self):
        self.seen = None

    def parse_response(self, response, schema=None, *, prefix=None, tools=None):
        self.seen = (response, prefix, tools)
        return {
            "role": "assistant",
            "content": "ok",
            "reasoning_content": "thought",
            "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": {"n": 1}}}],
        }


def test_transformers_parser_adapts_old_and_new_tokenizer_apis():
    old = OldStyleTokenizer(
        {
            "role": "assistant",
            "content": "hi",
            "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": '{"n": 2}'}}],
        }
    )
    r = parse_tool_calls("raw", "transformers", old)
    assert r.content == "hi" and calls(r) == [("call_0", "a", {"n": 2}, "assistant")]

    new = NewStyleTokenizer()
    r = parse_tool_calls("raw", "auto", new, prefix="PROMPT", tools=[{"t": 1}])
    assert new.seen == ("raw", "PROMPT", [{"t": 1}])
    assert r.content == "ok" and r.reasoning == "thought" and calls(r) == [("call_0", "a", {"n": 1}, "assistant")]


def test_transformers_parser_failures_are_errors_and_missing_schema_is_a_setup_error():
    r = parse_tool_calls("raw", "transformers", OldStyleTokenizer(ValueError("json parser could not parse")))
    assert r.error is not None and "could not parse" in r.error and r.content == "raw"
    bad_args = OldStyleTokenizer({"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": "[1]"}}]})
    assert "must be a JSON object" in parse_tool_calls("raw", "transformers", bad_args).error
    with pytest.raises(ValueError, match="parser 'transformers' needs"):
        parse_tool_calls("raw", "transformers", object())
    # auto without a tokenizer parser falls back to the text parsers
    assert calls(parse_tool_calls(hermes("a"), "auto", object())) == [("call_0", "a", {}, "assistant")]
