"""Building a rollout's policy and customer from plain settings (what the ``tau2-gym rollout`` flags say).

The settings are small picklable dataclasses, so a Ray actor can build its own players from them (an LLM client
holds sockets and locks and does not travel). ``tau2 run``'s conventions carry over: ``openai/`` model names,
``api_base`` / ``api_key`` / ``num_retries`` in the LLM args, and litellm's rule of dropping the sampling
arguments a model family does not take (:mod:`tau2_gym.llm.params`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from tau2_gym.llm.params import model_family, tau2_run_args
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
from tau2_gym.players.agents.scripted import ALL_AGENTS, ScriptedPolicy, agent_names, is_scripted
from tau2_gym.players.users import OFFLINE_USERS, resolve_user
from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator
from tau2_gym.players.users.scripted import OracleUser

__all__ = [
    "DEFAULT_LLM",
    "LLM_AGENTS",
    "LLM_USERS",
    "UNSUPPORTED_AGENTS",
    "PlayerSettings",
    "build_player",
    "build_agent",
    "build_user",
    "judge_with_cache",
    "llm_settings",
]

DEFAULT_LLM = "gpt-4.1-2025-04-14"
LLM_AGENTS = ("llm_agent", "llm_agent_solo")
LLM_USERS = ("user_simulator",)
SCRIPTED_AGENTS = tuple(c.name for c in ALL_AGENTS)
UNSUPPORTED_AGENTS = {
    "llm_agent_gt": "upstream's ground-truth-guided LLM agent is not implemented here; use "
    "--agent llm_agent, or --agent oracle for the gold actions"
}


@dataclass
class PlayerSettings:
    """One side of a rollout (the agent or the customer) as the command line gives it."""

    kind: str = field(metadata={"help": "llm_agent / llm_agent_solo / a scripted agent; user_simulator / oracle / ..."})
    llm: str = field(default=DEFAULT_LLM, metadata={"help": "model name (tau2 run's `openai/` prefix is dropped)."})
    llm_args: dict = field(default_factory=dict, metadata={"help": "tau2 run's LLM args (sampling, api_base, ...)."})
    base_url: Optional[str] = field(default=None, metadata={"help": "endpoint, e.g. http://localhost:8000/v1."})
    api_key_env: str = field(default="OPENAI_API_KEY", metadata={"help": "env var holding the endpoint's key."})
    request_retries: Optional[int] = field(
        default=None, metadata={"help": "retries per request (None: num_retries of the LLM args, else 3)."}
    )
    request_timeout: float = field(default=120.0, metadata={"help": "seconds per LLM request."})
    max_concurrency: int = field(default=32, metadata={"help": "requests in flight at once."})
    capture_tokens: Optional[str] = field(default=None, metadata={"help": "agent: token capture mode."})
    cache: str = field(default="auto", metadata={"help": "user: reply cache, 'auto', 'off' or a path."})
    price_table: Optional[str] = field(default=None, metadata={"help": "a price table file (litellm's shape)."})
    flag: str = field(default="--llm-args", metadata={"help": "the flag named in notes about the LLM args."})


def llm_settings(settings: PlayerSettings, notes: Optional[list[str]] = None) -> dict[str, Any]:
    """The OpenAI client config fields of ``settings`` (temperature etc. known; the rest passed through). What
    ``tau2 run``'s litellm would not send is dropped, with a note appended to ``notes``."""
    args = dict(settings.llm_args)
    # tau2 run points litellm at a server through llm-args; litellm strips the `openai/` provider prefix.
    api_base = args.pop("api_base", None) or args.pop("base_url", None)
    base_url = settings.base_url or api_base
    api_key = args.pop("api_key", None)
    model = settings.llm[len("openai/") :] if settings.llm.startswith("openai/") else settings.llm
    args, dropped = tau2_run_args(model, args)  # what tau2 run's litellm (drop_params=True) would send
    if dropped and notes is not None:
        notes.append(
            f"note: {settings.flag} {sorted(dropped)} not sent to {model!r}: tau2 run's litellm drops them "
            f"for the {model_family(model)!r} model family (see tau2_gym.llm.params)"
        )
    out: dict[str, Any] = {
        "model": model,
        "api_key": api_key,
        "base_url": base_url,
        "api_key_env": settings.api_key_env,
        "timeout": settings.request_timeout,
        "temperature": args.pop("temperature", None),
    }
    for name in ("top_p", "max_tokens", "seed"):
        if name in args:
            out[name] = args.pop(name)
    num_retries = args.pop("num_retries", None)
    retries = settings.request_retries
    out["max_retries"] = retries if retries is not None else (num_retries if num_retries is not None else 3)
    if "extra_body" in args:
        out["extra_body"] = args.pop("extra_body")
    out["llm_args"] = args
    out["max_concurrency"] = max(1, settings.max_concurrency)
    out["price_table"] = settings.price_table
    return out


def build_agent(settings: PlayerSettings, notes: Optional[list[str]] = None) -> Any:
    """The agent: an LLM agent behind an OpenAI-compatible endpoint, or a scripted agent by name."""
    if settings.kind in UNSUPPORTED_AGENTS:
        raise ValueError(f"--agent {settings.kind}: {UNSUPPORTED_AGENTS[settings.kind]}")
    if settings.kind in LLM_AGENTS:
        return OpenAIAgentPolicy(
            OpenAIAgentConfig(**llm_settings(settings, notes), capture_tokens=settings.capture_tokens)
        )
    if not is_scripted(settings.kind):
        raise ValueError(f"unknown agent {settings.kind!r}; choose one of: {', '.join((*LLM_AGENTS, *agent_names()))}")
    if settings.capture_tokens:
        raise ValueError(f"--capture-tokens needs an LLM agent (--agent llm_agent); {settings.kind!r} has no tokens")
    return ScriptedPolicy(settings.kind)


def build_user(settings: PlayerSettings, solo: bool = False, notes: Optional[list[str]] = None) -> Any:
    """The customer: an LLM user simulator, a scripted one, or none in solo mode."""
    if settings.kind == "dummy_user" and not solo:
        raise ValueError("--user dummy_user is the solo-mode user: use it with --agent llm_agent_solo")
    if solo:
        return None
    if settings.kind in LLM_USERS:
        user = OpenAIUserSimulator(OpenAIUserConfig(**llm_settings(settings, notes), cache=settings.cache))
        stats = user.cache_stats() or {}
        if stats.get("error") and notes is not None:  # said at start: the run goes on, uncached
            notes.append(f"warning: user cache {stats.get('path')} is unusable ({stats['error']}); running uncached")
        return user
    if settings.cache not in ("auto", "off"):
        raise ValueError(f"--user-cache needs an LLM user (--user user_simulator); {settings.kind!r} makes no calls")
    try:
        return resolve_user(settings.kind)
    except ValueError:
        raise ValueError(
            f"unknown user {settings.kind!r}; choose one of: {', '.join((*LLM_USERS, 'dummy_user', *OFFLINE_USERS))}"
            ", or 'package.module:Class'"
        ) from None


def judge_with_cache(spec: Optional[str], cache: str) -> Optional[str]:
    """An ``openai:`` judge spec with the run's cache choice (unless the spec sets its own ``cache=``)."""
    if not spec or cache == "auto" or not spec.strip().lower().startswith("openai:") or ",cache=" in spec:
        return spec
    return f"{spec},cache={cache}"


def _is_player(obj: Any) -> bool:
    return hasattr(obj, "generate") or hasattr(obj, "agenerate")


def build_player(spec: Any, kind: str, solo: bool = False) -> Any:
    """A policy (``kind="policy"``) or customer from what ``collect`` accepts -- an object, a scripted name, a spec
    string -- or from a zero-argument factory (a class, a ``functools.partial``), called here."""
    if isinstance(spec, type) or (
        spec is not None and not isinstance(spec, str) and not _is_player(spec) and callable(spec)
    ):
        spec = spec()
    if kind == "policy":
        return ScriptedPolicy(spec) if isinstance(spec, str) else spec
    if solo:
        return None
    if spec is None:
        return OracleUser()
    return resolve_user(spec) if isinstance(spec, str) else spec
