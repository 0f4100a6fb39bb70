"""The envs follow Gymnasium's conventions: copyable and picklable mid-episode, vector results files, TimeLimit
truncations that can still be saved and scored, autoreset modes, real reset/step docstrings."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import pytest

import tau2_gym  # noqa: F401  (registers the envs)

_TASK = "7"  # airline: gold actions update and cancel reservations, so the DB changes mid-episode


def _script(env: Any) -> list[Any]:
    """The task's gold actions one per step (writes included), then texts until the customer stops."""
    task = env.unwrapped.task_by_id(_TASK)
    calls = [{"name": a.name, "arguments": dict(a.arguments)} for a in task.evaluation_criteria.actions]
    return calls + ["Is there anything else?"] * 10


def _transition(env: Any, action: Any) -> tuple:
    obs, reward, terminated, truncated, info = env.step(action)
    loop = env.unwrapped.loop
    run = info.get("simulation_run")
    reward_info = None if run is None else dict(run["reward_info"] or {})
    return (obs, reward, terminated, truncated, loop.env.get_db_hash(), loop.step_count,
            info.get("termination_reason"), reward_info and reward_info.get("reward"))


def _run(env: Any, actions: list[Any]) -> list[tuple]:
    out = []
    for action in actions:
        t = _transition(env, action)
        out.append(t)
        if t[2] or t[3]:
            break
    return out


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))], ids=["deepcopy", "pickle"])
def test_env_copied_mid_episode_steps_like_the_original(clone):
    ref = gym.make("tau2/airline-v0", user="oracle")
    ref.reset(seed=3, options={"task_id": _TASK})
    script = _script(ref)
    expected = _run(ref, script)
    assert len(expected) > 4 and expected[-1][2]  # the episode ends within the script
    assert len({t[4] for t in expected}) > 1  # the DB changed along the way: the copy must carry its state

    env = gym.make("tau2/airline-v0", user="oracle")
    env.reset(seed=3, options={"task_id": _TASK})
    k = 3
    assert _run(env, script[:k]) == expected[:k]
    twin = clone(env)
    assert twin.unwrapped.loop is not env.unwrapped.loop
    # the copy shares the process's cached domain (not a copy of its data)
    assert twin.unwrapped.domain is env.unwrapped.domain
    assert twin.unwrapped.loop.env.tools.db is not env.unwrapped.loop.env.tools.db
    assert _run(twin, script[k:]) == expected[k:]  # the copy goes on as the original would
    assert _run(env, script[k:]) == expected[k:]  # and running it did not touch the original
    assert expected[-1][7] is not None
