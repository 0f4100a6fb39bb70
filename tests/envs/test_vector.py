"""The vector env: equals Gymnasium's sync/async wrappers of the single env, autoreset modes, batched user turns."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import gymnasium as gym
import numpy as np
import pytest
from datautil import REPO
from gymnasium.vector import AutoresetMode

import tau2_gym  # noqa: F401 - registers the ids
from tau2_gym.envs.config import Tau2EnvConfig
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.envs.vector import KeepRecordsWhole, SharedTuple, Tau2VectorEnv
from tau2_gym.players.agents.scripted import (
    GiveUpAgent,
    HallucinatingAgent,
    MalformedAgent,
    OracleAgent,
    SkipLastActionAgent,
    StallingAgent,
)
from tau2_gym.players.users.base import UserSimulator, UserSimulatorError
from tau2_gym.players.users.scripted import OracleUser

AGENTS = (OracleAgent, SkipLastActionAgent, HallucinatingAgent, StallingAgent, MalformedAgent, GiveUpAgent)
RECORD_KEYS = {"reward_info", "simulation_run", "final_info", "final_obs", "task"}


def env_info(infos: dict, i: int) -> dict:
    """Sub-env ``i``'s flat info entries out of a batched info dict."""
    return {
        k: v[i] for k, v in infos.items() if not k.startswith("_") and not isinstance(v, dict) and infos[f"_{k}"][i]
    }


def canon(messages: list[dict]) -> list[tuple]:
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        out.append(
            (
                m["role"],
                m.get("content"),
                m.get("id"),
                m.get("error"),
                None if calls is None else [(c["id"], c["name"], c["arguments"], c["requestor"]) for c in calls],
            )
        )
    return out


def drive(vec, num_steps: int, seed: int, agents=AGENTS, sample_runs: bool = True) -> dict:
    """Run scripted agents (agent class = sub-env index mod len(agents)) through any NEXT_STEP vector env."""
    n = vec.num_envs
    obs, infos = vec.reset(seed=seed)
    log: dict = {"obs": [list(obs)], "rewards": [], "terms": [], "truncs": [], "episodes": [], "info_keys": []}
    current: list = [None] * n

    def fresh(i: int, infos: dict) -> None:
        info = env_info(infos, i)
        agent = agents[i % len(agents)]()
        agent.reset(info["task"], info)
        current[i] = agent

    for i in range(n):
        fresh(i, infos)
    prev = np.zeros(n, dtype=bool)
    for _ in range(num_steps):
        actions = [current[i].act() for i in range(n)]
        obs, rewards, terms, truncs, infos = vec.step(actions)
        log["obs"].append(list(obs))
        log["rewards"].append(rewards.tolist())
        log["terms"].append(terms.tolist())
        log["truncs"].append(truncs.tolist())
        log["info_keys"].append(sorted(k for k in infos if k.strip("_") not in RECORD_KEYS))
        runs = vec.call("simulation_run") if sample_runs and (terms | truncs).any() else [None] * n
        for i in range(n):
            if prev[i]:
                fresh(i, infos)
            elif terms[i] or truncs[i]:
                run = runs[i]
                log["episodes"].append(
                    (
                        i,
                        run["task_id"],
                        float(rewards[i]),
                        bool(terms[i]),
                        bool(truncs[i]),
                        run["termination_reason"],
                        canon(run["messages"]),
                    )
                )
        prev = terms | truncs
    return log


@pytest.fixture(scope="module")
def ours_log():
    vec = gym.make_vec("tau2/airline-v0", num_envs=6, max_steps=16, max_errors=4)
    try:
        return drive(vec, 30, seed=11)
    finally:
        vec.close()


def test_make_vec_returns_the_vector_env_with_shared_spaces():
    vec = gym.make_vec("tau2/airline-v0", num_envs=3)
    assert isinstance(vec.unwrapped, Tau2VectorEnv) and vec.num_envs == 3
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert isinstance(vec.action_space, SharedTuple) and len(vec.action_space) == 3
    assert all(s is vec.single_action_space for s in vec.action_space.spaces)
    obs, infos = vec.reset(seed=0)
    assert isinstance(obs, list) and len(obs) == 3 and vec.observation_space.contains(obs)
    assert list(infos["task_id"]) == [t.id for t in infos["task"]] and infos["_task_id"].all()
    assert vec.action_space.contains(vec.action_space.sample())
    vec.close()


def test_same_trajectories_rewards_and_infos_as_gymnasium_sync_vector_env(ours_log):
    sync = gym.make_vec("tau2/airline-v0", num_envs=6, vectorization_mode="sync", max_steps=16, max_errors=4)
    theirs = drive(sync, 30, seed=11)
    sync.close()
    assert len(ours_log["episodes"]) >= 12  # every flaw and the oracle finished at least once
    reasons = {e[5] for e in ours_log["episodes"]}
    assert {"user_stop", "too_many_errors", "max_steps", "agent_error"} <= reasons
    assert {e[2] for e in ours_log["episodes"]} == {0.0, 1.0}
    assert ours_log["episodes"] == theirs["episodes"]
    for key in ("rewards", "terms", "truncs", "obs", "info_keys"):
        assert ours_log[key] == theirs[key], key


def test_same_trajectories_as_gymnasium_async_vector_env(ours_log):
    vec = gym.make_vec(
        "tau2/airline-v0",
        num_envs=3,
        vectorization_mode="async",
        max_steps=16,
        max_errors=4,
        vector_kwargs={"shared_memory": False},
    )
    try:
        theirs = drive(vec, 30, seed=11)
    finally:
        vec.close()
    mine = gym.make_vec("tau2/airline-v0", num_envs=3, max_steps=16, max_errors=4)
    ours = drive(mine, 30, seed=11)
    mine.close()
    assert ours["episodes"] and ours["episodes"] == theirs["episodes"]
    assert ours["rewards"] == theirs["rewards"] and ours["obs"] == theirs["obs"]


def test_seeding_is_per_sub_env_and_reproducible():
    a = gym.make_vec("tau2/airline-v0", num_envs=4)
    b = gym.make_vec("tau2/airline-v0", num_envs=4)
    _, ia = a.reset(seed=[5, 6, 7, 8])
    _, ib = b.reset(seed=5)  # int seed -> seed + i, as SyncVectorEnv
    assert list(ia["task_id"]) == list(ib["task_id"])
    singles = []
    for s in (5, 6, 7, 8):
        env = gym.make("tau2/airline-v0")
        singles.append(env.reset(seed=s)[1]["task_id"])
    assert list(ia["task_id"]) == singles
    assert a.unwrapped.np_random_seed == (5, 6, 7, 8)


# ------------------------------------------------------------------------------------ autoreset modes


def test_next_step_autoreset_ignores_the_action_and_returns_the_reset_observation():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, max_steps=16, max_errors=4)
    obs, infos = vec.reset(seed=3)
    agents = [GiveUpAgent(), StallingAgent()]
    for i, a in enumerate(agents):
        a.reset(infos["task"][i], env_info(infos, i))
    obs, rew, term, trunc, infos = vec.step([a.act() for a in agents])
    assert term[0] and not trunc[0] and infos["termination_reason"][0] == "user_stop"
    assert infos["_simulation_run"][0] and not infos["_simulation_run"][1]
    obs, rew, term, trunc, infos = vec.step(["ignored: this env is being reset", agents[1].act()])
    assert rew[0] == 0.0 and not term[0] and not trunc[0]
    assert [m["role"] for m in obs[0]] == ["system", "assistant", "user"]  # fresh episode, user spoke first
    assert "termination_reason" not in infos and infos["step_count"][0] == 1
    assert vec.unwrapped.envs[0].loop.agent_turns == 0


def test_same_step_autoreset_matches_gymnasium_sync_and_reports_final_obs_and_info():
    def run(vec):
        obs, infos = vec.reset(seed=4)
        agents = [cls() for cls in (GiveUpAgent, OracleAgent, HallucinatingAgent)]
        for i, a in enumerate(agents):
            a.reset(infos["task"][i], env_info(infos, i))
        out = []
        for _ in range(14):
            obs, rew, term, trunc, infos = vec.step([a.act() for a in agents])
            finals = []
            for i in range(3):
                if term[i] or trunc[i]:
                    assert infos["_final_obs"][i] and infos["_final_info"][i]
                    finals.append((i, infos["final_obs"][i], infos["final_info"]["termination_reason"][i]))
                    assert obs[i][-1]["role"] == "user" and len(obs[i]) == 3  # already the next episode
                    agents[i] = type(agents[i])()
                    agents[i].reset(infos["task"][i], env_info(infos, i))
            out.append((list(obs), rew.tolist(), term.tolist(), trunc.tolist(), finals))
        return out

    ours = gym.make_vec("tau2/airline-v0", num_envs=3, max_steps=16, autoreset_mode=AutoresetMode.SAME_STEP)
    assert ours.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    sync = gym.make_vec(
        "tau2/airline-v0",
        num_envs=3,
        max_steps=16,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    a, b = run(ours), run(sync)
    assert sum(len(x[4]) for x in a) >= 3
    assert a == b


def test_disabled_autoreset_refuses_to_step_a_finished_env_until_reset_with_a_mask():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, autoreset_mode="Disabled")
    _, infos = vec.reset(seed=1)
    agents = [GiveUpAgent(), OracleAgent()]
    for i, a in enumerate(agents):
        a.reset(infos["task"][i], env_info(infos, i))
    _, _, term, _, _ = vec.step([a.act() for a in agents])
    assert term[0] and not term[1]
    with pytest.raises(RuntimeError, match="reset_mask"):
        vec.step([a.act() for a in agents])
    obs, infos = vec.reset(options={"reset_mask": np.array([True, False])})
    assert infos["_task_id"].tolist() == [True, False]
    agents[0] = GiveUpAgent()
    agents[0].reset(infos["task"][0], env_info(infos, 0))
    vec.step([a.act() for a in agents])


# ------------------------------------------------------------------------------------ batching and failures


class CountingUser(UserSimulator):
    """The oracle user, recording the size of every batch it is asked to answer."""

    def __init__(self, fail_on: frozenset = frozenset()) -> None:
        self.inner = OracleUser()
        self.batches: list[int] = []
        self.single_calls = 0
        self.fail_on = fail_on

    def generate(self, request):
        self.single_calls += 1
        return self.inner.generate(request)

    def generate_batch(self, requests):
        self.batches.append(len(requests))
        return [
            UserSimulatorError("injected") if r.task.id in self.fail_on else self.inner.generate(r) for r in requests
        ]


def test_user_turns_of_all_episodes_are_answered_as_one_batch_per_round():
    user = CountingUser()
    vec = gym.make_vec("tau2/airline-v0", num_envs=8, user=user)
    obs, infos = vec.reset(seed=0)
    assert user.batches == [8] and user.single_calls == 0
    vec.step([{"role": "assistant", "content": "How can I help?"}] * 8)
    assert user.batches == [8, 8]
    assert vec.unwrapped.user_batches == 2 and vec.unwrapped.user_requests == 16


def test_a_failing_user_ends_only_its_episodes_as_user_error():
    vec2 = gym.make_vec("tau2/airline-v0", num_envs=2, user=CountingUser(fail_on=frozenset({"1"})))
    obs, infos = vec2.reset(options=[{"task_id": "0"}, {"task_id": "1"}])
    assert infos["task_id"].tolist() == ["0", "1"]
    assert not infos["_episode_over"][0] and infos["episode_over"][1]
    assert infos["termination_reason"][1] == "user_error"
    _, rew, term, trunc, infos = vec2.step(["hello", "ignored"])
    assert trunc[1] and not term[1] and rew[1] == 0.0 and "injected" in infos["error"][1]
    assert term[0] and infos["termination_reason"][0] == "user_stop"  # the oracle user answered it normally


class BrokenBatchUser(UserSimulator):
    def generate(self, request):
        raise AssertionError("not used")

    def generate_batch(self, requests):
        raise ConnectionError("the whole batch failed")


def test_a_batch_that_raises_ends_those_episodes_and_never_escapes_step():
    vec = gym.make_vec("tau2/airline-v0", num_envs=3, user=BrokenBatchUser())
    obs, infos = vec.reset(seed=0)
    assert infos["episode_over"].all() and set(infos["termination_reason"]) == {"user_error"}
    _, rew, term, trunc, infos = vec.step(["a", "b", "c"])
    assert trunc.all() and "ConnectionError" in infos["error"][0]


def test_solo_vector_env_has_no_user_and_runs_gold_tool_calls():
    vec = gym.make_vec("tau2/mock-solo-v0", num_envs=3, task_ids=["create_task_1", "update_task_with_message_history"])
    obs, infos = vec.reset(seed=0)
    assert vec.unwrapped.user is None
    agents = [OracleAgent() for _ in range(3)]
    for i, a in enumerate(agents):
        a.reset(infos["task"][i], env_info(infos, i))
    rewards = [None] * 3
    for _ in range(10):
        _, rew, term, trunc, infos = vec.step([a.act() for a in agents])
        for i in range(3):
            if (term[i] or trunc[i]) and rewards[i] is None:
                rewards[i] = rew[i]
                assert infos["termination_reason"][i] == "agent_stop"
        if all(r is not None for r in rewards):
            break
    assert rewards == [1.0, 1.0, 1.0]


def test_infos_keep_reward_records_whole_and_batch_with_gymnasium_wrappers():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2)
    vec = gym.wrappers.vector.RecordEpisodeStatistics(vec)
    _, infos = vec.reset(seed=2)
    agents = [GiveUpAgent(), OracleAgent()]
    for i, a in enumerate(agents):
        a.reset(infos["task"][i], env_info(infos, i))
    _, rew, term, trunc, infos = vec.step([a.act() for a in agents])
    assert term[0]
    assert isinstance(infos["reward_info"][0], Mapping) and infos["reward_info"][0]["reward"] == rew[0]
    assert infos["simulation_run"][0]["task_id"] == infos["task_id"][0]
    assert infos["_episode"][0] and infos["episode"]["l"][0] == 1


def test_constructing_from_a_config_and_bad_arguments():
    vec = Tau2VectorEnv(2, config=Tau2EnvConfig(domain="mock", max_steps=7))
    assert vec.config.max_steps == 7 and vec.domain_name == "mock"
    with pytest.raises(ValueError, match="domain"):
        Tau2VectorEnv(2)
    with pytest.raises(ValueError, match="max_steps"):
        Tau2VectorEnv(2, domain="mock", max_episode_steps=5)
    vec.reset(seed=0)
    _, rew, term, trunc, infos = vec.step(["only one"])  # a batch of the wrong shape: agent_error everywhere
    assert list(term) == [True, True] and not trunc.any() and not rew.any()
    assert all(r == "agent_error" for r in infos["termination_reason"])
    assert all("one action per sub-env (a sequence of 2)" in e for e in infos["error"])


@pytest.mark.parametrize("action", [3, None, b"x", 2.5])
def test_an_unreadable_vector_action_gives_each_sub_env_the_single_envs_transition(action):
    """``vec.step(3)`` is not a TypeError: each sub-env gets the transition the single env gives for ``3``."""
    vec = Tau2VectorEnv(2, domain="mock", user="oracle")
    vec.reset(seed=0)
    _, rew, term, trunc, infos = vec.step(action)
    for i in range(2):
        single = Tau2Env(domain="mock", user="oracle")
        single.reset(seed=i)  # the vector env seeds sub-env i with seed + i
        _, r, t, tr, info = single.step(action)
        assert (rew[i], term[i], trunc[i]) == (r, t, tr)
        assert infos["termination_reason"][i] == info["termination_reason"] == "agent_error"
        assert infos["error"][i] == info["error"]
        assert infos["task_id"][i] == info["task_id"]


def test_the_vector_rollouts_example_runs_offline(tmp_path, capsys):
    import runpy

    example = REPO / "examples" / "vector_rollouts.py"
    module = runpy.run_path(str(example), run_name="vector_rollouts_example")
    module["main"](
        ["--num-envs", "8", "--steps", "6", "--tasks", "3", "--trials", "2", "--output", str(tmp_path / "ex.json")]
    )
    out = capsys.readouterr().out
    assert "== vector env: 8 airline episodes at once" in out and "OracleAgent" in out
    assert "(first run): 6 episodes run, 0 resumed" in out and "(same command again): 0 episodes run, 6 resumed" in out


def test_observations_are_fresh_lists_and_private_dicts_on_request():
    shared = gym.make_vec("tau2/airline-v0", num_envs=2)
    private = gym.make_vec("tau2/airline-v0", num_envs=2, copy_observations=True)
    a0, _ = shared.reset(seed=9)
    b0, _ = private.reset(seed=9)
    assert a0 == b0
    a1 = shared.step(["Could you tell me your user id?"] * 2)[0]
    b1 = private.step(["Could you tell me your user id?"] * 2)[0]
    assert a1 == b1 and a1[0] is not a0[0]
    assert a1[0][1] is a0[0][1]  # shared: the greeting's dict is the same object in both observations
    assert b1[0][1] is not b0[0][1] and b1[0][1] == b0[0][1]
    a1[0].append({"role": "user", "content": "appended by the caller"})
    assert shared.step(["ok"] * 2)[0][0][-1]["content"] != "appended by the caller"


def test_text_observations_are_transcripts():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, obs_format="text")
    obs, _ = vec.reset(seed=0)
    assert all(isinstance(o, str) and o.startswith("assistant: Hi! How can I help you today?") for o in obs)


def test_infos_batch_every_kind_of_value_with_gymnasiums_dtypes():
    """Scalars keep the first value's dtype, strings and lists become object arrays, nested dicts batch
    recursively, reward records stay whole, and every key gets its own mask."""
    rows = [
        {
            "b": True,
            "i": 3,
            "f": 1.5,
            "mixed": 1,
            "s": "x",
            "lst": [1, 2],
            "none": None,
            "np32": np.float32(2.0),
            "arr": np.arange(3),
            "nested": {"a": 1, "b": "y"},
            "reward_info": {"reward": 1.0},
            "obj": object,
        },
        {
            "b": False,
            "i": 4,
            "f": 2.0,
            "mixed": 2.5,
            "s": "y",
            "lst": [],
            "none": 7,
            "np32": np.float32(3.0),
            "arr": np.arange(3) + 1,
            "nested": {"a": 2, "b": "z"},
            "reward_info": None,
            "obj": int,
        },
    ]
    infos = Tau2VectorEnv(3, "mock")._batch_infos(list(enumerate(rows)))  # env 2 reported nothing
    assert infos["b"].dtype == np.bool_ and infos["i"].dtype == np.int64 and infos["mixed"].dtype == np.int64
    assert infos["i"].tolist() == [3, 4, 0] and infos["_i"].tolist() == [True, True, False]
    assert infos["s"].dtype == object and infos["lst"][0] == [1, 2] and infos["nested"]["a"].tolist() == [1, 2, 0]
    assert infos["reward_info"][0] == {"reward": 1.0} and infos["reward_info"][1] is None
    assert infos["arr"].shape == (3, 3) and infos["np32"].dtype == np.float32
    infos["_i"][0] = False
    assert infos["_b"][0], "each key owns its mask"


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.__name__)
def test_one_env_equals_gymnasium_sync_vector_env(agent):
    """With num_envs=1 every step's results and info values equal SyncVectorEnv's over the single env, through
    episode ends and autoresets."""

    def run(vec) -> list:
        obs, infos = vec.reset(seed=5)
        steps = [(list(obs), sorted(infos), env_info(infos, 0).get("task_id"))]
        current = agent()
        current.reset(env_info(infos, 0)["task"], env_info(infos, 0))
        done = False
        for _ in range(40):
            obs, rewards, terms, truncs, infos = vec.step([current.act()])
            assert rewards.dtype == np.float64 and terms.dtype == truncs.dtype == np.bool_ and rewards.shape == (1,)
            flat = {k: v for k, v in env_info(infos, 0).items() if k not in RECORD_KEYS}
            records = {k: infos[k][0] for k in ("reward_info", "simulation_run") if k in infos}
            steps.append(
                (
                    list(obs),
                    rewards.tolist(),
                    terms.tolist(),
                    truncs.tolist(),
                    sorted(infos),
                    flat,
                    {k: v if v is None else dict(v) for k, v in records.items()},
                )
            )
            if done:  # this step was the autoreset: a new episode, a new agent
                current = agent()
                current.reset(env_info(infos, 0)["task"], env_info(infos, 0))
            done = bool(terms[0] or truncs[0])
        return steps

    ours = gym.make_vec("tau2/airline-v0", num_envs=1, max_steps=12, max_errors=3, user="oracle")
    sync = gym.make_vec(
        "tau2/airline-v0",
        num_envs=1,
        vectorization_mode="sync",
        max_steps=12,
        max_errors=3,
        user="oracle",
        wrappers=[KeepRecordsWhole],
    )
    try:
        mine, theirs = run(ours), run(sync)
    finally:
        ours.close()
        sync.close()
    ended = [s for s in mine[1:] if s[2][0] or s[3][0]]
    assert len(ended) >= 2, "the run must cross at least two autoresets"

    def strip_times(steps: list) -> list:  # wall-clock fields differ between two runs
        out = []
        for s in steps:
            if len(s) == 7 and "simulation_run" in s[6]:
                run = s[6]["simulation_run"]
                run = {
                    k: v
                    for k, v in run.items()
                    if k not in ("start_time", "end_time", "duration", "id", "timestamp", "messages")
                }
                s = (*s[:6], {**s[6], "simulation_run": run})
            out.append(s)
        return out

    assert strip_times(mine) == strip_times(theirs)


# ------------------------------------------------------------------------------------ customers awaited concurrently


class OutOfOrderUser(UserSimulator):
    """The oracle user asked through ``agenerate``, its replies coming back in an order unrelated to the sub-envs'
    (a delay drawn from the request), as replies from a server do."""

    def __init__(self, concurrent: bool = True) -> None:
        self.inner = OracleUser()
        self.answers_concurrently = concurrent
        self.awaited = 0

    def generate(self, request):
        return self.inner.generate(request)

    async def agenerate(self, request):
        self.awaited += 1
        await asyncio.sleep((hash((request.episode_id, request.turn)) % 7) * 1e-4)
        return self.inner.generate(request)


def test_a_concurrent_user_is_awaited_per_episode_with_the_single_envs_trajectories():
    """The awaited path (each sub-env a coroutine, replies out of order) gives Gymnasium's SyncVectorEnv's
    episodes over the single env with the same customer, through episode ends and autoresets."""
    user = OutOfOrderUser()
    ours = gym.make_vec("tau2/airline-v0", num_envs=6, max_steps=16, max_errors=4, user=user)
    sync = gym.make_vec(
        "tau2/airline-v0", num_envs=6, vectorization_mode="sync", max_steps=16, max_errors=4, user=OutOfOrderUser()
    )
    try:
        mine, theirs = drive(ours, 30, seed=11), drive(sync, 30, seed=11)
    finally:
        ours.close()
        sync.close()
    assert user.awaited == ours.unwrapped.user_requests > 0
    assert len(mine["episodes"]) >= 12 and mine["episodes"] == theirs["episodes"]
    for key in ("rewards", "terms", "truncs", "obs", "info_keys"):
        assert mine[key] == theirs[key], key


def test_a_concurrent_user_that_fails_ends_only_its_episode():
    class Failing(OutOfOrderUser):
        async def agenerate(self, request):
            if request.task.id == "1":
                raise ConnectionError("server gone")
            return await super().agenerate(request)

    vec = gym.make_vec("tau2/airline-v0", num_envs=2, user=Failing())
    _, infos = vec.reset(options=[{"task_id": "0"}, {"task_id": "1"}])
    assert not infos["_episode_over"][0] and infos["episode_over"][1]
    assert infos["termination_reason"][1] == "user_error"
    _, _, term, trunc, infos = vec.step(["hello", "ignored"])
    assert trunc[1] and "server gone" in infos["error"][1]
    assert term[0] and infos["termination_reason"][0] == "user_stop"
    vec.close()


def test_an_llm_customer_in_a_vector_env_gets_the_single_envs_requests_and_episodes():
    """Over the wire: the vector env's requests (sent on its own event loop) and episodes equal those of single envs
    asking the same stub server one request at a time."""
    from openai_stub import OpenAIStub

    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    def reply(body, n):
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return "###STOP###" if said >= 2 else f"Reply {said} to: {body['messages'][-1]['content']}"

    def play(make) -> tuple[list, list]:
        with OpenAIStub(reply) as server:
            user = OpenAIUserSimulator(model="stub", base_url=server.base_url, api_key_env=None, cache="off")
            assert user.answers_concurrently
            logs = make(user)
            user.close()
            bodies = sorted(json.dumps(b, sort_keys=True) for b in server.requests)
        return logs, bodies

    def vector(user):
        vec = gym.make_vec("tau2/airline-v0", num_envs=3, user=user)
        log = drive(vec, 6, seed=3, agents=(OracleAgent,))
        vec.close()
        return log

    def single(user):
        sync = gym.make_vec("tau2/airline-v0", num_envs=3, vectorization_mode="sync", user=user)
        log = drive(sync, 6, seed=3, agents=(OracleAgent,))
        sync.close()
        return log

    (mine, mine_bodies), (theirs, their_bodies) = play(vector), play(single)
    assert mine["episodes"] and mine["episodes"] == theirs["episodes"] and mine["obs"] == theirs["obs"]
    assert mine_bodies == their_bodies


@pytest.mark.slow
@pytest.mark.parametrize("user,processes", [("oracle", 1), ("awaited", 1), ("awaited", 2)])
def test_1024_sub_envs_equal_gymnasium_sync_vector_env(user, processes):
    """At the field's batch size (1,024 episodes in flight): the same episodes as SyncVectorEnv over single envs,
    with the batched customer and with the awaited one, the sub-envs in this process or in two workers."""
    kwargs = dict(num_envs=1024, max_steps=16, max_errors=4)
    customer = "oracle" if user == "oracle" else OutOfOrderUser()
    ours = gym.make_vec("tau2/airline-v0", user=customer, processes=processes, **kwargs)
    sync = gym.make_vec("tau2/airline-v0", vectorization_mode="sync", user="oracle", **kwargs)
    try:
        mine, theirs = drive(ours, 12, seed=7), drive(sync, 12, seed=7)
    finally:
        ours.close()
        sync.close()
    assert len(mine["episodes"]) >= 1024 and mine["episodes"] == theirs["episodes"]
    for key in ("rewards", "terms", "truncs", "obs", "info_keys"):
        assert mine[key] == theirs[key], key


@pytest.mark.parametrize("user", ["oracle", "awaited"])
def test_a_bad_reset_option_of_one_sub_env_leaves_the_others_reset_and_steppable(user):
    """The caller's error is raised once every other sub-env has finished its reset, on the batched path as on the
    awaited one; the sub-env that did reset steps as a fresh single env does."""
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, user="oracle" if user == "oracle" else OutOfOrderUser())
    single = gym.make("tau2/airline-v0", user="oracle").unwrapped
    try:
        vec.reset(seed=0)
        with pytest.raises(ValueError, match="no-such-task"):
            vec.reset(options=[{"task_id": "0"}, {"task_id": "no-such-task"}])
        obs, _ = single.reset(options={"task_id": "0"})
        assert vec.unwrapped.envs[0].observation() == obs
        (mine,) = vec.unwrapped.step_slots([0], ["Hello"]).values()
        assert mine[0] == single.step("Hello")[0]
    finally:
        vec.close()
