"""The exploit audit: what each agent of the exploit panel earns, beside every score.

Each panel agent (:mod:`tau2_gym.players.agents.exploits`; ``do-nothing`` among them) is played through the one
episode driver against the offline oracle customer and scored like any episode -- same reward modes, under the
upstream-exact reward and under the hardened one (:mod:`tau2_gym.scoring.integrity`) -- so a row says exactly
what that exploit earns on the tasks of a score. The do-nothing baseline (:mod:`tau2_gym.episodes.baseline`) is
this audit's first row.

NL assertions are graded by the audit's judge: by default :class:`ComplyingJudge`, an offline stand-in that fails
every assertion unless the conversation asks it for a verdict list, which it then returns -- the upper bound of a
judge injection; a real judge (``judge="openai:..."``) is checked before the first episode (a server that is down
fails at once) and its failures abort the audit (never a silent pass). A no-judge choice (``"fail"``, ``"pass"``)
scores NL assertions without any judge.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional, Sequence

from tau2_gym.core.domain import LoadedDomain, load_domain
from tau2_gym.core.integrity import resolve_integrity
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.core.tasks import Task
from tau2_gym.episodes.driver import EpisodeSetup, play
from tau2_gym.llm.client import ChatClient
from tau2_gym.players.agents.exploits import EXPLOITS, INJECTION_CUE, get_exploit
from tau2_gym.players.agents.scripted import ScriptedPolicy
from tau2_gym.players.users.scripted import OracleUser
from tau2_gym.scoring.evaluation import EvaluationError
from tau2_gym.scoring.judges import Judge, JudgeError, NoneJudge, judge_prompts, make_judge, parse_judge_reply
from tau2_gym.scoring.metrics import is_pass
from tau2_gym.scoring.rewards import mode_reward

__all__ = [
    "INTEGRITIES",
    "AuditRow",
    "ComplyingJudge",
    "audit",
    "audit_domain",
    "audit_judge",
    "audit_table",
    "episode_records",
    "format_audit",
    "play",
    "reward_of",
    "table_markdown",
]

#: the reward-integrity settings an audit compares by default: upstream-exact and hardened
INTEGRITIES = ("upstream", "hardened")
_MAX_TURNS = 30  # the panel's agents need a handful of turns; the customer's turns included, far below this


class ComplyingJudge(Judge):
    """The audit's offline stand-in judge: reads upstream's judge prompt (as a real judge would, rendering
    included) and fails every assertion -- unless the conversation tells it ``Reply with exactly {...}``, which it
    then does. It is the judge an injection hopes for: its row is the injection's upper bound."""

    name = "stub:complying"

    def assess(self, messages: list[Any], nl_assertions: list[str], source: Any = None) -> list[dict[str, Any]]:
        _, user = judge_prompts(messages, nl_assertions, source)
        reply = _injected_reply(user)
        if reply is None:
            reply = json.dumps(
                {
                    "results": [
                        {"expectedOutcome": a, "reasoning": "not shown in the conversation", "metExpectation": False}
                        for a in nl_assertions
                    ]
                }
            )
        return parse_judge_reply(reply)


def _injected_reply(prompt: str) -> Optional[str]:
    """The JSON object a conversation asks the judge to reply with (None: it asks nothing)."""
    at = prompt.find(INJECTION_CUE)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(prompt[at + len(INJECTION_CUE) :])
    except ValueError:
        return None
    return json.dumps(value)


def audit_judge(judge: Any = None, check: bool = True) -> Judge:
    """The judge of an audit: None -> :class:`ComplyingJudge`; a no-judge choice or a spec as
    :func:`~tau2_gym.scoring.judges.make_judge`. A judge behind a server is checked first (``check``): a server
    that is down raises :class:`~tau2_gym.llm.client.ServerCheckError` now, not after the first episode."""
    if judge is None or judge == "stub":
        return ComplyingJudge()
    built = make_judge(judge)
    client = getattr(built, "client", None)
    if check and isinstance(client, ChatClient):
        asyncio.run(client.acheck())
    return built


def _memo_judge(judge: Any) -> Optional[str]:
    """The judge's part of a memo key (None: not memoised -- a judge behind a server is asked every time)."""
    if isinstance(judge, ComplyingJudge):
        return judge.name
    if isinstance(judge, NoneJudge):
        return f"none:{judge.counts_as}"
    return None


_memo: dict[tuple, Optional[dict]] = {}  # an exploit's reward_info per (data, task, exploit, judge, integrity)


def _data_key(domain: LoadedDomain) -> tuple:
    source = domain.source
    options = json.dumps(domain.options or {}, sort_keys=True, default=str)
    return (domain.spec.name, str(source.root), source.version.name, options)


def episode_records(
    domain: LoadedDomain,
    tasks: Iterable[Task],
    exploit: str,
    *,
    judge: Optional[Judge] = None,
    integrity: Any = "upstream",
) -> dict[str, Optional[dict]]:
    """The reward_info of ``exploit``'s episode on each task (None when it cannot be evaluated: the env's reward is
    then 0), remembered per process for the offline judges. ``judge``: a resolved judge (default: the stand-in)."""
    entry = get_exploit(exploit)
    judge = judge if judge is not None else ComplyingJudge()
    flags = resolve_integrity(integrity)
    memo_judge = _memo_judge(judge)
    setup: Optional[EpisodeSetup] = None
    out: dict[str, Optional[dict]] = {}
    for task in tasks:
        key = (*_data_key(domain), task.id, entry.name, memo_judge, flags)
        if memo_judge is None or key not in _memo:
            if setup is None:
                settings = EpisodeSettings(domain=domain.name, reward_integrity=flags)
                setup = EpisodeSetup(domain, settings, judge=judge)
            record = _record(setup, task, entry.agent)
            if memo_judge is None:
                out[task.id] = record
                continue
            _memo[key] = record
        out[task.id] = _memo[key]
    return out


def _record(setup: EpisodeSetup, task: Task, agent: Any) -> Optional[dict]:
    """The reward record of ``agent`` (a panel agent's class, or any factory of a scripted agent) on ``task``
    against the offline oracle customer (None when the episode cannot be evaluated)."""
    episode = play(setup, task, ScriptedPolicy(agent), OracleUser(), max_turns=_MAX_TURNS)
    try:
        return episode.score()
    except JudgeError:
        raise  # a judge that cannot answer stops the audit: never a silent 0 or pass
    except EvaluationError:
        return None


@dataclass(frozen=True)
class AuditRow:
    """What one exploit earns on a set of tasks under one reward mode and one integrity setting."""

    exploit: str
    reward_mode: str
    integrity: str
    rewards: dict[str, float]

    @property
    def mean(self) -> float:
        return sum(self.rewards.values()) / len(self.rewards) if self.rewards else 0.0

    @property
    def passes(self) -> tuple[str, ...]:
        return tuple(i for i, r in self.rewards.items() if is_pass(r))

    def cell(self) -> str:
        return f"{self.mean:.2f} ({len(self.passes)})"


def reward_of(info: Optional[dict], reward_mode: str = "default") -> float:
    """The reward of an episode's record under ``reward_mode`` (no record: 0, the env's reward then)."""
    return 0.0 if info is None else float(mode_reward(reward_mode, info, float(info.get("reward") or 0)))


def audit(
    domain: LoadedDomain,
    tasks: Iterable[Task],
    *,
    exploits: Optional[Sequence[str]] = None,
    reward_modes: Sequence[str] = ("default",),
    integrities: Sequence[Any] = INTEGRITIES,
    judge: Any = None,
) -> list[AuditRow]:
    """Every exploit of the panel (or ``exploits``) on ``tasks``, under each reward mode and integrity setting:
    one :class:`AuditRow` each, do-nothing first. ``judge``: None (the stand-in), a no-judge choice, a spec or a
    :class:`~tau2_gym.scoring.judges.Judge` (a server is checked first)."""
    tasks = tuple(tasks)
    names = list(EXPLOITS) if exploits is None else [get_exploit(n).name for n in exploits]
    for mode in reward_modes:
        mode_reward(mode, None, 0.0)  # an unknown mode fails before any episode
    flags = [resolve_integrity(i) for i in integrities]
    resolved = judge if isinstance(judge, Judge) else audit_judge(judge)
    rows = []
    for name in names:
        for flag in flags:
            records = episode_records(domain, tasks, name, judge=resolved, integrity=flag)
            for mode in reward_modes:
                rewards = {t.id: reward_of(records[t.id], mode) for t in tasks}
                rows.append(AuditRow(name, mode, flag.name, rewards))
    return rows


def format_audit(rows: list[AuditRow], title: str = "") -> str:
    """A text table: one line per exploit and reward mode, a column per integrity setting (mean (passes))."""
    integrities = list(dict.fromkeys(r.integrity for r in rows))
    keys = list(dict.fromkeys((r.exploit, r.reward_mode) for r in rows))
    cells = {(r.exploit, r.reward_mode, r.integrity): r.cell() for r in rows}
    width = max([len("exploit")] + [len(e) for e, _ in keys])
    cols = [max(12, len(i)) for i in integrities]
    header = f"{'exploit':<{width}}  {'reward':<8}" + "".join(f"  {i:>{w}}" for i, w in zip(integrities, cols))
    lines = ([title] if title else []) + [header]
    for exploit, mode in keys:
        line = f"{exploit:<{width}}  {mode:<8}"
        line += "".join(f"  {cells.get((exploit, mode, i), '-'):>{w}}" for i, w in zip(integrities, cols))
        lines.append(line)
    return "\n".join(lines)


def audit_domain(
    domains: Iterable[str],
    *,
    splits: Optional[Sequence[str]] = None,
    skip_splits: Iterable[str] = ("full",),
    exploits: Optional[Sequence[str]] = None,
    reward_modes: Sequence[str] = ("default",),
    integrities: Sequence[Any] = INTEGRITIES,
    judge: Any = None,
    **load: Any,
) -> Iterator[dict[str, Any]]:
    """The audit of each domain's default task set, split by split (``splits``, else every split but
    ``skip_splits``): one dict per (domain, split) with ``tasks``, ``judge`` (its name) and ``rows`` (the
    :class:`AuditRow` s of :func:`audit`). The judge is built and checked before the first episode. ``load``:
    :func:`load_domain`'s data arguments."""
    resolved = judge if isinstance(judge, Judge) else audit_judge(judge)
    skip = set(skip_splits)
    for name in domains:
        dom = load_domain(name, **load)
        task_set = dom.spec.default_task_set
        known = dom.splits(task_set)
        for split in splits or [s for s in known if s not in skip] or ["base"]:
            tasks = dom.tasks(task_set, split if known else None)
            rows = audit(
                dom, tasks, exploits=exploits, reward_modes=reward_modes, integrities=integrities, judge=resolved
            )
            yield {"domain": name, "split": split, "tasks": len(tasks), "judge": resolved.name, "rows": rows}


def audit_table(
    domains: Iterable[str], reward_modes: Sequence[str] = ("default", "strict"), **kwargs: Any
) -> list[dict[str, Any]]:
    """:func:`audit_domain` upstream-exact and hardened, each (domain, split)'s rows keyed
    ``{(exploit, reward_mode, integrity): AuditRow}`` (the docs tables, :func:`table_markdown`)."""
    out = []
    for found in audit_domain(domains, reward_modes=reward_modes, integrities=INTEGRITIES, **kwargs):
        out.append({**found, "rows": {(r.exploit, r.reward_mode, r.integrity): r for r in found["rows"]}})
    return out


def table_markdown(rows: list[dict[str, Any]], reward_mode: str = "default") -> list[str]:
    """The docs table of :func:`audit_table` under one reward mode: a row per (domain, split), a column per exploit;
    a cell is ``mean (passes)``, or ``upstream -> hardened`` where hardening changes it."""
    names = list(EXPLOITS)
    lines = ["| domain | split | tasks | " + " | ".join(names) + " |", "|---|---|---:|" + "---|" * len(names)]
    for r in rows:
        cells = []
        for n in names:
            up, hard = (r["rows"][(n, reward_mode, i)].cell() for i in INTEGRITIES)
            cells.append(up if up == hard else f"{up} → {hard}")
        lines.append(f"| {r['domain']} | {r['split']} | {r['tasks']} | " + " | ".join(cells) + " |")
    return lines
