"""Generated sets on disk: an ordinary tau2 data folder, written whole or not at all.

Layout (a tau2-bench checkout's shape, so ``data_dir=DIR`` finds it like any data)::

    DIR/data/tau2/domains/<domain>/   the domain's DB and policy files (copied), tasks.json, split_tasks.json,
                                      generated.json (provenance: the mark of a generated set)
    DIR/data/tau2/user_simulator      -> the base data's (a link)
    DIR/src/tau2                      -> the base data's upstream sources (a link: tool descriptions are upstream's)

A set is staged in a hidden folder beside ``DIR`` (verified there: the env that will score the tasks plays them),
then renamed into place. A folder that holds generated sets of other domains gains this domain beside them (one
data folder for a mixture); a folder that exists and is not a generated set is refused, untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from tau2_gym.core.task_folder import domain_folder, lay_out, source_links
from tau2_gym.data import DataSource

__all__ = ["MANIFEST", "GenerationError", "read_manifest", "generated_domains", "Staging"]

MANIFEST = "generated.json"
_DOMAINS = Path("data") / "tau2" / "domains"


class GenerationError(ValueError):
    """A generated set cannot be made or written (bad input, a drafter that cannot deliver, a refused folder)."""


def generated_domains(root: str | os.PathLike[str]) -> Optional[dict[str, dict]]:
    """``{data folder: manifest}`` of a generated set (None when ``root`` is not one: every domain folder in it
    must carry ``generated.json``)."""
    base = Path(root) / _DOMAINS
    if not base.is_dir():
        return None
    out: dict[str, dict] = {}
    for child in sorted(base.iterdir()):
        if child.name.startswith("."):
            continue
        manifest = child / MANIFEST
        if not child.is_dir() or not manifest.is_file():
            return None
        try:
            out[child.name] = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    return out or None


def read_manifest(data_dir: str | os.PathLike[str], domain: Optional[str] = None) -> Optional[dict]:
    """The ``generated.json`` of a generated data folder (``domain``: its data folder name; default: the only
    one, else the first), or None for ordinary data."""
    for root in (Path(data_dir), Path(data_dir).parent, Path(data_dir).parent.parent):
        found = generated_domains(root) if (root / _DOMAINS).is_dir() else None
        if found:
            if domain is not None:
                return found.get(domain)
            return next(iter(found.values()))
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_task_file(name: str, task_files: set[str]) -> bool:
    """Files of the base domain folder a generated set leaves out: task lists and their per-task metadata."""
    return name in task_files or "tasks" in name or name == "audio_difficulty.json"


class Staging:
    """The hidden folder a set is written and verified in, then published as ``out``.

    ``check`` first: ``out`` must be new, empty, or a generated set made from the same base data (its links point
    where this set's would).
    """

    def __init__(self, out: str | os.PathLike[str], data_folder: str, source: DataSource) -> None:
        self.out = Path(out).expanduser().absolute()
        self.data_folder = data_folder
        self.source = source
        self.root: Optional[Path] = None

    # ---------------------------------------------------------------- before anything is written

    def check(self) -> None:
        out = self.out
        if not out.exists() and not out.is_symlink():
            if not out.parent.is_dir():
                raise GenerationError(f"--out {str(out)!r}: its parent folder does not exist")
            return
        if not out.is_dir():
            raise GenerationError(f"--out {str(out)!r} exists and is not a folder; choose a new folder")
        if not any(out.iterdir()):
            return
        if generated_domains(out) is None:
            raise GenerationError(
                f"--out {str(out)!r} exists and is not a generated task set (no data/tau2/domains/*/{MANIFEST}); "
                "choose a new or empty folder, or a folder written by `tau2-gym generate`"
            )
        for link, target in source_links(out, self.source).items():
            if link.is_symlink() and Path(os.readlink(link)) != target:
                raise GenerationError(
                    f"--out {str(out)!r} holds tasks generated from other base data ({link} -> {os.readlink(link)}, "
                    f"this set needs {target}); choose another folder"
                )

    # ---------------------------------------------------------------- staging

    def stage(self, base_folder: Path, task_files: set[str]) -> Path:
        """A hidden folder beside ``out`` with the domain's data files (no tasks yet); returns its root."""
        self.root = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=self.out.parent))
        self.root.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would become the published folder's mode
        lay_out(self.root, self.source, self.data_folder, base_folder, lambda name: _is_task_file(name, task_files))
        return self.root

    def write(self, name: str, value: Any) -> None:
        """A JSON file of the staged domain folder (one task per line group: ``indent=1``, as the mock generator)."""
        assert self.root is not None, "stage() first"
        path = domain_folder(self.root, self.data_folder) / name
        path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    def publish(self) -> str:
        """Rename the staged set into place; returns ``out`` (the ``data_dir`` to pass)."""
        assert self.root is not None, "stage() first"
        out = self.out
        if out.is_dir() and any(out.iterdir()):  # a generated set: this domain's folder is swapped in
            final = domain_folder(out, self.data_folder)
            old = self.root / "old"
            if final.exists():
                os.rename(final, old)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.rename(domain_folder(self.root, self.data_folder), final)
            for link, target in source_links(out, self.source).items():
                if not link.is_symlink():
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(target, target_is_directory=True)
            self.discard()
        else:
            if out.is_dir():
                out.rmdir()
            os.rename(self.root, out)
            self.root = None
        return str(out)

    def discard(self) -> None:
        """Remove the staging folder (after publishing, or when anything failed)."""
        if self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        self.root = None
