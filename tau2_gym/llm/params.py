"""Which sampling arguments ``tau2 run`` actually sends, per model family: litellm's rules, made explicit.

Upstream tau2 calls models through litellm with ``litellm.drop_params = True``: an argument the model's
family does not take is silently left out of the request. Pointed at an OpenAI-compatible server
(``openai/<model>`` or a bare name), litellm decides by the *model name* alone -- the server is never asked.
The facts below are litellm's (the version upstream v1.0.1 pins; ``OpenAIGPTConfig``, ``OpenAIOSeriesConfig``,
``OpenAIGPT5Config``), reimplemented so that ``tau2-gym rollout`` sends what ``tau2 run`` sends:

- **Reasoning families** are OpenAI's o-series (``o1``, ``o1-pro``, ``o3``, ``o3-mini``, ``o3-pro``,
  ``o3-deep-research``, ``o4-mini``, ``o4-mini-deep-research``, each optionally with a ``-YYYY-MM-DD`` date)
  and GPT-5 (a name containing ``gpt-5`` but not ``gpt-5-chat``). Only they take ``reasoning_effort``; for
  every other name -- ``gpt-4.1``, ``gpt-4o``, any self-hosted model such as ``Qwen/Qwen3-8B`` -- it is
  dropped (so is ``verbosity``, GPT-5's).
- o-series: ``temperature`` is sent only when it is 1; ``top_p``, ``logprobs``, ``top_logprobs``,
  ``presence_penalty``, ``frequency_penalty`` are dropped; ``max_tokens`` becomes ``max_completion_tokens``.
- GPT-5: ``presence_penalty``, ``frequency_penalty``, ``stop``, ``logit_bias`` are dropped; ``max_tokens``
  becomes ``max_completion_tokens``. ``gpt-5.1`` and newer (``gpt-5.N``) accept ``temperature``, ``top_p``,
  ``logprobs``, ``top_logprobs`` while ``reasoning_effort`` is unset or ``"none"`` and drop them otherwise (the
  sampling ones) or keep only ``temperature=1``; ``gpt-5``/``-mini``/``-nano`` always drop ``top_p``/``logprobs``
  /``top_logprobs`` and keep ``temperature`` only at 1.

Arguments outside these rules pass through unchanged (litellm's generic list also drops unknown ones such as
``top_k``; we keep them: a vLLM user asked for them on purpose -- put them in ``extra_body`` to be explicit).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["model_family", "tau2_run_args"]

_O_SERIES = re.compile(r"^o(1|1-pro|3|3-mini|3-pro|3-deep-research|4-mini|4-mini-deep-research)(-\d{4}-\d{2}-\d{2})?$")
_GPT5_POINT = re.compile(r"^gpt-5\.\d")


def model_family(model: str) -> str:
    """``"o-series"``, ``"gpt-5"`` (``gpt-5``/``-mini``/``-nano``...), ``"gpt-5.x"`` (5.1 and newer) or ``"chat"``."""
    name = model.split("/")[-1]
    if _O_SERIES.match(name):
        return "o-series"
    if "gpt-5" in name and "gpt-5-chat" not in name:
        return "gpt-5.x" if _GPT5_POINT.match(name) else "gpt-5"
    return "chat"


def tau2_run_args(model: str, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the arguments tau2 run's litellm sends for ``model``, the ones it drops), from tau2-style LLM args."""
    family = model_family(model)
    kept = dict(args)
    dropped: dict[str, Any] = {}

    def drop(*names: str) -> None:
        for n in names:
            if n in kept:
                dropped[n] = kept.pop(n)

    if family == "chat":
        drop("reasoning_effort", "verbosity")
        return kept, dropped
    if family == "o-series":
        drop("top_p", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty", "verbosity")
        if kept.get("temperature") not in (None, 1):
            drop("temperature")
    else:
        drop("presence_penalty", "frequency_penalty", "stop", "logit_bias")
        effort = kept.get("reasoning_effort")
        if isinstance(effort, dict):
            effort = effort.get("effort")
        flexible = family == "gpt-5.x" and effort in (None, "none")
        if not flexible:
            drop("top_p", "logprobs", "top_logprobs")
            if kept.get("temperature") not in (None, 1):
                drop("temperature")
    if "max_tokens" in kept:
        kept["max_completion_tokens"] = kept.pop("max_tokens")
    return kept, dropped
