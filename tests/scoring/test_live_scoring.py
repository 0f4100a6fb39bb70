"""Scoring from the live environment (``evaluate_simulation(live_env=...)``) equals scoring by replay.

The gym env hands its own environment to the evaluator, which uses it instead of replaying the trajectory
only when :meth:`Environment.replays_to` proves the replay would rebuild the same state. These tests play
every agent kind (oracle and the flawed ones) on every task of the domains where the shortcut applies, and
compare the full ``reward_info`` and the predicted DB hashes of both paths; then they check that anything a
replay would not reproduce turns the shortcut off.
"""

from __future__ import annotations

import logging

import gymnasium as gym
import pytest
from gymutil import run_episode

from tau2_gym.core.environment import Environment
from tau2_gym.core.messages import ToolCall
from tau2_gym.players.agents.scripted import ALL_AGENTS, OracleAgent
from tau2_gym.scoring import evaluation
from tau2_gym.scoring.evaluation import evaluate_simulation
from tau2_gym.scoring.rebuild import predicted_environment

replays_to_calls: list[bool] = []
same_writes_calls: list[bool] = []


@pytest.fixture
def spy(monkeypatch):
    """Records whether each of scoring's Environment.replayed_writes calls proved the replay (replays_to),
    and what each comparison of the live writes with the gold ones answered."""
    replays_to_calls.clear()
    same_writes_calls.clear()
    orig = Environment.replayed_writes
    orig_same = evaluation._same_writes

    def wrapped(self, messages):
        out = orig(self, messages)
        replays_to_calls.append(out is not None)
        return out

    def wrapped_same(live, gold):
        out = orig_same(live, gold)
        same_writes_calls.append(out)
        return out

    monkeypatch.setattr(Environment, "replayed_writes", wrapped)
    monkeypatch.setattr(evaluation, "_same_writes", wrapped_same)
    return replays_to_calls


def play(env, agent, task_id):
    ep = run_episode(env, agent, options={"task_id": task_id})
    return ep.reward, ep.info


def both_ways(env) -> tuple[dict, dict, str, str]:
    """reward_info with the live env and by replay, and the predicted agent-DB hash of each."""
    u = env.unwrapped
    loop = u.loop
    msgs = loop.messages()
    kw = dict(solo=u.config.solo, strict=u.config.strict_replay)
    live = evaluate_simulation(u.domain, loop.task, msgs, loop.termination_reason, live_env=loop.env, **kw)
    replayed = evaluate_simulation(u.domain, loop.task, msgs, loop.termination_reason, **kw)
    replay_env = predicted_environment(u.domain, loop.task, msgs, solo=u.config.solo)
    return live, replayed, loop.env.get_db_hash(), replay_env.get_db_hash()


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["tau2/mock-v0", "tau2/mock-solo-v0", "tau2/airline-v0", "tau2/retail-v0"])
def test_live_scoring_equals_replay_for_every_agent_and_task(env_id, spy, caplog):
    caplog.set_level(logging.ERROR, logger="tau2_gym")
    env = gym.make(env_id)
    tasks = env.unwrapped.tasks
    if env_id == "tau2/retail-v0":
        tasks = tasks[::3]  # 38 of 114 tasks keep the suite fast; all agents on each
    scored = taken = by_writes = 0
    for task in tasks:
        for agent_cls in ALL_AGENTS:
            spy.clear()
            same_writes_calls.clear()
            reward, info = play(env, agent_cls(), task.id)
            if info["termination_reason"] not in ("user_stop", "agent_stop"):
                continue
            if info.get("reward_info") is None:
                continue
            crit = task.evaluation_criteria
            if crit is None or (crit.actions is None and crit.env_assertions is None):
                continue
            scored += 1
            took = bool(spy and spy[0])  # what the env's own scoring call decided (None: assertions present)
            taken += took
            writes_equal = bool(same_writes_calls and same_writes_calls[0])  # DB match decided by the writes
            by_writes += writes_equal
            live, replayed, live_hash, replay_hash = both_ways(env)
            if writes_equal:  # the replay's full DB comparison agrees
                assert replayed["db_check"]["db_match"], (task.id, agent_cls.__name__)
            assert live == replayed, (task.id, agent_cls.__name__)
            assert reward == replayed["reward"]
            if took:  # the shortcut was taken: its state is the replay's, hash for hash
                assert live_hash == replay_hash, (task.id, agent_cls.__name__)
    assert scored > 0
    assert taken >= scored // 2, f"the shortcut was taken in only {taken} of {scored} scored episodes"
    print(env_id, "scored", scored, "replay skipped", taken, "decided by writes", by_writes)
    if env.unwrapped.config.solo and env.unwrapped.domain.has_user_tools:
        assert by_writes == 0  # solo reroutes user tools: the writes are never compared (see _env_component)
    else:
        assert by_writes >= scored // 5, f"the DB match was decided by the writes in only {by_writes} of {scored}"


def test_airline_shortcut_is_taken_for_the_oracle(spy):
    env = gym.make("tau2/airline-v0")
    for task in env.unwrapped.tasks[:10]:
        spy.clear()
        reward, info = play(env, OracleAgent(), task.id)
        assert reward == 1.0
        assert spy == [True], task.id


def _oracle_episode(env_id="tau2/airline-v0", last_write_with_two_arguments=False):
    """The oracle on the first task whose gold actions include a write (whose last write takes two or more
    arguments, if asked)."""
    env = gym.make(env_id)
    dom = env.unwrapped.domain
    probe = dom.make_environment()

    def fits(t):
        writes = (
            [
                a
                for a in (t.evaluation_criteria.actions or [])
                if t.evaluation_criteria and probe._has_tool(a.name) and probe._is_mutating_tool(a.name)
            ]
            if t.evaluation_criteria
            else []
        )
        return bool(writes) and (not last_write_with_two_arguments or len(writes[-1].arguments) >= 2)

    task = next(t for t in env.unwrapped.tasks if fits(t))
    reward, info = play(env, OracleAgent(), task.id)
    loop = env.unwrapped.loop
    return env, loop, loop.messages()


def test_outside_changes_turn_the_shortcut_off():
    # a DB update outside set_state
    env, loop, msgs = _oracle_episode()
    assert loop.env.replays_to(msgs)
    loop.env.update_agent_db({})
    assert not loop.env.replays_to(msgs)

    # a call that is not in the trajectory
    env, loop, msgs = _oracle_episode()
    loop.env.get_response(ToolCall("cancel_reservation", {"reservation_id": "4WQ150"}, id="extra"))
    assert not loop.env.replays_to(msgs)

    # a trajectory that is not the one the env ran (one mutating call dropped)
    env, loop, msgs = _oracle_episode()
    writes = [
        i
        for i, m in enumerate(msgs)
        if getattr(m, "tool_calls", None) and loop.env._is_mutating_tool(m.tool_calls[0].name)
    ]
    if writes:
        i = writes[-1]
        assert not loop.env.replays_to(msgs[:i] + msgs[i + 2 :])

    # a second set_state
    env, loop, msgs = _oracle_episode()
    loop.env.set_state(None, None, [])
    assert not loop.env.replays_to(msgs)


def test_no_shortcut_with_a_sync_hook():
    env, loop, msgs = _oracle_episode("tau2/telecom-v0")
    assert loop.env._sync_hook is not None
    assert not loop.env.replays_to(msgs)


def test_trajectory_errors_still_raise_as_upstream():
    """A broken trajectory raises in scoring whether or not a live env is passed (replay's own errors)."""
    from tau2_gym.scoring.evaluation import EvaluationError

    env, loop, msgs = _oracle_episode()
    tool_at = next(i for i, m in enumerate(msgs) if type(m).__name__ == "ToolMessage")
    broken = msgs[:tool_at] + msgs[tool_at + 1 :]  # a call without its result
    u = env.unwrapped
    for live in (None, loop.env):
        with pytest.raises(EvaluationError):
            evaluate_simulation(u.domain, loop.task, broken, "user_stop", live_env=live)


def test_a_domain_with_non_deterministic_tools_is_always_replayed(monkeypatch, spy):
    from dataclasses import replace

    import tau2_gym.core.domain as domain_mod
    from tau2_gym import load_domain
    from tau2_gym.domains.mock import DOMAIN as MOCK

    monkeypatch.setattr(domain_mod, "_registry", dict(domain_mod._registry))
    domain_mod.register_domain("mock-random", replace(MOCK, name="mock-random", deterministic_tools=False))
    dom = load_domain("mock-random")
    task = next(
        t
        for t in dom.tasks()
        if t.evaluation_criteria and t.evaluation_criteria.actions and not t.evaluation_criteria.env_assertions
    )
    from tau2_gym.core.turn_loop import TurnLoop

    loop = TurnLoop(dom, task)
    loop.start()
    assert loop.env._calls is None  # nothing is tracked, so replays_to can never answer True
    assert not loop.env.replays_to(loop.messages())
    assert load_domain("mock").make_environment()._calls == []


def test_identical_is_strict_about_types_and_order():
    from tau2_gym.scoring.evaluation import _identical

    same = [({"a": [1, {"b": "x"}], "c": 2.5}, {"a": [1, {"b": "x"}], "c": 2.5}), (None, None), ("s", "s")]
    for a, b in same:
        assert _identical(a, b)
    differ = [
        (1, 1.0),
        (True, 1),
        ([1], (1,)),
        (-0.0, 0.0),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}),
        ({"a": 1}, {"a": 2}),
        ("1", 1),
    ]
    for a, b in differ:
        assert not _identical(a, b), (a, b)


def test_db_match_from_writes_only_for_the_very_same_writes():
    """The oracle's writes are the gold ones (DB match without comparing states); the same writes with one
    argument of another type or key order are not, and the states are compared instead."""
    env, loop, msgs = _oracle_episode(last_write_with_two_arguments=True)
    plan = evaluation._plan(env.unwrapped.domain, loop.task)
    gold = plan.gold_writes(loop.env)
    live = loop.env.replayed_writes(msgs)
    assert live and evaluation._same_writes(live, gold)
    call = live[-1]
    for k, v in call.arguments.items():
        if type(v) is int and type(v) is not bool:
            altered = {**call.arguments, k: float(v)}
            break
    else:
        altered = dict(reversed(list(call.arguments.items())))
        assert list(altered) != list(call.arguments)
    other = ToolCall(id=call.id, name=call.name, arguments=altered, requestor=call.requestor)
    assert not evaluation._same_writes(live[:-1] + [other], gold)
    assert not evaluation._same_writes(live[:-1], gold)
