"""The reward function TRL calls, what a rollout returns per episode, and which episodes carry no signal."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tau2_gym.core.integrity import resolve_integrity
from tau2_gym.core.termination import INFRASTRUCTURE
from tau2_gym.scoring.rewards import infrastructure_failure
from tau2_gym.training.hf.chat import PER_TURN
from tau2_gym.training.hf.policy import Trajectory


def tau2_reward(
    prompts: Any = None,  # noqa: ARG001 - TRL's reward-function signature
    completions: Any = None,  # noqa: ARG001 - TRL's reward-function signature
    tau2_reward: Optional[list] = None,
    tau2_masked: Optional[list] = None,
    log_metric: Optional[Callable[[str, float], None]] = None,
    **kwargs: Any,
) -> list[Optional[float]]:
    """TRL reward function: the reward the rollout function computed for each episode (the env's reward under
    its ``reward_mode``; upstream's raw reward is the ``upstream_reward`` field).

    An episode that failed for infrastructure reasons (``tau2_masked``: ``user_error``, ``infrastructure_error``,
    ``evaluation_error``) gets ``None`` -- TRL's convention for "no reward": the trainer turns it into NaN,
    leaves it out of the group baseline and the logged reward, and gives it advantage 0 (the rollout function
    also zeroes its ``env_mask``, so none of its tokens enters the loss). With TRL's ``log_metric`` the counts
    are logged as ``tau2/masked_fraction`` and ``tau2/masked/<reason>``.
    """
    if tau2_reward is None:
        raise ValueError("tau2_reward needs the 'tau2_reward' field; use it with make_rollout_func's rollout function")
    check_integrity(kwargs.get("reward_integrity"), kwargs.get("scored_reward_integrity"))
    masked = list(tau2_masked) if tau2_masked is not None else [None] * len(tau2_reward)
    out = [None if (r is None or why) else float(r) for r, why in zip(tau2_reward, masked)]
    if log_metric is not None and out:
        reasons = [why for why in masked if why]
        log_metric("tau2/masked_fraction", len(reasons) / len(out))
        for why in INFRASTRUCTURE_REASONS:
            log_metric(f"tau2/masked/{why}", float(reasons.count(why)))
    return out


def check_integrity(dataset: Any, scored: Any) -> None:
    """Refuse episodes scored under another reward-integrity setting than the one their dataset was built for
    (``build_dataset(reward_integrity=...)`` vs the env's ``reward_integrity``): a reward that silently differs from
    the one the run says it trains on. Lists (TRL's per-episode columns) are compared item by item."""
    if dataset is None or scored is None:
        return
    pairs = zip(dataset, scored) if isinstance(dataset, (list, tuple)) and isinstance(scored, (list, tuple)) else []
    for want, got in pairs or [(dataset, scored)]:
        if want is not None and got is not None and resolve_integrity(want) != resolve_integrity(got):
            raise ValueError(
                f"the dataset was built for reward_integrity={want!r} but the episodes are scored with {got!r}; "
                "pass the same setting to build_dataset and to the env (env_kwargs['reward_integrity'])"
            )


#: The ``tau2_masked`` reasons (see :func:`tau2_gym.scoring.rewards.infrastructure_failure`).
INFRASTRUCTURE_REASONS = (*sorted(str(r) for r in INFRASTRUCTURE), "evaluation_error")


def masked_reason(t: Trajectory) -> Optional[str]:
    """Why a trajectory carries no signal about the policy (None: it does): see ``tau2_gym.scoring.rewards``."""
    return infrastructure_failure(t.termination_reason, t.info)


def _rows(t: Trajectory, stop_id: int, slots: Optional[int]) -> list[tuple[list, list, list, list, Optional[int]]]:
    """(prompt, completion, env_mask, logprobs, turn) rows of one episode: its training samples, padded with
    masked one-token rows to ``slots`` rows when given."""
    rows: list[tuple[list, list, list, list, Optional[int]]] = []
    per_turn = t.sample_mode == PER_TURN
    for i, s in enumerate(t.training_samples()):  # lists of their own: handed to TRL as they are
        completion, mask, logprobs = s.completion_ids, s.env_mask, s.logprobs
        if not completion:  # TRL reads each completion's last token
            completion, mask, logprobs = [stop_id], [0], [0.0]
        rows.append((s.prompt_ids, completion, mask, logprobs, i if per_turn else None))
    if per_turn and not rows:  # ended before the policy's first turn
        rows.append((list(t.prompt_ids), [stop_id], [0], [0.0], None))
    if slots is not None:
        if len(rows) > slots:
            raise ValueError(
                f"task {t.task_id!r}: {len(rows)} samples for {slots} slots per episode (max_turns bounds them)"
            )
        rows += [([stop_id], [stop_id], [0], [0.0], None)] * (slots - len(rows))
    return rows


def rollout_output(
    trajectories: Sequence[Trajectory],
    stop_id: int,
    splits: Optional[Sequence[Optional[str]]] = None,
    slots: Optional[int] = None,
) -> dict[str, list]:
    """The dict a TRL ``rollout_func`` returns for these trajectories: one row per training sample, in order --
    one per episode in sequence mode, one per policy turn in per-turn mode (``tau2_turn`` numbers them;
    ``tau2_episode`` is the row's episode, its index in ``trajectories``: what an episode-level reward groups by).

    An episode that ended before the policy's first turn gets a one-token completion (``stop_id``, masked
    out) because TRL reads each completion's last token. An infrastructure failure (:func:`masked_reason`)
    gets reward ``None`` and an all-zero ``env_mask``: it is masked out of the gradient, never a policy failure.
    ``splits`` (recorded per episode as ``split``) are the training splits the tasks were checked against.
    ``slots``: exactly that many rows per episode, the missing ones masked one-token rows (``tau2_turn`` None);
    every row of an episode carries the episode's reward, so a GRPO group of ``G`` episodes x ``slots`` rows has the
    episodes' mean and every sample of an episode the episode's advantage (see :mod:`tau2_gym.training.trl`).
    """
    out: dict[str, list] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "tau2_reward": [],
        "upstream_reward": [],
        "tau2_masked": [],
        "reward_info": [],
        "termination_reason": [],
        "task_id": [],
        "split": [],
        "tau2_sample_mode": [],
        "tau2_turn": [],
        "tau2_episode": [],
        "scored_reward_integrity": [],
    }
    splits = list(splits) if splits is not None else [None] * len(trajectories)
    for episode, (t, split) in enumerate(zip(trajectories, splits)):
        why = masked_reason(t)
        for prompt, completion, mask, logprobs, turn in _rows(t, stop_id, slots):
            if why is not None:
                mask = [0] * len(completion)
            out["prompt_ids"].append(prompt)
            out["completion_ids"].append(completion)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            out["tau2_reward"].append(None if why is not None else float(t.reward))
            out["upstream_reward"].append(float(t.info.get("tau2_reward", t.reward)))
            out["tau2_masked"].append(why)
            out["reward_info"].append(t.reward_info)
            out["termination_reason"].append(t.termination_reason)
            out["task_id"].append(t.task_id)
            out["split"].append(split)
            out["tau2_sample_mode"].append(t.sample_mode)
            out["tau2_turn"].append(turn)
            out["tau2_episode"].append(episode)
            out["scored_reward_integrity"].append(t.info.get("reward_integrity"))
    return out
