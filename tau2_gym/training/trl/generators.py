"""Generation backends of the rollout function: the trainer's own model, or TRL's vLLM client."""

from __future__ import annotations

import threading
from contextlib import ExitStack, contextmanager
from typing import Any, Generator, Optional, Sequence

from tau2_gym.training.hf.generation import Generation, HFGenerator, finish_row


def _tokenizer_of(trainer: Any) -> Any:
    tok = getattr(trainer, "_tokenizer", None) or trainer.processing_class
    return getattr(tok, "tokenizer", tok)


class TRLLocalGenerator:
    """Generates with the trainer's own model (as TRL does without vLLM): unwrapped once per rollout,
    sampling with the trainer's temperature / top-p / top-k / min-p / repetition penalty."""

    def __init__(
        self, trainer: Any, *, batch_size: Optional[int] = None, logits_processor: Optional[Sequence[Any]] = None
    ) -> None:
        self.trainer = trainer
        self.tokenizer = _tokenizer_of(trainer)
        self.stop_ids = frozenset(int(i) for i in trainer.eos_token_ids)
        self.batch_size = batch_size
        self.logits_processor = list(logits_processor or [])
        self._hf: Optional[HFGenerator] = None

    def keep_going(self, active: bool) -> bool:
        return active

    @contextmanager
    def session(self) -> Generator[None, None, None]:
        import torch
        from trl.models import unwrap_model_for_generation

        t = self.trainer
        args = t.args
        with ExitStack() as stack:
            model = stack.enter_context(
                unwrap_model_for_generation(
                    t.model_wrapped,
                    t.accelerator,
                    gather_deepspeed3_params=args.ds3_gather_for_generation,
                    generation_kwargs=getattr(t, "generation_kwargs", None),
                    gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
                )
            )
            stack.enter_context(torch.no_grad())
            dist = getattr(t, "_dist", None)
            if dist is not None:
                stack.enter_context(dist.summon_full_params(t.model_wrapped, recurse=False))
            self._hf = HFGenerator(
                model,
                self.tokenizer,
                do_sample=True,
                temperature=t.temperature,
                top_p=t.top_p,
                top_k=t.top_k,
                min_p=t.min_p,
                repetition_penalty=t.repetition_penalty,
                batch_size=self.batch_size,
                stop_ids=self.stop_ids,
                generation_config=getattr(t, "generation_config", None),
                logits_processor=self.logits_processor,
            )
            try:
                yield
            finally:
                self._hf = None

    def generate(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> list[Generation]:
        if self._hf is None:
            raise RuntimeError("TRLLocalGenerator.generate must run inside session()")
        return self._hf.generate(contexts, max_new_tokens)


class TRLVLLMGenerator:
    """Generates through the trainer's vLLM backend (``trainer.vllm_generation``: server or colocate mode).

    Every call is collective: all processes call it once per round, each batch padded to the largest
    one across processes (vLLM's backend slices results by equal per-process shares), and rounds go on
    while any process has an active episode (:meth:`keep_going`).
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.backend = trainer.vllm_generation
        self.accelerator = trainer.accelerator
        self.stop_ids = frozenset(int(i) for i in trainer.eos_token_ids)
        self._filler = [min(self.stop_ids)]
        self._lock = threading.Lock()

    def session(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()

    def _global_max(self, value: int) -> int:
        if getattr(self.accelerator, "num_processes", 1) <= 1:
            return value
        import torch

        t = torch.tensor([value], device=self.accelerator.device)
        return int(self.accelerator.gather(t).max().item())

    def keep_going(self, active: bool) -> bool:
        return bool(self._global_max(int(active)))

    def generate(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> list[Generation]:
        n = len(contexts)
        width = self._global_max(n)
        if width == 0:
            return []
        limit = self._global_max(max(max_new_tokens, default=1))
        # the runner's own lists, passed as they are (TRL and vLLM only read a prompt); other sequences copied
        prompts = [c if type(c) is list else list(c) for c in contexts] + [list(self._filler)] * (width - n)
        backend = self.backend
        with self._lock:
            saved = backend.max_completion_length
            backend.max_completion_length = max(limit, 1)
            try:
                _, completions, logprobs, _ = backend.generate(prompts=prompts, images=None, num_generations=1)
            finally:
                backend.max_completion_length = saved
        out = []
        for i in range(n):
            row = completions[i]
            if logprobs:  # top-1 entry = the sampled token; vLLM gives None where it has no value
                lps = [lp[0] if lp and lp[0] is not None else float("nan") for lp in logprobs[i]]
            else:
                lps = [0.0] * len(row)
            out.append(finish_row(row, lps, self.stop_ids, max_new_tokens[i]))
        return out
