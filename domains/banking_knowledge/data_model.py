"""The bank's transactional DB (what is hashed) and the knowledge base (what is searched).

Every table is ``{"data": {record_id: record}, "notes": str}`` with free-form records, as upstream's
``TransactionalDB``; the field order below is the dump order. Tools work on the plain dump
(``db.<table>["data"]``), never on these models: pydantic only validates the files on entry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from pydantic import BaseModel, ConfigDict, Field

#: table names in upstream's field order
TABLES = (
    "users",
    "accounts",
    "debit_cards",
    "referrals",
    "credit_card_applications",
    "user_discoverable_tools",
    "user_discoverable_tool_calls",
    "verification_history",
    "credit_card_transaction_history",
    "cash_back_disputes",
    "bank_account_transaction_history",
    "credit_card_accounts",
    "agent_discoverable_tools",
    "task_config",
    "human_transfer_requests",
    "transaction_disputes",
    "credit_card_orders",
    "debit_card_orders",
    "credit_card_closure_reasons",
    "credit_card_account_flags",
    "credit_limit_increase_requests",
    "payment_history",
    "debit_card_disputes",
)


class DatabaseTable(BaseModel):
    """Records keyed by id, plus a free-text note about the table."""

    data: Dict[str, Dict[str, Any]] = Field(default_factory=dict)
    notes: str = ""


class TransactionalDB(BaseModel):
    """All mutable bank state; unknown top-level keys are rejected (upstream's DB forbids extras)."""

    model_config = ConfigDict(extra="forbid")

    users: DatabaseTable = Field(default_factory=DatabaseTable)
    accounts: DatabaseTable = Field(default_factory=DatabaseTable)
    debit_cards: DatabaseTable = Field(default_factory=DatabaseTable)
    referrals: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_card_applications: DatabaseTable = Field(default_factory=DatabaseTable)
    user_discoverable_tools: DatabaseTable = Field(default_factory=DatabaseTable)
    user_discoverable_tool_calls: DatabaseTable = Field(default_factory=DatabaseTable)
    verification_history: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_card_transaction_history: DatabaseTable = Field(default_factory=DatabaseTable)
    cash_back_disputes: DatabaseTable = Field(default_factory=DatabaseTable)
    bank_account_transaction_history: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_card_accounts: DatabaseTable = Field(default_factory=DatabaseTable)
    agent_discoverable_tools: DatabaseTable = Field(default_factory=DatabaseTable)
    task_config: DatabaseTable = Field(default_factory=DatabaseTable)
    human_transfer_requests: DatabaseTable = Field(default_factory=DatabaseTable)
    transaction_disputes: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_card_orders: DatabaseTable = Field(default_factory=DatabaseTable)
    debit_card_orders: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_card_closure_reasons: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_card_account_flags: DatabaseTable = Field(default_factory=DatabaseTable)
    credit_limit_increase_requests: DatabaseTable = Field(default_factory=DatabaseTable)
    payment_history: DatabaseTable = Field(default_factory=DatabaseTable)
    debit_card_disputes: DatabaseTable = Field(default_factory=DatabaseTable)


assert tuple(TransactionalDB.model_fields) == TABLES


class Document(BaseModel):
    """One knowledge-base article."""

    id: str
    title: str
    content: str


def load_documents(folder: Path) -> dict[str, Document]:
    """The knowledge base, keyed by id, in the folder's listing order (``Path.glob``, as upstream reads it).

    That order decides BM25 ties, grep ties and the ``full_kb`` prompt; upstream inherits it from the file
    system the same way, so on one machine both list the same folder identically.
    """
    docs: dict[str, Document] = {}
    for path in folder.glob("*.json"):
        with open(path, encoding="utf-8") as fh:
            doc = Document(**json.load(fh))
        docs[doc.id] = doc
    return docs
