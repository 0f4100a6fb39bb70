"""``environment_factory`` for TRL's built-in tool loop: the customer is a tool (``send_message_to_user``)."""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Literal, Optional, Union

from tau2_gym.envs import env_id
from tau2_gym.players.users import resolve_user
from tau2_gym.scoring.rewards import infrastructure_failure
from tau2_gym.training.trl.rewards import check_integrity

logger = logging.getLogger("tau2_gym.training.trl")


SEND_MESSAGE_TOOL = "send_message_to_user"


_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def _hint(schema: Any) -> Any:
    """A Python type hint that transformers' ``get_json_schema`` turns back into (about) this JSON schema."""
    if not isinstance(schema, dict):
        return Any
    if "enum" in schema and schema["enum"]:
        return Literal[tuple(schema["enum"])]  # ty: ignore[invalid-type-form] - a hint built from the schema at run time
    for key in ("anyOf", "oneOf"):
        if key in schema:
            hints = [_hint(s) for s in schema[key]]
            non_null = [h for h in hints if h is not type(None)]
            if not non_null:
                return Any
            out = non_null[0] if len(non_null) == 1 else Union[tuple(non_null)]
            return Optional[out] if len(non_null) < len(hints) else out  # ty: ignore[invalid-type-form] - as above
    kind = schema.get("type")
    if isinstance(kind, list):
        return _hint({"anyOf": [{"type": k} for k in kind]})
    if kind == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, dict) and items else list  # ty: ignore[invalid-type-form] - as above
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    if "$ref" in schema or "properties" in schema:
        return dict
    return Any


def _one_line(text: Any) -> str:
    words = " ".join(str(text or "").split())
    for tag in ("Args:", "Returns:", "Raises:"):  # would end the docstring sections early
        words = words.replace(tag, tag[:-1] + " -")
    return words


def _tool_method(schema: dict) -> Callable[..., str]:
    """A method that runs one tau2 tool through the env, with the signature/docstring TRL reads."""
    fn_schema = schema["function"]
    name = fn_schema["name"]
    params = fn_schema.get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or [])

    def method(self: Tau2ToolEnv, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    arg_lines = []
    ordered = [p for p in props if p in required] + [p for p in props if p not in required]
    for pname in ordered:
        pschema = props[pname]
        hint = _hint(pschema)
        default = inspect.Parameter.empty if pname in required else pschema.get("default", None)
        sig_params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[pname] = hint
        arg_lines.append(f"    {pname}: {_one_line(pschema.get('description') or pschema.get('title') or pname)}")
    annotations["return"] = str
    method.__name__ = name
    method.__qualname__ = f"Tau2ToolEnv.{name}"
    method.__signature__ = inspect.Signature(sig_params, return_annotation=str)  # ty: ignore[missing-attribute] - read by inspect
    method.__annotations__ = annotations
    doc = _one_line(fn_schema.get("description") or name)
    method.__doc__ = doc + ("\n\nArgs:\n" + "\n".join(arg_lines) if arg_lines else "")
    return method


def _send_message_method() -> Callable[..., str]:
    def send_message_to_user(self, message: str) -> str:
        """Send a message to the customer and return the customer's reply.

        Args:
            message: The text the customer reads.
        """
        return self._send(message)

    return send_message_to_user


class Tau2ToolEnv:
    """One tau2 episode behind TRL's ``environment_factory`` tool loop (build with :func:`make_environment_factory`).

    Subclasses carry one method per tau2 tool (plus ``send_message_to_user`` unless solo); TRL exposes them
    to the model. ``reset(**row)`` starts the row's task and returns the customer's first message;
    ``get_reward()`` is the tau2 reward (0.0 while the episode is unfinished).
    """

    env_kwargs: dict[str, Any] = {}
    domain: str = "mock"
    ENDED = "Error: the conversation has ended; no further actions are possible."
    OVER = "The conversation is over."

    def __init__(self) -> None:
        import gymnasium as gym

        kwargs = dict(self.env_kwargs)
        solo = bool(kwargs.pop("solo", False))
        kwargs["obs_format"] = "messages"
        self.env = gym.make(env_id(self.domain, solo), disable_env_checker=True, **kwargs)
        self._reset_state()

    def _reset_state(self) -> None:
        self.ended = False
        self.reward = 0.0
        self.reward_info: Optional[dict] = None
        self.termination_reason: Optional[str] = None
        self.info: dict = {}
        self.messages: list[dict] = []

    def reset(
        self,
        task_id: Optional[str] = None,
        prompt: Any = None,
        seed: Optional[int] = None,
        **row: Any,
    ) -> Optional[str]:
        self._reset_state()
        check_integrity(row.get("reward_integrity"), self.env.get_wrapper_attr("config").integrity.name)
        obs, info = self.env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
        self.messages = obs
        if info.get("episode_over"):
            self._step("")
        seen = (
            len(prompt) - 1
            if isinstance(prompt, list)
            and prompt
            and prompt[-1].get("role") == "user"
            and not prompt[-1].get("content")
            else None
        )
        if seen is None:
            return None
        texts = [m.get("content") or "" for m in self.messages[seen:] if m.get("role") == "user"]
        return "\n".join(texts) if texts else None

    def get_reward(self) -> Optional[float]:
        """The tau2 reward; ``None`` (TRL: no reward, advantage 0) when the episode failed for infrastructure
        reasons (``user_error``, ``evaluation_error``): never trained on as a policy failure."""
        if not self.ended:
            return 0.0

        why = infrastructure_failure(self.termination_reason, self.info)
        if why is not None:
            logger.warning("episode %s masked out of the gradient: %s", self.info.get("task_id"), why)
            return None
        return self.reward

    def _step(self, action: Any) -> list[dict]:
        """Step the env; returns the messages that followed the agent's action."""
        before = len(self.messages)
        obs, reward, terminated, truncated, info = self.env.step(action)
        new = obs[before + 1 :] if isinstance(obs, list) and len(obs) > before else []
        if isinstance(obs, list):
            self.messages = obs
        if terminated or truncated:
            self.ended = True
            self.reward = float(reward)
            self.reward_info = info.get("reward_info")
            self.termination_reason = info.get("termination_reason")
            self.info = info
        return new

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if self.ended:
            return self.ENDED
        new = self._step(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
            }
        )
        results = [m.get("content") or "" for m in new if m.get("role") == "tool"]
        if results:
            return "\n".join(results)
        return self.OVER if self.ended else ""

    def _send(self, message: str) -> str:
        if self.ended:
            return self.ENDED
        new = self._step({"role": "assistant", "content": message})
        replies = [m.get("content") or "" for m in new if m.get("role") == "user"]
        if replies:
            return "\n".join(replies)
        return self.OVER if self.ended else ""


def make_environment_factory(domain: str = "mock", **env_kwargs: Any) -> Callable[[], Tau2ToolEnv]:
    """An ``environment_factory`` for ``GRPOTrainer``: a fresh :class:`Tau2ToolEnv` of ``domain`` per call.

    ``env_kwargs`` go to ``gym.make`` (``user``, ``max_steps``, ``solo``, ...). The agent's tools become
    methods (their JSON schemas as Python signatures + docstrings); in normal mode ``send_message_to_user``
    is added (see the module docstring for how this changes the chat).
    """
    import gymnasium as gym

    kwargs = dict(env_kwargs)
    solo = bool(kwargs.pop("solo", False))
    probe = gym.make(
        env_id(domain, solo), disable_env_checker=True, **{k: v for k, v in kwargs.items() if k not in ("user",)}
    )
    tools = probe.get_wrapper_attr("tools")
    shared = dict(env_kwargs)
    user = shared.get("user")
    if isinstance(user, str) and user not in ("oracle", "oracle_user"):  # one simulator for all instances
        shared["user"] = resolve_user(user)
    members: dict[str, Any] = {"env_kwargs": shared, "domain": domain}
    reserved = set(dir(Tau2ToolEnv)) | {
        "env",
        "ended",
        "reward",
        "reward_info",
        "termination_reason",
        "info",
        "messages",
    }
    for schema in tools:
        name = schema["function"]["name"]
        if name in reserved or name.startswith("_"):
            raise ValueError(f"tool name {name!r} clashes with a Tau2ToolEnv member")
        members[name] = _tool_method(schema)
    if not solo:
        if SEND_MESSAGE_TOOL in members:
            raise ValueError(f"the domain already has a tool named {SEND_MESSAGE_TOOL!r}")
        members[SEND_MESSAGE_TOOL] = _send_message_method()
    words = "".join(p.capitalize() for p in domain.replace("-", "_").split("_"))
    cls_name = f"Tau2{words}{'Solo' if solo else ''}ToolEnv"
    cls = type(cls_name, (Tau2ToolEnv,), members)

    def factory() -> Tau2ToolEnv:
        return cls()

    factory.env_class = cls  # ty: ignore[missing-attribute] - the generated class, for callers that need it
    return factory
