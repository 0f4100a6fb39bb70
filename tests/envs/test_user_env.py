"""tau2/<domain>-user-v0: the policy plays the customer. Registration and Gymnasium conformance for every domain;
the same trajectory gives the same observations, messages and reward as the agent env (where the customer is the
user simulator); stop tokens, user tools, protocol errors, agent failures; an OpenAI-compatible agent."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from gymutil import RecordingUser, run_episode
from openai_stub import OpenAIStub

import tau2_gym  # noqa: F401 - registers the ids
from tau2_gym import load_domain
from tau2_gym.core.domain import domain_names, get_domain_spec
from tau2_gym.core.messages import OUT_OF_SCOPE, STOP, TRANSFER
from tau2_gym.core.results_file import json_default
from tau2_gym.envs import user_env_id
from tau2_gym.envs.spaces import AssistantActionSpace, MessagesSpace, TranscriptSpace
from tau2_gym.envs.user_env import user_view
from tau2_gym.players.agents import resolve_agent
from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy
from tau2_gym.players.agents.scripted import OracleAgent, ScriptedPolicy, SkipLastActionAgent
from tau2_gym.players.users.scripted import OracleUser, ScriptedUser

DOMAINS = domain_names()


def replay_action(entry: dict) -> dict:
    """A recorded user turn (content, calls) as the OpenAI assistant message the customer policy would emit."""
    calls = entry["tool_calls"]
    return {
        "role": "assistant",
        "content": entry["content"],
        "tool_calls": None
        if calls is None
        else [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for c in calls
        ],
    }


def play_customer(env, actions):
    """Step the user env with ``actions`` until the end; returns (observations before each action, final step)."""
    views = []
    obs, info = env.reset_result
    for action in actions:
        views.append(obs)
        obs, reward, term, trunc, info = env.step(action)
        if term or trunc:
            return views, (obs, reward, term, trunc, info)
    raise AssertionError("the replayed customer did not end the episode")


def canonical(messages: list[dict]) -> list[tuple]:
    return [
        (m["role"], m.get("content"), json.dumps(m.get("tool_calls"), sort_keys=True), m.get("requestor"))
        for m in messages
    ]


# ------------------------------------------------------------------------------------------ registration


def test_every_domain_has_a_user_id_run_by_sync_vector_envs():
    for name in DOMAINS:
        spec = gym.spec(user_env_id(name))
        assert spec.entry_point == "tau2_gym.envs.user_env:UserEnv" and spec.kwargs == {"domain": name}
        assert spec.vector_entry_point is None  # make_vec: a SyncVectorEnv of user envs
    assert user_env_id("airline") == "tau2/airline-user-v0"
    vec = gym.make_vec("tau2/mock-user-v0", num_envs=2)
    obs, info = vec.reset(seed=3)
    assert type(vec).__name__ == "SyncVectorEnv" and list(info["role"]) == ["user", "user"]
    assert obs[0][-1] == {"role": "user", "content": "Hi! How can I help you today?"}
    vec.close()


@pytest.mark.parametrize("domain", DOMAINS)
def test_gymnasium_env_checker_passes_with_the_scripted_agent(domain):
    env = gym.make(user_env_id(domain), judge="pass")
    check_env(env.unwrapped, skip_render_check=True)
    u = env.unwrapped
    assert isinstance(u.observation_space, MessagesSpace) and isinstance(u.action_space, AssistantActionSpace)
    tools = [t["function"]["name"] for t in u.user_tools]
    assert [t["function"]["name"] for t in u.action_space.tools] == tools
    assert bool(tools) == (get_domain_spec(domain).user_toolkit is not None)  # telecom/mock/banking: yes
    env.close()


# ------------------------------------------------------------------------------------------ fidelity


def _task_indices(env) -> list[int]:
    """Every task of a small pool (mock: history, init data and actions, user tools), else first/middle/last."""
    n = len(env.unwrapped.tasks)
    return list(range(n)) if n <= 12 else sorted({0, n // 2, n - 1})


@pytest.mark.parametrize("domain", DOMAINS)
def test_replaying_the_user_simulators_lines_gives_the_agent_envs_views_messages_and_reward(domain):
    """The agent env (customer = oracle user simulator, recorded) and the user env (customer = the recorded lines,
    agent = the same scripted agent) run the same episode: each observation is exactly the request the user
    simulator was sent, and the trajectory, termination and reward breakdown are the agent env's."""
    for agent_name, agent_cls in (("oracle", OracleAgent), ("skip_last_action", SkipLastActionAgent)):
        aenv = gym.make(f"tau2/{domain}-v0", user=RecordingUser(OracleUser()), judge="pass")
        uenv = gym.make(user_env_id(domain), agent=agent_name, judge="pass")
        rewards = []
        for i in _task_indices(aenv):
            ep = run_episode(aenv, agent_cls(), options={"task_index": i}, seed=i)
            uenv.reset_result = uenv.reset(seed=i, options={"task_index": i})
            assert uenv.reset_result[1]["task_id"] == ep.task_id
            views, (obs, reward, term, trunc, info) = play_customer(uenv, [replay_action(e) for e in ep.user_script])
            assert views == ep.user_views
            assert info["termination_reason"] == ep.info["termination_reason"]
            assert reward == ep.reward
            assert json.dumps(info["reward_info"], sort_keys=True, default=str) == json.dumps(
                ep.info["reward_info"], sort_keys=True, default=str
            )
            assert canonical(info["simulation_run"]["messages"]) == canonical(ep.info["simulation_run"]["messages"])
            assert (term, trunc) == (ep.terminated, ep.truncated)  # user_stop: terminated in both views
            rewards.append(reward)
        if agent_name == "skip_last_action" and domain != "mock":
            assert 0.0 in rewards  # the flawed agent fails somewhere: equality is not only 1.0 == 1.0


def test_final_observation_extends_the_view_the_simulator_would_see():
    env = gym.make("tau2/telecom-user-v0")
    obs, info = env.reset(seed=0, options={"task_index": 0})
    assert obs[0]["role"] == "system" and info["task"].user_scenario.render()[:80] in obs[0]["content"]
    obs, *_ = env.step("My phone has no service.")
    loop = env.unwrapped.loop
    assert obs == loop.user_request().openai_messages()
    assert obs[1:] == user_view(loop.trajectory)  # the end-of-episode rendering equals the simulator's view
    final, reward, term, trunc, info = env.step(f"Thanks, bye {STOP}")
    assert term and not trunc and info["termination_reason"] == "user_stop"
    assert final[: len(obs)] == obs and final[-1] == {"role": "assistant", "content": f"Thanks, bye {STOP}"}


# ------------------------------------------------------------------------------------------ the customer's turn


@pytest.mark.parametrize("token", [STOP, TRANSFER, OUT_OF_SCOPE])
def test_each_stop_token_ends_the_conversation_and_is_scored(token):
    line = f"Never mind. {token}"
    rewards = []
    kit = get_domain_spec("airline").agent_toolkit
    writes = next(
        t.id
        for t in load_domain("airline").tasks(None, "base")
        if any(kit.mutates_state(a.name) for a in t.evaluation_criteria.actions or [])
    )
    for task_id in ("0", writes):  # airline 0 has no gold actions (nothing to do: passes); a task with writes fails
        env = gym.make("tau2/airline-user-v0")
        env.reset(seed=0, options={"task_id": task_id})
        obs, reward, term, trunc, info = env.step(line)
        assert term and not trunc and info["termination_reason"] == "user_stop"
        assert info["reward_info"] is not None and reward == info["reward_info"]["reward"]
        # the agent env whose simulator says the same line at once ends (during reset) with the same reward
        aenv = gym.make("tau2/airline-v0", user=ScriptedUser([line]))
        _, ainfo = aenv.reset(seed=0, options={"task_id": task_id})
        assert ainfo["episode_over"] and ainfo["termination_reason"] == "user_stop"
        _, areward, *_ = aenv.step("unused")
        assert reward == areward
        rewards.append(reward)
    assert rewards == [1.0, 0.0]


def test_user_tool_calls_run_in_the_users_toolkit_and_stay_invisible_to_the_agent():
    seen = []

    def agent(request):
        seen.append(request.messages)
        return {"role": "assistant", "content": "Please check your status bar."}

    env = gym.make("tau2/telecom-user-v0", agent=agent)
    env.reset(seed=0, options={"task_index": 0})
    obs, reward, term, trunc, info = env.step({"name": "check_status_bar", "arguments": {}})
    assert not (term or trunc) and len(seen) == 0  # the tool result comes back to the customer first
    assert obs[-2]["role"] == "assistant" and obs[-2]["tool_calls"][0]["function"]["name"] == "check_status_bar"
    assert obs[-1]["role"] == "tool" and obs[-1]["tool_call_id"] == obs[-2]["tool_calls"][0]["id"]
    assert "Error" not in obs[-1]["content"]
    obs, *_ = env.step("My status bar shows no signal.")
    assert len(seen) == 1 and all(m.get("role") != "tool" for m in seen[0])
    assert seen[0][-1] == {"role": "user", "content": "My status bar shows no signal."}
    # a user tool call in a domain without user tools is an error tool result, counted toward max_errors
    env = gym.make("tau2/airline-user-v0")
    env.reset(seed=0)
    obs, _, term, trunc, info = env.step({"name": "check_status_bar", "arguments": {}})
    assert obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error") and info["num_errors"] == 1
    assert not (term or trunc)


def test_a_stop_token_inside_a_tool_call_message_does_not_stop():
    env = gym.make("tau2/mock-user-v0")
    env.reset(seed=0)
    action = {
        "role": "assistant",
        "content": STOP,
        "tool_calls": [
            {"id": "u1", "type": "function", "function": {"name": "check_notifications", "arguments": "{}"}}
        ],
    }
    obs, reward, term, trunc, info = env.step(action)
    assert not (term or trunc) and obs[-1]["role"] == "tool"


@pytest.mark.parametrize("penalty", [0.0, 0.5])
def test_unreadable_or_empty_customer_turns_end_as_user_error_terminated_with_the_optional_penalty(penalty):
    env = gym.make("tau2/mock-user-v0", user_error_penalty=penalty)
    broken = '<tool_call>{"name": "check_notifications", "arguments": {</tool_call>'
    for bad in (broken, "", None, {"role": "assistant"}):
        env.reset(seed=0)
        obs, reward, term, trunc, info = env.step(bad)
        assert term and not trunc and info["termination_reason"] == "user_error"
        assert reward == -penalty and info["error"]
        assert info["reward_info"]["reward"] == 0.0  # upstream's breakdown is unchanged: the ending is not scored
        assert MessagesSpace().contains(obs)
        with pytest.warns(UserWarning, match="after the episode ended"):
            again = env.step("hello")
        assert again[1] == 0.0 and again[2] and again[4]["termination_reason"] == "user_error"


def test_protocol_enforcement_applies_to_the_customer():
    env = gym.make("tau2/mock-user-v0", enforce_protocol=True)
    env.reset(seed=0)
    action = {
        "role": "assistant",
        "content": "Checking now.",
        "tool_calls": [
            {"id": "u1", "type": "function", "function": {"name": "check_notifications", "arguments": "{}"}}
        ],
    }
    _, reward, term, trunc, info = env.step(action)
    assert term and info["termination_reason"] == "user_error" and "both text content and tool calls" in info["error"]


# ------------------------------------------------------------------------------------------ the agent's side


def test_a_failing_or_junk_agent_truncates_as_agent_error_without_raising():
    def broken(request):
        raise RuntimeError("model server down")

    env = gym.make("tau2/airline-user-v0", agent=broken)
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obs, reward, term, trunc, info = env.step("Hi, I want to cancel a flight.")
    assert trunc and not term and info["termination_reason"] == "agent_error" and "model server down" in info["error"]
    assert reward == 0.0
    env = gym.make("tau2/airline-user-v0", agent=lambda request: {"role": "assistant", "content": None})
    env.reset(seed=0)
    _, _, term, trunc, info = env.step("Hello")
    assert trunc and info["termination_reason"] == "agent_error"


def test_agent_turns_see_the_agent_prompt_tools_and_seed_and_may_chain_tool_calls():
    requests = []

    def agent(request):
        requests.append(request)
        if request.turn == 0:  # the first turn after the greeting (which is not the agent's): look the user up
            return {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}
        return "I found your profile."

    env = gym.make("tau2/airline-user-v0", agent=agent)
    obs, info = env.reset(seed=5, options={"task_id": "0"})
    obs, *_ = env.step("I am mia_li_3668.")
    assert [r.turn for r in requests] == [0, 1]
    r = requests[-1]
    assert r.system_prompt == env.unwrapped.loop.agent_messages()[0]["content"] and info["policy"] in r.system_prompt
    assert [t["function"]["name"] for t in r.tools] == [t["function"]["name"] for t in info["agent_tools"]]
    assert r.messages[-1]["role"] == "tool" and r.seed == env.unwrapped.loop.seed
    assert obs[-1] == {"role": "user", "content": "I found your profile."}  # the customer sees text only
    assert all("tool_calls" not in m for m in obs[1:])


def test_openai_compatible_agent_over_a_local_stub():
    replies = [
        {"tool_calls": [{"id": "c1", "name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}]},
        "Your profile is loaded. What would you like to do?",
    ]
    with OpenAIStub(replies) as srv:
        env = gym.make("tau2/airline-user-v0", agent=f"openai:agent-m@{srv.base_url}")
        assert isinstance(env.unwrapped.agent, OpenAIAgentPolicy)
        env.unwrapped.agent.config.api_key_env = None
        obs, info = env.reset(seed=0, options={"task_id": "0"})
        obs, reward, term, trunc, info = env.step("Hi, I am mia_li_3668.")
        bodies = list(srv.requests)
    assert obs[-1] == {"role": "user", "content": "Your profile is loaded. What would you like to do?"}
    assert bodies[0]["model"] == "agent-m" and bodies[0]["messages"][0]["role"] == "system"
    assert bodies[0]["messages"][-1] == {"role": "user", "content": "Hi, I am mia_li_3668."}
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {t["function"]["name"] for t in info["agent_tools"]}
    assert bodies[1]["messages"][-1]["role"] == "tool"


def test_agent_specs_and_arguments_that_do_not_apply():
    assert isinstance(resolve_agent("oracle"), ScriptedPolicy) and resolve_agent("give_up").name == "give_up"
    assert resolve_agent("tau2_gym.players.agents.scripted:ScriptedPolicy").name == "oracle"
    with pytest.raises(ValueError, match="unknown agent"):
        gym.make("tau2/mock-user-v0", agent="nobody")
    with pytest.raises(TypeError, match="not an agent policy"):
        resolve_agent(42)
    for bad in ({"user": "oracle"}, {"solo": True}):
        with pytest.raises(TypeError, match="does not apply"):
            gym.make("tau2/mock-user-v0", **bad)
    with pytest.raises(TypeError, match="unknown user env argument"):
        gym.make("tau2/mock-user-v0", max_step=3)


# ------------------------------------------------------------------------------------------ formats, determinism


def test_text_observations_are_the_users_transcript_with_true_roles():
    env = gym.make("tau2/mock-user-v0", obs_format="text")
    assert isinstance(env.unwrapped.observation_space, TranscriptSpace)
    obs, _ = env.reset(seed=0, options={"task_id": "create_task_1"})
    assert obs == "assistant: Hi! How can I help you today?"
    obs, *_ = env.step("Please create a task.")
    lines = obs.split("\n")
    assert lines[1] == "user: Please create a task." and lines[-1].startswith("assistant: ")
    assert "tool:" not in obs  # the agent's tool results are not the customer's


def test_same_seed_and_actions_give_the_same_episode():
    def run(seed):
        env = gym.make("tau2/telecom-user-v0")
        out = [env.reset(seed=seed)[0]]
        for action in (
            "My phone has no signal.",
            {"name": "check_status_bar", "arguments": {}},
            "It says no service.",
            f"ok {STOP}",
        ):
            obs, r, term, trunc, info = env.step(action)
            out.append((obs, r, term, trunc))
            if term or trunc:
                break
        return out, info["task_id"], info["simulation_run"]["seed"]

    a, b, c = run(11), run(11), run(12)
    assert a == b
    assert (a[1], a[2]) != (c[1], c[2])


# ------------------------------------------------------------------------------------------ branching, reward modes


def test_a_clone_taken_mid_episode_diverges_freely_and_replays_to_the_same_reward():
    aenv = gym.make("tau2/telecom-v0", user=RecordingUser(OracleUser()))
    ep = run_episode(aenv, OracleAgent(), options={"task_index": 0}, seed=0)
    actions = [replay_action(e) for e in ep.user_script]
    assert len(actions) >= 3
    env = gym.make("tau2/telecom-user-v0")
    env.reset(seed=0, options={"task_index": 0})
    env.step(actions[0])
    twin = env.unwrapped.clone()
    # the clone ends at once; the original is untouched by it
    _, r_twin, term, _, info_twin = twin.step(f"Forget it. {STOP}")
    assert term and info_twin["termination_reason"] == "user_stop" and r_twin == 0.0
    for a in actions[1:]:
        obs, reward, term, trunc, info = env.step(a)
    assert (reward, info["termination_reason"]) == (ep.reward, ep.info["termination_reason"]) == (1.0, "user_stop")
    assert canonical(info["simulation_run"]["messages"]) == canonical(ep.info["simulation_run"]["messages"])
    # a second clone at the same point, fed the original's remaining actions (its scripted agent resumes its plan)
    env.reset(seed=0, options={"task_index": 0})
    env.step(actions[0])
    twin = env.unwrapped.clone()
    for a in actions[1:]:
        _, r2, *_, info2 = twin.step(a)
    assert r2 == 1.0 and canonical(info2["simulation_run"]["messages"]) == canonical(info["simulation_run"]["messages"])
    assert info2["simulation_run"]["id"] != info["simulation_run"]["id"] and info2["tools"] == info["tools"]


def test_reward_modes_apply_as_in_the_agent_env():
    aenv = gym.make("tau2/airline-v0", user=RecordingUser(OracleUser()), reward_mode="partial")
    env = gym.make("tau2/airline-user-v0", agent="skip_last_action", reward_mode="partial")
    shaped = 0
    for i in range(6):
        ep = run_episode(aenv, SkipLastActionAgent(), options={"task_index": i}, seed=i)
        env.reset_result = env.reset(seed=i, options={"task_index": i})
        _, (obs, reward, term, trunc, info) = play_customer(env, [replay_action(e) for e in ep.user_script])
        assert reward == ep.reward and info["tau2_reward"] == ep.info["tau2_reward"]
        shaped += reward != info["tau2_reward"]
    assert shaped  # the partial-credit mode changed some rewards: it is applied, not ignored


def test_a_hugging_face_model_can_be_the_agent():
    """A tiny random causal LM, forced to write the oracle's turns (as template text), serves the customer: its
    tool calls are parsed and run, and the replayed customer gets the scripted oracle's reward."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from hfutil import ForceScript, oracle_scripts, tiny
    from transformers import LogitsProcessorList

    from tau2_gym.players.users.hf_user import HFUserConfig, HFUserSimulator
    from tau2_gym.training.hf.chat import ChatRenderer

    model, tok = tiny()
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    task_id = "create_task_1"
    scripts, base, rewards = oracle_scripts(renderer, lambda: gym.make("tau2/mock-v0"), [task_id])
    cfg = HFUserConfig(
        max_new_tokens=160, generate_kwargs={"logits_processor": LogitsProcessorList([ForceScript(tok, scripts, base)])}
    )
    agent = HFUserSimulator(cfg, model=model, tokenizer=tok)
    aenv = gym.make("tau2/mock-v0", user=RecordingUser(OracleUser()))
    ep = run_episode(aenv, OracleAgent(), options={"task_id": task_id}, seed=0)
    env = gym.make("tau2/mock-user-v0", agent=agent)
    env.reset_result = env.reset(seed=0, options={"task_id": task_id})
    views, (obs, reward, term, trunc, info) = play_customer(env, [replay_action(e) for e in ep.user_script])
    calls = [m for m in info["simulation_run"]["messages"] if m["role"] == "assistant" and m["tool_calls"]]
    assert calls and calls[0]["tool_calls"][0]["name"] == "create_task"
    assert info["termination_reason"] == "user_stop" and reward == rewards[task_id] == ep.reward == 1.0


def test_async_vector_env_overlaps_the_agents_llm_calls():
    """With an LLM agent, each customer turn waits for the agent's reply: AsyncVectorEnv (one process per slot)
    makes the slots' agent requests concurrent -- all arrive at the server before the first is answered."""
    import threading
    import time

    arrivals, lock = [], threading.Lock()
    delay = 0.5

    def reply(body, n):
        with lock:
            arrivals.append(time.monotonic())
        return {"delay": delay, "then": "Could you give me your reservation number?"}

    with OpenAIStub(reply) as srv:
        vec = gym.make_vec(
            "tau2/airline-user-v0",
            num_envs=2,
            vectorization_mode="async",
            vector_kwargs={"shared_memory": False},
            agent=f"openai:agent-m@{srv.base_url}",
        )
        try:
            vec.reset(seed=0)
            obs, reward, term, trunc, info = vec.step(["Hi, I want to change my flight."] * 2)
        finally:
            vec.close()
    assert type(vec).__name__ == "AsyncVectorEnv" and len(arrivals) == 2
    assert max(arrivals) - min(arrivals) < delay  # overlapping, not one after another
    assert all(o[-1] == {"role": "user", "content": "Could you give me your reservation number?"} for o in obs)
    assert not any(term) and not any(trunc)


def test_hostile_customer_actions_end_as_user_error_or_an_error_result_never_raise():
    from test_hostile_actions import HOSTILE

    env = gym.make("tau2/mock-user-v0")
    for name, action, detail in HOSTILE:
        env.reset(seed=0)
        obs, reward, term, trunc, info = env.step(action)
        if detail is None:  # a well-formed call of a tool the customer does not have: an error result
            assert not term and obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error"), name
            continue
        assert (term, trunc, reward, info["termination_reason"]) == (True, False, 0.0, "user_error"), name
        assert detail in info["error"] and len(info["error"]) < 2_000, name
        json.dumps(info["simulation_run"], default=json_default)  # the record still serialises


def test_info_tools_are_the_tasks_user_tools_as_the_simulator_is_offered_them():
    env = gym.make("tau2/banking_knowledge-user-v0", judge="pass")
    u = env.unwrapped
    seen = set()
    kinds = {str(t.user_tools): t for t in u.tasks}  # one task per distinct user-tool subset
    for task in kinds.values():
        _, info = env.reset(seed=0, options={"task_id": task.id})
        names = [t["function"]["name"] for t in info["tools"]]
        offered = u.loop.user_request().tools
        assert names == [t["function"]["name"] for t in offered or []]
        assert set(names) == set(task.user_tools if task.user_tools is not None else names)
        info["tools"].clear()  # a private copy
        assert u.loop.user_request().tools == offered
        seen.add(len(names))
    assert 0 in seen and len(seen) > 1  # some tasks offer no user tools, others a subset
    assert len(u.action_space.tools) == len(u.user_tools) > max(seen)  # actions span the whole toolkit


def test_scripted_agent_plans_are_dropped_with_their_episodes_and_branches():
    import gc

    env = gym.make("tau2/telecom-user-v0")
    plans = env.unwrapped.agent._agents
    env.reset(seed=0, options={"task_index": 0})
    env.step("My phone has no service.")
    assert len(plans) == 1
    twins = [env.unwrapped.clone() for _ in range(5)]
    assert len(plans) == 6
    del twins
    gc.collect()
    assert len(plans) == 1  # dropped branches took their plans with them
    env.step(f"Bye {STOP}")
    assert plans == {}  # and a finished episode its own
