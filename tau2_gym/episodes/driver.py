"""The one episode driver: every env, the vector env, the runner, export, the generators and the TRL integration
play episodes here.

An :class:`EpisodeSetup` holds what the episodes of one env or one run share -- the loaded domain, the
:class:`~tau2_gym.core.settings.EpisodeSettings`, the judge -- and assembles the agent's tool list once. Its
:meth:`~EpisodeSetup.start` builds an :class:`Episode`, the only place a turn loop is constructed.

An :class:`Episode` *is* upstream's turn loop (:class:`~tau2_gym.core.turn_loop.TurnLoop`: status, counters,
views, the record) plus what the loop cannot know from the core layer: how a policy's action becomes a message
(:meth:`Episode.act`), the policy's request (:meth:`Episode.agent_request`), and the end (:meth:`Episode.finish`:
scoring and the tau2 record, for every caller). It is driven from outside in two phases, so that callers can batch
or await the customer's turns:

* the agent's action goes in (:meth:`Episode.act`; its tool calls run at once);
* while :meth:`~tau2_gym.core.turn_loop.TurnLoop.user_request` returns a request, the customer's reply goes in
  (:meth:`~tau2_gym.core.turn_loop.TurnLoop.submit_user`);

until ``done``. A synchronous caller answers the customer with :meth:`Episode.run_user`; the vector env collects
the requests of many episodes and answers them in one batch; the runner awaits them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from tau2_gym.core.actions import (
    EMPTY_REPLY,
    EMPTY_REPLY_ERRORS,
    EMPTY_REPLY_KEY,
    REASONING_ONLY_REPLY,
    ActionError,
    field_reasoning,
    raw_reasoning,
    to_assistant_message,
    with_reasoning,
)
from tau2_gym.core.db import copy_json
from tau2_gym.core.messages import AssistantMessage, ToolCall, UserMessage
from tau2_gym.core.parsing import join_reasoning
from tau2_gym.core.prompts import done_tool_schema
from tau2_gym.core.records import Record
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.core.turn_loop import AGENT, DONE, USER, TurnLoop
from tau2_gym.core.turns import AgentTurnRequest, UserSimulatorError
from tau2_gym.llm.cost import episode_usage, sum_usage
from tau2_gym.scoring import evaluation

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain
    from tau2_gym.core.tasks import Task
    from tau2_gym.players.agents.base import AgentPolicy
    from tau2_gym.players.users.base import UserSimulator
    from tau2_gym.scoring.judges import Judge

logger = logging.getLogger("tau2_gym")

__all__ = [
    "AGENT",
    "DONE",
    "HALF_DUPLEX",
    "USER",
    "Episode",
    "EpisodeOutcome",
    "EpisodeSetup",
    "agent_tools",
    "parse_reply_markup",
    "play",
]

HALF_DUPLEX = "half_duplex"  # upstream's CommunicationMode of text runs (SimulationRun.mode)


def agent_tools(domain: LoadedDomain, solo: bool, agent_can_stop: bool) -> tuple[dict, ...]:
    """The OpenAI tool schemas the agent may call: the domain's agent tools, in solo mode also the user's, and
    ``done`` when the agent may stop. A private deep copy: the domain's schemas are shared by the process."""
    tools = list(domain.agent_tool_schemas())
    if solo and domain.has_user_tools:
        tools += domain.user_tool_schemas()
    if agent_can_stop:
        tools.append(done_tool_schema(domain.source))
    return tuple(copy_json(tools))


def parse_reply_markup(reply: Any, parser: Any, first_id: int) -> Optional[AssistantMessage]:
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
        given = raw_reasoning(reply.raw_data)
    elif type(reply) is dict and reply.get("role", "assistant") == "assistant":
        content, has_calls, source = reply.get("content"), bool(reply.get("tool_calls")), None
        given = field_reasoning(reply)
    else:
        return None
    if has_calls or not isinstance(content, str) or not content.strip():
        return None
    msg = to_assistant_message(content, parser=parser, fill_ids=True, first_id=first_id, timestamp="")
    reasoning = join_reasoning(given, msg.reasoning)  # a reasoning field first, then the text's <think> blocks
    if source is not None:
        raw = dict(source.raw_data or {})
        if msg.raw_data:
            raw.update(msg.raw_data)
        msg.cost, msg.usage, msg.raw_data = source.cost, source.usage, raw or None
    msg.raw_data = with_reasoning(msg.raw_data, reasoning)
    return msg


class EpisodeSetup:
    """What the episodes of one env or one run share, and the factory of their :class:`Episode` s.

    Args:
        domain: the loaded domain.
        settings: the episode settings, whole (an env's or a rollout's config is one); default: upstream's
            orchestrator defaults on ``domain``.
        judge: the resolved NL-assertion judge :meth:`Episode.finish` scores with (``settings.judge`` may be a
            spec string; the caller resolves it once, :func:`~tau2_gym.scoring.judges.make_judge`).
    """

    def __init__(
        self, domain: LoadedDomain, settings: Optional[EpisodeSettings] = None, judge: Optional[Judge] = None
    ) -> None:
        self.domain = domain
        self.settings = settings if settings is not None else EpisodeSettings(domain=domain.name)
        self.judge = judge
        self.tools = agent_tools(domain, self.settings.solo, self.settings.agent_may_stop)

    def start(self, task: Task, *, seed: Optional[int] = None, episode_id: Optional[str] = None) -> Episode:
        """A new episode of ``task``, initialized (upstream's ``Orchestrator.initialize``): the agent or the
        customer is to act next, or the episode already ended."""
        episode = Episode(self, task, seed=seed, episode_id=episode_id)
        episode.start()
        return episode


@dataclass
class EpisodeOutcome:
    """A finished episode, scored and recorded: what every caller (env, runner, trainer) reads at the end.

    ``reward`` is upstream's tau2 reward (0.0 when not evaluated or when scoring failed); ``reward_info`` upstream's
    breakdown (None then); ``evaluation_error`` why scoring failed (only when the caller asked to catch it);
    ``diagnostics`` what this package adds beside upstream's record (the field-level DB diff of a failed DB check);
    ``record`` the tau2 ``SimulationRun`` (rendered on first read).
    """

    reward: float
    reward_info: Optional[dict[str, Any]]
    record: Record
    evaluation_error: Optional[str] = None
    diagnostics: dict[str, Any] = field(default_factory=dict)


class Episode(TurnLoop):
    """One tau2 episode: upstream's turn loop plus reading the policy's actions and finishing (module docstring).

    ``rejected_reply``: a server reply that could not be read and ended the episode (kept for its usage and tokens;
    it is not in the trajectory). ``empty_reply``: the kind of reply with neither text nor a tool call that ended
    the episode (``"empty"``, ``"reasoning_only"``), or None.
    """

    __slots__ = ("calls", "empty_reply", "rejected_reply", "setup")

    def __init__(
        self, setup: EpisodeSetup, task: Task, *, seed: Optional[int] = None, episode_id: Optional[str] = None
    ) -> None:
        super().__init__(setup.domain, task, setup.settings, episode_id=episode_id, seed=seed)
        self.setup = setup
        self.calls = 0  # the agent's tool calls so far: calls without an id get `call_<n>`
        self.rejected_reply: Optional[dict] = None
        self.empty_reply: Optional[str] = None

    # ------------------------------------------------------------------ the agent's side

    def agent_request(self, extra: Optional[dict] = None) -> AgentTurnRequest:
        """What a policy needs for the agent's next turn (the view's dicts are the episode's own: read only)."""
        return AgentTurnRequest(
            episode_id=self.episode_id,
            system_prompt=self.agent_prompt,
            messages=self.agent_view(),
            tools=list(self.setup.tools),
            task=self.task,
            seed=self.seed,
            turn=self.agent_turns,
            solo=self.solo,
            tool_choice="required" if self.solo else None,
            extra={"domain": self.domain.name, **(extra or {})},
        )

    def act(self, action: Any) -> str:
        """The agent's turn, in any form the env accepts (text, an OpenAI message, calls, a server reply). Its
        tool calls run now. An action that cannot be read ends the episode as ``agent_error`` -- never raises."""
        settings = self.settings
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
            msg = parse_reply_markup(action, settings.parser, self.calls) if settings.parse_replies else None
            if msg is None:
                msg = to_assistant_message(
                    action,
                    parser=settings.parser,
                    tokenizer=settings.tokenizer,
                    fill_ids=settings.fill_tool_call_ids,
                    first_id=self.calls,
                    timestamp="",
                )  # the loop stamps it
        except ActionError as exc:
            if exc.record is None and type(action) is dict and isinstance(action.get("raw_data"), dict):
                self.rejected_reply = action
            return self.abort_agent(exc.reason, exc.record)
        if not msg.tool_calls and not msg.has_text_content():
            return self._empty(msg)
        self.calls += len(msg.tool_calls or ())
        return self.submit_agent(msg)

    def _empty(self, msg: AssistantMessage) -> str:
        """A reply with neither text nor a tool call -- nothing at all, or only reasoning (a thinking model that ran
        out of tokens, or stopped after its thought): upstream refuses such a message (``validate`` raises and the
        run aborts); here it ends the episode as ``agent_error``, the policy's failure, scored 0 and counted
        (``info["empty_agent_reply"]``). The reply is not in the trajectory (upstream's messages are valid ones);
        its reasoning, usage and token record are kept as ``info["rejected_agent_reply"]``."""
        self.empty_reply = REASONING_ONLY_REPLY if msg.reasoning is not None else EMPTY_REPLY
        if msg.raw_data or msg.usage or msg.cost:
            self.rejected_reply = {"raw_data": dict(msg.raw_data or {}), "usage": msg.usage, "cost": msg.cost}
        return self.abort_agent(EMPTY_REPLY_ERRORS[self.empty_reply])

    # ------------------------------------------------------------------ the customer's side

    def run_user(self, user: UserSimulator) -> None:
        """Answer the customer's turns with ``user.generate`` until the agent is to act or the episode ends. A
        simulator that raises ends the episode as ``user_error``, never the caller's loop."""
        while (request := self.user_request()) is not None:
            try:
                reply: Any = user.generate(request)
            except UserSimulatorError as exc:
                reply = exc
            except Exception as exc:  # noqa: BLE001 - a broken simulator ends the episode, not the training loop
                logger.warning("user simulator %s raised %s: %s", type(user).__name__, type(exc).__name__, exc)
                reply = exc
            self.submit_user(reply)

    # ------------------------------------------------------------------ the end

    def score(self, messages: Optional[list] = None, diagnostics: Optional[dict[str, Any]] = None) -> Optional[dict]:
        """Upstream's reward record of the finished episode (None when the settings do not evaluate). Scoring
        may use the live tool environment instead of replaying when it provably holds the replayed state.
        ``diagnostics`` receives this package's additions. Raises what the evaluator raises."""
        if not self.settings.evaluate:
            return None
        return evaluation.evaluate_simulation(
            self.domain,
            self.task,
            self.messages() if messages is None else messages,
            self.termination_reason,
            solo=self.solo,
            judge=self.setup.judge,
            strict=self.settings.strict_replay,
            live_env=self.env,
            diagnostics=diagnostics,
            integrity=self.settings.integrity,
        )

    def finish(self, *, trial: Optional[int] = 0, catch_evaluation_errors: bool = True) -> EpisodeOutcome:
        """Score the finished episode and record it as a tau2 ``SimulationRun``: the one way every caller ends an
        episode.

        The record carries, beside upstream's fields, ``mode`` and ``policy`` (as upstream v1.0.1 records them),
        ``agent_usage`` / ``user_usage`` (a rejected reply's usage and cost counted: it was paid for),
        ``info.error`` for error endings, ``info.rejected_agent_reply`` and this package's diagnostics.
        ``catch_evaluation_errors=False`` lets the evaluator's exception escape (the runner retries the episode).
        """
        if not self.done:
            raise RuntimeError(f"episode {self.episode_id} is still running (status {self.status!r})")
        messages = self.messages()
        diagnostics: dict[str, Any] = {}
        reward_info: Optional[dict] = None
        error: Optional[str] = None
        try:
            reward_info = self.score(messages, diagnostics)
        except Exception as exc:
            if not catch_evaluation_errors:
                raise
            logger.warning("evaluation of task %r failed: %s: %s", self.task.id, type(exc).__name__, exc)
            error = f"{type(exc).__name__}: {exc}"
        reward = float(reward_info["reward"]) if reward_info is not None else 0.0
        if self.empty_reply is not None:
            diagnostics[EMPTY_REPLY_KEY] = self.empty_reply
        info = dict(diagnostics)
        if self.error is not None:
            info["error"] = self.error
        rejected = self.rejected_reply
        if rejected is not None:  # the reply that ended the episode: its usage and (captured) tokens
            info["rejected_agent_reply"] = {
                "raw_data": rejected["raw_data"],
                "usage": rejected.get("usage"),
                "cost": rejected.get("cost"),
            }
        policy = self.domain.policy(self.solo, self.task)

        def build() -> dict[str, Any]:  # on first read: the messages of a finished episode no longer change
            data = self.simulation_run(reward_info, trial=trial, messages=messages, info=info)
            data.update(episode_usage(data["messages"]))  # agent_usage / user_usage, as upstream's newer files
            data["mode"], data["policy"] = HALF_DUPLEX, policy
            if rejected is not None:
                data["agent_usage"] = sum_usage([data.get("agent_usage"), rejected.get("usage")])
                data["agent_cost"] = float(data.get("agent_cost") or 0.0) + float(rejected.get("cost") or 0.0)
            return data

        return EpisodeOutcome(
            reward=reward,
            reward_info=reward_info,
            record=Record.deferred(build),
            evaluation_error=error,
            diagnostics=diagnostics,
        )


def play(
    setup: EpisodeSetup, task: Task, policy: AgentPolicy, user: UserSimulator, *, seed: int = 0, max_turns: int = 200
) -> Episode:
    """Play one episode of ``task`` to its end in this thread: the customer's turns by ``user.generate``, the
    agent's by ``policy.generate``. For offline players (scripted agents and customers: baselines, the exploit
    panel, verification of generated tasks); an episode still running after ``max_turns`` agent turns is
    truncated, so the caller always gets a finished episode to score."""
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
