"""``tau2/<domain>-user-v0``: the policy plays the customer against an agent (upstream's ``UserGymEnv``)."""

from __future__ import annotations

import copy
import dataclasses
import logging
import weakref
from typing import Any, Optional, Sequence

from tau2_gym.core.actions import ActionError, to_assistant_message
from tau2_gym.core.messages import Message, ToolCall, ToolMessage, UserMessage, dumps_arguments
from tau2_gym.core.results_file import results_info
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.core.termination import TerminationReason
from tau2_gym.core.turn_loop import copy_view, user_sees, user_system_prompt, user_tools_for
from tau2_gym.core.turns import UserSimulatorError
from tau2_gym.envs.base import EpisodeEnv, transcript
from tau2_gym.envs.config import UserEnvConfig
from tau2_gym.envs.spaces import AssistantActionSpace, MessagesSpace, TranscriptSpace
from tau2_gym.episodes.driver import AGENT
from tau2_gym.players.agents import resolve_agent

logger = logging.getLogger("tau2_gym")

# the policy is the user: its own protocol failures are terminal; the agent's failures are the env's
USER_TERMINAL_REASONS = frozenset(
    {TerminationReason.USER_STOP, TerminationReason.AGENT_STOP, TerminationReason.USER_ERROR}
)


def user_view(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The user's role-flipped OpenAI view of a trajectory (what :class:`~tau2_gym.players.users.base.UserTurnRequest`
    holds): the user's turns as ``assistant`` (with its calls), the agent's texts as ``user``, the user's tool
    results as ``tool``; the agent's calls and their results are not shown (upstream's user history rule)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if not user_sees(m):
            continue
        if isinstance(m, ToolMessage):
            out.append({"role": "tool", "tool_call_id": m.id, "content": m.content})
        elif isinstance(m, UserMessage):
            d: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                d["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.name, "arguments": dumps_arguments(tc.arguments)},
                    }
                    for tc in m.tool_calls
                ]
            out.append(d)
        else:
            out.append({"role": "user", "content": m.content})
    return out


class UserEnv(EpisodeEnv):
    """A tau2 episode where *you are the customer*: the agent (scripted, OpenAI-compatible or HF) serves you.

    ## Description
    The inverse of :class:`~tau2_gym.envs.tau2_env.Tau2Env`, as upstream's ``UserGymEnv``: the same turn loop,
    task, database and reward, but the policy writes the customer's turns and an agent policy answers inside
    ``step``. Use it to train or evaluate a user simulator (a better customer makes the agent's reward less
    noisy: user-simulator errors sink a share of episodes in some domains). Every registered domain has an id
    ``tau2/<domain>-user-v0``; solo mode has no user, so there is no solo variant.

    ## Action Space
    :class:`~tau2_gym.envs.spaces.AssistantActionSpace` over the domain's *user* tools (telecom's device tools,
    mock's and banking's user tools; airline and retail have none): one customer turn per ``step``, in any form
    the agent env accepts -- text (``"I want to cancel my reservation"``), an OpenAI assistant message with
    ``tool_calls`` (the policy writes as ``assistant`` in its own view), a ``{"name", "arguments"}`` call, or raw
    model text with call markup (``parser``). Text containing ``###STOP###``, ``###TRANSFER###`` or
    ``###OUT-OF-SCOPE###`` ends the conversation (tau2's stop rule; a message with tool calls never stops).
    Calls are always the customer's (tagged ``requestor="user"``, run in the user's toolkit); upstream's
    ``UserGymEnv`` keeps a JSON call's default tag, the agent's, so there a customer's JSON call without
    ``"requestor": "user"`` would run in the agent's toolkit.

    ## Observation Space
    ``obs_format="messages"``: the user simulator's view -- exactly what :class:`~tau2_gym.players.users.base.
    UserTurnRequest.openai_messages` sends an LLM user: the user system prompt (simulation guidelines and the
    task's instructions), then the conversation role-flipped (the agent's texts as ``user``, your turns as
    ``assistant``, your tool results as ``tool``; the agent's tool calls are invisible, as in tau2).
    ``obs_format="text"``: a ``role: content`` transcript of the same messages with their true roles (the
    agent is ``assistant``), upstream ``UserGymEnv``'s ``all_messages_as_observation=True`` style.

    ## Rewards
    As upstream's ``UserGymEnv``: 0 until the end, then upstream's task reward of the finished trajectory
    (the same evaluation as the agent env: only ``user_stop`` / ``agent_stop`` endings are scored). Optional
    ``user_error_penalty`` (default 0, i.e. upstream): an episode the customer ends by breaking the protocol
    (``user_error``: an empty or unreadable turn, or text and calls together under ``enforce_protocol``) gets
    ``-user_error_penalty`` instead of 0, so a learner can tell "I broke the conversation" from "the agent
    failed". ``info["reward_info"]`` is upstream's breakdown either way. ``reward_mode`` (strict / partial
    credit, :mod:`tau2_gym.scoring.rewards`) applies as in the agent env, before the penalty. A Gymnasium ``TimeLimit``
    around this env cuts an episode without scoring it: use ``max_steps`` (upstream's limit) instead.

    ## Starting State
    As the agent env (task drawn from ``task_split`` with ``np_random``, or ``options={"task_id": ...}``); the
    agent greets (``Hi! How can I help you today?``) and the first observation ends with that greeting (or with
    the task's message history, after the agent's turns it implies).

    ## Episode End
    tau2's termination reasons, classified from the customer's side: ``terminated`` for ``user_stop``,
    ``agent_stop`` and ``user_error`` (the policy's own protocol failure, including an unreadable action --
    where upstream's ``UserGymEnv`` returns an error string and waits, tau2's orchestrator would abort as
    ``user_error``); ``truncated`` for ``max_steps``, ``too_many_errors``, ``timeout`` and ``agent_error``
    (the agent policy failed or sent junk: not the customer's doing); upstream's ``UserGymEnv`` never
    truncates and returns an empty observation at the end, where this env returns the final view. ``info`` then carries
    ``termination_reason``, ``reward_info``, ``simulation_run`` and ``error`` as the agent env's.

    ## Arguments
    See :class:`~tau2_gym.envs.config.UserEnvConfig` (``print(env.unwrapped.config.describe())``): ``agent`` (see
    :func:`~tau2_gym.players.agents.resolve_agent`; default ``"oracle"``, the scripted agent playing the task's gold
    actions), ``agent_parser`` (parser of agent replies whose text holds call markup; default ``"auto"``),
    ``user_error_penalty`` (0.0), and the episode and env settings the agent env has too (``task_split``,
    ``task_ids``, ``max_steps``, ``max_errors``, ``enforce_protocol``, ``agent_can_stop``, ``obs_format``,
    ``parser``, ``judge``, ``reward_mode``, ...). There is no ``user`` (the policy is the customer) and no solo
    mode.

    ## Version History
    * v0: initial release.
    """

    config: UserEnvConfig  # ty: ignore[incompatible-mutable-override] - always an instance of config_class
    config_class = UserEnvConfig

    def __init__(
        self,
        domain: Optional[str] = None,
        *,
        config: Optional[UserEnvConfig] = None,
        render_mode: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        if "user" in kwargs:
            raise TypeError("user= does not apply to the user env (the policy is the user); set the agent with agent=")
        super().__init__(domain, config=config, render_mode=render_mode, **kwargs)
        cfg = self.config
        self.agent = resolve_agent(cfg.agent)
        self.user_error_penalty = cfg.user_error_penalty
        self.agent_tools: tuple[dict, ...] = self.tools  # the agent's tools: what the agent may call
        self.user_tools: tuple[dict, ...] = tuple(self.domain.user_tool_schemas()) if self.domain.has_user_tools else ()
        self.action_space = AssistantActionSpace(
            self.user_tools,
            parser=cfg.parser,
            tokenizer=cfg.tokenizer,
            text_probability=0.5 if self.user_tools else 1.0,
        )
        self.observation_space = MessagesSpace() if cfg.obs_format == "messages" else TranscriptSpace()
        self._calls = 0  # the customer's tool calls so far (ids of calls without one)
        self._info_agent_tools: Optional[list[dict]] = None

    def episode_settings(self) -> EpisodeSettings:
        # the episode's agent actions are the agent policy's replies, read with agent_parser; the config's own
        # parser reads this env's actions (the customer's)
        parser = self.config.agent_parser
        return dataclasses.replace(self.config, parser=parser or "none", parse_replies=bool(parser))

    def shared_objects(self) -> tuple[Any, ...]:
        return (*super().shared_objects(), self.agent, self.config.agent)

    # ------------------------------------------------------------------ gym API

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[Any, dict]:
        """Start an episode: pick a task (as the agent env), let the agent greet, return the customer's view.

        ``options`` as :meth:`Tau2Env.reset` (``task_id``, ``task_index``, ``task``). If the episode already
        ended during reset, ``info["episode_over"]`` is True and the next ``step`` returns the final transition.
        """
        self.begin_reset(seed=seed, options=options)
        return self.end_reset()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """One customer turn: the action goes to the agent (text) or the user's tools (calls), then the agent
        acts until it is the customer's turn again or the episode ends. Never raises for a bad action."""
        self.begin_step(action)
        return self.end_step()

    def begin_reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> None:
        """:meth:`reset` up to the customer's first turn: the episode starts and the agent greets."""
        self._forget_episode()
        self.start_episode(seed=seed, options=options)
        self._info_agent_tools = None
        self._calls = 0
        self._run_agent()

    def begin_step(self, action: Any) -> None:
        """:meth:`step` up to the agent's answer: the customer's turn goes in and the agent acts."""
        episode = self.episode
        if episode is None:
            raise RuntimeError("call reset() before step()")
        self._env_steps += 1
        self._after_end = self._final is not None
        if self._after_end or episode.done:
            return
        try:
            msg = self._user_message(action)
        except ActionError as exc:
            episode.submit_user(UserSimulatorError(f"unreadable customer action: {exc.reason}"))
        else:
            episode.submit_user(msg)
            self._run_agent()

    def end_step(self) -> tuple[Any, float, bool, bool, dict]:
        """The transition of :meth:`step`, once the agent has answered."""
        episode = self.episode
        assert episode is not None
        if self._after_end:
            return self.repeat_final()
        if not episode.done:
            return self.observation(), 0.0, False, False, self._info()
        self._forget_episode()
        reason = episode.termination_reason
        terminated = reason in USER_TERMINAL_REASONS
        _, reward, info = self.finish(terminated=terminated)
        if reason == TerminationReason.USER_ERROR and self.user_error_penalty:
            reward = -self.user_error_penalty
            info["user_error_penalty"] = self.user_error_penalty
            self._final = (None, reward, terminated, not terminated, info)
        return self.observation(), reward, terminated, not terminated, dict(info)

    def _user_message(self, action: Any) -> UserMessage:
        cfg = self.config
        msg = to_assistant_message(
            action,
            parser=cfg.parser,
            tokenizer=cfg.tokenizer,
            fill_ids=cfg.fill_tool_call_ids,
            first_id=self._calls,
            timestamp="",
        )
        calls = (
            None
            if not msg.tool_calls
            else [ToolCall(tc.name, tc.arguments, id=tc.id, requestor="user") for tc in msg.tool_calls]
        )
        self._calls += len(calls or ())
        return UserMessage(
            content=msg.content, tool_calls=calls, cost=msg.cost, usage=msg.usage, raw_data=msg.raw_data, timestamp=""
        )

    def _run_agent(self) -> None:
        """The agent's turns (tool calls and their results included) until the customer must speak."""
        episode = self.episode
        assert episode is not None
        while episode.status == AGENT:
            request = episode.agent_request({"domain": self.config.domain})
            try:
                reply = self.agent.generate(request)
            except Exception as exc:  # noqa: BLE001 - a failing agent ends the episode, never the training loop
                logger.warning("agent %s raised %s: %s", type(self.agent).__name__, type(exc).__name__, exc)
                episode.abort_agent(f"agent policy failed: {type(exc).__name__}: {exc}")
                break
            episode.act(reply)
        if episode.done:
            self._forget_episode()

    def _forget_episode(self) -> None:
        """Tell a stateful agent policy (scripted: one plan per episode) that the current episode is over."""
        done = getattr(self.agent, "episode_done", None)
        if self.episode is not None and done is not None:
            done(self.episode.episode_id)

    def observation(self) -> Any:
        """The customer's view of the live episode, as ``reset`` and ``step`` return it."""
        episode = self.episode
        assert episode is not None
        if self.config.obs_format == "text":
            return transcript([m for m in episode.trajectory if user_sees(m)])
        request = episode.user_request()
        if request is not None:  # what a user simulator is sent now (a fresh copy)
            return copy_view(request.openai_messages())
        tools = user_tools_for(self.domain, episode.task)
        system = user_system_prompt(self.domain, episode.task, tools is not None)
        return [{"role": "system", "content": system}, *user_view(episode.trajectory)]

    def shared_tool_lists(self) -> dict[str, Sequence[dict]]:
        return {"agent_tools": self.agent_tools}  # the customer's tools ("tools") follow the episode's task

    def side_tools(self) -> list[dict]:
        """The user tool schemas offered for this episode's task (a task may restrict them: upstream's
        ``user_tools``), as a user simulator is sent them; the action space spans the whole user toolkit."""
        assert self.episode is not None
        return user_tools_for(self.domain, self.episode.task) or []

    def clone(self, episode_id: Optional[str] = None) -> UserEnv:
        """:meth:`Tau2Env.clone` for the customer's side: the episode (turn loop, DB overlays, RNGs) is copied
        as there; a scripted agent's per-episode plan is copied to the clone's episode id, so both branches'
        agents carry on from where the original's was (stateless agents -- OpenAI, callables -- need nothing)."""
        new = super().clone(episode_id=episode_id)
        if self.episode is not None and new.episode is not None:
            agents = getattr(self.agent, "_agents", None)  # ScriptedPolicy: one agent object per episode id
            if isinstance(agents, dict) and self.episode.episode_id in agents:
                agents[new.episode.episode_id] = copy.copy(agents[self.episode.episode_id])
                # a branch dropped mid-episode (tree search drops most) must not leave its plan behind
                weakref.finalize(new, agents.pop, new.episode.episode_id, None)
        return new

    def _info(self) -> dict[str, Any]:
        episode = self.episode
        assert episode is not None
        if self._info_agent_tools is None:
            self._info_agent_tools = self.handout_tools("agent_tools", self.agent_tools)
        return {
            "domain": self.config.domain,
            "role": "user",
            "task_id": episode.task.id,
            "task": self.info_task(),
            "solo": False,
            "tools": self.info_tools(),
            "agent_tools": self._info_agent_tools,
            "policy": self.policy,
            "step_count": episode.step_count,
            "num_errors": episode.num_errors,
            "data_version": self.data_version,
        }

    def results_info(self) -> dict[str, Any]:
        """``info`` block of a tau2 results file describing this env: the customer is the env's policy."""
        agent_info = self.agent.info() if hasattr(self.agent, "info") else {}
        info = results_info(
            self.domain,
            self.config,
            agent_info={"implementation": "llm_agent", "llm": None, "llm_args": None, **agent_info},
        )
        info["user_info"] = {**info["user_info"], "implementation": "gym_user", "llm": None, "llm_args": None}
        return info
