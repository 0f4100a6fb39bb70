"""GRPO groups share a user seed (``make_rollout_func(group_seed=True)``, the default): the rollouts of one task in
one call get one reset seed -- so one user-simulator seed, the same customer -- and different tasks and calls
different ones; deterministic from the base seed; ``group_seed=False`` keeps a distinct seed per episode.

The end-to-end test runs TRL's GRPOTrainer (tiny random model) against an LLM user on the local OpenAI stub whose
opening message depends on the seed it is sent, as a sampling user's would."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from types import SimpleNamespace

import pytest

from tau2_gym.training.trl import Tau2Rollout, make_rollout_func

pytestmark = pytest.mark.slow  # TRL rollouts on a tiny model

REFS = [("mock", "create_task_1"), ("mock", "create_task_1"), ("mock", "update_task_1"), ("mock", "update_task_1")]


def test_a_group_shares_one_seed_and_tasks_and_calls_differ():
    rollout = Tau2Rollout(seed=7)
    first = rollout.episode_seeds(REFS)
    assert first[0] == first[1] and first[2] == first[3] and first[0] != first[2]
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in first)
    second = rollout.episode_seeds(REFS)  # the next generation: the customer varies over training
    assert second[0] == second[1] and set(second).isdisjoint(first)
    # the same task id in another domain is another task
    other = Tau2Rollout(seed=7).episode_seeds([("mock", "create_task_1"), ("retail", "create_task_1")])
    assert other[0] == first[0] != other[1]


def test_group_seeds_are_deterministic_from_the_base_seed_and_step():
    a, b = Tau2Rollout(seed=7), Tau2Rollout(seed=7)
    assert [a.episode_seeds(REFS) for _ in range(3)] == [b.episode_seeds(REFS) for _ in range(3)]
    assert Tau2Rollout(seed=8).episode_seeds(REFS) != Tau2Rollout(seed=7).episode_seeds(REFS)
    # without a seed of its own: the trainer's args.seed (TRL's GRPOConfig.seed); a resumed run's step counts
    trainer = SimpleNamespace(args=SimpleNamespace(seed=7), state=SimpleNamespace(global_step=0))
    assert Tau2Rollout().episode_seeds(REFS, trainer) == Tau2Rollout(seed=7).episode_seeds(REFS, trainer)
    resumed = SimpleNamespace(args=SimpleNamespace(seed=7), state=SimpleNamespace(global_step=40))
    assert Tau2Rollout().episode_seeds(REFS, resumed) != Tau2Rollout().episode_seeds(REFS, trainer)


def test_without_group_seed_every_episode_gets_its_own_seed_as_before():
    rollout = make_rollout_func(seed=7, group_seed=False)
    assert rollout.episode_seeds(REFS) == [7, 8, 9, 10]
    assert rollout.episode_seeds(REFS) == [11, 12, 13, 14]
    assert make_rollout_func(group_seed=False).episode_seeds(REFS) == [None] * 4  # the envs' own RNGs


def _opening(body, n):
    """A user model whose opening depends on the request's seed (a sampling user); it stops at its next turn."""
    if len(body["messages"]) <= 2:  # system prompt + the agent's greeting
        return f"Hello, I need help with a task (my seed mod 1000 is {body.get('seed', 0) % 1000})."
    return "###STOP###"


def _group_run(group_seed: bool):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("trl")
    pytest.importorskip("openai")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import copy

    from hfutil import set_threads, tiny
    from openai_stub import OpenAIStub
    from trl import GRPOConfig, GRPOTrainer

    from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator
    from tau2_gym.training.trl import build_dataset, tau2_reward

    set_threads()
    model, tok = tiny()
    ds = build_dataset("mock", task_ids=[t for _, t in REFS[::2]])
    with OpenAIStub(_opening) as srv, tempfile.TemporaryDirectory() as tmp:
        user = OpenAIUserSimulator(
            OpenAIUserConfig(model="stub-model", base_url=srv.base_url, api_key="x", cache="off", max_retries=0)
        )
        rollout = make_rollout_func(env_kwargs={"user": user}, max_new_tokens=8, max_turns=1, group_seed=group_seed)
        args = GRPOConfig(
            output_dir=tmp,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=64,
            max_steps=1,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            bf16=False,
            seed=0,
            activation_checkpointing=False,
            dataloader_num_workers=0,
            disable_tqdm=True,
        )
        trainer = GRPOTrainer(
            model=copy.deepcopy(model),
            reward_funcs=[tau2_reward],
            args=args,
            train_dataset=ds,
            processing_class=tok,
            rollout_func=rollout,
        )
        prompts = [ds[i]["prompt"] for i in (0, 0, 1, 1)]  # what TRL's RepeatSampler hands over
        trajectories = rollout.run(prompts, trainer)
        openings = [next(m["content"] for m in t.messages if m["role"] == "user") for t in trajectories]
        user_seeds = [r["seed"] for r in srv.requests if len(r["messages"]) <= 2]
        user.close()
    return rollout.last_seeds, openings, user_seeds


def test_a_grpo_group_meets_the_same_customer():
    seeds, openings, user_seeds = _group_run(group_seed=True)
    assert seeds[0] == seeds[1] != seeds[2] == seeds[3]
    assert openings[0] == openings[1] and openings[2] == openings[3]  # the same first user reply in a group
    assert sorted(Counter(user_seeds).values()) == [2, 2]  # the seed reached the user model, one per group
    _, off_openings, off_seeds = _group_run(group_seed=False)
    assert len(set(off_seeds)) == 4 and off_openings[0] != off_openings[1]  # as before: each its own customer


def test_the_rollout_takes_the_episode_settings_object_and_says_its_settings():
    from tau2_gym.envs.config import Tau2EnvConfig
    from tau2_gym.training.trl import Tau2RolloutConfig, make_rollout_func

    rollout = make_rollout_func(env_kwargs=Tau2EnvConfig(domain="airline", max_steps=30, reward_mode="strict"), seed=3)
    kwargs = rollout.config.env_kwargs
    assert kwargs["max_steps"] == 30 and kwargs["reward_mode"] == "strict" and "domain" not in kwargs  # per prompt
    assert "max_new_tokens = 512" in rollout.config.describe()
    with pytest.raises(TypeError, match="not both"):
        make_rollout_func(Tau2RolloutConfig(), seed=3)
    with pytest.raises(ValueError, match="sample_mode"):
        Tau2RolloutConfig(sample_mode="sometimes")
