"""Telecom tasks to train on: upstream's composed ``full`` task set without the test split's scenarios.

Upstream composes every telecom task from sub-issues (``[intent]sub1|sub2|...[PERSONA:p]``: each sub-issue breaks
the phone or the line one way and has its fix; see the telecom reference). The 2,285 tasks of ``telecom_full`` are
every valid composition, and the benchmark's ``train`` / ``test`` splits are drawn from them. Every telecom task is
the same customer's line, so DB keys cannot tell tasks apart: here the entity of a task is its *composed scenario*,
the set of its sub-issues (intent and persona aside -- the breakage and its fixes are the same). A task shares a
scenario with the test split when its sub-issue set equals a test task's; the machinery's contamination check
removes those (the test tasks themselves and one more), verifies the rest through the env and writes them as a
data folder: ``tau2-gym generate --domain telecom --n 2244 --held-out 0 --out DIR``.

Nothing is composed here: the drafts are the shipped tasks, unchanged but for their notes (ids are upstream's).
"""

from __future__ import annotations

import random
import re
from typing import Iterator, Optional, Sequence

GENERATOR = "tau2_gym.domains.telecom.generate"
GENERATOR_VERSION = 1
INTENTS = ("service_issue", "mobile_data_issue", "mms_issue")
#: the drafts are this task set's tasks (the machinery passes them as ``source_tasks``)
SOURCE_TASK_SET = "telecom_full"
#: the agent's escalation: on a task whose only gold action it is, the fix is out of the agent's reach
TRANSFER = "transfer_to_human_agents"

_COMPOSED = re.compile(r"^\[(?P<intent>\w+)\](?P<subs>[^\[]*)\[PERSONA:(?P<persona>\w+)\]$")


def parse(task_id: str) -> Optional[tuple[str, tuple[str, ...], str]]:
    """(intent, sub-issues in order, persona) of a composed task id; None for other ids."""
    m = _COMPOSED.match(task_id)
    if m is None:
        return None
    return m.group("intent"), tuple(s for s in m.group("subs").split("|") if s), m.group("persona")


def scenario(task_id: str) -> Optional[str]:
    """The composed scenario of a task: its sub-issues, sorted, joined by ``|`` (None for other ids)."""
    parsed = parse(task_id)
    return None if parsed is None else "|".join(sorted(parsed[1]))


def task_entities(task: dict) -> dict[str, list[str]]:
    """The contamination check's entities of a telecom task: its composed scenario."""
    key = scenario(str(task.get("id", "")))
    return {"scenarios": [key]} if key is not None else {}


def draft_tasks(
    db: dict,  # noqa: ARG001 - the drafter interface (draft_tasks)
    *,
    n: int,  # noqa: ARG001 - the drafter interface (draft_tasks)
    seed: int,
    exclude: frozenset[str] = frozenset(),
    intents: Optional[Sequence[str]] = None,
    id_prefix: str = "gen_",  # noqa: ARG001 - the drafter interface (draft_tasks)
    source_tasks: Sequence[dict] = (),
) -> Iterator[dict]:
    """The ``source_tasks`` whose scenario is not excluded, in a seeded order, each once (``n`` and ``id_prefix``
    do not apply: the set is finite and keeps upstream's ids)."""
    wanted = set(intents or INTENTS)
    order = [t for t in source_tasks if parse(str(t.get("id", ""))) is not None]
    random.Random(seed).shuffle(order)
    for task in order:
        parsed = parse(task["id"])
        if parsed is None:  # (filtered out above)
            continue
        intent, subs, persona = parsed
        if intent not in wanted or scenario(task["id"]) in exclude:
            continue
        actions = (task.get("evaluation_criteria") or {}).get("actions") or []
        escalation = [a["name"] for a in actions] == [TRANSFER]
        yield {
            "task": task,
            "intent": intent,
            "variant": "allowed",
            "forbidden_actions": [],
            "needs_write": not escalation,
            "rules": [
                f"telecom tech support manual: the fix of each sub-issue ({', '.join(subs)})"
                if not escalation
                else "telecom main policy: transfer to a human agent when the issue cannot be fixed"
            ],
            "entities": task_entities(task),
        }
