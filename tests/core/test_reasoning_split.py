"""Thinking models: reasoning is split from content on every path an action takes, kept on the message's
``raw_data["reasoning_content"]``, and never reaches the customer, COMMUNICATE or the NL judge; what the agent sees
of its own past reasoning follows ``reasoning_history``; a reply with only reasoning (or nothing) has one outcome."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import pytest

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.core.actions import EMPTY_REPLY_KEY, to_assistant_message
from tau2_gym.core.messages import AssistantMessage
from tau2_gym.core.parsing import reasoning_text, split_reasoning
from tau2_gym.core.records import as_dict
from tau2_gym.core.termination import TerminationReason
from tau2_gym.players.users.scripted import ScriptedUser
from tau2_gym.scoring.judges import CallableJudge
from tau2_gym.scoring.metrics import empty_agent_replies

SECRET = "SECRET-THOUGHT-7731"
HERMES_CALL = '<tool_call>{"name": "get_users", "arguments": {}}</tool_call>'


# ------------------------------------------------------------------------------------------ the split


@pytest.mark.parametrize(
    "text,content,reasoning",
    [
        ("Hello there.", "Hello there.", None),  # no tag: unchanged (not even stripped)
        ("  padded  ", "  padded  ", None),
        ("<think>plan</think>Hello", "Hello", "plan"),
        ("<think>\nplan\n</think>\n\nHello", "Hello", "plan"),
        ("plan</think>Hello", "Hello", "plan"),  # the template's generation prompt opened the block
        ("<think>cut at the token limit", None, "cut at the token limit"),  # unclosed: all reasoning
        ("<think>a</think>Hi <think>b</think>there", "Hi there", "a\nb"),  # repeated blocks
        ("<think>a<think>b</think>c</think>done", "done", "a\nb\nc"),  # nested: the outer block decides
        ("Sure. <think>x</think> Done", "Sure.  Done", "x"),
        ("<think></think>", None, None),
        ("<think> \n </think>   ", None, None),  # whitespace only
        ("I think> not a tag", "I think> not a tag", None),
    ],
)
def test_split_reasoning_has_a_defined_outcome_for_every_shape(text, content, reasoning):
    assert split_reasoning(text) == (content, reasoning)


@pytest.mark.parametrize(
    "value,expected",
    [
        ("thought", "thought"),
        ("   ", None),
        ([{"type": "text", "text": "a"}, "b", {"thinking": "c"}, 3], "abc"),
        (5, None),
        ({"text": "x"}, None),
        (None, None),
        (float("nan"), None),
    ],
)
def test_a_reasoning_field_that_is_not_a_string_is_read_or_ignored_never_raises(value, expected):
    assert reasoning_text(value) == expected
    msg = to_assistant_message({"role": "assistant", "content": "Hi", "reasoning_content": value})
    assert msg.content == "Hi" and msg.reasoning == expected


@pytest.mark.parametrize("parser", ["auto", "hermes", "json", "tau2", "none"])
def test_text_actions_of_every_parser_keep_the_thought_out_of_the_content(parser):
    msg = to_assistant_message(f"<think>{SECRET}</think>Your total is 10 dollars.", parser=parser)
    assert msg.content == "Your total is 10 dollars." and msg.tool_calls is None
    assert msg.reasoning == SECRET and msg.raw_data["reasoning_content"] == SECRET


@pytest.mark.parametrize("parser", ["auto", "hermes"])
def test_a_tool_call_written_inside_a_thought_is_not_made(parser):
    msg = to_assistant_message(f"<think>maybe {HERMES_CALL}</think>Let me check.", parser=parser)
    assert msg.tool_calls is None and msg.content == "Let me check." and "get_users" in msg.reasoning
    made = to_assistant_message(f"<think>{SECRET}</think>{HERMES_CALL}", parser=parser)
    assert [c.name for c in made.tool_calls] == ["get_users"] and made.reasoning == SECRET and made.content is None


def test_openai_message_forms_carry_reasoning_in_a_field_or_in_the_content():
    field = to_assistant_message({"role": "assistant", "content": "Hi", "reasoning_content": SECRET})
    newer = to_assistant_message({"role": "assistant", "content": "Hi", "reasoning": SECRET})
    inline = to_assistant_message(
        {"role": "assistant", "content": [{"type": "text", "text": f"<think>{SECRET}</think>Hi"}]}
    )
    both = to_assistant_message({"content": "<think>b</think>Hi", "reasoning_content": "a"})
    assert [m.content for m in (field, newer, inline, both)] == ["Hi"] * 4
    assert [m.reasoning for m in (field, newer, inline)] == [SECRET] * 3 and both.reasoning == "a\nb"
    # a server reply as the OpenAI agent records it: the reasoning is in the response's own message
    raw = {"choices": [{"message": {"role": "assistant", "content": "Hi", "reasoning_content": SECRET}}]}
    reply = to_assistant_message(AssistantMessage(content="<think>more</think>Hi", raw_data=raw))
    assert (
        reply.content == "Hi" and reply.reasoning == f"{SECRET}\nmore" and reply.raw_data["choices"] == raw["choices"]
    )


# ------------------------------------------------------------------------------ the reward never sees it


def play_gold(env, task_id: str) -> None:
    _, info = env.reset(options={"task_id": task_id})
    for a in info["task"].evaluation_criteria.actions or []:
        env.step({"name": a.name, "arguments": a.arguments})


def test_airline_task_11_a_number_said_only_in_a_thought_earns_no_communicate_credit():
    """v1.0.1 airline task 11 (reward basis DB + COMMUNICATE, communicate info 5244), after the gold actions."""
    env = gym.make("tau2/airline-v0")
    endings = {}
    for name, final in (
        ("think", "<think>The total is 5244 dollars.</think>All done."),
        ("plain", "All done."),
        ("said", "The refund of 5244 dollars is on its way. All done."),
    ):
        play_gold(env, "11")
        _, reward, term, _, info = env.step(final)
        assert term and info["termination_reason"] == "user_stop"
        endings[name] = (reward, info["reward_info"]["reward_breakdown"], as_dict(info["simulation_run"]))
    assert endings["think"][:2] == (0.0, {"DB": 1.0, "COMMUNICATE": 0.0}) == endings["plain"][:2]
    assert endings["said"][:2] == (1.0, {"DB": 1.0, "COMMUNICATE": 1.0})  # the check can pass: it reads content
    last = [m for m in endings["think"][2]["messages"] if m["role"] == "assistant"][-1]
    assert last["content"] == "All done." and last["raw_data"] == {"reasoning_content": "The total is 5244 dollars."}


def test_an_nl_assertion_met_only_inside_reasoning_fails_the_judge():
    """v1.0.1 retail task 24 (DB + NL_ASSERTION, no gold action): a stub judge that passes only when the
    trajectory it is shown says the materials."""
    seen = []

    def judge(system: str, user: str) -> str:
        conversation = user[: user.rindex("expectedOutcomes:")]  # the assertions themselves name the materials
        seen.append(conversation)
        ok = "polyester and cotton" in conversation
        assertions = json.loads(user[user.rindex("expectedOutcomes:") + len("expectedOutcomes:") :].replace("'", '"'))
        return json.dumps(
            {"results": [{"expectedOutcome": a, "reasoning": "stub", "metExpectation": ok} for a in assertions]}
        )

    env = gym.make("tau2/retail-v0", judge=CallableJudge(judge))
    rewards = {}
    for name, text in (
        ("think", "<think>The materials are polyester and cotton.</think>Anything else I can do?"),
        ("said", "The materials are polyester and cotton. Anything else I can do?"),
    ):
        env.reset(options={"task_id": "24"})
        done = False
        while not done:
            _, reward, term, trunc, info = env.step(text)
            done = term or trunc
        rewards[name] = (reward, info["reward_info"]["reward_breakdown"].get("NL_ASSERTION"))
    assert rewards == {"think": (0.0, 0.0), "said": (1.0, 1.0)}
    assert len(seen) == 2 and "polyester" not in seen[0] and "polyester and cotton" in seen[1]


# ---------------------------------------------------------------------------- the customer never sees it


def customer_stub():
    from openai_stub import OpenAIStub

    def reply(body, n):
        agent_turns = sum(1 for m in body["messages"][1:] if m["role"] == "user")
        return "Hi, I need help with my account." if agent_turns <= 2 else "Thanks. ###STOP###"

    return OpenAIStub(reply)


def llm_customer(server):
    from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator

    return OpenAIUserSimulator(OpenAIUserConfig(model="user-m", base_url=server.base_url, api_key_env=None, cache=None))


def thinking_turns():
    return [f"<think>{SECRET} one</think>Let me look.", f"<think>{SECRET} two</think>Done, anything else?"]


def assert_never_saw(server):
    assert server.requests, "the customer was never asked"
    assert SECRET not in json.dumps(server.requests)


def test_a_stub_llm_customer_never_receives_reasoning_through_env_step():
    pytest.importorskip("openai")
    with customer_stub() as server:
        env = gym.make("tau2/mock-v0", user=llm_customer(server), reasoning_history="keep")
        env.reset(seed=0, options={"task_id": "create_task_1"})
        for action in thinking_turns():
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        assert_never_saw(server)
        assert any(m.get("reasoning_content") for m in obs if m["role"] == "assistant")  # the agent's own view keeps it


def test_a_stub_llm_customer_never_receives_reasoning_through_the_vector_env():
    pytest.importorskip("openai")
    with customer_stub() as server:
        vec = gym.make_vec("tau2/mock-v0", num_envs=2, user=llm_customer(server))
        vec.reset(seed=0, options={"task_id": "create_task_1"})
        for action in thinking_turns():
            vec.step([action, action])
        assert_never_saw(server)


def test_a_stub_llm_customer_never_receives_reasoning_in_a_rollout_and_reasoning_only_replies_are_counted(tmp_path):
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
    from tau2_gym.runner.collect import collect

    def agent_reply(body, n):
        if "reasoning only" in body["messages"][0]["content"]:
            return {"content": None, "reasoning_content": f"{SECRET} and nothing else"}
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turns <= 1:  # the greeting only: think in a field, and in the text
            return {"content": f"<think>{SECRET} inline</think>Let me look.", "reasoning_content": SECRET}
        return {"content": "Done, anything else?", "reasoning": SECRET}

    with customer_stub() as customer, OpenAIStub(agent_reply) as agent:
        policy = OpenAIAgentPolicy(
            OpenAIAgentConfig(model="agent-m", base_url=agent.base_url, api_key_env=None, empty_retries=2)
        )
        report = collect(
            ["create_task_1", "update_task_1"],
            policy,
            llm_customer(customer),
            domain="mock",
            output=str(tmp_path / "run.json"),
            progress=False,
        )
        assert_never_saw(customer)
    runs = {r["task_id"]: r for r in report.simulations}
    said = [m for m in runs["create_task_1"]["messages"] if m["role"] == "assistant"][1:]
    assert [m["content"] for m in said] == ["Let me look.", "Done, anything else?"]
    assert said[0]["raw_data"]["reasoning_content"] == f"{SECRET}\n{SECRET} inline"
    assert report.empty_agent_replies == {"empty": 0, "reasoning_only": 0}
    assert report.results["info"]["reasoning_history"] == "drop"


def test_a_reasoning_only_server_reply_is_the_policys_output_not_retried(tmp_path):
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    from tau2_gym.cli.rollout import summary
    from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
    from tau2_gym.runner.collect import collect

    with OpenAIStub([{"content": "", "reasoning_content": f"{SECRET} ran out"}]) as agent:
        policy = OpenAIAgentPolicy(
            OpenAIAgentConfig(model="agent-m", base_url=agent.base_url, api_key_env=None, empty_retries=2)
        )
        report = collect(["create_task_1"], policy, None, domain="mock", progress=False)
        assert len(agent.requests) == 1  # not re-requested: the policy produced it
    (run,) = report.simulations
    assert run["termination_reason"] == TerminationReason.AGENT_ERROR and run["reward_info"]["reward"] == 0.0
    assert run["info"][EMPTY_REPLY_KEY] == "reasoning_only"
    assert run["info"]["rejected_agent_reply"]["raw_data"]["reasoning_content"] == f"{SECRET} ran out"
    assert all(SECRET not in (m.get("content") or "") for m in run["messages"])
    assert report.empty_agent_replies == {"empty": 0, "reasoning_only": 1}
    assert "1 with reasoning only" in summary(report, 1)


def test_a_stub_llm_customer_never_receives_reasoning_through_tau2_gym_serve():
    pytest.importorskip("openai")
    pytest.importorskip("openenv.core.env_server", reason="needs the openenv extra")
    from tau2_gym.frameworks.openenv import Tau2Action, Tau2Client, Tau2Server

    async def drive(url):
        async with Tau2Client(url) as client:
            await client.reset(task_id="create_task_1", seed=0)
            for action in thinking_turns():
                result = await client.step(Tau2Action(action=action))
                if result.done:
                    break

    with customer_stub() as server:
        with Tau2Server("tau2/mock-v0", {"user": llm_customer(server)}, port=0) as tau2:
            asyncio.run(drive(tau2.url))
        assert_never_saw(server)


def test_the_customers_own_reasoning_never_reaches_the_agent():
    env = gym.make("tau2/mock-v0", user=ScriptedUser([f"<think>{SECRET}</think>Hello, I need help."]))
    obs, _ = env.reset(options={"task_id": "create_task_1"})
    assert obs[-1] == {"role": "user", "content": "Hello, I need help."}
    assert env.unwrapped.loop.trajectory[-1].reasoning == SECRET


# ---------------------------------------------------------------------- empty and reasoning-only replies


@pytest.mark.parametrize(
    "action,kind",
    [
        (f"<think>{SECRET}</think>", "reasoning_only"),
        (f"<think>{SECRET}", "reasoning_only"),
        ({"role": "assistant", "content": None, "reasoning_content": SECRET}, "reasoning_only"),
        ({"role": "assistant", "content": "  ", "reasoning": [{"type": "text", "text": SECRET}]}, "reasoning_only"),
        ("   ", "empty"),
        ({"role": "assistant", "content": None, "reasoning_content": 7}, "empty"),
    ],
)
def test_a_reply_without_text_or_calls_ends_as_agent_error_and_is_counted(action, kind):
    env = gym.make("tau2/mock-v0")
    env.reset(options={"task_id": "create_task_1"})
    obs, reward, term, trunc, info = env.step(action)
    assert (reward, term, trunc, info["termination_reason"]) == (0.0, True, False, "agent_error")
    assert info[EMPTY_REPLY_KEY] == kind
    run = as_dict(info["simulation_run"])
    assert run["info"][EMPTY_REPLY_KEY] == kind
    assert (
        info["error"]
        == {
            "empty": "agent sent an empty message (no text, no tool calls)",
            "reasoning_only": "agent sent only reasoning (no text, no tool calls)",
        }[kind]
    )
    assert obs[-1]["role"] == "user"  # the reply is not in the trajectory (upstream's messages are valid ones)
    if kind == "reasoning_only":
        assert run["info"]["rejected_agent_reply"]["raw_data"]["reasoning_content"] == SECRET
    assert empty_agent_replies([run]) == {"empty": int(kind == "empty"), "reasoning_only": int(kind != "empty")}


# ------------------------------------------------------------------------------------ reasoning_history


@pytest.mark.parametrize("history", ["drop", "keep"])
def test_the_agents_observation_holds_its_past_reasoning_only_with_keep(history):
    env = gym.make("tau2/mock-v0", user=ScriptedUser(["Hello.", "Go on."]), reasoning_history=history)
    env.reset(options={"task_id": "create_task_1"})
    obs, *_ = env.step(f"<think>{SECRET}</think>How can I help?")
    mine = obs[-2]
    assert mine["role"] == "assistant" and mine["content"] == "How can I help?"
    assert mine.get("reasoning_content") == (SECRET if history == "keep" else None)
    assert env.unwrapped.results_info()["reasoning_history"] == history


def test_reasoning_history_is_checked_on_every_env_and_the_rollout_config():
    from tau2_gym.runner.config import RolloutConfig

    for make in (
        lambda: gym.make("tau2/mock-v0", reasoning_history="all"),
        lambda: gym.make_vec("tau2/mock-v0", num_envs=2, reasoning_history="all"),
        lambda: gym.make("tau2/mock-user-v0", reasoning_history="all"),
        lambda: RolloutConfig(domain="mock", reasoning_history="all"),
    ):
        with pytest.raises(ValueError, match="reasoning_history='all'; choose one of drop, keep"):
            make()
    env = gym.make("tau2/mock-user-v0", reasoning_history="keep")
    assert env.unwrapped.config.reasoning_history == "keep"


def test_rollout_cli_refuses_an_unknown_reasoning_history(capsys):
    from tau2_gym.cli import main

    with pytest.raises(SystemExit):
        main(["rollout", "--domain", "mock", "--agent", "oracle", "--reasoning-history", "all"])
    assert "invalid choice: 'all' (choose from 'drop', 'keep')" in capsys.readouterr().err


def test_the_customer_env_policy_keeps_its_own_reasoning_with_keep_and_the_agent_never_sees_it():
    env = gym.make("tau2/mock-user-v0", reasoning_history="keep")
    env.reset(options={"task_id": "create_task_1"})
    obs, *_ = env.step(f"<think>{SECRET}</think>Please create a task called 'Important Meeting' for user_1.")
    mine = [m for m in obs if m["role"] == "assistant"]  # the customer's turns, role-flipped in its view
    assert mine[-1]["content"].startswith("Please create") and mine[-1]["reasoning_content"] == SECRET
    assert SECRET not in json.dumps(env.unwrapped.loop.agent_messages())
