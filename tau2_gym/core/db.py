"""Domain databases: one validated base per process, a copy-on-write view per episode, tau2's hash.

Upstream builds a fresh pydantic DB per environment (the airline DB is 7 MB of JSON). Here a domain's DB
is validated once, dumped to plain dicts -- exactly the typed ``model_dump()`` upstream hashes -- and shared
read-only. An episode's :class:`DBState` owns only what it changed: big id-keyed collections ("tables") are
copied per record on first write, every other field on its first access (a domain whose DB nests its records,
as banking's and telecom's do, copies only the parts its tools reach). tau2's ``update_db`` (a task's
initialization data) gives a base of its own, built once per update and sharing the fields it left alone.

The hash is byte-identical to upstream's ``sha256(json.dumps(db.model_dump(), sort_keys=True,
default=str))``: the serialised form of every unchanged record is cached on the base and reused.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import threading
from enum import Enum
from typing import Any, Iterator, Optional


class _Deleted:
    """The mark of a record deleted in an episode: one per process, so it pickles and copies as itself."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "_DELETED"

    def __repr__(self) -> str:
        return "<deleted>"


_DELETED = _Deleted()


def copy_json(value: Any) -> Any:
    """Deep copy of JSON-like data: dicts, lists and tuples are copied, every other value is shared."""
    if type(value) is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [copy_json(v) for v in value]
    if type(value) is tuple:
        return tuple(copy_json(v) for v in value)
    return value


def value_digest(value: Any) -> Optional[bytes]:
    """A 128-bit digest of plain data with its types (``True``, ``1`` and ``1.0`` differ), from marshal's binary
    form: no text escaping, as JSON has. Format 2, the last without back-references, which marshal writes or not by
    reference counts (a caller holding an inner dict would change the bytes). None when marshal cannot write the
    value (it holds another kind of object)."""
    try:
        data = marshal.dumps(value, 2)
    except ValueError:
        return None
    return hashlib.blake2b(data, digest_size=16).digest()


def plain(value: Any) -> Any:
    """Turn a python-mode model dump into plain data: enums become their values; dates stay dates."""
    t = type(value)
    if t is dict:
        return {(k.value if isinstance(k, Enum) else k): plain(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [plain(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


def json_strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, object keys included (depth first): where ids can hide in a task or a record."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for k, item in v.items():
                if isinstance(k, str):
                    yield k
                stack.append(item)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)


def dumps_sorted(value: Any) -> str:
    """tau2's canonical serialisation for hashing: ``json.dumps(value, sort_keys=True, default=str)``."""
    return json.dumps(value, sort_keys=True, default=str)


def same_json(a: Any, b: Any) -> bool:
    """Whether two plain values serialise to the same hash text (``dumps_sorted(a) == dumps_sorted(b)``).

    Decided by walking both -- stopping at the first difference, building no text -- where the data is plain
    JSON of one type on both sides; elsewhere (1 vs 1.0, a list vs a tuple, a non-string key, a NaN, a date) the
    serialised texts decide.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is type(b):
        if kind is dict and all(type(k) is str for k in a) and all(type(k) is str for k in b):
            return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
        if kind is list:
            return len(a) == len(b) and all(map(same_json, a, b))
        if kind in (str, int, bool) and a == b:
            return True
        if kind in (str, int, bool):
            return False
    return dumps_sorted(a) == dumps_sorted(b)


class DBSchema:
    """How a domain's DB is validated and laid out.

    ``model`` is the domain's pydantic model (the same field types as upstream, so the dump -- and the
    hash -- is the same); ``tables`` names the id-keyed collections that are copied per record.
    """

    def __init__(self, model: Any, tables: tuple[str, ...] = (), name: Optional[str] = None) -> None:
        self.model = model
        self.tables = tuple(tables)
        self.name = name or model.__name__

    def validate(self, raw: Any) -> dict[str, Any]:
        """Validate raw data and return the typed dump as plain data."""
        return plain(self.model.model_validate(raw).model_dump())

    def build(self, raw: Any) -> BaseData:
        return BaseData(self.validate(raw), self.tables, self)


class BaseData:
    """A validated DB dump, built once and shared read-only by every episode of the process."""

    def __init__(self, data: dict[str, Any], tables: tuple[str, ...] = (), schema: Optional[DBSchema] = None) -> None:
        missing = [t for t in tables if t not in data or not isinstance(data[t], dict)]
        if missing:
            raise ValueError(f"table fields {missing} are not id-keyed objects in the DB")
        self.data = data
        self.schema = schema
        self.model_name = schema.name if schema is not None else "DB"
        self.tables = tuple(tables)
        self.fields = tuple(data.keys())
        self._lock = threading.Lock()
        self._record_ser: dict[str, dict[str, str]] = {}
        self._sorted_keys: dict[str, list[str]] = {}
        self.owner: Optional[tuple[Any, str]] = None  # (holder, attribute) it is shared under; set by the holder
        # copied when a state is made, not on first access: a DBState attribute of that name would hide them
        self.eager = tuple(f for f in self.fields if f not in self.tables and hasattr(DBState, f))
        self._updates: dict[bytes, BaseData] = {}  # with_update's results, by the update's digest

    def __reduce__(self) -> tuple:
        # a pickled episode re-binds to the process's shared copy (via its holder) instead of carrying the data
        if self.owner is not None:
            return getattr, self.owner
        return BaseData, (self.data, self.tables, self.schema)

    def __deepcopy__(self, memo: dict) -> BaseData:
        return self  # read-only and shared by every episode: a copied episode keeps using it

    def record_ser(self, table: str) -> dict[str, str]:
        """Serialised form of every base record of ``table`` (computed on first use)."""
        cached = self._record_ser.get(table)
        if cached is None:
            with self._lock:
                cached = self._record_ser.get(table)
                if cached is None:
                    cached = {k: dumps_sorted(v) for k, v in self.data[table].items()}
                    self._sorted_keys[table] = sorted(cached)
                    self._record_ser[table] = cached
        return cached

    def sorted_keys(self, table: str) -> list[str]:
        self.record_ser(table)
        return self._sorted_keys[table]

    def new_state(self) -> DBState:
        return DBState(self)

    def with_update(self, update: dict[str, Any]) -> BaseData:
        """tau2's ``update_db`` on this base: the merged dump, re-validated, as a base of its own.

        Kept by the update's value digest (the last :data:`MAX_UPDATES`): every episode of a task starts from
        the same base, validated once, and a gold replay shares it with the episode it scores (their DBs then
        compare by the parts either changed, not by hash). Fields the update did not name and validation left
        equal are this base's objects."""
        key = value_digest(update)
        derived = None if key is None else self._updates.get(key)
        if derived is not None:
            return derived
        if self.schema is None:
            raise ValueError("this DB has no schema to re-validate an update with")
        derived = self.schema.build(merge_update(self.data, update))
        data = derived.data
        for name in data:
            if name not in update and name in self.data and same_json(data[name], self.data[name]):
                data[name] = self.data[name]
        if key is not None:
            with self._lock:  # episodes on threads share the base: one at a time evicts and inserts
                if len(self._updates) >= MAX_UPDATES:
                    self._updates.pop(next(iter(self._updates)), None)
                self._updates[key] = derived
        return derived

    def hash_from_scratch(self) -> str:
        """Full re-serialisation, ignoring every cache (tests use it to prove the base was never mutated)."""
        return hashlib.sha256(dumps_sorted(self.data).encode("utf-8")).hexdigest()


class Table:
    """An id-keyed collection: reads see the shared base, the first write of a record copies it.

    Iteration order is upstream's dict order: base keys in file order, then new keys in insertion order.
    ``t[k]`` returns the shared base record when unchanged -- never mutate it; call ``t.mut(k)`` first.
    """

    __slots__ = ("_base", "_own", "_name")

    def __init__(self, base: dict[str, Any], name: str) -> None:
        self._base = base
        self._own: dict[str, Any] = {}
        self._name = name

    def __getitem__(self, key: str) -> Any:
        own = self._own
        if key in own:
            value = own[key]
            if value is _DELETED:
                raise KeyError(key)
            return value
        return self._base[key]

    def get(self, key: str, default: Any = None) -> Any:
        """Like ``dict.get`` (an unhashable key raises ``TypeError``, as it does on a dict)."""
        own = self._own
        if key in own:
            value = own[key]
            return default if value is _DELETED else value
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        own: dict[Any, Any] = self._own
        if key in own:
            return own[key] is not _DELETED
        return key in self._base

    def mut(self, key: str) -> Any:
        """The record, made private to this episode so it may be changed in place."""
        own = self._own
        if key in own:
            value = own[key]
            if value is _DELETED:
                raise KeyError(key)
            return value
        value = copy_json(self._base[key])
        own[key] = value
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._own[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._own[key] = _DELETED

    def keys(self) -> Iterator[str]:
        own = self._own
        for k in self._base:
            if own.get(k, None) is not _DELETED:
                yield k
        for k, v in own.items():
            if v is not _DELETED and k not in self._base:
                yield k

    __iter__ = keys

    def values(self) -> Iterator[Any]:
        for k in self.keys():
            yield self[k]

    def items(self) -> Iterator[tuple[str, Any]]:
        for k in self.keys():
            yield k, self[k]

    def __len__(self) -> int:
        n = len(self._base)
        for k, v in self._own.items():
            in_base = k in self._base
            if v is _DELETED:
                n -= 1 if in_base else 0
            elif not in_base:
                n += 1
        return n

    def changed_keys(self) -> Iterator[str]:
        return iter(self._own)

    def to_dict(self) -> dict[str, Any]:
        return {k: self[k] for k in self.keys()}

    def __repr__(self) -> str:
        return f"<Table {self._name}: {len(self)} records, {len(self._own)} private>"


class DBState:
    """One episode's database: attribute access per top-level field (``db.users``, ``db.flights``).

    A table is a :class:`Table` from the start; any other field is the base's until first accessed as an
    attribute, which gives the episode its own copy (a tool may change what it reads). The methods below read
    an untouched field from the base without copying it."""

    def __init__(self, base: BaseData) -> None:
        self._base_data = base
        fields = self.__dict__
        data = base.data
        for name in base.tables:
            fields[name] = Table(data[name], name)
        for name in base.eager:
            fields[name] = copy_json(data[name])

    def __reduce__(self) -> tuple:
        # an episode's DB pickles as its own changes over the shared base (which re-binds, see BaseData)
        parts = {k: (v._own if isinstance(v, Table) else v) for k, v in self.__dict__.items() if k != "_base_data"}
        return _restore_state, (self._base_data, parts)

    def __deepcopy__(self, memo: dict) -> DBState:
        return self.copy()  # copy-on-write over the same shared base, not a copy of the base

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__
        base = fields.get("_base_data")
        if base is not None and name in base.data:  # first access: the episode's own copy from here on
            value = fields[name] = copy_json(base.data[name])
            return value
        # Same text as a pydantic DB object missing the attribute (upstream's aliasing quirk relies on it).
        model = base.model_name if base is not None else "DB"
        raise AttributeError(f"'{model}' object has no attribute '{name}'")

    @property
    def base(self) -> BaseData:
        return self._base_data

    def updated(self, update: dict[str, Any]) -> DBState:
        """tau2's ``update_db``: merge ``update`` into the dump, re-validate, and return a new state (on a state
        nothing has touched yet, as at a reset: a state of the base's :meth:`BaseData.with_update`)."""
        base = self._base_data
        if self.untouched():
            return base.with_update(update).new_state()
        if base.schema is None:
            raise ValueError("this DB has no schema to re-validate an update with")
        return base.schema.build(merge_update(self.dump(), update)).new_state()

    def untouched(self) -> bool:
        """No record written and no other field accessed: the state is its base."""
        fields = self.__dict__
        base = self._base_data
        return all(not fields[t]._own for t in base.tables) and all(
            f in base.tables or f not in fields for f in base.fields
        )

    def field_names(self) -> tuple[str, ...]:
        return self._base_data.fields

    def get_field(self, name: str) -> Any:
        """A field's value to read (an untouched one is the base's: never change it)."""
        fields = self.__dict__
        return fields[name] if name in fields else self._base_data.data[name]

    # ------------------------------------------------------------------ dump / hash

    def dump(self) -> dict[str, Any]:
        """The full DB as plain data (what upstream's ``model_dump()`` gives)."""
        out = {}
        for name in self._base_data.fields:
            v = self.get_field(name)
            out[name] = v.to_dict() if isinstance(v, Table) else v
        return out

    def _serialise(self, parts: list[str]) -> None:
        base = self._base_data
        parts.append("{")
        first = True
        for name in sorted(base.fields):
            if not first:
                parts.append(", ")
            first = False
            parts.append(json.dumps(name))
            parts.append(": ")
            value = self.get_field(name)
            if not isinstance(value, Table):
                parts.append(dumps_sorted(value))
                continue
            own = value._own
            ser = base.record_ser(name)
            if own:
                keys = sorted(value.keys())
            else:
                keys = base.sorted_keys(name)
            parts.append("{")
            sep = False
            for k in keys:
                if sep:
                    parts.append(", ")
                sep = True
                parts.append(json.dumps(k))
                parts.append(": ")
                if k in own:
                    parts.append(dumps_sorted(own[k]))
                else:
                    parts.append(ser[k])
            parts.append("}")
        parts.append("}")

    def canonical_json(self) -> str:
        parts: list[str] = []
        self._serialise(parts)
        return "".join(parts)

    def hash(self) -> str:
        """tau2's DB hash: sha256 of the sorted-key JSON dump of the typed model."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()

    def same_as(self, other: DBState) -> bool:
        """Equality of the hashed content, decided from the changed records when both share a base."""
        if self._base_data is not other._base_data:
            return self.canonical_json() == other.canonical_json()
        base = self._base_data
        for name in base.fields:
            a, b = self.get_field(name), other.get_field(name)
            if isinstance(a, Table):
                keys = set(a._own) | set(b._own)
                for k in keys:
                    ina, inb = k in a, k in b
                    if ina != inb:
                        return False
                    if ina and dumps_sorted(a[k]) != dumps_sorted(b[k]):
                        return False
            elif a is not b and dumps_sorted(a) != dumps_sorted(b):
                return False
        return True

    def copy(self) -> DBState:
        """An independent copy (snapshot) of this state."""
        new = DBState.__new__(DBState)
        new._base_data = self._base_data
        for name in self._base_data.fields:
            if name not in self.__dict__:
                continue  # untouched: the copy reads the base too
            v = self.__dict__[name]
            if isinstance(v, Table):
                t = Table(v._base, name)
                t._own = {k: (x if x is _DELETED else copy_json(x)) for k, x in v._own.items()}
                new.__dict__[name] = t
            else:
                new.__dict__[name] = copy_json(v)
        return new


#: how many updated bases a base keeps (:meth:`BaseData.with_update`): a GRPO step's distinct tasks and more
MAX_UPDATES = 256


def _restore_state(base: BaseData, parts: dict[str, Any]) -> DBState:
    state = DBState.__new__(DBState)
    state._base_data = base
    for name, value in parts.items():
        if name in base.tables:
            table = Table(base.data[name], name)
            table._own = value
            value = table
        state.__dict__[name] = value
    return state


def merge_update(target: Any, update: Any) -> Any:
    """tau2's ``update_db`` merge: dicts merge recursively, anything else (lists included) replaces."""
    if isinstance(target, dict) and isinstance(update, dict):
        out = dict(target)
        for k, v in update.items():
            out[k] = merge_update(out[k], v) if k in out else copy_json(v)
        return out
    return copy_json(update)


def dump_hash(data: Any) -> str:
    """Hash of arbitrary plain data, as upstream's ``get_dict_hash``."""
    return hashlib.sha256(dumps_sorted(data).encode("utf-8")).hexdigest()


__all__ = [
    "BaseData",
    "DBState",
    "Table",
    "copy_json",
    "json_strings",
    "plain",
    "dumps_sorted",
    "merge_update",
    "dump_hash",
    "same_json",
    "DBSchema",
]
