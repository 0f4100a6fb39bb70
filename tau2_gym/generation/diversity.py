"""The diversity report of a generated set: what a trainer should look at before trusting it.

A set of 1,000 tasks that are one request with different ids teaches one thing. The report counts the intent mix
(and allowed vs refused), the policy rules the tasks apply (as the generator cites them), the gold-action counts
against the benchmark's own tasks, distinct customers, and the
customer's opening message reduced to a template (ids, numbers, quoted text and mid-sentence capitalised words
masked): how many different ways the customer starts.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from typing import Any, Iterable, Mapping

from tau2_gym.core.tasks import StructuredUserInstructions, Task
from tau2_gym.players.users.scripted import opening_line

__all__ = ["diversity_report", "opening_template"]

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|“[^”]*”")
_WORD = re.compile(r"#?[\w$.,@-]+")
_SENTENCE_END = (".", "!", "?", ":")
TOP = 5


def opening_template(text: str, keys: Mapping[str, Any]) -> str:
    """The opening message with its particulars masked: DB keys -> ``<id>``, anything with a digit -> ``<n>``,
    quoted text -> ``<q>``, capitalised words inside a sentence (names, places) -> ``<Name>``."""
    text = _QUOTED.sub("<q>", " ".join(text.split()))
    out: list[str] = []
    sentence_start = True
    for word in text.split(" "):
        core = word.strip(".,;:!?()")
        if core in keys or core.lstrip("#") in keys:
            masked = "<id>"
        elif any(c.isdigit() for c in core):
            masked = "<n>"
        elif core[:1].isupper() and not sentence_start and core != "I" and not core.startswith("<"):
            masked = "<Name>"
        else:
            masked = None
        out.append(word if masked is None else word.replace(core, masked, 1))
        sentence_start = word.endswith(_SENTENCE_END)
    return " ".join(out)


def _actions(task: Task) -> int:
    ec = task.evaluation_criteria
    return len(ec.actions or []) if ec is not None else 0


def _stats(counts: list[int]) -> dict[str, Any]:
    return {
        "mean": round(statistics.fmean(counts), 2) if counts else None,
        "histogram": {str(k): v for k, v in sorted(Counter(counts).items())},
    }


def diversity_report(
    drafts: Iterable[dict], tasks: Iterable[Task], benchmark: Iterable[Task], keys: Mapping[str, Any]
) -> dict[str, Any]:
    """The report of accepted ``drafts`` (their validated ``tasks``, same order) against the domain's ``benchmark``
    tasks; ``keys``: the domain's DB keys (masked in templates)."""
    drafts, tasks, benchmark = list(drafts), list(tasks), list(benchmark)
    users = Counter(u for d in drafts for u in set((d.get("entities") or {}).get("users") or ()))
    templates = Counter(opening_template(opening_line(t), keys) for t in tasks)
    structured = sum(isinstance(t.user_scenario.instructions, StructuredUserInstructions) for t in tasks)
    return {
        "intent_mix": dict(sorted(Counter(d["intent"] for d in drafts).items())),
        "variants": dict(sorted(Counter(d.get("variant", "allowed") for d in drafts).items())),
        "needs_write": sum(1 for d in drafts if d.get("needs_write")),
        "rules_applied": dict(Counter(r for d in drafts for r in d.get("rules") or ()).most_common()),
        "gold_actions": {**_stats([_actions(t) for t in tasks]), "benchmark": _stats([_actions(t) for t in benchmark])},
        "distinct_users": len(users),
        "most_tasks_per_user": max(users.values()) if users else 0,
        "structured_instructions": structured,
        "opening_templates": {
            "distinct": len(templates),
            "top": [[tpl, n] for tpl, n in templates.most_common(TOP)],
        },
    }
