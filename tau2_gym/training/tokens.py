"""Token-level trajectories of server rollouts, in the record the HF :class:`~tau2_gym.training.hf.policy.PolicyRunner`
produces -- one trainer-side code path for in-process and served policies.

With ``--capture-tokens vllm`` (or ``sglang``, ``auto``) every agent reply of a rollout keeps, on its message's
``raw_data``, the server's ``prompt_token_ids`` (the whole conversation as the server's chat template rendered
it, with the generation prompt), ``completion_token_ids`` and ``completion_logprobs``
(:func:`tau2_gym.players.agents.openai_agent.token_record` reads vLLM's and SGLang's fields into these names).
:func:`server_trajectory` stitches
one episode's replies into a :class:`~tau2_gym.training.hf.policy.Trajectory`:

- ``prompt_ids``: the first reply's prompt;
- ``completion_ids``: each reply's sampled tokens (``env_mask`` 1, their logprobs), and between two replies the
  tokens the next prompt adds after the previous prompt and reply -- the env/user turns as the server
  rendered them (``env_mask`` 0, logprob 0.0); nothing after the last reply, as the PolicyRunner.

This is exact only when the server's template is prefix-preserving: each prompt must start with the previous
prompt followed by the previous reply's tokens. A template that re-renders earlier turns (Qwen3 strips old
``<think>`` blocks) or a tool parser whose re-serialised call differs from the sampled text breaks that; the
episode is then refused with :class:`TokenTrajectoryError` naming the turn -- never stitched wrongly. For such
servers ``sample_mode="per_turn"`` makes one training sample per reply (its prompt the server's own prompt ids,
its completion the reply's tokens; :meth:`~tau2_gym.training.hf.policy.Trajectory.training_samples`), and
``"auto"`` stitches when the prompts allow it and falls back to per-turn samples when they show the server
re-rendered an earlier turn (``Trajectory.sample_mode`` records which). Ids that are not lists of integers,
logprobs that are not finite numbers or whose count differs from the ids' are refused in every mode.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from tau2_gym.core.actions import raw_reasoning
from tau2_gym.core.termination import TerminationReason
from tau2_gym.training.hf.chat import PER_TURN, SAMPLE_MODES, SEQUENCE
from tau2_gym.training.hf.policy import Sample, Trajectory, TurnRecord

__all__ = ["TokenTrajectoryError", "server_trajectory", "server_trajectories"]


class TokenTrajectoryError(ValueError):
    """An episode's captured tokens cannot be stitched into one exact token sequence."""


class _NotExtending(TokenTrajectoryError):
    """A reply's prompt does not extend the previous prompt and reply (the server re-rendered an earlier turn)."""


def captured_replies(run: dict) -> list[dict]:
    """The agent replies that came from the server (the fixed greeting and env/user turns have no tokens), and
    last the reply that ended the episode unread (a malformed call: ``info.rejected_agent_reply``) -- the policy
    produced it, so it is trained on (reward 0)."""
    out = []
    for m in run.get("messages") or []:
        raw = m.get("raw_data") if m.get("role") == "assistant" else None
        if isinstance(raw, dict) and "completion_token_ids" in raw:
            out.append(raw)
    rejected = ((run.get("info") or {}).get("rejected_agent_reply") or {}).get("raw_data")
    if isinstance(rejected, dict) and "completion_token_ids" in rejected:
        out.append(rejected)
    return out


def _ids(value: Any, what: str, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        bad = (
            value
            if not isinstance(value, list)
            else next(t for t in value if not isinstance(t, int) or isinstance(t, bool))
        )
        raise TokenTrajectoryError(f"{where}: the {what} token ids are not a list of integers (found {bad!r:.60})")
    return value


def _logprobs(value: Any, n: int, where: str) -> list[float]:
    if not isinstance(value, list) or len(value) != n:
        count = len(value) if isinstance(value, list) else 0
        raise TokenTrajectoryError(f"{where}: {count} logprobs for {n} tokens")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise TokenTrajectoryError(f"{where}: a logprob is not a finite number ({x!r:.60})")
    return [float(x) for x in value]


def _checked(run: dict) -> list[tuple[list[int], list[int], list[float], dict]]:
    """(prompt ids, completion ids, logprobs, raw reply) of each server reply of the episode, validated."""
    task = run.get("task_id")
    replies = captured_replies(run)
    if not replies:
        raise TokenTrajectoryError(
            f"task {task!r}: no agent reply carries captured tokens (run with "
            "--capture-tokens vllm|sglang|auto against a server that returns token ids)"
        )
    out = []
    for k, raw in enumerate(replies):
        prompt, ids, lps = raw.get("prompt_token_ids"), raw.get("completion_token_ids"), raw.get("completion_logprobs")
        where = f"task {task!r}, agent reply {k}"
        if prompt is None or ids is None:
            source = raw.get("token_source")
            raise TokenTrajectoryError(
                f"{where}: the server sent no {'prompt' if prompt is None else 'completion'} token ids ("
                + (f"it answered like {source}; " if source else "")
                + "vLLM: --capture-tokens vllm; SGLang: --capture-tokens sglang, a version with "
                "return_prompt_token_ids / return_token_ids; OpenAI's API returns no ids)"
            )
        prompt, ids = _ids(prompt, "prompt", where), _ids(ids, "completion", where)
        out.append((list(prompt), list(ids), _logprobs(lps, len(ids), where), raw))
    return out


def _turn(raw: dict, start: int, end: int, sample: Optional[int] = None) -> TurnRecord:
    choices = raw.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return TurnRecord(
        start=start,
        end=end,
        text=content if isinstance(content, str) else "",
        finish_reason=str(choice.get("finish_reason")),
        reasoning=raw_reasoning(raw),
        sample=sample,
    )


def _stitched(task: Any, replies: list) -> Trajectory:
    traj: Optional[Trajectory] = None
    context: list[int] = []
    for k, (prompt, ids, lps, raw) in enumerate(replies):
        if traj is None:
            traj = Trajectory(task_id=task, prompt_ids=list(prompt))
        else:
            if prompt[: len(context)] != context:
                at = next(
                    (i for i, (a, b) in enumerate(zip(prompt, context)) if a != b), min(len(prompt), len(context))
                )
                raise _NotExtending(
                    f"task {task!r}, agent reply {k}: the server's prompt does not extend the previous prompt and "
                    f"reply (they differ at token {at} of {len(context)}): its chat template is not "
                    "prefix-preserving, or it re-serialised the previous reply differently from the sampled tokens "
                    "(sample_mode='per_turn' trains one sample per reply)"
                )
            env = list(prompt[len(context) :])
            traj.completion_ids += env
            traj.env_mask += [0] * len(env)
            traj.logprobs += [0.0] * len(env)
            traj.turns[-1].env_tokens = len(env)
        start = len(traj.completion_ids)
        traj.completion_ids += ids
        traj.env_mask += [1] * len(ids)
        traj.logprobs += lps
        traj.turns.append(_turn(raw, start, len(traj.completion_ids)))
        context = list(prompt) + list(ids)
    assert traj is not None
    return traj


def _per_turn(task: Any, replies: list) -> Trajectory:
    traj = Trajectory(task_id=task, prompt_ids=list(replies[0][0]), sample_mode=PER_TURN)
    for k, (prompt, ids, lps, raw) in enumerate(replies):
        traj.samples.append(Sample(list(prompt), list(ids), [1] * len(ids), list(lps)))
        traj.turns.append(_turn(raw, 0, len(ids), sample=k))
    return traj


def server_trajectory(run: dict, sample_mode: str = SEQUENCE) -> Any:
    """One SimulationRun (dict) recorded with ``capture_tokens`` (``vllm``, ``sglang``, ``auto``) as a
    PolicyRunner ``Trajectory``; :class:`TokenTrajectoryError` names the reply it cannot use. ``sample_mode``:
    ``"sequence"`` (one stitched sequence; refused when the server re-rendered an earlier turn), ``"per_turn"``
    (one sample per reply) or ``"auto"`` (stitched when possible, else per turn)."""
    if sample_mode not in SAMPLE_MODES:
        raise ValueError(f"sample_mode={sample_mode!r}; choose one of {', '.join(SAMPLE_MODES)}")
    task = run.get("task_id")
    replies = _checked(run)
    if sample_mode == PER_TURN:
        traj = _per_turn(task, replies)
    else:
        try:
            traj = _stitched(task, replies)
        except _NotExtending:
            if sample_mode != "auto":
                raise
            traj = _per_turn(task, replies)
    reward_info = run.get("reward_info")
    traj.reward = float(reward_info["reward"]) if reward_info else 0.0
    traj.reward_info = reward_info
    traj.termination_reason = run.get("termination_reason")
    traj.messages = run.get("messages") or []
    traj.info = {"simulation_run": run}
    return traj


def server_trajectories(runs: list[dict], sample_mode: str = SEQUENCE) -> tuple[list[Any], list[tuple[Any, str]]]:
    """(the trajectories, [(task id, why)] of the episodes that could not be used) of a rollout's runs;
    infrastructure errors are left out (they never reach training). ``sample_mode`` as :func:`server_trajectory`."""
    good, bad = [], []
    for run in runs:
        if run.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR:
            continue
        try:
            good.append(server_trajectory(run, sample_mode))
        except TokenTrajectoryError as exc:
            bad.append((run.get("task_id"), str(exc)))
    return good, bad
