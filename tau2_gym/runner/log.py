"""The episode log of a rollout: an append-only JSONL beside the results file, fsync'd before an episode counts
as done, so that a crash loses at most the episodes in flight and a restart resumes without duplicates."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from tau2_gym.core.records import json_default
from tau2_gym.core.termination import TerminationReason
from tau2_gym.runner.config import RolloutConfig

logger = logging.getLogger("tau2_gym")

__all__ = [
    "LOG_FORMAT",
    "EpisodeLog",
    "log_path",
    "open_log",
    "output_paths",
    "read_log",
    "record_key",
]

LOG_FORMAT = 1


def log_path(output: Union[str, os.PathLike]) -> Path:
    """``runs/x.json`` (or ``.json.gz``) -> ``runs/x.jsonl``: the episode log beside the results file."""
    p = Path(output)
    name = p.name
    for suffix in (".gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return p.with_name(name + ".jsonl")


def record_key(run: dict) -> tuple[str, Optional[int], Optional[int]]:
    return str(run["task_id"]), run.get("trial"), run.get("seed")


def read_log(path: Union[str, os.PathLike], repair: bool = False) -> tuple[Optional[dict], dict[tuple, dict]]:
    """The log's header and its records by key (task id, trial, seed); a finished record beats a failed one.

    A last line without its newline or that is not JSON is a torn write (the process died mid-append); with
    ``repair`` the file is cut back to the end of the last whole line.
    """
    path = Path(path)
    if not path.exists():
        return None, {}
    header: Optional[dict] = None
    records: dict[tuple, dict] = {}
    good_end = 0
    with open(path, "rb") as fh:
        data = fh.read()
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # torn tail
        line = data[pos:nl]
        try:
            obj = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            if data.find(b"\n", nl + 1) < 0 and not data[nl + 1 :].strip():
                break  # the last line is garbage: a torn write
            raise ValueError(f"{str(path)!r} line at byte {pos} is not JSON; the log is damaged") from None
        pos = nl + 1
        good_end = pos
        if not isinstance(obj, dict):
            continue
        if "tau2_gym_rollout" in obj:
            header = header or obj
            continue
        key = record_key(obj)
        old = records.get(key)
        if old is None or old.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR:
            records[key] = obj
    if repair and good_end < len(data):
        logger.warning(
            "%s: cutting off a torn last line (%d bytes) left by an interrupted write", path, len(data) - good_end
        )
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return header, records


class EpisodeLog:
    """Append-only JSONL of finished episodes: lines are written and fsync'd before they count as done.

    Opening takes an exclusive ``flock``: a second run on the same output (which would duplicate episodes)
    fails at once; the lock dies with the process, so a killed run never blocks its resume.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - no flock on this platform
            pass
        except OSError:
            os.close(self.fd)
            self.fd = -1
            raise RuntimeError(
                f"another rollout is writing {str(path)!r}; wait for it to end or use another output path"
            ) from None

    def start(self, header: dict) -> None:
        """Write the header line into a new (empty) log."""
        if os.fstat(self.fd).st_size == 0:
            self._write([header])
            fsync_dir(self.path.parent)

    def _write(self, records: Sequence[dict]) -> None:
        data = b"".join(json.dumps(r, default=_log_default).encode("utf-8") + b"\n" for r in records)
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        os.fsync(self.fd)

    def write(self, records: Sequence[dict]) -> None:
        if records:
            self._write(records)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _log_default(obj: Any) -> Any:
    """Records and mappings as objects (as the results file writes them: the report reads the log back), any
    other value as its text."""
    try:
        return json_default(obj)
    except TypeError:
        return str(obj)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def output_paths(cfg: RolloutConfig) -> tuple[Optional[Path], Optional[Path]]:
    """(results file, its .jsonl log) of the run, or (None, None) without an output."""
    out_path = Path(cfg.output) if cfg.output else None
    if out_path is not None and out_path.name.endswith(".jsonl"):
        raise ValueError(
            f"output={cfg.output!r} must be the results file (.json or .json.gz); its .jsonl log is kept beside it"
        )
    return out_path, (log_path(out_path) if out_path is not None else None)


def open_log(cfg: RolloutConfig, lpath: Path, signature: dict) -> tuple[EpisodeLog, dict]:
    """Lock and read the log (no other run can append meanwhile), refuse a header of another run unless
    ``allow_config_change``, write a header if new; returns the log and its records."""
    log = EpisodeLog(lpath)
    try:
        header, records = read_log(lpath, repair=True)
        if header is not None:
            if header.get("domain") != cfg.domain:
                raise ValueError(
                    f"{str(lpath)!r} logs a {header.get('domain')!r} run; this run is {cfg.domain!r}. "
                    "Use another output path (or delete the old files) to start over."
                )
            logged = header.get("run", {})
            changed = {
                k: (logged.get(k), v)
                for k, v in signature.items()  # keys older logs lack: not compared
                if k in logged and logged.get(k) != v
            }
            if changed and not cfg.allow_config_change:
                diff = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
                raise ValueError(
                    f"{str(lpath)!r} logs a run with other settings ({diff}): resuming would mix "
                    "two runs in one results file. Use another output path, or pass "
                    "allow_config_change=True (--allow-config-change) to append anyway."
                )
            if changed:
                logger.warning(
                    "resuming %s with different settings (logged -> now): %s; the results file will mix both",
                    lpath,
                    changed,
                )
        log.start(
            {
                "tau2_gym_rollout": LOG_FORMAT,
                "domain": cfg.domain,
                "run": signature,
                "created": datetime.now().isoformat(),
            }
        )
    except BaseException:
        log.close()
        raise
    return log, records
