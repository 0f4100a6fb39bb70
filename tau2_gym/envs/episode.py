"""The one episode driver: every env, the vector env, the runner, export and the TRL integration play episodes here.

An :class:`EpisodeSetup` holds what the episodes of one env or one run share (the loaded domain, upstream's
orchestrator settings, how agent actions are read, the judge) and assembles the agent's tool list once. Its
:meth:`~EpisodeSetup.start` builds an :class:`Episode`: the only place a
:class:`~tau2_gym.core.orchestrator.TurnLoop` is constructed.

An episode is driven from outside in two phases, so that callers can batch or await the customer's turns:

* the agent's action goes in (:meth:`Episode.act`; its tool calls run at once);
* while :meth:`Episode.user_request` returns a request, the customer's reply goes in (:meth:`Episode.answer`);

until :attr:`Episode.done`. Then :meth:`Episode.score` computes upstream's reward and
:meth:`Episode.simulation_run` gives the tau2 record. A synchronous caller answers the customer with
:meth:`Episode.run_user`; the vector env collects the requests of many episodes and answers them in one batch; the
runner awaits them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional, Union

from tau2_gym.core import orchestrator as tl
from tau2_gym.core.actions import ActionError, to_assistant_message
from tau2_gym.core.db import copy_json
from tau2_gym.core.messages import AssistantMessage, ToolCall, UserMessage
from tau2_gym.core.prompts import done_tool_schema
from tau2_gym.core.records import Record
from tau2_gym.core.turns import AgentTurnRequest, UserSimulatorError, UserTurnRequest
from tau2_gym.scoring import evaluation

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain
    from tau2_gym.core.tasks import Task

logger = logging.getLogger("tau2_gym")

__all__ = ["AGENT", "USER", "DONE", "Episode", "EpisodeSetup", "agent_tools", "play", "reply_message"]

AGENT, USER, DONE = tl.AGENT, tl.USER, tl.DONE


def agent_tools(domain: LoadedDomain, solo: bool, agent_can_stop: bool) -> tuple[dict, ...]:
    """The OpenAI tool schemas the agent may call: the domain's agent tools, in solo mode also the user's, and
    ``done`` when the agent may stop. A private deep copy: the domain's schemas are shared by the process."""
    tools = list(domain.agent_tool_schemas())
    if solo and domain.has_user_tools:
        tools += domain.user_tool_schemas()
    if agent_can_stop:
        tools.append(done_tool_schema(domain.source))
    return tuple(copy_json(tools))


def reply_message(reply: Any, parser: Any, first_id: int) -> Optional[AssistantMessage]:
    """A model's reply whose text holds tool-call markup and no calls, as those calls (``parser`` reads them);
    None when there is nothing to parse.

    vLLM without ``--tool-call-parser`` returns ``<tool_call>`` blocks as text; upstream would send that text to
    the customer. Usage, cost and the raw response stay on the message; malformed markup raises
    :class:`~tau2_gym.core.actions.ActionError` (the episode ends as ``agent_error``).
    """
    if parser is None or parser == "none":
        return None
    if isinstance(reply, AssistantMessage):
        content, has_calls, source = reply.content, bool(reply.tool_calls), reply
    elif type(reply) is dict and reply.get("role", "assistant") == "assistant":
        content, has_calls, source = reply.get("content"), bool(reply.get("tool_calls")), None
    else:
        return None
    if has_calls or not isinstance(content, str) or not content.strip():
        return None
    msg = to_assistant_message(content, parser=parser, fill_ids=True, first_id=first_id, timestamp="")
    if source is not None:
        raw = dict(source.raw_data or {})
        if msg.raw_data:
            raw.update(msg.raw_data)
        msg.cost, msg.usage, msg.raw_data = source.cost, source.usage, raw or None
    return msg


class EpisodeSetup:
    """What the episodes of one env or one run share, and the factory of their :class:`Episode` s.

    Args:
        domain: the loaded domain.
        solo, max_steps, max_errors, enforce_protocol, timeout: upstream's orchestrator settings.
        agent_can_stop: the agent may end the episode (``done`` / ``###STOP###``); None = in solo mode only.
        parser, tokenizer, fill_tool_call_ids: how an agent action is read (:func:`~tau2_gym.core.actions.
            to_assistant_message`).
        reply_parser: for model servers' replies: text holding call markup becomes those calls
            (:func:`reply_message`); None: replies are taken as sent (upstream).
        judge: the NL-assertion judge used by :meth:`Episode.score`.
        evaluate, strict_replay: whether and how episodes are scored.
    """

    def __init__(
        self,
        domain: LoadedDomain,
        *,
        solo: bool = False,
        max_steps: int = 100,
        max_errors: int = 10,
        enforce_protocol: bool = False,
        agent_can_stop: Optional[bool] = None,
        timeout: Optional[float] = None,
        parser: Any = "auto",
        tokenizer: Any = None,
        fill_tool_call_ids: bool = True,
        reply_parser: Any = None,
        judge: Any = None,
        evaluate: bool = True,
        strict_replay: bool = True,
    ) -> None:
        self.domain = domain
        self.solo = bool(solo)
        self.max_steps = int(max_steps)
        self.max_errors = int(max_errors)
        self.enforce_protocol = bool(enforce_protocol)
        self.agent_can_stop = self.solo if agent_can_stop is None else bool(agent_can_stop)
        self.timeout = timeout
        self.parser = parser
        self.tokenizer = tokenizer
        self.fill_tool_call_ids = fill_tool_call_ids
        self.reply_parser = reply_parser
        self.judge = judge
        self.evaluate = evaluate
        self.strict_replay = strict_replay
        self.tools = agent_tools(domain, self.solo, self.agent_can_stop)

    def start(self, task: Task, *, seed: Optional[int] = None, episode_id: Optional[str] = None) -> Episode:
        """A new episode of ``task``, initialized (upstream's ``Orchestrator.initialize``): the agent or the
        customer is to act next, or the episode already ended."""
        episode = Episode(self, task, seed=seed, episode_id=episode_id)
        episode.loop.start()
        return episode


class Episode:
    """One tau2 episode, advanced by the agent's actions and the customer's replies (see the module docstring).

    ``loop`` is the upstream orchestrator state (:class:`~tau2_gym.core.orchestrator.TurnLoop`): read it, drive the
    episode through this class. ``rejected_reply``: a server reply that could not be read and ended the episode
    (kept for its usage and tokens; it is not in the trajectory).
    """

    __slots__ = ("calls", "loop", "rejected_reply", "setup")

    def __init__(
        self, setup: EpisodeSetup, task: Task, *, seed: Optional[int] = None, episode_id: Optional[str] = None
    ) -> None:
        self.setup = setup
        self.loop = tl.TurnLoop(
            setup.domain,
            task,
            solo=setup.solo,
            max_steps=setup.max_steps,
            max_errors=setup.max_errors,
            enforce_protocol=setup.enforce_protocol,
            agent_can_stop=setup.agent_can_stop,
            timeout=setup.timeout,
            episode_id=episode_id,
            seed=seed,
        )
        self.calls = 0  # the agent's tool calls so far: calls without an id get `call_<n>`
        self.rejected_reply: Optional[dict] = None

    # ------------------------------------------------------------------ state

    @property
    def status(self) -> str:
        """Who acts next: ``"agent"``, ``"user"`` or ``"done"``."""
        return self.loop.status

    @property
    def done(self) -> bool:
        return self.loop.done

    @property
    def task(self) -> Task:
        return self.loop.task

    @property
    def episode_id(self) -> str:
        return self.loop.episode_id

    @property
    def termination_reason(self) -> Optional[str]:
        return self.loop.termination_reason

    @property
    def truncated(self) -> bool:
        return self.loop.truncated

    # ------------------------------------------------------------------ the agent's side

    def agent_messages(self, copy: bool = True) -> list[dict[str, Any]]:
        """The agent's view in OpenAI chat format, system prompt first. ``copy=False`` shares the message dicts
        with earlier views (read-only for the caller; a long episode's views then cost O(T), not O(T^2))."""
        if copy:
            return self.loop.agent_messages()
        return [{"role": "system", "content": self.loop.agent_prompt}, *self.loop.agent_view()]

    def agent_request(self, extra: Optional[dict] = None) -> AgentTurnRequest:
        """What a policy needs for the agent's next turn."""
        loop = self.loop
        view = loop.agent_messages()
        return AgentTurnRequest(
            episode_id=loop.episode_id,
            system_prompt=view[0]["content"],
            messages=view[1:],
            tools=list(self.setup.tools),
            task=loop.task,
            seed=loop.seed,
            turn=loop.agent_turns,
            solo=loop.solo,
            tool_choice="required" if loop.solo else None,
            extra={"domain": loop.domain.name, **(extra or {})},
        )

    def act(self, action: Any) -> str:
        """The agent's turn, in any form the env accepts (text, an OpenAI message, calls, a server reply). Its
        tool calls run now. An action that cannot be read ends the episode as ``agent_error`` -- never raises."""
        setup = self.setup
        if isinstance(action, UserMessage):  # a simulator's reply serving as the agent (the HF simulator)
            calls = (
                None
                if action.tool_calls is None
                else [ToolCall(tc.name, tc.arguments, id=tc.id) for tc in action.tool_calls]
            )
            action = AssistantMessage(
                content=action.content,
                tool_calls=calls,
                cost=action.cost,
                usage=action.usage,
                raw_data=action.raw_data,
                timestamp="",
            )
        try:
            msg = reply_message(action, setup.reply_parser, self.calls)
            if msg is None:
                msg = to_assistant_message(
                    action,
                    parser=setup.parser,
                    tokenizer=setup.tokenizer,
                    fill_ids=setup.fill_tool_call_ids,
                    first_id=self.calls,
                    timestamp="",
                )  # the loop stamps it
        except ActionError as exc:
            if exc.record is None and type(action) is dict and isinstance(action.get("raw_data"), dict):
                self.rejected_reply = action
            return self.loop.abort_agent(exc.reason, exc.record)
        self.calls += len(msg.tool_calls or ())
        return self.loop.submit_agent(msg)

    def abort(self, error: str, message: Optional[AssistantMessage] = None) -> str:
        """End the episode at the agent's turn as ``agent_error`` (``message``, if any, is kept as its last turn)."""
        return self.loop.abort_agent(error, message)

    def truncate(self, reason: str = tl.MAX_STEPS) -> str:
        """End the episode at the agent's turn as a truncation (an outer step limit, a recorded ending)."""
        return self.loop.truncate(reason)

    # ------------------------------------------------------------------ the customer's side

    def user_request(self) -> Optional[UserTurnRequest]:
        """The pending customer turn, or None when the customer is not to speak now."""
        return self.loop.user_request() if self.loop.status == USER else None

    def answer(self, reply: Union[UserMessage, BaseException]) -> str:
        """Deliver the customer's reply (or the exception its simulator raised: the episode ends as
        ``user_error``)."""
        return self.loop.submit_user(reply)

    def run_user(self, user: Any) -> None:
        """Answer the customer's turns with ``user.generate`` until the agent is to act or the episode ends. A
        simulator that raises ends the episode as ``user_error``, never the caller's loop."""
        while (request := self.user_request()) is not None:
            try:
                reply = user.generate(request)
            except UserSimulatorError as exc:
                reply = exc
            except Exception as exc:  # noqa: BLE001 - a broken simulator ends the episode, not the training loop
                logger.warning("user simulator %s raised %s: %s", type(user).__name__, type(exc).__name__, exc)
                reply = exc
            self.answer(reply)

    # ------------------------------------------------------------------ the end

    def score(
        self, messages: Optional[list] = None, diagnostics: Optional[dict[str, Any]] = None
    ) -> Optional[dict[str, Any]]:
        """Upstream's reward record of the finished episode (None when the setup does not evaluate). Scoring
        may use the live tool environment instead of replaying when it provably holds the replayed state.
        ``diagnostics`` receives this package's additions (the field-level DB diff of a failed DB check).
        Raises what the evaluator raises."""
        loop = self.loop
        if not self.setup.evaluate:
            return None
        return evaluation.evaluate_simulation(
            loop.domain,
            loop.task,
            loop.messages() if messages is None else messages,
            loop.termination_reason,
            solo=loop.solo,
            judge=self.setup.judge,
            strict=self.setup.strict_replay,
            live_env=loop.env,
            diagnostics=diagnostics,
        )

    def simulation_run(
        self,
        reward_info: Optional[dict],
        trial: Optional[int] = 0,
        messages: Optional[list] = None,
        info: Optional[dict] = None,
    ) -> dict[str, Any]:
        """The episode as a tau2 ``SimulationRun`` dict (``info``: entries added to its ``info``)."""
        return self.loop.simulation_run(reward_info, trial=trial, messages=messages, info=info)

    def simulation_record(
        self, reward_info: Optional[dict], messages: Optional[list] = None, info: Optional[dict] = None
    ) -> Record:
        """:meth:`simulation_run` as a record rendered on first read (a finished episode only)."""
        return self.loop.simulation_record(reward_info, messages=messages, info=info)


def play(setup: EpisodeSetup, task: Task, policy: Any, user: Any, *, seed: int = 0, max_turns: int = 200) -> Episode:
    """Play one episode of ``task`` to its end in this thread: the customer's turns by ``user.generate``, the
    agent's by ``policy.generate`` (an :class:`~tau2_gym.players.agents.base.AgentPolicy`). For offline players
    (scripted agents and customers: baselines, verification of generated tasks); an episode still running after
    ``max_turns`` agent turns is truncated, so the caller always gets a finished episode to score."""
    episode = setup.start(task, seed=seed)
    for _ in range(max_turns):
        episode.run_user(user)
        if episode.done:
            break
        episode.act(policy.generate(episode.agent_request()))
    else:
        episode.run_user(user)
        if not episode.done:
            episode.truncate()
    done = getattr(policy, "episode_done", None)
    if done is not None:
        done(episode.episode_id)
    return episode
