"""The tool environment of one episode: agent and user toolkits, tool routing, sync, state replay, hashes.

Semantics follow upstream tau2-bench HEAD (``tau2/environment/environment.py``): routing by requestor,
``Error: <exc>`` results, exact content serialisation, the sync hook after every successful call, and
``set_state`` replay that skips unknown and non-mutating tools and compares recorded outputs.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from tau2_gym.core.messages import AnyMessage, ParticipantMessage, ToolCall, ToolMessage, UserMessage
from tau2_gym.core.tasks import EnvAssertion, EnvFunctionCall, InitializationData
from tau2_gym.core.tools import Toolkit, to_content
from tau2_gym.data.versions import DEFAULT_VERSION

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain
    from tau2_gym.data.versions import Semantics

logger = logging.getLogger("tau2_gym")
DEFAULT_SEMANTICS = DEFAULT_VERSION.semantics


class ReplayMismatch(ValueError):
    """A replayed mutating call returned other content than the trajectory recorded (strict replay)."""


class Environment:
    """One episode's world. Cheap to build: toolkits wrap copy-on-write views of the shared base DBs.

    ``reference_free``: a domain whose per-task setup reads the task's gold actions (``DomainSpec.prepare``) must
    not let the agent see anything derived from them (reward integrity, sierra-research/tau2-bench#574); False =
    upstream's tools. What is recorded for scoring does not depend on it.
    """

    reference_free = False

    def __init__(
        self,
        domain_name: str,
        policy: str,
        tools: Optional[Toolkit] = None,
        user_tools: Optional[Toolkit] = None,
        solo_mode: bool = False,
        sync_hook: Optional[Callable[[Environment], None]] = None,
        domain: Optional[LoadedDomain] = None,
        track_calls: bool = False,
        semantics: Optional[Semantics] = None,
    ) -> None:
        self.domain_name = domain_name
        self.semantics = semantics if semantics is not None else DEFAULT_SEMANTICS
        self.policy = policy
        self.tools = tools
        self.user_tools = user_tools
        self.solo_mode = solo_mode
        self._sync_hook = sync_hook
        self.domain = domain
        # (call, result) of every call get_response ran, while this env can still prove it equals a replay
        # of its own trajectory (replays_to); None = not tracked (sync hook, non-deterministic tools, or the
        # state was changed outside get_response / the first set_state).
        self._calls: Optional[list[tuple[ToolCall, ToolMessage]]] = [] if track_calls and sync_hook is None else None
        self._state_set = False
        self._in_set_state = False
        if solo_mode:
            self.validate_solo_mode()
        self.sync_tools()

    # ------------------------------------------------------------------ info

    def get_policy(self) -> str:
        return self.policy

    def tool_schemas(self) -> list[dict]:
        """OpenAI schemas the agent sees (solo: agent tools then user tools)."""
        if self.domain is None:
            raise ValueError("this environment was built without its domain; no schemas")
        out = list(self.domain.agent_tool_schemas())
        if self.solo_mode and self.user_tools is not None:
            out += self.domain.user_tool_schemas()
        return out

    def user_tool_schemas(self, include: Optional[list[str]] = None) -> list[dict]:
        if self.domain is None or self.user_tools is None:
            raise ValueError("User tools not available")
        return self.domain.user_tool_schemas(include)

    # ------------------------------------------------------------------ solo

    def validate_solo_mode(self) -> None:
        agent = set(self.tools.tool_names) if self.tools is not None else set()
        user = set(self.user_tools.tool_names) if self.user_tools is not None else set()
        overlap = agent & user
        if overlap:
            raise ValueError(f"Tool names overlap: {overlap}")

    def set_solo_mode(self, solo_mode: bool) -> None:
        self.solo_mode = solo_mode
        if solo_mode:
            self.validate_solo_mode()

    # ------------------------------------------------------------------ tool calls

    def _has_tool(self, name: str) -> bool:
        return (self.tools is not None and self.tools.has_tool(name)) or (
            self.user_tools is not None and self.user_tools.has_tool(name)
        )

    def _is_mutating_tool(self, name: str) -> bool:
        for kit in (self.tools, self.user_tools):
            if kit is not None and kit.has_tool(name):
                return kit.mutates_state(name)
        return True

    def tool_type(self, name: str) -> Optional[str]:
        for kit in (self.tools, self.user_tools):
            if kit is not None and kit.has_tool(name):
                return kit.tool_type(name).value
        return None

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        if self.tools is None:
            raise ValueError("Tools not available")
        return self.tools.use_tool(tool_name, **kwargs)

    def use_user_tool(self, tool_name: str, **kwargs: Any) -> Any:
        if self.user_tools is None:
            raise ValueError("User tools not available")
        return self.user_tools.use_tool(tool_name, **kwargs)

    def make_tool_call(self, tool_name: str, requestor: str = "assistant", **kwargs: Any) -> Any:
        """Route a call by requestor; no sync (gold actions in evaluation go through here)."""
        if requestor == "user":
            if self.solo_mode:
                raise ValueError("User tool calls are not allowed in solo mode")
            return self.use_user_tool(tool_name, **kwargs)
        if requestor == "assistant":
            if self.solo_mode and self.user_tools is not None and self.user_tools.has_tool(tool_name):
                return self.use_user_tool(tool_name, **kwargs)
            return self.use_tool(tool_name, **kwargs)
        raise ValueError(f"Invalid requestor: {requestor}")

    def get_response(self, call: ToolCall, timestamp: Optional[str] = None) -> ToolMessage:
        """Run one call and return its ToolMessage; any exception becomes ``Error: <exc>`` (error=True).

        A successful call is followed by a sync inside the same handler: if the sync raises, the call is
        reported as an error although its mutation stays -- as upstream. ``timestamp`` is the message's
        (default: now); the turn loop passes ``""`` and stamps the result with its own clock. The call is
        only read, never changed (pydantic models among its arguments stay the caller's objects).
        """
        error = False
        try:
            resp = self.make_tool_call(call.name, call.requestor, **call.arguments)
            self.sync_tools()
        except Exception as exc:  # noqa: BLE001 - every tool failure is an observation
            resp = f"Error: {exc}"
            error = True
        result = ToolMessage(
            id=call.id, content=to_content(resp), requestor=call.requestor, error=error, timestamp=timestamp
        )
        if self._calls is not None:
            self._calls.append((call, result))
        return result

    # ------------------------------------------------------------------ sync, env functions

    def sync_tools(self) -> None:
        """Keep agent and user worlds consistent (a no-op unless the domain has a sync hook)."""
        if self._sync_hook is not None:
            self._sync_hook(self)

    def _toolkit_for(self, env_type: str) -> Any:
        if env_type == "user":
            return self.user_tools
        if env_type == "assistant":
            return self.tools
        raise ValueError(f"Invalid environment type: {env_type}")

    def run_env_function_call(self, call: EnvFunctionCall) -> Any:
        if not self._in_set_state:
            self._calls = None  # a change a replay would not make (or might not): replays_to is off
        kit = self._toolkit_for(call.env_type)
        if not isinstance(kit, Toolkit):  # no toolkit on that side (airline's user): nothing is reachable
            raise AttributeError(f"'{type(kit).__name__}' object has no attribute '{call.func_name}'")
        func = kit.env_function(call.func_name)
        result = func(**call.arguments)
        self.sync_tools()
        return result

    def run_env_assertion(self, assertion: EnvAssertion, raise_assertion_error: bool = True) -> bool:
        if not isinstance(assertion, EnvAssertion):
            raise ValueError(f"Assertion must be an EnvAssertion. Got {assertion}")
        result = self.run_env_function_call(assertion)
        if not isinstance(result, bool):
            raise ValueError(f"Function {assertion.func_name} returned {type(result)} instead of bool")
        passed = result == assertion.assert_value
        if raise_assertion_error and not passed:
            raise AssertionError(assertion.message or f"Assertion failed: {assertion}")
        return passed

    # ------------------------------------------------------------------ state

    def update_agent_db(self, update: dict) -> None:
        if not self._in_set_state:
            self._calls = None
        if self.tools is None or self.tools.db is None:
            raise ValueError("Database has not been initialized.")
        self.tools.db = self.tools.db.updated(update)

    def update_user_db(self, update: dict) -> None:
        if not self._in_set_state:
            self._calls = None
        if self.user_tools is None:
            raise AttributeError("'NoneType' object has no attribute 'update_db'")
        if self.user_tools.db is None:
            raise ValueError("Database has not been initialized.")
        self.user_tools.db = self.user_tools.db.updated(update)

    def set_state(
        self,
        initialization_data: Optional[InitializationData],
        initialization_actions: Optional[Iterable[EnvFunctionCall]],
        message_history: list[AnyMessage],
        strict: bool = True,
    ) -> None:
        """Rebuild a state: merge init data, run init actions, replay the history's mutating calls.

        Upstream 1.0 rules: calls to tools no toolkit has are skipped (the live env made no change),
        non-mutating tools are skipped, mutating ones re-run and their output compared with the recorded
        one (JSON-parsed when both parse); a mismatch raises in strict mode and is logged otherwise. With
        the 26.3 data version's semantics every call is re-run and compared (``Semantics.replay_skips_reads``).
        """
        if self.solo_mode and any(isinstance(m, UserMessage) for m in message_history):
            raise AssertionError("User messages are not allowed in solo mode")
        pairs = pair_tool_calls(message_history)
        if self._state_set or (self._calls is not None and self._calls):
            self._calls = None  # a second rebuild on top of earlier changes: no longer a plain replay
        self._state_set = True
        self._in_set_state = True
        try:
            self._set_state(initialization_data, initialization_actions, pairs, strict)
        finally:
            self._in_set_state = False

    def _set_state(
        self,
        initialization_data: Optional[InitializationData],
        initialization_actions: Optional[Iterable[EnvFunctionCall]],
        pairs: list[tuple[ToolCall, ToolMessage]],
        strict: bool,
    ) -> None:
        alias = self.semantics.alias_init_data
        if initialization_data is not None:
            if initialization_data.agent_data is not None:
                self.update_agent_db(initialization_data.agent_data)
                # upstream 1.0 quirk: the other toolkit's db is re-pointed at the merged object
                if alias and self.tools is not None and self.user_tools is not None and self.user_tools.db is not None:
                    self.user_tools.db = self.tools.db
            if initialization_data.user_data is not None:
                self.update_user_db(initialization_data.user_data)
                if alias and self.user_tools is not None and self.tools is not None and self.tools.db is not None:
                    self.tools.db = self.user_tools.db

        if initialization_actions is not None:
            for action in initialization_actions:
                self.run_env_function_call(action)

        skip_reads = self.semantics.replay_skips_reads
        for call, recorded in pairs:
            if skip_reads and not (self._has_tool(call.name) and self._is_mutating_tool(call.name)):
                continue
            response = self.get_response(call)
            if self._calls is not None:  # the replay of scoring re-runs it against the same recorded message
                self._calls[-1] = (call, recorded)
            if _parsed(response.content) != _parsed(recorded.content):
                if strict:
                    raise ReplayMismatch(f"Tool call:\n{call!r}\n\nReturned:\n{response!r}\n\nExpected:\n{recorded!r}")
                logger.warning(
                    "replayed tool call %r returned other content than recorded; continuing (strict=False)", call.name
                )
        self.sync_tools()

    def replays_to(self, messages: list[AnyMessage]) -> bool:
        """True when replaying ``messages`` on a fresh environment (what scoring does) would rebuild exactly
        this environment's state, so scoring may use it as the predicted environment.

        Holds when the domain has no sync hook and deterministic tools, the state came from one ``set_state``
        plus ``get_response`` calls only, and the mutating calls a replay would re-run -- known tools whose
        ``mutates_state`` is set, in trajectory order -- are the very (call, result) objects this environment
        ran, in the same order: the replay then re-runs the same calls from the same start, gets the same
        outputs (no mismatch can be raised) and ends in the same state. Anything else returns False and the
        caller replays.
        """
        return self.replayed_writes(messages) is not None

    def replayed_writes(self, messages: list[AnyMessage]) -> Optional[list[ToolCall]]:
        """The mutating calls (in order) that built this state on top of its ``set_state`` start, when
        :meth:`replays_to` holds; else None. Scoring compares them with the gold run's writes: the same
        writes from the same start give the same state (deterministic tools), with no DB comparison."""
        log = self._calls
        if log is None or not self._state_set:
            return None
        if self.solo_mode and any(isinstance(m, UserMessage) for m in messages):
            return None
        try:
            pairs = pair_tool_calls(messages)
        except ValueError:
            return None
        has, mutating = self._has_tool, self._is_mutating_tool
        expected = [p for p in pairs if has(p[0].name) and mutating(p[0].name)]
        ran = [p for p in log if has(p[0].name) and mutating(p[0].name)]
        if len(expected) != len(ran):
            return None
        for (c1, r1), (c2, r2) in zip(expected, ran):
            if c1 is not c2 or r1 is not r2:
                return None
        return [p[0] for p in expected]

    # ------------------------------------------------------------------ hashes

    def get_db_hash(self) -> Optional[str]:
        return None if self.tools is None else self.tools.db_hash()

    def get_user_db_hash(self) -> Optional[str]:
        return None if self.user_tools is None else self.user_tools.db_hash()


def _parsed(content: Optional[str]) -> Any:
    if content is None:
        return None
    try:
        return json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return content


def pair_tool_calls(messages: list[AnyMessage]) -> list[tuple[ToolCall, ToolMessage]]:
    """(call, result) pairs of a trajectory; each call must be followed at once by its tool message."""
    pairs: list[tuple[ToolCall, ToolMessage]] = []
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        i += 1
        if isinstance(msg, ToolMessage):
            raise ValueError("Tool message not expected. Tool messages should always follow a tool call.")
        if isinstance(msg, ParticipantMessage) and msg.tool_calls is not None:
            for call in msg.tool_calls:
                if i >= n:
                    raise ValueError("Tool message expected. Got None.")
                result = messages[i]
                i += 1
                if not isinstance(result, ToolMessage):
                    raise ValueError(f"Tool message expected. Got {type(result)}")
                if call.id != result.id:
                    raise ValueError(f"Tool call id mismatch. Got {call.id} and {result.id}")
                pairs.append((call, result))
    return pairs
