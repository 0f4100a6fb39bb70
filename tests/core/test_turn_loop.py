"""The half-duplex turn loop (tau2_gym/core/turn_loop.py): upstream orchestrator semantics, pinned case by case.

Expected step counts and termination reasons follow reference §2 (tau2-engine.md): every delivery is one
step, checks are skipped while a tool result is pending, limits override a stop on the same step.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tau2_gym import load_domain
from tau2_gym.core.environment import Environment
from tau2_gym.core.messages import AssistantMessage, ToolCall, UserMessage
from tau2_gym.core.results_file import SimulationRun
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.core.tasks import Task
from tau2_gym.core.turn_loop import GREETING, TurnLoop, user_tools_for
from tau2_gym.players.users.base import UserSimulatorError

MOCK_TASK = "create_task_1"


@pytest.fixture(scope="module")
def mock():
    return load_domain("mock")


@pytest.fixture(scope="module")
def telecom():
    return load_domain("telecom")


def task(dom, task_id=MOCK_TASK):
    return dom.task(task_id)


def text(s):
    return AssistantMessage(content=s)


def call(name, args=None, cid="c1"):
    return AssistantMessage(content=None, tool_calls=[ToolCall(name, args or {}, id=cid)])


def utext(s):
    return UserMessage(content=s)


def started(dom, t=None, **kw):
    loop = TurnLoop(dom, t or task(dom), EpisodeSettings(domain=dom.name, **kw))
    loop.start()
    return loop


def test_greeting_opens_the_conversation_and_is_not_a_step(mock):
    loop = started(mock)
    assert loop.status == "user"
    assert [m.content for m in loop.trajectory] == [GREETING]
    assert loop.trajectory[0].cost == 0.0
    assert loop.step_count == 0
    loop.submit_user(utext("hello"))
    assert loop.step_count == 1 and loop.status == "agent"


def test_first_user_request_sees_the_greeting_as_a_user_message(mock):
    loop = started(mock)
    req = loop.user_request()
    assert req.messages == [{"role": "user", "content": GREETING}]
    assert req.turn == 0 and req.tools == user_tools_for(mock, task(mock))  # v1.0.1 mock has user tools
    assert "<scenario>" in req.system_prompt and task(mock).user_scenario.render() in req.system_prompt
    assert req.openai_messages()[0] == {"role": "system", "content": req.system_prompt}


def test_agent_text_goes_to_the_user_and_tool_calls_run_in_the_same_submit(mock):
    loop = started(mock)
    loop.submit_user(utext("create a task"))
    assert loop.submit_agent(call("get_users")) == "agent"  # result delivered back at once
    assert loop.step_count == 3  # user, agent call, env result
    assert [m.role for m in loop.trajectory] == ["assistant", "user", "assistant", "tool"]
    assert loop.agent_messages()[-1]["role"] == "tool"
    assert loop.submit_agent(text("done")) == "user"
    assert loop.user_request().messages[-1] == {"role": "user", "content": "done"}


def test_mixed_text_and_call_goes_to_the_environment_and_the_user_never_sees_the_text(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    msg = AssistantMessage(content="let me look", tool_calls=[ToolCall("get_users", {}, id="x")])
    assert loop.submit_agent(msg) == "agent"
    assert loop.trajectory[-2].content == "let me look"  # kept in the record
    loop.submit_agent(text("ok"))
    assert all(m["content"] != "let me look" for m in loop.user_request().messages)


def test_several_calls_in_one_message_run_in_order_and_count_as_one_env_step(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    msg = AssistantMessage(content=None, tool_calls=[ToolCall("get_users", {}, id="a"), ToolCall("nope", {}, id="b")])
    loop.submit_agent(msg)
    assert [m.id for m in loop.trajectory[-2:]] == ["a", "b"]
    assert loop.trajectory[-1].content == "Error: Tool 'nope' not found."
    assert loop.step_count == 3 and loop.num_errors == 1


def test_step_checks_are_deferred_while_a_tool_result_is_pending(mock):
    loop = started(mock, max_steps=2)
    loop.submit_user(utext("hi"))  # step 1
    loop.submit_agent(call("get_users"))  # step 2 -> ENV: no check; env step 3 -> max_steps
    assert loop.done and loop.termination_reason == "max_steps"
    assert loop.step_count == 3 and loop.trajectory[-1].role == "tool"


def test_max_steps_overrides_a_user_stop_on_the_last_step(mock):
    loop = started(mock, max_steps=3)
    loop.submit_user(utext("hi"))
    loop.submit_agent(text("how can I help"))
    loop.submit_user(utext("bye ###STOP###"))
    assert loop.termination_reason == "max_steps"
    loop = started(mock, max_steps=4)
    loop.submit_user(utext("hi"))
    loop.submit_agent(text("how can I help"))
    loop.submit_user(utext("bye ###STOP###"))
    assert loop.termination_reason == "user_stop" and loop.step_count == 3


def test_errors_are_cumulative_over_the_episode_not_consecutive(mock):
    loop = started(mock, max_errors=2)
    loop.submit_user(utext("hi"))
    loop.submit_agent(call("nope", cid="1"))
    loop.submit_agent(call("get_users", cid="2"))  # success in between does not reset the count
    assert not loop.done and loop.num_errors == 1
    loop.submit_agent(call("nope", cid="3"))
    assert loop.termination_reason == "too_many_errors"


def test_too_many_errors_wins_over_max_steps_on_the_same_step(mock):
    loop = started(mock, max_steps=3, max_errors=1)
    loop.submit_user(utext("hi"))
    loop.submit_agent(call("nope"))
    assert loop.step_count == 3 and loop.termination_reason == "too_many_errors"


@pytest.mark.parametrize("token", ["###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"])
def test_user_stop_tokens_end_the_episode(mock, token):
    loop = started(mock)
    loop.submit_user(utext(f"thanks {token}"))
    assert loop.done and loop.termination_reason == "user_stop" and loop.status == "done"


def test_the_standard_agent_cannot_stop(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    assert loop.submit_agent(text("###STOP###")) == "user"
    assert loop.user_request().messages[-1]["content"] == "###STOP###"
    loop2 = started(mock)
    loop2.submit_user(utext("hi"))
    loop2.submit_agent(call("done"))
    assert loop2.trajectory[-1].content == "Error: Tool 'done' not found."


def test_agent_that_may_stop_ends_with_done_and_other_calls_are_dropped(mock):
    loop = started(mock, agent_can_stop=True)
    loop.submit_user(utext("hi"))
    msg = AssistantMessage(content=None, tool_calls=[ToolCall("get_users", {}, id="a"), ToolCall("done", {}, id="b")])
    loop.submit_agent(msg)
    assert loop.termination_reason == "agent_stop"
    assert loop.trajectory[-1].content == "###STOP###" and loop.trajectory[-1].tool_calls is None


def test_user_tool_calls_run_inside_the_user_turn_and_stay_invisible_to_the_agent(telecom):
    t = telecom.tasks(split="small")[0]
    loop = started(telecom, t)
    loop.submit_user(utext("my phone has no service"))
    loop.submit_agent(text("please check your status bar"))
    assert loop.status == "user"
    status = loop.submit_user(UserMessage(content=None, tool_calls=[ToolCall("check_status_bar", {}, id="u1")]))
    assert status == "user"  # the result goes back to the user
    req = loop.user_request()
    assert (
        req.messages[-1]["role"] == "tool"
        and req.messages[-2]["tool_calls"][0]["function"]["name"] == "check_status_bar"
    )
    assert req.tools and {"check_status_bar", "toggle_airplane_mode"} <= {s["function"]["name"] for s in req.tools}
    assert loop.trajectory[-2].tool_calls[0].requestor == "user"
    assert loop.trajectory[-1].requestor == "user"
    loop.submit_user(utext("it says no service"))
    roles = [(m["role"], m.get("content")) for m in loop.agent_messages()[1:]]
    assert ("user", "it says no service") in roles and all(r != "tool" for r, _ in roles)


def test_user_simulator_calls_are_retagged_as_the_users(telecom):
    t = telecom.tasks(split="small")[0]
    loop = started(telecom, t)
    loop.submit_user(
        UserMessage(content=None, tool_calls=[ToolCall("check_status_bar", {}, id="u1", requestor="assistant")])
    )
    assert loop.trajectory[-2].tool_calls[0].requestor == "user" and not loop.trajectory[-1].error


def _counting_env(dom, counter):
    tools = dom.spec.agent_toolkit(dom.base_db.new_state())
    return Environment("mock", dom.policy(False), tools=tools, domain=dom, sync_hook=lambda env: counter.append(1))


def test_sync_runs_after_init_after_every_step_and_after_every_successful_call(mock):
    counter: list = []
    env = _counting_env(mock, counter)  # construction: 1
    loop = TurnLoop(mock, task(mock), environment=env)
    loop.start()  # set_state end: 1, end of init: 1
    assert len(counter) == 3
    loop.submit_user(utext("hi"))  # step: 1
    assert len(counter) == 4
    loop.submit_agent(call("get_users"))  # agent step 1, successful call 1, env step 1
    assert len(counter) == 7
    loop.submit_agent(call("nope"))  # agent step 1, failed call 0, env step 1
    assert len(counter) == 9


def test_history_timestamps_count_back_one_second_per_message(mock):
    t = mock.task("update_task_with_message_history")
    before = datetime.now()
    loop = started(mock, t)
    hist = loop.trajectory[: len(t.history)]
    stamps = [datetime.fromisoformat(m.timestamp) for m in hist]
    n = len(hist)
    assert all(abs((stamps[i + 1] - stamps[i]).total_seconds() - 1.0) < 1e-3 for i in range(n - 1))
    assert abs((before - stamps[0]).total_seconds() - n) < 0.5
    assert all(m.turn_idx is None for m in hist)
    assert t.history[0].timestamp != hist[0].timestamp  # the task's own copy is untouched
    assert loop.status == "user"  # the history ends with an assistant text


def test_trajectory_timestamps_are_strictly_increasing_and_sorting_keeps_append_order(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    for i in range(5):
        loop.submit_agent(
            AssistantMessage(
                content=None, tool_calls=[ToolCall("get_users", {}, id=f"{i}a"), ToolCall("get_users", {}, id=f"{i}b")]
            )
        )
    stamps = [m.timestamp for m in loop.trajectory]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert [m for m in loop.messages()] == loop.trajectory
    assert [m.turn_idx for m in loop.messages()] == list(range(len(loop.trajectory)))


def test_solo_first_message_is_part_of_initialization_not_a_step(mock):
    t = task(mock)
    loop = TurnLoop(mock, t, EpisodeSettings(domain="mock", solo=True, max_steps=1))
    assert loop.start() == "agent"
    assert loop.trajectory == [] and loop.agent_messages()[0]["role"] == "system"
    loop.submit_agent(call("get_users"))  # init message, then the env step is step 1 -> max_steps
    assert loop.step_count == 1 and loop.termination_reason == "max_steps"


def test_solo_done_is_agent_stop_and_text_is_agent_error(mock):
    loop = started(mock, solo=True)
    loop.submit_agent(call("get_users"))
    loop.submit_agent(call("done"))
    assert loop.termination_reason == "agent_stop"
    loop = started(mock, solo=True)
    loop.submit_agent(call("get_users"))
    loop.submit_agent(text("all done"))
    assert loop.termination_reason == "agent_error"
    loop = started(mock, solo=True)
    loop.submit_agent(text("###STOP###"))  # a stop text as the very first message
    assert loop.termination_reason == "agent_stop"


def test_solo_refuses_tasks_its_agent_cannot_take(mock):
    with pytest.raises(ValueError, match="cannot run in solo mode"):
        TurnLoop(mock, mock.task("update_task_with_message_history"), EpisodeSettings(domain="mock", solo=True))


def test_protocol_check_ends_mixed_messages_when_enforced(mock):
    loop = started(mock, enforce_protocol=True)
    loop.submit_user(utext("hi"))
    loop.submit_agent(AssistantMessage(content="x", tool_calls=[ToolCall("get_users", {}, id="1")]))
    assert loop.termination_reason == "agent_error" and "both text content and tool calls" in loop.error
    assert loop.trajectory[-1].content == "x"  # the offending message stays in the record, no result
    loop = started(mock, enforce_protocol=True)
    loop.submit_user(UserMessage(content="x", tool_calls=[ToolCall("get_users", {}, id="1")]))
    assert loop.termination_reason == "user_error"


def test_protocol_check_in_solo_allows_only_the_stop_text(mock):
    loop = started(mock, solo=True, enforce_protocol=True)
    loop.submit_agent(call("get_users"))
    loop.submit_agent(call("done"))
    assert loop.termination_reason == "agent_stop"


def test_empty_messages_end_the_episode_on_the_sender(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    loop.submit_agent(AssistantMessage(content="   "))
    assert loop.termination_reason == "agent_error"
    loop = started(mock)
    loop.submit_user(UserMessage(content=""))
    assert loop.termination_reason == "user_error"


def test_user_simulator_failure_ends_as_user_error(mock):
    loop = started(mock)
    loop.submit_user(UserSimulatorError("endpoint down"))
    assert loop.termination_reason == "user_error" and loop.truncated
    assert "endpoint down" in loop.error and loop.trajectory[-1].content == GREETING


def test_submitting_out_of_turn_raises(mock):
    loop = started(mock)
    with pytest.raises(RuntimeError, match="not the agent's turn"):
        loop.submit_agent(text("x"))
    loop.submit_user(utext("hi"))
    with pytest.raises(RuntimeError, match="no user turn"):
        loop.submit_user(utext("again"))


def test_simulation_run_is_a_valid_tau2_record(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    loop.submit_agent(call("create_task", {"user_id": "user_1", "title": "T"}))
    loop.submit_agent(text("created"))
    loop.submit_user(UserMessage(content="###STOP###", cost=0.5))
    run = loop.simulation_run({"reward": 1.0})
    parsed = SimulationRun.model_validate(run)
    assert parsed.termination_reason.value == "user_stop" and parsed.task_id == MOCK_TASK
    assert [m["turn_idx"] for m in run["messages"]] == list(range(len(run["messages"])))
    assert run["agent_cost"] is None and run["user_cost"] is None  # some user message has no cost
    assert run["duration"] >= 0 and run["start_time"] <= run["end_time"]


def test_user_tools_follow_the_tasks_user_tools_filter(telecom):
    t = telecom.tasks(split="small")[0]
    restricted = Task.model_validate({**t.model_dump(mode="json"), "user_tools": ["check_status_bar"]})
    loop = started(telecom, restricted)
    assert [s["function"]["name"] for s in loop.user_request().tools] == ["check_status_bar"]
    none = Task.model_validate({**t.model_dump(mode="json"), "user_tools": []})
    assert started(telecom, none).user_request().tools is None


def test_agent_calls_are_always_the_agents_and_an_empty_call_list_means_text(mock):
    loop = started(mock)
    loop.submit_user(utext("hi"))
    loop.submit_agent(AssistantMessage(content=None, tool_calls=[ToolCall("get_users", {}, id="1", requestor="user")]))
    assert loop.trajectory[-1].requestor == "assistant" and not loop.trajectory[-1].error
    assert loop.submit_agent(AssistantMessage(content="hello", tool_calls=[])) == "user"
