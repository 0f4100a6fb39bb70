"""Message model: lossless tau2-JSON and OpenAI round trips, tau2's content rules."""

import json
from datetime import datetime

import pytest

from tau2_gym.core.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    from_openai,
    message_from_dict,
    now_iso,
    to_openai,
    tool_call_to_openai,
)


def test_tau2_json_round_trip_keeps_every_field():
    msg = AssistantMessage(
        content="hi",
        tool_calls=[ToolCall("f", {"a": [1, {"b": None}]}, id="c1")],
        turn_idx=3,
        cost=0.5,
        usage={"prompt_tokens": 1, "completion_tokens": 2},
        raw_data={"x": 1},
    )
    d = msg.to_dict()
    assert list(d) == ["role", "content", "tool_calls", "turn_idx", "timestamp", "cost", "usage", "raw_data"]
    back = message_from_dict(json.loads(json.dumps(d)))
    assert back == msg and back.to_dict() == d
    tm = ToolMessage(id="c1", content="x", requestor="user", error=True)
    assert message_from_dict(tm.to_dict()).to_dict() == tm.to_dict()


def test_unknown_keys_from_upstream_head_are_ignored():
    d = {"role": "user", "content": "x", "is_audio": False, "chunk_id": None, "contains_speech": True}
    assert message_from_dict(d) == UserMessage(content="x")


def test_openai_round_trip_with_json_string_arguments():
    msg = AssistantMessage(content=None, tool_calls=[ToolCall("book", {"n": 1.0, "s": "é"}, id="c9")])
    oa = to_openai(msg)
    assert oa["tool_calls"][0] == {
        "id": "c9",
        "type": "function",
        "function": {"name": "book", "arguments": json.dumps({"n": 1.0, "s": "é"})},
    }
    assert from_openai(oa) == msg
    tool = to_openai(ToolMessage(id="c9", content="ok"))
    assert tool == {"role": "tool", "tool_call_id": "c9", "content": "ok"}
    assert from_openai(tool) == ToolMessage(id="c9", content="ok")


def test_openai_malformed_arguments_raise_value_error():
    with pytest.raises(ValueError):
        from_openai({"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{bad"}}]})
    with pytest.raises(ValueError):
        from_openai({"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "[1]"}}]})


def test_content_rules():
    assert AssistantMessage(content=" \n").has_text_content() is False
    assert AssistantMessage(content=None, tool_calls=[]).is_tool_call() is True  # [] still counts
    with pytest.raises(ValueError):
        UserMessage(content="  ").validate()
    # equality ignores timestamps, like upstream
    assert SystemMessage("a", timestamp="1") == SystemMessage("a", timestamp="2")


def test_bad_message_dicts_are_rejected_clearly():
    with pytest.raises(ValueError, match="unknown message role"):
        message_from_dict({"role": "robot"})
    with pytest.raises(ValueError, match="needs an 'id'"):
        message_from_dict({"role": "tool", "content": "x"})


def test_messages_are_stamped_with_the_local_time_of_creation():
    before = datetime.now()
    stamps = [
        now_iso(),
        UserMessage(content="x").timestamp,
        ToolMessage(id="c", content="y").timestamp,
        SystemMessage("s").timestamp,
    ]
    after = datetime.now()
    for stamp in stamps:
        when = datetime.fromisoformat(stamp)
        assert when.tzinfo is None and before <= when <= after  # naive local time, as datetime.now()
    assert UserMessage(content="x", timestamp="given").timestamp == "given"


ARGUMENTS = [
    {},
    {"a": 'é\u2028"\\x\n'},
    {"user_id": "mia_li_3668", "n": None, "ok": True, "f": 2.5},
    {"nan": float("nan"), "inf": float("inf"), "big": 10**40},
    {1: "int key", None: "none key"},
    {"a": [1, {"b": 2}], "t": (1, 2)},
]


@pytest.mark.parametrize("args", ARGUMENTS, ids=range(len(ARGUMENTS)))
def test_openai_arguments_text_is_json_dumps(args):
    assert tool_call_to_openai(ToolCall("f", args, id="c"))["function"]["arguments"] == json.dumps(args)
