"""The one task selection of envs and runs: which tasks the episodes of an env's pool or a rollout play.

The same settings select the same tasks wherever they are used (an env's pool, ``tau2-gym rollout``, the
profiler, the trainers), in one order of steps: the tasks given (objects or ids) or the settings' ``task_ids``
(from the whole task set, in their order) or ``task_split``; then tasks solo mode cannot run are left out; then the
first ``num_tasks``; then, with a difficulty ``profile`` of exactly that selection, the tasks of its ``keep`` band
(:mod:`tau2_gym.episodes.band`); then the no-judge choice on NL-judged tasks; then, on request, the tasks a do-nothing
policy passes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional, Sequence, Union

from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.core.tasks import Task
from tau2_gym.core.turn_loop import solo_task_error
from tau2_gym.episodes.band import select_band
from tau2_gym.episodes.baseline import without_do_nothing_passes
from tau2_gym.scoring.judges import apply_no_judge_choice

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain
    from tau2_gym.scoring.judges import Judge

logger = logging.getLogger("tau2_gym")

__all__ = ["select_tasks"]


def select_tasks(
    domain: LoadedDomain,
    settings: EpisodeSettings,
    tasks: Optional[Sequence[Union[Task, str]]] = None,
    *,
    num_tasks: Optional[int] = None,
    judge: Optional[Judge] = None,
    exclude_do_nothing_passes: bool = False,
    reward_mode: str = "default",
    where: str = "",
) -> tuple[Task, ...]:
    """The tasks ``settings`` select on ``domain`` (see the module docstring for the order of the steps).

    Args:
        tasks: Task objects or ids to play instead of the settings' ``task_ids`` / ``task_split``.
        num_tasks: keep only the first N.
        judge: the resolved judge; a no-judge choice of ``exclude`` leaves NL-judged tasks out (default: warns).
        exclude_do_nothing_passes: leave out the tasks a do-nothing policy passes under ``reward_mode``.
        reward_mode: the reward mode of that exclusion.
        where: names the caller in messages (``env 'airline'``, ``rollout of 'airline'``).

    Raises:
        ValueError: an unknown task id, duplicate ids, or a selection left empty;
            :class:`~tau2_gym.episodes.band.ProfileError`: a profile of other tasks or data, an unknown bucket.
    """
    where = where or repr(settings.domain)
    task_set = settings.task_set or domain.spec.default_task_set
    whole: Optional[dict[str, Task]] = None
    if tasks is None and settings.task_ids is None:
        out = list(domain.tasks(settings.task_set, settings.task_split))
    else:
        wanted = list(settings.task_ids or ()) if tasks is None else list(tasks)
        out = []
        missing = []
        for t in wanted:
            if isinstance(t, Task):
                out.append(t)
                continue
            if whole is None:
                whole = {x.id: x for x in domain.tasks(settings.task_set, None)}
            hit = whole.get(str(t))
            if hit is None:
                missing.append(str(t))
            else:
                out.append(hit)
        if missing:
            raise ValueError(f"task_ids {missing} are not in the {settings.domain!r} task set {task_set!r}")
    if settings.solo:
        rejected = [t.id for t in out if solo_task_error(t) is not None]
        if rejected:
            logger.warning("%d task(s) cannot run in solo mode and are left out: %s", len(rejected), rejected[:5])
            out = [t for t in out if solo_task_error(t) is None]
    if num_tasks is not None:
        out = out[:num_tasks]
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise ValueError("the task selection holds duplicate task ids; each (task, trial) must be unique")
    if not out:
        raise ValueError(
            f"no tasks to run for {where} (task_set={settings.task_set!r}, task_split={settings.task_split!r}, "
            f"task_ids={settings.task_ids!r}, solo={settings.solo})"
        )
    if settings.profile is not None:
        split = settings.task_split if tasks is None and settings.task_ids is None else None
        out = list(
            select_band(domain, out, settings.profile, settings.keep, task_set=task_set, split=split, where=where)
        )
    selected: tuple[Task, ...] = tuple(out)
    if judge is not None:
        selected = apply_no_judge_choice(domain, selected, judge, where)
    if exclude_do_nothing_passes:
        selected = without_do_nothing_passes(domain, selected, reward_mode, settings.judge)
    return selected
