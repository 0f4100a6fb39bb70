"""The customer's tools: applying, referring, paying, asking for a human, and the tools the agent gives them.

They work on the same DB object as the agent's tools (one bank). The discoverable ones check that the agent
gave them (a ``user_discoverable_tools`` record) and log every call in ``user_discoverable_tool_calls``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any, Dict, Optional

from tau2_gym.core.tools import Toolkit, ToolType, tool
from tau2_gym.domains.banking_knowledge import utils as U
from tau2_gym.domains.banking_knowledge.db_query import add_to_db, lookup, query_database_tool
from tau2_gym.domains.banking_knowledge.tools import KnowledgeTools, _no_records, discoverable, parse_balance


class KnowledgeUserTools(Toolkit):
    """The customer's toolkit (the class name appears in argument errors, as upstream's does)."""

    _discoverable_docs: Optional[dict[str, str]] = None
    _binding: Any = None
    _role = "user"
    __reduce__ = KnowledgeTools.__reduce__

    def _not_given(self, tool_name: str) -> Optional[str]:
        found = lookup("user_discoverable_tools", "tool_name", tool_name, self.db)
        if "No records found" in found:
            return (
                f"Error: Tool '{tool_name}' has not been given to you by the agent. "
                f"The agent must first use `give_discoverable_user_tool` to give this tool to you."
            )
        return None

    def _log_call(self, tool_name: str, args: Dict[str, Any]) -> None:
        add_to_db(
            "user_discoverable_tool_calls",
            U.user_tool_call_id(tool_name, args),
            {"tool_name": tool_name, "arguments": args, "called_at": U.today_str(), "status": "CALLED"},
            self.db,
        )

    # ------------------------------------------------------------------ discoverable (given by the agent)

    @discoverable(ToolType.WRITE)
    def submit_cash_back_dispute_0589(self, user_id: str, transaction_id: str) -> str:
        """Dispute the cash back of a transaction."""
        error = self._not_given("submit_cash_back_dispute_0589")
        if error:
            return error
        args = {"user_id": user_id, "transaction_id": transaction_id}
        self._log_call("submit_cash_back_dispute_0589", args)
        did = U.dispute_id(user_id, transaction_id)
        auto = False
        config_table = self.db.task_config["data"]
        if config_table:
            auto = config_table.get("dispute_settings", {}).get("auto_resolve_disputes", False)
        record = {
            "dispute_id": did,
            "user_id": user_id,
            "transaction_id": transaction_id,
            "submitted_at": U.today_str(),
        }
        if auto:
            record.update(status="RESOLVED", resolution="APPROVED")
            status = (
                "Status: RESOLVED - The dispute has been reviewed and approved. The transaction rewards need "
                "to be updated."
            )
        else:
            record["status"] = "SUBMITTED"
            status = "Status: SUBMITTED - Your dispute has been queued for review."
        stored = add_to_db("cash_back_disputes", did, record, self.db)
        out = (
            "Cash back dispute submitted successfully. Your case has been queued for review.\n\n"
            f"Executed: submit_cash_back_dispute_0589\nArguments: {json.dumps(args, indent=2)}\n"
        )
        if stored:
            return out + f"Dispute ID: {did}\n{status}"
        return out + "Note: Dispute may have already been submitted for this transaction."

    @discoverable(ToolType.WRITE)
    def get_referral_link(self, user_id: str, card_name: str) -> str:
        """Make a referral link for a card."""
        error = self._not_given("get_referral_link")
        if error:
            return error
        args = {"user_id": user_id, "card_name": card_name}
        self._log_call("get_referral_link", args)
        rid = U.referral_link_id(user_id, card_name)
        stored = add_to_db(
            "referrals",
            rid,
            {
                "referral_id": rid,
                "referrer_id": user_id,
                "referred_account_type": card_name,
                "referral_status": "NO_PROGRESS",
                "date": U.today_str(),
            },
            self.db,
        )
        out = (
            "Referral link generated successfully. Share this link with the person you want to refer.\n\n"
            f"Executed: get_referral_link\nArguments: {json.dumps(args, indent=2)}\n"
        )
        if stored:
            return out + f"Referral ID: {rid}\nReferral link: https://rhobank.com/refer/{rid}"
        return out + "Note: A referral link for this card may have already been generated."

    @discoverable(ToolType.READ)
    def get_card_last_4_digits(self, credit_card_account_id: str) -> str:
        """The last 4 digits of a credit card."""
        error = self._not_given("get_card_last_4_digits")
        if error:
            return error
        args = {"credit_card_account_id": credit_card_account_id}
        self._log_call("get_card_last_4_digits", args)
        if _no_records(lookup("credit_card_accounts", "account_id", credit_card_account_id, self.db)):
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        digest = hashlib.sha256(f"card_last4:{credit_card_account_id}".encode()).hexdigest()
        last4 = "".join(c for c in digest if c.isdigit())[:4].ljust(4, "0")
        return (
            "Card information retrieved successfully.\n\n"
            f"Executed: get_card_last_4_digits\nArguments: {json.dumps(args, indent=2)}\n"
            f"Last 4 digits of card: {last4}"
        )

    @discoverable(ToolType.WRITE)
    def deposit_check_3847(self, account_id: str, check_amount: float) -> str:
        """Deposit a check by photo."""
        error = self._not_given("deposit_check_3847")
        if error:
            return error
        args = {"account_id": account_id, "check_amount": check_amount}
        self._log_call("deposit_check_3847", args)
        try:
            check_amount = float(check_amount)
        except (ValueError, TypeError):
            return f"Error: Invalid check amount '{check_amount}'. Must be a number."
        if check_amount <= 0:
            return "Error: Check amount must be positive."
        accounts = self.db.accounts["data"]
        if account_id not in accounts:
            return f"Error: Account '{account_id}' not found."
        account = accounts[account_id]
        if account.get("status") not in ("ACTIVE", "OPEN"):
            return f"Error: Account '{account_id}' is not active."
        before = parse_balance(account.get("current_holdings", account.get("balance", 0)))
        after = before + check_amount
        accounts[account_id]["current_holdings"] = f"${after:.2f}"
        return (
            "Check deposited successfully. Funds will be available according to your account's deposit "
            "policy.\n\n"
            f"Executed: deposit_check_3847\nArguments: {json.dumps(args, indent=2)}\n"
            "Check deposit processed!\n"
            f"  - Account: {account_id}\n"
            f"  - Check Amount: ${check_amount:.2f}\n"
            f"  - Previous Balance: ${before:.2f}\n"
            f"  - New Balance: ${after:.2f}"
        )

    # ------------------------------------------------------------------ listed tools

    VALID_CREDIT_CARD_TYPES = [
        "Bronze Rewards Card",
        "Business Bronze Rewards Card",
        "Business Gold Rewards Card",
        "Business Platinum Rewards Card",
        "Business Silver Rewards Card",
        "Crypto-Cash Back",
        "Diamond Elite Card",
        "EcoCard",
        "Gold Rewards Card",
        "Green Rewards Card",
        "Platinum Rewards Card",
        "Silver Rewards Card",
        "Silver Zoom Card",
    ]

    @tool(ToolType.WRITE)
    def apply_for_credit_card(
        self, card_type: str, customer_name: str, annual_income: float, rho_bank_subscription: bool = False
    ) -> str:
        """Apply for a credit card.

        Args:
            card_type: Card name.
            customer_name: Legal name.
            annual_income: Yearly income (USD).
            rho_bank_subscription: Has Rho-Bank+.
        """
        if card_type not in self.VALID_CREDIT_CARD_TYPES:
            return f"Error: Invalid card_type '{card_type}'. Must be one of: {self.VALID_CREDIT_CARD_TYPES}"
        try:
            annual_income = float(annual_income)
        except (TypeError, ValueError):
            return "Error: Invalid annual_income. Must be a number."
        aid = U.application_id(card_type, customer_name, annual_income, rho_bank_subscription)
        record = {
            "application_id": aid,
            "card_type": card_type,
            "customer_name": customer_name,
            "annual_income": annual_income,
            "rho_bank_subscription": rho_bank_subscription,
            "status": "PENDING",
            "date": U.today_str(),
        }
        if not add_to_db("credit_card_applications", aid, record, self.db):
            return f"Failed to submit application: Record ID '{aid}' may already exist."
        return (
            "Credit card application submitted:\n"
            "Your application has been successfully submitted. "
            "You will receive a decision within 5-7 business days via email."
        )

    @tool(ToolType.WRITE)
    def submit_referral(self, user_id: str, account_type: str) -> str:
        """Refer someone to open an account.

        Args:
            user_id: Your id.
            account_type: Account you refer them to.
        """
        rid = U.referral_id(user_id, account_type)
        today = U.today_str()
        record = {
            "referral_id": rid,
            "referrer_id": user_id,
            "referred_account_type": account_type,
            "referral_status": "NO_PROGRESS",
            "date": today,
        }
        if not add_to_db("referrals", rid, record, self.db):
            return f"Failed to submit referral: Record ID '{rid}' may already exist."
        return (
            "Referral request submitted successfully!\n"
            f"  - Referral ID: {rid}\n"
            f"  - Referrer ID: {user_id}\n"
            f"  - Account Type: {account_type}\n"
            "  - Status: NO_PROGRESS\n"
            f"  - Date: {today}\n\n"
            "Share your referral ID with the person you're referring. "
            "They will need to use this when applying for their account."
        )

    def query_database(self, database_name: str, constraints: str = "{}") -> str:
        """Env function (not a tool): a constraint query on any table."""
        return query_database_tool(database_name, constraints, db=self.db)

    @tool(ToolType.WRITE)
    def call_discoverable_user_tool(self, discoverable_tool_name: str, arguments: str = "{}") -> str:
        """Run a tool the agent gave you.

        Args:
            discoverable_tool_name: Tool name.
            arguments: JSON object of arguments.
        """
        if discoverable_tool_name not in self.discoverable_names:
            return f"Error: Unknown discoverable tool '{discoverable_tool_name}'."
        try:
            args = json.loads(arguments, parse_int=float)
        except json.JSONDecodeError as e:
            return f"Error: Invalid JSON in arguments: {e}"
        method = getattr(self, discoverable_tool_name)
        params = inspect.signature(method).parameters
        for name, param in params.items():
            if name == "self":
                continue
            if param.default is inspect.Parameter.empty and name not in args:
                return f"Error: Missing required parameter: {name}"
        for name in args:
            if name not in params:
                return f"Error: Unexpected parameter: {name}"
        try:
            return method(**args)
        except TypeError as e:
            return f"Error: Invalid arguments for tool '{discoverable_tool_name}': {e}"

    @tool(ToolType.READ)
    def list_discoverable_user_tools(self) -> str:
        """Tools the agent gave you."""
        result = query_database_tool("user_discoverable_tools", "{}", db=self.db)
        if "No results found" in result:
            return "No tools have been given to you yet by the agent."
        return f"Tools given to you by the agent:\n{result}"

    @tool(ToolType.WRITE)
    def request_human_agent_transfer(self) -> str:
        """Ask for a human agent."""
        today = U.today_str()
        existing = query_database_tool("human_transfer_requests", "{}", db=self.db)
        count = 1 if _no_records(existing) else existing.count("request_id") + 1
        rid = f"transfer_request_{count}"
        add_to_db(
            "human_transfer_requests",
            rid,
            {"request_id": rid, "request_number": count, "requested_at": today, "status": "PENDING"},
            self.db,
        )
        return f"Transfer request #{count} submitted.\nThe agent will process your request."

    # reward rate (%) per card and category; "default" for other categories
    CREDIT_CARD_REWARDS = {
        "Bronze Rewards Card": {"default": 1.0},
        "Silver Rewards Card": {"Travel": 4.0, "Software": 4.0, "default": 1.0},
        "Gold Rewards Card": {"default": 2.5},
        "Platinum Rewards Card": {"default": 10.0},
        "Business Bronze Rewards Card": {"default": 1.0},
        "Business Silver Rewards Card": {"Travel": 10.0, "Software": 10.0, "default": 1.0},
        "Green Rewards Card": {"Sustainable": 3.0, "default": 1.0},
        "Business Gold Rewards Card": {"Operations": 2.5, "default": 1.0},
        "Business Platinum Rewards Card": {"Travel": 4.0, "Software": 4.0, "Media": 4.0, "default": 1.5},
        "Silver Zoom Card": {"Transportation": 3.0, "default": 1.0},
        "Diamond Elite Card": {"default": 5.0},
        "EcoCard": {"Green": 5.0, "default": 1.0},
        "Crypto-Cash Back": {"default": 2.0},
    }

    @tool(ToolType.WRITE)
    def submit_transaction(
        self, user_id: str, credit_card_type: str, merchant_name: str, amount: float, category: str
    ) -> str:
        """Make a credit card purchase.

        Args:
            user_id: Your id.
            credit_card_type: Card used.
            merchant_name: Merchant.
            amount: Amount (USD).
            category: Purchase category.
        """
        if credit_card_type not in self.CREDIT_CARD_REWARDS:
            return (
                f"Error: Unknown credit card type '{credit_card_type}'. "
                f"Available types: {list(self.CREDIT_CARD_REWARDS.keys())}"
            )
        tid = U.transaction_id(user_id, credit_card_type, merchant_name, amount, category)
        today = U.today_str()
        rates = self.CREDIT_CARD_REWARDS[credit_card_type]
        rate = rates.get(category, rates["default"])
        points = int(amount * rate)
        record = {
            "transaction_id": tid,
            "user_id": user_id,
            "credit_card_type": credit_card_type,
            "merchant_name": merchant_name,
            "transaction_amount": f"${amount:.2f}",
            "transaction_date": today,
            "category": category,
            "status": "COMPLETED",
            "rewards_earned": f"{points} points",
        }
        if not add_to_db("credit_card_transaction_history", tid, record, self.db):
            return f"Failed to submit transaction: Record ID '{tid}' may already exist."
        return (
            "Transaction submitted successfully!\n"
            f"  - Transaction ID: {tid}\n"
            f"  - User ID: {user_id}\n"
            f"  - Card Type: {credit_card_type}\n"
            f"  - Merchant: {merchant_name}\n"
            f"  - Amount: ${amount:.2f}\n"
            f"  - Category: {category}\n"
            f"  - Date: {today}\n"
            f"  - Rewards Earned: {points} points ({rate}% cashback rate)\n"
        )
