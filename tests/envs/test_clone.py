"""``Tau2Env.clone()``: an independent copy of a live episode that shares only the immutable base.

What is pinned: a clone stepped with other actions leaves the original's trajectory, DB and reward as an
uninterrupted run has them; a clone given the original's remaining actions ends with the same trajectory,
DB and reward, in every domain (telecom with user tools and a sync hook, banking_knowledge with its toolkit
state); clones of clones; RNG streams; the wrapper chain (TimeLimit's count); an LLM user over a local
OpenAI-compatible stub; the vector env's per-slot clone and in-place branching.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.envs.clone import clone_env
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.players.agents.scripted import OracleAgent


def _plan(env: Any) -> list[Any]:
    """The oracle's actions for the env's current task (a fixed script: it does not read observations)."""
    base = env.unwrapped
    agent = OracleAgent()
    agent.reset(base.task, {"solo": base.config.solo, "domain": base.config.domain})
    return agent._plan + ["Is there anything else I can help you with?"] * 6


def _messages(env: Any) -> list[dict]:
    """The stored trajectory without timestamps (wall-clock) -- everything else must match exactly."""
    return [{k: v for k, v in m.to_dict().items() if k != "timestamp"} for m in env.unwrapped.loop.messages()]


def _run(env: Any, actions: list[Any]) -> list[tuple]:
    """Step until the episode ends; per step: obs, reward, flags, DB hashes, reason, the reward record."""
    out = []
    for action in actions:
        obs, reward, term, trunc, info = env.step(action)
        loop = env.unwrapped.loop
        ri = info.get("reward_info")
        out.append(
            (
                obs,
                reward,
                term,
                trunc,
                loop.env.get_db_hash(),
                loop.env.get_user_db_hash(),
                info.get("termination_reason"),
                None if ri is None else dict(ri),
            )
        )
        if term or trunc:
            return out
    raise AssertionError("the script did not end the episode")


def _start(eid: str, task_id: str, seed: int = 5, **kwargs: Any) -> Any:
    env = gym.make(eid, **kwargs)
    env.reset(seed=seed, options={"task_id": task_id})
    return env


# (env id, kwargs, task): tasks whose gold actions write (the DB changes mid-episode); telecom's needs the
# customer's own tool calls (user tools + the sync hook between the two DBs)
CASES = [
    ("tau2/airline-v0", {}, "7"),
    ("tau2/retail-v0", {"judge": "pass"}, "5"),
    ("tau2/telecom-v0", {"task_split": "small"}, None),
    ("tau2/banking_knowledge-v0", {"judge": "pass"}, None),
    ("tau2/mock-v0", {}, "update_task_with_message_history"),  # a task that starts from a message history
    ("tau2/telecom-solo-v0", {"task_split": "small"}, None),  # solo: the agent works both sides, ends with done
]


def _task_for(eid: str, kwargs: dict, task_id: Any) -> str:
    if task_id is not None:
        return task_id
    env = gym.make(eid, **kwargs).unwrapped
    want_user = env.domain.has_user_tools  # then a task where the customer acts on their own side too
    for t in env.tasks:
        acts = list(t.evaluation_criteria.actions or []) if t.evaluation_criteria is not None else []
        mine = [a for a in acts if a.requestor == "assistant"]
        if len(mine) >= 2 and (not want_user or any(a.requestor == "user" for a in acts)):
            return t.id
    raise AssertionError(f"no suitable task in {eid}")


@pytest.mark.parametrize("eid,kwargs,task_id", CASES, ids=[c[0].split("/")[1] for c in CASES])
def test_clone_continues_like_the_original_and_diverges_without_touching_it(eid, kwargs, task_id):
    task_id = _task_for(eid, kwargs, task_id)
    ref = _start(eid, task_id, **kwargs)
    script = _plan(ref)
    expected = _run(ref, script)
    expected_messages = _messages(ref)
    assert len(expected) >= 2

    env = _start(eid, task_id, **kwargs)
    k = len(expected) // 2
    for action in script[:k]:
        env.step(action)
    twin = env.unwrapped.clone()
    assert isinstance(twin, Tau2Env) and twin is not env.unwrapped
    assert twin.domain is env.unwrapped.domain and twin.tasks is env.unwrapped.tasks  # the base is shared
    assert twin.loop.env.tools.db is not env.unwrapped.loop.env.tools.db
    assert twin.loop.env.tools.db.base is env.unwrapped.loop.env.tools.db.base
    assert twin.loop.episode_id != env.unwrapped.loop.episode_id

    other = env.unwrapped.clone()

    # one clone runs the rest of the script first (its writes change its own DB only) ...
    assert _run(twin, script[k:]) == expected[k:]
    # ... another goes its own way: a wrong tool call, then a goodbye (the customer hangs up)
    diverged = _run(other, [{"name": script_call_name(script), "arguments": {"bogus": 1}}, "Goodbye!"] + ["Ok."] * 5)
    assert diverged[-1][2] or diverged[-1][3]
    assert _messages(other) != expected_messages
    # ... and the original is still exactly where an uninterrupted run has it
    assert _run(env, script[k:]) == expected[k:]
    assert _messages(env) == expected_messages == _messages(twin)


def script_call_name(script: list[Any]) -> str:
    return next(a["tool_calls"][0]["function"]["name"] for a in script if isinstance(a, dict) and a.get("tool_calls"))


@pytest.mark.parametrize("eid,kwargs,task_id", CASES, ids=[c[0].split("/")[1] for c in CASES])
def test_clone_given_the_remaining_actions_ends_like_the_original(eid, kwargs, task_id):
    task_id = _task_for(eid, kwargs, task_id)
    env = _start(eid, task_id, **kwargs)
    script = _plan(env)
    k = 2 if len(_run(_start(eid, task_id, **kwargs), script)) > 2 else 1  # clone mid-episode
    for action in script[:k]:
        env.step(action)
    twin = env.unwrapped.clone()
    grandchild = twin.clone()  # a clone of a clone is a clone too
    original = _run(env, script[k:])
    assert original[-1][1] == 1.0 and original[-1][6] in ("user_stop", "agent_stop")  # oracle: the task is solved
    assert _run(twin, script[k:]) == original
    assert _messages(twin) == _messages(env)
    assert _run(grandchild, script[k:]) == original
    assert _messages(grandchild) == _messages(env)
    # scoring's shortcut (no replay when the live env provably equals the replay) holds for clones alike
    base = env.unwrapped
    assert twin.loop.env.replays_to(twin.loop.messages()) == base.loop.env.replays_to(base.loop.messages())
    assert twin.simulation_run()["id"] != base.simulation_run()["id"]


def test_clone_keeps_rng_streams_and_they_stay_independent():
    env = _start("tau2/airline-v0", "7")
    base = env.unwrapped
    base.action_space.seed(11)
    base.action_space.sample()
    twin = base.clone()
    assert twin.np_random.integers(1 << 30, size=4).tolist() == base.np_random.integers(1 << 30, size=4).tolist()
    a, b = twin.action_space.sample(), base.action_space.sample()
    assert a == b
    twin.np_random.integers(10, size=100)  # drawing from the clone does not advance the original
    twin.action_space.sample()
    probe = base.clone()
    assert probe.np_random.integers(1 << 30) == base.np_random.integers(1 << 30)
    assert twin.action_space is not base.action_space and twin.action_space.tools is base.action_space.tools
    # the task draw at the next reset follows the copied generator
    base.reset()
    twin2 = env.unwrapped.clone()
    assert twin2.reset()[1]["task_id"] == base.reset()[1]["task_id"]


def test_clone_env_keeps_the_wrapper_chain_and_the_time_limit_count():
    env = gym.make("tau2/airline-v0", max_episode_steps=5)
    env.reset(seed=1, options={"task_id": "7"})
    script = _plan(env)
    for action in script[:2]:
        env.step(action)
    twin = clone_env(env)
    chain = lambda e: [type(w).__name__ for w in _wrappers(e)]  # noqa: E731 - a one-line factory
    assert chain(twin) == chain(env) and "TimeLimit" in chain(twin)
    assert twin.unwrapped is not env.unwrapped
    assert twin._elapsed_steps == env._elapsed_steps == 2
    ends_a = _run(env, ["Let me check."] * 10)
    ends_b = _run(twin, ["Let me check."] * 10)
    assert len(ends_a) == len(ends_b)
    assert ends_a == ends_b
    assert clone_env(env.unwrapped).__class__ is type(env.unwrapped)  # the bare env clones to a bare env
    with pytest.raises(TypeError):
        clone_env(gym.make("CartPole-v1"))


def _wrappers(env: Any) -> list[Any]:
    out = []
    while isinstance(env, gym.Wrapper):
        out.append(env)
        env = env.env
    return out + [env]


def test_clone_of_a_finished_episode_repeats_its_end():
    env = _start("tau2/mock-v0", "update_task_1")
    result = _run(env, _plan(env))
    twin = env.unwrapped.clone()
    with pytest.warns(UserWarning):
        obs, reward, term, trunc, info = twin.step("again")
    assert (term, trunc) == result[-1][2:4] and reward == 0.0
    assert twin.simulation_run() == env.unwrapped.simulation_run()


def test_clone_with_an_llm_user_shares_the_client_and_sees_its_own_history():
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    def reply(body: dict, n: int) -> str:
        """Deterministic in the request: the customer repeats how many agent texts it has seen."""
        seen = [m["content"] for m in body["messages"] if m["role"] == "user"]
        if any("bye" in (c or "").lower() for c in seen):
            return "###STOP###"
        return f"I need help with my reservation ({len(seen)} agent messages so far)."

    with OpenAIStub(reply) as server:
        user = OpenAIUserSimulator(model="stub-model", base_url=server.base_url, max_retries=0)
        env = gym.make("tau2/airline-v0", user=user)
        env.reset(seed=2, options={"task_id": "7"})
        env.step("How can I help?")
        twin = env.unwrapped.clone()
        assert twin.user is env.unwrapped.user  # one simulator, one client; the state is the loop's
        assert clone_env(env).unwrapped.user is user  # through gym.make's wrappers alike
        sent_before = len(server.requests)
        obs_twin, *_ = twin.step("A different question from the clone")
        assert len(server.requests) == sent_before + 1
        history = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
        assert history[-1] == "A different question from the clone" and "How can I help?" in history
        obs_env, *_ = env.step("What is your user id?")
        history = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
        assert "A different question from the clone" not in history  # the original's user never saw it
        assert obs_twin[-1]["content"] == obs_env[-1]["content"]  # same count of agent texts: same reply
        # same actions from here on: the same trajectory (a deterministic user)
        a = _run(env, ["Thanks, bye"])
        b = _run(twin, ["Thanks, bye"])
        assert a[-1][6] == b[-1][6] == "user_stop" and a[-1][1] == b[-1][1]
        assert [m["content"] for m in _messages(env)][-1] == [m["content"] for m in _messages(twin)][-1]
        # copy.deepcopy works with an LLM user too (its client is shared, not copied) and steps alike
        env.reset(seed=2, options={"task_id": "7"})
        env.step("How can I help?")
        deep = copy.deepcopy(env)
        assert deep.unwrapped.user is user and deep.unwrapped.loop is not env.unwrapped.loop
        assert _run(deep, ["Thanks, bye"])[-1][1:] == _run(env, ["Thanks, bye"])[-1][1:]
        user.close()


def test_vector_env_clone_slot_and_copy_slot():
    vec = gym.make_vec("tau2/airline-v0", num_envs=3, user="oracle")
    venv = vec.unwrapped if hasattr(vec, "unwrapped") else vec
    venv.reset(seed=0, options={"task_id": "7"})
    script = _plan(venv.envs[1])
    for action in script[:2]:
        venv.step([action] * 3)
    # a standalone env from slot 1 continues as the slot would
    twin = venv.clone_slot(1)
    standalone = _run(twin, script[2:])
    assert standalone[-1][1] == 1.0

    # branching in place: slot 2 becomes a copy of slot 0; both then take different actions in one step
    venv.copy_slot(0, 2)
    assert venv.envs[2] is not venv.envs[0] and venv.envs[2].loop.env.tools.db is not venv.envs[0].loop.env.tools.db
    ends = []
    for action in script[2:]:
        obs, rew, term, trunc, infos = venv.step([action, action, "Goodbye!" if not ends else action])
        ends.append((rew.tolist(), term.tolist(), list(infos.get("termination_reason", [None] * 3))))
        if term[0]:
            break
    assert ends[0][1][2] and ends[0][0][2] == 0.0 and ends[0][2][2] == "user_stop"  # the branch hung up at once
    assert ends[-1][0][:2] == [1.0, 1.0] == [standalone[-1][1]] * 2  # slots 0 and 1 went on undisturbed
    # a copy of an ended slot keeps its reward and flags, so the next step resets both (NextStep)
    venv.copy_slot(0, 2)
    assert venv._rewards[2] == 1.0 and venv._terminations[2]
    obs, rew, term, trunc, _ = venv.step(["Hello", "Hello", "Hello"])
    assert rew[[0, 2]].tolist() == [0.0, 0.0] and not term[[0, 2]].any() and not trunc[[0, 2]].any()
    assert not venv.envs[2].episode.done and obs[2] == venv.envs[2].observation()
    with pytest.raises(IndexError):
        venv.clone_slot(3)
    with pytest.raises(TypeError):
        venv.copy_slot(0, "1")
    vec.close()
    fresh = gym.make_vec("tau2/airline-v0", num_envs=2, user="oracle").unwrapped
    fresh.copy_slot(0, 1)  # nothing to copy before a reset: step() still refuses
    with pytest.raises(RuntimeError, match="reset"):
        fresh.step(["Hello", "Hello"])
    fresh.close()


def test_a_clone_pickles_and_continues():
    import pickle

    env = _start("tau2/airline-v0", "7")
    script = _plan(env)
    for action in script[:2]:
        env.step(action)
    twin = env.unwrapped.clone()
    revived = pickle.loads(pickle.dumps(twin))
    assert _run(revived, script[2:]) == _run(twin, script[2:])
    assert np.isfinite(_run(env, script[2:])[-1][1])


def test_vector_env_set_slot_and_step_slots_move_only_the_given_sub_envs():
    from tau2_gym.envs.vector import Tau2VectorEnv
    from tau2_gym.players.users.scripted import OracleUser

    user = OracleUser()
    vec = Tau2VectorEnv(3, domain="airline", user=user)
    vec.reset(seed=0, options={"task_id": "8"})
    env = _start("tau2/airline-v0", "7", user=user)
    script = _plan(env)
    env.step(script[0])
    vec.set_slot(2, env)  # slot 2 now continues env's episode (task 7) ...
    assert vec.envs[2].task.id == "7" and vec.envs[0].task.id == "8"
    before = [(s.loop.step_count, len(s.loop.trajectory)) for s in vec.envs[:2]]
    ref = env.unwrapped.clone()
    out = vec.step_slots([2], [script[1]])  # ... and steps alone: slots 0 and 1 wait
    assert [(s.loop.step_count, len(s.loop.trajectory)) for s in vec.envs[:2]] == before
    expected = ref.step(script[1])
    assert out[2][0] == expected[0] and out[2][1:4] == expected[1:4]
    rest = _run(ref, script[2:])
    for action in script[2:]:
        res = vec.step_slots([2], [action])[2]
        if res[2] or res[3]:
            break
    assert res[1] == rest[-1][1] == 1.0
    with pytest.raises(ValueError):
        vec.step_slots([0, 0], ["a", "b"])
    with pytest.raises(ValueError):
        vec.set_slot(1, _start("tau2/airline-v0", "7"))  # another user simulator object
    vec.close()


def test_set_slot_takes_a_live_or_an_ended_episode_before_the_first_reset_and_an_ended_one_is_reset_next():
    from tau2_gym.envs.vector import Tau2VectorEnv
    from tau2_gym.players.users.scripted import OracleUser

    user = OracleUser()
    vec = Tau2VectorEnv(2, domain="airline", user=user)
    live = _start("tau2/airline-v0", "7", user=user)
    script = _plan(live)
    ended = _start("tau2/airline-v0", "7", user=user)
    final = _run(ended, script)[-1]
    assert final[1] == 1.0 and final[2]
    vec.set_slot(0, live)  # no reset yet: the slots' bookkeeping starts here
    vec.set_slot(1, ended)
    ref = live.unwrapped.clone()
    out = vec.step_slots([0], [script[0]])[0]
    expected = ref.step(script[0])
    assert out[0] == expected[0] and out[1:4] == expected[1:4]
    # the ended slot repeats its end (reward 0) until the next step() resets it, as after its own final step
    with pytest.warns(UserWarning, match="after the episode ended"):
        again = vec.step_slots([1], ["anything"])[1]
    assert again[1:4] == (0.0, True, False)
    obs, rewards, terms, truncs, _ = vec.step([script[1], "ignored"])
    assert not terms[1] and not truncs[1] and rewards[1] == 0.0
    assert not vec.envs[1].episode.done and obs[1] == vec.envs[1].observation()
    assert len(obs[1]) < len(ended.unwrapped.observation())  # a fresh conversation
    vec.close()


@pytest.mark.parametrize("processes", [1, 2])
def test_reset_slots_resets_only_the_given_sub_envs_as_single_envs_do(processes):
    from tau2_gym.envs.vector import Tau2VectorEnv
    from tau2_gym.players.users.scripted import OracleUser

    vec = Tau2VectorEnv(4, domain="airline", user=OracleUser(), processes=processes)
    with pytest.raises(RuntimeError, match="reset_slots"):
        vec.step_slots([0], ["Hello"])
    out = vec.reset_slots([3, 1], seeds=[5, None], options=[None, {"task_id": "7"}])
    for i, seed, options in ((3, 5, None), (1, None, {"task_id": "7"})):
        single = gym.make("tau2/airline-v0", user=OracleUser())
        obs, info = single.reset(seed=seed, options=options)
        assert out[i][0] == obs and out[i][1]["task_id"] == info["task_id"]
    assert list(out) == [3, 1]  # in the order asked
    env = _start("tau2/airline-v0", "7", user=OracleUser())
    script = _plan(env)
    stepped = vec.step_slots([1], [script[0]])[1]  # no reset() needed first; slots 0 and 2 never started
    assert stepped[:4] == env.step(script[0])[:4]
    with pytest.raises(ValueError, match="indices repeat"):
        vec.reset_slots([2, 2])
    with pytest.raises(ValueError, match="2 indices but 1 seeds"):
        vec.reset_slots([0, 2], seeds=[1])
    vec.close()
