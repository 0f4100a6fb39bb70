"""The Gymnasium environments: registration, Gymnasium API conformance, reset options, info, termination paths,
determinism, records."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import tau2_gym
from tau2_gym.core.domain import domain_names, get_domain_spec
from tau2_gym.core.results_file import Results, SimulationRun, load_results
from tau2_gym.envs import env_id, register_envs
from tau2_gym.envs.config import Tau2EnvConfig
from tau2_gym.envs.spaces import AssistantActionSpace, MessagesSpace, TranscriptSpace
from tau2_gym.players.agents.scripted import HallucinatingAgent, OracleAgent, StallingAgent
from tau2_gym.players.users.base import UserSimulatorError
from tau2_gym.players.users.scripted import ScriptedUser

ALL_IDS = register_envs()


def play(env, agent, **reset_kw):
    obs, info = env.reset(**reset_kw)
    agent.reset(info["task"], info)
    n = 0
    while True:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        n += 1
        if term or trunc:
            return obs, reward, term, trunc, info, n


# ------------------------------------------------------------------------------------ registration


def test_every_available_domain_is_registered_with_solo_variants_where_upstream_allows():
    names = domain_names()
    assert {"mock", "airline", "retail", "telecom", "telecom-workflow"} <= set(names)
    for name in names:
        assert env_id(name) in gym.envs.registry
        solo_id = env_id(name, solo=True)
        assert (solo_id in gym.envs.registry) == get_domain_spec(name).solo_supported
    assert "tau2/airline-solo-v0" not in gym.envs.registry and "tau2/retail-solo-v0" not in gym.envs.registry
    for eid in ALL_IDS:
        spec = gym.spec(eid)
        assert isinstance(spec.entry_point, str) and spec.vector_entry_point == "tau2_gym.envs.vector:Tau2VectorEnv"
        assert spec.max_episode_steps is None  # the step limit is upstream's, counted inside the env


def test_registering_again_is_a_no_op():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert register_envs() == ALL_IDS


def test_gym_make_with_module_prefix_works_without_importing_the_package():
    code = (
        "import gymnasium as gym, sys; assert 'tau2_gym' not in sys.modules; "
        "env = gym.make('tau2_gym:tau2/mock-v0'); obs, info = env.reset(seed=0); "
        "print(type(env.unwrapped).__name__, info['domain'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["MockEnv", "mock"]


@pytest.mark.parametrize("eid", ALL_IDS)
def test_gymnasium_env_checker_passes(eid, capsys):
    env = gym.make(eid)
    check_env(env.unwrapped)
    env.close()


# ------------------------------------------------------------------------------------ construction


def test_config_is_printable_and_unknown_arguments_fail_early():
    cfg = Tau2EnvConfig(domain="airline")
    text = cfg.describe()
    assert "max_steps" in text and "100" in text and "upstream orchestrator step limit" in text
    assert cfg.to_dict()["task_split"] == "base"
    with pytest.raises(TypeError, match="unknown tau2 env argument"):
        gym.make("tau2/mock-v0", max_step=3)
    with pytest.raises(ValueError, match="obs_format"):
        gym.make("tau2/mock-v0", obs_format="tokens")
    with pytest.raises(ValueError, match="does not support solo"):
        gym.make("tau2/airline-v0", solo=True)
    with pytest.raises(ValueError, match="unknown parser"):
        gym.make("tau2/mock-v0", parser="nope")
    with pytest.raises(ValueError, match="unknown user simulator"):
        gym.make("tau2/mock-v0", user="somebody")


def test_unknown_split_and_task_ids_fail_at_construction():
    with pytest.raises(Exception, match="split"):
        gym.make("tau2/airline-v0", task_split="nope")
    with pytest.raises(ValueError, match="task_ids"):
        gym.make("tau2/airline-v0", task_ids=["999999"])


def test_spaces_contain_what_the_env_emits_and_sample_useful_values():
    env = gym.make("tau2/mock-v0")
    u = env.unwrapped
    assert isinstance(u.observation_space, MessagesSpace) and isinstance(u.action_space, AssistantActionSpace)
    obs, info = env.reset(seed=1)
    assert obs in u.observation_space
    u.action_space.seed(0)
    names = {t["function"]["name"] for t in info["tools"]}
    for _ in range(20):
        a = u.action_space.sample()
        assert a in u.action_space and a["tool_calls"][0]["function"]["name"] in names
        json.loads(a["tool_calls"][0]["function"]["arguments"])
    assert "hello" in u.action_space and None not in u.action_space and "" not in u.action_space
    u.observation_space.seed(3)
    assert u.observation_space.sample() in u.observation_space
    assert gym.make("tau2/mock-v0", obs_format="text").unwrapped.observation_space == TranscriptSpace()


# ------------------------------------------------------------------------------------ reset


def test_reset_by_task_id_and_index_and_seeded_draws():
    env = gym.make("tau2/airline-v0")
    u = env.unwrapped
    _, info = env.reset(options={"task_id": "7"})
    assert info["task_id"] == "7"
    _, info = env.reset(options={"task_index": 3})
    assert info["task_id"] == u.tasks[3].id
    draws = [env.reset(seed=11)[1]["task_id"] for _ in range(2)]
    assert draws[0] == draws[1]
    seq = [env.reset(seed=5)[1]["task_id"]] + [env.reset()[1]["task_id"] for _ in range(5)]
    seq2 = [env.reset(seed=5)[1]["task_id"]] + [env.reset()[1]["task_id"] for _ in range(5)]
    assert seq == seq2 and len(set(seq)) > 1
    with pytest.raises(IndexError):
        env.reset(options={"task_index": 10_000})


def test_sequential_sampling_and_task_ids_restrict_the_pool():
    env = gym.make("tau2/airline-v0", task_ids=["3", "1"], task_sampling="sequential")
    assert [env.reset()[1]["task_id"] for _ in range(3)] == ["3", "1", "3"]


def test_splits_select_the_pool():
    assert len(gym.make("tau2/airline-v0", task_split="test").unwrapped.tasks) == 20
    assert len(gym.make("tau2/telecom-v0", task_split="small").unwrapped.tasks) == 20
    assert len(gym.make("tau2/mock-v0", task_split=None).unwrapped.tasks) == len(
        tau2_gym.load_domain("mock").tasks(split=None)
    )


def test_first_observation_is_system_prompt_greeting_and_opening():
    env = gym.make("tau2/airline-v0")
    obs, info = env.reset(options={"task_id": "0"})
    assert obs[0]["role"] == "system" and "<policy>" in obs[0]["content"] and info["policy"] in obs[0]["content"]
    assert obs[1] == {"role": "assistant", "content": "Hi! How can I help you today?"}
    assert obs[2]["role"] == "user" and len(obs) == 3
    assert {"task_id", "domain", "tools", "policy", "task", "step_count", "num_errors"} <= set(info)
    assert info["step_count"] == 1 and len(info["tools"]) == 14


def test_solo_first_observation_holds_only_the_prompt_with_the_ticket_and_done_is_offered():
    env = gym.make("tau2/telecom-solo-v0", task_split="small")
    obs, info = env.reset(seed=0)
    assert len(obs) == 1 and "<ticket>" in obs[0]["content"] and info["task"].ticket in obs[0]["content"]
    names = [t["function"]["name"] for t in info["tools"]]
    assert names[-1] == "done" and "toggle_airplane_mode" in names and len(names) == 13 + 30 + 1


def test_observations_are_fresh_each_step():
    env = gym.make("tau2/mock-v0", user=ScriptedUser(["hi"], then="ok"))
    obs, _ = env.reset(options={"task_id": "create_task_1"})
    obs.append({"role": "user", "content": "injected"})
    obs[0]["content"] = "tampered"
    obs2, *_ = env.step({"name": "get_users", "arguments": {}})
    assert obs2[0]["content"] != "tampered" and all(m.get("content") != "injected" for m in obs2)


def test_text_observation_is_a_transcript():
    env = gym.make("tau2/mock-v0", obs_format="text", user=ScriptedUser(["hi"], then="ok"))
    obs, _ = env.reset(options={"task_id": "create_task_1"})
    assert obs.splitlines() == ["assistant: Hi! How can I help you today?", "user: hi"]
    obs, *_ = env.step({"name": "create_task", "arguments": {"user_id": "user_1", "title": "x"}})
    assert "assistant: create_task(title='x', user_id='user_1')" in obs and "tool: {" in obs


# ------------------------------------------------------------------------------------ termination paths


def test_user_stop_terminates_with_the_tau2_reward():
    env = gym.make("tau2/mock-v0")
    *_, reward, term, trunc, info, n = play(env, OracleAgent(), options={"task_id": "create_task_1"})
    assert (term, trunc, info["termination_reason"]) == (True, False, "user_stop")
    assert reward == info["reward_info"]["reward"] == 1.0 and n == 2


def test_agent_stop_in_solo_terminates():
    env = gym.make("tau2/mock-solo-v0")
    *_, reward, term, trunc, info, _ = play(env, OracleAgent(), options={"task_id": "create_task_1"})
    assert (term, trunc, info["termination_reason"], reward) == (True, False, "agent_stop", 1.0)


def test_max_steps_truncates_at_upstreams_step_count():
    # user turn (1), then per env step: agent call + tool result = 2 orchestrator steps -> ends after step 9
    env = gym.make("tau2/mock-v0", max_steps=9)
    *_, reward, term, trunc, info, n = play(env, StallingAgent(), options={"task_id": "create_task_1"})
    assert (term, trunc, info["termination_reason"], reward) == (False, True, "max_steps", 0.0)
    assert info["step_count"] == 9 and n == 4
    assert info["reward_info"]["info"]["note"].endswith("max_steps")


def test_too_many_errors_truncates():
    env = gym.make("tau2/mock-v0", max_errors=3)
    *_, reward, term, trunc, info, n = play(env, HallucinatingAgent(), options={"task_id": "create_task_1"})
    assert (term, trunc, info["termination_reason"], reward, n) == (False, True, "too_many_errors", 0.0, 3)
    assert info["num_errors"] == 3


def _failing_user(at_turn):
    def replies(req):
        if req.turn == at_turn:
            raise UserSimulatorError("endpoint down")
        return "I need a task created"

    return ScriptedUser(replies)


def test_user_simulator_failure_truncates_with_reward_zero():
    env = gym.make("tau2/mock-v0", user=_failing_user(1))
    obs, info = env.reset(options={"task_id": "create_task_1"})
    obs, reward, term, trunc, info = env.step("hello")
    assert (term, trunc, info["termination_reason"], reward) == (False, True, "user_error", 0.0)
    assert "endpoint down" in info["error"]


def test_episode_ending_during_reset_is_reported_by_the_next_step():
    env = gym.make("tau2/mock-v0", user=_failing_user(0))
    obs, info = env.reset(options={"task_id": "create_task_1"})
    assert info["episode_over"] and info["termination_reason"] == "user_error"
    obs, reward, term, trunc, info = env.step("ignored")
    assert trunc and info["termination_reason"] == "user_error"
    assert all(m["role"] != "user" or m["content"] != "ignored" for m in info["simulation_run"]["messages"])


def test_protocol_error_terminates_as_agent_error():
    env = gym.make("tau2/mock-v0", enforce_protocol=True)
    env.reset(options={"task_id": "create_task_1"})
    msg = {
        "role": "assistant",
        "content": "creating",
        "tool_calls": [{"id": "1", "type": "function", "function": {"name": "get_users", "arguments": "{}"}}],
    }
    obs, reward, term, trunc, info = env.step(msg)
    assert (term, trunc, info["termination_reason"], reward) == (True, False, "agent_error", 0.0)
    assert "both text content and tool calls" in info["error"]


def test_timeout_truncates():
    env = gym.make("tau2/mock-v0", timeout=0.0, user=ScriptedUser(["hi"], then="ok"))
    obs, info = env.reset(options={"task_id": "create_task_1"})
    assert info["episode_over"] and info["termination_reason"] == "timeout"


def test_step_after_the_end_does_not_reevaluate():
    env = gym.make("tau2/mock-v0")
    play(env, OracleAgent(), options={"task_id": "create_task_1"})
    with pytest.warns(UserWarning, match="after the episode ended"):
        obs, reward, term, trunc, info = env.unwrapped.step("again")
    assert reward == 0.0 and term and info["termination_reason"] == "user_stop"


def test_standard_agent_done_is_an_unknown_tool_but_agent_can_stop_ends_the_episode():
    env = gym.make("tau2/mock-v0", user=ScriptedUser(["hi"], then="ok"))
    env.reset(options={"task_id": "create_task_1"})
    obs, _, term, _, info = env.step({"name": "done", "arguments": {}})
    assert not term and obs[-1]["content"] == "Error: Tool 'done' not found."
    env = gym.make("tau2/mock-v0", agent_can_stop=True, user=ScriptedUser(["hi"], then="ok"))
    _, info = env.reset(options={"task_id": "create_task_1"})
    assert info["tools"][-1]["function"]["name"] == "done"
    *_, term, trunc, info = env.step({"name": "done", "arguments": {}})
    assert term and info["termination_reason"] == "agent_stop"


# ------------------------------------------------------------------------------------ determinism, records


def _scripted_run(seed):
    env = gym.make(
        "tau2/airline-v0", user=ScriptedUser(["I want to check my reservation", "thanks"], then="###STOP###")
    )
    obs0, info = env.reset(seed=seed)
    actions = [
        {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}},
        {"name": "get_reservation_details", "arguments": {"reservation_id": "NO6JO3"}},
        "Your reservation is confirmed.",
        "Anything else?",
    ]
    observations = [obs0]
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        observations.append(obs)
        if term or trunc:
            break
    loop = env.unwrapped.loop
    return observations, reward, (loop.env.get_db_hash(), loop.env.get_user_db_hash()), info


def test_same_task_seed_user_and_actions_give_identical_episodes():
    a = _scripted_run(123)
    b = _scripted_run(123)
    assert a[0] == b[0] and a[1] == b[1] and a[2] == b[2]
    assert a[3]["termination_reason"] == b[3]["termination_reason"] == "user_stop"
    strip = lambda run: [{k: v for k, v in m.items() if k != "timestamp"} for m in run["messages"]]  # noqa: E731 - a one-line factory
    assert strip(a[3]["simulation_run"]) == strip(b[3]["simulation_run"])


def test_simulation_runs_save_into_a_results_file_that_loads_and_rescores(tmp_path):
    env = gym.make("tau2/mock-v0")
    runs = []
    for t in env.unwrapped.tasks[:4]:
        *_, reward, term, trunc, info, _ = play(env, OracleAgent(), options={"task_id": t.id})
        SimulationRun.model_validate(info["simulation_run"])
        runs.append(info["simulation_run"])
    path = tmp_path / "results.json"
    env.unwrapped.save_results(path, runs)
    loaded = load_results(path)
    assert isinstance(loaded, Results) and [s.task_id for s in loaded.simulations] == [r["task_id"] for r in runs]
    pytest.importorskip("tau2_gym.cli.eval")
    from tau2_gym.cli import main

    out = tmp_path / "rescored.json"
    assert main(["eval", str(path), "-o", str(out), "--no-progress"]) == 0
    rescored = json.loads(out.read_text())
    assert [s["reward_info"]["reward"] for s in rescored["simulations"]] == [r["reward_info"]["reward"] for r in runs]


def test_render_ansi_is_the_transcript():
    env = gym.make("tau2/mock-v0", render_mode="ansi")
    env.reset(options={"task_id": "create_task_1"})
    assert env.render().startswith("assistant: Hi! How can I help you today?\nuser: ")
