"""Hugging Face policies on tau2 envs: batched generation and token-exact trajectories for RL.

    >>> from tau2_gym.training.hf import hf_runner
    >>> runner = hf_runner(model, tokenizer, max_new_tokens=512)
    >>> trajectories = runner.run([gym.make("tau2/airline-v0") for _ in range(8)],
    ...                           options=[{"task_id": t} for t in task_ids])

Needs ``torch`` and ``transformers`` (``pip install 'tau2-gym[hf]'``), imported on first use.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "PolicyRunner": "tau2_gym.training.hf.policy",
    "Trajectory": "tau2_gym.training.hf.policy",
    "TurnRecord": "tau2_gym.training.hf.policy",
    "hf_runner": "tau2_gym.training.hf.policy",
    "to_action": "tau2_gym.training.hf.policy",
    "Generation": "tau2_gym.training.hf.generation",
    "HFGenerator": "tau2_gym.training.hf.generation",
    "ChatRenderer": "tau2_gym.training.hf.chat",
    "TemplateError": "tau2_gym.training.hf.chat",
    "tiny_model_and_tokenizer": "tau2_gym.training.hf.tiny",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tau2_gym.training.hf' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
