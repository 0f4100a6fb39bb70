"""``Tau2RolloutWorker`` under TRL 1.16's own ``AsyncGRPOTrainer`` on CPU: tau2 episodes played against a local
vLLM-shaped server backed by the tiny model (tests/policy_stub.py), the server's token ids and logprobs trained on,
the trainer's weight sync reaching the served model, the staleness bound, the group advantages."""

from __future__ import annotations

import asyncio
import copy
import itertools
import math
import os
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("trl.experimental.async_grpo")

import gymnasium as gym  # noqa: E402 - after the importorskip guard
from hfutil import oracle_scripts, set_threads, tiny  # noqa: E402 - after the importorskip guard
from policy_stub import PolicyServer, WeightSync, cpu_async_grpo  # noqa: E402 - after the importorskip guard

import tau2_gym  # noqa: E402,F401 - registers the envs
from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.chat import ChatRenderer  # noqa: E402 - after the importorskip guard
from tau2_gym.training.trl.async_worker import (  # noqa: E402 - after the importorskip guard
    GroupSummary,
    Tau2RolloutWorker,
    group_advantages,
    group_seed,
)

pytestmark = pytest.mark.slow  # AsyncGRPOTrainer runs on a tiny model

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TASKS = ["create_task_1", "update_task_1"]


@pytest.fixture(autouse=True)
def _threads():
    set_threads()


def half_oracle(tokenizer):
    """A ``PolicyServer`` script: every other episode opens with the oracle's first action and follows the oracle's
    plan (reward 1.0); the others are sampled from the random model (reward 0.0) -- a group's rewards differ."""
    renderer = ChatRenderer(tokenizer, stop_ids={tokenizer.eos_token_id})
    scripts, base, rewards = oracle_scripts(renderer, lambda: gym.make("tau2/mock-v0", disable_env_checker=True), TASKS)
    assert rewards == {t: 1.0 for t in TASKS}
    counter, lock = itertools.count(), threading.Lock()

    def script(text):
        key = next((k for k in scripts if k in text), None)
        if key is None:
            return None
        plan, turn = scripts[key], text.count("<|im_start|>assistant\n") - base[key]
        if turn == 0:
            with lock:
                return plan[0] if next(counter) % 2 == 0 else None
        return plan[turn] if 0 < turn < len(plan) and plan[turn - 1] in text else None

    return script


def make_worker(server, **settings):
    policy = OpenAIAgentPolicy(
        model="tiny", base_url=server.url + "/v1", temperature=1.0, max_tokens=48, capture_tokens="vllm"
    )
    base = dict(
        domain="mock",
        task_ids=TASKS,
        user="oracle",
        parser="hermes",
        max_steps=12,
        num_generations=2,
        concurrency=4,
        groups_in_flight=2,
        max_retries=0,
        seed=7,
    )
    base.update(settings)
    user = base.pop("user")
    return Tau2RolloutWorker(policy, user, **base)


def test_async_grpo_trains_on_tau2_episodes_with_the_servers_tokens(tmp_path, monkeypatch):
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    cpu_async_grpo(monkeypatch)
    model, tok = tiny()
    model_dir = tmp_path / "tiny"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    with PolicyServer(copy.deepcopy(model), tok, script=half_oracle(tok)) as server:
        worker = make_worker(server, max_staleness=1)
        sync = WeightSync(server)
        args = AsyncGRPOConfig(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
            bf16=False,
            max_steps=3,
            per_device_train_batch_size=4,
            num_generations=2,
            max_staleness=1,
            token_budget=0,  # fixed 4 samples per step (no vLLM to ask for max_model_len)
            learning_rate=1e-3,
            temperature=1.0,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            activation_checkpointing=False,
            disable_tqdm=True,
            heartbeat_stale_after_s=120,
        )
        trainer = AsyncGRPOTrainer(
            model=str(model_dir),
            args=args,
            processing_class=tok,
            train_dataset=worker.train_dataset(),
            rollout_worker=worker,
            weight_transfer=sync,
        )
        trainer.train()

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 3 and all(math.isfinite(h["loss"]) for h in steps)
    # the old log-probs are the server's logprobs of the very tokens the trainer forwards, under the same weights:
    # the first step's policy ratio is 1 (a misaligned or re-tokenized row would make it anything but)
    assert abs(steps[0]["ratio"] - 1.0) < 1e-3 and abs(steps[0]["kl"]) < 1e-3
    assert any(h["grad_norm"] > 0 for h in steps)  # groups with different rewards give advantages
    # the env's rewards reached the trainer's logs, and the worker's own metrics too
    assert all(0.0 <= h["reward"] <= 1.0 for h in steps)
    assert sum(h.get("tau2/episodes_total", 0) for h in trainer.state.log_history) > 0
    rewards = [r for g in worker.recent_groups for r in g.rewards]
    assert 1.0 in rewards and 0.0 in rewards
    # the trainer's weight sync reached the served model: at train begin and after every step
    assert len(sync.sent) == 4 and server.versions == 4 and all(n == sync.sent[0] > 0 for n in sync.sent)
    assert trainer.model_version == 4 and worker.model_version == 4
    # every row of every finished group was queued, dropped as stale or left when the trainer stopped the worker
    stats = worker.stats
    assert stats["samples"] + stats["dropped_stale"] + stats["unqueued_at_stop"] == sum(
        g.samples for g in worker.recent_groups
    )
    assert worker._thread is None
    for g in worker.recent_groups:
        assert g.seed == group_seed(7, g.group_id, "mock", g.task_id) and g.task_id == TASKS[g.group_id % 2]


def test_a_group_older_than_the_staleness_bound_is_dropped_and_counted(monkeypatch):
    model, tok = tiny()
    with PolicyServer(copy.deepcopy(model), tok, script=half_oracle(tok)) as server:
        worker = make_worker(server, max_staleness=1)
        runs = [asyncio.run(worker.runner.run_episode(worker.tasks[0], k, 11)) for k in range(2)]
    samples, summary = worker.score_group(0, 0, "create_task_1", 11, runs)
    assert summary.rewards in ([1.0, 0.0], [0.0, 1.0]) and samples
    assert {s.model_version for s in samples} == {0} and {s.group_id for s in samples} == {0}

    worker.update_model_version(1)  # one version behind: within the bound, queued
    asyncio.run(worker._enqueue(samples, summary))
    assert worker.rollout_buffer.qsize() == len(samples) and not summary.dropped_stale

    worker.update_model_version(2)  # two behind: dropped, counted in samples and in the trainer's metrics
    stale = GroupSummary(1, "create_task_1", 11, 0, summary.rewards, summary.advantages, [], len(samples))
    asyncio.run(worker._enqueue(samples, stale))
    assert worker.rollout_buffer.qsize() == len(samples) and stale.dropped_stale
    assert worker.stats["dropped_stale"] == len(samples)
    pushed = []
    while not worker.metrics_queue.empty():
        pushed.append(worker.metrics_queue.get_nowait())
    assert {"tau2/dropped_stale_total": float(len(samples))} in pushed


def test_rows_are_the_servers_tokens_with_the_env_turns_masked():
    model, tok = tiny()
    with PolicyServer(copy.deepcopy(model), tok, script=half_oracle(tok)) as server:
        worker = make_worker(server)
        run = asyncio.run(worker.runner.run_episode(worker.tasks[0], 0, 3))  # member 0: the oracle's plan
    assert run["reward_info"]["reward"] == 1.0
    replies = [m["raw_data"] for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data")]
    assert len(replies) == 2  # the create_task call, then the closing message
    ((ids, mask, logps),) = worker.episode_rows(run)  # prefix-preserving template: one row
    first, second = replies
    assert ids == second["prompt_token_ids"] + second["completion_token_ids"]
    assert ids[: len(first["prompt_token_ids"])] == first["prompt_token_ids"]
    trained = [i for i, m in zip(ids, mask) if m]
    assert trained == first["completion_token_ids"] + second["completion_token_ids"]
    assert [lp for lp, m in zip(logps, mask) if m] == first["completion_logprobs"] + second["completion_logprobs"]
    assert all(lp == 0.0 for lp, m in zip(logps, mask) if not m)


def test_advantages_are_per_group_and_masked_members_leave_the_baseline():
    adv, mean, std = group_advantages([1.0, 0.0, None, 1.0])
    assert mean == pytest.approx(2 / 3) and adv[2] is None
    assert adv[0] == pytest.approx((1 - 2 / 3) / (std + 1e-8)) and adv[1] < 0
    assert group_advantages([0.5, 0.5])[0] == [0.0, 0.0]
    assert group_advantages([None])[0] == [None]


def test_a_policy_without_token_ids_is_refused_before_training():
    with pytest.raises(ValueError, match="capture_tokens is 'openai'"):
        Tau2RolloutWorker(OpenAIAgentPolicy(model="m", base_url="http://127.0.0.1:9/v1", capture_tokens="openai"))
    with pytest.raises(ValueError, match="capture_tokens is None"):
        Tau2RolloutWorker(OpenAIAgentPolicy(model="m", base_url="http://127.0.0.1:9/v1"))


def test_a_server_without_token_ids_fails_the_worker_at_start():
    from openai_stub import OpenAIStub

    with OpenAIStub(["hello"]) as stub:  # logprobs-free, id-free replies (OpenAI's own API)
        worker = Tau2RolloutWorker(
            OpenAIAgentPolicy(model="m", base_url=stub.base_url, capture_tokens="vllm"),
            domain="mock",
            task_ids=TASKS,
        )
        with pytest.raises(RuntimeError, match="cannot feed training: its replies carry no logprobs, token_ids"):
            worker.start()
    assert worker._thread is None


def test_test_split_tasks_are_refused():
    with pytest.raises(Exception, match="test"):
        Tau2RolloutWorker(
            OpenAIAgentPolicy(model="m", base_url="http://127.0.0.1:9/v1", capture_tokens="vllm"),
            domain="airline",
            task_split="test",
        )
