"""Constraint queries over the bank DB and the record listing format the tools print.

A constraint is ``{"field": value}`` or ``{"field__op": value}`` (ops: eq ne gt gte lt lte contains
startswith endswith in nin); a comparison that raises counts as no match. ``query_database_tool`` is the
text every lookup tool returns, byte for byte upstream's (``Found N record(s) in 'table':`` ...).
"""

from __future__ import annotations

import json
import operator
from typing import Any, Callable, Optional

#: the tables a query may name, in the order upstream lists them in its "not found" error
QUERYABLE = (
    "users",
    "accounts",
    "referrals",
    "credit_card_applications",
    "user_discoverable_tools",
    "user_discoverable_tool_calls",
    "agent_discoverable_tools",
    "task_config",
    "verification_history",
    "credit_card_transaction_history",
    "cash_back_disputes",
    "bank_account_transaction_history",
    "credit_card_accounts",
    "human_transfer_requests",
    "transaction_disputes",
    "credit_card_orders",
    "credit_card_closure_reasons",
    "credit_card_account_flags",
    "debit_cards",
    "debit_card_orders",
    "debit_card_disputes",
    "credit_limit_increase_requests",
    "payment_history",
)
_QUERYABLE = frozenset(QUERYABLE)

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
    "contains": lambda a, b: b in a if a is not None else False,
    "startswith": lambda a, b: str(a).startswith(str(b)) if a is not None else False,
    "endswith": lambda a, b: str(a).endswith(str(b)) if a is not None else False,
    "in": lambda a, b: a in b,
    "nin": lambda a, b: a not in b,
}


def _matches(record: dict, constraints: dict) -> bool:
    for key, expected in constraints.items():
        if "__" in key:
            name, op = key.rsplit("__", 1)
        else:
            name, op = key, "eq"
        compare = _OPS.get(op, operator.eq)
        try:
            if not compare(record.get(name), expected):
                return False
        except (TypeError, ValueError):
            return False
    return True


def records(db: Any, table: str) -> Optional[dict]:
    """The ``data`` dict of a queryable table, or None."""
    if table not in _QUERYABLE:
        return None
    return getattr(db, table)["data"]


def query_db(db_name: str, db: Any, return_ids: bool = False, limit: Optional[int] = None, **constraints: Any) -> list:
    """Matching records (``(id, record)`` pairs with ``return_ids``) in table order.

    The signature is upstream's: constraint keys named like its parameters collide the same way.
    """
    data = records(db, db_name)
    if data is None:
        return []
    out: list = []
    for rid, rec in data.items():
        if _matches(rec, constraints):
            out.append((rid, rec) if return_ids else rec)
            if limit is not None and len(out) >= limit:
                break
    return out


def add_to_db(db_name: str, record_id: str, record: dict, db: Any) -> bool:
    """Insert a record; False when the table is unknown or the id exists."""
    if db_name not in _QUERYABLE:
        return False
    data = getattr(db, db_name)["data"]
    if record_id in data:
        return False
    data[record_id] = record
    return True


def update_record(db_name: str, db: Any, record_id: str, updates: dict) -> tuple[bool, Optional[dict]]:
    data = records(db, db_name)
    if data is None or record_id not in data:
        return False, None
    rec = data[record_id]
    for k, v in updates.items():
        rec[k] = v
    return True, rec


def format_records(table: str, found: list[tuple[str, dict]]) -> str:
    lines = [f"Found {len(found)} record(s) in '{table}':\n"]
    for i, (rid, rec) in enumerate(found, 1):
        lines.append(f"{i}. Record ID: {rid}")
        for k, v in rec.items():
            lines.append(f"   {k}: {v}")
        lines.append("")
    return "\n".join(lines)


def query_database_tool(database_name: str, constraints: str = "{}", db: Any = None) -> str:
    """The lookup tools' text: a record listing, ``No records found in '<table>'.`` or an ``Error: ...``."""
    if db is None:
        return "Error: TransactionalDB instance required"
    try:
        if database_name not in QUERYABLE:
            return f"Error: Database '{database_name}' not found. Available: {list(QUERYABLE)}"
        try:
            parsed = json.loads(constraints) if constraints else {}
        except json.JSONDecodeError as e:
            return f"Error: Invalid JSON: {e}"
        if not isinstance(parsed, dict):  # Python's message names the function by upstream's module
            return (
                f"Error querying database: tau2.domains.banking_knowledge.db_query.query_db() argument after ** "
                f"must be a mapping, not {type(parsed).__name__}"
            )
        found = query_db(database_name, db=db, return_ids=True, **parsed)
        if not found:
            return f"No records found in '{database_name}'."
        return format_records(database_name, found)
    except Exception as e:  # noqa: BLE001 - upstream reports any failure as text
        return f"Error querying database: {str(e)}"


def lookup(table: str, field: str, value: Any, db: Any) -> str:
    """``query_database_tool(table, '{"<field>": "<value>"}')`` -- the JSON is built by string formatting, as
    upstream builds it, so a value with quotes or backslashes fails (or matches) the same way."""
    return query_database_tool(table, f'{{"{field}": "{value}"}}', db=db)
