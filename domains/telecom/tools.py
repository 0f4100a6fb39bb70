"""Agent tools of the telecom domain (13), plus the init helpers and assertions tasks call by name.

The DB is the plain dump of :class:`TelecomDB`: lists of dicts scanned in file order, as upstream scans its
lists (first match wins). Arguments arrive unvalidated, as upstream: a wrong type fails (or succeeds)
exactly where Python makes it fail, and wrong-typed values are stored as given. Records handed back to the
agent are the live ones, serialised after the post-call sync -- as upstream serialises its live models.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timedelta
from typing import List

from tau2_gym.core.db import plain
from tau2_gym.core.tools import AsModel, Toolkit, ToolType, tool
from tau2_gym.domains.telecom.data_model import Bill, BillStatus, LineItem, LineStatus

TODAY = date(2025, 2, 25)  # the domain's frozen clock
NOW = datetime(2025, 2, 25, 12, 8, 0)

_ACTIVE = LineStatus.ACTIVE.value
_SUSPENDED = LineStatus.SUSPENDED.value
_PENDING = LineStatus.PENDING_ACTIVATION.value
_DRAFT = BillStatus.DRAFT.value
_AWAITING = BillStatus.AWAITING_PAYMENT.value
_PAID = BillStatus.PAID.value
_OVERDUE = BillStatus.OVERDUE.value


def get_today() -> date:
    return TODAY


def get_now() -> datetime:
    return NOW


class TelecomTools(Toolkit):
    """The agent's toolkit. Class name and signatures are upstream's (they show in argument errors)."""

    # ------------------------------------------------------------------ lookups (first match, file order)

    def _get_line_by_phone(self, phone_number: str) -> dict:
        for line in self.db.lines:
            if line["phone_number"] == phone_number:
                return line
        raise ValueError(f"Line with phone number {phone_number} not found")

    def _get_line_by_id(self, line_id: str) -> dict:
        for line in self.db.lines:
            if line["line_id"] == line_id:
                return line
        raise ValueError(f"Line with ID {line_id} not found")

    def _get_plan_by_id(self, plan_id: str) -> dict:
        for plan in self.db.plans:
            if plan["plan_id"] == plan_id:
                return plan
        raise ValueError(f"Plan with ID {plan_id} not found")

    def _get_device_by_id(self, device_id: str) -> dict:
        for device in self.db.devices:
            if device["device_id"] == device_id:
                return device
        raise ValueError(f"Device with ID {device_id} not found")

    def _get_bill_by_id(self, bill_id: str) -> dict:
        for bill in self.db.bills:
            if bill["bill_id"] == bill_id:
                return bill
        raise ValueError(f"Bill with ID {bill_id} not found")

    def _customer_by_id(self, customer_id: str) -> dict:
        for customer in self.db.customers:
            if customer["customer_id"] == customer_id:
                return customer
        raise ValueError(f"Customer with ID {customer_id} not found")

    def _customer_by_phone(self, phone_number: str) -> dict:
        for customer in self.db.customers:
            if customer["phone_number"] == phone_number:
                return customer
            for line_id in customer["line_ids"]:
                line = self._get_line_by_id(line_id)
                if line and line["phone_number"] == phone_number:
                    return customer
        raise ValueError(f"Customer with phone number {phone_number} not found")

    def _get_target_line(self, customer_id: str, line_id: str) -> dict:
        customer = self._customer_by_id(customer_id)
        if line_id not in customer["line_ids"]:
            raise ValueError(f"Line {line_id} not found for customer {customer_id}")
        return self._get_line_by_id(line_id)

    def _get_bills_awaiting_payment(self, customer: dict) -> List[dict]:
        bills = []
        for bill_id in customer["bill_ids"]:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill["status"] == _AWAITING:
                bills.append(bill)
        return bills

    def _set_bill_to_paid(self, bill_id: str) -> str:
        self._get_bill_by_id(bill_id)["status"] = _PAID
        return f"Bill {bill_id} set to paid"

    # ------------------------------------------------------------------ customer lookup

    @tool(ToolType.READ)
    def get_customer_by_phone(self, phone_number: str):
        """Customer whose contact number, or one of whose lines, has this phone number.

        Args:
            phone_number: Number to look for.
        """
        return AsModel(self._customer_by_phone(phone_number))

    @tool(ToolType.READ)
    def get_customer_by_id(self, customer_id: str):
        """Customer with this id.

        Args:
            customer_id: Customer id.
        """
        return AsModel(self._customer_by_id(customer_id))

    @tool(ToolType.READ)
    def get_customer_by_name(self, full_name: str, dob: str):
        """Customers with this name (any case) and date of birth.

        Args:
            full_name: Full name.
            dob: Date of birth, YYYY-MM-DD.
        """
        return AsModel(
            [c for c in self.db.customers if c["full_name"].lower() == full_name.lower() and c["date_of_birth"] == dob]
        )

    def get_available_plan_ids(self) -> List[str]:
        """Env helper: ids of all plans."""
        return [plan["plan_id"] for plan in self.db.plans]

    @tool(ToolType.READ)
    def get_details_by_id(self, id: str):
        """Record for an id, by its first letter: L line, D device, B bill, C customer, P plan.

        Args:
            id: The id.
        """
        if id.startswith("L"):
            return AsModel(self._get_line_by_id(id))
        if id.startswith("D"):
            return AsModel(self._get_device_by_id(id))
        if id.startswith("B"):
            return AsModel(self._get_bill_by_id(id))
        if id.startswith("C"):
            return AsModel(self._customer_by_id(id))
        if id.startswith("P"):
            return AsModel(self._get_plan_by_id(id))
        raise ValueError(f"Unknown ID format or type: {id}")

    # ------------------------------------------------------------------ line status

    @tool(ToolType.WRITE)
    def suspend_line(self, customer_id: str, line_id: str, reason: str):  # noqa: ARG002 - upstream's tool signature
        """Suspend an active line of the customer.

        Args:
            customer_id: Owner.
            line_id: Line to suspend.
            reason: Why.
        """
        line = self._get_target_line(customer_id, line_id)
        if line["status"] != _ACTIVE:
            raise ValueError("Line must be active to suspend")
        line["status"] = _SUSPENDED
        line["suspension_start_date"] = get_today()
        return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": AsModel(line)}

    @tool(ToolType.WRITE)
    def resume_line(self, customer_id: str, line_id: str):
        """Reactivate a suspended (or pending) line; the contract date is not checked.

        Args:
            customer_id: Owner.
            line_id: Line to resume.
        """
        line = self._get_target_line(customer_id, line_id)
        if line["status"] not in (_SUSPENDED, _PENDING):
            raise ValueError("Line must be suspended to resume")
        line["status"] = _ACTIVE
        line["suspension_start_date"] = None
        return {"message": "Line resumed successfully", "line": AsModel(line)}

    # ------------------------------------------------------------------ bills and payments

    @tool(ToolType.READ)
    def get_bills_for_customer(self, customer_id: str, limit: int = 12):
        """The customer's bills, newest issue date first.

        Args:
            customer_id: Customer id.
            limit: At most this many.
        """
        customer = self._customer_by_id(customer_id)
        bills = [self._get_bill_by_id(bill_id) for bill_id in customer["bill_ids"]]
        bills = sorted(bills, key=lambda bill: bill["issue_date"], reverse=True)
        return AsModel(bills[:limit])

    @tool(ToolType.WRITE)
    def send_payment_request(self, customer_id: str, bill_id: str) -> str:
        """Put one of the customer's bills into Awaiting Payment (its status is not checked).

        Args:
            customer_id: Owner of the bill.
            bill_id: Bill to request payment for.
        """
        customer = self._customer_by_id(customer_id)
        if self._get_bills_awaiting_payment(customer):
            raise ValueError("A bill is already awaiting payment for this customer")
        if bill_id not in customer["bill_ids"]:
            raise ValueError(f"Bill {bill_id} not found for customer {customer_id}")
        bill = self._get_bill_by_id(bill_id)
        bill["status"] = _AWAITING
        return f"Payment request sent to the customer for bill {bill['bill_id']}"

    def _apply_one_time_charge(self, customer_id: str, amount: float, description: str) -> None:
        """Add a charge to the customer's first Draft bill, creating one for next month if needed."""
        customer = self._customer_by_id(customer_id)
        draft = None
        for bill_id in customer["bill_ids"]:
            bill = self._get_bill_by_id(bill_id)
            if bill and bill["status"] == _DRAFT:
                draft = bill
                break
        if not draft:
            today = get_today()
            next_month = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
            period_end = next_month.replace(
                month=next_month.month + 1 if next_month.month < 12 else 1,
                year=next_month.year if next_month.month < 12 else next_month.year + 1,
            ) - timedelta(days=1)
            new_bill_id = f"B{uuid.uuid4().hex[:8]}"  # random, as upstream
            draft = plain(
                Bill(
                    bill_id=new_bill_id,
                    customer_id=customer_id,
                    period_start=next_month,
                    period_end=period_end,
                    issue_date=next_month,
                    total_due=0,
                    due_date=next_month + timedelta(days=14),
                    status=BillStatus.DRAFT,
                ).model_dump()
            )
            self.db.bills.append(draft)
            customer["bill_ids"].append(new_bill_id)
        item = LineItem(
            description=description, amount=amount, date=get_today(), item_type="Credit" if amount < 0 else "Charge"
        )
        draft["line_items"].append(plain(item.model_dump()))
        draft["total_due"] += amount

    # ------------------------------------------------------------------ usage, roaming, refuel

    @tool(ToolType.READ)
    def get_data_usage(self, customer_id: str, line_id: str):
        """Data used, plan limit, refuelled data and cycle end of a line.

        Args:
            customer_id: Owner.
            line_id: Line.
        """
        line = self._get_target_line(customer_id, line_id)
        plan = self._get_plan_by_id(line["plan_id"])
        today = get_today()
        cycle_end = date(today.year, today.month + 1 if today.month < 12 else 1, 1) - timedelta(days=1)
        return {
            "line_id": line_id,
            "data_used_gb": line["data_used_gb"],
            "data_limit_gb": plan["data_limit_gb"],
            "data_refueling_gb": line["data_refueling_gb"],
            "cycle_end_date": cycle_end,
        }

    def set_data_usage(self, customer_id: str, line_id: str, data_used_gb: float) -> str:
        """Init helper: overwrite a line's data usage (stored as given)."""
        line = self._get_target_line(customer_id, line_id)
        line["data_used_gb"] = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    @tool(ToolType.WRITE)
    def enable_roaming(self, customer_id: str, line_id: str):
        """Turn international roaming on for a line.

        Args:
            customer_id: Owner.
            line_id: Line.
        """
        line = self._get_target_line(customer_id, line_id)
        if line["roaming_enabled"]:
            return "Roaming was already enabled"
        line["roaming_enabled"] = True
        return "Roaming enabled successfully"

    @tool(ToolType.WRITE)
    def disable_roaming(self, customer_id: str, line_id: str) -> str:
        """Turn international roaming off for a line.

        Args:
            customer_id: Owner.
            line_id: Line.
        """
        line = self._get_target_line(customer_id, line_id)
        if not line["roaming_enabled"]:
            return "Roaming was already disabled"
        line["roaming_enabled"] = False
        return "Roaming disabled successfully"

    @tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:  # noqa: ARG002 - upstream's tool signature
        """Hand the conversation to a human agent.

        Args:
            summary: The user's issue.
        """
        return "Transfer successful"

    @tool(ToolType.WRITE)
    def refuel_data(self, customer_id: str, line_id: str, gb_amount: float):
        """Add data to a line and charge it to the customer's draft bill (no cap, no status check).

        Args:
            customer_id: Owner.
            line_id: Line.
            gb_amount: Gigabytes to add.
        """
        line = self._get_target_line(customer_id, line_id)
        if gb_amount <= 0:
            raise ValueError("Refuel amount must be positive")
        plan = self._get_plan_by_id(line["plan_id"])
        if not plan:
            raise ValueError("Plan not found for this line")
        price = plan["data_refueling_price_per_gb"]
        charge = gb_amount * price
        line["data_refueling_gb"] += gb_amount
        self._apply_one_time_charge(customer_id, charge, f"Data refueling: {gb_amount} GB at ${price}/GB")
        return {
            "message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge:.2f}",
            "new_data_refueling_gb": line["data_refueling_gb"],
            "charge": charge,
        }

    # ------------------------------------------------------------------ init helpers

    def suspend_line_for_overdue_bill(
        self, customer_id: str, line_id: str, new_bill_id: str, contract_ended: bool
    ) -> str:
        """Init helper: add an overdue bill (last month, one charge = plan price) and suspend the line."""
        line = self._get_line_by_id(line_id)
        if line["status"] != _ACTIVE:
            raise ValueError("Line must be active to suspend for unpaid bill")
        plan = self._get_plan_by_id(line["plan_id"])
        amount = plan["price_per_month"]
        description = f"Charge for line {line['line_id']}"
        if amount <= 0:
            raise ValueError("Amount must be positive for overdue bill")
        customer = self._customer_by_id(customer_id)
        overdue = [b for b in customer["bill_ids"] if self._get_bill_by_id(b)["status"] == _OVERDUE]
        if overdue:
            raise ValueError("Customer already has an overdue bill")
        today = get_today()
        last_day_prev = today.replace(day=1) - timedelta(days=1)
        first_day_prev = last_day_prev.replace(day=1)
        bill = Bill(
            bill_id=new_bill_id,
            customer_id=customer_id,
            period_start=first_day_prev,
            period_end=last_day_prev,
            issue_date=first_day_prev,
            total_due=0,
            due_date=first_day_prev + timedelta(days=14),
            status=BillStatus.OVERDUE,
        )
        item = LineItem(
            description=description, amount=amount, date=get_today(), item_type="Charge" if amount > 0 else "Credit"
        )
        record = plain(bill.model_dump())
        record["line_items"].append(plain(item.model_dump()))
        record["total_due"] += amount
        self.db.bills.append(record)
        customer["bill_ids"].append(new_bill_id)
        line["status"] = _SUSPENDED
        line["suspension_start_date"] = get_today()
        if contract_ended:
            line["contract_end_date"] = last_day_prev
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"

    # ------------------------------------------------------------------ assertions

    def assert_data_refueling_amount(self, customer_id: str, line_id: str, expected_amount: float) -> bool:
        """Assertion: the line's refuelled data equals ``expected_amount`` (to 1e-6)."""
        line = self._get_target_line(customer_id, line_id)
        return abs(line["data_refueling_gb"] - expected_amount) < 1e-6

    def assert_line_status(self, customer_id: str, line_id: str, expected_status: LineStatus) -> bool:
        """Assertion: the line has this status."""
        return self._get_target_line(customer_id, line_id)["status"] == expected_status

    def assert_overdue_bill_exists(self, customer_id: str, overdue_bill_id: str) -> bool:
        """Assertion: the customer owns this bill and it is Overdue (raises otherwise, as upstream)."""
        customer = self._customer_by_id(customer_id)
        if overdue_bill_id not in customer["bill_ids"]:
            raise ValueError(f"Overdue bill {overdue_bill_id} not found")
        if self._get_bill_by_id(overdue_bill_id)["status"] != _OVERDUE:
            raise ValueError(f"Overdue bill {overdue_bill_id} is not overdue")
        return True

    def assert_no_overdue_bill(self, overdue_bill_id: str) -> bool:
        """Assertion: the bill is absent or Paid."""
        try:
            bill = self._get_bill_by_id(overdue_bill_id)
        except ValueError:
            return True
        return bill["status"] == _PAID
