"""Difficulty profiles on file, and training on a band of them: the task selection's ``profile``/``keep`` step.

A profile (``tau2-gym profile``, :mod:`tau2_gym.runner.profile`) records, for one task selection, each task's pass
rate over k episodes of one policy and customer, the task's bucket, and the selection's identity: a hash of the
data version and of every task's id and content. GRPO learns only from groups whose rewards differ, so a recipe
trains on the tasks the starting policy sometimes solves -- a *band* of buckets (``keep``). Wherever tasks are
selected (:func:`~tau2_gym.episodes.selection.select_tasks`: envs, mixtures, rollouts, the TRL dataset builder) a
``profile`` narrows the selection to its band, after checking that the selection is the one profiled: a profile of
other tasks or other data would pick tasks by another set's difficulties, so it is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field

from tau2_gym.core.results_file import write_json_atomic
from tau2_gym.core.tasks import Task
from tau2_gym.scoring.metrics import PassRateBuckets

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain

__all__ = [
    "PROFILE_FORMAT",
    "BucketEdge",
    "Profile",
    "ProfileError",
    "TaskPassRate",
    "TaskSetIdentity",
    "band_record",
    "load_profile",
    "select_band",
    "task_set_identity",
]

PROFILE_FORMAT = 1


class ProfileError(ValueError):
    """A profile file cannot be read, or does not fit the tasks it is applied to."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class BucketEdge(_Model):
    """One bucket: its name and upper pass-rate edge (a fraction, e.g. ``"1/4"``)."""

    name: str
    upper: str


class TaskSetIdentity(_Model):
    """Which tasks a profile covers: enough to recognise the same selection and to name it in a message."""

    domain: str
    task_set: Optional[str] = None
    split: Optional[str] = None
    data: str  # the data version (``tau2-bench==1.0.1``; ``custom (claims ...)`` for a folder of one's own)
    task_ids: list[str]
    hash: str  # sha256 of the domain, the data version and every task's id and content

    def describe(self) -> str:
        split = "all tasks" if self.split is None else f"split {self.split!r}"
        return f"{self.domain} {split} of {self.data} ({len(self.task_ids)} tasks, identity {self.hash[:12]})"


class TaskPassRate(_Model):
    """One task's line of a profile."""

    task_id: str
    trials: int  # scored episodes (infrastructure errors are not trials)
    passes: int
    pass_rate: Optional[float] = None
    wilson_low: Optional[float] = None
    wilson_high: Optional[float] = None
    bucket: Optional[str] = None  # None: no scored episode
    do_nothing_pass: Optional[bool] = None  # the do-nothing policy passes the task (None: not measured)
    failed: int = 0  # episodes that ended as infrastructure_error


class Profile(_Model):
    """A difficulty profile: per-task pass rates of one policy and customer over k episodes, bucketed."""

    tau2_gym_profile: int = PROFILE_FORMAT
    created: str = ""
    identity: TaskSetIdentity
    data_version: dict[str, Any] = Field(default_factory=dict)  # the data's record (DataSource.record)
    data_dir: Optional[str] = None  # as the run was given it (None: the named data version)
    data_version_name: Optional[str] = None  # as the run was given it
    policy: dict[str, Any] = Field(default_factory=dict)  # the results file's agent_info
    customer: dict[str, Any] = Field(default_factory=dict)  # the results file's user_info
    k: int
    seed: Optional[int] = None
    seeds: list[int] = Field(default_factory=list)
    buckets: list[BucketEdge]
    keep: list[str]  # the band this profile selects by default
    baseline: Optional[dict[str, Any]] = None  # the do-nothing baseline of the selection
    settings: dict[str, Any] = Field(default_factory=dict)  # the run's episode settings (max_steps, judge, ...)
    results: Optional[str] = None  # the results file of the profile's episodes
    episodes: int = 0
    failed: int = 0
    tasks: list[TaskPassRate]
    path: Optional[str] = Field(default=None, exclude=True)  # where it was read from

    @property
    def edges(self) -> PassRateBuckets:
        return PassRateBuckets.parse([(b.name, b.upper) for b in self.buckets])

    def counts(self) -> dict[str, int]:
        """Tasks per bucket, in bucket order (tasks without a scored episode are not counted)."""
        out = {b.name: 0 for b in self.buckets}
        for t in self.tasks:
            if t.bucket is not None:
                out[t.bucket] = out.get(t.bucket, 0) + 1
        return out

    def check_keep(self, keep: Optional[Sequence[str]]) -> tuple[str, ...]:
        """``keep`` (None: the profile's own band) as bucket names; an unknown name is one error."""
        if keep is None:
            return tuple(self.keep)
        if isinstance(keep, str):
            keep = [k for k in keep.split(",") if k.strip()]
        where = f"keep (profile {self.path})" if self.path else "keep"
        try:
            return self.edges.check_names(keep, where)
        except ValueError as exc:
            raise ProfileError(str(exc)) from None

    def band(self, keep: Optional[Sequence[str]] = None) -> list[str]:
        """The task ids of the ``keep`` buckets (default: the profile's band), in the profile's order."""
        wanted = set(self.check_keep(keep))
        return [t.task_id for t in self.tasks if t.bucket in wanted]

    def check_identity(self, identity: TaskSetIdentity, where: str = "this selection") -> None:
        """Refuse a selection other than the profiled one (other tasks, other contents, other data)."""
        if identity.hash == self.identity.hash:
            return
        mine, theirs = set(self.identity.task_ids), set(identity.task_ids)
        reasons = []
        if identity.data != self.identity.data or identity.domain != self.identity.domain:
            reasons.append("other data")
        if mine != theirs:
            reasons.append(
                f"{len(theirs - mine)} task(s) the profile lacks, {len(mine - theirs)} it has that are not selected"
            )
        why = ", ".join(reasons) or "the same task ids with other contents"
        name = f"profile {self.path}" if self.path else "the profile"
        raise ProfileError(
            f"{name} covers {self.identity.describe()}; {where} is {identity.describe()} -- {why}: select the "
            "profiled tasks (same domain, data, task set and split) or profile these"
        )

    def save(self, path: Union[str, os.PathLike[str]]) -> None:
        write_json_atomic(Path(path), self.model_dump(mode="json"))


def _data_name(domain: LoadedDomain) -> str:
    source = domain.source
    return source.version.name if not source.custom else f"custom (claims {source.version.name})"


def task_set_identity(
    domain: LoadedDomain,
    tasks: Sequence[Task],
    *,
    task_set: Optional[str] = None,
    split: Optional[str] = None,
) -> TaskSetIdentity:
    """The identity of ``tasks`` of ``domain``: the order-free hash of the data version and each task's id and
    content (the ids alone would take a folder of edited tasks for the benchmark's)."""
    per_task = sorted(
        (t.id, hashlib.sha256(json.dumps(t.model_dump(mode="json"), sort_keys=True).encode("utf-8")).hexdigest())
        for t in tasks
    )
    data = _data_name(domain)
    digest = hashlib.sha256(json.dumps([domain.name, data, per_task]).encode("utf-8")).hexdigest()
    return TaskSetIdentity(
        domain=domain.name,
        task_set=task_set or domain.spec.default_task_set,
        split=split,
        data=data,
        task_ids=[t.id for t in tasks],
        hash=digest,
    )


@lru_cache(maxsize=32)
def _read(path: str, mtime_ns: int) -> Profile:  # noqa: ARG001 - the cache key: a changed file is read again
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"profile {path!r} is not readable JSON: {exc}") from None
    if not isinstance(raw, dict) or "tau2_gym_profile" not in raw:
        raise ProfileError(f"{path!r} is not a tau2-gym difficulty profile (made by `tau2-gym profile`)")
    if raw["tau2_gym_profile"] != PROFILE_FORMAT:
        raise ProfileError(
            f"profile {path!r} has format {raw['tau2_gym_profile']!r}; this version reads {PROFILE_FORMAT}"
        )
    try:
        profile = Profile.model_validate(raw)
        profile.edges  # noqa: B018 - the bucket edges are valid
    except ValueError as exc:
        text = " ".join(str(exc).split())
        raise ProfileError(f"profile {path!r} is damaged: {text[:300]}") from None
    profile.path = path
    return profile


def load_profile(profile: Union[str, os.PathLike[str], Profile]) -> Profile:
    """A profile from its file (read once per file state) or as given."""
    if isinstance(profile, Profile):
        return profile
    path = Path(profile)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise ProfileError(f"profile {str(path)!r}: no such file") from None
    return _read(str(path), stamp).model_copy()


def select_band(
    domain: LoadedDomain,
    tasks: Sequence[Task],
    profile: Union[str, os.PathLike[str], Profile],
    keep: Optional[Sequence[str]] = None,
    *,
    task_set: Optional[str] = None,
    split: Optional[str] = None,
    where: str = "this selection",
) -> tuple[Task, ...]:
    """``tasks`` narrowed to the ``keep`` buckets of ``profile``, after checking that ``tasks`` are the profiled
    selection (:meth:`Profile.check_identity`)."""
    prof = load_profile(profile)
    prof.check_identity(task_set_identity(domain, tasks, task_set=task_set, split=split), where)
    wanted = set(prof.band(keep))
    out = tuple(t for t in tasks if t.id in wanted)
    if not out:
        raise ProfileError(
            f"the band {list(prof.check_keep(keep))} of profile {prof.path or ''} holds no task (tasks per bucket: "
            f"{prof.counts()}); keep other buckets"
        )
    return out


def band_record(profile: Union[str, os.PathLike[str], Profile], keep: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """What a training run records about the band it trained on: the profile (file, identity, policy, k), the kept
    buckets and their task counts."""
    prof = load_profile(profile)
    names = prof.check_keep(keep)
    counts = prof.counts()
    return {
        "profile": prof.path,
        "identity": prof.identity.hash,
        "tasks_profiled": prof.identity.describe(),
        "policy": prof.policy.get("implementation"),
        "policy_llm": prof.policy.get("llm"),
        "k": prof.k,
        "buckets": prof.edges.spec(),
        "keep": list(names),
        "tasks_per_bucket": {n: counts[n] for n in names},
        "tasks": len(prof.band(names)),
    }
