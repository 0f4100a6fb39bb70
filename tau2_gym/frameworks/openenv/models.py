"""The wire types of the tau2 OpenEnv server: the action, the observation and the state (OpenEnv's ``models.py``).

The action is OpenEnv's: an object whose fields the server's ``/schema`` publishes. A step's data is
``{"action": A}`` (and OpenEnv's optional ``metadata``), ``A`` being any form the Gymnasium env's ``step`` takes.
:func:`action_shape_error` says what is wrong with any other shape, in words a caller can act on: the server's
guard answers a WebSocket frame with it (OpenEnv's own clients show only an error's message) and the action's
validator raises it for HTTP ``/step`` (where it appears in the 422 detail).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["ACTION_SHAPE", "Tau2Action", "Tau2Observation", "Tau2State", "action_shape_error"]

#: the expected shape, as every shape error names it
ACTION_SHAPE = (
    'a step is {"action": A}, A being text for the customer, an assistant message {"role": "assistant", '
    '"content": ..., "tool_calls": [...]}, one call {"name": ..., "arguments": {...}} or a list of calls'
)
_STEP_KEYS = frozenset({"action", "metadata"})
_BARE_KEYS = frozenset({"name", "arguments", "role", "content", "tool_calls", "function", "type", "id"})


def action_shape_error(data: Any) -> Optional[str]:
    """Why ``data`` (a step's data) is not ``{"action": A}`` with ``A`` of a form the env reads, or None.

    What ``A`` says is the env's to judge (an unreadable action ends the episode as ``agent_error``, as in the
    Gymnasium env); only the shape is checked here.
    """
    if type(data) is dict and len(data) == 1:  # the common case, first and cheap
        action = data.get("action")
        if type(action) is str or type(action) is dict:
            return None
    if not isinstance(data, dict):
        return f"{ACTION_SHAPE}; got {type(data).__name__} {_preview(data)}"
    if "action" not in data:
        keys = sorted(map(str, data))
        if keys and set(keys) <= _BARE_KEYS:
            return f'{ACTION_SHAPE}; got a bare {_preview(data)}: wrap it as {{"action": ...}}'
        return f"{ACTION_SHAPE}; got an object with keys {keys}"
    extra = sorted(map(str, set(data) - _STEP_KEYS))
    if extra:
        return f"{ACTION_SHAPE}; unknown key(s) {extra} beside 'action' (only 'metadata' may be there)"
    if "metadata" in data and not isinstance(data["metadata"], dict):
        return f"metadata must be an object; got {type(data['metadata']).__name__}"
    action = data["action"]
    if isinstance(action, (str, dict)):
        return None
    if isinstance(action, list):
        for i, item in enumerate(action):
            if not isinstance(item, dict):
                return f"{ACTION_SHAPE}; item {i} of the list is {type(item).__name__} {_preview(item)}, not a call"
        return None
    return f"{ACTION_SHAPE}; got action {type(action).__name__} {_preview(action)}"


def _preview(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Tau2Action(Action):
    """One agent turn, in any form the env's ``step`` takes."""

    action: Union[str, dict[str, Any], list[dict[str, Any]]] = Field(
        ...,
        description=(
            "text for the customer; an OpenAI assistant message ({'role': 'assistant', 'content': ..., "
            "'tool_calls': [...]}); one call {'name': ..., 'arguments': {...}} or a list of them; or raw model text "
            "with tool-call markup (read by the env's parser)"
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        problem = action_shape_error(data)
        if problem is not None:
            # not a ValueError: OpenEnv's HTTP /step puts the errors in its 422 reply, and a ValueError in their
            # context is not JSON
            raise PydanticCustomError("action_shape", "{problem}", {"problem": problem})
        return data


class Tau2Observation(Observation):
    """The agent's view after a reset or a step; at the end also the reward breakdown and the tau2 record.

    ``done`` is ``terminated or truncated``. As in the Gymnasium env, an episode that ends during ``reset`` (the
    customer stops at once) reports ``episode_over=True`` with ``done=False``: the next step returns the terminal
    transition and its reward.
    """

    messages: Union[list[dict[str, Any]], str] = Field(
        default_factory=list,
        description="the agent's view: OpenAI chat messages, system prompt first (obs_format='text': a transcript)",
    )
    tools: Optional[list[dict[str, Any]]] = Field(
        default=None, description="the OpenAI tool schemas the agent may call (in the reset observation)"
    )
    messages_offset: int = Field(
        default=0,
        description=(
            "incremental observations (reset option incremental=true): `messages` holds the view from this index "
            "on, the earlier ones being the previous observation's; 0: the whole view"
        ),
    )
    task_id: Optional[str] = None
    episode_id: Optional[str] = Field(default=None, description="the tau2 episode id")
    step_count: int = Field(default=0, description="upstream's orchestrator step counter")
    num_errors: int = 0
    terminated: bool = False
    truncated: bool = False
    episode_over: bool = False
    termination_reason: Optional[str] = None
    reward_info: Optional[dict[str, Any]] = Field(default=None, description="upstream's reward breakdown")
    tau2_reward: Optional[float] = Field(default=None, description="upstream's reward before the reward mode")
    error: Optional[str] = None
    evaluation_error: Optional[str] = None
    simulation_run: Optional[dict[str, Any]] = Field(
        default=None, description="the finished episode as a tau2 SimulationRun dict (at the end)"
    )


class Tau2State(State):
    """The session's episode: ids, who acts next and how it ended."""

    env_id: Optional[str] = None
    task_id: Optional[str] = None
    status: Optional[str] = Field(default=None, description="'agent', 'user' or 'done'")
    termination_reason: Optional[str] = None
