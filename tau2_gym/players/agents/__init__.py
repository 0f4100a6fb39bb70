"""Agent policies: the scripted agents (oracle, flawed ones, the exploit panel) and LLM agents behind OpenAI-compatible
servers."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from tau2_gym.core.turns import AgentTurnRequest
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy
from tau2_gym.players.agents.scripted import ALL_AGENTS, ScriptedPolicy
from tau2_gym.players.users.hf_user import HFUserSimulator

__all__ = ["AgentPolicy", "resolve_agent"]


class _CallablePolicy(AgentPolicy):
    """A plain function ``fn(request) -> action`` (e.g. a wrapped HF model) as an agent policy."""

    def __init__(self, fn: Callable[[AgentTurnRequest], Any]) -> None:
        self.fn = fn
        self.implementation = getattr(fn, "__name__", "callable_agent")

    def generate(self, request: AgentTurnRequest) -> Any:
        return self.fn(request)


def resolve_agent(spec: Any) -> Any:
    """The agent the customer talks to, from a spec.

    ``"oracle"`` (default) or another scripted agent's name (:mod:`tau2_gym.players.agents.scripted`): offline,
    deterministic;
    ``"openai:<model>"`` / ``"openai:<model>@<base_url>"``:
    :class:`~tau2_gym.players.agents.openai_agent.OpenAIAgentPolicy`;
    ``"hf:<model name or path>"`` or an :class:`~tau2_gym.players.users.hf_user.HFUserSimulator` built on a model and
    tokenizer: a local Hugging Face model (the simulator's batched chat-template generation and tool-call
    parsing work on the agent's request alike; its replies become the agent's turns);
    ``"package.module:Attr"``: imported (a class is instantiated without arguments); an object with
    ``generate(AgentTurnRequest)`` (any :class:`~tau2_gym.players.agents.base.AgentPolicy`); or a callable
    ``fn(request) -> action``.
    """
    if spec is None:
        spec = "oracle"
    if isinstance(spec, str):
        kind, sep, rest = spec.partition(":")
        if sep and rest and kind == "openai":
            model, at, base_url = rest.partition("@")
            if at and not base_url.startswith(("http://", "https://")):
                model, base_url = rest, ""
            return OpenAIAgentPolicy(model=model, base_url=base_url or None)
        if sep and rest and kind == "hf":  # the HF simulator's generation (template, tools, parser) serves any side
            return HFUserSimulator(model_name_or_path=rest)
        if sep and "." in kind:
            obj = getattr(importlib.import_module(kind), rest)
            return obj() if isinstance(obj, type) else resolve_agent(obj)
        names = [cls.name for cls in ALL_AGENTS]
        if spec not in names:
            raise ValueError(
                f"unknown agent {spec!r}; use one of {names}, 'openai:<model>[@<base_url>]', "
                "'package.module:Attr', an AgentPolicy or a callable(request) -> action"
            )
        return ScriptedPolicy(spec)
    if callable(getattr(spec, "generate", None)):
        return spec
    if callable(spec):
        return _CallablePolicy(spec)
    raise TypeError(f"agent={spec!r} is not an agent policy (it needs generate(request), or pass a callable)")
