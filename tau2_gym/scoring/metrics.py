"""Run metrics, in one place for ``eval``, ``rollout`` summaries and reports: tau2's pass^k (a pass is a reward of
1 within :data:`PASS_TOLERANCE`), and per-file tallies of what was scored and what was left out, and why."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from tau2_gym.core.actions import EMPTY_REPLY, EMPTY_REPLY_KEY, REASONING_ONLY_REPLY

__all__ = [
    "EXCLUDED",
    "PASS_TOLERANCE",
    "Tally",
    "empty_agent_replies",
    "is_pass",
    "nl_unjudged",
    "pass_hat",
    "pass_hat_k",
]

PASS_TOLERANCE = 1e-6
EXCLUDED: Any = object()  # Tally.add's marker for a simulation left out by the judge choice 'exclude'


def pass_hat_k(num_trials: int, successes: int, k: int) -> float:
    """The chance that k trials drawn from a task's ``num_trials`` all succeed (tau2's pass^k estimator)."""
    return math.comb(successes, k) / math.comb(num_trials, k)


def is_pass(reward: float) -> bool:
    """A trial succeeds when its reward is 1 (within :data:`PASS_TOLERANCE`)."""
    return abs(reward - 1.0) <= PASS_TOLERANCE


def pass_hat(rewards: Mapping[str, Sequence[float]], num_trials: int = 0) -> dict[int, float]:
    """tau2's pass^k over tasks (``rewards``: task id -> its trials' rewards), for k = 1 .. the fewest trials of a
    task (and at most ``num_trials`` when given)."""
    if not rewards:
        return {}
    max_k = min(len(v) for v in rewards.values())
    if num_trials:
        max_k = min(max_k, num_trials)
    out = {}
    for k in range(1, max_k + 1):
        per_task = [pass_hat_k(len(v), sum(1 for r in v if is_pass(r)), k) for v in rewards.values()]
        out[k] = sum(per_task) / len(per_task)
    return out


def nl_unjudged(reward_info: Optional[dict]) -> bool:
    """Whether a reward_info's NL assertions were scored by the no-judge choice instead of a judge."""
    info = reward_info.get("info") if isinstance(reward_info, dict) else None
    nl = info.get("nl") if isinstance(info, dict) else None
    return isinstance(nl, dict) and bool(nl.get("skipped"))


def empty_agent_replies(simulations: Sequence[Any]) -> dict[str, int]:
    """How many episodes ended on an agent reply with neither text nor a tool call, by kind: ``empty`` (nothing at
    all) and ``reasoning_only`` (a thinking model's thought and nothing else); both end as ``agent_error`` and
    are recorded in the run's ``info.empty_agent_reply``."""
    counts = {EMPTY_REPLY: 0, REASONING_ONLY_REPLY: 0}
    for run in simulations:
        info = run.get("info") if isinstance(run, dict) else None
        kind = info.get(EMPTY_REPLY_KEY) if isinstance(info, dict) else None
        if kind in counts:
            counts[kind] += 1
    return counts


@dataclass
class Tally:
    """Scores of one file or one domain: rewards per task, plus what was left out and why."""

    domain: str
    num_trials: int = 0
    rewards: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    simulations: int = 0
    errors: int = 0
    infra: int = 0
    nl_skipped: int = 0
    excluded: int = 0
    data: Any = None  # the DataSource that re-scored it
    # against the rewards the file stored (per file only: not merged)
    compared: int = 0  # scored simulations that had a stored reward
    unstored: int = 0  # scored simulations without one
    changes: list[tuple[str, Any, Optional[float], float]] = field(default_factory=list)  # task, trial, old, new
    db_failures: list[tuple[int, str, Any, dict, dict]] = field(default_factory=list)  # + reward_info, sim info
    unscored: list[tuple[int, str, Any, str]] = field(default_factory=list)  # index, task, trial, why (per file)

    def add(self, task_id: str, termination: Any, reward_info: Optional[dict]) -> None:
        self.simulations += 1
        if termination == "infrastructure_error":
            self.infra += 1
            return
        if reward_info is EXCLUDED:
            self.excluded += 1
            return
        if reward_info is None:
            self.errors += 1
            return
        if nl_unjudged(reward_info):
            self.nl_skipped += 1
        self.rewards[task_id].append(float(reward_info["reward"]))

    def note(
        self, index: int, task_id: str, trial: Any, old: Optional[float], reward_info: Any, info: Optional[dict] = None
    ) -> None:
        """Compare a new score with the stored one; keep the simulations whose DB check failed, with their
        ``info`` (which holds the field-level DB diff; ``eval --explain``)."""
        if not isinstance(reward_info, dict) or reward_info is EXCLUDED:
            return
        new = float(reward_info["reward"])
        if old is None:
            self.unstored += 1
        else:
            self.compared += 1
            if not math.isclose(old, new, rel_tol=0.0, abs_tol=1e-9):
                self.changes.append((task_id, trial, old, new))
        db = reward_info.get("db_check")
        if isinstance(db, dict) and db.get("db_match") is False:
            self.db_failures.append((index, task_id, trial, reward_info, info or {}))

    def merge(self, other: Tally) -> None:
        self.num_trials += other.num_trials
        for k, v in other.rewards.items():
            self.rewards[k].extend(v)
        self.simulations += other.simulations
        self.errors += other.errors
        self.infra += other.infra
        self.nl_skipped += other.nl_skipped
        self.excluded += other.excluded

    @property
    def scored(self) -> int:
        return sum(len(v) for v in self.rewards.values())

    def average(self) -> Optional[float]:
        n = self.scored
        return None if n == 0 else sum(sum(v) for v in self.rewards.values()) / n

    def pass_hat(self) -> dict[int, float]:
        """tau2's pass^k for k = 1 .. min(num_trials, fewest trials of a task)."""
        return pass_hat(self.rewards, self.num_trials)
