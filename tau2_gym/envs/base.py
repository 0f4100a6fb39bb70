"""What the agent env and the user env share: a Gymnasium env around one episode of the driver.

Both sides play the same episodes (one domain, one task pool, one :class:`~tau2_gym.episodes.driver.EpisodeSetup`)
and differ only in whose turns are the env's actions: the agent's (:class:`~tau2_gym.envs.tau2_env.Tau2Env`) or the
customer's (:class:`~tau2_gym.envs.user_env.UserEnv`). This base holds the shared part -- building the domain, the
judge and the pool from the config, drawing tasks, starting episodes, finishing them, copies for vector envs and
search, results files -- and each side adds its spaces, its observation and its classification of endings.
"""

from __future__ import annotations

import copy
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Sequence

import gymnasium as gym

from tau2_gym.core.domain import LoadedDomain, load_domain
from tau2_gym.core.messages import ParticipantMessage, ToolMessage
from tau2_gym.core.records import Record, as_dict
from tau2_gym.core.results_file import write_json_atomic
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.core.tasks import Task
from tau2_gym.core.turn_loop import TurnLoop, solo_task_error
from tau2_gym.core.warn import warn
from tau2_gym.envs.clone import copy_rng
from tau2_gym.envs.config import EnvConfig
from tau2_gym.envs.handouts import Handouts, ToolHandout
from tau2_gym.episodes.branch import copy_episode, shallow_copy
from tau2_gym.episodes.driver import Episode, EpisodeOutcome, EpisodeSetup
from tau2_gym.episodes.selection import select_tasks
from tau2_gym.llm.cache import cache_info
from tau2_gym.players.users.base import UserSimulator
from tau2_gym.scoring.judges import make_judge
from tau2_gym.scoring.rewards import apply_reward_mode

__all__ = ["EpisodeEnv", "check_reset_options", "transcript"]

#: a transition: (observation, reward, terminated, truncated, info)
Transition = tuple[Any, float, bool, bool, dict]


def transcript(messages: list, include_tool_results: bool = True) -> str:
    """``role: content`` lines; tool calls in ``name(k='v', ...)`` form (upstream gym's observation style)."""
    lines = []
    for m in messages:
        if isinstance(m, ToolMessage):
            if include_tool_results:
                lines.append(f"tool: {m.content}")
        elif isinstance(m, ParticipantMessage) and m.tool_calls:
            calls = ", ".join(
                f"{tc.name}({', '.join(f'{k}={v!r}' for k, v in sorted(tc.arguments.items()))})" for tc in m.tool_calls
            )
            lines.append(
                f"{m.role}: {calls}" if not m.has_text_content() else f"{m.role}: {m.content}\n{m.role}: {calls}"
            )
        else:
            lines.append(f"{m.role}: {m.content}")
    return "\n".join(lines)


def check_reset_options(options: dict, valid: tuple[str, ...]) -> None:
    """Refuse ``reset(options=...)`` keys outside ``valid``: a misspelled key must not silently draw a random
    task."""
    unknown = sorted(str(k) for k in options if k not in valid)
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; valid options are: {', '.join(valid)}")


class EpisodeEnv(gym.Env):
    """The shared part of the agent env and the user env (see the module docstring); not registered itself."""

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}
    domain_name: Optional[str] = None  # fixed by the per-domain classes (tau2_gym.envs.domain_envs)
    #: keyword arguments of the domain's own settings, folded into ``domain_options`` (e.g. ``retrieval_config``)
    domain_option_names: tuple[str, ...] = ()
    #: the config class of the env (its fields are the env's keyword arguments)
    config_class: type[EnvConfig] = EnvConfig
    #: the keys ``reset(options=...)`` understands; any other key is a caller's typo, refused with this list
    reset_options: tuple[str, ...] = ("task_id", "task_index", "task")

    config: EnvConfig
    #: the customer simulator the env answers the customer's turns with (None: the env's actions are the customer's,
    #: or solo mode)
    user: Optional[UserSimulator] = None
    domain: LoadedDomain
    setup: EpisodeSetup
    tools: tuple[dict, ...]

    def __init__(
        self,
        domain: Optional[str] = None,
        *,
        config: Optional[EnvConfig] = None,
        render_mode: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        options = {name: kwargs.pop(name) for name in self.domain_option_names if kwargs.get(name) is not None}
        for name in self.domain_option_names:
            kwargs.pop(name, None)
        if options:
            kwargs["domain_options"] = {**(kwargs.get("domain_options") or {}), **options}
        name = domain or kwargs.pop("domain", None) or self.domain_name or (config.domain if config else None)
        if config is None:
            config = self.config_class.from_kwargs(domain=name or "mock", **kwargs)
        elif kwargs:
            raise TypeError("pass either config= or keyword arguments, not both")
        if self.domain_name is not None and config.domain != self.domain_name:
            raise ValueError(f"{type(self).__name__} is the {self.domain_name!r} env; got domain={config.domain!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r}; choose one of {self.metadata['render_modes']}")
        self.config = config
        self.render_mode = render_mode

        self.domain = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
        if config.solo and not self.domain.spec.solo_supported:
            raise ValueError(self.domain.spec.solo_error or f"{config.domain} domain does not support solo mode")
        self.policy = self.domain.policy(config.solo)
        self.data_version = Record(self.domain.data_version_record())
        self.judge = make_judge(config.judge)
        self.tasks = select_tasks(
            self.domain,
            config,
            judge=self.judge,
            exclude_do_nothing_passes=bool(getattr(config, "exclude_do_nothing_passes", False)),
            reward_mode=config.reward_mode,
            where=f"env {config.domain!r}",
        )
        self._all_tasks: Optional[dict[str, Task]] = None
        self.setup = EpisodeSetup(self.domain, self.episode_settings(), self.judge)
        self.tools = self.setup.tools
        #: the per-episode copies ``info`` hands out (shared by siblings and clones)
        self.handouts = Handouts(self.domain, config.task_set)

        self.episode: Optional[Episode] = None
        self.task: Optional[Task] = None
        self._info_task: Optional[Task] = None
        self._info_tools: Optional[list[dict]] = None
        #: False: ``info`` holds the loaded task and the tool schemas themselves instead of private copies, for an
        #: owner that only reads each info before the next call (the OpenEnv server serialises it at once); as
        #: ``copy_observations``, a setting of this env object, not of its config
        self.copy_infos = True
        self._tool_handouts: dict[str, ToolHandout] = {}  # this env's own: never shared with a sibling or a clone
        self._cursor = 0
        self._final: Optional[Transition] = None
        self._after_end = False  # this step came after the episode's end: it repeats the final transition
        self._env_steps = 0  # step() calls since reset

    def episode_settings(self) -> EpisodeSettings:
        """The settings this env's episodes are played under (the config itself, unless a side reads actions
        differently)."""
        return self.config

    @property
    def loop(self) -> Optional[TurnLoop]:
        """The live episode (an :class:`~tau2_gym.episodes.driver.Episode` is upstream's turn loop; read it, drive it
        through the env); None before the first reset."""
        return self.episode

    # ------------------------------------------------------------------ copies

    def shared_objects(self) -> tuple[Any, ...]:
        """Objects copies of this env share instead of copying: they hold clients, locks and thread pools and keep
        no per-episode state (the judge; each side adds its players)."""
        return (self.judge, self.config.judge)

    def __getstate__(self) -> dict[str, Any]:
        # the task pool is the loaded domain's own (often thousands of tasks): pickle its ids, and re-bind them
        # to the unpickling process's cached tasks (the domain itself re-binds the same way)
        state = self.__dict__.copy()
        state["_all_tasks"] = None  # a lookup cache, rebuilt on demand
        shared = self._shared_tasks(self.domain, self.config)
        if all(shared.get(t.id) is t for t in self.tasks):
            state["tasks"] = None
            state["_task_ids"] = tuple(t.id for t in self.tasks)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        ids = state.pop("_task_ids", None)
        if ids is not None:
            shared = self._shared_tasks(state["domain"], state["config"])
            state["tasks"] = tuple(shared[i] for i in ids)
        self.__dict__.update(state)

    def __deepcopy__(self, memo: dict[int, Any]) -> EpisodeEnv:
        # everything deep-copied as pickling would carry it, except what copies share (shared_objects)
        for shared in self.shared_objects():
            if shared is not None and not isinstance(shared, str):
                memo[id(shared)] = shared
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new

    @staticmethod
    def _shared_tasks(domain: LoadedDomain, config: EpisodeSettings) -> dict[str, Task]:
        return {t.id: t for t in domain.tasks(config.task_set, None)}

    def sibling(self) -> Any:
        """A new env sharing this one's loaded domain, task pool, tools, spaces, judge and players, with its own
        RNG and no episode: how a vector env holds thousands of envs for the memory of one."""
        new = shallow_copy(self)
        new._np_random = new._np_random_seed = None  # seeded at its first reset, as a freshly made env
        new.episode = new.task = new._info_task = new._info_tools = new._final = None
        new._tool_handouts = {}
        new._cursor = new._env_steps = 0
        return new

    def clone(self, episode_id: Optional[str] = None) -> Any:
        """An independent copy of this env and its live episode, for branching (tree search, best-of-n,
        "what if the agent had called X here").

        Copied: the episode (messages, the agent's and the user's views, step and error counters, the clock,
        the tool environment with each DB as its copy-on-write changes over the shared base), the RNGs
        (``np_random`` and the action space's: the clone draws what the original would have drawn), the
        episode's counters. Shared, read-only: the loaded domain (base DBs, tool schemas, policies), the task pool
        and the task, the config, the judge and the players; also the episode's ``info["task"]`` / ``info["tools"]``
        copies made at ``reset`` (branches of one episode hand out the same ones; the loaded task that grades is
        never handed out). Players are stateless (:mod:`tau2_gym.players.users.base`): the conversation lives in the
        episode, so an LLM player keeps its one client and reply cache, and the clone's turns see the clone's own
        history. Given the same actions (and deterministic players: the oracle, or an LLM at temperature 0 with the
        episode seed, which the clone keeps) the clone and the original produce the same trajectory and reward;
        otherwise they diverge freely. The clone gets a new episode id (``episode_id=`` to choose one).
        Through wrappers use :func:`~tau2_gym.envs.clone.clone_env` (``gym.make`` returns a wrapper chain).
        """
        new = shallow_copy(self)  # not copy.copy: that goes through __getstate__ (made for pickling)
        new._np_random = copy_rng(self._np_random)
        new._tool_handouts = {}
        space = shallow_copy(self.action_space)
        space._np_random = copy_rng(getattr(self.action_space, "_np_random", None))
        new.action_space = space
        if self.episode is not None:
            new.episode = copy_episode(self.episode, episode_id)
        if self._final is not None:
            obs, reward, term, trunc, info = self._final
            new._final = (obs, reward, term, trunc, dict(info))
        return new

    # ------------------------------------------------------------------ tasks

    def task_by_id(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        if self._all_tasks is None:
            self._all_tasks = {t.id: t for t in self.domain.tasks(self.config.task_set, None)}
        task = self._all_tasks.get(str(task_id))
        if task is None:
            raise ValueError(f"unknown task_id {task_id!r} for domain {self.config.domain!r}")
        return task

    def _pick_task(self, options: dict) -> Task:
        check_reset_options(options, self.reset_options)
        if "task" in options and isinstance(options["task"], Task):
            return options["task"]
        if options.get("task_id") is not None:
            return self.task_by_id(str(options["task_id"]))
        if options.get("task_index") is not None:
            idx = int(options["task_index"])
            if not -len(self.tasks) <= idx < len(self.tasks):
                raise IndexError(f"task_index {idx} out of range: the pool has {len(self.tasks)} tasks")
            return self.tasks[idx]
        if self.config.task_sampling == "sequential":
            task = self.tasks[self._cursor % len(self.tasks)]
            self._cursor += 1
            return task
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    # ------------------------------------------------------------------ the episode

    def start_episode(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Episode:
        """Seed the env, pick the task (``options``) and start its episode: the common start of both sides'
        ``reset``."""
        super().reset(seed=seed)
        task = self._pick_task(options or {})
        if self.config.solo:
            why = solo_task_error(task)
            if why is not None:
                raise ValueError(f"task {task.id!r} cannot run in solo mode: {why}")
        user_seed = int(self.np_random.integers(0, 2**31 - 1))  # the user simulator's seed, from reset(seed)
        self.task = task
        # info hands out per-episode copies: the loaded task and the env's tools are shared and grade/define
        # every later episode, so what a caller does to info must not reach them (made on first use)
        self._info_task = None
        self._info_tools = None
        self._final = None
        self._after_end = False
        self._env_steps = 0
        self.episode = self.setup.start(task, seed=user_seed)
        return self.episode

    def info_task(self) -> Task:
        """This episode's private copy of its task, for ``info["task"]`` (the task itself without ``copy_infos``)."""
        if self._info_task is None:
            assert self.episode is not None
            task = self.episode.task
            self._info_task = self.handouts.task(task) if self.copy_infos else task
        return self._info_task

    def end_reset(self) -> tuple[Any, dict]:
        """The ``(observation, info)`` of :meth:`reset`, once the episode waits for this env's side."""
        info = self._info()
        if self.episode is not None and self.episode.done:
            info["episode_over"] = True
            info["termination_reason"] = self.episode.termination_reason
        return self.observation(), info

    def repeat_final(self) -> Transition:
        """A step after the episode's end: the final transition again, with reward 0 and a warning."""
        warn("step() called after the episode ended; call reset()")
        assert self._final is not None
        _, _, term, trunc, info = self._final
        return self.observation(), 0.0, term, trunc, dict(info)

    def finish(self, terminated: bool) -> tuple[EpisodeOutcome, float, dict]:
        """The end of the episode, once: scored and recorded by the driver (:meth:`Episode.finish`), the reward in
        the config's reward mode, and the final info. ``terminated``: this side's classification of the ending."""
        episode = self.episode
        assert episode is not None and episode.done
        outcome = episode.finish(catch_evaluation_errors=not self.config.raise_on_evaluation_error)
        info = self._info()
        if outcome.evaluation_error is not None:
            info["evaluation_error"] = outcome.evaluation_error
        # info["tau2_reward"]: the raw reward, when a training reward mode changes it
        reward = apply_reward_mode(self.config.reward_mode, info, outcome.reward_info, outcome.reward)
        info["reward_integrity"] = self.config.integrity.name
        info["termination_reason"] = episode.termination_reason
        info["reward_info"] = None if outcome.reward_info is None else Record(outcome.reward_info)
        if episode.error is not None:
            info["error"] = episode.error
        info.update(outcome.diagnostics)  # beside upstream's reward_info (e.g. the DB diff of a failed DB check)
        info["simulation_run"] = outcome.record
        info.update(cache_info(self.user, self.judge))  # the user simulator's / judge's reply caches, counts so far
        self._final = (None, reward, terminated, not terminated, info)
        return outcome, reward, info

    # ------------------------------------------------------------------ each side's own

    def observation(self) -> Any:  # pragma: no cover - each side defines it
        raise NotImplementedError

    def _info(self) -> dict[str, Any]:  # pragma: no cover - each side defines it
        raise NotImplementedError

    def results_info(self) -> dict[str, Any]:  # pragma: no cover - each side defines it
        raise NotImplementedError

    # ------------------------------------------------------------------ gym extras

    def render(self) -> Optional[str]:
        if self.episode is None:
            return None
        text = transcript(self.episode.messages())
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self.episode = None
        self._final = None

    @property
    def termination_reason(self) -> Optional[str]:
        return self.episode.termination_reason if self.episode is not None else None

    def simulation_run(self) -> Optional[dict]:
        """The finished episode as a tau2 SimulationRun dict (None before the end)."""
        return None if self._final is None else as_dict(self._final[4]["simulation_run"])

    def results(self, simulation_runs: list[dict]) -> dict[str, Any]:
        """A tau2 results-file dict holding ``simulation_runs`` (from ``info["simulation_run"]``) and their tasks."""
        ids = list(dict.fromkeys(str(r["task_id"]) for r in simulation_runs))
        tasks = [self.task_by_id(i).model_dump(mode="json") for i in ids]
        return {
            "timestamp": datetime.now().isoformat(),
            "info": self.results_info(),
            "tasks": tasks,
            "simulations": [as_dict(r) for r in simulation_runs],
        }

    def save_results(self, path: Any, simulation_runs: list[dict]) -> None:
        """Write :meth:`results` as a ``tau2 run``-style results file (``.json`` or ``.json.gz``)."""
        write_json_atomic(Path(path), self.results(simulation_runs))

    def info_tools(self) -> list[dict]:
        """A private copy of the tools of this env's side, for ``info["tools"]``: this env's copy from an earlier
        episode while it still equals them (:class:`~tau2_gym.envs.handouts.ToolHandout`)."""
        if self._info_tools is None:
            self._info_tools = self.handout_tools("tools", self.side_tools())
        return self._info_tools

    def handout_tools(self, name: str, tools: Sequence[dict]) -> list[dict]:
        """A private copy of ``tools`` for ``info[name]``: this env's earlier copy while it still equals them
        (without ``copy_infos``, a list of the schemas themselves)."""
        if not self.copy_infos:
            return list(tools)
        handout = self._tool_handouts.get(name)
        if handout is None:
            handout = self._tool_handouts[name] = ToolHandout()
        return handout.get(tools)

    def side_tools(self) -> Sequence[dict]:
        """The tool schemas of this env's side (the agent's, or the customer's for the task); read only."""
        return self.tools

    def shared_tool_lists(self) -> dict[str, Sequence[dict]]:
        """The ``info`` keys whose tool copies are made from lists every sibling shares (not from the episode's
        task), with those lists."""
        return {"tools": self.tools}

    def handout_recipes(self, info: dict) -> dict[str, tuple[str, str]]:
        """The values of ``info`` that are this env's copies of what every sibling shares -- a loaded task's copy,
        a shared tool list's -- as recipes from which a sibling makes its own copy the same way
        (:meth:`make_handout`): how a vector env's worker process sends them, by name."""
        out: dict[str, tuple[str, str]] = {}
        episode = self.episode
        if episode is not None and info.get("task") is self._info_task and self.handouts.is_loaded(episode.task):
            out["task"] = ("task", episode.task.id)
        for name in self.shared_tool_lists():
            handout = self._tool_handouts.get(name)
            if handout is not None and name in info and handout.holds(info[name]):
                out[name] = ("tools", name)
        return out

    def make_handout(self, recipe: tuple[str, str]) -> Any:
        """This env's own copy for a recipe of :meth:`handout_recipes` (its tool copies reused while unchanged,
        as at its own resets)."""
        kind, name = recipe
        if kind == "task":
            return self.handouts.loaded_task(name)
        return self.handout_tools(name, self.shared_tool_lists()[name])
