"""Field-level difference of two databases: what the agent's trajectory changed that the gold one did not.

Upstream only says that two hashes differ. When the DB component fails, the evaluator attaches this diff to
``reward_info["info"]["db_diff"]`` so a user can see *what* differs (``reservations.ABC123.flights[1].date``,
gold value, agent value). Both states are copy-on-write overlays on one base, so only records either side
changed are looked at: the cost is proportional to the writes, not to the database.

An entry is ``{"db": "agent"|"user", "path": str, "kind": "changed"|"only_gold"|"only_predicted",
"gold": value, "predicted": value}``; a side that lacks the path has ``None``. Values are plain JSON (dates
as tau2's hash text renders them), and equality is the hash's: ``1`` and ``1.0`` differ, as in the hash.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from tau2_gym.core.db import DBState, Table, dumps_sorted, same_json

# Enough to read a failed episode; a runaway trajectory (thousands of writes) must not bloat results files.
MAX_ENTRIES = 200


def _json(value: Any) -> Any:
    return json.loads(dumps_sorted(value))


def _index(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


class _Diff:
    def __init__(self, db: str, limit: int) -> None:
        self.db, self.limit = db, limit
        self.entries: list[dict[str, Any]] = []
        self.left_out = 0

    def add(self, path: str, kind: str, gold: Any, predicted: Any) -> None:
        if len(self.entries) >= self.limit:
            self.left_out += 1
            return
        self.entries.append(
            {
                "db": self.db,
                "path": path,
                "kind": kind,
                "gold": None if kind == "only_predicted" else _json(gold),
                "predicted": None if kind == "only_gold" else _json(predicted),
            }
        )

    def values(self, path: str, gold: Any, predicted: Any) -> None:
        """Recurse into containers of the same shape; report leaves (or mismatched shapes) whole."""
        if gold is predicted or same_json(gold, predicted):
            return
        if type(gold) is dict and type(predicted) is dict:
            for k in sorted(gold.keys() | predicted.keys(), key=str):
                if k not in predicted:
                    self.add(_index(path, k), "only_gold", gold[k], None)
                elif k not in gold:
                    self.add(_index(path, k), "only_predicted", None, predicted[k])
                else:
                    self.values(_index(path, k), gold[k], predicted[k])
            return
        if isinstance(gold, (list, tuple)) and isinstance(predicted, (list, tuple)):
            for i in range(max(len(gold), len(predicted))):
                if i >= len(predicted):
                    self.add(_index(path, i), "only_gold", gold[i], None)
                elif i >= len(gold):
                    self.add(_index(path, i), "only_predicted", None, predicted[i])
                else:
                    self.values(_index(path, i), gold[i], predicted[i])
            return
        self.add(path, "changed", gold, predicted)


def _plain_dump(db: Any) -> Any:
    dump = getattr(db, "dump", None)
    if callable(dump):
        return dump()
    model_dump = getattr(db, "model_dump", None)
    if callable(model_dump):
        return model_dump()
    return db


def _diff_states(out: _Diff, gold: DBState, predicted: DBState) -> None:
    for name in gold.field_names():
        g, p = gold.get_field(name), predicted.get_field(name)
        if isinstance(g, Table) and isinstance(p, Table):
            keys = set(g.changed_keys())
            keys.update(p.changed_keys())
            for k in sorted(keys, key=str):
                in_g, in_p = k in g, k in p
                if in_g and in_p:
                    out.values(_index(name, k), g[k], p[k])
                elif in_g:
                    out.add(_index(name, k), "only_gold", g[k], None)
                elif in_p:
                    out.add(_index(name, k), "only_predicted", None, p[k])
        else:
            out.values(name, g, p)


def db_diff(gold: Any, predicted: Any, db: str = "agent", limit: int = MAX_ENTRIES) -> tuple[list[dict], int]:
    """The differing fields of two DBs (``None`` = no DB) and how many entries ``limit`` left out."""
    out = _Diff(db, limit)
    if gold is None or predicted is None:
        if gold is not predicted:
            out.add(
                "", "only_gold" if predicted is None else "only_predicted", _plain_dump(gold), _plain_dump(predicted)
            )
    elif type(gold) is DBState and type(predicted) is DBState and gold.base is predicted.base:
        _diff_states(out, gold, predicted)
    else:  # different bases or a domain's own DB type: compare the full dumps (only on a failed check)
        out.values("", _plain_dump(gold), _plain_dump(predicted))
    return out.entries, out.left_out


def environment_diff(gold_env: Any, predicted_env: Any, limit: int = MAX_ENTRIES) -> dict[str, Any]:
    """``{"db_diff": [...]}`` (plus ``db_diff_truncated``) for the agent and user DBs of two environments."""
    entries: list[dict] = []
    left_out = 0
    for side, attr in (("agent", "tools"), ("user", "user_tools")):
        g_kit, p_kit = getattr(gold_env, attr, None), getattr(predicted_env, attr, None)
        g_db = None if g_kit is None else g_kit.db
        p_db = None if p_kit is None else p_kit.db
        part, more = db_diff(g_db, p_db, side, max(0, limit - len(entries)))
        entries.extend(part)
        left_out += more
    result: dict[str, Any] = {"db_diff": entries}
    if left_out:
        result["db_diff_truncated"] = left_out
    return result


def format_diff(entries: list[dict], left_out: Optional[int] = 0, width: int = 160) -> list[str]:
    """One line per entry, for terminals: ``agent reservations.X.flights[1].date: gold '..' -> agent '..'``."""

    def short(v: Any) -> str:
        text = json.dumps(v, ensure_ascii=False, sort_keys=True)
        return text if len(text) <= width // 2 else text[: width // 2 - 3] + "..."

    lines = []
    for e in entries:
        path = e["path"] or "(whole DB)"
        if e["kind"] == "only_gold":
            lines.append(f"{e['db']} {path}: only in gold {short(e['gold'])}")
        elif e["kind"] == "only_predicted":
            lines.append(f"{e['db']} {path}: only in the agent's {short(e['predicted'])}")
        else:
            lines.append(f"{e['db']} {path}: gold {short(e['gold'])} -> agent's {short(e['predicted'])}")
    if left_out:
        lines.append(f"... and {left_out} more differences")
    return lines


__all__ = ["db_diff", "environment_diff", "format_diff", "MAX_ENTRIES"]
