"""The domain's frozen clock and its deterministic record ids (sha256 of a seed string, as upstream derives them).

Every scenario is set at 2025-11-14 03:40 EST; ids are the first bytes of a sha256 digest so that the same
call always creates the same record (and the same DB hash) -- the seed strings are upstream's formats.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from typing import Any, Optional

TODAY = date(2025, 11, 14)
NOW = datetime(2025, 11, 14, 3, 40, 0)


def today_str() -> str:
    """The scenario date as MM/DD/YYYY."""
    return TODAY.strftime("%m/%d/%Y")


def now() -> datetime:
    return NOW


def hex_id(seed: str, length: int = 16) -> str:
    """``length`` hex characters of sha256(seed)."""
    return hashlib.sha256(seed.encode()).digest()[: length // 2].hex()


def transaction_id(
    user_id: str, card_type: str, merchant: str, amount: float, category: str, when: Optional[str] = None
) -> str:
    parts = ["transaction", user_id, card_type, merchant, f"{amount:.2f}", category]
    if when:
        parts.append(when)
    return "txn_" + hex_id(":".join(parts), 12)


def referral_id(referrer_id: str, account_type: str, when: Optional[str] = None) -> str:
    parts = ["referral", referrer_id, account_type]
    if when:
        parts.append(when)
    return hex_id(":".join(parts), 16)


def application_id(card_type: str, name: str, income: float, subscription: bool = False) -> str:
    return hex_id(f"credit_card:{card_type}:{name}:{income}:{subscription}", 16)


def verification_id(user_id: str, time_verified: str) -> str:
    suffix = time_verified.replace(" ", "_").replace(":", "").replace("-", "")
    return f"{user_id}_{suffix}"


def user_tool_id(tool_name: str) -> str:
    return hex_id(f"user_discoverable_tool:{tool_name}", 16)


def user_tool_call_id(tool_name: str, arguments: dict[str, Any]) -> str:
    return hex_id(f"user_discoverable_tool_call:{tool_name}:{json.dumps(arguments, sort_keys=True)}", 16)


def dispute_id(user_id: str, txn_id: str) -> str:
    return "dsp_" + hex_id(f"dispute:{user_id}:{txn_id}", 12)


def referral_link_id(user_id: str, card_name: str) -> str:
    return hex_id(f"referral_link:{user_id}:{card_name}", 16)


def agent_tool_id(tool_name: str) -> str:
    return hex_id(f"agent_discoverable_tool:{tool_name}", 16)


def credit_card_order_id(account_id: str, user_id: str, reason: str) -> str:
    return "ccord_" + hex_id(f"credit_card_order:{account_id}:{user_id}:{reason}", 12)


def closure_reason_id(account_id: str, user_id: str) -> str:
    return "clsr_" + hex_id(f"closure_reason:{account_id}:{user_id}", 12)


def account_flag_id(account_id: str, flag_type: str, expiration: str) -> str:
    return "ccflag_" + hex_id(f"account_flag:{account_id}:{flag_type}:{expiration}", 12)


def cli_request_id(account_id: str, user_id: str, amount: float) -> str:
    return "cli_" + hex_id(f"cli_request:{account_id}:{user_id}:{amount:.2f}", 12)


def debit_card_order_id(account_id: str, user_id: str, delivery: str) -> str:
    return "dcord_" + hex_id(f"debit_card_order:{account_id}:{user_id}:{delivery}", 12)


def debit_card_id(account_id: str, user_id: str, issue_date: str) -> str:
    return "dbc_" + hex_id(f"debit_card:{account_id}:{user_id}:{issue_date}", 12)
