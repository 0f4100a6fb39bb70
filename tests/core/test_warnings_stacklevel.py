"""Warnings name the user's line, not Gymnasium's or tau2-gym's (``tau2_gym.core.warn``)."""

from __future__ import annotations

import warnings

import gymnasium as gym

import tau2_gym  # noqa: F401 - registers the ids
from tau2_gym.envs.tau2_env import Tau2Env


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if issubclass(w.category, UserWarning)]


def test_the_no_judge_warning_of_gym_make_names_the_callers_line():
    found = _caught(lambda: gym.make("tau2/retail-v0"))
    judge = [w for w in found if "NL-assertion judge" in str(w.message)]
    assert judge, [str(w.message) for w in found]
    assert all(w.filename == __file__ for w in judge), [w.filename for w in judge]


def test_a_step_after_the_end_warns_at_the_callers_line_through_wrappers_and_directly():
    for env in (gym.make("tau2/mock-v0", user="oracle"), Tau2Env(domain="mock", user="oracle")):
        env.reset(seed=0)
        env.step(None)  # agent_error: the episode ends
        found = _caught(lambda env=env: env.step(None))
        assert [str(w.message) for w in found] == ["step() called after the episode ended; call reset()"]
        assert found[0].filename == __file__


def test_no_tau2_gym_warning_names_a_file_inside_gymnasium_or_the_package():
    def run():
        env = gym.make("tau2/retail-v0")
        env.reset(seed=0)
        env.step(None)
        env.step(None)

    found = _caught(run)
    assert found
    assert all(w.filename == __file__ for w in found), {(w.filename, str(w.message)[:40]) for w in found}
