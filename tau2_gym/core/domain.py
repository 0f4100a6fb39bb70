"""Domains: what a domain declares (:class:`DomainSpec`), the registry, and a domain bound to its data.

A domain is a folder under ``domains/`` exposing a ``DOMAIN`` spec, plus one line in
``domains/__init__.py`` (imported with the package, which fills this registry); third-party packages add domains
through the ``tau2_gym.domains`` entry
point group (``name = "pkg.module:DOMAIN"``). The engine never names a domain.
"""

from __future__ import annotations

import copy
import importlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from tau2_gym import data as _data
from tau2_gym.core.db import BaseData, DBSchema
from tau2_gym.core.environment import Environment
from tau2_gym.core.tasks import Task, TaskFileError, load_splits, load_task_file, select_split
from tau2_gym.core.tools import ProseSource, Toolkit, toolkit_schemas, upstream_tool_names


@dataclass(frozen=True)
class TaskSetSpec:
    """A task file of a domain and the split used when none is named.

    ``loader`` reads a task set that is not one JSON array (e.g. a folder of task files: ``file`` then names the
    folder); ``splits`` computes the splits from the tasks when the data ships no split file.
    """

    file: str
    default_split: Optional[str] = "base"
    loader: Optional[Callable[[Path], tuple[Task, ...]]] = None
    splits: Optional[Callable[[tuple[Task, ...]], dict[str, tuple[str, ...]]]] = None


@dataclass(frozen=True)
class DBFile:
    """A DB file of the domain folder and how to read it."""

    file: str
    schema: DBSchema
    required: bool = True
    reader: Optional[Callable[[Path], Any]] = None  # default: JSON


@dataclass(frozen=True)
class DomainSpec:
    """Everything the engine needs to know about a domain; built by the domain package."""

    name: str
    data_folder: str
    agent_toolkit: type[Toolkit]
    db: DBFile
    policy: Callable[[_data.DataSource, bool], str]
    task_sets: dict[str, TaskSetSpec]
    default_task_set: str
    user_toolkit: Optional[type[Toolkit]] = None
    user_db: Optional[DBFile] = None
    sync: Optional[Callable[[Environment], None]] = None
    # Tools are pure functions of (state, arguments). Then a live episode's state is exactly what replaying
    # its trajectory rebuilds, and scoring may take it instead of replaying (see Environment.replays_to).
    deterministic_tools: bool = True
    solo_supported: bool = False
    solo_error: str = ""
    agent_prose: Optional[ProseSource] = None
    user_prose: Optional[ProseSource] = None
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # The user toolkit works on the agent's DB state (one world both sides change), not on a DB of its own.
    user_db_shared: bool = False
    # Per-task setup of a fresh environment, before its initial state is built (make_environment(task=...)).
    prepare: Optional[Callable[[Environment, Task], None]] = None
    # A task-specific policy (the agent's system prompt of that task); default: the domain's one policy.
    task_policy: Optional[Callable[[_data.DataSource, Task, bool], str]] = None
    # The spec specialised to a data source and the domain's options (load_domain(options=...)); called once per
    # loaded domain. A domain without it takes no options.
    bind: Optional[Callable[[DomainSpec, _data.DataSource, dict], DomainSpec]] = None
    # The Gymnasium manual of the domain's env (its class docstring: Description, Action Space, ... sections) and the
    # env keyword arguments that are the domain's own settings (folded into ``domain_options``).
    env_doc: str = ""
    env_options: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------- registry

_registry: dict[str, str | DomainSpec] = {}
_entry_points_loaded = False


def register_domain(name: str, spec: str | DomainSpec) -> None:
    """Register a domain by its spec or a ``"module:ATTR"`` string (imported on first use)."""
    _registry[name] = spec


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    try:
        eps = entry_points(group="tau2_gym.domains")
    except TypeError:  # pragma: no cover - Python 3.9 style
        eps = entry_points().get("tau2_gym.domains", [])
    for ep in eps:
        _registry.setdefault(ep.name, ep.value)


def domain_names() -> list[str]:
    """Registered domains whose package imports (a broken third-party entry is left out)."""
    _load_entry_points()
    names = []
    for name in list(_registry):
        try:
            get_domain_spec(name)
        except (ImportError, AttributeError, TypeError):
            continue
        names.append(name)
    return names


class UnknownName(KeyError, ValueError):
    """A domain or task name that does not exist. A KeyError for lookups, a ValueError for callers that check
    arguments; its text is the plain message (a bare KeyError would print it quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def get_domain_spec(name: str) -> DomainSpec:
    _load_entry_points()
    if name not in _registry:
        raise UnknownName(f"unknown domain {name!r}; registered domains are: {', '.join(_registry)}")
    spec = _registry[name]
    if isinstance(spec, str):
        module, _, attr = spec.partition(":")
        spec = getattr(importlib.import_module(module), attr or "DOMAIN")
        if not isinstance(spec, DomainSpec):
            raise TypeError(f"domain {name!r} entry {module}:{attr} is not a DomainSpec")
        _registry[name] = spec
    return spec


# ------------------------------------------------------------------------------- loaded domain


class TaskDataError(_data.DataError, TaskFileError):
    """A damaged task or split file: a data error (one line, with its fix) that task-file callers still catch."""


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class LoadedDomain:
    """A domain bound to one data source: shared base DBs, policies, tasks and tool schemas.

    Built once per (domain, data folder) and process (:func:`load_domain` caches it); every episode's
    environment is then a microsecond-cheap view over it.
    """

    def __init__(self, spec: DomainSpec, source: _data.DataSource, options: Optional[dict] = None) -> None:
        self.options = dict(options or {})
        self.source = source
        self.folder = source.domain_dir(spec.data_folder)
        if not self.folder.is_dir():
            raise _data.DataError(
                f"domain {spec.name!r}: folder {str(self.folder)!r} not found in the data ({source.origin})"
            )
        if spec.bind is not None:
            spec = spec.bind(spec, source, self.options)
        elif self.options:
            raise ValueError(f"domain {spec.name!r} takes no options; got {sorted(self.options)}")
        self.spec = spec
        try:
            self.agent_toolkit = _version_toolkit(spec.agent_toolkit, source, spec.agent_prose)
            self.user_toolkit = (
                None if spec.user_toolkit is None else _version_toolkit(spec.user_toolkit, source, spec.user_prose)
            )
        except (SyntaxError, OSError, ValueError) as exc:  # a damaged upstream source file
            name = getattr(exc, "filename", None)
            raise self._fault(
                name if name and not str(name).startswith("<") else self.source.src, f"cannot be read as Python ({exc})"
            ) from exc
        base_db = self._load_db(spec.db)
        if base_db is None:  # the agent's DB marked optional and absent: no environment could be built
            raise self._fault(self.folder / spec.db.file, "is missing")
        self.base_db: BaseData = base_db
        self.user_base_db: Optional[BaseData] = None
        if spec.user_db is not None:
            self.user_base_db = self._load_db(spec.user_db)
        for attr in ("base_db", "user_base_db"):
            if getattr(self, attr) is not None:
                getattr(self, attr).owner = (self, attr)
        self._policies: dict[bool, str] = {}
        self._data_record: Optional[dict] = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple:
        # pickled envs and episodes re-bind to the unpickling process's cached domain (not a copy of its data)
        return _cached_domain, (self.spec.name, self.source, self.options)

    def __deepcopy__(self, memo: dict) -> LoadedDomain:
        return self  # shared, read-only: a deep-copied env or episode keeps using the cached domain

    def _load_db(self, dbf: DBFile) -> Optional[BaseData]:
        path = self.folder / dbf.file
        if not path.is_file():
            if dbf.required:
                raise self._fault(path, "is missing")
            return None
        try:
            raw = (dbf.reader or _read_json)(path)
        except Exception as exc:
            raise self._fault(path, f"cannot be read ({exc})") from exc
        try:
            return dbf.schema.build(raw)
        except Exception as exc:
            detail = " ".join(str(exc).split())[:300]
            raise self._fault(path, f"does not validate against the DB schema ({detail})") from exc

    def _fault(self, path: Any, problem: str, kind: type = _data.DataError) -> _data.DataError:
        """One line: the file, what is wrong with it, and what to do."""
        fix = (
            f"restore it from a clean tau2-bench checkout (`tau2-gym data verify --data-dir {self.source.root}` "
            "lists every file that differs)"
            if self.source.custom
            else "run `tau2-gym data fetch` to repair the cache"
        )
        where = str(path or self.folder)
        return kind(f"domain {self.spec.name!r}: {where!r} {problem}; {fix}", path=where, problem=problem, fix=fix)

    def _task_data(self, read: Callable[[Path], Any], path: Path) -> Any:
        """A task or split file read; a damaged one is a data fault (with its fix) that stays a TaskFileError."""
        try:
            return read(path)
        except TaskFileError as exc:
            raise self._fault(path, f"cannot be used ({exc})", TaskDataError) from exc

    @property
    def name(self) -> str:
        return self.spec.name

    def data_version_record(self) -> dict:
        """A fresh copy of what results and ``info`` say about this domain's data (:meth:`DataSource.record`)."""
        if self._data_record is None:
            self._data_record = self.source.record()
        return copy.deepcopy(self._data_record)

    @property
    def has_user_tools(self) -> bool:
        return self.user_toolkit is not None and (self.user_base_db is not None or self.spec.user_db_shared)

    # ------------------------------------------------------------------ policy, schemas

    def policy(self, solo: bool = False, task: Optional[Task] = None) -> str:
        """The agent's policy; with ``task``, that task's own when the domain has task-specific policies."""
        if task is not None and self.spec.task_policy is not None:
            return self.spec.task_policy(self.source, task, solo)
        if solo and not self.spec.solo_supported:
            raise ValueError(self.spec.solo_error or f"{self.spec.name} domain does not support solo mode")
        if solo not in self._policies:
            try:
                self._policies[solo] = self.spec.policy(self.source, solo)
            except (OSError, UnicodeDecodeError) as exc:
                raise self._fault(getattr(exc, "filename", None), f"cannot be read ({exc})") from exc
        return self._policies[solo]

    def agent_tool_schemas(self) -> tuple[dict, ...]:
        return toolkit_schemas(self.agent_toolkit, self.source.src, self.spec.agent_prose)

    def user_tool_schemas(self, include: Optional[list[str]] = None) -> list[dict]:
        if not self.has_user_tools:
            raise ValueError("User tools not available")
        schemas = list(toolkit_schemas(self.user_toolkit, self.source.src, self.spec.user_prose))
        if include is None:
            return schemas
        names = [s["function"]["name"] for s in schemas]
        unknown = set(include) - set(names)
        if unknown:
            raise ValueError(f"Tool(s) not found: {sorted(unknown)}. Available: {sorted(names)}")
        return [s for s in schemas if s["function"]["name"] in set(include)]

    # ------------------------------------------------------------------ environments

    def make_environment(
        self, solo: bool = False, task: Optional[Task] = None, *, reference_free: bool = False
    ) -> Environment:
        """A fresh environment at the domain's initial state (copy-on-write; no file is read), set up for
        ``task`` when the domain prepares environments per task (``DomainSpec.prepare``). ``reference_free``: the
        tools must show the agent nothing derived from the task's gold actions (``Environment.reference_free``)."""
        if solo and not self.spec.solo_supported:
            raise ValueError(self.spec.solo_error or f"{self.spec.name} domain does not support solo mode")
        tools = self.agent_toolkit(self.base_db.new_state())
        user_tools = None
        if self.user_toolkit is not None:  # has_user_tools, spelled out so the types narrow
            if self.spec.user_db_shared:
                user_tools = self.user_toolkit(tools.db)
            elif self.user_base_db is not None:
                user_tools = self.user_toolkit(self.user_base_db.new_state())
        env = Environment(
            domain_name=self.spec.name,
            policy=self.policy(solo),
            tools=tools,
            user_tools=user_tools,
            solo_mode=solo,
            sync_hook=self.spec.sync,
            domain=self,
            track_calls=self.spec.deterministic_tools and self.spec.sync is None,
            semantics=self.source.semantics,
        )
        env.reference_free = reference_free
        if task is not None and self.spec.prepare is not None:
            self.spec.prepare(env, task)
        return env

    # ------------------------------------------------------------------ tasks

    def task_file(self, task_set: Optional[str] = None) -> Path:
        name = task_set or self.spec.default_task_set
        if name not in self.spec.task_sets:
            raise TaskFileError(
                f"unknown task set {name!r} for domain {self.spec.name!r}; task sets are: {sorted(self.spec.task_sets)}"
            )
        return self.folder / self.spec.task_sets[name].file

    def _all_tasks(self, task_set: Optional[str]) -> tuple[Task, ...]:
        path = self.task_file(task_set)
        loader = self.spec.task_sets[task_set or self.spec.default_task_set].loader
        return self._task_data(loader or load_task_file, path)

    def splits(self, task_set: Optional[str] = None) -> dict[str, tuple[str, ...]]:
        path = self.task_file(task_set)
        compute = self.spec.task_sets[task_set or self.spec.default_task_set].splits
        if compute is not None:
            return compute(self._all_tasks(task_set))
        return self._task_data(load_splits, path)

    def tasks(self, task_set: Optional[str] = None, split: Optional[str] = "default") -> tuple[Task, ...]:
        """Tasks of a task set and split (``split="default"`` = the task set's default; None = all)."""
        name = task_set or self.spec.default_task_set
        self.task_file(name)
        if split == "default":
            split = self.spec.task_sets[name].default_split
        all_tasks = self._all_tasks(name)
        if split is None:
            return all_tasks
        return select_split(all_tasks, self.splits(name), split, f"{self.spec.name}/{name}")

    def task(self, task_id: str, task_set: Optional[str] = None) -> Task:
        for t in self._all_tasks(task_set):
            if t.id == task_id:
                return t
        raise UnknownName(
            f"task {task_id!r} not found in domain {self.spec.name!r} "
            f"(task set {task_set or self.spec.default_task_set!r})"
        )


def _version_toolkit(toolkit: type[Toolkit], source: _data.DataSource, prose: Optional[ProseSource]) -> type[Toolkit]:
    """The toolkit as the data's upstream sources define it: tools they lack are left out."""
    names = upstream_tool_names(toolkit, source.src, prose)
    return toolkit if names is None else toolkit.subset(names)


_loaded: dict[tuple, LoadedDomain] = {}
_loaded_lock = threading.Lock()


def load_domain(
    name: str, data_dir: Optional[str | Path] = None, data_version: Optional[str] = None, options: Optional[dict] = None
) -> LoadedDomain:
    """The domain ``name`` bound to its data (cached per process): ``data_dir`` (a folder), else ``TAU2_DATA_DIR``,
    else the cache of ``data_version`` (default ``tau2-bench==1.0.1``; see :mod:`tau2_gym.data`). ``options`` are
    the domain's own settings (JSON values; e.g. a retrieval configuration), for domains that take them."""
    return _cached_domain(name, _data.resolve(data_dir, data_version), options)


def _cached_domain(name: str, source: _data.DataSource, options: Optional[dict] = None) -> LoadedDomain:
    """The process's LoadedDomain of ``name`` on ``source`` (also how an unpickled domain re-binds)."""
    spec = get_domain_spec(name)
    # the origin is part of the key: the same folder named by the user (custom) and as the cache records differently
    key = (
        name,
        str(source.root),
        str(source.src) if source.src else None,
        source.version.name,
        source.origin,
        json.dumps(options or {}, sort_keys=True, default=str),
    )
    dom = _loaded.get(key)
    if dom is None:
        with _loaded_lock:
            dom = _loaded.get(key)
            if dom is None:
                dom = LoadedDomain(spec, source, options)
                _loaded[key] = dom
    return dom


def read_text(path: Path) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()
