"""upstream's LLM agent over an OpenAI-compatible endpoint (vLLM, SGLang, OpenAI, ...).

:class:`OpenAIAgentPolicy` sends what upstream tau2's ``LLMAgent`` sends (system prompt with the domain
policy, the conversation, the env's tools with ``tool_choice="auto"`` -- ``"required"`` for the solo agent --,
``temperature`` 0.0 by default, the episode seed). A reply that still fails after the client's retries raises
:class:`~tau2_gym.core.turns.PolicyError`. A reply whose tool call is malformed (arguments not a JSON object, no
name) is the policy's output, not a server fault: it is returned as sent and ends the episode as ``agent_error``,
in the env and in ``rollout`` alike.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from tau2_gym.core.actions import field_reasoning
from tau2_gym.core.messages import AssistantMessage, ToolCall
from tau2_gym.core.turns import AgentTurnRequest, PolicyError
from tau2_gym.llm.client import (
    DEFAULT_MODEL,
    BadToolCall,
    ChatClient,
    EmptyReply,
    LLMConfig,
    LLMError,
    Reply,
    chat_message,
    reply_message,
)
from tau2_gym.players.agents.base import AgentPolicy

__all__ = [
    "OpenAIAgentConfig",
    "OpenAIAgentPolicy",
    "DEFAULT_AGENT_MODEL",
    "token_record",
    "CAPTURE_MODES",
    "PolicyError",
]

logger = logging.getLogger(__name__)

#: upstream tau2's default agent model
DEFAULT_AGENT_MODEL = DEFAULT_MODEL


# ------------------------------------------------------------------------------------------ OpenAI

#: the values of ``OpenAIAgentConfig.capture_tokens``
CAPTURE_MODES = (None, "openai", "vllm", "sglang", "auto")

#: the request extensions each capture mode adds (in ``extra_body``): vLLM returns the prompt ids at the top
#: level and the completion ids per choice (and spells tokens ``token_id:N``); SGLang returns both per choice
#: (``return_token_ids``, its newer servers), the prompt ids per choice (``return_prompt_token_ids``) and the
#: engine's ``meta_info`` per choice, whose ``output_token_logprobs`` [logprob, token id, text] entries give the
#: completion ids on servers without ``return_token_ids`` (``return_meta_info``). Each server ignores the other's.
CAPTURE_EXTENSIONS: dict[str, dict[str, bool]] = {
    "openai": {},
    "vllm": {"return_token_ids": True, "return_tokens_as_token_ids": True},
    "sglang": {"return_token_ids": True, "return_prompt_token_ids": True, "return_meta_info": True},
}
CAPTURE_EXTENSIONS["auto"] = {**CAPTURE_EXTENSIONS["vllm"], **CAPTURE_EXTENSIONS["sglang"]}


@dataclass
class OpenAIAgentConfig(LLMConfig):
    """Settings of :class:`OpenAIAgentPolicy` (the client's, with the agent's defaults, plus tool choice and token
    capture). Print ``describe()`` to see every value."""

    model: str = field(default=DEFAULT_AGENT_MODEL, metadata={"help": "Agent model name sent to the endpoint."})
    tool_choice: str = field(
        default="auto",
        metadata={
            "help": "tool_choice sent when the agent has tools and the turn asks for none "
            "(upstream: auto; the solo agent's turns ask for required)."
        },
    )
    capture_tokens: Optional[str] = field(
        default=None,
        metadata={
            "help": "Keep each reply's token ids/logprobs on the message's raw_data: 'openai' "
            "(requests logprobs + top_logprobs), 'vllm' (also vLLM's return_token_ids and "
            "return_tokens_as_token_ids), 'sglang' (also SGLang's return_token_ids, "
            "return_prompt_token_ids and return_meta_info), 'auto' (the vLLM and SGLang "
            "options together; the reply shows which server answered); None: off."
        },
    )
    top_logprobs: int = field(default=1, metadata={"help": "top_logprobs requested with capture_tokens (0-20)."})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.capture_tokens not in CAPTURE_MODES:
            raise ValueError(f"capture_tokens must be one of {CAPTURE_MODES}; got {self.capture_tokens!r}")


#: what the agent's ``parse`` makes of a reply: (text, tool calls, None), or (None, None, why) for a reply whose
#: tool call cannot be read
_Parsed = tuple[Optional[str], Optional[list[ToolCall]], Optional[str]]


def _read(raw: dict) -> _Parsed:
    """A malformed tool call is the policy's output, not a server fault: it is kept (not re-requested, which would
    resample the policy until it happens to produce valid JSON). So is a reply that holds only reasoning (a
    server's reasoning parser moved the whole reply into ``reasoning_content``): the env ends the episode on it as
    ``agent_error``; only a reply with nothing at all is re-requested (``empty_retries``)."""
    try:
        content, calls = chat_message(raw, "assistant")
    except BadToolCall as exc:
        return None, None, str(exc)
    except EmptyReply:
        if field_reasoning(reply_message(raw)) is None:
            raise
        return None, None, None
    return content, calls, None


class OpenAIAgentPolicy(AgentPolicy):
    """upstream's LLM agent over an OpenAI-compatible endpoint (vLLM, SGLang, OpenAI, ...).

    ``OpenAIAgentPolicy(model="Qwen/Qwen3-8B", base_url="http://localhost:8000/v1")`` or
    ``OpenAIAgentPolicy(OpenAIAgentConfig(...))``. Thread-safe; ``agenerate`` is concurrent up to
    ``max_concurrency`` requests per event loop. Requests go through the package's one LLM client
    (:class:`~tau2_gym.llm.client.ChatClient`); ``cache='auto'`` caches nothing here (a policy's replies change as
    it trains), a path does.
    """

    implementation = "llm_agent"

    def __init__(self, config: Optional[OpenAIAgentConfig] = None, **overrides: Any) -> None:
        base = config if config is not None else OpenAIAgentConfig()
        self.config = dataclasses.replace(base, **overrides) if overrides else base
        self.client = ChatClient(self.config, who="agent", auto_cache=False)
        self.client.require_sdk()  # a missing openai package is said now, not at the first agent turn
        self._warned_tokens = False

    def __repr__(self) -> str:
        return f"OpenAIAgentPolicy({self.config!r})"

    def request_kwargs(self, request: AgentTurnRequest) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments for one agent turn."""
        cfg = self.config
        choice = request.tool_choice if request.tool_choice is not None else cfg.tool_choice
        kw = self.client.request_kwargs(request.openai_messages(), request.tools, choice, request.seed)
        if cfg.capture_tokens is not None:
            kw["logprobs"] = True
            kw["top_logprobs"] = cfg.top_logprobs
            if CAPTURE_EXTENSIONS[cfg.capture_tokens]:  # the servers' own token-id options
                kw["extra_body"] = {**kw.get("extra_body", {}), **CAPTURE_EXTENSIONS[cfg.capture_tokens]}
        return kw

    def generate(self, request: AgentTurnRequest) -> Union[AssistantMessage, dict]:
        """The agent's next message; a reply whose tool call cannot be read comes back as the OpenAI message
        dict the server sent (the env/rollout end the episode on it as ``agent_error``)."""
        try:
            return self._message(self.client.complete(self.request_kwargs(request), _read))
        except LLMError as exc:
            raise PolicyError(str(exc)) from exc

    async def agenerate(self, request: AgentTurnRequest) -> Union[AssistantMessage, dict]:
        try:
            return self._message(await self.client.acomplete(self.request_kwargs(request), _read))
        except LLMError as exc:
            raise PolicyError(str(exc)) from exc

    def generate_batch(self, requests: Sequence[AgentTurnRequest]) -> list[Any]:
        """All requests in flight at once (up to ``max_concurrency``); one action or exception each, in order."""
        return self.client.batch(self.agenerate, requests)

    def _message(self, reply: Reply[_Parsed]) -> Union[AssistantMessage, dict]:
        content, calls, malformed = reply.value
        raw = reply.raw
        if self.config.capture_tokens is not None:
            raw = {**raw, **token_record(raw)}
            if raw["completion_logprobs"] is None and not self._warned_tokens:
                self._warned_tokens = True
                logger.warning(
                    "agent model %s returned no logprobs although capture_tokens=%r was asked: token "
                    "capture is off for such replies (vLLM: serve with logprobs enabled; the server "
                    "may not support them)",
                    self.config.model,
                    self.config.capture_tokens,
                )
        if malformed is not None:
            return self._malformed(reply, raw, malformed)
        return AssistantMessage(content=content, tool_calls=calls, cost=reply.cost, usage=reply.usage, raw_data=raw)

    def _malformed(self, reply: Reply[_Parsed], raw: dict, reason: str) -> dict:
        """A reply whose tool call cannot be read, as the OpenAI message dict the server sent: the env and
        ``rollout`` alike end the episode on it as ``agent_error``, scored and counted in the average
        (to_assistant_message raises ActionError)."""
        message = dict(reply.raw["choices"][0].get("message") or {})
        logger.info(
            "agent model %s sent an unreadable tool call (%s): the episode ends as agent_error",
            self.config.model,
            reason,
        )
        return {
            "role": "assistant",
            "content": message.get("content"),
            "tool_calls": message.get("tool_calls"),
            "usage": reply.usage,
            "cost": reply.cost,
            "raw_data": raw,
        }

    def info(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "llm": self.config.model,
            "llm_args": self.client.recorded_args(),
        }

    PROBE_TEXT = "tau2-gym token capture probe: reply with one word."

    def probe_tokens(self) -> dict[str, Any]:
        """Ask the server once, before a run, whether it returns what ``capture_tokens`` needs.

        One short request (``max_tokens=1``; no cache, no retry) with the capture options; returns
        ``{"logprobs", "token_ids", "prompt_token_ids"}`` (booleans), ``server`` (the family whose fields came
        back: ``vllm``, ``sglang``, ``openai`` or None; see :func:`token_record`) and ``error`` (None, or why the
        probe itself failed).
        """
        kw: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": self.PROBE_TEXT}],
            "max_tokens": 1,
        }
        capture = self.request_kwargs(
            AgentTurnRequest(  # the capture options of a real request
                episode_id="probe",
                system_prompt="",
                messages=[],
                tools=[],
                task=None,  # ty: ignore[invalid-argument-type] - request_kwargs reads no task
            )
        )
        for name in ("logprobs", "top_logprobs", "extra_body"):
            if name in capture:
                kw[name] = capture[name]
        try:
            rec = token_record(self.client.send(kw))
        except Exception as exc:  # noqa: BLE001 - reported, the run decides
            return {
                "logprobs": False,
                "token_ids": False,
                "prompt_token_ids": False,
                "server": None,
                "error": f"{type(exc).__name__}: {str(exc)[:200]}",
            }
        return {
            "logprobs": rec["completion_logprobs"] is not None,
            "token_ids": rec["completion_token_ids"] is not None,
            "prompt_token_ids": rec["prompt_token_ids"] is not None,
            "server": rec["token_source"],
            "error": None,
        }

    def close(self) -> None:
        self.client.close()

    async def aclose(self) -> None:
        await self.client.aclose()


def token_record(raw: dict) -> dict[str, Any]:
    """Token ids and logprobs of one chat completion (dict form), for off-policy trainers.

    ``completion_logprobs``/``completion_tokens`` come from OpenAI's ``choices[0].logprobs.content``;
    ``completion_token_ids`` from ``choices[0].token_ids`` (vLLM; SGLang's ``return_token_ids``), else from
    tokens spelled ``token_id:N`` (vLLM's ``return_tokens_as_token_ids``), else from SGLang's
    ``choices[0].meta_info.output_token_logprobs`` ([logprob, token id, text] per token; also the logprobs
    when the OpenAI field is absent); ``prompt_token_ids`` from the response (vLLM) or ``choices[0]`` (SGLang).
    ``token_source`` names the server family the fields came from (``vllm``, ``sglang``, ``openai``: logprobs
    only; None: nothing). A value the server did not send is None -- never guessed; the values are kept as
    sent (:func:`tau2_gym.training.tokens.server_trajectory` checks them).
    """
    choices = raw.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    lp = choice.get("logprobs")
    entries = [e for e in (lp.get("content") or []) if isinstance(e, dict)] if isinstance(lp, dict) else []
    tokens = [e.get("token") for e in entries] or None
    logprobs = [e.get("logprob") for e in entries] or None
    top = [e.get("top_logprobs") for e in entries] if entries and any(e.get("top_logprobs") for e in entries) else None
    ids = choice.get("token_ids")
    # the family, from fields only one of them sends: vLLM's top-level prompt ids and per-choice stop_reason,
    # SGLang's per-choice prompt ids, meta_info and matched_stop
    source = "vllm" if "prompt_token_ids" in raw or "stop_reason" in choice else None
    if ids is None and tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        try:
            ids = [int(t[len("token_id:") :]) for t in tokens]
        except ValueError:
            ids = None
    meta = choice.get("meta_info")
    if isinstance(meta, dict) or "prompt_token_ids" in choice or "matched_stop" in choice:
        source = source or "sglang"
    triples = meta.get("output_token_logprobs") if isinstance(meta, dict) else None
    if isinstance(triples, list) and triples and all(isinstance(t, (list, tuple)) and len(t) >= 2 for t in triples):
        if ids is None:
            ids = [t[1] for t in triples]
        if logprobs is None:
            logprobs = [t[0] for t in triples]
    prompt_ids = raw.get("prompt_token_ids", choice.get("prompt_token_ids"))
    if source is None and logprobs is not None:
        source = "openai"
    return {
        "prompt_token_ids": prompt_ids,
        "completion_token_ids": ids,
        "completion_tokens": tokens,
        "completion_logprobs": logprobs,
        "completion_top_logprobs": top,
        "token_source": source,
    }
