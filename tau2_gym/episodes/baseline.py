"""The do-nothing baseline: what a policy earns that takes no action and ends the conversation politely.

Why it matters: many tau2 tasks are passed by doing nothing -- their gold outcome is an unchanged database
(a refused cancellation, a policy violation the agent must decline) -- so a score means little without this
number beside it, and a learner rewarded on those tasks can learn to refuse (upstream's tracker,
sierra-research/tau2-bench#384: 23 airline refusal tasks pass with no action). The baseline is the first row of the
exploit audit (:mod:`tau2_gym.episodes.audit`): played by the one episode driver with the scripted ``give_up``
agent and the offline oracle customer, scored like any episode (same reward mode and no-judge choice), so it is
exact for the env it is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from tau2_gym.core.domain import LoadedDomain, load_domain
from tau2_gym.core.integrity import UPSTREAM
from tau2_gym.core.tasks import Task
from tau2_gym.episodes.audit import AuditRow, episode_records, reward_of
from tau2_gym.scoring.evaluation import NO_JUDGE_CHOICES
from tau2_gym.scoring.judges import JudgeSpec, make_judge
from tau2_gym.scoring.rewards import REWARD_MODES

__all__ = ["Baseline", "baseline_table", "do_nothing_baseline", "without_do_nothing_passes"]

#: the scripted agent that plays the baseline (no tool call, one polite closing message) and its panel name
DO_NOTHING_AGENT = "give_up"
DO_NOTHING = "do-nothing"


@dataclass(frozen=True)
class Baseline(AuditRow):
    """Per-task rewards of the do-nothing policy on a set of tasks, under one reward mode: the audit's first row
    (:class:`~tau2_gym.episodes.audit.AuditRow`), with the domain it was played on."""

    domain: str = ""

    def line(self) -> str:
        return (
            f"baseline: do-nothing {self.mean:.2f} ({len(self.passes)} of {len(self.rewards)} tasks pass with no "
            f"action; reward mode {self.reward_mode})"
        )


def _judge_choice(judge: JudgeSpec) -> str:
    """The no-judge choice the baseline scores NL assertions with: the caller's when it is one, else 'fail' (a
    goodbye meets no NL assertion, and the baseline must never call an LLM judge)."""
    return judge if isinstance(judge, str) and judge in NO_JUDGE_CHOICES else "fail"


def do_nothing_baseline(
    domain: LoadedDomain, tasks: Iterable[Task], *, reward_mode: str = "default", judge: JudgeSpec = None
) -> Baseline:
    """Play the do-nothing policy on ``tasks`` (remembered per process: a task's baseline never changes): the
    ``do-nothing`` row of the exploit audit (:func:`tau2_gym.episodes.audit.episode_records`).

    ``judge``: the env's NL-judge setting; a no-judge choice ('fail', 'pass', 'exclude') is honoured, anything
    else (an LLM judge) scores NL assertions as 'fail' -- a goodbye meets none.
    """
    tasks = tuple(tasks)
    records = episode_records(domain, tasks, DO_NOTHING, judge=make_judge(_judge_choice(judge)))
    rewards = {t.id: reward_of(records[t.id], reward_mode) for t in tasks}
    return Baseline(DO_NOTHING, reward_mode, UPSTREAM.name, rewards, domain=domain.spec.name)


def without_do_nothing_passes(
    domain: LoadedDomain, tasks: Iterable[Task], reward_mode: str = "default", judge: JudgeSpec = None
) -> tuple[Task, ...]:
    """``tasks`` without those the do-nothing policy passes under ``reward_mode`` (a training pool with no free
    reward for refusing); refuses to leave nothing."""
    tasks = tuple(tasks)
    passes = set(do_nothing_baseline(domain, tasks, reward_mode=reward_mode, judge=judge).passes)
    kept = tuple(t for t in tasks if t.id not in passes)
    if not kept:
        raise ValueError(
            f"every one of the {len(tasks)} {domain.spec.name!r} tasks is passed by doing nothing: "
            "exclude_do_nothing_passes would leave no task"
        )
    return kept


def baseline_table(
    domains: Iterable[str],
    reward_modes: Iterable[str] = REWARD_MODES,
    skip_splits: Iterable[str] = ("full",),
    judge: JudgeSpec = None,
    **load: Any,
) -> list[dict[str, Any]]:
    """The do-nothing baseline of the splits of each domain's default task set, under each reward mode: one row
    per (domain, split) with ``tasks`` and ``{mode: Baseline}``. ``skip_splits``: splits left out (telecom's
    2,285-task ``full``, by default); ``judge`` as :func:`do_nothing_baseline`; ``load``: :func:`load_domain`'s data
    arguments."""
    rows = []
    modes, skip_splits = tuple(reward_modes), set(skip_splits)
    for name in domains:
        dom = load_domain(name, **load)
        task_set = dom.spec.default_task_set
        for split in dom.splits(task_set) or {"base": None}:
            if split in skip_splits:
                continue
            tasks = dom.tasks(task_set, split if dom.splits(task_set) else None)
            by_mode = {m: do_nothing_baseline(dom, tasks, reward_mode=m, judge=judge) for m in modes}
            rows.append({"domain": name, "split": split, "tasks": len(tasks), "baselines": by_mode})
    return rows
