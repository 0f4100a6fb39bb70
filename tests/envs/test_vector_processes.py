"""A vector env whose sub-envs live in worker processes (``processes=K``) gives the in-process vector env's
episodes, observations, rewards and infos, over every path a step takes; its failures are said, never hung."""

from __future__ import annotations

import json
import os
import signal

import gymnasium as gym
import numpy as np
import pytest
from test_vector import AGENTS, OutOfOrderUser, canon, drive, env_info

import tau2_gym  # noqa: F401 - registers the ids
from tau2_gym.envs.shards import Advance, split_sizes
from tau2_gym.players.agents.scripted import OracleAgent

KW = dict(max_steps=16, max_errors=4)
VOLATILE = {"id", "timestamp", "start_time", "end_time", "duration"}


def stable(runs: list) -> list:
    """Simulation runs without their clock readings and random ids; messages as their canonical tuples."""
    return [
        None if r is None else {k: canon(v) if k == "messages" else v for k, v in r.items() if k not in VOLATILE}
        for r in runs
    ]


def entries(infos: dict, i: int) -> dict:
    """Sub-env ``i``'s info entries, its final info (SameStep) among them, records without clock readings."""
    out = env_info(infos, i)
    if "final_info" in infos and infos["_final_info"][i]:
        out["final_info"] = env_info(infos["final_info"], i)
        out["final_info"]["simulation_run"] = stable([out["final_info"].get("simulation_run")])
    out["simulation_run"] = stable([out.get("simulation_run")])
    return out


def infos_of(vec, seed: int, steps: int) -> list:
    """Each sub-env's info entries, step by step, with the oracle agent and SameStep autoreset's final infos."""
    n = vec.num_envs
    obs, infos = vec.reset(seed=seed)
    out = [[entries(infos, i) for i in range(n)]]
    agents = [OracleAgent() for _ in range(n)]
    for i in range(n):
        info = env_info(infos, i)
        agents[i].reset(info["task"], info)
    for _ in range(steps):
        obs, rewards, terms, truncs, infos = vec.step([a.act() for a in agents])
        out.append([entries(infos, i) for i in range(n)] + [rewards.tolist(), (terms | truncs).tolist(), obs])
        for i in np.flatnonzero(terms | truncs):
            info = env_info(infos, int(i))
            agents[i].reset(info["task"], info)
    return out


def test_split_sizes_cover_every_sub_env_in_contiguous_blocks():
    assert split_sizes(5, 2) == [3, 2] and split_sizes(4, 4) == [1, 1, 1, 1] and sum(split_sizes(1024, 3)) == 1024


def test_a_round_splits_over_the_blocks_it_touches_with_local_indices_and_each_sub_envs_own_arguments():
    # six sub-envs in blocks [0, 1], [2, 3, 4] and [5]: steps 4 and 0, resets 3 and 1 (seeds 30, 10); block 2 idle
    owner, starts = [0, 0, 1, 1, 1, 2], [0, 2, 5]
    round_ = Advance([4, 0], ["a4", "a0"], [3, 1], [30, 10], None, "why")
    parts = round_.split(owner, starts)
    assert parts == {
        0: Advance([0], ["a0"], [1], [10], None, "why"),
        1: Advance([2], ["a4"], [1], [30], None, "why"),
    }
    assert parts[1].reset_kwargs(0) == {"seed": 30, "options": None}


def test_sub_envs_in_two_processes_give_the_in_process_episodes_observations_and_rewards():
    """Five sub-envs in blocks of 3 and 2, the oracle and five flawed agents, NextStep autoresets: every episode,
    observation, reward and done flag equals the in-process vector env's; the customer counts add up."""
    ours = gym.make_vec("tau2/airline-v0", num_envs=5, processes=2, **KW)
    theirs = gym.make_vec("tau2/airline-v0", num_envs=5, **KW)
    try:
        assert repr(ours.unwrapped) == "Tau2VectorEnv('airline', num_envs=5, processes=2)"
        mine, ref = drive(ours, 30, seed=11, agents=AGENTS), drive(theirs, 30, seed=11, agents=AGENTS)
        assert len(mine["episodes"]) >= 8 and mine["episodes"] == ref["episodes"]
        for key in ("obs", "rewards", "terms", "truncs", "info_keys"):
            assert mine[key] == ref[key], key
        assert ours.unwrapped.user_requests == theirs.unwrapped.user_requests > 0
        assert ours.unwrapped.np_random_seed == theirs.unwrapped.np_random_seed == (11, 12, 13, 14, 15)
        assert stable(ours.unwrapped.simulation_runs()) == stable(theirs.unwrapped.simulation_runs())
    finally:
        ours.close()
        theirs.close()


def test_infos_and_same_step_final_observations_equal_the_in_process_ones():
    ours = gym.make_vec("tau2/airline-v0", num_envs=3, processes=3, autoreset_mode="SameStep", **KW)
    theirs = gym.make_vec("tau2/airline-v0", num_envs=3, autoreset_mode="SameStep", **KW)
    try:
        mine, ref = infos_of(ours, 5, 25), infos_of(theirs, 5, 25)
        assert sum("final_info" in entry for step in mine[1:] for entry in step[:3]) >= 3  # episodes ended and reset
        assert mine == ref
    finally:
        ours.close()
        theirs.close()


def test_a_concurrent_customer_is_awaited_in_each_process_with_the_same_episodes():
    ours = gym.make_vec("tau2/airline-v0", num_envs=4, processes=2, user=OutOfOrderUser(), **KW)
    theirs = gym.make_vec("tau2/airline-v0", num_envs=4, user=OutOfOrderUser(), **KW)
    try:
        mine, ref = drive(ours, 24, seed=2), drive(theirs, 24, seed=2)
        assert mine["episodes"] and mine["episodes"] == ref["episodes"] and mine["obs"] == ref["obs"]
        assert sum(ours.unwrapped.get_attr("user")[k].awaited for k in (0, 2)) == ours.unwrapped.user_requests
    finally:
        ours.close()
        theirs.close()


def test_an_llm_customer_over_the_wire_gets_the_in_process_requests_and_each_process_its_share_of_the_gate():
    from openai_stub import OpenAIStub

    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    def reply(body, n):
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return "###STOP###" if said >= 2 else f"Reply {said} to: {body['messages'][-1]['content']}"

    def play(processes: int) -> tuple:
        with OpenAIStub(reply) as server:
            user = OpenAIUserSimulator(
                model="stub", base_url=server.base_url, api_key_env=None, cache="off", max_concurrency=3
            )
            vec = gym.make_vec("tau2/airline-v0", num_envs=5, user=user, processes=processes)
            log = drive(vec, 6, seed=3, agents=(OracleAgent,))
            gates = [u.config.max_concurrency for u in vec.unwrapped.get_attr("user")]
            vec.close()
            user.close()
            return log, sorted(json.dumps(b, sort_keys=True) for b in server.requests), gates

    (mine, my_bodies, my_gates), (ref, their_bodies, _) = play(2), play(1)
    assert mine["episodes"] and mine["episodes"] == ref["episodes"] and mine["obs"] == ref["obs"]
    assert my_bodies == their_bodies
    assert my_gates == [2, 2, 2, 1, 1]  # the caller's 3 in flight, split between the two processes


def test_observations_travel_as_what_they_add_and_stay_the_callers_to_change():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, processes=2, **KW)
    try:
        obs, _ = vec.reset(seed=0)
        shards = vec.unwrapped._shards
        obs[0].append({"role": "user", "content": "a caller's own note"})  # the caller's list, not the mirror
        obs2, *_, infos2 = vec.step(["Hello, how can I help?"] * 2)
        assert obs2[0][: len(obs[0]) - 1] == obs[0][:-1] and obs2[0][-1] != obs[0][-1]
        assert shards.mirror[0] == obs2[0] and shards.mirror[0] is not obs2[0]
        assert obs2[0][1] is shards.mirror[0][1]  # earlier messages were not sent again
    finally:
        vec.close()
    # within an episode the info values are the previous step's objects, as the in-process env hands them out
    same = []
    for processes in (2, 1):
        vec = gym.make_vec("tau2/airline-v0", num_envs=2, processes=processes, **KW)
        infos = [vec.reset(seed=0)[1]] + [vec.step([f"Hello ({k})"] * 2)[-1] for k in range(6)]
        vec.close()
        same.append(
            [[a[key][i] is b[key][i] for a, b in zip(infos, infos[1:]) for i in (0, 1)] for key in ("task", "tools")]
        )
    assert same[0] == same[1] and any(same[0][0]) and not all(same[0][0])
    copied = gym.make_vec("tau2/airline-v0", num_envs=2, processes=2, copy_observations=True, **KW)
    try:
        a, _ = copied.reset(seed=0)
        b, *_ = copied.step(["Hello"] * 2)
        assert b[0][1] == a[0][1] and b[0][1] is not a[0][1]  # private dicts on request
    finally:
        copied.close()


def test_copy_slot_works_within_a_process_and_refuses_across_them():
    ours = gym.make_vec("tau2/airline-v0", num_envs=4, processes=2, **KW)
    theirs = gym.make_vec("tau2/airline-v0", num_envs=4, **KW)
    try:
        for vec in (ours, theirs):
            vec.reset(seed=4)
            vec.step(["Hello"] * 4)
            vec.unwrapped.copy_slot(0, 1)
        actions = ["Could you tell me your user id?", "What is your reservation?", "Hi", "Hi"]
        steps = [vec.step(actions) for vec in (ours, theirs)]
        assert steps[0][0] == steps[1][0] and (steps[0][1] == steps[1][1]).all()
        with pytest.raises(ValueError, match="different worker processes"):
            ours.unwrapped.copy_slot(0, 3)
    finally:
        ours.close()
        theirs.close()


def test_what_needs_sub_env_objects_here_is_refused_in_words():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, processes=2, **KW)
    try:
        vec.reset(seed=0)
        with pytest.raises(ValueError, match="worker processes"):
            vec.unwrapped.clone_slot(0)
        with pytest.raises(ValueError, match="worker processes"):
            vec.unwrapped.set_slot(0, gym.make("tau2/airline-v0"))
        with pytest.raises(TypeError, match="call/get_attr/set_attr"):
            vec.unwrapped.envs[0]
        assert len(vec.unwrapped.envs) == 2
        vec.unwrapped.set_attr("copy_observations", [True, False])
        assert vec.unwrapped.get_attr("copy_observations") == (True, False)
        assert vec.unwrapped.call("render") == vec.unwrapped.render()
    finally:
        vec.close()
    for bad in (0, 3, True, 1.5):
        with pytest.raises(ValueError, match="processes="):
            gym.make_vec("tau2/airline-v0", num_envs=2, processes=bad)


def test_arguments_that_cannot_reach_the_workers_are_refused_before_any_starts():
    class Unsendable(OutOfOrderUser):
        def __reduce__(self):
            raise TypeError("holds a socket")

    with pytest.raises(TypeError, match="pickling them failed.*holds a socket"):
        gym.make_vec("tau2/airline-v0", num_envs=2, processes=2, user=Unsendable())


def test_a_callers_error_in_a_worker_is_raised_and_the_env_goes_on():
    ours = gym.make_vec("tau2/airline-v0", num_envs=2, processes=2, **KW)
    theirs = gym.make_vec("tau2/airline-v0", num_envs=2, **KW)
    try:
        errors = []
        for vec in (ours, theirs):
            vec.reset(seed=0)
            with pytest.raises(ValueError) as caught:
                vec.reset(options=[{"task_id": "0"}, {"task_id": "no-such-task"}])
            errors.append(str(caught.value))
        assert errors[0] == errors[1]
        # the worker that did reset its sub-env was heard: that episode steps on as in-process
        stepped = [vec.unwrapped.step_slots([0], ["Hello, how can I help?"])[0] for vec in (ours, theirs)]
        assert stepped[0][0] == stepped[1][0] and stepped[0][1:4] == stepped[1][1:4]
        assert ours.reset(seed=1)[0] == theirs.reset(seed=1)[0]
    finally:
        ours.close()
        theirs.close()


def test_a_worker_that_dies_is_named_and_the_env_closed_not_hung():
    vec = gym.make_vec("tau2/airline-v0", num_envs=4, processes=2, **KW)
    vec.reset(seed=0)
    shards = vec.unwrapped._shards
    pid = shards.procs[1].pid
    os.kill(pid, signal.SIGKILL)
    shards.procs[1].join(10)
    with pytest.raises(RuntimeError, match=rf"worker 1 \(pid {pid}\) exited with code -9 during advance"):
        vec.step(["Hello"] * 4)
    assert not any(p.is_alive() for p in shards.procs)
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(["Hello"] * 4)
    vec.close()


def test_an_interrupted_step_closes_the_env_instead_of_reading_stale_replies_later(monkeypatch):
    """Ctrl-C while the workers step: their replies are still coming, so the next command would read the old
    step's replies; the env is closed instead, and says so."""
    from tau2_gym.envs import shards as shards_module

    vec = gym.make_vec("tau2/airline-v0", num_envs=2, processes=2, **KW)
    vec.reset(seed=0)
    procs = vec.unwrapped._shards.procs

    def interrupted(conns):
        raise KeyboardInterrupt

    monkeypatch.setattr(shards_module, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        vec.step(["Hello"] * 2)
    monkeypatch.undo()
    assert not any(p.is_alive() for p in procs)
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(["Hello"] * 2)
    vec.close()


def test_the_gate_of_a_customer_in_the_settings_object_is_split_too():
    from tau2_gym.envs.config import Tau2EnvConfig
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    user = OpenAIUserSimulator(model="stub", base_url="http://127.0.0.1:9/v1", api_key_env=None, max_concurrency=5)
    vec = gym.make_vec("tau2/airline-v0", num_envs=3, processes=2, config=Tau2EnvConfig(domain="airline", user=user))
    try:
        assert [u.config.max_concurrency for u in vec.unwrapped.get_attr("user")] == [3, 3, 2]
        assert user.config.max_concurrency == 5  # the caller's object is left as it was
    finally:
        vec.close()
        user.close()
