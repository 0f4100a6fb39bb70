"""Every kind of action -- well-formed or not -- has the documented outcome (README "Actions and malformed
actions") and none raises out of ``step``."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from tau2_gym.core.actions import ActionError, to_assistant_message
from tau2_gym.core.messages import AssistantMessage, ToolCall
from tau2_gym.players.users.scripted import ScriptedUser


def _call(name, arguments="{}", cid="c1"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


# (id, action, outcome, detail): outcome is one of
#   agent_error   -> the episode ends at once (terminated, reward 0)
#   tool_error    -> an "Error: ..." tool result comes back (detail: a substring of it)
#   tool_ok       -> tool result(s) come back without error (detail: number of results)
#   text          -> the text reaches the customer (detail: the text)
CASES = [
    ("none", None, "agent_error", "None"),
    ("empty string", "", "agent_error", "empty"),
    ("whitespace", "  \n\t", "agent_error", "empty"),
    ("int", 42, "agent_error", "unsupported action type"),
    ("bytes", b"get_users()", "agent_error", "unsupported action type"),
    ("empty list", [], "agent_error", "empty list"),
    ("empty dict", {}, "agent_error", "cannot read the action dict"),
    ("wrong role", {"role": "user", "content": "hi"}, "agent_error", "only send assistant"),
    ("assistant without content or calls", {"role": "assistant", "content": None}, "agent_error", "empty"),
    ("non-string content", {"role": "assistant", "content": 5}, "agent_error", "content must be"),
    ("tool_calls not a list", {"role": "assistant", "tool_calls": "get_users"}, "agent_error", "must be a list"),
    (
        "call without name",
        {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
        "agent_error",
        "without a 'name'",
    ),
    ("arguments invalid JSON", {"name": "create_task", "arguments": "{bad json"}, "agent_error", "not valid JSON"),
    ("arguments not an object", {"name": "create_task", "arguments": [1, 2]}, "agent_error", "must be a JSON object"),
    (
        "arguments not serialisable",
        {"name": "create_task", "arguments": {"title": {1, 2}}},
        "agent_error",
        "not JSON-serialisable",
    ),
    (
        "markup with broken JSON",
        '<tool_call>{"name": "get_users", "arguments": {</tool_call>',
        "agent_error",
        "malformed tool-call markup",
    ),
    ("markup without name", '<tool_call>{"arguments": {}}</tool_call>', "agent_error", "malformed tool-call markup"),
    (
        "markup with list arguments",
        '<tool_call>{"name": "get_users", "arguments": [1]}</tool_call>',
        "agent_error",
        "malformed tool-call markup",
    ),
    (
        "empty tool_calls and no content",
        {"role": "assistant", "content": None, "tool_calls": []},
        "agent_error",
        "empty",
    ),
    ("unknown tool", {"name": "no_such_tool", "arguments": {}}, "tool_error", "Error: Tool 'no_such_tool' not found."),
    (
        "missing arguments",
        {"name": "create_task", "arguments": {}},
        "tool_error",
        "Error: MockTools.create_task() missing 2 required positional arguments: 'user_id' and 'title'",
    ),
    (
        "unexpected argument",
        {"name": "get_users", "arguments": {"x": 1}},
        "tool_error",
        "got an unexpected keyword argument 'x'",
    ),
    (
        "wrong value",
        {"name": "create_task", "arguments": {"user_id": 5, "title": "t"}},
        "tool_error",
        "Error: User 5 not found",
    ),
    ("done in standard mode", {"name": "done", "arguments": {}}, "tool_error", "Error: Tool 'done' not found."),
    (
        "text and call mixed",
        {"role": "assistant", "content": "checking", "tool_calls": [_call("get_users")]},
        "tool_ok",
        1,
    ),
    ("list of calls", [{"name": "get_users", "arguments": {}}, {"name": "get_users"}], "tool_ok", 2),
    ("raw JSON call text", '{"name": "get_users", "arguments": {}}', "tool_ok", 1),
    ("hermes markup", 'Let me look.<tool_call>{"name": "get_users", "arguments": {}}</tool_call>', "tool_ok", 1),
    ("single OpenAI call", {"type": "function", "function": {"name": "get_users", "arguments": "{}"}}, "tool_ok", 1),
    ("ToolCall tagged as user", ToolCall("get_users", {}, id="u", requestor="user"), "tool_ok", 1),
    ("AssistantMessage", AssistantMessage(content=None, tool_calls=[ToolCall("get_users", {}, id="m")]), "tool_ok", 1),
    ("empty tool_calls with text", {"role": "assistant", "content": "hello", "tool_calls": []}, "text", "hello"),
    (
        "content parts",
        {"role": "assistant", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]},
        "text",
        "hi there",
    ),
    ("functional call with the default parser", "get_users()", "text", "get_users()"),
    ("stop token in standard mode", "###STOP###", "text", "###STOP###"),
]


@pytest.fixture
def env():
    e = gym.make("tau2/mock-v0", user=ScriptedUser(["please help"], then="ok"))
    e.reset(options={"task_id": "create_task_1"})
    return e


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_action_outcome(env, case):
    _, action, outcome, detail = case
    obs, reward, term, trunc, info = env.step(action)
    if outcome == "agent_error":
        assert (term, trunc, reward, info["termination_reason"]) == (True, False, 0.0, "agent_error")
        assert detail in info["error"]
        return
    assert not (term or trunc)
    if outcome == "text":
        assert obs[-2] == {"role": "assistant", "content": detail} and obs[-1] == {"role": "user", "content": "ok"}
        return
    results = []
    for m in reversed(obs):
        if m["role"] != "tool":
            break
        results.append(m)
    if outcome == "tool_error":
        assert len(results) == 1 and detail in results[0]["content"] and results[0]["content"].startswith("Error: ")
        assert info["num_errors"] == 1
    else:
        assert len(results) == detail and info["num_errors"] == 0
        assert obs[-1 - detail]["role"] == "assistant" and len(obs[-1 - detail]["tool_calls"]) == detail


def test_there_are_at_least_twenty_malformed_kinds():
    malformed = [c for c in CASES if c[2] in ("agent_error", "tool_error")]
    assert len(malformed) >= 20


def test_calls_without_ids_get_per_episode_ids_unless_disabled():
    e = gym.make("tau2/mock-v0", user=ScriptedUser(["hi"], then="ok"))
    e.reset(options={"task_id": "create_task_1"})
    e.step({"name": "get_users", "arguments": {}})
    obs, *_ = e.step([{"name": "get_users"}, {"name": "get_users"}])
    ids = [c["id"] for m in obs if m.get("tool_calls") for c in m["tool_calls"]]
    assert ids == ["call_0", "call_1", "call_2"]
    e = gym.make("tau2/mock-v0", user=ScriptedUser(["hi"], then="ok"), fill_tool_call_ids=False)
    e.reset(options={"task_id": "create_task_1"})
    obs, *_ = e.step({"name": "get_users", "arguments": {}})
    assert obs[-2]["tool_calls"][0]["id"] == "" and obs[-1]["tool_call_id"] == ""


def test_tau2_parser_reads_upstream_gym_action_strings():
    e = gym.make("tau2/mock-v0", parser="tau2", user=ScriptedUser(["hi"], then="ok"))
    e.reset(options={"task_id": "create_task_1"})
    obs, *_ = e.step("create_task(user_id='user_1', title='Meet')")
    assert obs[-2]["tool_calls"][0]["function"]["name"] == "create_task"
    assert obs[-2]["tool_calls"][0]["function"]["arguments"] == '{"user_id": "user_1", "title": "Meet"}'
    assert obs[-1]["role"] == "tool" and '"Meet"' in obs[-1]["content"]
    obs, *_ = e.step('{"name": "get_users", "arguments": {}}')
    assert obs[-2]["tool_calls"][0]["function"]["name"] == "get_users"
    obs, *_ = e.step("just talking (really)")
    assert obs[-2] == {"role": "assistant", "content": "just talking (really)"}


def test_a_malformed_action_keeps_its_text_in_the_record():
    e = gym.make("tau2/mock-v0")
    e.reset(options={"task_id": "create_task_1"})
    text = '<tool_call>{"name": "get_users", "arguments": {</tool_call>'
    *_, info = e.step(text)
    last = info["simulation_run"]["messages"][-1]
    assert last["role"] == "assistant" and last["content"] == text and last["tool_calls"] is None


def test_solo_text_is_agent_error():
    e = gym.make("tau2/mock-solo-v0")
    e.reset(options={"task_id": "create_task_1"})
    *_, term, trunc, info = e.step("I created it")
    assert term and info["termination_reason"] == "agent_error"


ARGUMENT_TEXTS = [
    '{"a": 1}',
    '{"a":1,"b":[1,2.5,null,true]}',
    ' {"a": 1}',
    '{"a": 1}\n',
    '{"a": 1} x',
    '{"a": 1}{"b": 2}',
    "\ufeff{}",
    "{bad",
    "[1, 2]",
    '"s"',
    "NaN",
    '{"x": NaN, "y": -Infinity}',
    '{"a": 1, "a": 2}',
    "1",
    "",
    "   ",
    "nul",
    '{"a": "\\u00e9"}',
    "[" * 5000 + "]" * 5000,
]


@pytest.mark.parametrize("text", ARGUMENT_TEXTS, ids=range(len(ARGUMENT_TEXTS)))
def test_string_arguments_are_read_as_json_loads_reads_them(text):
    """Arguments sent as a JSON string: what ``json.loads`` accepts (an object) is the call's arguments; a blank
    string is no arguments; anything else is an ActionError naming json's own reason."""
    action = {"name": "f", "arguments": text}
    if not text.strip():
        assert to_assistant_message(action).tool_calls[0].arguments == {}
        return
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(ActionError, match="arguments are not valid JSON") as got:
            to_assistant_message(action)
        assert f"({exc.msg})" in str(got.value)
        return
    except RecursionError:
        with pytest.raises(ActionError, match="nested too deeply"):
            to_assistant_message(action)
        return
    if not isinstance(expected, dict):
        with pytest.raises(ActionError, match="must be a JSON object"):
            to_assistant_message(action)
        return
    got = to_assistant_message(action).tool_calls[0].arguments
    assert json.dumps(got) == json.dumps(expected)  # (NaN never equals itself: compare the texts)
