"""A stand-in task generator for tests of the generation machinery: benchmark train tasks turned into drafts.

The real airline and retail generators live in their domains; this one lets the machinery (contamination check,
verification, splits, writing) be proven on those domains without them. It follows the generator contract
(``GENERATOR_VERSION``, ``INTENTS``, ``draft_tasks``) and keeps out of ``exclude`` like a real generator must.
"""

from __future__ import annotations

import copy
import json
import random
import re
from types import SimpleNamespace
from typing import Iterator, Optional, Sequence

from tau2_gym.core.domain import load_domain

INTENTS = ("write", "read")
_TOKEN = re.compile(r"#?\w+")


def _tokens(value) -> set[str]:
    return set(_TOKEN.findall(json.dumps(value)))


def benchmark_drafter(domain: str, split: str = "train") -> SimpleNamespace:
    """A generator whose drafts are ``domain``'s ``split`` tasks (renamed, in a seeded order, each once).

    Intent ``write`` when the gold actions change the DB, else ``read``; a read-only task whose customer asks to
    cancel a reservation of theirs is a refused variant with that cancellation as its forbidden action. Reward
    bases lose NL_ASSERTION (the real generators score DB and COMMUNICATE only).
    """
    loaded = load_domain(domain)
    wanted = set(loaded.splits()[split])
    raw = [t for t in json.loads(loaded.task_file().read_text(encoding="utf-8")) if t["id"] in wanted]
    toolkit = loaded.agent_toolkit
    db = loaded.base_db.data

    def draft(task: dict, i: int, id_prefix: str) -> dict:
        task = copy.deepcopy(task)
        task["id"] = f"{id_prefix}{i:03d}"
        task["description"] = {"purpose": f"benchmark task {task['id']} as a draft", "notes": "tests/genutil.py"}
        crit = task["evaluation_criteria"]
        crit["reward_basis"] = [b for b in crit["reward_basis"] if b != "NL_ASSERTION"]
        actions = crit.get("actions") or []
        writes = [a for a in actions if toolkit.mutates_state(a["name"])]
        tokens = _tokens(task)
        users = sorted(tokens & set(db.get("users", {})))
        out = {
            "task": task,
            "intent": "write" if writes else "read",
            "variant": "allowed",
            "forbidden_actions": [],
            "needs_write": bool(writes),
            "rules": ["tests/genutil.py: the benchmark's own gold"],
            "entities": {"users": users},
        }
        instructions = task["user_scenario"]["instructions"]
        asked = " ".join(str(instructions.get(k) or "") for k in ("reason_for_call", "known_info"))
        owned = [r for r in _TOKEN.findall(asked) if r in db.get("reservations", {})]
        if not writes and "cancel" in asked.lower() and owned:
            out["variant"] = "refused"
            out["forbidden_actions"] = [{"name": "cancel_reservation", "arguments": {"reservation_id": owned[0]}}]
        return out

    def draft_tasks(
        db: dict,
        *,
        n: int,
        seed: int,
        exclude: frozenset = frozenset(),
        intents: Optional[Sequence[str]] = None,
        id_prefix: str = "gen_",
    ) -> Iterator[dict]:
        order = list(raw)
        random.Random(seed).shuffle(order)
        for i, task in enumerate(order):
            if _tokens(task) & exclude:
                continue
            d = draft(task, i, id_prefix)
            if intents is None or d["intent"] in intents:
                yield d

    return SimpleNamespace(
        __name__=f"tests.genutil.benchmark_drafter({domain!r})",
        GENERATOR_VERSION=1,
        INTENTS=INTENTS,
        draft_tasks=draft_tasks,
    )
