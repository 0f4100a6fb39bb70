"""OpenEnv harness sessions over a served tau2 env (``tau2-gym serve``), for TRL's ``openenv_harness`` (trl 1.16,
openenv 0.10).

OpenEnv's harness API runs one rollout per :class:`ResourceSession`: a harness (OpenEnv's ``MCPHarnessAdapter``, or
TRL's ``HarnessRolloutWorker`` driving it for ``AsyncGRPOTrainer``) shows the model the session's opening messages and
tools, runs the tool calls the model makes through ``call_tool``, and asks ``verify`` for the reward at the end.
:class:`Tau2SessionFactory` makes such sessions on a ``tau2-gym serve`` server, one WebSocket session (one episode)
each:

- ``create(task, seed)``: ``task`` is a dataset prompt naming a task (:func:`~tau2_gym.training.trl.build_dataset`'s
  prompts: ``{"tau2_domain": ..., "tau2_task_id": ...}``), ``seed`` the reset seed -- TRL passes the group number, so
  the members of a group meet the same customer;
- the tools are the env's (the reset observation's schemas) plus ``send_message_to_user(message)`` unless the env is
  solo: the harness stops a rollout at the first reply without tool calls, so the customer is a tool whose result is
  the customer's reply -- the convention of :mod:`tau2_gym.training.trl.tool_env`;
- ``call_tool`` is one env step (one agent turn); its result is what followed the action (the tool's output, the
  customer's reply), with ``done`` and, at the end, the episode's ``reward`` in its metadata;
- ``verify`` forwards the env's reward: the tau2 reward when the episode ended, 0.0 when the model stopped before it
  did (as an unfinished episode scores), None -- unscored, left out of the group baseline -- when the infrastructure
  broke the episode (``user_error``, ``infrastructure_error``, a failed evaluation).

>>> from functools import partial                                                       # doctest: +SKIP
>>> from openenv.core.harness import MCPHarnessAdapter                                  # doctest: +SKIP
>>> from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker        # doctest: +SKIP
>>> worker = HarnessRolloutWorker(harness_session_factory=partial(Tau2SessionFactory, "http://127.0.0.1:8000"),
...                               harness_adapter=MCPHarnessAdapter(), ...)             # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any, Optional

from openenv.core.env_server.mcp_types import Tool
from openenv.core.harness import ResourceSession, ResourceSessionFactory, ToolResult, VerifyResult

from tau2_gym.envs import env_id
from tau2_gym.frameworks.openenv import Tau2Client
from tau2_gym.scoring.rewards import infrastructure_failure
from tau2_gym.training.trl.dataset import parse_task_prompt
from tau2_gym.training.trl.tool_env import SEND_MESSAGE_TOOL, Tau2ToolEnv

__all__ = ["SEND_MESSAGE_SCHEMA", "Tau2Session", "Tau2SessionFactory"]

#: the customer as a tool (normal mode): its result is the customer's reply
SEND_MESSAGE_SCHEMA = {
    "type": "function",
    "function": {
        "name": SEND_MESSAGE_TOOL,
        "description": "Send a message to the customer and return the customer's reply.",
        "parameters": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The text the customer reads."}},
            "required": ["message"],
        },
    },
}


def _tool(schema: dict[str, Any]) -> Tool:
    fn = schema.get("function") or {}
    return Tool(
        name=str(fn.get("name")),
        description=str(fn.get("description") or ""),
        input_schema=dict(fn.get("parameters") or {"type": "object", "properties": {}}),
    )


class Tau2Session(ResourceSession):
    """One episode on a served tau2 env, as an OpenEnv harness session (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        task: Any,
        *,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        token: Optional[str] = None,
        connect_timeout_s: float = 30.0,
        message_timeout_s: float = 600.0,
    ) -> None:
        domain, task_id = parse_task_prompt(task)
        self._client = Tau2Client(
            base_url,
            token=token,  # Tau2Client sends it as OpenEnv 0.10's bearer header
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
        ).sync()
        try:
            self._client.connect()
            served = self._client.state().env_id
            if served not in (env_id(domain, False), env_id(domain, True)):
                raise ValueError(f"the prompt names a {domain!r} task, but {base_url} serves {served!r}")
            result = self._client.reset(task_id=task_id, seed=seed, episode_id=episode_id)
        except BaseException:
            self._client.close()
            raise
        obs = result.observation
        self.task_id = task_id
        self.solo = served == env_id(domain, True)
        self.messages: list[dict[str, Any]] = list(obs.messages)
        self._opening = list(obs.messages)
        schemas = list(obs.tools or [])
        if not self.solo:
            schemas.append(SEND_MESSAGE_SCHEMA)
        self._tools = [_tool(s) for s in schemas]
        self._names = {t.name for t in self._tools}
        self.done = False
        self.closed = False
        self.reward: Optional[float] = None
        self.last_observation = obs
        if obs.episode_over:  # the customer stopped at once: the next step returns the terminal transition
            self._step("")

    def _step(self, action: Any) -> list[dict[str, Any]]:
        """One env step; returns the messages that followed the agent's action. A closed session refuses (OpenEnv's
        client would open a fresh server session, without the episode)."""
        if self.closed:
            raise RuntimeError(f"the session of task {self.task_id!r} is closed")
        before = len(self.messages)
        result = self._client.step(action)
        obs = result.observation
        self.last_observation = obs
        self.messages = list(obs.messages)
        if result.done:
            self.done = True
            self.reward = None if result.reward is None else float(result.reward)
        return self.messages[before + 1 :]

    # ------------------------------------------------------------------ ResourceSession

    def initial_messages(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self._opening]

    def list_tools(self) -> list[Tool]:
        return list(self._tools)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name not in self._names:  # the harness reports it as a failed tool call
            raise KeyError(f"unknown tool {name!r}; tools: {sorted(self._names)}")
        if self.done:
            return ToolResult(data=Tau2ToolEnv.ENDED, done=True, metadata={"reward": self.reward})
        if name == SEND_MESSAGE_TOOL:
            new = self._step({"role": "assistant", "content": str(arguments.get("message", ""))})
            texts = [str(m.get("content") or "") for m in new if m.get("role") == "user"]
        else:
            new = self._step({"name": name, "arguments": dict(arguments)})
            texts = [_text(m.get("content")) for m in new if m.get("role") == "tool"]
        data = "\n".join(texts) if texts else (Tau2ToolEnv.OVER if self.done else "")
        return ToolResult(data=data, done=self.done, metadata={"reward": self.reward if self.done else None})

    def verify(self, transcript: list[dict[str, Any]], final_state: Any = None) -> VerifyResult:  # noqa: ARG002 - OpenEnv's harness verify signature
        obs = self.last_observation
        metrics: dict[str, Any] = {
            "task_id": self.task_id,
            "termination_reason": obs.termination_reason,
            "step_count": obs.step_count,
        }
        if not self.done:
            return VerifyResult(env_reward=0.0, done=False, metrics=metrics)  # the model stopped first: unfinished
        masked = infrastructure_failure(
            obs.termination_reason, {"evaluation_error": obs.evaluation_error} if obs.evaluation_error else None
        )
        metrics["masked"] = masked
        artifacts = {"simulation_run": obs.simulation_run} if obs.simulation_run is not None else {}
        reward = None if masked is not None else self.reward
        return VerifyResult(env_reward=reward, done=True, metrics=metrics, artifacts=artifacts)

    def close(self) -> None:
        self.closed = True
        self._client.close()


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


class Tau2SessionFactory(ResourceSessionFactory[Tau2Session]):
    """OpenEnv's ``ResourceSessionFactory`` for a ``tau2-gym serve`` server at ``base_url`` (``token``: its bearer
    token). Picklable, so TRL can hand it to its rollout process: ``functools.partial(Tau2SessionFactory, url)``."""

    def __init__(self, base_url: str, *, token: Optional[str] = None, message_timeout_s: float = 600.0) -> None:
        self.base_url = base_url
        self.token = token
        self.message_timeout_s = message_timeout_s

    def create(self, task: Any, seed: Optional[int] = None, episode_id: Optional[str] = None) -> Tau2Session:
        return Tau2Session(
            self.base_url,
            task,
            seed=seed,
            episode_id=episode_id,
            token=self.token,
            message_timeout_s=self.message_timeout_s,
        )
