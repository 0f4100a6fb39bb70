"""Run metrics, in one place for ``eval``, ``rollout`` summaries and reports: tau2's pass^k (a pass is a reward of
1 within :data:`PASS_TOLERANCE`), and per-file tallies of what was scored and what was left out, and why."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from tau2_gym.core.actions import EMPTY_REPLY, EMPTY_REPLY_KEY, REASONING_ONLY_REPLY
from tau2_gym.core.termination import TerminationReason

__all__ = [
    "BOOTSTRAP_SAMPLES",
    "BOOTSTRAP_SEED",
    "CI_LEVEL",
    "COMPONENTS",
    "EXCLUDED",
    "PASS_TOLERANCE",
    "RunSummary",
    "SimStats",
    "Tally",
    "bootstrap_ci",
    "empty_agent_replies",
    "is_pass",
    "nl_unjudged",
    "pass_hat",
    "pass_hat_k",
    "shown_ks",
    "summarize",
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
        if termination == TerminationReason.INFRASTRUCTURE_ERROR:
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


# ------------------------------------------------------------------------------------ run summaries

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95
#: the reward components, in the order summaries list them
COMPONENTS = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTION")


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


@dataclass
class SimStats:
    """What the summary needs of one simulation (computed once; the details view gets the same facts)."""

    index: int
    task_id: str
    trial: Optional[int]
    reward: Optional[float]
    termination: str
    infra: bool
    tool_calls: int = 0
    tool_errors: int = 0
    hallucinated: list[str] = field(default_factory=list)
    transfer: bool = False
    failed: set[str] = field(default_factory=set)  # components with a failed check
    basis: frozenset[str] = frozenset()

    @property
    def passed(self) -> bool:
        return self.reward is not None and not self.infra and is_pass(self.reward)

    @property
    def cell(self) -> str:
        """Grid class: p pass, f fail (0), h partial, n not scored, x infrastructure error."""
        if self.infra:
            return "x"
        if self.reward is None:
            return "n"
        if self.passed:
            return "p"
        return "f" if self.reward <= PASS_TOLERANCE else "h"


@dataclass
class RunSummary:
    """The summary numbers of one run (what the report prints, and what tests and the CLI read)."""

    simulations: int
    scored: int
    skipped: int
    infra: int
    unscored: int
    nl_unjudged: int  # scored without an NL-assertion judge (reward_info.info.nl.skipped)
    average: Optional[float]
    baseline: Optional[float]  # the do-nothing baseline of the run's tasks
    pass_hat: dict[int, tuple[float, float, float]]  # k -> (value, ci low, ci high), for the shown_ks
    terminations: Counter
    tool_calls: int
    tool_errors: int
    sims_with_tool_errors: int
    hallucinated_calls: int
    hallucinated_names: Counter
    transfers: int
    tokens: dict[str, Optional[tuple[int, int]]]  # agent/user -> (prompt, completion), None when unknown
    cost: dict[str, Optional[float]]
    cost_known: int
    components: dict[str, tuple[int, int]]  # component -> (failed in the reward basis, failed outside it)
    scored_terminations: Counter = field(default_factory=Counter)  # the endings of the scored episodes
    db_checked: int = 0  # scored episodes whose reward_info has a DB check
    db_matched: int = 0
    scored_agent_cost: float = 0.0  # the agent's cost over the scored episodes
    scored_episodes: int = 0  # scored episodes (not infrastructure errors, with a reward_info)


def bootstrap_ci(
    values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED, level: float = CI_LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one value per task), resampling tasks."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    if v.size == 1 or samples <= 0:
        return float(v.mean()), float(v.mean())
    rng = np.random.default_rng(seed)
    means = np.empty(samples)
    chunk = max(1, 2_000_000 // v.size)  # bounded memory for large task sets
    for start in range(0, samples, chunk):
        n = min(chunk, samples - start)
        means[start : start + n] = v[rng.integers(0, v.size, size=(n, v.size))].mean(axis=1)
    alpha = (1.0 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


MAX_KS_SHOWN = 16


def shown_ks(ks: Sequence[int]) -> list[int]:
    """Every k up to 16; beyond, 1-8, the powers of two and the last (a 200-trial run needs no 200 rows)."""
    if len(ks) <= MAX_KS_SHOWN:
        return list(ks)
    keep = {k for k in ks if k <= 8 or (k & (k - 1)) == 0} | {max(ks)}
    return [k for k in ks if k in keep]


def summarize(
    simulations: Sequence[Mapping[str, Any]],
    num_trials: int,
    stats: Sequence[SimStats] = (),
    baseline: Optional[float] = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> RunSummary:
    """The summary of a run's simulations (plain SimulationRun dicts; ``messages`` are not read): scored and left
    out, the average and pass^k with bootstrap intervals, terminations of the scored episodes, the DB check, tokens
    and cost per side; ``stats`` (one :class:`SimStats` per simulation, from a reader that analysed the messages)
    adds the tool-call and component counts."""
    tally = Tally(domain="", num_trials=num_trials)
    for s in simulations:
        tally.add(str(s.get("task_id")), s.get("termination_reason"), s.get("reward_info"))
    pass_hat_ci: dict[int, tuple[float, float, float]] = {}
    values = tally.pass_hat()
    for k in shown_ks(sorted(values)):
        per_task = [pass_hat_k(len(v), sum(1 for r in v if is_pass(r)), k) for v in tally.rewards.values()]
        lo, hi = bootstrap_ci(per_task, samples, seed)
        pass_hat_ci[k] = (values[k], lo, hi)
    tokens: dict[str, Optional[tuple[int, int]]] = {}
    cost: dict[str, Optional[float]] = {}
    for who in ("agent", "user"):
        usages = [u for u in (s.get(f"{who}_usage") for s in simulations) if isinstance(u, dict)]
        tokens[who] = (
            (sum(_int(u.get("prompt_tokens")) for u in usages), sum(_int(u.get("completion_tokens")) for u in usages))
            if usages
            else None
        )
        costs = [float(s[f"{who}_cost"]) for s in simulations if s.get(f"{who}_cost") is not None]
        cost[who] = sum(costs) if costs else None
    scored = [
        s
        for s in simulations
        if s.get("termination_reason") != TerminationReason.INFRASTRUCTURE_ERROR and s.get("reward_info") is not None
    ]
    db = [(s["reward_info"].get("db_check") or {}).get("db_match") for s in scored]
    db_checked = [d for d in db if d is not None]
    halluc = Counter(n for s in stats for n in s.hallucinated)
    return RunSummary(
        simulations=len(simulations),
        scored=tally.scored,
        skipped=0,
        infra=tally.infra,
        unscored=tally.errors,
        nl_unjudged=tally.nl_skipped,
        average=tally.average(),
        baseline=baseline,
        pass_hat=pass_hat_ci,
        terminations=Counter(str(s.get("termination_reason") or "unknown") for s in simulations),
        scored_terminations=Counter(str(s.get("termination_reason")) for s in scored),
        tool_calls=sum(s.tool_calls for s in stats),
        tool_errors=sum(s.tool_errors for s in stats),
        sims_with_tool_errors=sum(1 for s in stats if s.tool_errors),
        hallucinated_calls=sum(halluc.values()),
        hallucinated_names=halluc,
        transfers=sum(1 for s in stats if s.transfer),
        tokens=tokens,
        cost=cost,
        cost_known=sum(1 for s in simulations if s.get("agent_cost") is not None or s.get("user_cost") is not None),
        components={
            c: (
                sum(1 for s in stats if c in s.failed and c in s.basis),
                sum(1 for s in stats if c in s.failed and c not in s.basis),
            )
            for c in COMPONENTS
        },
        db_checked=len(db_checked),
        db_matched=sum(1 for d in db_checked if d),
        scored_agent_cost=sum(float(s.get("agent_cost") or 0.0) for s in scored),
        scored_episodes=len(scored),
    )
