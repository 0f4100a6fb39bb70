"""One session's episode as OpenEnv's ``Environment``, and the task catalog it serves (OpenEnv's
``server/<name>_environment.py``).

The server holds one loaded env (domain, task pool, tools, judge, user simulator) and gives every WebSocket
connection its own episode on it: a session's env is a :meth:`~tau2_gym.envs.tau2_env.Tau2Env.sibling` of the
loaded one, so a thousand sessions cost what a thousand episodes cost, not a thousand domains. Every episode runs
through the env's public two-phase API (:meth:`~tau2_gym.envs.tau2_env.Tau2Env.begin_step` ... ``end_step``) -- the
one driver; a customer behind an LLM is awaited, never run on the event loop's thread.

The catalog is OpenEnv's ``TaskProvider`` (``list_splits``, ``list_tasks``, ``num_tasks``, ``get_task``,
``get_task_range``, served as ``/{name}/splits`` ...): the splits of the served task set, each task in the split's
order, so that ``reset(split=s, index=i)`` plays ``get_task(s, i)`` and ``reset(task_id=...)`` plays the task of that
id. The split the env draws from lists the env's pool itself (``reset(task_index=i)`` plays its ``i``-th task). A
task is shown without its gold (actions, assertions, the information to communicate, the documents to find)
unless the operator serves it (``tau2-gym serve --expose-gold``).
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any, Optional

import gymnasium as gym
from fastapi import HTTPException
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from tau2_gym.core.records import as_dict
from tau2_gym.core.tasks import Task
from tau2_gym.core.turn_loop import solo_task_error
from tau2_gym.frameworks.openenv.models import Tau2Action, Tau2Observation, Tau2State
from tau2_gym.players import offline

logger = logging.getLogger("tau2_gym")

__all__ = ["LoadedEnv", "TaskCatalog", "Tau2Environment", "openenv_name", "public_task"]

#: the task fields that are its gold: never served unless the operator exposes them
GOLD_FIELDS = frozenset({"evaluation_criteria", "required_documents", "issues"})


def openenv_name(env_id: str) -> str:
    """The OpenEnv name of a served env id: the Task API's ``/{name}/...`` path segment, ``/metadata``'s name and
    the manifest's (a Space name): ``tau2/airline-v0`` -> ``tau2-airline-v0``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", env_id).strip("-")


def public_task(task: Task, split: str, index: int, domain: str, expose_gold: bool = False) -> dict[str, Any]:
    """A task as the Task API serves it: its place (``id``, ``split``, ``index``, ``domain``) and its fields without
    the gold -- the reward basis (which checks the reward multiplies) stays; ``expose_gold``: every field."""
    fields = task.model_dump(mode="json", exclude_none=True, exclude=None if expose_gold else set(GOLD_FIELDS))
    if not expose_gold and task.evaluation_criteria is not None:
        fields["reward_basis"] = [b.value for b in task.evaluation_criteria.reward_basis]
    return {**fields, "id": task.id, "split": split, "index": index, "domain": domain}


class TaskCatalog:
    """The splits of a served env's task set (for OpenEnv's Task API and ``reset(split=, index=)``).

    ``pool_split`` names the env's own pool: its ``task_split`` (``"all"`` for the whole set, ``"pool"`` for an
    explicit ``task_ids`` list); it lists ``env.tasks`` in order, after the env's filters (no-judge exclusion,
    do-nothing passes). The other splits list the task set's split; in solo mode only the tasks that can run
    solo (the others are refused by ``reset``)."""

    def __init__(self, env: Any, expose_gold: bool = False) -> None:
        cfg = env.config
        self.domain = cfg.domain
        self.expose_gold = expose_gold
        self.pool_split = "pool" if cfg.task_ids is not None else (cfg.task_split or "all")
        splits: dict[str, tuple[Task, ...]] = {}
        for name in env.domain.splits(cfg.task_set):
            tasks = env.domain.tasks(cfg.task_set, name)
            splits[name] = tuple(t for t in tasks if solo_task_error(t) is None) if cfg.solo else tasks
        splits[self.pool_split] = tuple(env.tasks)
        # the pool first: the split a client most likely wants
        self.splits = {self.pool_split: splits.pop(self.pool_split), **splits}
        self._public: dict[str, list[dict[str, Any]]] = {}

    def tasks(self, split: str) -> tuple[Task, ...]:
        try:
            return self.splits[split]
        except KeyError:
            raise ValueError(f"unknown split {split!r}; splits: {list(self.splits)}") from None

    def task_id(self, split: str, index: int) -> str:
        tasks = self.tasks(split)
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"index must be an integer, got {index!r}")
        if not 0 <= index < len(tasks):
            raise IndexError(f"index {index} out of range: split {split!r} has {len(tasks)} tasks")
        return tasks[index].id

    def public(self, split: str) -> list[dict[str, Any]]:
        """The split's tasks as served (built once per split: the catalog is shared by every session)."""
        out = self._public.get(split)
        if out is None:
            tasks = self.tasks(split)
            out = [public_task(t, split, i, self.domain, self.expose_gold) for i, t in enumerate(tasks)]
            self._public[split] = out
        return out


class LoadedEnv:
    """The env the sessions share: made once with ``gym.make``; each session gets a sibling of it (or, for an env
    class without ``sibling``, its own ``gym.make``). ``catalog`` is None for an env without one task set (the
    domain mixture)."""

    def __init__(self, env_id: str, env_kwargs: Optional[dict[str, Any]] = None, *, expose_gold: bool = False) -> None:
        self.env_id = env_id
        self.name = openenv_name(env_id)
        self.env_kwargs = dict(env_kwargs or {})
        self.base = gym.make(env_id, **self.env_kwargs).unwrapped
        has_tasks = all(hasattr(self.base, a) for a in ("tasks", "domain", "config"))
        self.catalog: Optional[TaskCatalog] = TaskCatalog(self.base, expose_gold) if has_tasks else None

    def new_env(self) -> Any:
        sibling = getattr(self.base, "sibling", None)
        env = sibling() if sibling is not None else gym.make(self.env_id, **self.env_kwargs).unwrapped
        # observations and infos are serialized at once, never changed or handed to a caller
        if hasattr(env, "copy_observations"):
            env.copy_observations = False  # ty: ignore[invalid-assignment] - ty reads a hasattr-found name as read-only
        if hasattr(env, "copy_infos"):
            env.copy_infos = False  # ty: ignore[invalid-assignment] - as above
        return env


_RESET_KEYS = "seed, episode_id, task_id, task_index, split + index, incremental"


def _reset_options(
    catalog: Optional[TaskCatalog],
    task_id: Any,
    task_index: Any,
    split: Any,
    index: Any,
    incremental: Any,
    extra: dict[str, Any],
) -> dict[str, Any]:
    if extra:
        raise ValueError(f"unknown reset option(s) {sorted(extra)}; reset takes {_RESET_KEYS}")
    if not isinstance(incremental, bool):
        raise ValueError(f"incremental must be true or false, got {incremental!r}")
    chosen = [k for k, v in (("task_id", task_id), ("task_index", task_index), ("split", split)) if v is not None]
    if len(chosen) > 1:
        raise ValueError(f"reset takes one of task_id, task_index or split + index; got {chosen}")
    if (split is None) != (index is None):
        raise ValueError("split and index go together: reset(split='test', index=3) plays get_task('test', 3)")
    options: dict[str, Any] = {}
    if task_id is not None:
        options["task_id"] = str(task_id)
    if task_index is not None:
        if isinstance(task_index, bool) or not isinstance(task_index, int):
            raise ValueError(f"task_index must be an integer, got {task_index!r}")
        options["task_index"] = task_index
    if split is not None:
        if catalog is None:
            raise ValueError("this env serves no task splits: reset with task_id or task_index")
        options["task_id"] = catalog.task_id(str(split), index)
    return options


@contextlib.contextmanager
def _caller_errors() -> Any:
    """A reset the caller got wrong (unknown task id, index out of range, bad option) is a 422 over HTTP; on a
    WebSocket every exception is an error reply on the session."""
    try:
        yield
    except (ValueError, IndexError, TypeError) as exc:
        raise HTTPException(422, str(exc)) from exc


class Tau2Environment(Environment[Tau2Action, Tau2Observation, Tau2State]):
    """One session's episode, as OpenEnv's ``Environment``. Built by the server per WebSocket connection (and per
    stateless HTTP request) from the loaded env it shares with every other session; also OpenEnv's
    ``TaskProvider`` over the loaded env's :class:`TaskCatalog`."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # factory and close() of all sessions on one thread (steps run on the event loop): no thread per session
    REQUIRES_SINGLE_THREAD_EXECUTOR = True

    def __init__(self, loaded: LoadedEnv) -> None:
        super().__init__()
        self._loaded = loaded
        self._env = loaded.new_env()
        user = getattr(self._env, "user", None)
        # a scripted customer never blocks: its turns run inline; an LLM customer is awaited
        self._inline = user is None or offline(user) or not hasattr(self._env, "begin_step")
        # the env's two phases (Tau2Env): the session drives them itself, inline or awaited (an env without them,
        # the domain mixture, is stepped whole)
        self._phased = hasattr(self._env, "pending_user_turn")
        self._episode_id: Optional[str] = None
        self._steps = 0
        self._started = False  # a reset succeeded: steps have an episode to act on
        self._incremental = False
        self._sent = 0  # messages of the view the client holds (incremental observations)
        self._sent_last: Any = None  # the last of them: the view grew from it only if it is still there

    # -------------------------------------------------------------- reset / step

    def reset(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        task_id: Optional[str] = None,
        task_index: Optional[int] = None,
        incremental: bool = False,
        split: Optional[str] = None,
        index: Optional[int] = None,
        **kwargs: Any,
    ) -> Tau2Observation:
        env = self._env
        with _caller_errors():
            options = _reset_options(self._loaded.catalog, task_id, task_index, split, index, incremental, kwargs)
            if not self._phased:
                obs, info = env.reset(seed=seed, options=options)
                return self._after_reset(obs, info, episode_id, incremental)
            env.begin_reset(seed=seed, options=options)
        self._answer_inline()
        obs, info = env.end_reset()
        return self._after_reset(obs, info, episode_id, incremental)

    async def reset_async(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        task_id: Optional[str] = None,
        task_index: Optional[int] = None,
        incremental: bool = False,
        split: Optional[str] = None,
        index: Optional[int] = None,
        **kwargs: Any,
    ) -> Tau2Observation:
        if self._inline:
            return self.reset(seed, episode_id, task_id, task_index, incremental, split, index, **kwargs)
        env = self._env
        with _caller_errors():
            options = _reset_options(self._loaded.catalog, task_id, task_index, split, index, incremental, kwargs)
            env.begin_reset(seed=seed, options=options)
        await self._answer_user()
        obs, info = env.end_reset()
        return self._after_reset(obs, info, episode_id, incremental)

    def step(self, action: Tau2Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Tau2Observation:  # noqa: ARG002 - OpenEnv's Environment.step signature
        self._check_started()
        self._steps += 1
        env = self._env
        if not self._phased:
            return self._observation(*env.step(action.action))
        env.begin_step(action.action)
        self._answer_inline()
        return self._observation(*env.end_step())

    def _answer_inline(self) -> None:
        """The customer's turns of the current phase, answered here (the driver's ``run_user``)."""
        env = self._env
        if env.user is not None and env.episode is not None:
            env.episode.run_user(env.user)

    async def step_async(self, action: Tau2Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Tau2Observation:  # noqa: ARG002 - OpenEnv's Environment.step_async signature
        if self._inline:
            return self.step(action)
        self._check_started()
        self._steps += 1
        env = self._env
        env.begin_step(action.action)
        await self._answer_user()
        return self._observation(*env.end_step())

    async def _answer_user(self) -> None:
        """The customer's turns of the current phase, awaited (a simulator that raises ends the episode as
        ``user_error``, as :meth:`~tau2_gym.episodes.driver.Episode.run_user` does)."""
        env = self._env
        user = env.user
        while (request := env.pending_user_turn()) is not None:
            try:
                reply: Any = await user.agenerate(request)
            except Exception as exc:  # noqa: BLE001 - a broken simulator ends the episode, not the session
                logger.warning("user simulator %s raised %s: %s", type(user).__name__, type(exc).__name__, exc)
                reply = exc
            env.answer_user(reply)

    def _check_started(self) -> None:
        if not self._started:  # 409 over OpenEnv's stateless HTTP /step (every request a fresh session)
            raise HTTPException(409, "no episode in this session: send a reset first (sessions live on /ws)")

    # -------------------------------------------------------------- observations

    def _after_reset(self, obs: Any, info: dict, episode_id: Optional[str], incremental: Any) -> Tau2Observation:
        self._started = True
        self._steps = 0
        self._episode_id = episode_id
        self._incremental = incremental
        self._sent, self._sent_last = 0, None
        return self._observation(obs, None, False, False, info, tools=list(info.get("tools") or []))

    def _observation(
        self,
        obs: Any,
        reward: Optional[float],
        terminated: bool,
        truncated: bool,
        info: dict,
        tools: Optional[list[dict[str, Any]]] = None,
    ) -> Tau2Observation:
        loop = getattr(self._env, "loop", None)
        offset = 0
        if self._incremental and isinstance(obs, list):
            # the agent's view only grows, its message dicts shared between observations: when the last message
            # the client has is still in place, send what came after it
            sent = self._sent
            if 0 < sent <= len(obs) and obs[sent - 1] is self._sent_last:
                offset = sent
            self._sent, self._sent_last = len(obs), (obs[-1] if obs else None)
        fields: dict[str, Any] = {
            "messages": obs[offset:] if offset else obs,
            "tools": tools,
            "messages_offset": offset,
            "task_id": info.get("task_id"),
            "episode_id": None if loop is None else loop.episode_id,
            "step_count": int(info.get("step_count") or 0),
            "num_errors": int(info.get("num_errors") or 0),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "episode_over": bool(info.get("episode_over", False)),
            "done": bool(terminated or truncated),
            "reward": None if reward is None else float(reward),
            "metadata": {},
            "termination_reason": info.get("termination_reason"),
            "reward_info": None,
            "tau2_reward": None,
            "error": None,
            "evaluation_error": None,
            "simulation_run": None,
        }
        if terminated or truncated:
            fields["reward_info"] = as_dict(info.get("reward_info"))
            tau2 = info.get("tau2_reward")
            fields["tau2_reward"] = None if tau2 is None else float(tau2)
            fields["error"] = info.get("error")
            fields["evaluation_error"] = info.get("evaluation_error")
            run = info.get("simulation_run")
            fields["simulation_run"] = None if run is None else as_dict(run)
        # built from the env's own output: nothing to validate; every field given (no default made per step)
        return Tau2Observation.model_construct(**fields)

    @property
    def state(self) -> Tau2State:
        env = self._env
        loop = getattr(env, "loop", None)
        return Tau2State(
            episode_id=self._episode_id or (None if loop is None else loop.episode_id),
            step_count=self._steps,
            env_id=self._loaded.env_id,
            task_id=None if loop is None else loop.task.id,
            status=None if loop is None else loop.status,
            termination_reason=None if loop is None else loop.termination_reason,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ours = version("tau2-gym")
        except PackageNotFoundError:
            ours = None
        return EnvironmentMetadata(
            name=self._loaded.name,
            description=(
                f"tau2-bench {self._loaded.env_id} (tau2-gym): you are the customer-service agent; a simulated "
                "customer and the domain's tools step inside the env; the reward is upstream's tau2 reward."
            ),
            version=ours,
        )

    def close(self) -> None:
        self._started = False
        self._env.close()

    # -------------------------------------------------------------- OpenEnv's TaskProvider

    def _catalog(self) -> TaskCatalog:
        catalog = self._loaded.catalog
        if catalog is None:
            raise NotImplementedError  # OpenEnv answers 501
        return catalog

    def _split_tasks(self, split: str) -> list[dict[str, Any]]:
        try:
            return self._catalog().public(split)
        except ValueError as exc:
            raise HTTPException(404, str(exc)) from exc

    def list_splits(self) -> list[str]:
        return list(self._catalog().splits)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return self._split_tasks(split)

    def num_tasks(self, split: str) -> int:
        return len(self._split_tasks(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        tasks = self._split_tasks(split)
        if not 0 <= index < len(tasks):
            raise IndexError(index)  # OpenEnv answers 400
        return tasks[index]

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> list[Any]:
        return self._split_tasks(split)[start:stop]
