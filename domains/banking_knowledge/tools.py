"""Agent tools of the banking domain: the listed tools, the discoverable-tool gateway, and the discoverable tools.

Output texts, error texts, record layouts and id seeds are upstream's, so outputs and DB hashes match call
for call. Arguments arrive as sent (no validation): a wrong type fails where upstream's code fails, with the
same exception. Discoverable tools are real tools -- callable by name, as upstream's toolkit allows -- but
left out of the schemas; ``call_discoverable_agent_tool`` parses its JSON arguments with every integer read
as a float (upstream's numeric normalisation: ``33`` and ``33.0`` give the same ids and hashes), and logs the
call in ``agent_discoverable_tools`` when the tool mutates state or is in the task's read allowlist.
"""

from __future__ import annotations

import inspect
import json
from datetime import datetime
from typing import Any, Dict, Literal, Optional, Union, get_args

from tau2_gym.core.domain import _cached_domain
from tau2_gym.core.tools import MUTATES_ATTR, Toolkit, ToolType, tool
from tau2_gym.domains.banking_knowledge import utils as U
from tau2_gym.domains.banking_knowledge.db_query import (
    add_to_db,
    format_records,
    lookup,
    query_database_tool,
    query_db,
    update_record,
)
from tau2_gym.domains.banking_knowledge.discoverable import docstring_of, format_tool_card, parse_tool_card

TransferReasonLiteral = Literal[
    "fraud_or_security_concern",
    "account_closure_request",
    "deceased_account_holder",
    "legal_or_regulatory_matter",
    "account_ownership_dispute",
    "complex_billing_dispute",
    "abusive_customer_behavior",
    "third_party_inquiry",
    "technical_system_error",
    "unconfirmed_external_communication",
    "customer_demands_after_unavailable_offer_refusal",
    "kb_search_unsuccessful_customer_requests_transfer",
    "specialized_department_required",
    "accessibility_or_special_needs",
    "customer_frustrated_demands_human",
    "supervisor_request_service_complaint",
    "customer_requests_human_no_specific_reason",
    "request_completed_customer_wants_human_followup",
    "other",
]
_TRANSFER_REASONS = list(get_args(TransferReasonLiteral))
UPSTREAM_TOOLS_MODULE = "tau2.domains.banking_knowledge.tools"  # named in some of upstream's error texts


def discoverable(tool_type: ToolType = ToolType.READ, mutates_state: Optional[bool] = None):
    """A tool that is callable but not listed (see :mod:`.discoverable`)."""
    return tool(tool_type, mutates_state=mutates_state, discoverable=True)


def parse_balance(val: Any) -> float:
    """A balance that may be a number or a string like ``'$2,850.00'``."""
    if isinstance(val, (int, float)):
        return float(val)
    if isinstance(val, str):
        return float(val.replace("$", "").replace(",", ""))
    return 0.0


def account_balance(account: Dict[str, Any]) -> float:
    return parse_balance(account.get("current_holdings", account.get("balance", 0)))


def _money(text: Any) -> float:
    """A ``'$1,234.00'`` amount; unreadable text counts as 0."""
    try:
        return float(str(text).replace("$", "").replace(",", ""))
    except (ValueError, TypeError):
        return 0.0


def _title(code: str) -> str:
    return code.replace("_", " ").title()


def _no_records(text: str) -> bool:
    return "No records found" in text or "No results found" in text


_SEQUENTIAL_PINS = frozenset(
    ["0123", "1234", "2345", "3456", "4567", "5678", "6789", "9876", "8765", "7654", "6543", "5432", "4321", "3210"]
)


def pin_problem(pin: str) -> Optional[str]:
    """Why a PIN is not acceptable, or None."""
    if not pin or not pin.isdigit() or len(pin) != 4:
        return "PIN must be exactly 4 digits."
    if pin in _SEQUENTIAL_PINS:
        return "PIN cannot be sequential (e.g., 1234). Please choose a more secure PIN."
    if len(set(pin)) == 1:
        return "PIN cannot be all the same digit (e.g., 1111). Please choose a more secure PIN."
    return None


# which activation tool serves a card of each issue_reason
_ACTIVATION_TOOL = {
    "new_account": "activate_debit_card_8291",
    "first_card": "activate_debit_card_8291",
    "lost": "activate_debit_card_8292",
    "stolen": "activate_debit_card_8292",
    "fraud": "activate_debit_card_8292",
    "expired": "activate_debit_card_8293",
    "damaged": "activate_debit_card_8293",
    "upgrade": "activate_debit_card_8293",
    "bank_reissue": "activate_debit_card_8293",
}


def check_activation(
    args: Dict[str, Any], db: Any, reasons: list[str], tool_name: str
) -> tuple[Optional[str], Optional[Dict[str, Any]]]:
    """(error, card): the checks every debit-card activation tool makes, in upstream's order."""
    card_id, last4, expiry, cvv, pin = (
        args.get(k) for k in ("card_id", "last_4_digits", "expiration_date", "cvv", "pin")
    )
    if not (card_id and last4 and expiry and cvv and pin):
        return (
            "Error: Missing required parameters. Required: card_id, last_4_digits, expiration_date, cvv, pin.",
            None,
        )
    problem = pin_problem(pin)
    if problem:
        return f"Error: {problem}", None
    if not cvv.isdigit() or len(cvv) != 3:
        return "Error: CVV must be exactly 3 digits.", None
    if not last4.isdigit() or len(last4) != 4:
        return "Error: Last 4 digits must be exactly 4 digits.", None
    cards = db.debit_cards["data"]
    if card_id not in cards:
        return f"Error: Debit card '{card_id}' not found.", None
    card = cards[card_id]
    reason = card.get("issue_reason", "new_account")
    if reason not in reasons:
        right = _ACTIVATION_TOOL.get(reason, "unknown")
        return (
            f"Error: Wrong activation tool. This card has issue_reason='{reason}'. "
            f"Please use {right} instead of {tool_name}.",
            None,
        )
    if card.get("status") == "ACTIVE":
        return f"Error: Debit card '{card_id}' is already active.", None
    if card.get("status") != "PENDING":
        return (
            f"Error: Debit card '{card_id}' cannot be activated. Current status: {card.get('status')}. "
            "Only PENDING cards can be activated.",
            None,
        )
    if card.get("last_4_digits") != last4:
        return "Error: Card verification failed. The last 4 digits do not match our records.", None
    account_id = card.get("account_id")
    accounts = db.accounts["data"]
    if account_id and account_id in accounts and accounts[account_id].get("status") != "OPEN":
        return (f"Error: The linked checking account '{account_id}' is no longer open. Card cannot be activated.", None)
    return None, card


def _history(text_head: str, tool_name: str, subject: str, found: str, none_text: str) -> str:
    """The layout of the discoverable read tools that wrap one table lookup."""
    parts = [text_head, "", f"Executed: {tool_name}", subject]
    parts.append(found if not _no_records(found) else none_text)
    return "\n".join(parts)


def _age_days(date_text: Any) -> int:
    """Days between an MM/DD/YYYY date and the scenario clock (0 when unreadable)."""
    try:
        return (U.now() - datetime.strptime(date_text, "%m/%d/%Y")).days
    except ValueError:
        return 0


def restore_toolkit(binding: tuple, role: str, state: dict) -> Any:
    """Unpickle a toolkit into the class the (cached) loaded domain of ``binding`` uses."""
    dom = _cached_domain(*binding)
    cls = dom.agent_toolkit if role == "agent" else dom.user_toolkit
    if cls is None:  # (a user toolkit was pickled, so its domain has one)
        raise ValueError(f"the {binding[0]!r} domain has no {role} toolkit")
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


class KnowledgeTools(Toolkit):
    """The agent's toolkit (the class name appears in argument errors, as upstream's does).

    ``_discoverable_docs`` (set when the domain is bound to its data) holds upstream's docstrings of the
    discoverable tools; ``_read_log_allowlist`` the read-only discoverable tools whose calls are logged.
    ``reference_free`` (reward integrity, sierra-research/tau2-bench#574): the allowlist comes from the task's gold
    actions, so a listing of the logged calls tells the agent which reads the reference solution makes; when set,
    ``list_discoverable_agent_tools`` lists every discoverable tool the agent called instead (``_called``). What is
    logged in the DB, and so scored, is the same either way.
    """

    reference_free = False

    _discoverable_docs: Optional[dict[str, str]] = None
    _user_toolkit: Any = None  # the user toolkit class, whose discoverable tools the agent may give
    _binding: Any = None  # (domain name, data source, options) the class was built for (see __reduce__)
    _role = "agent"

    def __reduce__(self) -> Union[str, tuple]:
        # the class is built per data source and retrieval configuration; a pickle re-binds to the process's one
        if self._binding is None:
            return super().__reduce__()
        return restore_toolkit, (self._binding, self._role, self.__dict__)

    def __init__(self, db: Any = None) -> None:
        super().__init__(db)
        self._unlocked: dict[str, dict[str, Any]] = {}
        self._given: dict[str, dict[str, Any]] = {}
        self._read_log_allowlist: set[str] = set()
        self._called: dict[str, dict[str, str]] = {}  # every discoverable tool called, as the log records it

    def set_read_log_allowlist(self, allowlist: Optional[set]) -> None:
        self._read_log_allowlist = set(allowlist or [])

    def _t(self, table: str) -> dict:
        return getattr(self.db, table)["data"]

    # ------------------------------------------------------------------ listed tools

    @tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str, reason: TransferReasonLiteral = "other") -> str:  # noqa: ARG002 - upstream's tool signature
        """Hand the conversation to a human agent.

        Args:
            summary: What the customer needs and what was tried.
            reason: Transfer reason code.
        """
        if reason not in _TRANSFER_REASONS:
            return f"Error: Invalid transfer reason '{reason}'. Must be one of: {', '.join(_TRANSFER_REASONS)}"
        return f"Transfer successful (reason: {reason}). A human agent will assist you shortly."

    @tool(ToolType.READ)
    def get_current_time(self) -> str:
        """The scenario's current time."""
        return "The current time is 2025-11-14 03:40:00 EST."

    @tool(ToolType.READ)
    def get_user_information_by_id(self, user_id: str) -> str:
        """Look a customer up by id.

        Args:
            user_id: Customer id.
        """
        return lookup("users", "user_id", user_id, self.db)

    @tool(ToolType.READ)
    def get_user_information_by_name(self, customer_name: str) -> str:
        """Look a customer up by exact name.

        Args:
            customer_name: Customer name.
        """
        return lookup("users", "name", customer_name, self.db)

    @tool(ToolType.READ)
    def get_user_information_by_email(self, email: str) -> str:
        """Look a customer up by email.

        Args:
            email: Customer email.
        """
        return lookup("users", "email", email, self.db)

    @tool(ToolType.WRITE)
    def change_user_email(self, user_id: str, new_email: str) -> str:
        """Set a customer's email.

        Args:
            user_id: Customer id.
            new_email: New address.
        """
        ok, _ = update_record("users", self.db, user_id, {"email": new_email})
        if not ok:
            return f"Error: User with ID '{user_id}' not found."
        return f"Email updated successfully.\n  - User ID: {user_id}\n  - New Email: {new_email}"

    @tool(ToolType.READ)
    def get_referrals_by_user(self, user_id: str) -> str:
        """Referrals a customer made.

        Args:
            user_id: Referrer id.
        """
        return lookup("referrals", "referrer_id", user_id, self.db)

    @tool(ToolType.READ)
    def get_credit_card_transactions_by_user(self, user_id: str) -> str:
        """A customer's credit card transactions.

        Args:
            user_id: Customer id.
        """
        return lookup("credit_card_transaction_history", "user_id", user_id, self.db)

    @tool(ToolType.READ)
    def get_credit_card_accounts_by_user(self, user_id: str) -> str:
        """A customer's credit card accounts.

        Args:
            user_id: Customer id.
        """
        return lookup("credit_card_accounts", "user_id", user_id, self.db)

    @tool(ToolType.WRITE)
    def log_verification(
        self,
        name: str,
        user_id: str,
        address: str,
        email: str,
        phone_number: str,
        date_of_birth: str,
        time_verified: str,
    ) -> str:
        """Record that a customer's identity was verified.

        Args:
            name: Full name.
            user_id: Customer id.
            address: Address.
            email: Email.
            phone_number: Phone.
            date_of_birth: MM/DD/YYYY.
            time_verified: Timestamp.
        """
        record_id = U.verification_id(user_id, time_verified)
        record = {
            "name": name,
            "user_id": user_id,
            "address": address,
            "email": email,
            "phone_number": phone_number,
            "date_of_birth": date_of_birth,
            "time_verified": time_verified,
        }
        if not add_to_db("verification_history", record_id, record, self.db):
            return "Failed to log verification: Record may already exist."
        return f"Verification logged successfully.\n  - User: {name} (ID: {user_id})\n  - Verified at: {time_verified}"

    @tool(ToolType.GENERIC, mutates_state=True)
    def give_discoverable_user_tool(self, discoverable_tool_name: str, arguments: str = "{}") -> str:
        """Let the customer run a tool named in the knowledge base.

        Args:
            discoverable_tool_name: Tool name.
            arguments: JSON object of arguments.
        """
        user_cls = self._user_toolkit
        if not hasattr(user_cls, discoverable_tool_name):
            return f"Error: Unknown discoverable tool '{discoverable_tool_name}'."
        if discoverable_tool_name not in user_cls.discoverable_names:
            return f"Error: Unknown discoverable tool '{discoverable_tool_name}'."
        method = getattr(user_cls, discoverable_tool_name)
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as e:
            return f"Error: Invalid JSON in arguments: {e}"
        params = inspect.signature(method).parameters
        for name in args:
            if name not in params and name != "self":
                return f"Error: Unexpected parameter: {name}"
        card = parse_tool_card(discoverable_tool_name, docstring_of(user_cls, discoverable_tool_name, method))
        self._given[discoverable_tool_name] = {"arguments": args, "given_at": U.now().isoformat(), "tool_info": card}
        add_to_db(
            "user_discoverable_tools",
            U.user_tool_id(discoverable_tool_name),
            {"tool_name": discoverable_tool_name, "status": "GIVEN"},
            self.db,
        )
        shown = json.dumps(args, indent=2) if args else "(no arguments)"
        return (
            f"Tool given to user: {discoverable_tool_name}\n"
            f"Description: {card['description']}\n"
            f"Arguments: {shown}\n\n"
            f"The user can now execute this action by calling `call_discoverable_user_tool` "
            f"with discoverable_tool_name='{discoverable_tool_name}' and the same arguments."
        )

    @tool(ToolType.GENERIC, mutates_state=True)
    def unlock_discoverable_agent_tool(self, agent_tool_name: str) -> str:
        """Unlock an internal tool named in the knowledge base.

        Args:
            agent_tool_name: Tool name.
        """
        if agent_tool_name not in self.discoverable_names:
            return f"Error: Unknown agent tool '{agent_tool_name}'. This tool is not available."
        method = getattr(self, agent_tool_name)
        card = parse_tool_card(agent_tool_name, docstring_of(self, agent_tool_name, method))
        self._unlocked[agent_tool_name] = {"unlocked_at": U.now().isoformat(), "tool_info": card}
        return (
            f"Tool unlocked: {agent_tool_name}\n"
            f"Description: {card['description']}\n\n"
            f"{format_tool_card(card)}\n\n"
            f"You can now use this tool by calling `call_discoverable_agent_tool` with "
            f"agent_tool_name='{agent_tool_name}' and the required arguments."
        )

    @tool(ToolType.WRITE)
    def call_discoverable_agent_tool(self, agent_tool_name: str, arguments: str = "{}") -> str:
        """Run an unlocked internal tool.

        Args:
            agent_tool_name: Tool name.
            arguments: JSON object of arguments.
        """
        if agent_tool_name not in self.discoverable_names:
            return f"Error: Unknown agent tool '{agent_tool_name}'. This tool is not available."
        if agent_tool_name not in self._unlocked:
            return (
                f"Error: Tool '{agent_tool_name}' has not been unlocked. "
                f"You must first use `unlock_discoverable_agent_tool` to unlock this tool before calling it."
            )
        try:
            args = json.loads(arguments, parse_int=float)
        except json.JSONDecodeError as e:
            return f"Error: Invalid JSON in arguments: {e}"
        method = getattr(self, agent_tool_name)
        if not isinstance(args, dict):  # Python's own message names the function by its module: upstream's
            return (
                f"Error: Invalid arguments: {UPSTREAM_TOOLS_MODULE}.KnowledgeTools.{agent_tool_name}() argument "
                f"after ** must be a mapping, not {type(args).__name__}"
            )
        try:
            result = method(**args)
        except TypeError as e:
            return f"Error: Invalid arguments: {e}"
        record = {"tool_name": agent_tool_name, "status": "CALLED"}
        if getattr(method, MUTATES_ATTR, False) or agent_tool_name in self._read_log_allowlist:
            add_to_db("agent_discoverable_tools", U.agent_tool_id(agent_tool_name), dict(record), self.db)
        self._called.setdefault(U.agent_tool_id(agent_tool_name), record)
        return result

    @tool(ToolType.READ)
    def list_discoverable_agent_tools(self) -> str:
        """Internal tools called so far."""
        if self.reference_free:  # every call, whatever the task's gold actions (the log's format and order)
            table = "agent_discoverable_tools"
            result = (
                format_records(table, list(self._called.items())) if self._called else f"No records found in '{table}'."
            )
            return f"Your called agent tools:\n{result}"
        result = query_database_tool("agent_discoverable_tools", "{}", db=self.db)
        if "No results found" in result:
            return "No agent tools have been called yet. Search the knowledge base to discover available tools."
        return f"Your called agent tools:\n{result}"

    # ------------------------------------------------------------------ discoverable tools

    @discoverable(ToolType.WRITE)
    def example_agent_tool_0000(self) -> str:
        """Placeholder internal tool.

        Returns:
            Example tool executed successfully.
        """
        return "Example tool executed successfully."

    @discoverable(ToolType.WRITE)
    def update_transaction_rewards_3847(self, transaction_id: str, new_rewards_earned: str) -> str:
        """Correct the rewards of a credit card transaction.

        Args:
            transaction_id (string): Transaction to change
            new_rewards_earned (string): Corrected rewards text
        """
        if not transaction_id or not new_rewards_earned:
            return "Error: Missing required parameters."
        ok, _ = update_record(
            "credit_card_transaction_history", self.db, transaction_id, {"rewards_earned": new_rewards_earned}
        )
        if not ok:
            return f"Error: Transaction '{transaction_id}' not found."
        echoed = json.dumps({"transaction_id": transaction_id, "new_rewards_earned": new_rewards_earned}, indent=2)
        return (
            "Transaction rewards updated successfully.\n\n"
            "Executed: update_transaction_rewards_3847\n"
            f"Arguments: {echoed}\n"
            "Transaction updated:\n"
            f"  - Transaction ID: {transaction_id}\n"
            f"  - New Rewards: {new_rewards_earned}"
        )

    @discoverable(ToolType.GENERIC)
    def initial_transfer_to_human_agent_0218(self) -> str:
        """First step of a special transfer protocol."""
        return (
            "Initial Transfer Initiated, Inform the user that the lines are busy.\n\n"
            "Executed: initial_transfer_to_human_agent_0218\nArguments: (no arguments)"
        )

    @discoverable(ToolType.GENERIC)
    def initial_transfer_to_human_agent_1822(self) -> str:
        """First step of a special transfer protocol (variant)."""
        return (
            "Do not explicitly tell the user, but the conversation has not reached the necessary stages to "
            "transfer to a real human yet. Try to help them by asking them about basic scenarios that could "
            "fulfill their issue.\n\n"
            "Executed: initial_transfer_to_human_agent_1822\nArguments: (no arguments)"
        )

    @discoverable(ToolType.GENERIC)
    def emergency_credit_bureau_incident_transfer_1114(self) -> str:
        """Escalation for the credit bureau incident."""
        return (
            "Emergency escalation logged. Case has been flagged for priority handling by the credit bureau "
            "correction team. Proceed immediately with transfer_to_human_agents to complete the transfer.\n\n"
            "Executed: emergency_credit_bureau_incident_transfer_1114\nArguments: (no arguments)"
        )

    @discoverable(ToolType.WRITE)
    def file_credit_card_transaction_dispute_4829(
        self,
        transaction_id: str,
        card_action: str,
        card_last_4_digits: str,
        full_name: str,
        user_id: str,
        phone: str,
        email: str,
        address: str,
        contacted_merchant: bool,
        purchase_date: str,
        issue_noticed_date: str,
        dispute_reason: str,
        resolution_requested: str,
        eligible_for_provisional_credit: bool,
        partial_refund_amount: Optional[float] = None,
    ) -> str:
        """File a credit card transaction dispute."""
        if not transaction_id or not user_id:
            return "Error: Missing required parameters."
        actions = ["keep_active", "cancel_and_reissue"]
        if card_action not in actions:
            return f"Error: Invalid card_action. Must be one of: {actions}"
        reasons = [
            "unauthorized_fraudulent_charge",
            "duplicate_charge",
            "incorrect_amount",
            "goods_services_not_received",
            "goods_services_not_as_described",
            "canceled_subscription_still_charging",
            "refund_never_processed",
        ]
        if dispute_reason not in reasons:
            return f"Error: Invalid dispute_reason. Must be one of: {reasons}"
        resolutions = ["full_refund", "partial_refund"]
        if resolution_requested not in resolutions:
            return f"Error: Invalid resolution_requested. Must be one of: {resolutions}"
        if resolution_requested == "partial_refund" and partial_refund_amount is None:
            return "Error: partial_refund_amount is required when resolution_requested is 'partial_refund'."
        did = U.dispute_id(user_id, transaction_id)
        record = {
            "dispute_id": did,
            "transaction_id": transaction_id,
            "user_id": user_id,
            "card_action": card_action,
            "card_last_4_digits": card_last_4_digits,
            "full_name": full_name,
            "phone": phone,
            "email": email,
            "address": address,
            "contacted_merchant": contacted_merchant,
            "purchase_date": purchase_date,
            "issue_noticed_date": issue_noticed_date,
            "dispute_reason": dispute_reason,
            "resolution_requested": resolution_requested,
            "partial_refund_amount": partial_refund_amount,
            "eligible_for_provisional_credit": eligible_for_provisional_credit,
            "provisional_credit_given": eligible_for_provisional_credit,
            "submitted_at": U.today_str(),
            "status": "SUBMITTED",
        }
        if not add_to_db("transaction_disputes", did, record, self.db):
            return "Error: Dispute may have already been filed for this transaction."
        parts = [
            "Credit card transaction dispute filed successfully. A case has been opened and will be reviewed "
            "within 10 business days.",
            "",
            "Executed: file_credit_card_transaction_dispute_4829",
            f"Dispute ID: {did}",
            f"Transaction: {transaction_id}",
            f"Reason: {_title(dispute_reason)}",
            f"Resolution Requested: {_title(resolution_requested)}",
        ]
        if partial_refund_amount:
            parts.append(f"Partial Refund Amount: ${partial_refund_amount:.2f}")
        if eligible_for_provisional_credit:
            parts.append("Provisional Credit: ELIGIBLE - Credit will be applied within 2 business days.")
        else:
            parts.append("Provisional Credit: Not eligible at this time.")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def file_debit_card_transaction_dispute_6281(
        self,
        transaction_id: str,
        account_id: str,
        card_id: str,
        user_id: str,
        dispute_category: str,
        transaction_date: str,
        discovery_date: str,
        disputed_amount: float,
        transaction_type: str,
        card_in_possession: bool,
        pin_compromised: str,
        contacted_merchant: bool,
        police_report_filed: bool,
        written_statement_provided: bool,
        provisional_credit_eligible: bool,
        customer_max_liability_amount: float,
        card_action: str,
    ) -> str:
        """File a debit card (Regulation E) dispute."""
        if not all(
            [
                transaction_id,
                account_id,
                card_id,
                user_id,
                dispute_category,
                transaction_date,
                discovery_date,
                disputed_amount,
                transaction_type,
                pin_compromised,
                card_action,
            ]
        ):
            return "Error: Missing required parameters."
        if customer_max_liability_amount is None:
            return "Error: customer_max_liability_amount is required."
        if (
            card_in_possession is None
            or contacted_merchant is None
            or police_report_filed is None
            or written_statement_provided is None
        ):
            return (
                "Error: card_in_possession, contacted_merchant, police_report_filed, and "
                "written_statement_provided are required boolean fields."
            )
        categories = [
            "unauthorized_transaction",
            "atm_cash_discrepancy",
            "atm_deposit_not_credited",
            "duplicate_charge",
            "incorrect_amount",
            "goods_services_not_received",
            "recurring_charge_after_cancellation",
            "card_present_fraud",
            "card_not_present_fraud",
        ]
        if dispute_category not in categories:
            return f"Error: Invalid dispute_category. Must be one of: {categories}"
        types = [
            "pin_purchase",
            "signature_purchase",
            "online_purchase",
            "atm_withdrawal",
            "atm_deposit",
            "recurring_payment",
            "person_to_person",
        ]
        if transaction_type not in types:
            return f"Error: Invalid transaction_type. Must be one of: {types}"
        pin_states = ["yes_shared", "yes_observed", "no", "unknown"]
        if pin_compromised not in pin_states:
            return f"Error: Invalid pin_compromised. Must be one of: {pin_states}"
        actions = ["keep_active", "freeze_pending_investigation", "close_and_reissue"]
        if card_action not in actions:
            return f"Error: Invalid card_action. Must be one of: {actions}"
        if disputed_amount <= 0:
            return "Error: disputed_amount must be a positive number."
        did = U.dispute_id(user_id, transaction_id)
        is_fraud = dispute_category in ["unauthorized_transaction", "card_present_fraud", "card_not_present_fraud"]
        pin_shared = pin_compromised == "yes_shared"
        record = {
            "dispute_id": did,
            "transaction_id": transaction_id,
            "account_id": account_id,
            "card_id": card_id,
            "user_id": user_id,
            "dispute_category": dispute_category,
            "transaction_date": transaction_date,
            "discovery_date": discovery_date,
            "disputed_amount": disputed_amount,
            "transaction_type": transaction_type,
            "card_in_possession": card_in_possession,
            "pin_compromised": pin_compromised,
            "contacted_merchant": contacted_merchant,
            "police_report_filed": police_report_filed,
            "written_statement_provided": written_statement_provided,
            "provisional_credit_eligible": provisional_credit_eligible,
            "provisional_credit_issued": provisional_credit_eligible,
            "provisional_credit_amount": disputed_amount if provisional_credit_eligible else None,
            "customer_max_liability_amount": customer_max_liability_amount,
            "card_action": card_action,
            "is_fraud_category": is_fraud,
            "pin_shared_voluntarily": pin_shared,
            "submitted_at": U.today_str(),
            "status": "OPEN",
        }
        if not add_to_db("debit_card_disputes", did, record, self.db):
            return "Error: Dispute may have already been filed for this transaction."
        parts = [
            f"Dispute ID: {did}",
            f"Transaction: {transaction_id}",
            f"Account: {account_id}",
            f"Category: {_title(dispute_category)}",
            f"Disputed Amount: ${disputed_amount:.2f}",
            f"Card Action: {_title(card_action)}",
        ]
        if provisional_credit_eligible:
            parts.append(
                f"Provisional Credit: ISSUED - ${disputed_amount:.2f} credited within 10 business days "
                "per Regulation E."
            )
        else:
            parts.append("Provisional Credit: Not eligible - see Debit Card Provisional Credit Guidelines for details.")
        if pin_shared:
            parts.append(
                "WARNING: Customer indicated PIN was shared voluntarily. This may affect liability determination."
            )
        if is_fraud and not police_report_filed and disputed_amount > 500:
            parts.append("RECOMMENDATION: For fraud disputes over $500, filing a police report is recommended.")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def set_debit_card_recurring_block_7382(self, card_id: str, block_recurring: bool) -> str:
        """Block or allow recurring payments on a debit card."""
        if not card_id:
            return "Error: Missing required parameter: card_id"
        card = self._t("debit_cards").get(card_id)
        if not card:
            return f"Error: Debit card '{card_id}' not found."
        status = card.get("status", "").upper()
        if status != "ACTIVE":
            return (
                f"Error: Cannot update recurring block settings for a card with status '{status}'. Card must be ACTIVE."
            )
        card["recurring_blocked"] = block_recurring
        if block_recurring:
            return (
                f"Recurring payments BLOCKED for debit card {card_id}.\n"
                "All recurring/subscription charges will be declined.\n"
                "One-time purchases are not affected.\n"
                "This change takes effect within 24 hours."
            )
        return (
            f"Recurring payments UNBLOCKED for debit card {card_id}.\n"
            "Recurring/subscription charges will now be allowed.\n"
            "This change takes effect within 24 hours."
        )

    @discoverable(ToolType.READ)
    def get_debit_dispute_status_7483(self, user_id: str) -> str:
        """A customer's debit card disputes."""
        if not user_id:
            return "Error: Missing required parameter: user_id"
        found = lookup("debit_card_disputes", "user_id", user_id, self.db)
        return _history(
            "Debit card dispute history retrieved successfully.",
            "get_debit_dispute_status_7483",
            f"Debit card dispute history for user {user_id}:",
            found,
            "\nNo debit card disputes found for this user.",
        )

    @discoverable(ToolType.READ)
    def get_atm_deposit_images_8473(self, transaction_id: str) -> str:
        """Envelope and check images of a Rho-Bank ATM deposit."""
        if not transaction_id:
            return "Error: Missing required parameter: transaction_id"
        history = self._t("bank_account_transaction_history")
        if transaction_id not in history:
            return f"Error: Transaction '{transaction_id}' not found."
        txn = history[transaction_id]
        if txn.get("type") != "atm_deposit":
            return (
                f"Error: Transaction '{transaction_id}' is not an ATM deposit. This tool only works for ATM "
                "deposit transactions."
            )
        description = txn.get("description", "")
        if "RHO-BANK" not in description.upper() and "RHOBANK" not in description.upper():
            return (
                f"Error: Transaction '{transaction_id}' is from a third-party ATM. Deposit images are only "
                "available for Rho-Bank ATM deposits. For third-party ATM disputes, a chargeback request must "
                "be submitted to the ATM network."
            )
        scans = type(self)._deposit_scans or {}
        if transaction_id in scans:
            scan = scans[transaction_id]
            return (
                "ATM Deposit Image Retrieval Results\n=====================================\n"
                f"Transaction ID: {transaction_id}\n"
                f"ATM: {scan['atm_id']}\n"
                f"Deposit Date: {txn.get('date', 'Unknown')}\n\n"
                f"{scan['envelope_contents']}\n\n"
                f"--- VERIFICATION NOTES ---\n{scan['verification_notes']}\n"
            )
        return (
            "ATM Deposit Image Retrieval Results\n=====================================\n"
            f"Transaction ID: {transaction_id}\n"
            f"ATM: {description}\n"
            f"Deposit Date: {txn.get('date', 'Unknown')}\n"
            f"Amount Recorded: ${abs(txn.get('amount', 0)):.2f}\n\n"
            "--- IMAGE STATUS ---\n"
            "Status: IMAGES NOT AVAILABLE\n"
            "Reason: Deposit images for this transaction have either expired (older than 90 days) or were not "
            "captured by the ATM system.\n\n"
            "For deposits without available images, the dispute will proceed based on customer statement and "
            "ATM journal records only. Investigation timeline may be extended.\n"
        )

    # scanned deposit envelopes of the scenarios (upstream data inside its tool; read from the sources)
    _deposit_scans: Optional[dict[str, dict[str, str]]] = None

    @discoverable(ToolType.WRITE)
    def order_replacement_credit_card_7291(
        self,
        credit_card_account_id: str,
        user_id: str,
        shipping_address: str,
        reason: str,
        expedited_shipping: bool = False,
    ) -> str:
        """Order a replacement credit card (the old one is cancelled)."""
        if not credit_card_account_id or not user_id or not shipping_address or not reason:
            return "Error: Missing required parameters (credit_card_account_id, user_id, shipping_address, reason)."
        reasons = ["fraud_suspected", "lost", "stolen", "damaged", "expired", "other"]
        if reason not in reasons:
            return f"Error: Invalid reason. Must be one of: {reasons}"
        if _no_records(lookup("credit_card_accounts", "account_id", credit_card_account_id, self.db)):
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        order_id = U.credit_card_order_id(credit_card_account_id, user_id, reason)
        record = {
            "order_id": order_id,
            "credit_card_account_id": credit_card_account_id,
            "user_id": user_id,
            "shipping_address": shipping_address,
            "reason": reason,
            "expedited_shipping": expedited_shipping,
            "order_date": U.today_str(),
            "status": "ORDERED",
            "old_card_cancelled": True,
        }
        if not add_to_db("credit_card_orders", order_id, record, self.db):
            return "Error: Order may have already been placed for this card replacement."
        cards = self._t("credit_card_accounts")
        if credit_card_account_id in cards:
            cards[credit_card_account_id]["status"] = "CLOSED"
            cards[credit_card_account_id]["closed_date"] = U.today_str()
        method = "Expedited" if expedited_shipping else "Standard"
        delivery = "2-3 business days" if expedited_shipping else "7-10 business days"
        return "\n".join(
            [
                f"Order ID: {order_id}",
                f"Card Account: {credit_card_account_id}",
                f"Reason: {_title(reason)}",
                f"Shipping Address: {shipping_address}",
                f"Shipping Method: {method}",
                f"Expected Delivery: {delivery}",
                "",
                "The old card has been cancelled for security. The new card will have the same account number but a "
                "new card number and CVV.",
            ]
        )

    @discoverable(ToolType.READ)
    def get_user_dispute_history_7291(self, user_id: str) -> str:
        """A customer's credit card disputes."""
        if not user_id:
            return "Error: Missing required parameter: user_id"
        found = lookup("transaction_disputes", "user_id", user_id, self.db)
        return _history(
            "User transaction dispute history retrieved successfully.",
            "get_user_dispute_history_7291",
            f"Transaction dispute history for user {user_id}:",
            found,
            "\nNo transaction disputes found for this user.",
        )

    @discoverable(ToolType.READ)
    def get_pending_replacement_orders_5765(self, credit_card_account_id: str) -> str:
        """Replacement orders of a credit card account."""
        if not credit_card_account_id:
            return "Error: Missing required parameter: credit_card_account_id"
        found = lookup("credit_card_orders", "credit_card_account_id", credit_card_account_id, self.db)
        return _history(
            "Pending replacement orders check completed.",
            "get_pending_replacement_orders_5765",
            f"Replacement orders for credit card account {credit_card_account_id}:",
            found,
            "\nNo pending replacement orders found for this credit card account.",
        )

    @discoverable(ToolType.WRITE)
    def log_credit_card_closure_reason_4521(
        self, credit_card_account_id: str, user_id: str, closure_reason: str
    ) -> str:
        """Record why a customer wants to close a credit card."""
        if not credit_card_account_id or not user_id or not closure_reason:
            return "Error: Missing required parameters."
        reasons = [
            "annual_fee",
            "not_using_card",
            "found_better_card",
            "unhappy_with_rewards",
            "simplifying_finances",
            "negative_experience",
            "other",
        ]
        if closure_reason not in reasons:
            return f"Error: Invalid closure_reason. Must be one of: {reasons}"
        rid = U.closure_reason_id(credit_card_account_id, user_id)
        add_to_db(
            "credit_card_closure_reasons",
            rid,
            {
                "record_id": rid,
                "credit_card_account_id": credit_card_account_id,
                "user_id": user_id,
                "closure_reason": closure_reason,
                "logged_at": U.today_str(),
                "status": "LOGGED",
            },
            self.db,
        )
        echoed = json.dumps(
            {"credit_card_account_id": credit_card_account_id, "user_id": user_id, "closure_reason": closure_reason},
            indent=2,
        )
        return (
            "Closure reason logged successfully.\n\n"
            "Executed: log_credit_card_closure_reason_4521\n"
            f"Arguments: {echoed}\n"
            f"Closure reason '{closure_reason}' logged for account {credit_card_account_id}."
        )

    @discoverable(ToolType.READ)
    def get_closure_reason_history_8293(self, credit_card_account_id: str) -> str:
        """Closure reasons logged for a credit card account."""
        if not credit_card_account_id:
            return "Error: Missing required parameter: credit_card_account_id"
        found = lookup("credit_card_closure_reasons", "credit_card_account_id", credit_card_account_id, self.db)
        return _history(
            "Closure reason history retrieved successfully.",
            "get_closure_reason_history_8293",
            f"Closure reason history for credit card account {credit_card_account_id}:",
            found,
            "\nNo closure reason records found for this credit card account.",
        )

    @discoverable(ToolType.WRITE)
    def apply_statement_credit_8472(self, user_id: str, credit_card_account_id: str, amount: float, reason: str) -> str:
        """Credit a credit card statement."""
        if not user_id or not credit_card_account_id or amount is None or not reason:
            return "Error: Missing required parameters (user_id, credit_card_account_id, amount, reason)."
        if amount <= 0:
            return "Error: Credit amount must be positive."
        reasons = [
            "goodwill_adjustment",
            "promotional_credit",
            "annual_fee_reversal",
            "late_fee_reversal",
            "interest_charge_reversal",
            "dispute_resolution",
            "price_match",
            "retention_offer",
            "error_correction",
            "other",
        ]
        if reason not in reasons:
            return f"Error: Invalid reason. Must be one of: {reasons}"
        if _no_records(lookup("credit_card_accounts", "account_id", credit_card_account_id, self.db)):
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        tid = U.transaction_id(user_id, "STATEMENT_CREDIT", reason, amount, "Statement Credit")
        today = U.today_str()
        record = {
            "transaction_id": tid,
            "user_id": user_id,
            "credit_card_account_id": credit_card_account_id,
            "credit_card_type": "N/A",
            "merchant_name": "Rho-Bank Statement Credit",
            "transaction_amount": f"-${amount:.2f}",
            "transaction_date": today,
            "category": "Statement Credit",
            "status": "COMPLETED",
            "rewards_earned": "0 points",
            "credit_reason": reason,
        }
        if not add_to_db("credit_card_transaction_history", tid, record, self.db):
            return f"Error: Failed to apply statement credit. Transaction ID '{tid}' may already exist."
        return (
            "Statement credit applied successfully.\n\n"
            "Executed: apply_statement_credit_8472\n"
            f"  - Transaction ID: {tid}\n"
            f"  - User ID: {user_id}\n"
            f"  - Account: {credit_card_account_id}\n"
            f"  - Credit Amount: ${amount:.2f}\n"
            f"  - Reason: {_title(reason)}\n"
            f"  - Date: {today}"
        )

    @discoverable(ToolType.WRITE)
    def apply_credit_card_account_flag_6147(
        self, credit_card_account_id: str, user_id: str, flag_type: str, expiration_date: str, reason: str
    ) -> str:
        """Flag a credit card account (fee waiver, promotional APR, ...)."""
        if not credit_card_account_id or not user_id or not flag_type or not expiration_date or not reason:
            return (
                "Error: Missing required parameters (credit_card_account_id, user_id, flag_type, "
                "expiration_date, reason)."
            )
        flag_types = ["annual_fee_waived", "promotional_apr", "rewards_bonus", "other"]
        if flag_type not in flag_types:
            return f"Error: Invalid flag_type. Must be one of: {flag_types}"
        reasons = ["retention_offer", "loyalty_benefit", "promotional", "error_correction", "other"]
        if reason not in reasons:
            return f"Error: Invalid reason. Must be one of: {reasons}"
        if _no_records(lookup("credit_card_accounts", "account_id", credit_card_account_id, self.db)):
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        fid = U.account_flag_id(credit_card_account_id, flag_type, expiration_date)
        today = U.today_str()
        record = {
            "flag_id": fid,
            "credit_card_account_id": credit_card_account_id,
            "user_id": user_id,
            "flag_type": flag_type,
            "effective_date": today,
            "expiration_date": expiration_date,
            "reason": reason,
            "applied_at": today,
            "status": "ACTIVE",
        }
        if not add_to_db("credit_card_account_flags", fid, record, self.db):
            return f"Error: Failed to apply account flag. Flag ID '{fid}' may already exist."
        return (
            "Account flag applied successfully!\n"
            f"  - Flag ID: {fid}\n"
            f"  - Account: {credit_card_account_id}\n"
            f"  - User ID: {user_id}\n"
            f"  - Flag Type: {_title(flag_type)}\n"
            f"  - Effective Date: {today}\n"
            f"  - Expiration Date: {expiration_date}\n"
            f"  - Reason: {_title(reason)}"
        )

    @discoverable(ToolType.WRITE)
    def close_credit_card_account_7834(self, credit_card_account_id: str, user_id: str) -> str:
        """Close a credit card account."""
        if not credit_card_account_id or not user_id:
            return "Error: Missing required parameters (credit_card_account_id, user_id)."
        if _no_records(lookup("credit_card_accounts", "account_id", credit_card_account_id, self.db)):
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        ok, _ = update_record(
            "credit_card_accounts",
            self.db,
            credit_card_account_id,
            {"status": "CLOSED", "closed_date": U.today_str(), "closed_by": user_id},
        )
        if not ok:
            return f"Error: Failed to close credit card account '{credit_card_account_id}'."
        echoed = json.dumps({"credit_card_account_id": credit_card_account_id, "user_id": user_id}, indent=2)
        return (
            "Credit card account closed successfully.\n\n"
            "Executed: close_credit_card_account_7834\n"
            f"Arguments: {echoed}\n"
            f"Account {credit_card_account_id} has been closed."
        )

    @discoverable(ToolType.WRITE)
    def pay_credit_card_from_checking_9182(
        self, user_id: str, checking_account_id: str, credit_card_account_id: str, amount: float
    ) -> str:
        """Pay a credit card from a checking account."""
        if not user_id or not checking_account_id or not credit_card_account_id or amount is None:
            return "Error: Missing required parameters (user_id, checking_account_id, credit_card_account_id, amount)."
        try:
            amount = float(amount)
            if amount <= 0:
                return "Error: Payment amount must be a positive number."
        except (ValueError, TypeError):
            return "Error: Invalid payment amount. Must be a positive number."
        accounts = self._t("accounts")
        if checking_account_id not in accounts:
            return f"Error: Checking account '{checking_account_id}' not found."
        checking = accounts[checking_account_id]
        if checking.get("user_id") != user_id:
            return f"Error: Checking account '{checking_account_id}' does not belong to user '{user_id}'."
        if checking.get("class") != "checking":
            return f"Error: Account '{checking_account_id}' is not a checking account."
        balance = account_balance(checking)
        if amount > balance:
            return (
                f"Error: Insufficient funds in checking account. Available balance: ${balance:.2f}, "
                f"requested payment: ${amount:.2f}."
            )
        cards = self._t("credit_card_accounts")
        if credit_card_account_id not in cards:
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        card = cards[credit_card_account_id]
        if card.get("user_id") != user_id:
            return f"Error: Credit card account '{credit_card_account_id}' does not belong to user '{user_id}'."
        owed = _money(card.get("current_balance", "$0.00"))
        if amount > owed:
            return (
                f"Error: Payment amount (${amount:.2f}) exceeds credit card balance (${owed:.2f}). "
                "Please specify an amount up to the outstanding balance."
            )
        new_checking, new_owed = balance - amount, owed - amount
        accounts[checking_account_id]["current_holdings"] = f"{new_checking:.2f}"
        cards[credit_card_account_id]["current_balance"] = f"${new_owed:.2f}"
        return (
            "Payment processed successfully!\n"
            f"  - Payment Amount: ${amount:.2f}\n"
            f"  - From Checking Account: {checking_account_id}\n"
            f"  - To Credit Card Account: {credit_card_account_id}\n"
            f"  - New Checking Balance: ${new_checking:.2f}\n"
            f"  - New Credit Card Balance: ${new_owed:.2f}\n"
            "The payment has been applied immediately."
        )

    @discoverable(ToolType.WRITE)
    def submit_credit_limit_increase_request_7392(
        self, credit_card_account_id: str, user_id: str, requested_increase_amount: int
    ) -> str:
        """Ask for a credit limit increase."""
        if not credit_card_account_id or not user_id or requested_increase_amount is None:
            return "Error: Missing required parameters."
        try:
            as_float = float(requested_increase_amount)
        except (TypeError, ValueError):
            return "Error: Invalid requested_increase_amount. Must be a whole number."
        if not as_float.is_integer():
            return "Error: Invalid requested_increase_amount. Must be a whole number of dollars."
        requested_increase_amount = int(as_float)
        if requested_increase_amount <= 0:
            return "Error: Requested increase amount must be positive."
        cards = self._t("credit_card_accounts")
        if credit_card_account_id not in cards:
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        if cards[credit_card_account_id].get("user_id") != user_id:
            return f"Error: Credit card account '{credit_card_account_id}' does not belong to user '{user_id}'."
        rid = U.cli_request_id(credit_card_account_id, user_id, requested_increase_amount)
        record = {
            "request_id": rid,
            "credit_card_account_id": credit_card_account_id,
            "user_id": user_id,
            "requested_increase_amount": requested_increase_amount,
            "submitted_at": U.today_str(),
            "status": "PENDING",
        }
        if not add_to_db("credit_limit_increase_requests", rid, record, self.db):
            return "Error: A similar request may already exist."
        return (
            "Credit limit increase request submitted successfully.\n\n"
            "Executed: submit_credit_limit_increase_request_7392\n"
            f"  - Request ID: {rid}\n"
            f"  - Account: {credit_card_account_id}\n"
            f"  - Requested Increase: ${requested_increase_amount:,}\n"
            "  - Status: PENDING"
        )

    @discoverable(ToolType.READ)
    def get_credit_limit_increase_history_4829(self, credit_card_account_id: str) -> str:
        """Credit limit increase requests of an account."""
        if not credit_card_account_id:
            return "Error: Missing required parameter: credit_card_account_id"
        found = lookup("credit_limit_increase_requests", "credit_card_account_id", credit_card_account_id, self.db)
        return _history(
            "Credit limit increase history retrieved.",
            "get_credit_limit_increase_history_4829",
            f"Credit limit increase history for account {credit_card_account_id}:",
            found,
            "\nNo credit limit increase requests found for this account.",
        )

    @discoverable(ToolType.READ)
    def get_payment_history_6183(self, credit_card_account_id: str, months: int) -> str:
        """Recent payments of a credit card account."""
        if not credit_card_account_id or months is None:
            return "Error: Missing required parameters (credit_card_account_id, months)."
        try:
            months = int(months)
            if months <= 0:
                return "Error: months must be a positive integer."
        except (ValueError, TypeError):
            return "Error: Invalid months value. Must be a positive integer."
        payments = [
            p for p in self._t("payment_history").values() if p.get("credit_card_account_id") == credit_card_account_id
        ]
        if not payments:
            return f"No payment history found for account '{credit_card_account_id}'."
        payments.sort(key=lambda p: p.get("payment_date") or "", reverse=True)
        payments = payments[:months]
        streak = 0
        for p in payments:
            if p.get("status") != "ON_TIME":
                break
            streak += 1
        parts = [
            f"Payment history for account '{credit_card_account_id}' (last {months} months):",
            f"Consecutive on-time payments: {streak}",
        ]
        for p in payments:
            parts.append(
                f"\n  - Payment Date: {p.get('payment_date')}\n"
                f"    Amount: {p.get('amount')}\n"
                f"    Status: {p.get('status')}"
            )
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def approve_credit_limit_increase_5847(
        self, credit_card_account_id: str, user_id: str, new_credit_limit: int
    ) -> str:
        """Approve a credit limit increase."""
        if not credit_card_account_id or not user_id or new_credit_limit is None:
            return "Error: Missing required parameters."
        cards = self._t("credit_card_accounts")
        if credit_card_account_id not in cards:
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        card = cards[credit_card_account_id]
        if card.get("user_id") != user_id:
            return f"Error: Credit card account '{credit_card_account_id}' does not belong to user '{user_id}'."
        ineligible = any(
            d.get("user_id") == user_id and d.get("status") in ["SUBMITTED", "UNDER_REVIEW", "PENDING"]
            for d in self._t("transaction_disputes").values()
        )
        if not ineligible:
            ineligible = any(
                o.get("credit_card_account_id") == credit_card_account_id
                and o.get("status") in ["PENDING", "PROCESSING", "SHIPPED"]
                for o in self._t("credit_card_orders").values()
            )
        if not ineligible:
            ineligible = card.get("account_status", "").upper() in ["PAST_DUE", "DELINQUENT", "COLLECTIONS", "CLOSED"]
        if ineligible:
            return "Error: Credit limit increase request cannot be approved at this time."
        current = _money(card.get("credit_limit", "$0.00"))
        new_limit = float(new_credit_limit)
        cards[credit_card_account_id]["credit_limit"] = f"${new_limit:.2f}"
        today = U.today_str()
        rid = U.cli_request_id(credit_card_account_id, user_id, new_limit - current)
        add_to_db(
            "credit_limit_increase_requests",
            rid,
            {
                "request_id": rid,
                "credit_card_account_id": credit_card_account_id,
                "user_id": user_id,
                "previous_limit": f"${current:.2f}",
                "new_limit": f"${new_limit:.2f}",
                "increase_amount": f"${new_limit - current:.2f}",
                "decision_date": today,
                "status": "APPROVED",
            },
            self.db,
        )
        return (
            "Credit limit increase approved!\n"
            f"  - Account: {credit_card_account_id}\n"
            f"  - Previous Limit: ${current:.2f}\n"
            f"  - New Limit: ${new_limit:.2f}\n"
            f"  - Increase: ${new_limit - current:.2f}\n"
            f"  - Effective Date: {today}\n"
            "The customer will receive a confirmation email."
        )

    @discoverable(ToolType.WRITE)
    def deny_credit_limit_increase_5848(self, credit_card_account_id: str, user_id: str, denial_reason: str) -> str:
        """Deny a credit limit increase."""
        if not credit_card_account_id or not user_id or not denial_reason:
            return "Error: Missing required parameters."
        reasons = [
            "insufficient_account_age",
            "cooldown_period_active",
            "pending_disputes",
            "pending_replacement_card",
            "past_due_balance",
            "high_utilization",
            "insufficient_payment_history",
            "requested_amount_exceeds_limit",
            "other",
        ]
        if denial_reason not in reasons:
            return f"Error: Invalid denial_reason. Must be one of: {', '.join(reasons)}"
        if credit_card_account_id not in self._t("credit_card_accounts"):
            return f"Error: Credit card account '{credit_card_account_id}' not found."
        today = U.today_str()
        rid = U.cli_request_id(credit_card_account_id, user_id, 0.0)
        add_to_db(
            "credit_limit_increase_requests",
            rid,
            {
                "request_id": rid,
                "credit_card_account_id": credit_card_account_id,
                "user_id": user_id,
                "denial_reason": denial_reason,
                "decision_date": today,
                "status": "DENIED",
            },
            self.db,
        )
        return (
            "Credit limit increase request denied.\n"
            f"  - Account: {credit_card_account_id}\n"
            f"  - Denial Reason: {denial_reason}\n"
            f"  - Date: {today}\n"
            "The customer will receive a notification explaining the denial."
        )

    @discoverable(ToolType.WRITE)
    def open_bank_account_4821(self, user_id: str, account_type: str, account_class: str) -> str:
        """Open a bank account."""
        if not user_id or not account_type or not account_class:
            return "Error: Missing required parameters."
        types = ["checking", "savings", "business_checking", "business_savings"]
        if account_type not in types:
            return f"Error: Invalid account_type. Must be one of: {types}"
        mine = [a for a in self._t("accounts").values() if a.get("user_id") == user_id]
        refused = "Error: Account eligibility requirements not met."

        def kind(a: dict) -> Any:
            return a.get("account_type", a.get("class", ""))

        if account_type == "savings":
            if not any(
                kind(a) in ["checking", "personal_checking"]
                and a.get("status", "") in ["OPEN", "ACTIVE"]
                and _age_days(a.get("date_opened", "")) >= 14
                for a in mine
            ):
                return refused
        if account_type == "business_checking":
            if any(a.get("status") == "CLOSED" for a in mine):
                return refused
            if not any(
                kind(a) in ["checking", "personal_checking"] and a.get("status", "") in ["OPEN", "ACTIVE"] for a in mine
            ):
                return refused
        if account_type == "business_savings":
            for a in mine:
                if parse_balance(a.get("current_holdings", a.get("balance", 0))) < 0:
                    return refused
            if not any(
                kind(a) == "business_checking"
                and a.get("status", "") in ["OPEN", "ACTIVE"]
                and _age_days(a.get("date_opened", "")) >= 30
                for a in mine
            ):
                return refused
        account_id = U.hex_id(f"account:{user_id}:{account_type}:{account_class}")
        today = U.today_str()
        record = {
            "account_id": account_id,
            "user_id": user_id,
            "account_type": account_type,
            "account_class": account_class,
            "current_holdings": "0.00",
            "status": "OPEN",
            "date_opened": today,
        }
        if not add_to_db("accounts", account_id, record, self.db):
            return f"Failed to open account: Account ID '{account_id}' may already exist."
        return (
            "Bank account opened successfully!\n"
            f"  - Account ID: {account_id}\n"
            f"  - User ID: {user_id}\n"
            f"  - Account Type: {account_type}\n"
            f"  - Account Class: {account_class}\n"
            "  - Status: OPEN\n"
            "  - Initial Balance: $0.00\n"
            f"  - Date Opened: {today}"
        )

    # early closure fee and window (days) per account level
    _CHECKING_EARLY_CLOSURE = {
        "Light Blue Account": (15, 30),
        "Light Green Account": (15, 30),
        "Green Fee-Free Account": (15, 30),
        "Blue Account": (25, 60),
        "Green Account": (25, 60),
        "Evergreen Account": (50, 90),
        "Bluest Account": (100, 180),
    }
    _SAVINGS_EARLY_CLOSURE = {
        "Bronze Account": (20, 60),
        "Silver Account": (35, 90),
        "Silver Plus Account": (35, 90),
        "Gold Account": (75, 180),
        "Gold Plus Account": (75, 180),
        "Gold Years Account": (75, 180),
        "Platinum Account": (150, 270),
        "Platinum Plus Account": (150, 270),
        "Diamond Elite Account": (150, 270),
    }

    @discoverable(ToolType.WRITE)
    def close_bank_account_7392(
        self, account_id: str, reason: str = "Customer requested closure", waive_early_closure_fee: bool = False
    ) -> str:
        """Close a bank account."""
        if not account_id:
            return "Error: Missing required parameter (account_id)."
        accounts = self._t("accounts")
        if account_id not in accounts:
            return f"Error: Account '{account_id}' not found."
        account = accounts[account_id]
        if account.get("status") == "CLOSED":
            return f"Error: Account '{account_id}' is already closed."
        balance = account_balance(account)
        fee = 0.0
        if not waive_early_closure_fee:
            level, klass, opened = account.get("level", ""), account.get("class", ""), account.get("date_opened", "")
            rule = None
            if klass == "checking":
                rule = self._CHECKING_EARLY_CLOSURE.get(level)
            elif klass == "savings":
                rule = self._SAVINGS_EARLY_CLOSURE.get(level)
            if rule and opened:
                try:
                    age = (U.now() - datetime.strptime(opened, "%m/%d/%Y")).days
                    if age < rule[1]:
                        if balance < rule[0]:
                            return "Error: Account unable to be closed."
                        fee = rule[0]
                except ValueError:
                    pass
        if balance - fee != 0:
            return f"Error: Account balance must be $0.00 before closing. Current balance: ${balance:.2f}"
        today = U.today_str()
        account["status"] = "CLOSED"
        account["date_closed"] = today
        account["closure_reason"] = reason
        account["early_closure_fee_waived"] = waive_early_closure_fee
        return (
            "Bank account closed successfully!\n"
            f"  - Account ID: {account_id}\n"
            f"  - Account Type: {account.get('account_type', 'N/A')}\n"
            f"  - Account Class: {account.get('account_class', 'N/A')}\n"
            "  - Status: CLOSED\n"
            f"  - Date Closed: {today}\n"
            f"  - Reason: {reason}\n"
            f"  - Early Closure Fee Waived: {'Yes' if waive_early_closure_fee else 'No'}"
        )

    @discoverable(ToolType.READ)
    def get_all_user_accounts_by_user_id_3847(self, user_id: str) -> str:
        """A customer's bank and credit card accounts."""
        if not user_id:
            return "Error: Missing required parameter: user_id"
        bank = lookup("accounts", "user_id", user_id, self.db)
        credit = lookup("credit_card_accounts", "user_id", user_id, self.db)
        parts = [
            "User accounts retrieved successfully.",
            "",
            "Executed: get_all_user_accounts_by_user_id_3847",
            f"Accounts for user {user_id}:",
            "",
            "Bank Accounts:",
        ]
        parts.append(bank if not _no_records(bank) else "  No bank accounts found.")
        parts.append("\nCredit Card Accounts:")
        parts.append(credit if not _no_records(credit) else "  No credit card accounts found.")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def transfer_funds_between_bank_accounts_7291(
        self, source_account_id: str, destination_account_id: str, amount: float
    ) -> str:
        """Move money between two bank accounts."""
        if not source_account_id or not destination_account_id or amount is None:
            return "Error: Missing required parameters (source_account_id, destination_account_id, amount)."
        try:
            amount = float(amount)
        except (ValueError, TypeError):
            return f"Error: Invalid amount '{amount}'. Must be a number."
        if amount <= 0:
            return "Error: Transfer amount must be positive."
        if source_account_id == destination_account_id:
            return "Error: Source and destination accounts cannot be the same."
        accounts = self._t("accounts")
        if source_account_id not in accounts:
            return f"Error: Source account '{source_account_id}' not found."
        if destination_account_id not in accounts:
            return f"Error: Destination account '{destination_account_id}' not found."
        source, dest = accounts[source_account_id], accounts[destination_account_id]
        if source.get("status") not in ("ACTIVE", "OPEN"):
            return f"Error: Source account '{source_account_id}' is not active."
        if dest.get("status") not in ("ACTIVE", "OPEN"):
            return f"Error: Destination account '{destination_account_id}' is not active."
        have = account_balance(source)
        if have < amount:
            return (
                f"Error: Insufficient funds. Source account balance is ${have:.2f}, "
                f"but transfer amount is ${amount:.2f}."
            )
        new_source, new_dest = have - amount, account_balance(dest) + amount
        source["current_holdings"] = f"${new_source:.2f}"
        dest["current_holdings"] = f"${new_dest:.2f}"
        return (
            "Transfer completed successfully!\n"
            f"  - Amount: ${amount:.2f}\n"
            f"  - From: {source_account_id} (new balance: ${new_source:.2f})\n"
            f"  - To: {destination_account_id} (new balance: ${new_dest:.2f})"
        )

    def _credit_account(
        self,
        account_id: str,
        amount: Any,
        credit_type: str,
        kinds: tuple[str, ...],
        types: list[str],
        wrong_kind: str,
        balance_fmt: str,
        seed_prefix: str,
        descriptions: dict[str, str],
    ) -> str:
        """The checking / savings credit tools (same checks, different account class and texts)."""
        if not account_id or amount is None or not credit_type:
            return "Error: Missing required parameters."
        try:
            amount = float(amount)
        except (TypeError, ValueError):
            return "Error: Invalid credit amount. Must be a number."
        if amount <= 0:
            return "Error: Credit amount must be positive."
        if credit_type not in types:
            return f"Error: Invalid credit_type. Must be one of: {types}"
        accounts = self._t("accounts")
        if account_id not in accounts:
            return f"Error: Account '{account_id}' not found."
        account = accounts[account_id]
        if account.get("class", "").lower() not in kinds:
            return wrong_kind.format(account_id=account_id)
        if account.get("status") not in ("ACTIVE", "OPEN"):
            return f"Error: Account '{account_id}' is not active."
        before = account_balance(account)
        after = before + amount
        account["current_holdings"] = balance_fmt.format(after)
        tid = "txn_" + U.hex_id(f"{seed_prefix}:{account_id}:{credit_type}:{amount}:{U.today_str()}")
        self._t("bank_account_transaction_history")[tid] = {
            "transaction_id": tid,
            "account_id": account_id,
            "date": U.today_str(),
            "description": descriptions.get(credit_type, descriptions["*"]),
            "amount": amount,
            "type": credit_type,
            "status": "posted",
        }
        return (
            "\nCredit applied successfully!\n"
            f"  - Transaction ID: {tid}\n"
            f"  - Account: {account_id}\n"
            f"  - Credit Type: {credit_type}\n"
            f"  - Amount: ${amount:.2f}\n"
            f"  - Previous Balance: ${before:.2f}\n"
            f"  - New Balance: ${after:.2f}"
        )

    @discoverable(ToolType.WRITE)
    def apply_checking_account_credit_5829(self, account_id: str, amount: float, credit_type: str) -> str:
        """Credit a checking account (rebate or fee refund)."""
        return self._credit_account(
            account_id,
            amount,
            credit_type,
            ("checking",),
            ["rebate_credit", "fee_refund"],
            "Error: Account '{account_id}' is not a checking account. Credits can only be applied to checking "
            "accounts.",
            "${:.2f}",
            "checking_credit",
            {"rebate_credit": "REBATE CREDIT - CUSTOMER SERVICE", "*": "FEE REFUND - CUSTOMER SERVICE"},
        )

    @discoverable(ToolType.WRITE)
    def apply_savings_account_credit_6831(self, account_id: str, amount: float, credit_type: str) -> str:
        """Credit a savings account (interest correction, fee refund, goodwill)."""
        return self._credit_account(
            account_id,
            amount,
            credit_type,
            ("saving", "savings"),
            ["interest_correction", "fee_refund", "goodwill_credit"],
            "Error: Account '{account_id}' is not a savings account. This tool only applies to savings accounts.",
            "{:.2f}",
            "savings_credit",
            {
                "interest_correction": "INTEREST CORRECTION - CUSTOMER SERVICE",
                "fee_refund": "FEE REFUND - CUSTOMER SERVICE",
                "*": "GOODWILL CREDIT - CUSTOMER SERVICE",
            },
        )

    @discoverable(ToolType.WRITE)
    def submit_interest_discrepancy_report_7294(
        self, account_id: str, user_id: str, expected_apy: float, actual_apy: float, amount_difference: float
    ) -> str:
        """Report an interest calculation discrepancy."""
        if not account_id or not user_id or expected_apy is None or actual_apy is None or amount_difference is None:
            return "Error: Missing required parameters."
        try:
            expected_apy = float(expected_apy)
            actual_apy = float(actual_apy)
            amount_difference = float(amount_difference)
        except (ValueError, TypeError):
            return "Error: expected_apy, actual_apy, and amount_difference must be numbers."
        account = self._t("accounts").get(account_id)
        if account is None:
            return f"Error: Account '{account_id}' not found."
        user = self._t("users").get(user_id)
        if user is None:
            return f"Error: User '{user_id}' not found."
        rid = "IDR_" + U.hex_id(f"interest_report:{account_id}:{user_id}:{expected_apy}:{actual_apy}:{U.today_str()}")
        # upstream files the report in a table its DB does not have: nothing is stored
        add_to_db("interest_discrepancy_reports", rid, {}, self.db)
        return (
            "\nInterest Discrepancy Report Submitted Successfully!\n"
            f"  - Report ID: {rid}\n"
            f"  - Account: {account_id} ({account.get('level', 'Unknown')})\n"
            f"  - Customer: {user.get('name', 'Unknown')}\n"
            f"  - Expected APY: {expected_apy}%\n"
            f"  - Actual APY: {actual_apy}%\n"
            f"  - APY Difference: {round(expected_apy - actual_apy, 4)}%\n"
            f"  - Amount Difference: ${amount_difference:.2f}\n"
            "  - Status: PENDING_REVIEW\n"
            "\nThe backend team will investigate this discrepancy and ensure "
            "correct APY calculations are applied going forward."
        )

    @discoverable(ToolType.READ)
    def get_bank_account_transactions_9173(self, account_id: str) -> str:
        """A bank account's transactions, most recent first."""
        if not account_id:
            return "Error: Missing required parameter: account_id"
        if account_id not in self._t("accounts"):
            return f"Error: Account '{account_id}' not found."
        found = query_db("bank_account_transaction_history", db=self.db, return_ids=True, account_id=account_id)

        def when(item: tuple) -> datetime:
            text = str(item[1].get("date", ""))
            for fmt in ("%m/%d/%Y %H:%M:%S", "%m/%d/%Y"):
                try:
                    return datetime.strptime(text, fmt)
                except ValueError:
                    continue
            return datetime.min

        found = sorted(found, key=when, reverse=True)  # stable: same-date records keep their stored order
        parts = [
            "Bank account transactions retrieved successfully.",
            "",
            "Executed: get_bank_account_transactions_9173",
            f"Transactions for account {account_id}:",
        ]
        if found:
            parts.append(format_records("bank_account_transaction_history", found))
        else:
            parts.append("\nNo transactions found for this account.")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def order_debit_card_5739(
        self,
        account_id: str,
        user_id: str,
        delivery_option: str,
        delivery_fee: float,
        card_design: str,
        design_fee: float,
        shipping_address: str,
        excess_replacement_fee: Optional[float] = None,
    ) -> str:
        """Order a debit card for a checking account."""
        excess_replacement_fee = excess_replacement_fee or 0
        try:
            delivery_fee = float(delivery_fee) if delivery_fee is not None else None
        except (TypeError, ValueError):
            return "Error: delivery_fee must be a number."
        try:
            design_fee = float(design_fee) if design_fee is not None else None
        except (TypeError, ValueError):
            return "Error: design_fee must be a number."
        try:
            excess_replacement_fee = float(excess_replacement_fee)
        except (TypeError, ValueError):
            excess_replacement_fee = 0
        if not all(
            [
                account_id,
                user_id,
                delivery_option,
                delivery_fee is not None,
                card_design,
                design_fee is not None,
                shipping_address,
            ]
        ):
            return (
                "Error: Missing required parameters. Required: account_id, user_id, delivery_option, "
                "delivery_fee, card_design, design_fee, shipping_address."
            )
        deliveries = ["STANDARD", "EXPEDITED", "RUSH"]
        if delivery_option.upper() not in deliveries:
            return f"Error: Invalid delivery_option. Must be one of: {deliveries}"
        delivery_option = delivery_option.upper()
        designs = ["CLASSIC", "PREMIUM", "CUSTOM"]
        if card_design.upper() not in designs:
            return f"Error: Invalid card_design. Must be one of: {designs}"
        card_design = card_design.upper()
        accounts = self._t("accounts")
        if account_id not in accounts:
            return f"Error: Account '{account_id}' not found."
        account = accounts[account_id]
        if account.get("class") != "checking":
            return (
                f"Error: Debit cards can only be ordered for checking accounts. Account '{account_id}' is a "
                f"{account.get('class')} account."
            )
        if account.get("status") != "OPEN":
            return f"Error: Account must be OPEN. Account '{account_id}' has status: {account.get('status')}"
        if account.get("user_id") != user_id:
            return f"Error: Account '{account_id}' does not belong to user '{user_id}'."
        try:
            holdings = float(str(account.get("current_holdings", "0")).replace(",", ""))
        except ValueError:
            holdings = 0.0
        if holdings < 25.0:
            return f"Error: Account must have a minimum balance of $25. Current balance: ${holdings:.2f}"
        for order in self._t("debit_card_orders").values():
            if order.get("account_id") == account_id and order.get("status") == "PENDING":
                return f"Error: There is already a pending debit card order for account '{account_id}'."
        cards = self._t("debit_cards")
        if sum(1 for c in cards.values() if c.get("account_id") == account_id and c.get("status") == "ACTIVE") >= 1:
            return (
                f"Error: Account '{account_id}' already has an active debit card. Maximum 1 active card per "
                "checking account."
            )
        total = delivery_fee + design_fee + excess_replacement_fee
        if total > 0 and holdings < total:
            return f"Error: Insufficient funds for fees. Total fees: ${total:.2f}. Current balance: ${holdings:.2f}"
        expected = {"STANDARD": "7-10 business days", "EXPEDITED": "3-5 business days", "RUSH": "1-2 business days"}[
            delivery_option
        ]
        order_date = U.today_str()
        order_id = U.debit_card_order_id(account_id, user_id, delivery_option)
        order = {
            "order_id": order_id,
            "account_id": account_id,
            "user_id": user_id,
            "delivery_option": delivery_option,
            "card_design": card_design,
            "shipping_address": shipping_address,
            "delivery_fee": delivery_fee,
            "design_fee": design_fee,
            "excess_replacement_fee": excess_replacement_fee,
            "total_fee": total,
            "order_date": order_date,
            "expected_delivery": expected,
            "status": "PENDING",
        }
        if not add_to_db("debit_card_orders", order_id, order, self.db):
            return "Error: Failed to create debit card order. Order may already exist."
        if total > 0:
            accounts[account_id]["current_holdings"] = f"{holdings - total:.2f}"
            fee_parts = []
            if delivery_fee > 0:
                fee_parts.append(f"Delivery ${delivery_fee}")
            if design_fee > 0:
                fee_parts.append(f"Design ${design_fee}")
            if excess_replacement_fee > 0:
                fee_parts.append(f"Excess Replacement ${excess_replacement_fee:.0f}")
            fee_txn = f"btxn_dcfee_{order_id[-8:]}"
            add_to_db(
                "bank_account_transaction_history",
                fee_txn,
                {
                    "transaction_id": fee_txn,
                    "account_id": account_id,
                    "date": order_date,
                    "description": f"DEBIT CARD ORDER FEE - {', '.join(fee_parts)}",
                    "amount": -total,
                    "type": "debit_card_fee",
                    "status": "posted",
                },
                self.db,
            )
        card_id = U.debit_card_id(account_id, user_id, order_date)
        seed = f"card_details:{card_id}"
        last4 = "".join(c for c in U.hex_id(seed + ":last4", 8) if c.isdigit())[:4].zfill(4)
        cvv = "".join(c for c in U.hex_id(seed + ":cvv", 6) if c.isdigit())[:3].zfill(3)
        holder = "CARDHOLDER"
        users = self._t("users")
        if user_id in users:
            holder = users[user_id].get("name", "CARDHOLDER").upper()
        try:
            month, _, year = order_date.split("/")
            day = "31" if month in ["01", "03", "05", "07", "08", "10", "12"] else ("28" if month == "02" else "30")
            expiry = f"{month}/{day}/{int(year) + 4}"
        except (ValueError, IndexError):
            expiry = "12/31/2029"
        existing = [c for c in cards.values() if c.get("account_id") == account_id]
        closed = next((c for c in existing if c.get("status") == "CLOSED"), None)
        if closed:
            why = closed.get("closure_reason", "first_card")
            if why in ["lost", "stolen", "fraud", "fraud_suspected"]:
                issue = why if why != "fraud_suspected" else "fraud"
            else:
                issue = "first_card"
        elif existing:
            issue = "first_card"
        else:
            issue = "new_account"
        add_to_db(
            "debit_cards",
            card_id,
            {
                "card_id": card_id,
                "account_id": account_id,
                "user_id": user_id,
                "cardholder_name": holder,
                "last_4_digits": last4,
                "cvv": cvv,
                "status": "PENDING",
                "issue_date": order_date,
                "expiration_date": expiry,
                "card_design": card_design,
                "issue_reason": issue,
            },
            self.db,
        )
        parts = [
            "Debit Card Order Confirmed",
            f"Order ID: {order_id}",
            f"Card ID: {card_id}",
            f"Linked Account: {account_id}",
            f"Delivery Option: {delivery_option}",
            f"Card Design: {card_design}",
            f"Shipping Address: {shipping_address}",
            f"Expected Delivery: {expected}",
            "",
            "Note: Card will arrive with status PENDING. Customer must call to activate after receiving the card.",
        ]
        if total > 0:
            details = []
            if delivery_fee > 0:
                details.append(f"Delivery: ${delivery_fee}")
            if design_fee > 0:
                details.append(f"Design: ${design_fee}")
            if excess_replacement_fee > 0:
                details.append(f"Excess Replacement: ${excess_replacement_fee:.0f}")
            parts.append(f"Total Fees: ${total:.2f} ({', '.join(details)}) - CHARGED to account {account_id}")
            parts.append(f"New Account Balance: ${holdings - total:.2f}")
        else:
            parts.append("Total Fees: $0 (No additional charges)")
        return "\n".join(parts)

    def _activate(
        self,
        tool_name: str,
        reasons: list[str],
        card_id: str,
        last_4_digits: str,
        expiration_date: str,
        cvv: str,
        pin: str,
    ) -> Union[str, tuple[dict, list[tuple[str, dict]]]]:
        """Shared part of the activation tools: checks (an error text), then the card is ACTIVE: (the card, the other
        active cards)."""
        args = {
            "card_id": card_id,
            "last_4_digits": last_4_digits,
            "expiration_date": expiration_date,
            "cvv": cvv,
            "pin": pin,
        }
        error, card = check_activation(args, self.db, reasons, tool_name)
        if error or card is None:  # (a card comes back exactly when there is no error)
            return error or ""
        card["status"] = "ACTIVE"
        card["activated_date"] = U.today_str()
        others = [
            (cid, c)
            for cid, c in self._t("debit_cards").items()
            if cid != card_id and c.get("account_id") == card.get("account_id") and c.get("status") == "ACTIVE"
        ]
        return card, others

    @discoverable(ToolType.WRITE)
    def activate_debit_card_8291(
        self, card_id: str, last_4_digits: str, expiration_date: str, cvv: str, pin: str
    ) -> str:
        """Activate a first debit card."""
        result = self._activate(
            "activate_debit_card_8291", ["new_account", "first_card"], card_id, last_4_digits, expiration_date, cvv, pin
        )
        if isinstance(result, str):
            return result
        card, others = result
        off = []
        for cid, other in others:
            other["status"] = "DEACTIVATED"
            other["deactivated_date"] = U.today_str()
            other["deactivation_reason"] = "New card activated"
            off.append(cid)
        parts = [
            "New Debit Card Activation Successful",
            f"Card ID: {card_id}",
            "Status: ACTIVE",
            f"Activation Date: {U.today_str()}",
            "",
            "Your card is now ready to use at any ATM or point of sale terminal.",
            "For security, please sign the back of your card.",
        ]
        if off:
            parts.append(f"\nNote: Previous card(s) have been deactivated: {', '.join(off)}")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def activate_debit_card_8292(
        self, card_id: str, last_4_digits: str, expiration_date: str, cvv: str, pin: str
    ) -> str:
        """Activate a replacement debit card (lost, stolen, fraud)."""
        result = self._activate(
            "activate_debit_card_8292", ["lost", "stolen", "fraud"], card_id, last_4_digits, expiration_date, cvv, pin
        )
        if isinstance(result, str):
            return result
        card, others = result
        issue = card.get("issue_reason", "lost")
        off = []
        for cid, other in others:
            other["status"] = "DEACTIVATED"
            other["deactivated_date"] = U.today_str()
            other["deactivation_reason"] = f"Replacement card activated ({issue})"
            off.append(cid)
        parts = [
            "Replacement Debit Card Activation Successful",
            f"Card ID: {card_id}",
            f"Replacement Reason: {_title(issue)}",
            "Status: ACTIVE",
            f"Activation Date: {U.today_str()}",
            "",
            "Your replacement card is now ready to use.",
            "",
            "IMPORTANT SECURITY REMINDERS:",
            "- Please review your recent transactions for any unauthorized charges",
            "- Report any suspicious activity immediately",
        ]
        if issue == "fraud":
            parts.append("- Since fraud was suspected, we recommend changing your online banking password")
        if off:
            parts.append(f"\nPrevious card(s) have been deactivated for security: {', '.join(off)}")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def activate_debit_card_8293(
        self, card_id: str, last_4_digits: str, expiration_date: str, cvv: str, pin: str
    ) -> str:
        """Activate a reissued debit card (expired, damaged, upgrade, bank reissue)."""
        result = self._activate(
            "activate_debit_card_8293",
            ["expired", "damaged", "upgrade", "bank_reissue"],
            card_id,
            last_4_digits,
            expiration_date,
            cvv,
            pin,
        )
        if isinstance(result, str):
            return result
        card, others = result
        issue = card.get("issue_reason", "expired")
        grace = []
        for cid, other in others:
            other["status"] = "GRACE_PERIOD"
            other["grace_period_ends"] = U.today_str()
            other["deactivation_reason"] = f"Reissued card activated ({issue})"
            grace.append(cid)
        parts = [
            "Reissued Debit Card Activation Successful",
            f"Card ID: {card_id}",
            f"Reissue Reason: {_title(issue)}",
            "Status: ACTIVE",
            f"Activation Date: {U.today_str()}",
            "",
            "Your reissued card is now ready to use.",
        ]
        if grace:
            parts.append(
                f"\nNote: Your previous card(s) ({', '.join(grace)}) will remain active for 24 hours as a grace period."
            )
            parts.append("After 24 hours, the old card(s) will be automatically deactivated.")
        if issue in ["expired", "bank_reissue"]:
            parts.append(
                "\nReminder: If your card number changed, please update any recurring payments with your "
                "new card details."
            )
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def close_debit_card_4721(self, card_id: str, reason: str) -> str:
        """Close a debit card for good."""
        if not card_id or not reason:
            return "Error: Missing required parameters. Required: card_id, reason."
        reasons = ["lost", "stolen", "fraud_suspected", "damaged", "no_longer_needed", "account_closing"]
        if reason.lower() not in reasons:
            return f"Error: Invalid reason. Must be one of: {reasons}"
        reason = reason.lower()
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if card.get("status") not in ["ACTIVE", "PENDING"]:
            return (
                f"Error: Debit card '{card_id}' cannot be closed. Current status: {card.get('status')}. "
                "Only ACTIVE or PENDING cards can be closed."
            )
        before = card.get("status")
        card["status"] = "CLOSED"
        card["closed_date"] = U.today_str()
        card["closure_reason"] = reason
        parts = [
            "Debit Card Closed Successfully",
            f"Card ID: {card_id}",
            f"Previous Status: {before}",
            "New Status: CLOSED",
            f"Closure Reason: {_title(reason)}",
            f"Closure Date: {U.today_str()}",
            "",
        ]
        if reason in ["lost", "stolen", "fraud_suspected"]:
            parts.append("IMPORTANT: This card has been immediately deactivated for security.")
            parts.append("Any pending transactions may still be processed.")
            if reason == "fraud_suspected":
                parts.append(
                    "Please advise the customer to review recent transactions and file disputes for any "
                    "unauthorized charges."
                )
                parts.append("Also recommend changing their online banking password.")
        parts.append("")
        parts.append(
            "Note: This card cannot be reactivated. If the customer needs a new card, they can order one "
            "through the standard ordering process."
        )
        parts.append("Any recurring payments linked to this card will need to be updated with new payment information.")
        return "\n".join(parts)

    @discoverable(ToolType.WRITE)
    def freeze_debit_card_3892(self, card_id: str) -> str:
        """Freeze a debit card for now."""
        if not card_id:
            return "Error: Missing required parameter: card_id."
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if card.get("status") == "FROZEN":
            return f"Error: Debit card '{card_id}' is already frozen."
        if card.get("status") != "ACTIVE":
            return (
                f"Error: Debit card '{card_id}' cannot be frozen. Current status: {card.get('status')}. "
                "Only ACTIVE cards can be frozen."
            )
        card["status"] = "FROZEN"
        card["frozen_date"] = U.today_str()
        return "\n".join(
            [
                "Debit Card Frozen Successfully",
                f"Card ID: {card_id}",
                "Status: FROZEN",
                f"Frozen Date: {U.today_str()}",
                "",
                "While frozen:",
                "- All new purchase transactions will be declined",
                "- Recurring payments and subscriptions will be declined",
                "- Pending transactions already authorized may still process",
                "",
                "To unfreeze, the customer can call customer service or use the mobile app.",
                "If the card is confirmed lost or stolen, recommend closing the card permanently instead.",
            ]
        )

    @discoverable(ToolType.WRITE)
    def unfreeze_debit_card_3893(self, card_id: str) -> str:
        """Unfreeze a frozen debit card."""
        if not card_id:
            return "Error: Missing required parameter: card_id."
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if card.get("status") == "ACTIVE":
            return f"Error: Debit card '{card_id}' is already active."
        if card.get("status") != "FROZEN":
            return (
                f"Error: Debit card '{card_id}' cannot be unfrozen. Current status: {card.get('status')}. "
                "Only FROZEN cards can be unfrozen."
            )
        account_id = card.get("account_id")
        accounts = self._t("accounts")
        if account_id and account_id in accounts and accounts[account_id].get("status") != "OPEN":
            return f"Error: The linked checking account '{account_id}' is no longer open. Card cannot be unfrozen."
        card["status"] = "ACTIVE"
        card["unfrozen_date"] = U.today_str()
        return "\n".join(
            [
                "Debit Card Unfrozen Successfully",
                f"Card ID: {card_id}",
                "Status: ACTIVE",
                f"Unfrozen Date: {U.today_str()}",
                "",
                "The card is now active and ready to use immediately.",
                "All transactions will process normally.",
            ]
        )

    @discoverable(ToolType.WRITE)
    def clear_debit_card_fraud_alert_4892(self, card_id: str, reason: str) -> str:
        """Clear a fraud alert or velocity block."""
        if not card_id:
            return "Error: Missing required parameter: card_id."
        if not reason:
            return "Error: Missing required parameter: reason."
        reasons = ["customer_verified", "velocity_clear"]
        if reason not in reasons:
            return f"Error: Invalid reason '{reason}'. Must be one of: {', '.join(reasons)}"
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if reason == "velocity_clear":
            if not card.get("velocity_blocked", False):
                return f"Error: Debit card '{card_id}' does not have an active velocity block."
            card["velocity_blocked"] = False
            card["velocity_cleared_date"] = U.today_str()
            return "\n".join(
                [
                    "Velocity Block Cleared Successfully",
                    f"Card ID: {card_id}",
                    f"Cleared Date: {U.today_str()}",
                    "",
                    "The card is now unblocked and ready for normal use.",
                    "The velocity monitoring will continue - if the same unusual patterns recur,",
                    "the card may be blocked again automatically.",
                ]
            )
        if reason == "customer_verified":
            if not card.get("fraud_alert_active", False):
                return f"Error: Debit card '{card_id}' does not have an active fraud alert."
            if card.get("alert_source") == "bank_initiated":
                return (
                    "Error: BANK_INITIATED_ALERT - This fraud alert was initiated by the bank's fraud detection "
                    "system and cannot be cleared by customer service agents. Please transfer the customer to "
                    "the security team using transfer_to_human_agents."
                )
            card["fraud_alert_active"] = False
            card["alert_source"] = None
            card["fraud_alert_cleared_date"] = U.today_str()
            return "\n".join(
                [
                    "Fraud Alert Cleared Successfully",
                    f"Card ID: {card_id}",
                    f"Cleared Date: {U.today_str()}",
                    "",
                    "The fraud alert has been removed from the card.",
                    "All transactions will process normally.",
                    "",
                    "Remind the customer to review recent transactions and report any unauthorized charges.",
                ]
            )
        return "Error: Unexpected error processing the request."

    @discoverable(ToolType.WRITE)
    def reset_debit_card_pin_6284(self, card_id: str, last_4_digits: str, new_pin: str) -> str:
        """Reset a forgotten debit card PIN."""
        if not all([card_id, last_4_digits, new_pin]):
            return "Error: Missing required parameters. Required: card_id, last_4_digits, new_pin."
        if not last_4_digits.isdigit() or len(last_4_digits) != 4:
            return "Error: Last 4 digits must be exactly 4 digits."
        problem = pin_problem(new_pin)
        if problem:
            return f"Error: {problem}"
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if card.get("last_4_digits") != last_4_digits:
            return "Error: Card verification failed. The last 4 digits do not match our records."
        if card.get("status") != "ACTIVE":
            return (
                f"Error: Cannot reset PIN. Card status is {card.get('status')}. Only ACTIVE cards can have their "
                "PIN reset."
            )
        card["pin_last_changed"] = U.today_str()
        card["pin_locked"] = False
        card["pin_attempts_remaining"] = 3
        return "\n".join(
            [
                "Debit Card PIN Reset Successfully",
                f"Card ID: {card_id}",
                f"PIN Changed: {U.today_str()}",
                "",
                "The new PIN is effective immediately.",
                "Your card has been unlocked and is ready to use.",
                "Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.",
                "",
                "Security reminder: Never share your PIN with anyone.",
            ]
        )

    @discoverable(ToolType.WRITE)
    def change_debit_card_pin_6285(self, card_id: str, current_pin: str, new_pin: str) -> str:
        """Change a known debit card PIN."""
        if not all([card_id, current_pin, new_pin]):
            return "Error: Missing required parameters. Required: card_id, current_pin, new_pin."
        if not current_pin.isdigit() or len(current_pin) != 4:
            return "Error: Current PIN must be exactly 4 digits."
        problem = pin_problem(new_pin)
        if problem:
            return f"Error: {problem}"
        if current_pin == new_pin:
            return "Error: New PIN must be different from current PIN."
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if card.get("status") != "ACTIVE":
            return (
                f"Error: Cannot change PIN. Card status is {card.get('status')}. Only ACTIVE cards can have "
                "their PIN changed."
            )
        card["pin_last_changed"] = U.today_str()
        return "\n".join(
            [
                "Debit Card PIN Changed Successfully",
                f"Card ID: {card_id}",
                f"PIN Changed: {U.today_str()}",
                "",
                "The new PIN is effective immediately.",
                "Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.",
                "",
                "Security reminder: Never share your PIN with anyone.",
            ]
        )

    @discoverable(ToolType.READ)
    def get_debit_cards_by_account_id_7823(self, account_id: str) -> str:
        """Debit cards of a checking account."""
        if not account_id:
            return "Error: Missing required parameter 'account_id'."
        accounts = self._t("accounts")
        if account_id not in accounts:
            return f"Error: Account '{account_id}' not found."
        if accounts[account_id].get("class", "").lower() not in ["checking", "business_checking"]:
            return (
                f"Error: Account '{account_id}' is not a checking account. Debit cards are only available for "
                "checking accounts."
            )
        found = []
        for cid, card in self._t("debit_cards").items():
            if card.get("account_id") != account_id:
                continue
            info = {"card_id": cid}
            info.update(card)
            if "last_4_digits" in info and "card_number_last_4" not in info:
                info["card_number_last_4"] = info.pop("last_4_digits")
            if "issue_date" in info and "date_issued" not in info:
                info["date_issued"] = info.pop("issue_date")
            elif "created_date" in info and "date_issued" not in info:
                info["date_issued"] = info.pop("created_date")
            found.append(info)
        if not found:
            return f"No debit cards found for account '{account_id}'."
        found.sort(key=lambda c: c.get("date_issued") or "", reverse=True)
        return json.dumps(found, indent=2)

    _DEFAULT_ATM_LIMITS = {
        "blue account": 500,
        "green account": 600,
        "light blue account": 400,
        "green fee-free account": 500,
        "evergreen account": 750,
        "bluest account": 1500,
        "dark green account": 300,
        "gold years account": 600,
        "purple account": 1000,
    }

    @discoverable(ToolType.WRITE)
    def request_temporary_debit_card_limit_increase_8374(self, card_id: str, limit_type: str, new_limit: int) -> str:
        """Raise a debit card's daily ATM or purchase limit for 24 hours."""
        if not card_id:
            return "Error: Missing required parameter: card_id."
        if not limit_type:
            return "Error: Missing required parameter: limit_type."
        if limit_type not in ["atm", "purchase"]:
            return f"Error: Invalid limit_type '{limit_type}'. Must be 'atm' or 'purchase'."
        if new_limit is None:
            return "Error: Missing required parameter: new_limit."
        try:
            as_float = float(new_limit)
        except (ValueError, TypeError):
            return f"Error: new_limit must be an integer, got '{new_limit}'."
        if not as_float.is_integer():
            return f"Error: new_limit must be an integer, got '{as_float}'."
        new_limit = int(as_float)
        if new_limit <= 0:
            return "Error: new_limit must be a positive amount."
        cards = self._t("debit_cards")
        if card_id not in cards:
            return f"Error: Debit card '{card_id}' not found."
        card = cards[card_id]
        if card.get("status") != "ACTIVE":
            return (
                f"Error: Debit card '{card_id}' is not active. Current status: {card.get('status')}. Only ACTIVE "
                "cards can have limit increases."
            )
        account_id = card.get("account_id")
        accounts = self._t("accounts")
        if not account_id or account_id not in accounts:
            return f"Error: Could not find linked account for debit card '{card_id}'."
        account = accounts[account_id]
        if account.get("status") != "OPEN":
            return (
                f"Error: The linked account '{account_id}' is not in good standing. Account status: "
                f"{account.get('status')}."
            )
        opened = account.get("date_opened")
        if opened:
            try:
                age = (datetime.strptime(U.today_str(), "%m/%d/%Y") - datetime.strptime(opened, "%m/%d/%Y")).days
                if age < 60:
                    return (
                        f"Error: Account must be at least 60 days old for a temporary limit increase. "
                        f"Account age: {age} days."
                    )
            except ValueError:
                pass
        if limit_type == "atm":
            current = card.get("daily_atm_limit")
            field, label = "daily_atm_limit", "Daily ATM Withdrawal Limit"
            if current is None:
                level = account.get("level", "").lower()
                if "light green" in level:
                    return (
                        "Error: Light Green Account (teen checking) cards have policy-based limits that cannot "
                        "be modified. The daily ATM withdrawal limit of $150 is fixed by account policy for "
                        "safety reasons. The customer may request the parent/guardian to withdraw cash from "
                        "their own account if needed."
                    )
                current = self._DEFAULT_ATM_LIMITS.get(level)
                if current is None:
                    return (
                        f"Error: Could not determine the default ATM limit for account type "
                        f"'{account.get('level')}'. Please verify the account type."
                    )
        else:
            current = card.get("daily_purchase_limit")
            field, label = "daily_purchase_limit", "Daily Purchase Limit"
        if current is None:
            return (
                f"Error: The card does not have a {label.lower()} configured. This may be a restricted account "
                "type where limits are set by account policy and cannot be modified."
            )
        ceiling = int(current * 1.5)
        if new_limit > ceiling:
            return (
                f"Error: Requested limit ${new_limit} exceeds the maximum allowed temporary increase. Maximum "
                f"temporary limit is ${ceiling} (150% of current ${current} limit)."
            )
        if new_limit <= current:
            return f"Error: Requested limit ${new_limit} is not higher than the current limit of ${current}."
        card[field] = new_limit
        card[f"temporary_{limit_type}_limit_increase"] = True
        card[f"original_{limit_type}_limit"] = current
        card[f"temporary_{limit_type}_limit_expires"] = U.today_str()
        return "\n".join(
            [
                f"Temporary {label} Increase Granted Successfully",
                f"Card ID: {card_id}",
                f"Previous Limit: ${current}",
                f"New Temporary Limit: ${new_limit}",
                f"Increase Amount: ${new_limit - current}",
                "",
                "Important Information:",
                "- This temporary increase expires in 24 hours",
                f"- After expiration, the limit will revert to ${current}",
                "- Only one temporary increase is allowed per 24-hour period",
                "",
                "Note: If the customer is at a third-party (non-Rho-Bank) ATM, that ATM may have its own",
                "per-transaction or daily limits that Rho-Bank cannot override. The customer may need to",
                "use a Rho-Bank ATM or make multiple smaller withdrawals at third-party ATMs.",
            ]
        )
