"""Episode records in ``info`` (``reward_info``, ``simulation_run``): read-only mappings, stored whole.

Gymnasium's vector envs merge the ``info`` dicts of their sub-envs key by key and recurse into every
``dict`` value; a record that is ``None`` in one episode and a dict in another (``db_check`` of a scored vs a
prematurely ended episode) then crashes the merge. A :class:`Record` is a ``Mapping`` but not a ``dict``, so
every vector env -- Gymnasium's sync/async wrappers and ours -- keeps it as one object per episode. It reads
like a dict (``rec["reward"]``, ``rec.get(...)``, ``dict(rec)``); :meth:`Record.to_dict` gives the plain
dict, and :func:`json_default` lets ``json.dump`` write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional, cast


class Record(Mapping):
    """A read-only view of one JSON-ready record dict (treat the data as immutable).

    :meth:`deferred` makes a record whose dict is built on its first read: an episode's ``simulation_run``
    renders every message of the trajectory, and most training loops never look at it.
    """

    __slots__ = ("_data", "_build")

    def __init__(self, data: dict[str, Any]) -> None:
        self._data: Optional[dict[str, Any]] = data  # None until a deferred record is built
        self._build: Optional[Callable[[], dict[str, Any]]] = None

    @classmethod
    def deferred(cls, build: Callable[[], dict[str, Any]]) -> Record:
        """A record of the dict ``build()`` returns, called once, on first read. ``build`` must only read
        data that no longer changes (a finished episode's messages)."""
        rec = cls.__new__(cls)
        rec._data = None
        rec._build = build
        return rec

    @property
    def data(self) -> dict[str, Any]:
        data = self._data
        if data is None:
            build = self._build
            if build is None:  # built meanwhile by another thread
                return cast("dict[str, Any]", self._data)  # set before _build was dropped
            data = build()
            self._data = data  # set before _build is dropped: a concurrent reader sees one of the two
            self._build = None
        return data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data = value
        self._build = None

    def __reduce__(self) -> tuple:
        return (Record, (self.data,))  # pickles (and copies) as the plain record

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self.data == other.data
        if isinstance(other, Mapping):
            return self.data == dict(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"Record({self.data!r})"

    def to_dict(self) -> dict[str, Any]:
        """The record as the plain dict it wraps (JSON-ready)."""
        return self.data


def as_dict(value: Any) -> Any:
    """A record (or any mapping) as a plain dict; other values unchanged."""
    if isinstance(value, Record):
        return value.data
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return dict(value)
    return value


def json_default(obj: Any) -> Any:
    """``default=`` for ``json.dump``: writes records (and other mappings) as objects."""
    if isinstance(obj, Record):
        return obj.data
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
