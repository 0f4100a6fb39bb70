"""The contamination check: a generated task never uses an entity that the benchmark's test split touches.

An *entity* is a key of one of the domain's id-keyed DB tables (``DBSchema.tables``: user ids, reservation and
order ids, flight numbers, product ids, ...; records that tasks add through ``initial_state.initialization_data``
count too), plus whatever the domain's generator declares through ``task_entities(task)`` (telecom: the composed
scenario, since every telecom task is the same customer's line). Nothing here names a domain.

The test split's entities are found in every string of its tasks -- gold actions, initial state, instructions,
criteria -- as whole values or as word tokens (``#W2378156``, ``mia_li_3668``), then closed over what customers
own: a found record's links to other records (an order names its user, a user lists their orders) are followed
to a fixed point, except into *catalog* tables (tables whose records name no other record: flights, products),
which count only where a test task names them. So a retail test task that names only an order keeps its customer,
and every order of that customer, out of generated sets.

A draft is contaminated when one of its strings, one of the entities it declares, or one of the entities
``task_entities`` gives it is in that set.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from tau2_gym.core.db import json_strings

__all__ = ["Contamination", "EntityIndex", "TEST_SPLIT", "contamination_check", "task_entities"]

TEST_SPLIT = "test"
_TOKEN = re.compile(r"#?\w+")
Hook = Optional[Callable[[dict], Mapping[str, Iterable[Any]]]]


@dataclass(frozen=True)
class EntityIndex:
    """Every id-keyed DB record of a domain: key -> its table; which records each customer-owned record names
    (``links``); the catalog tables (records that name no other record)."""

    keys: Mapping[str, str]
    links: Mapping[str, frozenset[str]] = field(default_factory=dict)
    catalog: frozenset[str] = frozenset()

    @classmethod
    def of(cls, db: Mapping[str, Any], tables: Iterable[str], tasks: Iterable[dict] = ()) -> EntityIndex:
        """The keys of ``tables`` in ``db`` and in the tasks' initialization data (records a task adds)."""
        tables = tuple(tables)
        keys: dict[str, str] = {}
        for table in tables:
            for key in db.get(table) or {}:
                keys.setdefault(str(key), table)
        for task in tasks:
            data = ((task.get("initial_state") or {}).get("initialization_data") or {}).get("agent_data") or {}
            for table in tables:
                for key in data.get(table) or {}:
                    keys.setdefault(str(key), table)
        plain = cls(keys)
        named: dict[str, dict[str, set[str]]] = {}  # key -> {table: keys its record names}
        for table in tables:
            for key, record in (db.get(table) or {}).items():
                found = plain.find(record)
                found.pop(table, None)
                named[str(key)] = found
        catalog = frozenset(t for t in tables if not any(named[str(k)] for k in db.get(t) or {}))
        links = {
            key: frozenset(v for t, vs in found.items() if t not in catalog for v in vs)
            for key, found in named.items()
            if keys[key] not in catalog
        }
        return cls(keys, {k: v for k, v in links.items() if v}, catalog)

    def find(self, value: Any) -> dict[str, set[str]]:
        """The entities named anywhere in a JSON value, by table."""
        found: dict[str, set[str]] = {}
        keys = self.keys
        if not keys:
            return found
        for s in json_strings(value):
            if s in keys:
                found.setdefault(keys[s], set()).add(s)
            for token in _TOKEN.findall(s):
                if token in keys:
                    found.setdefault(keys[token], set()).add(token)
        return found

    def owned(self, found: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
        """``found`` closed over the links of customer-owned records (catalog entries are kept, not followed)."""
        out = {t: set(v) for t, v in found.items()}
        stack = [k for t, vs in found.items() if t not in self.catalog for k in vs]
        seen = set(stack)
        while stack:
            for linked in self.links.get(stack.pop(), ()):
                if linked not in seen:
                    seen.add(linked)
                    stack.append(linked)
                    out.setdefault(self.keys[linked], set()).add(linked)
        return out


def task_entities(task: dict, index: EntityIndex, hook: Hook = None) -> dict[str, set[str]]:
    """A task's entities: the DB keys it names, plus the generator's own kinds (``task_entities`` hook)."""
    found = index.find(task)
    if hook is not None:
        for kind, values in (hook(task) or {}).items():
            found.setdefault(str(kind), set()).update(str(v) for v in values)
    return found


@dataclass(frozen=True)
class Contamination:
    """The test split's entities, and the check every draft passes before it is verified.

    ``split`` is None when the domain has no test split (nothing to keep out; recorded as such).
    """

    index: EntityIndex
    entities: Mapping[str, frozenset[str]]
    split: Optional[str]
    test_tasks: tuple[str, ...]
    hook: Hook = None
    rejected: dict[str, int] = field(default_factory=dict)  # drafts rejected, by the kind of entity they shared

    @property
    def values(self) -> frozenset[str]:
        """Every test-split entity, of every kind: the ``exclude`` a drafter gets."""
        return frozenset().union(*self.entities.values()) if self.entities else frozenset()

    def hits(self, task: dict, declared: Optional[Mapping[str, Iterable[Any]]] = None) -> dict[str, list[str]]:
        """The test-split entities a task (and the entities its draft declares) uses, by kind; empty = clean."""
        values = self.values
        if not values:
            return {}
        out: dict[str, set[str]] = {}
        for kind, found in task_entities(task, self.index, self.hook).items():
            shared = found & self.entities.get(kind, frozenset())
            if not shared and kind not in self.entities:
                shared = found & values
            if shared:
                out.setdefault(kind, set()).update(shared)
        for kind, items in (declared or {}).items():
            shared = {str(v) for v in items or ()} & values
            if shared:
                out.setdefault(str(kind), set()).update(shared)
        for s in json_strings(task):  # a JSON value equal to a declared entity of another kind (telecom's scenarios)
            if s in values:
                out.setdefault("values", set()).add(s)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def reject(self, hits: Mapping[str, Any]) -> None:
        for kind in hits:
            self.rejected[kind] = self.rejected.get(kind, 0) + 1

    def digest(self) -> str:
        """A short hash of the test-split entities (two sets made against the same test split share it)."""
        text = json.dumps({k: sorted(v) for k, v in sorted(self.entities.items())}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def record(self, accepted: Iterable[dict]) -> dict[str, Any]:
        """What ``generated.json`` says about the check: the entities kept out, drafts rejected for using one,
        and the accepted tasks re-checked (always 0 -- a set that fails this is never written)."""
        touching = sum(1 for t in accepted if self.hits(t))
        return {
            "test_split": self.split,
            "test_tasks": len(self.test_tasks),
            "rule": "no generated task names a DB key (or a generator-declared entity) that a test-split task names "
            "in its gold actions, initial state, instructions or criteria, nor a record a customer so named owns "
            f"(catalog tables, followed only where named: {sorted(self.index.catalog)})",
            "entities": {k: sorted(v) for k, v in sorted(self.entities.items())},
            "entity_counts": {k: len(v) for k, v in sorted(self.entities.items())},
            "digest": self.digest(),
            "drafts_rejected": dict(sorted(self.rejected.items())),
            "accepted_tasks_touching_test_entities": touching,
        }


def contamination_check(
    db: Mapping[str, Any],
    tables: Iterable[str],
    benchmark: Iterable[dict],
    test_ids: Optional[Iterable[str]],
    hook: Hook = None,
) -> Contamination:
    """The check for a domain: ``db`` its base DB, ``tables`` its id-keyed tables, ``benchmark`` its shipped tasks
    (upstream JSON), ``test_ids`` the test split (None: the domain has none)."""
    benchmark = list(benchmark)
    index = EntityIndex.of(db, tables, benchmark)
    if test_ids is None:
        return Contamination(index, {}, None, (), hook)
    wanted = set(test_ids)
    test = [t for t in benchmark if t.get("id") in wanted]
    entities: dict[str, set[str]] = {}
    for task in test:
        for kind, found in task_entities(task, index, hook).items():
            entities.setdefault(kind, set()).update(found)
    entities = index.owned(entities)
    frozen = {k: frozenset(v) for k, v in sorted(entities.items())}
    return Contamination(index, frozen, TEST_SPLIT, tuple(t["id"] for t in test), hook)
