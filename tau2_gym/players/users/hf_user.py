"""A user simulator backed by a local Hugging Face ``transformers`` causal LM.

Requests are rendered with the tokenizer's chat template (the user's tools passed as ``tools=`` when the
template uses them), left-padded into batches and generated together -- greedy by default, the local
analogue of upstream's temperature 0.0. The generated text is split into content and tool calls by
:func:`tau2_gym.core.parsing.parse_tool_calls`; calls are tagged ``requestor="user"``.

Outcomes that upstream would abort the simulation on become :class:`UserSimulatorError` (the episode then
ends as ``user_error``): tool-call markup that does not parse (unless ``on_parse_error="text"``), and an
empty output. Greedy decoding would repeat an empty output, so there is no re-try here.

``torch`` and ``transformers`` are optional (``pip install tau2-gym[hf]``); they are imported on first use.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union, cast

from tau2_gym.core.config import describe
from tau2_gym.core.messages import UserMessage
from tau2_gym.core.parsing import ParsedCall, join_reasoning, parse_tool_calls, split_reasoning
from tau2_gym.players.users.base import (
    UserSimulator,
    UserSimulatorError,
    UserTurnRequest,
)

logger = logging.getLogger(__name__)

__all__ = ["HFUserConfig", "HFUserSimulator"]


def _import_hf() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ImportError("HFUserSimulator needs 'torch' and 'transformers': pip install 'tau2-gym[hf]'") from exc
    return torch, transformers


@dataclass
class HFUserConfig:
    """Settings of :class:`HFUserSimulator`. Print it to see every value."""

    model_name_or_path: Optional[str] = field(
        default=None, metadata={"help": "Hub id or local path; not needed when model and tokenizer objects are passed."}
    )
    device: Optional[str] = field(
        default=None, metadata={"help": "Device to move a loaded model to (None: leave where loaded)."}
    )
    dtype: str = field(
        default="auto", metadata={"help": "dtype for from_pretrained ('auto', 'bfloat16', 'float32', ...)."}
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "Passed to from_pretrained."})
    max_new_tokens: int = field(default=256, metadata={"help": "Generation limit per user turn."})
    do_sample: bool = field(
        default=False, metadata={"help": "Sample instead of greedy decoding (upstream: temperature 0.0)."}
    )
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (only with do_sample)."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling (only with do_sample)."})
    top_k: Optional[int] = field(default=None, metadata={"help": "Top-k sampling (only with do_sample)."})
    batch_size: int = field(default=8, metadata={"help": "Requests per model.generate call."})
    parser: Union[str, Callable[..., ParsedCall]] = field(
        default="auto", metadata={"help": "Tool-call parser: auto, hermes, json, transformers, or a callable."}
    )
    on_parse_error: str = field(
        default="error", metadata={"help": "Malformed tool-call markup: 'error' (user_error) or 'text' (send as text)."}
    )
    skip_special_tokens: bool = field(
        default=False,
        metadata={"help": "Drop special tokens when decoding (off: tool-call tags may be special tokens)."},
    )
    chat_template_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Extra apply_chat_template arguments, e.g. {'enable_thinking': False}."}
    )
    generate_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Extra model.generate arguments (e.g. logits_processor)."}
    )

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1; got {self.batch_size}")
        if self.on_parse_error not in ("error", "text"):
            raise ValueError(f"on_parse_error must be 'error' or 'text'; got {self.on_parse_error!r}")

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        return describe(self)


class _LoopBatcher:
    """Coalesces concurrent ``agenerate`` calls of one event loop into ``generate_batch`` calls."""

    def __init__(self) -> None:
        self.pending: list[tuple[UserTurnRequest, asyncio.Future]] = []
        self.running = False


class HFUserSimulator(UserSimulator):
    """Stateless user simulator over a local causal LM; batches requests into one ``generate`` call."""

    implementation = "hf_user_simulator"

    def __init__(
        self, config: Optional[HFUserConfig] = None, *, model: Any = None, tokenizer: Any = None, **overrides: Any
    ) -> None:
        base = config if config is not None else HFUserConfig()
        self.config = dataclasses.replace(base, **overrides) if overrides else base
        self._torch, transformers = _import_hf()
        cfg = self.config
        if model is None or tokenizer is None:
            if cfg.model_name_or_path is None:
                raise ValueError("HFUserSimulator needs model_name_or_path, or both model= and tokenizer= objects")
        if tokenizer is None:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                cfg.model_name_or_path, trust_remote_code=cfg.trust_remote_code
            )
        if model is None:
            model = self._load_model(transformers)
        self.model = model
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:  # left padding needs a pad token; EOS is the usual stand-in
            tokenizer.pad_token = tokenizer.eos_token
        template = getattr(tokenizer, "chat_template", None)
        if template is None:
            raise ValueError("the tokenizer has no chat_template; set tokenizer.chat_template before building the user")
        self._template_takes_tools = "tools" in (json.dumps(template) if isinstance(template, dict) else template)
        self._warned_tools = False
        self._lock = threading.Lock()
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBatcher] = weakref.WeakKeyDictionary()

    def _load_model(self, transformers: Any) -> Any:
        cfg = self.config
        dtype: Any = cfg.dtype
        if dtype != "auto":
            dtype = getattr(self._torch, dtype)
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                cfg.model_name_or_path, dtype=dtype, trust_remote_code=cfg.trust_remote_code
            )
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model = transformers.AutoModelForCausalLM.from_pretrained(
                cfg.model_name_or_path, torch_dtype=dtype, trust_remote_code=cfg.trust_remote_code
            )
        if cfg.device is not None:
            model = model.to(cfg.device)
        return model.eval()

    def __repr__(self) -> str:
        return f"HFUserSimulator({self.config!r})"

    # ------------------------------------------------------------------------------ prompts

    @staticmethod
    def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chat templates expect tool-call arguments as objects; the OpenAI wire form has JSON strings."""
        out = []
        for m in messages:
            calls = m.get("tool_calls")
            if calls:
                m = dict(m)
                fixed = []
                for c in calls:
                    fn = c.get("function")
                    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                        try:
                            args = json.loads(fn["arguments"]) if fn["arguments"].strip() else {}
                        except json.JSONDecodeError:
                            args = fn["arguments"]
                        c = {**c, "function": {**fn, "arguments": args}}
                    fixed.append(c)
                m["tool_calls"] = fixed
            out.append(m)
        return out

    def build_prompt(self, request: UserTurnRequest) -> str:
        """The exact prompt text the model continues for this request."""
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True, **self.config.chat_template_kwargs}
        if request.tools:
            if self._template_takes_tools:
                kwargs["tools"] = request.tools
            elif not self._warned_tools:
                self._warned_tools = True
                logger.warning(
                    "the chat template does not render tools; the user's %d tools are not shown to the model",
                    len(request.tools),
                )
        prompt = self.tokenizer.apply_chat_template(self._template_messages(request.openai_messages()), **kwargs)
        if not isinstance(prompt, str):
            raise TypeError(f"apply_chat_template(tokenize=False) returned {type(prompt).__name__}, expected str")
        return prompt

    # ------------------------------------------------------------------------------ generation

    def _generation_config(self, seeds: list[Optional[int]]) -> Any:
        cfg = self.config
        gc = copy.deepcopy(self.model.generation_config)
        gc.max_new_tokens = cfg.max_new_tokens
        gc.do_sample = cfg.do_sample
        gc.pad_token_id = self.tokenizer.pad_token_id
        if gc.eos_token_id is None:
            gc.eos_token_id = self.tokenizer.eos_token_id
        if cfg.do_sample:
            gc.temperature, gc.top_p, gc.top_k = cfg.temperature, cfg.top_p, cfg.top_k
            seed = next((s for s in seeds if s is not None), None)
            if seed is not None:  # one seed per generate call: rows of a batch share the RNG stream
                self._torch.manual_seed(seed)
        else:  # clear sampling knobs a checkpoint may ship, so greedy runs without warnings
            gc.temperature, gc.top_p, gc.top_k = None, None, None
        return gc

    def _stop_ids(self, gc: Any) -> set[int]:
        ids: set[int] = set()
        for value in (gc.eos_token_id, self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(v for v in value if isinstance(v, int))
        return ids

    def _generate_texts(self, prompts: list[str], seeds: list[Optional[int]]) -> list[tuple[str, dict, str]]:
        """(text, usage, finish_reason) per prompt, in order; one model.generate call."""
        torch, tok = self._torch, self.tokenizer
        old_side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tok.padding_side = old_side
        device = getattr(self.model, "device", None)
        if device is not None:
            enc = enc.to(device)
        gc = self._generation_config(seeds)
        with torch.inference_mode():
            out = self.model.generate(**enc, generation_config=gc, **self.config.generate_kwargs)
        new_tokens = out[:, enc["input_ids"].shape[1] :].tolist()
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        stop = self._stop_ids(gc)
        results = []
        for row, n_prompt in zip(new_tokens, prompt_lens):
            cut = next((i for i, t in enumerate(row) if t in stop), None)
            finish = "stop" if cut is not None else "length"
            kept = row if cut is None else row[:cut]
            text = tok.decode(kept, skip_special_tokens=self.config.skip_special_tokens)
            usage = {"completion_tokens": len(kept) + (cut is not None), "prompt_tokens": int(n_prompt)}
            results.append((text, usage, finish))
        return results

    def _to_message(self, request: UserTurnRequest, prompt: str, text: str, usage: dict, finish: str) -> UserMessage:
        body, thought = split_reasoning(text)  # a call written inside a thought is not made
        body = body or ""
        parsed = parse_tool_calls(
            body, self.config.parser, self.tokenizer, prefix=prompt, tools=request.tools, requestor="user"
        )
        content, calls = parsed.content, parsed.tool_calls
        if parsed.error is not None:
            if self.config.on_parse_error == "error":
                raise UserSimulatorError(f"local user model produced unreadable tool-call markup: {parsed.error}")
            content, calls = (body.strip() or None), None
        if (content is None or not content.strip()) and not calls:
            raise UserSimulatorError(f"local user model produced an empty response (finish_reason={finish})")
        raw = {"model": self._model_name(), "text": text, "finish_reason": finish}
        reasoning = join_reasoning(thought, parsed.reasoning)
        if reasoning is not None:
            raw["reasoning_content"] = reasoning
        return UserMessage(content=content, tool_calls=calls, cost=0.0, usage=usage, raw_data=raw)

    def generate_batch(self, requests: Sequence[UserTurnRequest]) -> list[Union[UserMessage, Exception]]:
        """One message (or exception) per request; prompts of similar length are generated together."""
        out: list[Union[UserMessage, Exception, None]] = [None] * len(requests)
        prompts: dict[int, str] = {}
        for i, req in enumerate(requests):
            try:
                prompts[i] = self.build_prompt(req)
            except Exception as exc:  # noqa: BLE001 - e.g. a template that rejects the conversation
                out[i] = UserSimulatorError(f"could not render the chat template: {type(exc).__name__}: {exc}")
        order = sorted(prompts, key=lambda i: len(prompts[i]), reverse=True)  # less padding per batch
        bs = self.config.batch_size
        with self._lock:
            for start in range(0, len(order), bs):
                chunk = order[start : start + bs]
                try:
                    texts = self._generate_texts([prompts[i] for i in chunk], [requests[i].seed for i in chunk])
                except Exception as exc:  # noqa: BLE001 - one failed batch fails its requests, not the caller
                    for i in chunk:
                        out[i] = UserSimulatorError(f"local generation failed: {type(exc).__name__}: {exc}")
                    continue
                for i, (text, usage, finish) in zip(chunk, texts):
                    try:
                        out[i] = self._to_message(requests[i], prompts[i], text, usage, finish)
                    except Exception as exc:  # noqa: BLE001 - returned, not raised: one bad reply must not sink the batch
                        out[i] = exc
        return cast("list[Union[UserMessage, Exception]]", out)  # every slot is filled above

    def generate(self, request: UserTurnRequest) -> UserMessage:
        result = self.generate_batch([request])[0]
        if isinstance(result, Exception):
            raise result
        return result

    async def agenerate(self, request: UserTurnRequest) -> UserMessage:
        """Concurrent callers on one loop are served by shared ``generate_batch`` calls in a worker thread."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.setdefault(loop, _LoopBatcher())
        fut: asyncio.Future = loop.create_future()
        batcher.pending.append((request, fut))
        if not batcher.running:
            batcher.running = True
            loop.create_task(self._drain(batcher, loop))
        return await fut

    async def _drain(self, batcher: _LoopBatcher, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.sleep(0)  # let callers scheduled in the same tick join the first batch
            while batcher.pending:
                batch, batcher.pending = batcher.pending, []
                try:
                    results = await asyncio.to_thread(self.generate_batch, [r for r, _ in batch])
                except Exception as exc:  # noqa: BLE001 - every waiting request gets the batch's failure
                    results = [exc] * len(batch)
                for (_, fut), res in zip(batch, results):
                    if fut.done():
                        continue
                    if isinstance(res, BaseException):
                        fut.set_exception(res)
                    else:
                        fut.set_result(res)
        finally:  # normally nothing is left; on cancellation, fail the stragglers instead of hanging them
            leftover, batcher.pending = batcher.pending, []
            for _, fut in leftover:
                if not fut.done():
                    fut.set_exception(UserSimulatorError("the local user model's batch worker stopped"))
            batcher.running = False
            self._batchers.pop(loop, None)

    # ------------------------------------------------------------------------------ reporting

    def _model_name(self) -> str:
        if self.config.model_name_or_path:
            return self.config.model_name_or_path
        return getattr(getattr(self.model, "config", None), "_name_or_path", "") or type(self.model).__name__

    def info(self) -> dict[str, Any]:
        cfg = self.config
        args: dict[str, Any] = {"do_sample": cfg.do_sample, "max_new_tokens": cfg.max_new_tokens}
        if cfg.do_sample:
            args.update(temperature=cfg.temperature, top_p=cfg.top_p)
            if cfg.top_k is not None:
                args["top_k"] = cfg.top_k
        return {"implementation": self.implementation, "llm": self._model_name(), "llm_args": args}
