"""A content-addressed cache of user-simulator replies, so repeated runs do not pay for the same user turn.

The user simulator dominates the cost of a tau2 rollout, and at temperature 0 (or with a fixed seed) its
requests repeat across epochs, GRPO groups and re-runs. The key is the SHA-256 of the whole request body
(model, messages, sampling arguments, tools, tool choice, seed, extra body) in canonical JSON, so any change
to what would be sent is a different entry. One file per entry, under ``DIR/<2 hex>/<64 hex>.json``, written
to a temporary file in the same folder and renamed into place: readers never see half a file, and several
threads or processes can share one folder (two writers of one key write the same reply; the last rename
wins). A file that cannot be read is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional, Union

logger = logging.getLogger(__name__)

__all__ = ["ResponseCache", "cacheable", "request_key"]


def cacheable(kwargs: dict[str, Any]) -> bool:
    """Only replies that should repeat: temperature 0, or a seed in the request."""
    return kwargs.get("temperature") == 0 or kwargs.get("seed") is not None


def request_key(kwargs: dict[str, Any]) -> str:
    body = json.dumps(kwargs, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class ResponseCache:
    """Chat-completion responses (as dicts) by request body; thread- and process-safe; counts hits/misses."""

    def __init__(self, directory: Union[str, os.PathLike]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.stored = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, kwargs: dict[str, Any]) -> Optional[dict]:
        """The cached response for this request, or None (not cacheable, absent or unreadable)."""
        if not cacheable(kwargs):
            return None
        path = self._path(request_key(kwargs))
        try:
            with open(path, encoding="utf-8") as fh:
                value = json.load(fh)
        except FileNotFoundError:
            value = None
        except (OSError, ValueError) as exc:
            logger.warning("user cache entry %s is unreadable (%s); asking the model again", path, exc)
            value = None
        if not isinstance(value, dict) or not isinstance(value.get("response"), dict):
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return value["response"]

    def put(self, kwargs: dict[str, Any], response: dict) -> None:
        if not cacheable(kwargs):
            return
        key = request_key(kwargs)
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"key": key, "model": kwargs.get("model"), "response": response}, default=str)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        with self._lock:
            self.stored += 1

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"dir": str(self.directory), "hits": self.hits, "misses": self.misses, "stored": self.stored}
