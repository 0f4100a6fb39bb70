"""``rollout --parser``: a server that returns ``<tool_call>`` markup in ``content`` (vLLM without a tool
parser) has it run as tool calls, not sent to the customer as text; malformed markup ends as agent_error."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.cli import main

CALL = (
    '<tool_call>{"name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"}}</tool_call>'
)
BROKEN = '<tool_call>{"name": "create_task", "arguments": {"user_id": </tool_call>'


def _reply(markup):
    def reply(body, n):
        last = body["messages"][-1]
        return "Your task is created." if last["role"] == "tool" else markup

    return reply


def _run(tmp_path, markup, *extra):
    out = tmp_path / "run.json"
    with OpenAIStub(_reply(markup)) as srv:
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--task-ids",
                "create_task_1",
                "--agent",
                "llm_agent",
                "--agent-llm",
                "stub-model",
                "--agent-base-url",
                srv.base_url,
                "--user",
                "oracle",
                "--max-steps",
                "6",
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
                *extra,
            ]
        )
    assert code == 0
    (run,) = json.loads(out.read_text())["simulations"]
    return run


def test_parser_turns_content_markup_into_tool_calls(tmp_path):
    run = _run(tmp_path, CALL, "--parser", "hermes")
    first = next(m for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data"))
    assert first["content"] is None
    assert [(c["name"], c["arguments"]) for c in first["tool_calls"]] == [
        ("create_task", {"user_id": "user_1", "title": "Important Meeting"})
    ]
    tool = next(m for m in run["messages"] if m["role"] == "tool")
    assert tool["id"] == first["tool_calls"][0]["id"] and not tool.get("error")
    assert first["raw_data"]["choices"][0]["message"]["content"] == CALL  # the server's reply is kept
    assert first["usage"] == {"completion_tokens": 5, "prompt_tokens": 10}
    assert run["reward_info"]["db_check"]["db_match"] is True  # the call changed the DB as the gold action does


def test_without_parser_the_markup_goes_to_the_user_as_text(tmp_path):
    run = _run(tmp_path, CALL)
    first = next(m for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data"))
    assert first["content"] == CALL and not first.get("tool_calls")
    assert not any(m["role"] == "tool" for m in run["messages"])


def test_malformed_markup_ends_as_agent_error(tmp_path):
    run = _run(tmp_path, BROKEN, "--parser", "hermes")
    assert run["termination_reason"] == "agent_error"
    assert not any(m["role"] == "tool" for m in run["messages"])


def test_unknown_parser_is_refused(tmp_path, capsys):
    assert (
        main(
            [
                "rollout",
                "--domain",
                "mock",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--no-progress",
                "--parser",
                "nope",
                "--output",
                str(tmp_path / "x.json"),
            ]
        )
        == 2
    )
    assert "nope" in capsys.readouterr().err
