"""tau2/mix-v0: draws match the weights (chi-squared), are reproducible from the seed, follow the documented
curriculum rule; components load lazily and share domain data; per-domain metrics from infos (also a vector
env's batched infos)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import tau2_gym  # noqa: F401 - registers the ids
from tau2_gym import get_domain_spec, load_domain
from tau2_gym.envs.mix import Mixture, domain_summary, episode_infos
from tau2_gym.players.agents.scripted import CLOSING, GiveUpAgent, OracleAgent

WEIGHTS = {"airline": 0.5, "retail": 0.3, "telecom": 0.2}
# chi-squared test: reject "the draws follow p" when the p-value is below ALPHA. With a fixed seed the outcome is
# deterministic; ALPHA is small so a correct sampler passes with any seed but for 1 in 1000.
ALPHA = 1e-3


def chi2_sf(x: float, df: int) -> float:
    """Upper-tail probability of the chi-squared distribution for an even ``df`` (exact; scipy is not a
    dependency): P(X > x) = exp(-x/2) * sum_{i<df/2} (x/2)^i / i!."""
    assert df % 2 == 0 and df > 0, "use an odd number of categories"
    term, total = 1.0, 1.0
    for i in range(1, df // 2):
        term *= (x / 2) / i
        total += term
    return math.exp(-x / 2) * total


def chi2_pvalue(counts: list[int], probs: list[float]) -> float:
    """Pearson's goodness-of-fit statistic for ``counts`` against ``probs``, and its p-value."""
    n = sum(counts)
    x = sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probs))
    return chi2_sf(x, len(counts) - 1)


def test_chi2_helper_agrees_with_table_critical_values():
    assert math.isclose(chi2_sf(13.8155, 2), 0.001, rel_tol=1e-4)
    assert math.isclose(chi2_sf(9.4877, 4), 0.05, rel_tol=1e-4)
    assert math.isclose(chi2_sf(18.4668, 4), 0.001, rel_tol=1e-4)
    assert chi2_pvalue([50, 30, 20], [0.5, 0.3, 0.2]) == 1.0


def mix(**kw):
    return gym.make("tau2/mix-v0", **{"domains": WEIGHTS, "judge": "pass", **kw})


# ------------------------------------------------------------------------------------------ draws


def test_env_draws_match_the_weights_and_a_wrong_hypothesis_is_rejected():
    env = mix()
    env.reset(seed=2024)
    names = list(WEIGHTS)
    counts = dict.fromkeys(names, 0)
    for _ in range(900):
        _, info = env.reset()
        counts[info["domain"]] += 1
        assert info["mix_component"] == info["domain"] and info["split"] == "base"
    c = [counts[k] for k in names]
    assert chi2_pvalue(c, [WEIGHTS[k] for k in names]) > ALPHA
    assert chi2_pvalue(c, [1 / 3, 1 / 3, 1 / 3]) < 1e-6  # the test has power: uniform draws would be caught


def test_draws_and_tasks_are_reproducible_from_the_seed():
    def sequence(seed):
        env = mix()
        out = [tuple(env.reset(seed=seed)[1][k] for k in ("domain", "task_id"))]
        out += [tuple(env.reset()[1][k] for k in ("domain", "task_id")) for _ in range(25)]
        return out

    a, b, c = sequence(7), sequence(7), sequence(8)
    assert a == b and a != c
    assert len({d for d, _ in a}) == 3  # all components were drawn


def test_split_applies_to_every_component_and_keys_may_name_their_own_split():
    env = gym.make("tau2/mix-v0", domains={"airline": 1.0, "telecom:small": 1.0}, split="train")
    allowed = {
        "airline": {t.id for t in load_domain("airline").tasks(None, "train")},
        "telecom:small": {t.id for t in load_domain("telecom").tasks(None, "small")},
    }
    env.reset(seed=0)
    seen = set()
    for _ in range(30):
        _, info = env.reset()
        assert info["task_id"] in allowed[info["mix_component"]]
        assert info["split"] == ("small" if info["mix_component"] == "telecom:small" else "train")
        seen.add(info["mix_component"])
    assert seen == set(allowed)


def test_components_are_built_lazily_once_and_share_the_loaded_domain():
    env = gym.make("tau2/mix-v0", domains={"telecom:small": 1, "telecom:train": 1, "retail": 1}, judge="pass")
    u = env.unwrapped
    assert u.envs == {}
    _, info = env.reset(seed=0, options={"domain": "telecom:small"})
    assert list(u.envs) == ["telecom:small"] and info["mix_component"] == "telecom:small"
    first = u.envs["telecom:small"]
    env.reset(options={"domain": "telecom:train"})
    env.reset(options={"domain": "telecom:small"})
    assert u.envs["telecom:small"] is first and set(u.envs) == {"telecom:small", "telecom:train"}
    assert u.envs["telecom:train"].domain is first.domain  # domain data loaded once for both splits
    _, info = env.reset(options={"domain": "retail", "task_id": "5"})
    assert (info["domain"], info["task_id"]) == ("retail", "5")


def test_episodes_are_the_component_envs_episodes():
    env = mix()
    obs, info = env.reset(seed=3)
    agent = OracleAgent()
    agent.reset(info["task"], info)
    ref = gym.make(f"tau2/{info['domain']}-v0", judge="pass")
    u = env.unwrapped
    ref_obs, ref_info = ref.reset(options={"task_id": info["task_id"]})
    assert obs == ref_obs and info["tools"] == ref_info["tools"]
    names = {t["function"]["name"] for t in info["tools"]}
    assert u.action_space.sample()["tool_calls"][0]["function"]["name"] in names  # the running domain's tools
    while True:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        if term or trunc:
            break
    assert reward == info["reward_info"]["reward"] == 1.0 and info["termination_reason"] == "user_stop"
    assert u.mixture.episodes[info["domain"]] == 1 and list(u.mixture.history[info["domain"]]) == [1.0]


def test_gymnasium_env_checker_passes():
    check_env(mix().unwrapped, skip_render_check=True)


# ------------------------------------------------------------------------------------------ curriculum


def test_success_curriculum_follows_the_documented_rule():
    m = Mixture(WEIGHTS, curriculum="success", window=4, floor=0.1)
    assert np.allclose(m.probabilities(), [0.5, 0.3, 0.2])  # no finished episode yet: the base weights
    for r in (0.0, 0.0, 1.0, 1.0, 1.0, 1.0):  # only the last `window` = 4 count: airline at 100%
        m.record("airline", r)
    for r in (1.0, 0.0):
        m.record("retail", r)
    s = {"airline": 1.0, "retail": 0.5, "telecom": 0.0}
    raw = [WEIGHTS[k] * (0.1 + 1 - s[k]) for k in WEIGHTS]
    expected = [w / sum(raw) for w in raw]
    assert np.allclose(m.probabilities(), expected)
    assert m.state()["airline"]["recent_success"] == 1.0 and m.state()["telecom"]["recent_success"] is None
    rng = np.random.default_rng(0)
    draws = [m.draw(rng).key for _ in range(3000)]
    counts = [draws.count(k) for k in WEIGHTS]
    assert chi2_pvalue(counts, expected) > ALPHA
    assert chi2_pvalue(counts, [0.5, 0.3, 0.2]) < 1e-6  # and not the base weights any more
    # every component mastered with floor 0: back to the base weights instead of dividing by zero
    m0 = Mixture(["airline", "retail", "telecom"], curriculum="success", floor=0.0, window=1)
    for k in m0.keys:
        m0.record(k, 1.0)
    assert np.allclose(m0.probabilities(), [1 / 3] * 3)


def test_curriculum_reweights_from_the_envs_own_episodes():
    """Mock's oracle succeeds, a give-up agent fails airline: airline's share rises once both have finished."""
    env = gym.make("tau2/mix-v0", domains={"mock": 0.5, "airline": 0.5}, curriculum="success", judge="pass")
    m = env.unwrapped.mixture
    kit = get_domain_spec("airline").agent_toolkit
    writes = next(
        t.id
        for t in load_domain("airline").tasks(None, "base")  # a task doing nothing fails
        if any(kit.mutates_state(a.name) for a in t.evaluation_criteria.actions or [])
    )
    for key, agent in (("mock", OracleAgent()), ("airline", GiveUpAgent())):
        obs, info = env.reset(seed=1, options={"domain": key, "task_id": "create_task_1" if key == "mock" else writes})
        agent.reset(info["task"], info)
        while True:
            obs, reward, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
        with pytest.warns(UserWarning, match="after the episode ended"):
            env.step("after the end")  # repeated final transition: not recorded twice
    assert dict(m.episodes) == {"mock": 1, "airline": 1}
    assert list(m.history["mock"]) == [1.0] and list(m.history["airline"]) == [0.0]
    p = dict(zip(m.keys, m.probabilities()))
    assert math.isclose(p["airline"], 1.1 / 1.2) and math.isclose(p["mock"], 0.1 / 1.2)


def test_callable_curriculum_and_shared_mixture_across_a_vector_env():
    seen = {}

    def favour_failures(base, history):
        seen.update(history)
        return {k: base[k] * (1 + sum(1 for r in h if r < 1)) for k, h in history.items()}

    m = Mixture({"mock": 1.0, "airline": 1.0, "retail": 2.0}, curriculum=favour_failures)
    m.record("mock", 0.0)
    m.record("mock", 0.0)
    assert np.allclose(m.probabilities(), [3 / 6, 1 / 6, 2 / 6]) and seen["mock"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="unusable weights"):
        Mixture(["mock"], curriculum=lambda b, h: {"mock": -1.0}).probabilities()
    vec = gym.make_vec("tau2/mix-v0", num_envs=2, mixture=m)
    assert type(vec).__name__ == "SyncVectorEnv"
    envs = [e.unwrapped for e in vec.envs]
    assert envs[0].mixture is envs[1].mixture is m
    _, info = vec.reset(seed=0)
    assert set(info["domain"]) <= {"mock", "airline", "retail"}
    vec.close()


# ------------------------------------------------------------------------------------------ metrics


def test_domain_summary_from_episode_infos():
    env = gym.make("tau2/mix-v0", domains=["mock", "airline"], judge="pass")
    infos, rewards = [], {"mock": [], "airline": []}
    env.reset(seed=0)
    for i in range(8):
        obs, info = env.reset()
        agent = OracleAgent() if i % 2 else GiveUpAgent()
        agent.reset(info["task"], info)
        while True:
            obs, reward, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
        infos.append(info)
        rewards[info["domain"]].append(reward)
    out = domain_summary(infos)
    assert list(out) == sorted(k for k in rewards if rewards[k]) + ["all"]
    for d, rs in rewards.items():
        if rs:
            scored = [r for r, i in zip(rs, [i for i in infos if i["domain"] == d]) if i["reward_info"] is not None]
            assert out[d]["episodes"] == len(rs) and out[d]["scored"] == len(scored)  # failed evaluations: unscored
            assert math.isclose(out[d]["mean_reward"], sum(scored) / len(scored))
            assert out[d]["success_rate"] == sum(1 for r in scored if r == 1.0) / len(scored)
    everything = [r for i in infos if i["reward_info"] is not None for r in [i["reward_info"]["reward"]]]
    assert out["all"]["episodes"] == 8 and math.isclose(out["all"]["mean_reward"], sum(everything) / len(everything))
    assert 0 < out["all"]["mean_reward"] < 1  # both outcomes occurred
    assert math.isclose(
        domain_summary(infos, rewards=[i["reward_info"]["reward"] if i["reward_info"] else 0.0 for i in infos])["all"][
            "mean_reward"
        ],
        sum(everything) / 8,
    )  # explicit rewards: every episode counts
    assert sum(out["all"]["termination_reasons"].values()) == 8
    with pytest.raises(ValueError, match="rewards for"):
        domain_summary(infos, rewards=[1.0])
    assert domain_summary(infos, by="mix_component") == out  # unsplit keys: components are the domains


def test_domain_summary_reads_a_vector_envs_batched_final_infos():
    vec = gym.make_vec("tau2/mix-v0", num_envs=3, domains=["mock", "airline"])
    _, info = vec.reset(seed=4)
    domains = list(info["domain"])
    _, reward, term, trunc, info = vec.step([{"role": "assistant", "content": CLOSING}] * 3)  # oracle user stops
    ended = episode_infos(info)
    assert all(term | trunc) and len(ended) == 3
    assert [e["domain"] for e in ended] == domains
    out = domain_summary(info)
    assert out["all"]["episodes"] == 3 and math.isclose(out["all"]["mean_reward"], float(np.mean(reward)))
    vec.close()


# ------------------------------------------------------------------------------------------ arguments


def test_bad_mixtures_fail_early_with_clear_errors():
    with pytest.raises(ValueError, match="unknown domain"):
        gym.make("tau2/mix-v0", domains=["airline", "nowhere"])
    with pytest.raises(ValueError, match="weights must be"):
        Mixture({"airline": -1.0, "retail": 1.0})
    with pytest.raises(ValueError, match="weights must be"):
        Mixture({"airline": 0.0})
    with pytest.raises(ValueError, match="duplicate"):
        Mixture(["airline", "airline"])
    with pytest.raises(ValueError, match="curriculum"):
        Mixture(["airline"], curriculum="hardest")
    with pytest.raises(TypeError, match="split"):
        gym.make("tau2/mix-v0", domains=["airline"], task_split="train")
    with pytest.raises(ValueError, match="not mixture components"):
        gym.make("tau2/mix-v0", domains=["airline"], domain_kwargs={"retail": {}})
    with pytest.raises(TypeError, match="unknown tau2 env argument"):  # at construction, not at a first draw
        gym.make("tau2/mix-v0", domains=["airline", "retail"], domain_kwargs={"retail": {"max_step": 3}})
    with pytest.raises(ValueError, match="obs_format"):
        gym.make("tau2/mix-v0", domains=["airline"], obs_format="tokens")
    with pytest.raises(KeyError, match="not a component"):
        mix().reset(options={"domain": "mock"})


def test_default_mixture_is_every_registered_domain_with_equal_weights():
    from tau2_gym.core.domain import domain_names

    m = gym.make("tau2/mix-v0").unwrapped.mixture
    assert m.keys == domain_names() and np.allclose(m.probabilities(), 1 / len(domain_names()))


def test_user_role_mixes_customer_envs():
    env = gym.make("tau2/mix-v0", domains=["mock", "telecom"], role="user")
    _, info = env.reset(seed=0)
    assert info["role"] == "user" and type(env.unwrapped.active).__name__ == "UserEnv"
    obs, *_ = env.step("Hello, I need help.")
    assert obs[0]["role"] == "system" and obs[-1]["role"] == "user"  # the agent's answer, role-flipped


def test_the_curriculum_records_the_task_reward_not_a_shaped_one():
    from tau2_gym.players.agents.scripted import SkipLastActionAgent

    env = gym.make("tau2/mix-v0", domains=["airline"], reward_mode="partial", curriculum="success")
    m = env.unwrapped.mixture
    shaped = 0
    for i in range(6):
        obs, info = env.reset(seed=i, options={"task_index": i})
        agent = SkipLastActionAgent()
        agent.reset(info["task"], info)
        while True:
            obs, reward, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
        assert m.history["airline"][-1] == info["tau2_reward"]
        shaped += reward != info["tau2_reward"]
    assert shaped  # partial credit differed from the task reward somewhere
