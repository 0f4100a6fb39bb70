"""A content-addressed cache of LLM replies (user simulator, NL judge) in one SQLite file.

The user simulator dominates the cost of a tau2 rollout, and at temperature 0 (or with a fixed seed) its
requests repeat across epochs, GRPO groups and re-runs; so do the NL judge's. The key is the SHA-256 of the
whole request body (model, messages, sampling arguments, tools, tool choice, seed, extra body) in canonical
JSON, together with where it is sent (the server's base URL) and the key format's version: any change to what
would be sent, or to where, is a different entry. An entry also keeps the model name the server reported in its
reply; once a client knows which model its server serves now (the run's server check, or its first reply), an
entry answered by another model is a miss. A hit is therefore valid exactly when the sampling repeats
(temperature 0, or the same seed) and the server, the model, the seed and the request are the same; new
weights served behind the same URL under the same reported name are the one case it cannot see -- turn the
cache off for them.
One row per key: ``(key, model, response JSON, created)``.

Why SQLite: many threads and processes (concurrent rollouts, Ray actors on one node) share one file. WAL
mode lets readers run beside a writer, ``busy_timeout`` makes a writer wait for the lock instead of failing,
``INSERT OR REPLACE`` makes two writers of one key harmless (they write the same reply). Each thread (and
each process after a fork) opens its own connection. A file that is not a database, or a row that cannot be
read, is a miss with one warning -- the run goes on uncached, never crashes.

Where: :func:`default_cache_path` (``$TAU2_GYM_CACHE_DIR/llm-cache.sqlite``, else
``$XDG_CACHE_HOME/tau2-gym/llm-cache.sqlite``, else ``~/.cache/tau2-gym/llm-cache.sqlite``), used by default
for temperature-0 requests (``cache="auto"``); an explicit path also caches seeded requests.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional, Union

logger = logging.getLogger(__name__)

__all__ = [
    "ResponseCache",
    "cacheable",
    "request_key",
    "default_cache_path",
    "open_cache",
    "cache_info",
    "sum_stats",
    "file_stats",
    "clear",
    "AUTO",
    "OFF",
]

AUTO = "auto"
OFF = "off"
#: version of the key's layout: a new layout never reads entries written under an old one
KEY_FORMAT = 2
DEFAULT_FILE = "llm-cache.sqlite"
_BUSY_TIMEOUT_MS = 60_000


def cacheable(kwargs: dict[str, Any], seeded: bool = True) -> bool:
    """Only replies that should repeat: temperature 0, or (``seeded``) a seed in the request."""
    return kwargs.get("temperature") == 0 or (seeded and kwargs.get("seed") is not None)


def request_key(kwargs: dict[str, Any], server: Optional[dict[str, Any]] = None) -> str:
    """SHA-256 of the key format, the server's identity (``{"base_url", "served_model"}``) and the request body,
    as canonical JSON (sorted keys, ASCII escapes)."""
    whole = {"format": KEY_FORMAT, "server": server, "request": kwargs}
    body = json.dumps(whole, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode("ascii")).hexdigest()


def default_cache_path() -> Path:
    """The cache file of ``cache="auto"``: ``$TAU2_GYM_CACHE_DIR``, else the XDG cache folder."""
    folder = os.environ.get("TAU2_GYM_CACHE_DIR")
    if not folder:
        xdg = os.environ.get("XDG_CACHE_HOME")
        folder = os.path.join(xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache"), "tau2-gym")
    return Path(folder) / DEFAULT_FILE


def _resolve(path: Union[str, os.PathLike]) -> Path:
    p = Path(path).expanduser()
    return p / "cache.sqlite" if p.is_dir() else p  # a folder (the old --user-cache DIR): a file inside it


class ResponseCache:
    """Chat-completion responses (as dicts) by request body; thread- and process-safe; counts hits/misses.

    ``seeded=False`` caches only temperature-0 requests (the default cache); ``True`` also seeded ones.
    """

    def __init__(self, path: Union[str, os.PathLike], seeded: bool = True, mode: str = "explicit") -> None:
        self.path = _resolve(path)
        self.seeded = seeded
        self.mode = mode
        self._lock = threading.Lock()
        self._local = threading.local()
        self._broken: Optional[str] = None  # why the file is unusable (then every lookup is a miss)
        self.hits = 0
        self.misses = 0
        self.stored = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._disable(f"cannot create its folder: {exc}")
        self._conn()  # a file that is not a database is found now, at construction (stats() says so)

    # pickling (Ray, multiprocessing): the counts and the place travel, connections and locks do not
    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_local")}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def directory(self) -> Path:
        return self.path.parent

    def _disable(self, reason: str) -> None:
        with self._lock:
            first = self._broken is None
            self._broken = reason
        if first:
            logger.warning("LLM reply cache %s is unusable (%s); running uncached", self.path, reason)

    def _conn(self) -> Optional[sqlite3.Connection]:
        if self._broken is not None:
            return None
        pid = os.getpid()
        held = getattr(self._local, "conn", None)
        if held is not None and held[0] == pid:
            return held[1]
        try:
            conn = sqlite3.connect(
                str(self.path), timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, "
                "response TEXT NOT NULL, created REAL NOT NULL)"
            )
        except (sqlite3.Error, OSError) as exc:
            self._disable(f"{type(exc).__name__}: {exc}")
            return None
        self._local.conn = (pid, conn)
        return conn

    def _miss(self) -> None:
        with self._lock:
            self.misses += 1

    def key(self, kwargs: dict[str, Any], server: Optional[dict[str, Any]] = None) -> Optional[str]:
        """The request's key on ``server``, or None when this cache does not keep it (callers that get and then
        put compute it once and pass it to both)."""
        return request_key(kwargs, server) if cacheable(kwargs, self.seeded) else None

    def get(
        self, kwargs: dict[str, Any], key: Optional[str] = None, served_model: Optional[str] = None
    ) -> Optional[dict]:
        """The cached response for this request, or None (not cacheable, absent, unreadable, or -- with
        ``served_model`` -- answered by another model than the one the server now reports)."""
        key = key or self.key(kwargs)
        if key is None:
            return None
        conn = self._conn()
        if conn is None:
            self._miss()
            return None
        try:
            row = conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            self._disable(f"{type(exc).__name__}: {exc}")
            self._miss()
            return None
        value = None
        if row is not None:
            try:
                value = json.loads(row[0])
            except (TypeError, ValueError) as exc:
                logger.warning(
                    "LLM reply cache %s: entry %s is unreadable (%s); asking the model again", self.path, key[:12], exc
                )
        if not isinstance(value, dict) or (served_model is not None and value.get("model") not in (None, served_model)):
            self._miss()
            return None
        with self._lock:
            self.hits += 1
        return value

    def put(self, kwargs: dict[str, Any], response: dict, key: Optional[str] = None) -> None:
        key = key or self.key(kwargs)
        if key is None:
            return
        conn = self._conn()
        if conn is None:
            return
        try:
            data = json.dumps(response, default=str, ensure_ascii=False)
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)",
                (key, kwargs.get("model"), data, time.time()),
            )
        except (sqlite3.Error, TypeError, ValueError) as exc:
            self._disable(f"cannot store a reply: {type(exc).__name__}: {exc}")
            return
        with self._lock:
            self.stored += 1

    def __len__(self) -> int:
        conn = self._conn()
        if conn is None:
            return 0
        try:
            return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        except sqlite3.DatabaseError:
            return 0

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end or at exit)."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            self._local.conn = None
            try:
                held[1].close()
            except sqlite3.Error:
                pass

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "on": self._broken is None,
                "path": str(self.path),
                "mode": self.mode,
                "hits": self.hits,
                "misses": self.misses,
                "stored": self.stored,
                **({"error": self._broken} if self._broken is not None else {}),
            }


def open_cache(setting: Optional[Union[str, os.PathLike]], temperature: Any) -> Optional[ResponseCache]:
    """The cache a client's ``cache`` setting asks for.

    ``"auto"``: the default file, only when the client samples at temperature 0 (then only temperature-0
    requests are cached); a path: that file, for temperature-0 or seeded requests; None / ``"off"``: none.
    """
    if setting is None or setting is False:
        return None
    if isinstance(setting, str) and setting.lower() in (OFF, "none", ""):
        return None
    if isinstance(setting, str) and setting.lower() == AUTO:
        if temperature != 0:
            return None
        return ResponseCache(default_cache_path(), seeded=False, mode=AUTO)
    return ResponseCache(setting, seeded=True, mode="explicit")


def cache_info(user: Any = None, judge: Any = None) -> dict[str, Any]:
    """``{"user_cache": ..., "judge_cache": ...}`` for results/env info: the stats of whichever has a cache
    setting (``{"on": False}`` when it caches nothing); players without a cache setting are left out."""
    out: dict[str, Any] = {}
    for name, obj in (("user_cache", user), ("judge_cache", judge)):
        fn = getattr(obj, "cache_stats", None)
        if callable(fn):
            stats = fn()
            if stats is not None:
                out[name] = stats
    return out


def sum_stats(stats: list[Optional[dict]]) -> Optional[dict[str, Any]]:
    """Several clients' cache stats as one (Ray actors): counts summed, place and mode of the first one on."""
    given = [s for s in stats if isinstance(s, dict)]
    if not given:
        return None
    on = [s for s in given if s.get("on")]
    base = dict(on[0] if on else given[0])
    for k in ("hits", "misses", "stored"):
        base[k] = sum(int(s.get(k) or 0) for s in given)
    base["clients"] = len(given)
    return base


def file_stats(path: Union[str, os.PathLike, None] = None) -> dict[str, Any]:
    """What a cache file holds: entries per model, oldest and newest entry, size (``path`` None: the default
    file). Read-only; a missing file is ``{"exists": False}``."""
    p = _resolve(path) if path is not None else default_cache_path()
    if not p.exists():
        return {"path": str(p), "exists": False, "entries": 0}
    try:
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_MS / 1000)
        try:
            rows = conn.execute(
                "SELECT model, COUNT(*), MIN(created), MAX(created) FROM responses GROUP BY model"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return {"path": str(p), "exists": True, "entries": 0, "error": f"{type(exc).__name__}: {exc}"}
    size = sum(f.stat().st_size for f in p.parent.glob(p.name + "*") if f.is_file())
    return {
        "path": str(p),
        "exists": True,
        "entries": sum(r[1] for r in rows),
        "models": {str(r[0]): r[1] for r in rows},
        "oldest": min((r[2] for r in rows), default=None),
        "newest": max((r[3] for r in rows), default=None),
        "bytes": size,
    }


def clear(path: Union[str, os.PathLike, None] = None) -> int:
    """Delete every entry of a cache file (``path`` None: the default file); returns how many there were."""
    p = _resolve(path) if path is not None else default_cache_path()
    if not p.exists():
        return 0
    conn = sqlite3.connect(str(p), timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        if conn.execute("SELECT name FROM sqlite_master WHERE name = 'responses'").fetchone() is None:
            return 0
        count = int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        conn.execute("DELETE FROM responses")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return count
