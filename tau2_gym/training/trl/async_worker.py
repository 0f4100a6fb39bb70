"""``Tau2RolloutWorker``: tau2 episodes as the rollout worker of TRL's asynchronous GRPO trainer (tested with trl 1.16).

TRL's ``AsyncGRPOTrainer`` trains from a queue that a rollout worker fills while the trainer steps: it takes any
object with ``rollout_buffer`` / ``metrics_queue`` queues and ``start`` / ``stop`` / ``update_model_version`` /
``check_health`` (``RolloutWorkerProtocol``). Its generation server is vLLM (the trainer streams its weights there
after each step); this worker sends the agent's turns to that server's OpenAI endpoint.

>>> from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer   # doctest: +SKIP
>>> args = AsyncGRPOConfig(output_dir="out", num_generations=8, max_staleness=4)  # doctest: +SKIP
>>> worker = Tau2RolloutWorker.for_trainer(args, "Qwen/Qwen3-1.7B", domain="airline", user="openai:gpt-4.1")
>>> trainer = AsyncGRPOTrainer(model="Qwen/Qwen3-1.7B", args=args, rollout_worker=worker,   # doctest: +SKIP
...                            train_dataset=worker.train_dataset())

What it does, on a thread of its own with an event loop:

- **Groups are task x seed.** Group ``g`` plays task ``g mod N`` of the selection (the training split by default)
  ``num_generations`` times with one reset seed (a hash of the run seed, ``g`` and the task), so the members meet
  the same customer and differ only by what the policy sampled -- GRPO's group. Each member sends its own sampling
  seed to the server (else a seeded server would return ``num_generations`` identical replies).
- **Episodes run in the collect core.** Each member is one :meth:`EpisodeRunner.run_episode
  <tau2_gym.runner.episode_runner.EpisodeRunner.run_episode>` -- the rollout's episode, retry policy and scoring
  (``Episode.finish``), the tau2 reward -- with the agent behind the policy server and token capture on.
- **Tokens are the server's.** The agent's replies carry the server's prompt ids, sampled ids and logprobs
  (``capture_tokens``, :func:`tau2_gym.players.agents.openai_agent.token_record`); an episode becomes training rows by
  :func:`~tau2_gym.training.tokens.server_trajectory` with ``sample_mode="auto"``: one row (prompt + the policy's
  tokens, the env/customer turns between them masked out) when the server's template is prefix-preserving, else one
  row per reply (counted as ``tau2/unstitched_episodes_total``). The old log-probabilities are the server's logprobs
  of the sampled tokens.
- **Advantages per group**, as TRL's own worker: ``(r - mean) / (std + 1e-8)`` over the group's scored episodes; an
  episode that failed for infrastructure reasons (``user_error``, ``infrastructure_error``, a failed evaluation) is
  left out of the baseline and of training and counted (``tau2/masked_total``). Every row of an episode carries its
  episode's advantage.
- **Model versions and staleness.** A group is tagged with the policy version live when it started (the oldest
  policy any of its tokens can come from); a group more than ``max_staleness`` versions behind when it is queued is
  dropped and counted (``tau2/dropped_stale_total``, in samples) -- the trainer drops again, with its own bound, when it
  takes a sample out of the queue.

Weight sync is the trainer's (merged weights into vLLM); a PEFT run whose adapter is synced to vLLM as a LoRA adapter
(vLLM started with ``--enable-lora``) names a new adapter per version, which this worker does not request: use
merged-weight sync (no ``--enable-lora``) with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
import logging
import math
import queue
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from tau2_gym.core.domain import load_domain
from tau2_gym.core.tasks import Task
from tau2_gym.episodes.selection import select_tasks
from tau2_gym.players.agents.base import AgentPolicy, AgentTurnRequest
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
from tau2_gym.runner.checks import check_servers
from tau2_gym.runner.collect import close_loop_clients
from tau2_gym.runner.config import RolloutConfig
from tau2_gym.runner.episode_runner import EpisodeRunner
from tau2_gym.runner.players import build_player
from tau2_gym.scoring.judges import make_judge
from tau2_gym.scoring.rewards import infrastructure_failure
from tau2_gym.training.export import training_split
from tau2_gym.training.hf.chat import PER_TURN
from tau2_gym.training.tokens import captured_replies, server_trajectory
from tau2_gym.training.trl.dataset import build_dataset, task_prompt

logger = logging.getLogger("tau2_gym.training.trl")

__all__ = ["AsyncRolloutConfig", "GroupSummary", "Tau2RolloutWorker", "group_advantages", "group_seed"]

#: capture modes whose replies carry token ids (``openai`` gives logprobs only)
ID_CAPTURE_MODES = ("vllm", "sglang", "auto")


@dataclass
class AsyncRolloutConfig(RolloutConfig):
    """Settings of a :class:`Tau2RolloutWorker`: the rollout's (the task selection, the episode limits, retries,
    ``concurrency`` episodes at once) plus the asynchronous trainer's. ``print(config.describe())`` lists them."""

    task_split: Optional[str] = field(
        default="train",
        metadata={
            "help": "split the groups' tasks come from (default train; a domain without train/test splits gives all "
            "its tasks); test-split tasks need allow_test_split."
        },
    )
    allow_test_split: bool = field(default=False, metadata={"help": "allow tasks of the test split (off by default)."})
    num_generations: int = field(
        default=8, metadata={"help": "episodes per group: one task, one reset seed (AsyncGRPOConfig.num_generations)."}
    )
    max_staleness: int = field(
        default=4,
        metadata={
            "help": "policy versions a group may lag behind the trainer when it is queued; older groups are dropped "
            "and counted (AsyncGRPOConfig.max_staleness)."
        },
    )
    queue_maxsize: int = field(
        default=1024, metadata={"help": "samples the rollout buffer holds (AsyncGRPOConfig.queue_maxsize)."}
    )
    groups_in_flight: int = field(
        default=2,
        metadata={
            "help": "groups played at once (their episodes share `concurrency`); a new group starts only while the "
            "buffer has room."
        },
    )
    max_retries: int = field(
        default=1,
        metadata={"help": "re-runs of an episode whose run raised, before it is masked as infrastructure_error."},
    )
    check_servers: bool = field(
        default=True,
        metadata={
            "help": "at start, ask the policy server once whether it returns token ids and logprobs (and check the "
            "customer's and judge's servers): a server that cannot feed training fails the trainer at once."
        },
    )
    progress: bool = field(default=False, metadata={"help": "unused: the trainer logs progress."})

    what = "async rollout settings"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_generations < 1:
            raise ValueError(f"num_generations={self.num_generations} must be >= 1")
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness={self.max_staleness} must be >= 0")
        if self.queue_maxsize < 1:
            raise ValueError(f"queue_maxsize={self.queue_maxsize} must be >= 1")
        if self.groups_in_flight < 1:
            raise ValueError(f"groups_in_flight={self.groups_in_flight} must be >= 1")
        if self.output is not None or self.num_trials != 1:
            raise ValueError(
                "output and num_trials are rollout-file settings: the async worker streams episodes to the trainer "
                "(groups of num_generations episodes); leave them unset"
            )


@dataclass
class GroupSummary:
    """One finished group, as the worker saw it (``worker.recent_groups``, the newest last)."""

    group_id: int
    task_id: str
    seed: int
    model_version: int  # the policy version live when the group started
    rewards: list[Optional[float]]  # per member; None: masked (infrastructure failure)
    advantages: list[Optional[float]]
    termination_reasons: list[Optional[str]]
    samples: int  # training rows built from the group
    dropped_stale: bool = False


def group_seed(base: int, group_id: int, domain: str, task_id: str) -> int:
    """The reset seed of a group: a 31-bit hash of the run seed, the group number and the task (deterministic)."""
    key = json.dumps([int(base), int(group_id), domain, str(task_id)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") & 0x7FFFFFFF


def _member_seed(seed: int, member: int) -> int:
    key = json.dumps(["member", int(seed), int(member)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") & 0x7FFFFFFF


def group_advantages(rewards: Sequence[Optional[float]]) -> tuple[list[Optional[float]], float, float]:
    """``(advantages, mean, std)`` of one group, as TRL's async worker computes them: ``(r - mean) / (std + 1e-8)``
    over the scored members (population std); a masked member (None) gets None and is left out of the baseline."""
    scored = [float(r) for r in rewards if r is not None]
    if not scored:
        return [None] * len(rewards), float("nan"), float("nan")
    mean = sum(scored) / len(scored)
    std = math.sqrt(sum((r - mean) ** 2 for r in scored) / len(scored))
    return [None if r is None else (float(r) - mean) / (std + 1e-8) for r in rewards], mean, std


class _MemberPolicy(AgentPolicy):
    """The policy as one group member sees it: the same requests, with the member's own sampling seed (the episode's
    reset seed is the group's, and a seeded server would sample every member alike)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    async def agenerate(self, request: AgentTurnRequest) -> Any:
        member = int((request.extra or {}).get("trial") or 0)
        if request.seed is not None:
            request = dataclasses.replace(request, seed=_member_seed(request.seed, member))
        agenerate = getattr(self.policy, "agenerate", None)
        if agenerate is None:
            return self.policy.generate(request)
        return await agenerate(request)

    def episode_done(self, episode_id: str) -> None:
        done = getattr(self.policy, "episode_done", None)
        if done is not None:
            done(episode_id)

    def info(self) -> dict[str, Any]:
        info = getattr(self.policy, "info", None)
        return info() if info is not None else {"implementation": type(self.policy).__name__}


class Tau2RolloutWorker:
    """A ``RolloutWorkerProtocol`` for ``AsyncGRPOTrainer(rollout_worker=...)`` that plays tau2 episodes (see the
    module docstring).

    Args:
        policy: the agent behind the trainer's generation server: an
            :class:`~tau2_gym.players.agents.openai_agent.OpenAIAgentPolicy` with ``capture_tokens`` ``vllm``,
            ``sglang`` or ``auto`` (:meth:`for_trainer` builds it from the trainer's settings).
        user: the customer: a simulator, a spec string (``"openai:gpt-4.1"``, ``"oracle"``) or None (the oracle
            user; none in solo mode).
        config: :class:`AsyncRolloutConfig`; ``settings`` override its fields by name.
        tasks: Task objects or ids to play instead of the config's selection (still checked against the split).
    """

    def __init__(
        self,
        policy: Any,
        user: Any = None,
        config: Optional[AsyncRolloutConfig] = None,
        *,
        tasks: Optional[Sequence[Union[Task, str]]] = None,
        **settings: Any,
    ) -> None:
        if config is None:
            cfg = AsyncRolloutConfig.from_kwargs(**settings)
        else:  # the given settings, with these fields replaced (derived fields stay as the config resolved them)
            unknown = sorted(set(settings) - set(AsyncRolloutConfig.field_names()))
            if unknown:
                raise TypeError(f"unknown {AsyncRolloutConfig.what} argument(s) {unknown}")
            cfg = dataclasses.replace(config, **settings) if settings else config
        self.config = cfg
        capture = getattr(getattr(policy, "config", None), "capture_tokens", "unknown")
        if capture not in (*ID_CAPTURE_MODES, "unknown"):
            raise ValueError(
                f"the policy's capture_tokens is {capture!r}: training needs the server's token ids and logprobs; "
                f"use one of {ID_CAPTURE_MODES} (OpenAIAgentPolicy(..., capture_tokens='vllm'))"
            )
        self.policy = build_player(policy, "policy")
        self.user = build_player(user, "user", cfg.solo)
        self.judge = make_judge(cfg.judge)
        self.tasks = self._select(tasks)
        self.runner = EpisodeRunner(cfg, self.tasks, _MemberPolicy(self.policy), self.user, self.judge)

        # the protocol's queues; the trainer drains both
        self.rollout_buffer: queue.Queue = queue.Queue(maxsize=cfg.queue_maxsize)
        self.metrics_queue: queue.Queue = queue.Queue(maxsize=4096)

        self.model_version = 0
        self.stats: Counter = Counter()  # episodes, groups, samples (queued), masked, dropped_stale, unqueued_at_stop
        self.recent_groups: deque[GroupSummary] = deque(maxlen=1024)
        self._next_group = 0
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._error: Optional[BaseException] = None
        self._heartbeat = time.time()

    # ------------------------------------------------------------------ construction helpers

    @classmethod
    def for_trainer(
        cls,
        args: Any,
        model: str,
        *,
        user: Any = None,
        base_url: Optional[str] = None,
        capture_tokens: str = "vllm",
        config: Optional[AsyncRolloutConfig] = None,
        tasks: Optional[Sequence[Union[Task, str]]] = None,
        **settings: Any,
    ) -> Tau2RolloutWorker:
        """A worker whose agent samples as ``AsyncGRPOTrainer`` with ``args`` (an ``AsyncGRPOConfig``) would: the
        trainer's vLLM server (``args.vllm_server_base_url`` + ``/v1``, or ``base_url``), serving ``model`` (the
        name the trainer was given), with its temperature, top-p, ``max_completion_length`` per turn and request
        timeout; and its ``num_generations``, ``max_staleness`` and ``queue_maxsize``. ``settings`` are
        :class:`AsyncRolloutConfig` fields (``domain``, ``task_ids``, ``max_steps``, ``seed``, ...)."""
        url = base_url or str(args.vllm_server_base_url).rstrip("/") + "/v1"
        top_p = float(getattr(args, "top_p", 1.0))
        policy = OpenAIAgentPolicy(
            OpenAIAgentConfig(
                model=model,
                base_url=url,
                temperature=float(args.temperature),
                top_p=None if top_p == 1.0 else top_p,
                max_tokens=int(args.max_completion_length),
                timeout=float(getattr(args, "request_timeout", 600)),
                capture_tokens=capture_tokens,
            )
        )
        trainer_side = {
            "num_generations": int(args.num_generations),
            "max_staleness": int(args.max_staleness),
            "queue_maxsize": int(args.queue_maxsize),
            "seed": int(getattr(args, "seed", 300)),
        }
        return cls(policy, user, config, tasks=tasks, **{**trainer_side, **settings})

    def _select(self, tasks: Optional[Sequence[Union[Task, str]]]) -> list[Task]:
        """The groups' tasks: the training split (the same guard as the dataset builder and the rollout function),
        then the config's ids / the given tasks, ``num_tasks`` and the no-judge choice."""
        cfg = self.config
        loaded = load_domain(cfg.domain, cfg.data_dir, cfg.data_version, options=cfg.domain_options)
        ids, recorded = training_split(
            loaded, cfg.task_split, task_set=cfg.task_set, allow_test_split=cfg.allow_test_split
        )
        by_id = {t.id: t for t in loaded.tasks(cfg.task_set, None)}
        wanted = [t.id if isinstance(t, Task) else str(t) for t in tasks] if tasks is not None else cfg.task_ids
        if wanted is not None:
            outside = [i for i in wanted if i not in set(ids)]
            if outside:
                raise ValueError(
                    f"task ids {outside[:5]} of domain {cfg.domain!r} are not in split {recorded!r}; choose the split "
                    "that holds them (test tasks need allow_test_split=True)"
                )
            ids = tuple(wanted)
        settings = dataclasses.replace(cfg, task_ids=None)
        chosen = [t if isinstance(t, Task) else by_id[t] for t in (tasks if tasks is not None else ids)]
        where = f"async rollout of {cfg.domain!r}"
        return list(select_tasks(loaded, settings, chosen, num_tasks=cfg.num_tasks, judge=self.judge, where=where))

    def train_dataset(self) -> Any:
        """A ``datasets.Dataset`` with one row per task of the selection (prompts naming the tasks), for the
        trainer's ``train_dataset``: the trainer counts an epoch as that many distinct groups trained."""
        cfg = self.config
        return build_dataset(
            cfg.domain,
            split=cfg.task_split,
            task_set=cfg.task_set,
            task_ids=[t.id for t in self.tasks],
            data_dir=cfg.data_dir,
            data_version=cfg.data_version,
            solo=cfg.solo,
            allow_test_split=cfg.allow_test_split,
        )

    # ------------------------------------------------------------------ RolloutWorkerProtocol

    def start(self) -> None:
        """Check the policy server (``check_servers``), then play groups on a background thread."""
        if self._thread is not None:
            return
        if self.config.check_servers:
            self._check_tokens()
            asyncio.run(self._check_others())
        self._stop.clear()
        self._heartbeat = time.time()
        self._thread = threading.Thread(target=self._thread_main, name="tau2-rollout-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop playing groups (episodes in flight are cancelled) and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            if self._thread.is_alive():
                logger.warning("the tau2 rollout worker did not stop within 60 s")
            self._thread = None

    def update_model_version(self, model_version: int) -> None:
        self.model_version = int(model_version)

    def check_health(self, stale_after_s: float) -> None:
        """Raise when the worker failed, stopped on its own, or its loop has not ticked for ``stale_after_s``."""
        if self._error is not None:
            raise RuntimeError(
                f"the tau2 rollout worker failed: {type(self._error).__name__}: {self._error}"
            ) from self._error
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            raise RuntimeError("the tau2 rollout worker stopped unexpectedly")
        age = time.time() - self._heartbeat
        if age > stale_after_s:
            raise RuntimeError(f"the tau2 rollout worker's heartbeat is {age:.0f} s old (> {stale_after_s:.0f} s)")

    # ------------------------------------------------------------------ the loop

    def _check_tokens(self) -> None:
        probe = getattr(self.policy, "probe_tokens", None)
        if probe is None:
            return
        got = probe()
        missing = [k for k in ("logprobs", "token_ids", "prompt_token_ids") if not got.get(k)]
        if got.get("error") or missing:
            why = got.get("error") or f"its replies carry no {', '.join(missing)}"
            raise RuntimeError(
                f"the policy server {self.policy.config.base_url} cannot feed training: {why} (serve the model with "
                "vLLM or SGLang; see docs/training.md)"
            )

    async def _check_others(self) -> None:
        """The customer's and the judge's servers, once (:func:`~tau2_gym.runner.checks.check_servers`)."""
        try:
            await check_servers(self.user, self.judge)
        finally:
            await close_loop_clients(self.user, self.judge)

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # noqa: BLE001 - handed to the trainer through check_health
            logger.error("the tau2 rollout worker failed: %s: %s", type(exc).__name__, exc)
            self._error = exc

    async def _run(self) -> None:
        cfg = self.config
        gate = asyncio.Semaphore(cfg.concurrency)
        pending: set[asyncio.Future] = set()
        groups = itertools.count(self._next_group)
        try:
            while not self._stop.is_set():
                self._heartbeat = time.time()
                while len(pending) < cfg.groups_in_flight and not self.rollout_buffer.full():
                    g = next(groups)
                    self._next_group = g + 1
                    pending.add(asyncio.ensure_future(self._group(g, gate)))
                if not pending:
                    await asyncio.sleep(0.05)
                    continue
                done, pending = await asyncio.wait(pending, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    fut.result()  # a configuration error (no token ids) stops the worker
        finally:
            for fut in pending:
                fut.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await close_loop_clients(self.policy, self.user, self.judge)

    async def _group(self, group_id: int, gate: asyncio.Semaphore) -> None:
        cfg = self.config
        task = self.tasks[group_id % len(self.tasks)]
        seed = group_seed(cfg.seed, group_id, cfg.domain, task.id)
        version = self.model_version

        async def member(k: int) -> dict:
            async with gate:
                return await self.runner.run_episode(task, k, seed)

        runs = await asyncio.gather(*(member(k) for k in range(cfg.num_generations)))
        samples, summary = self.score_group(group_id, version, task.id, seed, runs)
        self.recent_groups.append(summary)
        await self._enqueue(samples, summary)

    def score_group(
        self, group_id: int, version: int, task_id: str, seed: int, runs: Sequence[dict]
    ) -> tuple[list[Any], GroupSummary]:
        """The training rows (``RolloutSample`` s) of one finished group and its summary; counts into ``stats``."""
        from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

        rewards: list[Optional[float]] = []
        rows: list[list[tuple[list[int], list[int], list[float]]]] = []
        for run in runs:
            masked = infrastructure_failure(run.get("termination_reason"), run.get("info"))
            if masked is not None:
                self.stats["masked"] += 1
                rewards.append(None)
                rows.append([])
                continue
            info = run.get("reward_info")
            rewards.append(float(info["reward"]) if info else 0.0)
            rows.append(self.episode_rows(run))
        advantages, mean, std = group_advantages(rewards)
        samples = []
        for run, reward, advantage, episode_rows in zip(runs, rewards, advantages, rows):
            if reward is None or advantage is None:
                continue
            metrics = {"reward": reward, "reward_std": std, "rewards/tau2_reward": reward}
            for input_ids, mask, logprobs in episode_rows:
                samples.append(
                    RolloutSample(
                        prompt=[{"role": "user", "content": task_prompt(self.config.domain, task_id)}],
                        completion=list(run.get("messages") or []),
                        input_ids=_array(input_ids, "int64"),
                        completion_mask=_array(mask, "int64"),
                        old_log_probs=_array(logprobs, "float32"),
                        advantage=float(advantage),
                        model_version=int(version),
                        group_id=int(group_id),
                        metrics=dict(metrics),
                    )
                )
        self.stats["groups"] += 1
        self.stats["episodes"] += len(runs)
        summary = GroupSummary(
            group_id=group_id,
            task_id=task_id,
            seed=seed,
            model_version=version,
            rewards=rewards,
            advantages=advantages,
            termination_reasons=[r.get("termination_reason") for r in runs],
            samples=len(samples),
        )
        scored = [r for r in rewards if r is not None]
        self._push_metrics(
            {
                "tau2/episodes_total": float(len(runs)),
                "tau2/masked_total": float(len(runs) - len(scored)),
                **({"tau2/reward_mean": mean, "tau2/reward_std": std} if scored else {}),
            }
        )
        return samples, summary

    def episode_rows(self, run: dict) -> list[tuple[list[int], list[int], list[float]]]:
        """``(input_ids, completion_mask, old_log_probs)`` rows of one episode: one row when its replies stitch into
        one token sequence, else one per reply (``server_trajectory(sample_mode="auto")``); ``[]`` when the policy
        never acted. A reply without token ids raises :class:`~tau2_gym.training.tokens.TokenTrajectoryError` (the
        server cannot feed training)."""
        if not captured_replies(run):
            return []
        traj = server_trajectory(run, sample_mode="auto")
        if traj.sample_mode == PER_TURN:
            self.stats["unstitched_episodes"] += 1
            self._push_metrics({"tau2/unstitched_episodes_total": 1.0})
        return [
            (
                s.prompt_ids + s.completion_ids,
                [0] * len(s.prompt_ids) + s.env_mask,
                [0.0] * len(s.prompt_ids) + s.logprobs,
            )
            for s in traj.training_samples()
        ]

    async def _enqueue(self, samples: list[Any], summary: GroupSummary) -> None:
        """Queue a group's rows once there is room; a group that grows too stale while it waits is dropped."""
        put = 0
        while put < len(samples):
            if self.model_version - summary.model_version > self.config.max_staleness:
                dropped = len(samples) - put
                summary.dropped_stale = True
                self.stats["dropped_stale"] += dropped
                self._push_metrics({"tau2/dropped_stale_total": float(dropped)})
                logger.info(
                    "dropped %d stale sample(s) of group %d (version %d, trainer at %d, max_staleness %d)",
                    dropped,
                    summary.group_id,
                    summary.model_version,
                    self.model_version,
                    self.config.max_staleness,
                )
                return
            if self._stop.is_set():
                self.stats["unqueued_at_stop"] += len(samples) - put
                return
            try:
                sample = samples[put]
                sample.enqueued_at = time.time()
                self.rollout_buffer.put_nowait(sample)
                put += 1
                self.stats["samples"] += 1
            except queue.Full:
                self._heartbeat = time.time()
                await asyncio.sleep(0.05)

    def _push_metrics(self, values: dict[str, float]) -> None:
        try:
            self.metrics_queue.put_nowait(values)
        except queue.Full:  # a trainer that stops draining never blocks the episodes
            pass


def _array(values: list, dtype: str) -> Any:
    import numpy as np

    return np.asarray(values, dtype=dtype)
