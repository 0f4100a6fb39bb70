"""Reward modes and shaping wrappers (tau2_gym.scoring.rewards): strict, partial credit, turn discount, format penalty.

Expectations come from the episode's own upstream record (``reward_info`` components) and from the evaluator's
``ALL_IGNORE_BASIS`` evaluation type -- never from hard-coded rewards.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import tau2_gym  # noqa: F401 - registers the ids
from tau2_gym.players.agents.scripted import OracleAgent, make_agent
from tau2_gym.scoring.evaluation import EvaluationType, evaluate_simulation
from tau2_gym.scoring.rewards import (
    PARTIAL_WEIGHTS,
    REWARD_MODES,
    InvalidFormatPenalty,
    TurnDiscount,
    format_errors,
    partial_reward,
    strict_reward,
)


class SkipFirstReadAgent(OracleAgent):
    """The oracle without its first read-only gold call: the DB still matches, the action check does not."""

    name = "skip_first_read"

    def steps(self, task):
        steps = super().steps(task)
        for i, (kind, payload) in enumerate(steps):
            if kind == "call" and not self.mutates(payload.name):
                del steps[i]
                break
        return steps


def play(env, agent, task_id):
    obs, info = env.reset(options={"task_id": task_id})
    agent.reset(env.unwrapped.task, info)
    rewards = []
    while True:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        rewards.append(reward)
        if terminated or truncated:
            return rewards, info


def basis(task):
    return {getattr(b, "value", b) for b in task.evaluation_criteria.reward_basis}


@pytest.fixture(scope="module")
def airline_envs():
    return {mode: gym.make("tau2/airline-v0", reward_mode=mode, task_split=None) for mode in REWARD_MODES}


@pytest.fixture(scope="module")
def skipped_read_task(airline_envs):
    """The first v1.0.1 airline task whose basis leaves out ACTION and whose oracle makes a read-only call."""
    env = airline_envs["default"]
    for task in env.unwrapped.tasks:
        if basis(task) & {"ACTION", "NL_ASSERTION"}:
            continue
        agent = SkipFirstReadAgent()
        agent.reset(task, {"domain": "airline"})
        if len(agent.plan(task)) < len(OracleAgent().plan(task)):
            return task.id
    pytest.fail("no airline task with a read-only gold call outside its reward basis")


def test_strict_gives_zero_where_upstreams_default_gives_one(airline_envs, skipped_read_task):
    _, default_info = play(airline_envs["default"], SkipFirstReadAgent(), skipped_read_task)
    rewards, strict_info = play(airline_envs["strict"], SkipFirstReadAgent(), skipped_read_task)
    ri = default_info["reward_info"]
    task = airline_envs["default"].unwrapped.task
    # upstream's default: the product of the basis components only -- here all met
    expected_default = 1.0
    for component in basis(task):
        expected_default *= ri["reward_breakdown"][component]
    assert ri["reward"] == expected_default == 1.0
    assert default_info["tau2_reward"] == strict_info["tau2_reward"] == ri["reward"]
    missed = [c for c in ri["action_checks"] if not c["action_match"]]
    assert len(missed) == 1 and missed[0]["tool_type"] == "read"  # the skipped gold action, and only it
    assert rewards[-1] == 0.0 and strict_info["reward_mode"] == "strict"
    # the evaluator's own ALL_IGNORE_BASIS on the same trajectory agrees
    loop = airline_envs["strict"].unwrapped.loop
    ignore_basis = evaluate_simulation(
        airline_envs["strict"].unwrapped.domain,
        loop.task,
        loop.messages(),
        loop.termination_reason,
        evaluation_type=EvaluationType.ALL_IGNORE_BASIS,
    )
    assert ignore_basis["reward"] == rewards[-1]


@pytest.mark.parametrize("agent", ["oracle", "skip_last_action", "wrong_arguments", "give_up", "hallucinating"])
def test_strict_equals_the_evaluators_all_ignore_basis(airline_envs, agent):
    env = airline_envs["strict"]
    for task in list(env.unwrapped.tasks)[:12]:
        if "NL_ASSERTION" in basis(task):
            continue
        rewards, info = play(env, make_agent(agent), task.id)
        loop = env.unwrapped.loop
        expected = evaluate_simulation(
            env.unwrapped.domain,
            loop.task,
            loop.messages(),
            loop.termination_reason,
            evaluation_type=EvaluationType.ALL_IGNORE_BASIS,
        )["reward"]
        assert rewards[-1] == expected, (agent, task.id)
        assert rewards[-1] <= info["tau2_reward"] == info["reward_info"]["reward"]
        assert strict_reward(info["reward_info"]) == rewards[-1]


def documented_partial(ri):
    """README / rewards.py formula: weighted mean of the component scores the task has."""
    scores = {}
    if "DB" in ri["reward_basis"]:
        scores["DB"] = ri["db_check"]["db_reward"]
    for name, key, field in (
        ("ENV_ASSERTION", "env_assertions", "met"),
        ("ACTION", "action_checks", "action_match"),
        ("COMMUNICATE", "communicate_checks", "met"),
    ):
        checks = ri[key] or []
        if checks:
            scores[name] = sum(bool(c[field]) for c in checks) / len(checks)
    if "NL_ASSERTION" in ri["reward_basis"]:  # judged: fraction met; skipped (no judge): the factor counted
        checks = ri["nl_assertions"] or []
        scores["NL_ASSERTION"] = (
            sum(bool(c["met"]) for c in checks) / len(checks) if checks else ri["reward_breakdown"]["NL_ASSERTION"]
        )
    return sum(PARTIAL_WEIGHTS[c] * s for c, s in scores.items()) / sum(PARTIAL_WEIGHTS[c] for c in scores)


def test_partial_credit_is_the_documented_formula_of_the_components(airline_envs, skipped_read_task):
    env = airline_envs["partial"]
    seen = set()
    for agent, task_id in [("skip_first_read", skipped_read_task)] + [
        (a, t.id) for a in ("oracle", "skip_last_action", "wrong_arguments") for t in env.unwrapped.tasks[:6]
    ]:
        rewards, info = play(env, SkipFirstReadAgent() if agent == "skip_first_read" else make_agent(agent), task_id)
        ri = info["reward_info"]
        if ri["reward_basis"] is None or "NL_ASSERTION" in ri["reward_basis"]:
            continue
        assert rewards[-1] == pytest.approx(documented_partial(ri))
        assert rewards[-1] == pytest.approx(partial_reward(ri))
        assert info["tau2_reward"] == ri["reward"]
        seen.add(round(rewards[-1], 6))
        if agent == "skip_first_read":
            n = len(ri["action_checks"])
            assert 0 < rewards[-1] < 1 and n > 1  # one gold action missed: partial, not all or nothing
    assert len(seen) > 1  # the mode tells outcomes apart


def test_unscored_endings_get_zero_in_every_mode():
    for mode in REWARD_MODES:
        env = gym.make("tau2/mock-v0", reward_mode=mode)
        env.reset(options={"task_id": "create_task_1"})
        _, reward, terminated, _, info = env.step("")  # an empty message: agent_error, not scored upstream
        assert terminated and info["termination_reason"] == "agent_error"
        assert reward == info["tau2_reward"] == 0.0


def test_unknown_reward_mode_is_refused():
    with pytest.raises(ValueError, match="reward_mode"):
        gym.make("tau2/mock-v0", reward_mode="dense")


@pytest.mark.parametrize("mode", REWARD_MODES)
def test_env_passes_gymnasiums_checker_in_every_mode(mode):
    check_env(gym.make("tau2/mock-v0", reward_mode=mode).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("mode", REWARD_MODES)
def test_every_mode_keeps_the_raw_reward(mode):
    env = gym.make("tau2/mock-v0", reward_mode=mode)
    for agent in ("oracle", "skip_last_action", "give_up"):
        for task in env.unwrapped.tasks[:4]:
            _, info = play(env, make_agent(agent), task.id)
            raw = info["reward_info"]["reward"] if info["reward_info"] is not None else 0.0
            assert info["tau2_reward"] == raw and info["reward_mode"] == mode


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
def test_turn_discount_scales_the_final_reward_per_turn():
    gamma = 0.9
    plain = gym.make("tau2/mock-v0")
    wrapped = TurnDiscount(gym.make("tau2/mock-v0"), gamma=gamma)
    for task_id in ("create_task_1", "update_task_1"):
        raw, _ = play(plain, make_agent("oracle"), task_id)
        rewards, info = play(wrapped, make_agent("oracle"), task_id)
        assert raw[-1] > 0 and len(rewards) == len(raw) > 1
        assert rewards[:-1] == [0.0] * (len(rewards) - 1)
        assert rewards[-1] == pytest.approx(raw[-1] * gamma ** (len(rewards) - 1))
        assert info["turn_discount"] == pytest.approx(gamma ** (len(rewards) - 1))
        assert info["tau2_reward"] == raw[-1]
    check_env(TurnDiscount(gym.make("tau2/mock-v0").unwrapped), skip_render_check=True)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
def test_invalid_format_penalty_counts_malformed_actions():
    penalty = 0.25
    env = InvalidFormatPenalty(gym.make("tau2/mock-v0"), penalty=penalty)
    obs, info = env.reset(options={"task_id": "create_task_1"})
    assert info["format_errors"] == 0
    assert format_errors("Could you give me your user id?", info["tools"]) == 0  # text is well-formed
    steps = [
        ({"name": "no_such_tool", "arguments": {}}, 1),  # unknown tool
        ({"name": "create_task", "arguments": {"user_id": "user_1"}}, 1),  # missing required argument
        ([{"name": "get_users", "arguments": {"bogus": 1}}, {"name": "nope", "arguments": {}}], 2),
        ({"name": "get_users", "arguments": {}}, 0),  # a valid call
        ('<tool_call>{"name": "create_task", "arguments": </tool_call>', 1),  # unreadable: ends as agent_error
    ]
    count = 0
    for action, bad in steps:
        assert format_errors(action, env.unwrapped.tools) == bad
        obs, reward, terminated, truncated, info = env.step(action)
        count += bad
        assert info["format_errors"] == count
        assert reward == pytest.approx(-penalty * bad + info.get("tau2_reward", 0.0))
        if terminated or truncated:
            break
    assert info["termination_reason"] == "agent_error" and count == 5
    check_env(InvalidFormatPenalty(gym.make("tau2/mock-v0").unwrapped), skip_render_check=True)


@pytest.mark.parametrize("judge", ["pass", "fail"])
def test_nl_judged_tasks_strict_and_partial_count_the_nl_factor(judge):
    """Retail tasks whose basis names NL assertions: strict = the evaluator's ALL_WITH_NL_ASSERTIONS_IGNORE_BASIS
    with the same judge choice, never above default; partial = the formula with the NL component."""
    envs = {m: gym.make("tau2/retail-v0", reward_mode=m, task_split=None, judge=judge) for m in REWARD_MODES}
    tasks = [t for t in envs["default"].unwrapped.tasks if "NL_ASSERTION" in basis(t)][:4]
    assert tasks
    for task in tasks:
        for agent in ("oracle", "skip_last_action"):
            got = {m: play(envs[m], make_agent(agent), task.id) for m in REWARD_MODES}
            ri = got["default"][1]["reward_info"]
            assert got["default"][0][-1] == ri["reward"] == got["strict"][1]["tau2_reward"]
            env = envs["strict"].unwrapped
            expected = evaluate_simulation(
                env.domain,
                env.loop.task,
                env.loop.messages(),
                env.loop.termination_reason,
                judge=env.judge,
                evaluation_type=EvaluationType.ALL_WITH_NL_ASSERTIONS_IGNORE_BASIS,
            )
            assert got["strict"][0][-1] == expected["reward"] <= ri["reward"]
            if ri["reward_basis"] is not None:
                assert got["partial"][0][-1] == pytest.approx(documented_partial(ri))


def test_vector_env_applies_the_reward_mode_like_single_envs(airline_envs, skipped_read_task):
    ids = [skipped_read_task, "0", "1"]
    # NextStep autoreset: a finished sub-env restarts on the next step; only the first endings are compared
    vec = gym.make_vec("tau2/airline-v0", num_envs=len(ids), reward_mode="partial", task_split=None)
    obs, infos = vec.reset(options=[{"task_id": t} for t in ids])
    agents = [SkipFirstReadAgent() for _ in ids]
    for i, a in enumerate(agents):
        a.reset(infos["task"][i], {"domain": "airline", "solo": False})
    final = [None] * len(ids)
    while any(f is None for f in final):
        obs, rew, term, trunc, infos = vec.step([a.act() for a in agents])
        for i in range(len(ids)):
            if (term[i] or trunc[i]) and final[i] is None:
                final[i] = (float(rew[i]), float(infos["tau2_reward"][i]))
    for i, task_id in enumerate(ids):
        rewards, info = play(airline_envs["partial"], SkipFirstReadAgent(), task_id)
        assert final[i] == (rewards[-1], info["tau2_reward"])
    assert any(r != raw for r, raw in final)  # partial differs from the raw reward somewhere
