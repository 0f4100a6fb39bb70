"""Retail DB models: catalogue, customers, orders.

Names, field order, types, optionality and config mirror upstream's models: the validated dump of this
model *is* the data our tools work on, and its field order is the order of every tool output (``json.dumps``
keeps it) while its types decide the hash (``100`` vs ``100.0``, the seven optional order fields as null).
Tools build ``UserAddress`` from non-string arguments through this model, so its errors match upstream's.
"""

from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


class Variant(BaseModel):
    """One sellable variant of a product."""

    item_id: str = Field(description="Item id of the variant.")
    options: Dict[str, str] = Field(description="Option name to value, e.g. colour or size.")
    available: bool = Field(description="In stock or not.")
    price: float = Field(description="Current price.")


class Product(BaseModel):
    """A product type and its variants."""

    name: str = Field(description="Product name.")
    product_id: str = Field(description="Product id (unrelated to item ids).")
    variants: Dict[str, Variant] = Field(description="Variants by item id.")


class UserName(BaseModel):
    """First and last name."""

    first_name: str = Field(description="Given name.")
    last_name: str = Field(description="Family name.")


class UserAddress(BaseModel):
    """A postal address (``address2`` is required but may be empty)."""

    address1: str = Field(description="First address line.")
    address2: str = Field(description="Second address line.")
    city: str = Field(description="City.")
    country: str = Field(description="Country.")
    state: str = Field(description="State or province.")
    zip: str = Field(description="Postal code.")


class PaymentMethodBase(BaseModel):
    # each payment kind narrows `source` to its tag (a discriminated union, as upstream's models are)
    source: str = Field(description="Kind of payment method.")
    id: str = Field(description="Payment method id.")


class CreditCard(PaymentMethodBase):
    source: Literal["credit_card"] = Field(description="Always 'credit_card'.")  # ty: ignore[incompatible-mutable-override] - the tag
    brand: str = Field(description="Card brand.")
    last_four: str = Field(description="Last four digits.")


class Paypal(PaymentMethodBase):
    source: Literal["paypal"] = Field(description="Always 'paypal'.")  # ty: ignore[incompatible-mutable-override] - the tag


class GiftCard(PaymentMethodBase):
    source: Literal["gift_card"] = Field(description="Always 'gift_card'.")  # ty: ignore[incompatible-mutable-override] - the tag
    balance: float = Field(description="Remaining balance.")
    id: str = Field(description="Payment method id.")  # re-declared as upstream does; keeps its inherited slot


PaymentMethod = Union[CreditCard, GiftCard, Paypal]


class User(BaseModel):
    """A customer: identity, default address, payment methods and order ids."""

    user_id: str = Field(description="User id.")
    name: UserName = Field(description="Full name.")
    address: UserAddress = Field(description="Default address.")
    email: str = Field(description="E-mail address.")
    payment_methods: Dict[str, PaymentMethod] = Field(description="Payment methods by id.")
    orders: List[str] = Field(description="Order ids of the user.")


class OrderFullfilment(BaseModel):  # upstream's spelling
    """Shipment tracking for some items of an order."""

    tracking_id: list[str] = Field(description="Tracking ids.")
    item_ids: list[str] = Field(description="Item ids shipped.")


class OrderItem(BaseModel):
    """An ordered item, with the price and options it was bought at."""

    name: str = Field(description="Product name.")
    product_id: str = Field(description="Product id.")
    item_id: str = Field(description="Item (variant) id.")
    price: float = Field(description="Price paid.")
    options: Dict[str, str] = Field(description="Options of the item.")


OrderPaymentType = Literal["payment", "refund"]


class OrderPayment(BaseModel):
    """One payment or refund of an order."""

    transaction_type: OrderPaymentType = Field(description="payment or refund.")
    amount: float = Field(description="Amount.")
    payment_method_id: str = Field(description="Payment method used.")


OrderStatus = Literal[
    "processed",
    "pending",
    "pending (item modified)",
    "delivered",
    "cancelled",
    "exchange requested",
    "return requested",
]

CancelReason = Literal["no longer needed", "ordered by mistake"]


class BaseOrder(BaseModel):
    """Same fields as :class:`Order` (upstream keeps this unused twin; mirrored for completeness)."""

    order_id: str = Field(description="Order id, '#W' and 7 digits.")
    user_id: str = Field(description="Owner's user id.")
    address: UserAddress = Field(description="Shipping address.")
    items: List[OrderItem] = Field(description="Ordered items.")
    status: OrderStatus = Field(description="Order status.")
    fulfillments: List[OrderFullfilment] = Field(description="Shipments.")
    payment_history: List[OrderPayment] = Field(description="Payments and refunds.")
    cancel_reason: Optional[CancelReason] = Field(default=None, description="Why it was cancelled.")
    exchange_items: Optional[List[str]] = Field(default=None, description="Items to exchange.")
    exchange_new_items: Optional[List[str]] = Field(default=None, description="Replacement items.")
    exchange_payment_method_id: Optional[str] = Field(default=None, description="Method for the difference.")
    exchange_price_difference: Optional[float] = Field(default=None, description="Exchange price difference.")
    return_items: Optional[List[str]] = Field(default=None, description="Items to return.")
    return_payment_method_id: Optional[str] = Field(default=None, description="Method for the refund.")


class Order(BaseModel):
    """An order: items, status, shipments, payments, and any cancel/exchange/return request."""

    order_id: str = Field(description="Order id, '#W' and 7 digits.")
    user_id: str = Field(description="Owner's user id.")
    address: UserAddress = Field(description="Shipping address.")
    items: List[OrderItem] = Field(description="Ordered items.")
    status: OrderStatus = Field(description="Order status.")
    fulfillments: List[OrderFullfilment] = Field(description="Shipments.")
    payment_history: List[OrderPayment] = Field(description="Payments and refunds.")
    cancel_reason: Optional[CancelReason] = Field(default=None, description="Why it was cancelled.")
    exchange_items: Optional[List[str]] = Field(default=None, description="Items to exchange.")
    exchange_new_items: Optional[List[str]] = Field(default=None, description="Replacement items.")
    exchange_payment_method_id: Optional[str] = Field(default=None, description="Method for the difference.")
    exchange_price_difference: Optional[float] = Field(default=None, description="Exchange price difference.")
    return_items: Optional[List[str]] = Field(default=None, description="Items to return.")
    return_payment_method_id: Optional[str] = Field(default=None, description="Method for the refund.")


class RetailDB(BaseModel):
    """Products, users and orders, each keyed by id (unknown top-level keys are rejected)."""

    model_config = ConfigDict(extra="forbid")

    products: Dict[str, Product] = Field(description="Products by product id.")
    users: Dict[str, User] = Field(description="Users by user id.")
    orders: Dict[str, Order] = Field(description="Orders by order id.")

    def get_statistics(self) -> dict[str, Any]:
        """Counts of products, users, orders and variants."""
        return {
            "num_products": len(self.products),
            "num_users": len(self.users),
            "num_orders": len(self.orders),
            "total_num_items": sum(len(p.variants) for p in self.products.values()),
        }
