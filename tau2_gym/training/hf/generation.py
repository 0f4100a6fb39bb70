"""Generation backends for the policy runner: token ids in, token ids + log-probabilities out.

A backend maps a batch of contexts (token-id lists, one per active episode) to one :class:`Generation`
each. Working on token ids keeps trajectories exact: what the policy is trained on is what it sampled
from. :class:`HFGenerator` runs ``model.generate`` on left-padded batches; the TRL integration adds a
backend that goes through TRL's vLLM client (``tau2_gym.training.trl``).

Log-probabilities are those of the sampling distribution *after temperature* (``log_softmax(logits / T)``,
greedy: ``T = 1``), before top-k/top-p truncation -- the same quantity TRL's GRPO trainer computes for its
own per-token log-probabilities.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ContextManager, Iterable, Optional, Protocol, Sequence, cast

from tau2_gym.training.hf.chat import stop_token_ids

__all__ = ["Generation", "Generator", "HFGenerator"]


@dataclass
class Generation:
    """One generated turn: the sampled ids (ending with the stop token when ``finish_reason == "stop"``)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (ended with a stop token) or "length" (hit its token limit)


class Generator(Protocol):
    """What :class:`~tau2_gym.training.hf.policy.PolicyRunner` needs from a backend."""

    stop_ids: frozenset[int]

    def generate(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> list[Generation]:
        """One generation per context; row ``i`` stops at a stop id or after ``max_new_tokens[i]`` tokens.

        The contexts are the runner's own lists (an episode's sequence, appended to after the call): read them,
        copy one before changing it."""
        ...

    def keep_going(self, active: bool) -> bool:
        """Whether another round is needed. Collective backends (one call per process per round) agree
        across processes here; local backends return ``active``."""
        ...

    def session(self) -> ContextManager[Any]:
        """Context held around a whole rollout (e.g. unwrapping a distributed model once)."""
        ...


def finish_row(row: Sequence[int], logprobs: Sequence[float], stop_ids: frozenset[int], limit: int) -> Generation:
    """Cut a raw generated row at its first stop id (kept) or at ``limit`` tokens."""
    n = min(len(row), max(limit, 0))
    for i in range(n):
        if row[i] in stop_ids:
            return Generation(list(row[: i + 1]), [float(x) for x in logprobs[: i + 1]], "stop")
    return Generation(list(row[:n]), [float(x) for x in logprobs[:n]], "length")


class _LogprobRecorder:
    """Logits processor that records, per step, ``log_softmax(scores / T)`` of the token sampled next.

    It keeps one (batch, vocab) tensor at a time instead of ``output_scores``' whole (steps, batch, vocab)
    stack. Custom processors run after transformers' own processors and before its sampling warpers
    (temperature, top-k, top-p), so the scores it sees are the raw (processed) logits.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = float(temperature) if temperature and temperature > 0 else 1.0
        self._prev: Any = None
        self._out: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._prev is not None:
            self._out.append(self._prev.gather(1, input_ids[:, -1:]).squeeze(1))
        self._prev = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def result(self, new_tokens: Any) -> Any:
        """(batch, steps) log-probabilities of ``new_tokens`` (the generated part of the output)."""
        import torch

        steps = new_tokens.shape[1]
        if self._prev is not None and len(self._out) < steps:
            self._out.append(self._prev.gather(1, new_tokens[:, len(self._out) : len(self._out) + 1]).squeeze(1))
        if not self._out:
            return torch.zeros(new_tokens.shape, dtype=torch.float32)
        return torch.stack(self._out[:steps], dim=1)


class HFGenerator:
    """Batched ``model.generate`` over token-id contexts (left-padded), with per-token log-probabilities.

    Args:
        model, tokenizer: a causal LM and its tokenizer (needs a pad token; EOS is used when it has none).
        do_sample, temperature, top_p, top_k, min_p, repetition_penalty: sampling settings (``do_sample``
            False: greedy).
        batch_size: contexts per ``generate`` call (None: all at once); contexts are sorted by length first.
        stop_ids: ids that end a turn (default: tokenizer EOS + the model's generation-config EOS ids).
        generation_config: a base ``GenerationConfig`` (default: the model's), copied per call.
        logits_processor: extra logits processors (a list), run before the log-probability recorder.
        generate_kwargs: extra ``model.generate`` arguments.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        do_sample: bool = True,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: Optional[int] = None,
        min_p: Optional[float] = None,
        repetition_penalty: float = 1.0,
        batch_size: Optional[int] = None,
        stop_ids: Optional[Iterable[int]] = None,
        generation_config: Any = None,
        logits_processor: Optional[Sequence[Any]] = None,
        generate_kwargs: Optional[dict[str, Any]] = None,
    ) -> None:

        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 or None; got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.do_sample = do_sample
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.repetition_penalty = repetition_penalty
        self.batch_size = batch_size
        self.stop_ids = frozenset(stop_ids) if stop_ids is not None else stop_token_ids(tokenizer, model)
        self.generation_config = generation_config
        self.logits_processor = list(logits_processor or [])
        self.generate_kwargs = dict(generate_kwargs or {})
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise ValueError("the tokenizer has neither a pad nor an EOS token; set tokenizer.pad_token")
        self.pad_id = int(pad)

    def keep_going(self, active: bool) -> bool:
        return active

    def session(self) -> ContextManager[Any]:
        return nullcontext()

    def _config(self, max_new_tokens: int) -> Any:
        base = self.generation_config if self.generation_config is not None else self.model.generation_config
        gc = copy.deepcopy(base)
        gc.max_new_tokens = max_new_tokens
        gc.min_new_tokens = None
        gc.max_length = None
        gc.do_sample = self.do_sample
        gc.pad_token_id = self.pad_id
        gc.eos_token_id = sorted(self.stop_ids)
        gc.num_return_sequences = 1
        gc.return_dict_in_generate = False
        gc.output_scores = False
        gc.output_logits = False
        if self.do_sample:
            gc.temperature, gc.top_p, gc.top_k = self.temperature, self.top_p, self.top_k
            gc.min_p = self.min_p
        else:  # clear sampling knobs a checkpoint may ship, so greedy runs without warnings
            gc.temperature, gc.top_p, gc.top_k, gc.min_p = None, None, None, None
        gc.repetition_penalty = self.repetition_penalty
        return gc

    def generate(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> list[Generation]:
        if len(contexts) != len(max_new_tokens):
            raise ValueError(f"{len(contexts)} contexts but {len(max_new_tokens)} token limits")
        out: list[Optional[Generation]] = [None] * len(contexts)
        todo = [i for i in range(len(contexts)) if max_new_tokens[i] > 0]
        for i in range(len(contexts)):
            if max_new_tokens[i] <= 0:
                out[i] = Generation([], [], "length")
        order = sorted(todo, key=lambda i: len(contexts[i]), reverse=True)
        bs = self.batch_size or max(len(order), 1)
        for start in range(0, len(order), bs):
            chunk = order[start : start + bs]
            rows = self._generate_batch([contexts[i] for i in chunk], [max_new_tokens[i] for i in chunk])
            for i, gen in zip(chunk, rows):
                out[i] = gen
        return cast("list[Generation]", out)  # every slot is filled above

    def _generate_batch(self, contexts: list[Sequence[int]], limits: list[int]) -> list[Generation]:
        import torch
        from transformers import LogitsProcessorList

        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for r, ctx in enumerate(contexts):
            if ctx:
                ids[r, width - len(ctx) :] = torch.tensor(list(ctx), dtype=torch.long)
                mask[r, width - len(ctx) :] = 1
        device = getattr(self.model, "device", None)
        if device is not None:
            ids, mask = ids.to(device), mask.to(device)
        recorder = _LogprobRecorder(self.temperature if self.do_sample else 1.0)
        processors = LogitsProcessorList([*self.logits_processor, recorder])
        with torch.inference_mode():
            seqs = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                generation_config=self._config(max(limits)),
                logits_processor=processors,
                **self.generate_kwargs,
            )
        new = seqs[:, width:]
        logps = recorder.result(new).cpu().tolist()
        new_rows = new.cpu().tolist()
        return [finish_row(row, lp, self.stop_ids, lim) for row, lp, lim in zip(new_rows, logps, limits)]
