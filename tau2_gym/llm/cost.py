"""Token usage and cost of a rollout, in tau2's fields.

The price of one reply, first that applies (this is the one place the order is decided):

1. ``usage.cost`` reported by the server (OpenRouter, LiteLLM proxy, ...);
2. a price table file the user gave (``price_table`` / ``--price-table``), in litellm's ``model_cost`` shape
   ``{"model": {"input_cost_per_token": x, "output_cost_per_token": y}}``, looked up by the exact model name,
   then without a ``provider/`` prefix;
3. the per-token prices configured on the client (``input_cost_per_token`` / ``output_cost_per_token``);
4. litellm's ``model_cost`` table (what ``tau2 run`` prices with) when litellm is installed and knows the model;
5. 0.0 -- the token counts are recorded either way, so a run can be priced later.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Optional, Union

__all__ = [
    "model_price",
    "load_price_table",
    "table_price",
    "message_cost",
    "sum_usage",
    "episode_usage",
    "PriceTableError",
]

Prices = tuple[float, float]


class PriceTableError(ValueError):
    """A price table file that cannot be used (raised when it is given, before any request)."""


@functools.lru_cache(maxsize=256)
def model_price(model: str) -> Optional[Prices]:
    """(USD per prompt token, USD per completion token) from litellm's table, or None (no litellm / unknown)."""
    try:
        import litellm  # optional: only its price table is used
    except ImportError:
        return None
    return table_price(getattr(litellm, "model_cost", None) or {}, model)


def table_price(table: dict[str, Any], model: str) -> Optional[Prices]:
    """A model's prices in a ``model_cost``-shaped table: exact name, then without its ``provider/`` prefix."""
    for name in (model, model.split("/", 1)[-1]):
        entry = table.get(name)
        if isinstance(entry, tuple):  # a table read by load_price_table
            return entry
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None


def _price(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PriceTableError(f"{where} must be a non-negative number, got {value!r}")
    return float(value)


def _read_table(path: str) -> dict[str, Prices]:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceTableError(f"price table {str(p)!r} cannot be read: {exc.strerror or exc}") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise PriceTableError(
                f"price table {str(p)!r} is YAML, which needs pyyaml (pip install pyyaml); "
                "or give the same table as JSON"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PriceTableError(f"price table {str(p)!r} is not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PriceTableError(f"price table {str(p)!r} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict) or not data:
        raise PriceTableError(
            f"price table {str(p)!r} must be a non-empty object of model name -> "
            '{"input_cost_per_token": x, "output_cost_per_token": y}; '
            f"got {type(data).__name__}"
        )
    out: dict[str, Prices] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise PriceTableError(
                f"price table {str(p)!r}: entry {name!r} must be an object with "
                f"input_cost_per_token/output_cost_per_token, got {entry!r}"
            )
        missing = [k for k in ("input_cost_per_token", "output_cost_per_token") if k not in entry]
        if missing:
            raise PriceTableError(f"price table {str(p)!r}: entry {name!r} lacks {', '.join(missing)}")
        out[str(name)] = (
            _price(entry["input_cost_per_token"], f"price table {str(p)!r}: {name}.input_cost_per_token"),
            _price(entry["output_cost_per_token"], f"price table {str(p)!r}: {name}.output_cost_per_token"),
        )
    return out


@functools.lru_cache(maxsize=16)
def _cached_table(path: str, mtime_ns: int) -> dict[str, Prices]:  # noqa: ARG001 - the cache key: a changed file is read again
    return _read_table(path)


def load_price_table(path: Union[str, os.PathLike]) -> dict[str, Prices]:
    """The table in ``path`` (JSON; YAML when pyyaml is installed), validated; read once per file version.
    Raises :class:`PriceTableError` naming the file and what is wrong."""
    text = str(path)
    try:
        mtime = os.stat(os.path.expanduser(text)).st_mtime_ns
    except OSError as exc:
        raise PriceTableError(f"price table {text!r} cannot be read: {exc.strerror or exc}") from None
    return _cached_table(text, mtime)


def message_cost(
    raw_data: dict,
    usage: Optional[dict],
    model: str,
    price_table: Optional[str] = None,
    configured: Prices = (0.0, 0.0),
) -> float:
    """USD of one reply, by the order in this module's docstring."""
    reported = (raw_data.get("usage") or {}).get("cost") if isinstance(raw_data, dict) else None
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        return float(reported)
    if usage is None:
        return 0.0
    prices: Optional[Prices] = None
    if price_table is not None:
        prices = table_price(load_price_table(price_table), model)
    if prices is None and tuple(configured) != (0.0, 0.0):
        prices = (float(configured[0]), float(configured[1]))
    if prices is None:
        prices = model_price(model)
    if prices is None:
        return 0.0
    return (usage.get("prompt_tokens") or 0) * prices[0] + (usage.get("completion_tokens") or 0) * prices[1]


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
    return {
        "agent_usage": sum_usage(m.get("usage") for m in msgs if m.get("role") == "assistant"),
        "user_usage": sum_usage(m.get("usage") for m in msgs if m.get("role") == "user"),
    }
