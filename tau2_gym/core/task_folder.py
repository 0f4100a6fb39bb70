"""Writing a subset of a domain's tasks as an ordinary tau2 data folder (``data_dir=`` loads it like any data).

The folder is checkout-shaped -- ``<out>/data/tau2/domains/<folder>/`` plus ``<out>/src/tau2`` and
``<out>/data/tau2/user_simulator`` linked to the source data's -- so every path that takes a ``data_dir`` (the envs,
mixtures, ``tau2-gym rollout``, the TRL dataset builder, the exporters) reads it. The domain folder is the source's,
file for file, except the task files: the task set's file holds the chosen tasks, its split file keeps every split of
the source restricted to them (a ``test`` task stays a ``test`` task, so the training split guard still holds), and
``provenance.json`` records where the tasks came from and why they were chosen. After writing, the folder is loaded
back and its tasks must equal the chosen ones, content for content.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from tau2_gym.core.domain import LoadedDomain, load_domain
from tau2_gym.core.tasks import Task, split_file_for
from tau2_gym.data import DataSource

__all__ = ["PROVENANCE_FILE", "domain_folder", "lay_out", "read_provenance", "source_links", "write_task_folder"]

PROVENANCE_FILE = "provenance.json"


def _is_task_file(name: str) -> bool:
    """Task and split files of any task set (``tasks*.json``, ``split_tasks*.json``): not copied, the folder holds
    only the chosen tasks."""
    return name.endswith(".json") and (name.startswith("tasks") or name.startswith("split_tasks"))


def domain_folder(root: str | os.PathLike[str], data_folder: str) -> Path:
    """Where a domain's data files sit in a checkout-shaped data folder."""
    return Path(root) / "data" / "tau2" / "domains" / data_folder


def source_links(root: Path, source: DataSource) -> dict[Path, Path]:
    """The links a checkout-shaped folder at ``root`` holds to the source data (the user simulator's guidelines,
    upstream's sources for the tool descriptions): link -> target, for the targets that exist."""
    out = {root / "data" / "tau2" / "user_simulator": source.user_simulator_dir}
    if source.src is not None:
        out[root / "src" / "tau2"] = source.src
    return {k: v for k, v in out.items() if v.exists()}


def lay_out(root: Path, source: DataSource, data_folder: str, base: Path, skip: Callable[[str], bool]) -> Path:
    """A checkout-shaped folder at ``root`` for one domain: the files of its source folder ``base`` copied, except
    those ``skip`` names (the task files the caller writes), and the source data linked (:func:`source_links`);
    returns the domain folder."""
    folder = domain_folder(root, data_folder)
    folder.mkdir(parents=True)
    for item in sorted(base.iterdir()):
        if skip(item.name):
            continue
        if item.is_dir():
            shutil.copytree(item, folder / item.name)
        else:
            shutil.copy2(item, folder / item.name)
    for link, target in source_links(root, source).items():
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
    return folder


def write_task_folder(
    out: str | os.PathLike[str],
    domain: LoadedDomain,
    tasks: Sequence[Task],
    provenance: dict[str, Any],
    *,
    task_set: Optional[str] = None,
) -> str:
    """Write ``tasks`` of ``domain`` (in their order) as a tau2 data folder at ``out``; returns the path to pass as
    ``data_dir``.

    Args:
        domain: the loaded domain the tasks come from (its data folder is copied, its sources linked).
        tasks: the tasks to keep (Task objects of ``domain``).
        provenance: what made the selection (written to ``provenance.json`` with the source data's record).
        task_set: the task set the tasks belong to (default: the domain's).

    Raises:
        ValueError: a task set stored as a folder of task files with computed splits (writing a subset would
            change its splits), or no tasks.
    """
    if not tasks:
        raise ValueError("no tasks to write")
    name = task_set or domain.spec.default_task_set
    spec = domain.spec.task_sets.get(name)
    if spec is None:
        raise ValueError(
            f"unknown task set {name!r} for domain {domain.name!r}; task sets: {sorted(domain.spec.task_sets)}"
        )
    if spec.loader is not None or spec.splits is not None:
        raise ValueError(
            f"task set {name!r} of {domain.name!r} is not one task file with a split file (its splits are computed "
            "from the tasks, so a subset would split differently): select its tasks with profile=/keep= instead"
        )
    source = domain.source
    root = Path(out)
    folder = domain_folder(root, domain.spec.data_folder)
    if folder.exists():
        shutil.rmtree(folder)
    lay_out(root, source, domain.spec.data_folder, domain.folder, _is_task_file)
    task_file = folder / spec.file
    ids = [t.id for t in tasks]
    task_file.write_text(
        json.dumps([t.model_dump(mode="json") for t in tasks], indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    chosen = set(ids)
    splits = {k: [i for i in v if i in chosen] for k, v in domain.splits(name).items()}
    splits = {k: v for k, v in splits.items() if v}
    split_file_for(task_file).write_text(json.dumps(splits, indent=1) + "\n", encoding="utf-8")
    record = {
        "tasks": len(ids),
        "task_set": name,
        "splits": {k: len(v) for k, v in splits.items()},
        "source_data": domain.data_version_record(),
        **provenance,
    }
    (folder / PROVENANCE_FILE).write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    # read back: the folder must load, through the ordinary path, as exactly these tasks
    written = load_domain(domain.name, str(root), source.version.name, options=domain.options or None)
    back = {t.id: t for t in written.tasks(name, None)}
    changed = [
        t.id for t in tasks if t.id not in back or back[t.id].model_dump(mode="json") != t.model_dump(mode="json")
    ]
    if changed or len(back) != len(ids):
        raise ValueError(
            f"the task folder {str(root)!r} does not read back as the chosen tasks (differ: {changed[:5]})"
        )
    return str(root)


def read_provenance(data_dir: str | os.PathLike[str], folder: str) -> Optional[dict]:
    """The ``provenance.json`` of a folder written by :func:`write_task_folder` (None for other data)."""
    for cand in (Path(data_dir) / "data" / "tau2", Path(data_dir) / "tau2", Path(data_dir)):
        path = cand / "domains" / folder / PROVENANCE_FILE
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None
