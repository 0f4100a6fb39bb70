"""Run metrics, in one place for ``eval``, ``rollout`` summaries, reports and the difficulty profiler: tau2's pass^k (a
pass is a reward of 1 within :data:`PASS_TOLERANCE`), per-file tallies of what was scored and what was left out, and
why, and per-task pass rates with their Wilson interval, bucketed by pass-rate edges (:class:`PassRateBuckets`)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence, Union

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
    "DEFAULT_BUCKETS",
    "DEFAULT_KEEP",
    "PassRateBuckets",
    "is_pass",
    "nl_unjudged",
    "pass_hat",
    "pass_hat_k",
    "shown_ks",
    "summarize",
    "wilson_interval",
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


# ------------------------------------------------------------------------------------------ pass rates and buckets


def wilson_interval(passes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a pass rate (95% with the default ``z``): unlike the normal approximation it
    stays inside [0, 1] and is not empty at 0 or k passes, which is where most tasks of a profile sit."""
    if trials < 1:
        raise ValueError(f"trials={trials} must be >= 1")
    if not 0 <= passes <= trials:
        raise ValueError(f"passes={passes} must lie in [0, trials={trials}]")
    p = passes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def _fraction(text: Union[str, float, Fraction], name: str) -> Fraction:
    try:
        value = Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"bucket {name!r}: edge {text!r} is not a number or a fraction such as 0.25 or 4/16") from None
    if not 0 <= value <= 1:
        raise ValueError(f"bucket {name!r}: edge {text!r} is not a pass rate in [0, 1]")
    return value


@dataclass(frozen=True)
class PassRateBuckets:
    """Named buckets of a task's pass rate, each given by its upper edge: bucket ``i`` holds the rates ``r`` with
    ``edge[i-1] < r <= edge[i]`` (the first: ``0 <= r <= edge[0]``); the edges increase strictly and the last is 1.

    Edges are fractions of the trials, so one set of buckets serves any k: the default
    ``unsolved=0,hard=1/4,medium=1/2,easy=3/4,mastered=1`` is, at k=16, the Qwen3-8B GRPO run's 0 | 1-4 | 5-8 |
    9-12 | 13-16 passes (:meth:`pass_ranges` gives the counts for any k). Rates compare exactly (fractions), so
    4 of 16 is ``hard`` and 5 of 16 ``medium``.
    """

    names: tuple[str, ...]
    edges: tuple[Fraction, ...]

    def __post_init__(self) -> None:
        if not self.names or len(self.names) != len(self.edges):
            raise ValueError("buckets need one upper edge per name, and at least one bucket")
        dup = sorted({n for n in self.names if self.names.count(n) > 1})
        if dup:
            raise ValueError(f"bucket names {dup} appear twice")
        for n in self.names:
            if not n or not n.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"bucket name {n!r} must be letters, digits, '_' or '-'")
        for (a, ea), (b, eb) in zip(zip(self.names, self.edges), zip(self.names[1:], self.edges[1:])):
            if eb <= ea:
                raise ValueError(
                    f"bucket edges must increase: {a}={ea} then {b}={eb} (each bucket is given by its upper edge, "
                    "e.g. unsolved=0,hard=1/4,medium=1/2,easy=3/4,mastered=1)"
                )
        if self.edges[-1] != 1:
            raise ValueError(
                f"the last bucket's edge must be 1 so that every pass rate has a bucket; got {self.names[-1]}="
                f"{self.edges[-1]}"
            )

    @classmethod
    def parse(cls, spec: Union[str, Sequence[tuple[str, Any]], Mapping[str, Any], PassRateBuckets]) -> PassRateBuckets:
        """From ``"unsolved=0,hard=1/4,..."``, ``[("unsolved", 0), ...]`` or a mapping in edge order."""
        if isinstance(spec, PassRateBuckets):
            return spec
        if isinstance(spec, str):
            items = []
            for part in [p.strip() for p in spec.split(",") if p.strip()]:
                name, sep, edge = part.partition("=")
                if not sep:
                    raise ValueError(f"bucket {part!r} is not NAME=EDGE (e.g. hard=1/4)")
                items.append((name.strip(), edge))
        else:
            items = list(spec.items()) if isinstance(spec, Mapping) else [tuple(x) for x in spec]
        return cls(tuple(str(n) for n, _ in items), tuple(_fraction(e, str(n)) for n, e in items))

    def spec(self) -> str:
        """The ``NAME=EDGE,...`` text :meth:`parse` reads back."""
        return ",".join(f"{n}={e}" for n, e in zip(self.names, self.edges))

    def bucket(self, passes: int, trials: int) -> str:
        """The bucket of ``passes`` successes in ``trials``."""
        if trials < 1:
            raise ValueError(f"trials={trials} must be >= 1")
        rate = Fraction(passes, trials)
        for name, edge in zip(self.names, self.edges):
            if rate <= edge:
                return name
        return self.names[-1]  # unreachable: the last edge is 1

    def pass_ranges(self, k: int) -> dict[str, Optional[tuple[int, int]]]:
        """Per bucket, the (lowest, highest) pass count out of ``k`` it holds; None when it holds none at this k."""
        out: dict[str, Optional[tuple[int, int]]] = {n: None for n in self.names}
        for passes in range(k + 1):
            name = self.bucket(passes, k)
            lo_hi = out[name]
            out[name] = (passes, passes) if lo_hi is None else (lo_hi[0], passes)
        return out

    def describe(self, k: int) -> str:
        """``unsolved 0, hard 1-4, medium 5-8, easy 9-12, mastered 13-16 (of 16)``."""
        parts = []
        for name, r in self.pass_ranges(k).items():
            text = "none" if r is None else (str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}")
            parts.append(f"{name} {text}")
        return ", ".join(parts) + f" (passes of {k})"

    def check_names(self, keep: Sequence[str], what: str = "keep") -> tuple[str, ...]:
        """``keep`` as a tuple of bucket names; an unknown name is one error naming the valid ones."""
        keep = tuple(str(k).strip() for k in keep)
        unknown = [k for k in keep if k not in self.names]
        if unknown:
            raise ValueError(f"unknown bucket(s) {unknown} in {what}; the buckets are: {', '.join(self.names)}")
        if not keep:
            raise ValueError(f"{what} names no bucket; the buckets are: {', '.join(self.names)}")
        return keep

    def default_keep(self) -> tuple[str, ...]:
        """:data:`DEFAULT_KEEP` when these buckets have those names, else every bucket but the first and last."""
        if all(n in self.names for n in DEFAULT_KEEP):
            return DEFAULT_KEEP
        return self.names[1:-1] or self.names


#: The Qwen3-8B tau2 GRPO run's buckets (0 | 1-4 | 5-8 | 9-12 | 13-16 of 16) as pass-rate edges.
DEFAULT_BUCKETS = PassRateBuckets.parse("unsolved=0,hard=1/4,medium=1/2,easy=3/4,mastered=1")
#: The band that run trained on (it found easy + medium + hard best); 0/16 and 13-16/16 were dropped.
DEFAULT_KEEP = ("hard", "medium", "easy")
