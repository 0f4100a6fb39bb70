"""The TRL datasets: prompts that name tasks (``rollout_func``) or open episodes (``environment_factory``)."""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from tau2_gym.core.domain import load_domain
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.episodes.band import band_record, load_profile
from tau2_gym.episodes.driver import USER, EpisodeSetup
from tau2_gym.episodes.selection import select_tasks
from tau2_gym.scoring.judges import JudgeSpec, make_judge
from tau2_gym.training.export import training_split

_TASK_KEYS = ("tau2_domain", "tau2_task_id")


def task_prompt(domain: str, task_id: str) -> str:
    """The dataset prompt that names one task: a small JSON object (what the rollout function resets to)."""
    return json.dumps({"tau2_domain": domain, "tau2_task_id": str(task_id)})


def parse_task_prompt(prompt: Any) -> tuple[str, str]:
    """``(domain, task_id)`` of a prompt made by :func:`task_prompt` (also inside a chat message list)."""
    value = prompt
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        value = value[-1].get("content")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if isinstance(value, dict) and all(isinstance(value.get(k), str) for k in _TASK_KEYS):
        return value["tau2_domain"], value["tau2_task_id"]
    raise ValueError(
        f"prompt {str(prompt)[:200]!r} does not name a tau2 task; build the dataset with "
        "tau2_gym.training.trl.build_dataset (prompts made by task_prompt(domain, task_id))"
    )


def build_dataset(
    domain: str = "mock",
    *,
    split: Optional[str] = "train",
    task_set: Optional[str] = None,
    task_ids: Optional[Sequence[str]] = None,
    data_dir: Optional[str] = None,
    repeats: int = 1,
    environment: bool = False,
    solo: bool = False,
    data_version: Optional[str] = None,
    judge: JudgeSpec = None,
    allow_test_split: bool = False,
    exclude_do_nothing_passes: bool = False,
    reward_mode: str = "default",
    reward_integrity: Any = "upstream",
    profile: Any = None,
    keep: Optional[Sequence[str]] = None,
) -> Any:
    """A ``datasets.Dataset`` with one row per task of a domain split (``repeats`` times over).

    The split defaults to ``train``; tasks of the ``test`` split (``split="test"``, ``None`` = all, ``"base"``,
    or such ``task_ids``) are refused unless ``allow_test_split=True`` (see
    :func:`tau2_gym.training.export.training_split`; a domain without train/test splits, such as mock, gives all tasks).

    Columns: ``prompt``, ``task_id``, ``domain``, ``split`` (recorded), ``reward_integrity``. For ``rollout_func``
    training (default) the prompt is
    :func:`task_prompt`; with ``environment=True`` (TRL's ``environment_factory``) it is the agent's
    opening view -- system prompt, greeting or task history -- ending with an empty user message that the
    environment's ``reset`` fills with the customer's first message. ``data_version`` / ``data_dir`` choose
    the data (default tau2-bench==1.0.1); ``judge`` is the env's NL judge: ``"exclude"`` leaves out the tasks
    whose reward needs one, the default (no judge) warns when there are such tasks.
    ``exclude_do_nothing_passes`` leaves out the tasks a do-nothing policy passes under ``reward_mode`` (as the
    env option of that name; :mod:`tau2_gym.episodes.baseline`). ``reward_integrity`` is the reward the rollouts
    will be scored with (``"upstream"``, the default: the benchmark's reward, exactly; ``"hardened"``: upstream's
    known reward holes closed, recommended for training -- see ``tau2-gym audit``); it is recorded in the column of
    that name, and the rollout function and the tool env refuse a dataset built for another setting than theirs.

    env option of that name; :mod:`tau2_gym.episodes.baseline`).

    ``profile`` / ``keep``: train on a band -- only the tasks of the ``keep`` buckets (default: the profile's band) of
    a difficulty profile (``tau2-gym profile``) of exactly this split; a profile of other tasks or data is refused
    (:mod:`tau2_gym.episodes.band`). The dataset then has a ``bucket`` column, and its ``info.description`` holds the
    band (:func:`~tau2_gym.episodes.band.band_record`) as JSON.
    """
    from datasets import Dataset

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1; got {repeats}")

    loaded = load_domain(domain, data_dir, data_version)
    ids, recorded = training_split(loaded, split, task_set=task_set, allow_test_split=allow_test_split)
    by_id = {t.id: t for t in loaded.tasks(task_set, None)}
    if task_ids is not None:  # a subset of the split, in the caller's order
        outside = [str(t) for t in task_ids if str(t) not in set(ids)]
        if outside:
            raise ValueError(
                f"task_ids {outside[:5]} of domain {domain!r} are not in split {recorded!r}; "
                "choose the split that holds them (test tasks need allow_test_split=True)"
            )
        ids = tuple(str(t) for t in task_ids)
    settings = EpisodeSettings(
        domain=domain,
        data_version=data_version,
        data_dir=data_dir,
        task_set=task_set,
        solo=solo,
        judge=judge,
        reward_integrity=reward_integrity,
        profile=profile,
        keep=keep,
    )
    tasks = select_tasks(
        loaded,
        settings,
        [by_id[i] for i in ids],
        judge=make_judge(judge),
        exclude_do_nothing_passes=exclude_do_nothing_passes,
        reward_mode=reward_mode,
        where=f"dataset of {domain!r}",
    )
    integrity = settings.integrity.name
    rows: dict[str, list] = {"prompt": [], "task_id": [], "domain": [], "split": [], "reward_integrity": []}
    buckets: dict[str, Optional[str]] = {}
    if profile is not None:
        rows["bucket"] = []
        buckets = {t.task_id: t.bucket for t in load_profile(profile).tasks}
    for task in tasks:
        prompt: Any = opening_messages(loaded, task, solo) if environment else task_prompt(domain, task.id)
        for _ in range(repeats):
            rows["prompt"].append(prompt)
            rows["task_id"].append(task.id)
            rows["domain"].append(domain)
            rows["split"].append(recorded)
            rows["reward_integrity"].append(integrity)
            if profile is not None:
                rows["bucket"].append(buckets.get(task.id))
    if profile is None:
        return Dataset.from_dict(rows)
    from datasets import DatasetInfo

    band = json.dumps({"tau2_band": band_record(profile, keep)})
    return Dataset.from_dict(rows, info=DatasetInfo(description=band))


def opening_messages(loaded: Any, task: Any, solo: bool = False) -> list[dict[str, Any]]:
    """The agent's view before the customer's first turn (+ an empty user message when that turn is next).

    Tool-call arguments stay JSON strings (a dataset needs one schema for every row).
    """
    episode = EpisodeSetup(loaded, EpisodeSettings(domain=loaded.name, solo=solo)).start(task)
    messages = episode.agent_messages()
    if episode.status == USER:
        messages.append({"role": "user", "content": ""})
    return messages
