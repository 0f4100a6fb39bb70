"""Token usage and cost of a rollout, in tau2's fields.

Prices: a server that reports ``usage.cost`` wins; else the per-token prices the user configured; else
litellm's ``model_cost`` table (what ``tau2 run`` prices with) when litellm is installed and knows the model;
else 0.0 -- the token counts are recorded either way, so a run can be priced later.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Optional

__all__ = ["model_price", "sum_usage", "episode_usage"]


@functools.lru_cache(maxsize=256)
def model_price(model: str) -> Optional[tuple[float, float]]:
    """(USD per prompt token, USD per completion token) from litellm's table, or None (no litellm / unknown)."""
    try:
        import litellm  # optional: only its price table is used
    except ImportError:
        return None
    table = getattr(litellm, "model_cost", None) or {}
    for name in (model, model.split("/", 1)[-1]):
        entry = table.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None


def sum_usage(usages: Iterable[Optional[dict]]) -> Optional[dict[str, int]]:
    """Summed ``prompt_tokens``/``completion_tokens``; None when no message had usage."""
    total = {"prompt_tokens": 0, "completion_tokens": 0}
    seen = False
    for u in usages:
        if not isinstance(u, dict):
            continue
        seen = True
        for k in total:
            total[k] += int(u.get(k) or 0)
    return total if seen else None


def episode_usage(messages: Iterable[dict[str, Any]]) -> dict[str, Optional[dict[str, int]]]:
    """``agent_usage`` and ``user_usage`` of one SimulationRun's messages (dict form)."""
    msgs = list(messages)
    return {"agent_usage": sum_usage(m.get("usage") for m in msgs if m.get("role") == "assistant"),
            "user_usage": sum_usage(m.get("usage") for m in msgs if m.get("role") == "user")}
