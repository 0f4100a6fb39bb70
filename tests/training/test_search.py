"""Best-of-n branching (:mod:`tau2_gym.training.search`): it beats the policy it searches with, is reproducible from
its seed, leaves the searched env holding the searched episode, and never touches the env while branching."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from datautil import REPO

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.training.search import best_of_n, branch_score, oracle_policy, search_turn

TASK = {"task_id": "7"}  # airline: several writes; a slip anywhere before the end fails the episode


def _play(env, policy, seed):
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed, options=TASK)
    while True:
        obs, reward, term, trunc, info = env.step(policy(obs, info, rng))
        if term or trunc:
            return reward


def _messages(env):
    return [{k: v for k, v in m.to_dict().items() if k != "timestamp"} for m in env.unwrapped.loop.messages()]


def test_best_of_n_beats_the_weak_policy_it_searches_with():
    env = gym.make("tau2/airline-v0")
    weak = oracle_policy(epsilon=0.3)
    plain = [_play(env, weak, s) for s in range(12)]
    searched = [best_of_n(env, weak, n=4, seed=s, options=TASK) for s in range(3)]
    # a slip ends the episode (the customer hangs up), so the plain policy fails most episodes of a 7-step plan
    assert np.mean(plain) < 0.75
    assert [r.reward for r in searched] == [1.0, 1.0, 1.0]
    res = searched[0]
    assert res.terminated and res.info["termination_reason"] == "user_stop"
    assert res.branches == 4 * len(res.turns) and res.branch_steps >= res.branches
    assert any(t.chosen != 0 for t in res.turns)  # the search did overrule the first sample somewhere
    # the env ends holding the (last) searched episode, whose actions are the chosen candidates
    run = env.unwrapped.simulation_run()
    assert run["reward_info"]["reward"] == searched[-1].reward and searched[-1].simulation_run == run
    assert [t.action for t in res.turns] == res.actions
    # the oracle's own plan (epsilon 0) solves it: the search's winners are its steps
    assert _play(env, oracle_policy(0.0), 0) == 1.0


def test_search_is_reproducible_from_its_seed():
    env = gym.make("tau2/airline-v0")
    weak = oracle_policy(epsilon=0.4)
    a = best_of_n(env, weak, n=3, seed=7, options=TASK)
    msgs_a = _messages(env)
    b = best_of_n(env, weak, n=3, seed=7, options=TASK)
    assert a.actions == b.actions and [t.scores for t in a.turns] == [t.scores for t in b.turns]
    assert _messages(env) == msgs_a
    c = best_of_n(env, weak, n=3, seed=8, options=TASK)
    assert [t.scores for t in c.turns] != [t.scores for t in a.turns]


def test_search_turn_leaves_the_env_untouched_and_depth_limits_the_branches():
    env = gym.make("tau2/airline-v0")
    obs, info = env.reset(seed=0, options=TASK)
    obs, *_, info = env.step(oracle_policy()(obs, info, np.random.default_rng(0)))
    before = (_messages(env), env.unwrapped.loop.env.get_db_hash(), env.unwrapped.loop.step_count)
    rec = search_turn(env, obs, info, oracle_policy(0.0), n=3, depth=0, value=None)
    assert rec.branch_steps == 3 and rec.finished == 0 and rec.scores == [(0.0, 0.0)] * 3  # no value: all tie
    assert (_messages(env), env.unwrapped.loop.env.get_db_hash(), env.unwrapped.loop.step_count) == before
    rec = search_turn(env, obs, info, oracle_policy(0.0), n=2, depth=1)  # default value: reward_if_stopped
    assert rec.branch_steps == 4 and rec.finished == 0
    assert rec.scores[0] == rec.scores[1] and rec.scores[0][0] == 0.0 and 0.0 < rec.scores[0][1] < 1.0  # partial
    # a branch that slips now is finished, and scores below the ones still on track
    slip = search_turn(env, obs, info, oracle_policy(1.0), n=1, depth=1)
    assert slip.finished == 1 and slip.scores[0] < rec.scores[0]
    assert (_messages(env), env.unwrapped.loop.env.get_db_hash(), env.unwrapped.loop.step_count) == before
    with pytest.raises(ValueError):
        search_turn(env, obs, info, oracle_policy(), n=0)


def test_best_of_n_through_a_time_limit_counts_only_the_chosen_steps():
    env = gym.make("tau2/airline-v0", max_episode_steps=4)
    res = best_of_n(env, oracle_policy(0.2), n=2, seed=1, options=TASK)
    assert len(res.actions) == 4 and res.truncated and env._elapsed_steps == 4
    # the branches are clones of the wrapped env: the TimeLimit cut them at the same step (every branch of the
    # last turn ends with its first step)
    assert res.turns[-1].finished == 2 and res.turns[-1].branch_steps == 2


def test_branch_score_counts_the_checks_that_passed():
    info = {
        "reward_info": {
            "reward": 0.0,
            "db_check": {"db_match": False},
            "action_checks": [{"action_match": True}, {"action_match": True}],
            "communicate_checks": [{"met": False}],
            "env_assertions": None,
            "nl_assertions": None,
        }
    }
    assert branch_score(0.0, info) == (0.0, 0.5)
    assert branch_score(1.0, {"reward_info": None}) == (1.0, 0.0)


def test_hf_policy_in_a_search_parses_its_turns_and_samples_reproducibly():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from hfutil import ForceScript, oracle_scripts, set_threads, tiny

    from tau2_gym.training.hf.chat import ChatRenderer
    from tau2_gym.training.hf.generation import HFGenerator
    from tau2_gym.training.search import HFTurnPolicy

    set_threads()
    model, tok = tiny()
    make = lambda: gym.make("tau2/mock-v0")  # noqa: E731 - a one-line factory
    # the tiny model forced to write the oracle's turns as template text: the policy's rendering, generation
    # and tool-call parsing carry them to the env, and the searched episode is solved
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    scripts, base, rewards = oracle_scripts(renderer, make, ["create_task_1"])
    forced = HFGenerator(model, tok, do_sample=False, logits_processor=[ForceScript(tok, scripts, base)])
    res = best_of_n(
        make(),
        HFTurnPolicy(None, tok, generator=forced, max_new_tokens=200),
        n=2,
        seed=0,
        options={"task_id": "create_task_1"},
    )
    assert res.reward == rewards["create_task_1"] == 1.0
    assert res.actions[0]["tool_calls"][0]["function"]["name"] == "create_task"

    # sampling: the same seed gives the same candidates, different branches different ones
    policy = HFTurnPolicy(model, tok, max_new_tokens=8, temperature=1.0)
    env = make()
    obs, info = env.reset(seed=0, options={"task_id": "create_task_1"})
    a = search_turn(env, obs, info, policy, n=2, depth=1, seed=3)
    b = search_turn(env, obs, info, policy, n=2, depth=1, seed=3)
    assert a.candidates == b.candidates and a.scores == b.scores
    assert a.candidates[0] != a.candidates[1]


def test_branches_in_a_vector_env_batch_the_user_turns_and_search_alike():
    from tau2_gym.envs.vector import Tau2VectorEnv
    from tau2_gym.players.users.scripted import OracleUser

    user = OracleUser()
    env = gym.make("tau2/airline-v0", user=user)
    vec = Tau2VectorEnv(4, domain="airline", user=user)
    vec.reset(seed=0)
    weak = oracle_policy(epsilon=0.3)
    alone = best_of_n(env, weak, n=4, seed=5, options=TASK)
    alone_messages = _messages(env)
    batched = best_of_n(env, weak, n=4, seed=5, options=TASK, vector=vec)
    assert batched.actions == alone.actions and [t.scores for t in batched.turns] == [t.scores for t in alone.turns]
    assert batched.branch_steps == alone.branch_steps and batched.reward == alone.reward == 1.0
    assert _messages(env) == alone_messages
    assert vec.user_requests > vec.user_batches > 0  # several branches' user turns per batch
    with pytest.raises(ValueError):  # the vector env must answer with the env's own simulator
        best_of_n(gym.make("tau2/airline-v0"), weak, n=2, seed=0, options=TASK, vector=vec)
    with pytest.raises(ValueError):
        best_of_n(env, weak, n=5, seed=0, options=TASK, vector=vec)
    vec.close()


def test_the_best_of_n_example_runs(capsys):
    import runpy

    example = REPO / "examples" / "best_of_n.py"
    runpy.run_path(str(example), run_name="best_of_n_example")["main"](["--episodes", "2"])
    out = capsys.readouterr().out
    assert "best-of-4 search: rewards [1.0, 1.0]" in out and "took branch" in out
