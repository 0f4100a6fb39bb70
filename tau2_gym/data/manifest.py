"""Manifests of git blob ids, and checking a data folder against one.

A git blob id (``sha1("blob <size>\\0" + content)``) names a file's content whatever way it was downloaded
(GitHub archive, clone, raw file, wheel), so a committed list of ``blob id, path`` pins a data version file
by file without holding any of it. Paths are *logical*: ``data/tau2/...`` for data files and
``src/tau2/...`` for upstream sources, whatever the physical layout of the folder (a checkout, its
``data/`` folder, an unpacked wheel).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Optional

DATA_PREFIX = "data/tau2/"
SRC_PREFIX = "src/tau2/"


def keep(logical: str) -> bool:
    """Whether the project reads this file: domain data, user-simulator guidelines, upstream Python sources
    (for prose). Voice-only files and the retail task-issue notes are left out."""
    if logical.startswith(SRC_PREFIX):
        return logical.endswith(".py")
    if not logical.startswith((DATA_PREFIX + "domains/", DATA_PREFIX + "user_simulator/")):
        return False
    name = logical.rsplit("/", 1)[-1]
    return "/task_issues/" not in logical and "voice" not in name and name != "audio_difficulty.json"


def blob_id(path: Path) -> str:
    """The git blob id of a file's content (what ``git hash-object`` prints)."""
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        h.update(b"blob %d\0" % size)
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def blob_id_of_bytes(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@cache
def load_manifest(cache_name: str) -> dict[str, str]:
    """``{logical path: blob id}`` of a named version (the committed ``manifests/<cache_name>.tsv``)."""
    text = (resources.files("tau2_gym.data") / "manifests" / f"{cache_name}.tsv").read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            blob, path = line.split("\t", 1)
            out[path] = blob
    return out


def physical(logical: str, root: Path, src: Optional[Path]) -> Optional[Path]:
    """Where a logical path lives in a folder whose data root is ``root`` (``.../data/tau2``) and sources ``src``."""
    if logical.startswith(DATA_PREFIX):
        return root / logical[len(DATA_PREFIX) :]
    if logical.startswith(SRC_PREFIX):
        return None if src is None else src / logical[len(SRC_PREFIX) :]
    return None


def logical_files(root: Path, src: Optional[Path]) -> dict[str, Path]:
    """Every kept file of a folder, by logical path."""
    out: dict[str, Path] = {}
    for base, prefix in ((root, DATA_PREFIX), (src, SRC_PREFIX)):
        if base is None or not base.is_dir():
            continue
        for p in base.rglob("*"):
            if p.is_file():
                logical = prefix + p.relative_to(base).as_posix()
                if keep(logical):
                    out[logical] = p
    return out


@dataclass(frozen=True)
class Verification:
    """A folder compared with a version's manifest: files whose content differs, files that are absent."""

    version: str
    checked: int
    differs: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.differs and not self.missing

    def summary(self) -> str:
        if self.ok:
            return f"all {self.checked} files match {self.version}"
        parts = []
        if self.differs:
            parts.append(f"{len(self.differs)} differ ({_short(self.differs)})")
        if self.missing:
            parts.append(f"{len(self.missing)} missing ({_short(self.missing)})")
        return f"{'; '.join(parts)} of the {self.checked} files of {self.version}"

    def record(self, limit: int = 20) -> dict:
        return {
            "against": self.version,
            "ok": self.ok,
            "files": self.checked,
            "differs": list(self.differs[:limit]),
            "num_differ": len(self.differs),
            "missing": list(self.missing[:limit]),
            "num_missing": len(self.missing),
        }


def _short(paths: tuple[str, ...], n: int = 3) -> str:
    shown = ", ".join(p.replace(DATA_PREFIX + "domains/", "") for p in paths[:n])
    return shown + (", ..." if len(paths) > n else "")


class BlobStamps:
    """Blob ids of a folder's files remembered by (size, mtime): a re-check hashes only files that changed.

    Kept in one JSON file under the cache; an unreadable or unwritable stamp file only costs re-hashing.
    """

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self.entries: dict[str, list] = {}
        self.dirty = False
        if path is not None:
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(loaded, dict):
                    self.entries = loaded
            except (OSError, ValueError):
                pass

    def blob(self, file: Path) -> Optional[str]:
        try:
            st = file.stat()
        except OSError:
            return None
        key = str(file)
        old = self.entries.get(key)
        if isinstance(old, list) and len(old) == 3 and old[0] == st.st_size and old[1] == st.st_mtime_ns:
            return old[2]
        try:
            blob = blob_id(file)
        except OSError:
            return None
        self.entries[key] = [st.st_size, st.st_mtime_ns, blob]
        self.dirty = True
        return blob

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.entries), encoding="utf-8")
            os.replace(tmp, self.path)
            self.dirty = False
        except OSError:
            pass


def verify(
    root: Path,
    src: Optional[Path],
    version: str,
    manifest: dict[str, str],
    stamps: Optional[BlobStamps] = None,
    paths: Optional[Iterable[str]] = None,
) -> Verification:
    """Compare the folder's files with ``manifest`` (all of it, or only ``paths``)."""
    stamps = stamps or BlobStamps(None)
    differs, missing = [], []
    wanted = sorted(manifest if paths is None else paths)
    for logical in wanted:
        file = physical(logical, root, src)
        blob = None if file is None else stamps.blob(file)
        if blob is None:
            missing.append(logical)
        elif blob != manifest[logical]:
            differs.append(logical)
    stamps.save()
    return Verification(version=version, checked=len(wanted), differs=tuple(differs), missing=tuple(missing))
