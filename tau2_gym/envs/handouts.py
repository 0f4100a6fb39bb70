"""The private copies ``info`` hands out every episode -- the task and the tool schemas -- parsed from JSON text.

The loaded task grades every later episode and the env's tool schemas define its action space, so ``info`` never
hands out those objects, only copies (the guarantees tests pin it). Deep-copying a task object by object cost more
than the rest of a reset; its text is kept once instead (per loaded task) and every copy is parsed from it in C. A
task that is not one of the domain's loaded objects (a ``Task`` passed to ``reset``, which its owner may change
between resets), or whose text does not give back every value, is deep-copied. Tool lists are copied container by
container, their strings shared; an env hands its copy out again while it still equals the tools
(:class:`ToolHandout`): a copy per reset gave the garbage collector a few hundred long-lived containers per episode.
"""

from __future__ import annotations

import operator
from typing import Optional, Sequence

from tau2_gym.core.db import copy_json, value_digest
from tau2_gym.core.domain import LoadedDomain
from tau2_gym.core.tasks import Task

__all__ = ["Handouts", "ToolHandout"]


class Handouts:
    """Per-episode copies of tasks and of one tool list; shared by an env and its siblings and clones."""

    def __init__(self, domain: LoadedDomain, task_set: Optional[str]) -> None:
        self._domain = domain
        self._task_set = task_set
        self._loaded: Optional[dict[str, Task]] = None
        self._task_text: dict[str, Optional[str]] = {}  # None: deep-copied

    def _tasks(self) -> dict[str, Task]:
        if self._loaded is None:
            self._loaded = {t.id: t for t in self._domain.tasks(self._task_set, None)}
        return self._loaded

    def is_loaded(self, task: Task) -> bool:
        """Whether ``task`` is one of the loaded domain's task objects (not a caller's)."""
        return self._tasks().get(task.id) is task

    def loaded_task(self, task_id: str) -> Task:
        """A private copy of the loaded task ``task_id``."""
        return self.task(self._tasks()[task_id])

    def task(self, task: Task) -> Task:
        """A private copy of ``task``: equal to it, fields set as in it, sharing no object with it."""
        if not self.is_loaded(task):  # not a loaded task: its owner may change it
            return task.model_copy(deep=True)
        if task.id not in self._task_text:
            self._task_text[task.id] = self._text_of(task)
        text = self._task_text[task.id]
        if text is None:
            return task.model_copy(deep=True)
        return type(task).model_validate_json(text)

    @staticmethod
    def _text_of(task: Task) -> Optional[str]:
        """The task's JSON (its set fields), or None when parsing it back does not give the task's every value --
        a value made at load time by a default factory (a history message's timestamp) would be made anew."""
        text = task.model_dump_json(exclude_unset=True)
        return text if type(task).model_validate_json(text).model_dump() == task.model_dump() else None

    @staticmethod
    def tool_list(tools: Sequence[dict]) -> list[dict]:
        """A private copy of a tool list: its containers copied, its strings shared (immutable) -- half the memory
        of parsing a text copy, which every live episode holds."""
        return copy_json(list(tools))


class ToolHandout:
    """One env's ``info`` copy of a tool list: made at the env's first reset and handed out again at later resets
    of the same tools while its content, types included, is still what it was made as, so a caller that changed it
    gets a fresh copy and never sees its change come back as the env's tools. Consecutive episodes of one env may
    so hold the same list: copy it before changing it for one episode only. Never shared between envs: siblings and
    clones get their own."""

    __slots__ = ("_copy", "_source", "_digest")

    def __init__(self) -> None:
        self._copy: Optional[list[dict]] = None
        self._source: Optional[Sequence[dict]] = None
        self._digest: Optional[bytes] = None

    def get(self, tools: Sequence[dict]) -> list[dict]:
        held = self._copy
        # the serialized form decides, not ==: True == 1 and 1 == 1.0, but a schema that says 1 is not the one that
        # said true; its digest is kept, not the bytes (every live env holds one)
        # (None: the copy holds a value marshal cannot write, which a caller put there: a change)
        if held is None or self._digest is None or not self._copied_from(tools) or value_digest(held) != self._digest:
            held = self._copy = Handouts.tool_list(tools)
            self._source, self._digest = tools, value_digest(held)
        return held

    def holds(self, value: object) -> bool:
        """Whether ``value`` is the copy this handout gives out now."""
        return value is self._copy

    def _copied_from(self, tools: Sequence[dict]) -> bool:
        """Whether ``tools`` holds the schema objects the copy was made from (a list rebuilt per task may)."""
        source = self._source
        return source is tools or (
            source is not None and len(source) == len(tools) and all(map(operator.is_, source, tools))
        )
