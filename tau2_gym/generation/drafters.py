"""Which domains have a task generator, and the contract the machinery calls it by.

A domain has a generator when its package holds a ``generate`` module (``tau2_gym.domains.<pkg>.generate``, the
package of the domain's agent toolkit) with ``draft_tasks``. Found by import, never by name: a new domain with a
``generate.py`` is picked up by ``tau2-gym generate``, the bench and the reference test as it is.

The module's names (the contract, ``docs/tasks-to-train-on.md``):

* ``GENERATOR_VERSION: int`` -- bumped when the output for a given seed changes;
* ``INTENTS: tuple[str, ...]`` -- the intent families it drafts;
* ``draft_tasks(db, *, n, seed, exclude, intents, id_prefix, **options) -> Iterator[dict]`` -- drafts, deterministic
  for its arguments; it may yield more than ``n`` (the machinery stops when it has ``n`` accepted) and never uses
  an entity in ``exclude``;
* optional ``task_entities(task: dict) -> {kind: [keys]}`` -- entities of a task beyond the DB's table keys (the
  contamination check adds them, on the test split and on every draft alike);
* optional ``SOURCE_TASK_SET: str`` -- the drafter selects from a shipped task set instead of composing from the
  DB: the machinery passes those tasks (upstream JSON) as ``source_tasks=``;
* optional ``rule_engine_coverage`` -- a dict, or a function returning one: how much of the benchmark the
  domain's rule engine reproduces (recorded in ``generated.json``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

from tau2_gym.core.domain import UnknownName, domain_names, get_domain_spec

__all__ = ["Drafter", "drafter_domains", "find_drafter", "get_drafter", "generator_module"]

MODULE = "generate"


@dataclass(frozen=True)
class Drafter:
    """A domain's task generator, as the machinery uses it (see the module docstring)."""

    domain: str
    module: str
    version: int
    intents: tuple[str, ...]
    draft_tasks: Callable[..., Iterator[dict]]
    task_entities: Optional[Callable[[dict], dict]] = None
    source_task_set: Optional[str] = None
    coverage: Any = None

    @classmethod
    def from_module(cls, domain: str, module: Any) -> Drafter:
        """The drafter of a module (or any object with the contract's names: tests pass fakes)."""
        name = getattr(module, "__name__", None) or getattr(module, "GENERATOR", None) or type(module).__name__
        missing = [a for a in ("draft_tasks", "INTENTS", "GENERATOR_VERSION") if not hasattr(module, a)]
        if missing:
            raise TypeError(f"task generator {name} of domain {domain!r} lacks {', '.join(missing)}")
        return cls(
            domain=domain,
            module=str(getattr(module, "GENERATOR", name)),
            version=int(module.GENERATOR_VERSION),
            intents=tuple(module.INTENTS),
            draft_tasks=module.draft_tasks,
            task_entities=getattr(module, "task_entities", None),
            source_task_set=getattr(module, "SOURCE_TASK_SET", None),
            coverage=getattr(module, "rule_engine_coverage", None),
        )

    def check_intents(self, intents: Optional[Sequence[str]]) -> Optional[tuple[str, ...]]:
        """``intents`` checked against :attr:`intents` (a combined request ``a+b``: each part); None = all."""
        if intents is None:
            return None
        intents = tuple(str(i) for i in intents)
        if not intents:
            raise ValueError(f"no intents given; intents of {self.domain} are: {', '.join(self.intents)}")
        for intent in intents:
            if not self.known_intent(intent):
                raise ValueError(
                    f"unknown intent {intent!r} for {self.domain}; intents are: {', '.join(self.intents)} "
                    "(two in one call: 'a+b')"
                )
        return intents

    def known_intent(self, intent: Any) -> bool:
        return isinstance(intent, str) and bool(intent) and all(p in self.intents for p in intent.split("+"))

    def rule_engine_coverage(self) -> Any:
        """The domain's record of how much of the benchmark its rule engine reproduces (None if it has none)."""
        return self.coverage() if callable(self.coverage) else self.coverage


def generator_module(domain: str) -> str:
    """The module path a domain's generator lives at: ``generate`` beside the domain's agent toolkit."""
    package = get_domain_spec(domain).agent_toolkit.__module__.rpartition(".")[0]
    return f"{package}.{MODULE}"


def find_drafter(domain: str) -> Optional[Drafter]:
    """The drafter of ``domain``, or None when its package has no generator."""
    name = generator_module(domain)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise
    if not hasattr(module, "draft_tasks"):
        return None
    return Drafter.from_module(domain, module)


def drafter_domains() -> list[str]:
    """The registered domains that have a task generator."""
    return [d for d in domain_names() if find_drafter(d) is not None]


def get_drafter(domain: str) -> Drafter:
    """The drafter of ``domain``; a clear error naming the domains that have one otherwise."""
    if domain not in domain_names():
        raise UnknownName(
            f"unknown domain {domain!r}; domains with a task generator are: {', '.join(drafter_domains())}"
        )
    drafter = find_drafter(domain)
    if drafter is None:
        raise UnknownName(
            f"domain {domain!r} has no task generator ({generator_module(domain)}.draft_tasks); domains with one "
            f"are: {', '.join(drafter_domains())}"
        )
    return drafter
