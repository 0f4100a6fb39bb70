"""Agent tools of the retail domain, over the episode's copy-on-write DB.

Behaviour follows upstream tau2-bench HEAD exactly, quirks included, because rewards compare DB hashes and
agents see these texts:

- arguments arrive unvalidated; every check is the same Python expression on the raw argument, in the same
  order, so wrong types fail with the same exception text (``'int' object is not iterable``...);
- mutations happen in the same order as upstream's, so a call that fails half-way leaves the same partial
  changes (gold replay ignores such errors but keeps their effects);
- "pending-ish" (address and payment changes) is a substring test, cancel and item changes need exactly
  ``"pending"``;
- modifying several items gives every modified item the price and options of the *last* new variant
  checked (upstream's loop-variable reuse; five gold tasks depend on it);
- money: differences accumulate from int ``0`` pair by pair; item modification records the unrounded
  difference; gift-card balances and the exchange difference go through ``round(x, 2)``.

Records read through ``db.<table>[key]`` are the shared base: anything changed goes through ``.mut(key)``.
"""

from __future__ import annotations

import json
from typing import Any, List

from tau2_gym.core import arithmetic
from tau2_gym.core.tools import AsModel, Toolkit, ToolType, tool
from tau2_gym.domains.retail.data_model import UserAddress

_CANCEL_REASONS = {"no longer needed", "ordered by mistake"}


def _address(address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any) -> dict[str, Any]:
    """A ``UserAddress`` dump built from raw arguments (upstream's validation and error texts)."""
    return UserAddress(
        address1=address1, address2=address2, city=city, state=state, country=country, zip=zip
    ).model_dump()


def _payment(kind: str, amount: Any, method_id: str) -> dict[str, Any]:
    """An ``OrderPayment`` dump. Inputs are already checked (the method id is a key of the user's methods,
    the amount a DB float or a sum of them), so the model's only effect would be int -> float."""
    return {"transaction_type": kind, "amount": float(amount), "payment_method_id": method_id}


class RetailTools(Toolkit):
    """Retail agent toolkit; the class name appears in argument errors, as upstream's does."""

    # ------------------------------------------------------------------ lookups (upstream's texts)

    def _get_order(self, order_id: str) -> dict:
        orders = self.db.orders
        if order_id not in orders:
            raise ValueError("Order not found")
        return orders[order_id]

    def _get_user(self, user_id: str) -> dict:
        users = self.db.users
        if user_id not in users:
            raise ValueError("User not found")
        return users[user_id]

    def _get_product(self, product_id: str) -> dict:
        products = self.db.products
        if product_id not in products:
            raise ValueError("Product not found")
        return products[product_id]

    def _get_item(self, item_id: str) -> dict:
        """Scan the catalogue in DB order (an unhashable id fails on the first product, as upstream)."""
        for product in self.db.products.values():
            variants = product["variants"]
            if item_id in variants:
                return variants[item_id]
        raise ValueError("Item not found")

    def _get_variant(self, product_id: str, variant_id: str) -> dict:
        variants = self._get_product(product_id)["variants"]
        if variant_id not in variants:
            raise ValueError("Variant not found")
        return variants[variant_id]

    def _get_payment_method(self, user_id: str, payment_method_id: str) -> dict:
        methods = self._get_user(user_id)["payment_methods"]
        if payment_method_id not in methods:
            raise ValueError("Payment method not found")
        return methods[payment_method_id]

    def _gift_card(self, user_id: str, payment_method_id: str) -> dict:
        """The user's gift card record, made private for a balance change."""
        return self.db.users.mut(user_id)["payment_methods"][payment_method_id]

    @staticmethod
    def _is_pending_order(order: dict) -> bool:
        return "pending" in order["status"]

    # ------------------------------------------------------------------ tools (upstream order)

    @tool(ToolType.GENERIC)
    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression, rounded to two decimals.

        Args:
            expression: Digits, + - * /, parentheses, dots and spaces only.
        """
        return arithmetic.calculate(expression)

    @tool(ToolType.WRITE)
    def cancel_pending_order(self, order_id: str, reason: str):
        """Cancel a pending order and refund its payments (gift cards at once).

        Args:
            order_id: Order id, with the leading '#'.
            reason: 'no longer needed' or 'ordered by mistake'.
        """
        order = self._get_order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in _CANCEL_REASONS:
            raise ValueError("Invalid reason")
        refunds = []
        user_id = order["user_id"]
        for payment in order["payment_history"]:
            method_id = payment["payment_method_id"]
            amount = payment["amount"]
            refunds.append(_payment("refund", amount, method_id))
            owner = self._get_user(user_id)["user_id"]  # upstream re-keys by the record's own user_id
            method = self._get_payment_method(owner, method_id)
            if method["source"] == "gift_card":
                card = self._gift_card(owner, method_id)
                card["balance"] = round(card["balance"] + amount, 2)
        order = self.db.orders.mut(order_id)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return AsModel(order)

    @tool(ToolType.WRITE)
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: List[str], new_item_ids: List[str], payment_method_id: str
    ):
        """Request an exchange of delivered items for other variants of the same products.

        Args:
            order_id: Order id, with the leading '#'.
            item_ids: Items to exchange (repeats allowed).
            new_item_ids: Replacement items, position by position.
            payment_method_id: Method that pays or receives the price difference.
        """
        order = self._get_order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        items = order["items"]
        all_item_ids = [item["item_id"] for item in items]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError(f"Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff_price: Any = 0
        for item_id, new_item_id in zip(item_ids, new_item_ids):
            item = next((item for item in items if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._get_variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant["price"] - item["price"]
        diff_price = round(diff_price, 2)
        user_id = order["user_id"]
        method = self._get_payment_method(user_id, payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order = self.db.orders.mut(order_id)
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff_price
        return AsModel(order)

    @tool(ToolType.READ)
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a user id from first name, last name (any case) and zip code.

        Args:
            first_name: Customer's first name.
            last_name: Customer's last name.
            zip: Customer's zip code.
        """
        for user_id, user in self.db.users.items():
            name = user["name"]
            if (
                name["first_name"].lower() == first_name.lower()
                and name["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip
            ):
                return user_id
        raise ValueError("User not found")

    @tool(ToolType.READ)
    def find_user_id_by_email(self, email: str) -> str:
        """Find a user id from an e-mail address (any case).

        Args:
            email: Customer's e-mail address.
        """
        for user_id, user in self.db.users.items():
            if user["email"].lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    @tool(ToolType.READ)
    def get_order_details(self, order_id: str):
        """Show an order: status, items, shipments and payments.

        Args:
            order_id: Order id, with the leading '#'.
        """
        return AsModel(self._get_order(order_id))

    @tool(ToolType.READ)
    def get_product_details(self, product_id: str):
        """Show a product and all its variants.

        Args:
            product_id: Product id (not an item id).
        """
        return AsModel(self._get_product(product_id))

    @tool(ToolType.READ)
    def get_item_details(self, item_id: str):
        """Show one item (variant): options, availability and price.

        Args:
            item_id: Item id (not a product id).
        """
        return AsModel(self._get_item(item_id))

    @tool(ToolType.READ)
    def get_user_details(self, user_id: str):
        """Show a user's profile, payment methods and order ids.

        Args:
            user_id: User id.
        """
        return AsModel(self._get_user(user_id))

    @tool(ToolType.READ)
    def list_all_product_types(self) -> str:
        """List every product name with its product id, as a JSON object sorted by name."""
        return json.dumps({p["name"]: p["product_id"] for p in self.db.products.values()}, sort_keys=True)

    @tool(ToolType.WRITE)
    def modify_pending_order_address(
        self, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ):
        """Change the shipping address of a pending order.

        Args:
            order_id: Order id, with the leading '#'.
            address1: First address line.
            address2: Second address line, may be empty.
            city: City.
            state: State.
            country: Country.
            zip: Zip code.
        """
        order = self._get_order(order_id)
        if not self._is_pending_order(order):
            raise ValueError("Non-pending order cannot be modified")
        address = _address(address1, address2, city, state, country, zip)
        order = self.db.orders.mut(order_id)
        order["address"] = address
        return AsModel(order)

    @tool(ToolType.WRITE)
    def modify_pending_order_items(
        self, order_id: str, item_ids: List[str], new_item_ids: List[str], payment_method_id: str
    ):
        """Swap items of a pending order for other variants of the same products (once per order).

        Args:
            order_id: Order id, with the leading '#'.
            item_ids: Items to change (repeats allowed).
            new_item_ids: New items, position by position.
            payment_method_id: Method that pays or receives the price difference.
        """
        order = self._get_order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be modified")
        items = order["items"]
        all_item_ids = [item["item_id"] for item in items]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError(f"{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff_price: Any = 0
        variant: Any = None
        for item_id, new_item_id in zip(item_ids, new_item_ids):
            if item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item = next((item for item in items if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._get_variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant["price"] - item["price"]
        user_id = order["user_id"]
        method = self._get_payment_method(user_id, payment_method_id)
        is_gift_card = method["source"] == "gift_card"
        if is_gift_card and method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order = self.db.orders.mut(order_id)
        order["payment_history"].append(
            _payment("payment" if diff_price > 0 else "refund", abs(diff_price), payment_method_id)
        )
        if is_gift_card:
            card = self._gift_card(user_id, payment_method_id)
            card["balance"] = round(card["balance"] - diff_price, 2)
        items = order["items"]
        for item_id, new_item_id in zip(item_ids, new_item_ids):
            item = next((item for item in items if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            item["item_id"] = new_item_id
            item["price"] = variant["price"]  # the last variant checked: upstream's bug, kept on purpose
            item["options"] = dict(variant["options"])
        order["status"] = "pending (item modified)"
        return AsModel(order)

    @tool(ToolType.WRITE)
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str):
        """Pay a pending order with another payment method; the old one is refunded.

        Args:
            order_id: Order id, with the leading '#'.
            payment_method_id: The new payment method.
        """
        order = self._get_order(order_id)
        if not self._is_pending_order(order):
            raise ValueError("Non-pending order cannot be modified")
        user_id = order["user_id"]
        method = self._get_payment_method(user_id, payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        old_method_id = history[0]["payment_method_id"]
        if old_method_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if method["source"] == "gift_card" and method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        order = self.db.orders.mut(order_id)
        order["payment_history"].extend(
            [_payment("payment", amount, payment_method_id), _payment("refund", amount, old_method_id)]
        )
        if method["source"] == "gift_card":
            card = self._gift_card(user_id, payment_method_id)
            card["balance"] = round(card["balance"] - amount, 2)
        old_method = self._get_payment_method(user_id, old_method_id)
        if old_method["source"] == "gift_card":
            card = self._gift_card(user_id, old_method_id)
            card["balance"] = round(card["balance"] + amount, 2)
        return AsModel(order)

    @tool(ToolType.WRITE)
    def modify_user_address(
        self, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ):
        """Change a user's default address (existing orders keep theirs).

        Args:
            user_id: User id.
            address1: First address line.
            address2: Second address line, may be empty.
            city: City.
            state: State.
            country: Country.
            zip: Zip code.
        """
        self._get_user(user_id)
        address = _address(address1, address2, city, state, country, zip)
        user = self.db.users.mut(user_id)
        user["address"] = address
        return AsModel(user)

    @tool(ToolType.WRITE)
    def return_delivered_order_items(self, order_id: str, item_ids: List[str], payment_method_id: str):
        """Request a return of delivered items; the refund goes to the original method or a gift card.

        Args:
            order_id: Order id, with the leading '#'.
            item_ids: Items to return (repeats allowed).
            payment_method_id: Original payment method or one of the user's gift cards.
        """
        order = self._get_order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._get_user(order["user_id"])
        method = self._get_payment_method(user["user_id"], payment_method_id)
        if method["source"] != "gift_card" and payment_method_id != order["payment_history"][0]["payment_method_id"]:
            raise ValueError("Payment method should be the original payment method")
        all_item_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > all_item_ids.count(item_id):
                raise ValueError("Some item not found")
        order = self.db.orders.mut(order_id)
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return AsModel(order)

    @tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:  # noqa: ARG002 - upstream's tool signature
        """Hand the conversation to a human agent.

        Args:
            summary: What the user needs.
        """
        return "Transfer successful"
