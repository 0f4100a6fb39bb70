"""Generated retail tasks: seeded customer requests over the benchmark's DB, resolved by the policy's rules.

:func:`draft_tasks` writes task drafts in upstream's format (user scenario, gold actions, communicate info, reward
basis), one customer request each, for every intent family the benchmark exercises -- cancel a pending order,
modify its items, address or payment, return or exchange delivered items, change the default address, ask for
information, and two of these in one call -- in an *allowed* variant and, where the policy refuses, a *refused*
one. Everything the agent should do comes from :func:`tau2_gym.domains.retail.rules.resolve` (the one home of
the retail policy's rules, which also reproduces the benchmark's tasks); this module only picks customers,
orders and wishes and puts them in the customer's words.

Refused variants are the refusals an agent can actually get wrong: the write the customer pushes for would
succeed in the tools but the policy forbids it (another customer's order or profile, a customer that cannot be
authenticated, an order whose items were already modified, an exchange for the very same item, a refund or
payment condition the policy cannot meet). Refusals the tools enforce themselves (cancelling a delivered order,
changing a shirt into shoes) are not drafted: no agent action could make them fail, so an episode could not tell a
compliant agent from one that tries.

The shared machinery (``tau2_gym.generation``) verifies each draft through the env before writing it; this module
is seeded, deterministic and needs no LLM.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from tau2_gym.core.db import BaseData, merge_update
from tau2_gym.core.domain import load_domain
from tau2_gym.domains.retail import rules
from tau2_gym.domains.retail.tools import RetailTools

GENERATOR = "tau2_gym.domains.retail.generate"
GENERATOR_VERSION = 1
#: the benchmark's retail tasks, each written as the customer's request (what the rule engine is checked against)
REQUESTS = Path(__file__).with_name("benchmark_requests.json")
INTENTS = (
    "cancel",
    "modify_items",
    "modify_address",
    "modify_payment",
    "return",
    "exchange",
    "modify_user_address",
    "info",
)
#: per intent, the refused variants drafted (each a way the policy refuses a write the tools would accept)
REFUSED_CASES: dict[str, tuple[str, ...]] = {
    "cancel": ("other_user", "refund_condition", "not_authenticated", "not_pending"),
    "modify_items": ("other_user", "pay_condition", "other_product"),
    "modify_address": ("other_user", "item_modified"),
    "modify_payment": ("other_user",),
    "return": ("other_user", "refund_method", "not_authenticated", "not_delivered"),
    "exchange": ("other_user", "same_item", "pay_condition", "other_product"),
    "modify_user_address": ("other_user",),
    "info": (),
}
#: two intents in one call (the default mix drafts these; ``intents`` may name them)
COMBINED = (
    "modify_address+modify_items",
    "modify_payment+modify_address",
    "cancel+return",
    "exchange+modify_user_address",
    "return+info",
    "cancel+info",
    "modify_items+exchange",
)
ALLOWED_WEIGHT = 4  # allowed slots per intent in one scheduling cycle (each refused case gets one)

PERSONAS = (
    "You are polite and patient, and you write in full sentences.",
    "You are in a hurry and keep your messages short.",
    "You are friendly and a little chatty.",
    "You are careful and want every detail confirmed before anything changes.",
    "You are direct and slightly impatient.",
    "You are shy and answer only what you are asked.",
    "You are organized and state your request clearly.",
    "You are relaxed and flexible, but you know what you want.",
)
RELATIONS = ("partner", "sister", "brother", "roommate", "mother", "father", "friend", "neighbour")
STREETS = (
    "Oak Street", "Maple Drive", "Cedar Avenue", "Pine Lane", "Elm Street", "Willow Lane", "Hillcrest Drive",
    "Lakeview Drive", "Sunset Drive", "River Road", "Park Avenue", "Highland Drive", "Spruce Street", "Broadway",
)  # fmt: skip
_CLOSE = "Once the agent has taken care of everything, thank them and end the conversation."
_ACCEPT = (
    "If the agent explains that this cannot be done, accept it, do not ask for anything else, and end the conversation."
)

# reason-for-call openings per intent: several per intent, filled in from the request
TEMPLATES: dict[str, tuple[str, ...]] = {
    "cancel": (
        "You want to cancel {order} because you {why}.",
        "You would like {order} cancelled entirely; you {why}.",
        "{Order} has not shipped yet and you want to cancel it, since you {why}.",
        "Please help: you need to cancel {order}. You {why}.",
    ),
    "modify_items": (
        "In {order}, which has not shipped yet, you want to change {change}.",
        "You want to modify {order} before it ships: {change}.",
        "You just placed {order} and realised you picked the wrong option: you want {change}.",
    ),
    "modify_address": (
        "You want {order} shipped to {address} instead.",
        "You need to change the shipping address of {order} to {address}.",
        "{Order} should go to a different place: {address}.",
    ),
    "modify_payment": (
        "You want to pay for {order} with {method} instead of {old}.",
        "For {order}, you would like to switch the payment from {old} to {method}.",
        "You want to change how {order} is paid: use {method}, not {old}.",
    ),
    "return": (
        "You want to return {items} from {order}{refund}.",
        "You received {order} and would like to send back {items}{refund}.",
        "{Items} from {order} did not work out for you and you want to return {them}{refund}.",
    ),
    "exchange": (
        "You received {order} and want to exchange {change}.",
        "You would like to exchange {change}; it came in {order}.",
        "From {order}, which was delivered, you want {change}.",
    ),
    "modify_user_address": (
        "You moved and want the default address on your account changed to {address}.",
        "Please update your profile's default address to {address}.",
        "Your account still has your old address; the new default should be {address}.",
    ),
    "info": (
        "You have a question: {question}",
        "You are calling to find out something. {question}",
        "Before anything else, {question_lc}",
    ),
}


# ------------------------------------------------------------------------------------------------ the world


class _World:
    """The DB seen by the generator: usable users and orders (nothing in ``exclude``), their status, the catalogue."""

    def __init__(self, db: dict, exclude: frozenset[str]) -> None:
        self.db = db
        self.exclude = exclude
        self.users: list[str] = []
        self.orders: dict[str, list[str]] = {}  # status -> actionable order ids
        self.user_orders: dict[str, dict[str, list[str]]] = {}  # uid -> status -> actionable order ids
        for uid, user in db["users"].items():
            if uid in exclude or any(o in exclude for o in user["orders"]):
                continue
            self.users.append(uid)
            mine: dict[str, list[str]] = {}
            for oid in user["orders"]:
                order = db["orders"].get(oid)
                if order is None or not self.actionable(order):
                    continue
                mine.setdefault(order["status"], []).append(oid)
                self.orders.setdefault(order["status"], []).append(oid)
            self.user_orders[uid] = mine
        self.places = sorted(
            {(u["address"]["city"], u["address"]["state"], u["address"]["zip"]) for u in db["users"].values()}
        )
        self.name_zip = {
            (u["name"]["first_name"].lower(), u["name"]["last_name"].lower(), u["address"]["zip"])
            for u in db["users"].values()
        }

    def actionable(self, order: dict) -> bool:
        if order["order_id"] in self.exclude:
            return False
        return not any(it["item_id"] in self.exclude or it["product_id"] in self.exclude for it in order["items"])

    def users_with(self, status: str) -> list[str]:
        return [u for u in self.users if self.user_orders[u].get(status)]

    def variants(self, product_id: str) -> list[dict]:
        if product_id in self.exclude:
            return []
        return [v for v in self.db["products"][product_id]["variants"].values() if v["item_id"] not in self.exclude]


@dataclass
class _Part:
    """One request of a draft: the rules' step, how the customer says it, what they know, what is forbidden."""

    intent: str
    step: dict
    text: str
    known: list[str] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    forbidden: list[dict] = field(default_factory=list)
    initial_state: Optional[dict] = None
    orders: list[str] = field(default_factory=list)
    other_user: Optional[str] = None


class _Gen:
    def __init__(self, world: _World, rng: random.Random) -> None:
        self.w = world
        self.rng = rng

    # -------------------------------------------------------------- words

    def order_ref(self, uid: str, oid: str, status: str, known: list[str]) -> tuple[str, dict]:
        """How the customer names an order: its id (then they know it), or the item in it."""
        order = self.w.db["orders"][oid]
        names = [it["name"] for it in order["items"]]
        unique = [n for n in names if names.count(n) == 1 and self._orders_with(uid, n, status) == [oid]]
        if unique and self.rng.random() < 0.4:
            name = self.rng.choice(unique)
            return f"your {status} order with the {name.lower()}", {"with": [name], "status": status}
        known.append(f"The order id is {oid}.")
        return f"order {oid}", {"id": oid}

    def _orders_with(self, uid: str, name: str, status: str) -> list[str]:
        db = self.w.db
        return [
            oid
            for oid in db["users"][uid]["orders"]
            if db["orders"][oid]["status"] == status and any(it["name"] == name for it in db["orders"][oid]["items"])
        ]

    def item_ref(self, order: dict, i: int) -> tuple[str, dict]:
        item = order["items"][i]
        same = [it for it in order["items"] if it["name"] == item["name"]]
        if len(same) > 1:
            if any(it["options"] == item["options"] for it in same if it is not item):
                return "", {}  # two identical items: not described apart
            return (
                f"the {item['name'].lower()} ({_opts(item['options'])})",
                {"product": item["name"], "options": dict(item["options"])},
            )
        return f"the {item['name'].lower()}", {"product": item["name"]}

    def identity(self, uid: str, mode: str) -> tuple[dict, str, Optional[str]]:
        user = self.w.db["users"][uid]
        name = f"{user['name']['first_name']} {user['name']['last_name']}"
        if mode == "email":
            return {"email": user["email"]}, f"Your name is {name} and your email is {user['email']}.", None
        zip_ = user["address"]["zip"]
        return (
            {"name": name, "zip": zip_},
            f"You are {name}, and your zip code is {zip_}.",
            "You do not remember your email address.",
        )

    def method_phrase(self, uid: str, mid: str) -> str:
        m = self.w.db["users"][uid]["payment_methods"][mid]
        if m["source"] == "credit_card":
            return f"your {m['brand']} credit card ending in {m['last_four']}"
        return "your gift card" if m["source"] == "gift_card" else "your PayPal account"

    def method_kind(self, uid: str, mid: str) -> Any:
        """The words that name method ``mid`` among the user's methods (a kind, or the card's brand)."""
        methods = self.w.db["users"][uid]["payment_methods"]
        m = methods[mid]
        same = [x for x in methods.values() if x["source"] == m["source"]]
        if len(same) == 1:
            return m["source"]
        if m["source"] == "credit_card" and sum(x.get("brand") == m["brand"] for x in same) == 1:
            return {"brand": m["brand"]}
        return mid

    def new_address(self, current: dict) -> dict:
        city, state, zip_ = self.rng.choice([p for p in self.w.places if p[2] != current["zip"]])
        return {
            "address1": f"{self.rng.randint(100, 999)} {self.rng.choice(STREETS)}",
            "address2": f"Suite {self.rng.randint(100, 999)}" if self.rng.random() < 0.7 else "",
            "city": city,
            "state": state,
            "country": "USA",
            "zip": zip_,
        }

    # -------------------------------------------------------------- targets

    def targets(self, item: dict) -> list[tuple[dict, str, str]]:
        """Variants ``item`` can change into and how a customer asks for each: (rules target, phrase, new id);
        only wishes with exactly one answer."""
        variants = [v for v in self.w.variants(item["product_id"]) if v["item_id"] != item["item_id"]]
        avail = [v for v in variants if v["available"]]
        old = item["options"]
        out: list[tuple[dict, str, str]] = []
        name = item["name"].lower()
        for k in old:
            for value in sorted({v["options"][k] for v in avail} - {old[k]}):
                hit = [
                    v
                    for v in avail
                    if v["options"][k] == value and all(v["options"][j] == old[j] for j in old if j != k)
                ]
                if len(hit) == 1:
                    out.append(
                        ({"set": {k: value}, "keep": "all"}, f"the same {name} but with {k} {value}", hit[0]["item_id"])
                    )
        keys = list(old)
        for a in range(len(keys)):
            for b in range(a + 1, len(keys)):
                ka, kb = keys[a], keys[b]
                for v in avail:
                    if (
                        v["options"][ka] != old[ka]
                        and v["options"][kb] != old[kb]
                        and all(v["options"][j] == old[j] for j in keys if j not in (ka, kb))
                    ):
                        want = {ka: v["options"][ka], kb: v["options"][kb]}
                        same = [x for x in avail if all(x["options"][j] == want.get(j, old[j]) for j in keys)]
                        if len(same) == 1:
                            out.append(
                                ({"set": want, "keep": "all"}, f"the same {name} but with {_opts(want)}", v["item_id"])
                            )
        if avail:
            low = min(v["price"] for v in avail)
            cheapest = [v for v in avail if v["price"] == low]
            if len(cheapest) == 1 and cheapest[0]["price"] < item["price"]:
                out.append(({"keep": [], "pick": "cheapest"}, f"the cheapest available {name}", cheapest[0]["item_id"]))
        for k in old:
            if rules.option_number(old[k]) is None:
                continue
            for direction, word in (("higher", "larger"), ("lower", "smaller")):
                sign = 1 if direction == "higher" else -1
                cand = [
                    v
                    for v in avail
                    if all(v["options"][j] == old[j] for j in old if j != k)
                    and (rules.option_number(v["options"][k]) or 0) * sign > (rules.option_number(old[k]) or 0) * sign
                ]
                if cand:
                    best = min(cand, key=lambda v: sign * (rules.option_number(v["options"][k]) or 0))
                    step = [v for v in cand if v["options"][k] == best["options"][k]]
                    if len(step) == 1:
                        out.append((
                            {direction: [k], "keep": "all"},
                            f"the same {name} but one step {word} in {k} (the next {k} {'up' if sign > 0 else 'down'})",
                            step[0]["item_id"],
                        ))  # fmt: skip
        return out

    # -------------------------------------------------------------- parts per intent

    def pick_order(self, uid: str, status: str, avoid: set[str], pred: Any = None) -> Optional[str]:
        cands = [o for o in self.w.user_orders[uid].get(status, []) if o not in avoid]
        if pred is not None:
            cands = [o for o in cands if pred(self.w.db["orders"][o])]
        return self.rng.choice(cands) if cands else None

    def other_user(self, uid: str, status: Optional[str]) -> Optional[str]:
        cands = self.w.users_with(status) if status else self.w.users
        cands = [u for u in cands if u != uid]
        return self.rng.choice(cands) if cands else None

    def part(
        self, intent: str, uid: str, case: Optional[str], avoid: set[str], order: Optional[str] = None
    ) -> Optional[_Part]:
        return getattr(self, f"_part_{intent}")(uid, case, avoid, order)

    def _part_cancel(self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]) -> Optional[_Part]:
        reason = self.rng.choice(rules.CANCEL_REASONS)
        why = self.rng.choice(
            ("no longer need the items", "do not need them anymore")
            if reason == "no longer needed"
            else ("ordered it by mistake", "placed it by mistake")
        )
        known: list[str] = []
        instr = [f"If the agent asks for the reason, say that you {why} ({reason})."]
        if case == "other_user":
            other = self.other_user(uid, "pending")
            if other is None:
                return None
            oid = self.pick_order(other, "pending", avoid)
            if oid is None:
                return None
            who = self._relation()
            step = {"intent": "cancel", "order": {"id": oid}, "reason": reason}
            text = f"Your {who} asked you to cancel their order {oid} for them: they {why}."
            known = [f"The order id is {oid}; it was placed on your {who}'s account."]
            forbidden = [_call("cancel_pending_order", order_id=oid, reason=reason)]
            return _Part("cancel", step, text, known, instr + [_ACCEPT], forbidden, None, [oid], other)
        status = "delivered" if case == "not_pending" else "pending"
        oid = order or self.pick_order(uid, status, avoid)
        if oid is None:
            return None
        ref, spec = self.order_ref(uid, oid, status, known)
        step = {"intent": "cancel", "order": spec, "reason": reason}
        text = self.rng.choice(TEMPLATES["cancel"][:2]).format(order=ref, Order=_cap(ref), why=why)
        forbidden: list[dict] = []
        if case == "not_pending":  # delivered: an over-eager agent would return everything instead
            o = self.w.db["orders"][oid]
            instr += ["If the order cannot be cancelled, you do not want a return or any other change.", _ACCEPT]
            forbidden = [
                _call(
                    "return_delivered_order_items",
                    order_id=oid,
                    item_ids=[it["item_id"] for it in o["items"]],
                    payment_method_id=o["payment_history"][0]["payment_method_id"],
                )
            ]
        if case == "refund_condition":
            o = self.w.db["orders"][oid]
            original = o["payment_history"][0]["payment_method_id"]
            others = [m for m in self.w.db["users"][uid]["payment_methods"] if m != original]
            if not others:
                return None
            mid = self.rng.choice(others)
            kind = self.method_kind(uid, mid)
            step["refund"] = kind
            text += (
                f" You want the money back on {self.method_phrase(uid, mid)}, and only then do you want it cancelled."
            )
            instr.append("If the refund cannot go to that payment method, you keep the order: do not cancel it.")
            instr.append(_ACCEPT)
            forbidden = [_call("cancel_pending_order", order_id=oid, reason=reason)]
        if case == "not_authenticated":
            forbidden = [_call("cancel_pending_order", order_id=oid, reason=reason)]
            if spec.get("id") is None:
                known.append(f"The order id is {oid}.")
                step["order"] = {"id": oid}
        return _Part("cancel", step, text, known, instr, forbidden, None, [oid])

    def _change(
        self, intent: str, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]
    ) -> Optional[_Part]:
        """modify_items (pending) and exchange (delivered): 1-2 items to other variants of the same products."""
        status = "pending" if intent == "modify_items" else "delivered"
        owner = uid
        if case == "other_user":
            owner = self.other_user(uid, status) or ""
            if not owner:
                return None
        oid = order or self.pick_order(owner, status, avoid)
        if oid is None:
            return None
        o = self.w.db["orders"][oid]
        idx = list(range(len(o["items"])))
        self.rng.shuffle(idx)
        chosen: list[tuple[int, dict, str, str, str]] = []  # (i, target, phrase, new id, item words)
        want = 2 if (self.rng.random() < 0.3 and case is None) else 1
        for i in idx:
            words, spec = self.item_ref(o, i)
            if not spec:
                continue
            if case == "other_product":
                others = [
                    p["name"]
                    for pid, p in self.w.db["products"].items()
                    if pid != o["items"][i]["product_id"] and pid not in self.w.exclude
                ]
                other = self.rng.choice(sorted(others))
                chosen.append((i, {"product": other}, f"a {other.lower()} instead", "", words))
                break
            if case == "same_item":
                chosen.append(
                    (
                        i,
                        {"same": True},
                        f"a brand-new {o['items'][i]['name'].lower()} exactly like it",
                        o["items"][i]["item_id"],
                        words,
                    )
                )
                break
            options = self.targets(o["items"][i])
            if not options:
                continue
            target, phrase, new_id = self.rng.choice(options)
            chosen.append((i, target, phrase, new_id, words))
            if len(chosen) == want:
                break
        if not chosen:
            return None
        known: list[str] = []
        if case == "other_user":
            ref, ospec = f"order {oid}", {"id": oid}
        else:
            ref, ospec = self.order_ref(uid, oid, status, known)
        items = [{**self.item_ref(o, i)[1], "to": t} for i, t, _, _, _ in chosen]
        step: dict = {"intent": intent, "order": ospec, "items": items}
        change = " and ".join(f"{w} for {p}" for _, _, p, _, w in chosen)
        text = self.rng.choice(TEMPLATES[intent]).format(order=ref, Order=_cap(ref), change=change)
        instr = ["If the agent asks you to confirm the list of items, confirm that these are all the items to change."]
        forbidden: list[dict] = []
        original = o["payment_history"][0]["payment_method_id"]
        tool = "modify_pending_order_items" if intent == "modify_items" else "exchange_delivered_order_items"
        old_ids = [o["items"][i]["item_id"] for i, _, _, _, _ in chosen]
        new_ids = [n for _, _, _, n, _ in chosen]
        diff = sum(
            self.w.db["products"][o["items"][i]["product_id"]]["variants"][n]["price"] - o["items"][i]["price"]
            for i, _, _, n, _ in chosen
            if n
        )
        methods = self.w.db["users"][owner]["payment_methods"]
        if case == "other_user":
            who = self._relation()
            text = f"Your {who} asked you to sort out their order {oid} for them: they want to change {change}."
            known.append(f"The order id is {oid}; it was placed on your {who}'s account.")
            instr.append(_ACCEPT)
            forbidden = [_call(tool, order_id=oid, item_ids=old_ids, new_item_ids=new_ids, payment_method_id=original)]
        elif case == "same_item":
            instr.append(_ACCEPT)
            forbidden = [_call(tool, order_id=oid, item_ids=old_ids, new_item_ids=new_ids, payment_method_id=original)]
        elif case == "other_product":  # the tools refuse it too: the over-eager substitute is forbidden instead
            if intent == "exchange":
                instr.append("If that is not possible, you keep the item: you do not want a return.")
                substitute = _call(
                    "return_delivered_order_items", order_id=oid, item_ids=old_ids, payment_method_id=original
                )
            else:
                instr.append("If that is not possible, you keep the order as it is: you do not want it cancelled.")
                substitute = _call("cancel_pending_order", order_id=oid, reason="no longer needed")
            instr.append(_ACCEPT)
            forbidden = [substitute]
        elif case == "pay_condition":
            cards = [m for m, d in methods.items() if d["source"] == "gift_card" and m != original]
            if len(cards) != 1 or methods[cards[0]]["balance"] >= round(diff, 2) or diff <= 0:
                return None
            step["payment"] = "gift_card"
            text += " Any price difference must be paid with your gift card and nothing else."
            instr.append("If the gift card cannot cover the difference, you do not want the change at all.")
            instr.append(_ACCEPT)
            forbidden = [_call(tool, order_id=oid, item_ids=old_ids, new_item_ids=new_ids, payment_method_id=original)]
        else:
            pay = self._difference_payment(owner, diff)
            if pay is not None:
                step["payment"] = pay[0]
                text += f" Use {pay[1]} for any price difference."
        return _Part(intent, step, text, known, instr, forbidden, None, [oid], owner if owner != uid else None)

    def _difference_payment(self, uid: str, diff: float) -> Optional[tuple[Any, str]]:
        """Sometimes the customer names how to pay or receive the difference (a method that can)."""
        if self.rng.random() < 0.5:
            return None
        methods = self.w.db["users"][uid]["payment_methods"]
        ok = [m for m, d in methods.items() if not (d["source"] == "gift_card" and d["balance"] < round(diff, 2))]
        if not ok:
            return None
        mid = self.rng.choice(sorted(ok))
        return self.method_kind(uid, mid), self.method_phrase(uid, mid)

    def _part_modify_items(
        self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]
    ) -> Optional[_Part]:
        return self._change("modify_items", uid, case, avoid, order)

    def _part_exchange(self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]) -> Optional[_Part]:
        return self._change("exchange", uid, case, avoid, order)

    def _part_modify_address(
        self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]
    ) -> Optional[_Part]:
        owner = uid
        if case == "other_user":
            owner = self.other_user(uid, "pending") or ""
            if not owner:
                return None
        oid = order or self.pick_order(owner, "pending", avoid)
        if oid is None:
            return None
        o = self.w.db["orders"][oid]
        known: list[str] = []
        user = self.w.db["users"][owner]
        if case is None and user["address"] != o["address"] and self.rng.random() < 0.3:
            addr_spec: dict = {"from_user": "current"}
            address = dict(user["address"])
            words = "your default address (the one on your account)"
        else:
            address = self.new_address(o["address"])
            addr_spec = dict(address)
            words = _address_words(address)
        if case == "other_user":
            ref, ospec = f"order {oid}", {"id": oid}
        else:
            ref, ospec = self.order_ref(uid, oid, "pending", known)
        step = {"intent": "modify_order_address", "order": ospec, "address": addr_spec}
        text = self.rng.choice(TEMPLATES["modify_address"]).format(order=ref, Order=_cap(ref), address=words)
        call = _call("modify_pending_order_address", order_id=oid, **{k: address[k] for k in rules.ADDRESS_KEYS})
        part = _Part("modify_address", step, text, known, [], [], None, [oid])
        if case == "other_user":
            who = self._relation()
            part.text = f"Your {who} asked you to change where their order {oid} goes. " + text
            part.known.append(f"The order id is {oid}; it was placed on your {who}'s account.")
            part.instructions.append(_ACCEPT)
            part.forbidden = [call]
            part.other_user = owner
        elif case == "item_modified":
            state = self._modified_order(oid)
            if state is None:
                return None
            part.initial_state, changed = state
            earlier = f"Earlier today you already changed the {changed} in {ref} to another option."
            part.text = f"{earlier} Now {text[0].lower()}{text[1:]}"
            part.instructions.append(_ACCEPT)
            part.forbidden = [call]
        return part

    def _modified_order(self, oid: str) -> Optional[tuple[dict, str]]:
        """An initial state where ``oid``'s items were modified once (as the tool leaves it), paid by card/PayPal."""
        o = self.w.db["orders"][oid]
        original = o["payment_history"][0]["payment_method_id"]
        if self.w.db["users"][o["user_id"]]["payment_methods"][original]["source"] == "gift_card":
            return None
        for item in o["items"]:
            options = self.targets(item)
            if not options:
                continue
            _, _, new_id = self.rng.choice(options)
            state = BaseData(self.w.db, rules.TABLES).new_state()
            RetailTools(state).use_tool(
                "modify_pending_order_items", order_id=oid, item_ids=[item["item_id"]], new_item_ids=[new_id],
                payment_method_id=original,
            )  # fmt: skip
            return {"initialization_data": {"agent_data": {"orders": {oid: state.orders[oid]}}}}, item["name"].lower()
        return None

    def _part_modify_payment(
        self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]
    ) -> Optional[_Part]:
        owner = uid
        if case == "other_user":
            owner = self.other_user(uid, "pending") or ""
            if not owner:
                return None
        methods = self.w.db["users"][owner]["payment_methods"]

        def payable(o: dict) -> bool:
            return len(o["payment_history"]) == 1 and any(
                m != o["payment_history"][0]["payment_method_id"]
                and not (d["source"] == "gift_card" and d["balance"] < o["payment_history"][0]["amount"])
                for m, d in methods.items()
            )

        oid = (
            order
            if order and payable(self.w.db["orders"][order])
            else self.pick_order(owner, "pending", avoid, payable)
        )
        if oid is None:
            return None
        o = self.w.db["orders"][oid]
        original = o["payment_history"][0]["payment_method_id"]
        amount = o["payment_history"][0]["amount"]
        new = sorted(
            m
            for m, d in methods.items()
            if m != original and not (d["source"] == "gift_card" and d["balance"] < amount)
        )
        mid = self.rng.choice(new)
        known: list[str] = []
        if case == "other_user":
            ref, ospec = f"order {oid}", {"id": oid}
        else:
            ref, ospec = self.order_ref(uid, oid, "pending", known)
        step = {"intent": "modify_payment", "order": ospec, "payment": self.method_kind(owner, mid)}
        text = self.rng.choice(TEMPLATES["modify_payment"]).format(
            order=ref, Order=_cap(ref), method=self.method_phrase(owner, mid), old=self.method_phrase(owner, original)
        )
        part = _Part("modify_payment", step, text, known, [], [], None, [oid])
        if case == "other_user":
            who = self._relation()
            part.text = f"Your {who} asked you to change how their order {oid} is paid. " + text.replace(
                "your ", "their "
            )
            part.known.append(f"The order id is {oid}; it was placed on your {who}'s account.")
            part.instructions.append(_ACCEPT)
            part.forbidden = [_call("modify_pending_order_payment", order_id=oid, payment_method_id=mid)]
            part.other_user = owner
        return part

    def _part_return(self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]) -> Optional[_Part]:
        owner = uid
        if case == "other_user":
            owner = self.other_user(uid, "delivered") or ""
            if not owner:
                return None
        status = "pending" if case == "not_delivered" else "delivered"
        oid = order or self.pick_order(owner, status, avoid)
        if oid is None:
            return None
        o = self.w.db["orders"][oid]
        described = [(i, *self.item_ref(o, i)) for i in range(len(o["items"]))]
        described = [d for d in described if d[2]]
        if not described:
            return None
        k = self.rng.randint(1, len(described))
        picked = sorted(self.rng.sample(described, k), key=lambda d: d[0])
        every = k == len(o["items"]) and self.rng.random() < 0.5
        known: list[str] = []
        if case == "other_user":
            ref, ospec = f"order {oid}", {"id": oid}
        else:
            ref, ospec = self.order_ref(uid, oid, status, known)
        items_words = "all the items" if every else _join([w for _, w, _ in picked])
        step: dict = {"intent": "return", "order": ospec, "items": "all" if every else [s for _, _, s in picked]}
        methods = self.w.db["users"][owner]["payment_methods"]
        original = o["payment_history"][0]["payment_method_id"]
        refund_words = ""
        forbidden: list[dict] = []
        instr: list[str] = []
        call = _call(
            "return_delivered_order_items", order_id=oid, item_ids=[o["items"][i]["item_id"] for i, _, _ in picked],
            payment_method_id=original,
        )  # fmt: skip
        if case == "refund_method":
            bad = [m for m, d in methods.items() if m != original and d["source"] != "gift_card"]
            if not bad:
                return None
            mid = self.rng.choice(sorted(bad))
            step["refund"] = self.method_kind(owner, mid)
            refund_words = f", with the refund on {self.method_phrase(owner, mid)}"
            instr += ["If the refund cannot go to that payment method, you do not want to return anything.", _ACCEPT]
            forbidden = [call]
        elif case == "not_delivered":  # pending: the tools refuse the return; an over-eager agent cancels instead
            instr += ["If the items cannot be returned yet, you do not want the order cancelled or changed.", _ACCEPT]
            forbidden = [_call("cancel_pending_order", order_id=oid, reason="no longer needed")]
        elif case is None:
            cards = [m for m, d in methods.items() if d["source"] == "gift_card" and m != original]
            r = self.rng.random()
            if cards and r < 0.3:
                step["refund"] = "gift_card"
                refund_words = ", refunded to your gift card"
            elif r < 0.6:
                step["refund"] = "original"
                refund_words = ", refunded to the original payment method"
        else:
            forbidden = [call]
            instr.append(_ACCEPT)
        templates = TEMPLATES["return"][::2] if status == "pending" else TEMPLATES["return"]
        text = self.rng.choice(templates).format(
            order=ref, Order=_cap(ref), items=items_words, Items=_cap(items_words), refund=refund_words,
            them="them" if every or k > 1 else "it",
        )  # fmt: skip
        instr.insert(0, "If the agent asks you to confirm the list of items, confirm it.")
        part = _Part("return", step, text, known, instr, forbidden, None, [oid])
        if case == "other_user":
            who = self._relation()
            part.text = (
                f"Your {who} asked you to handle a return from their order {oid} for them: "
                f"they want to send back {items_words}."
            )
            part.known.append(f"The order id is {oid}; it was placed on your {who}'s account.")
            part.other_user = owner
        if case == "not_authenticated" and "id" not in ospec:
            part.known.append(f"The order id is {oid}.")
            step["order"] = {"id": oid}
        return part

    def _part_modify_user_address(
        self,
        uid: str,
        case: Optional[str],
        avoid: set[str],
        order: Optional[str],  # noqa: ARG002 - a part builder's signature (_part_<intent>)
    ) -> Optional[_Part]:
        owner = uid if case != "other_user" else (self.other_user(uid, None) or "")
        if not owner:
            return None
        user = self.w.db["users"][owner]
        away = [
            oid for oid in user["orders"]
            if oid in self.w.db["orders"] and self.w.actionable(self.w.db["orders"][oid])
            and self.w.db["orders"][oid]["address"] != user["address"] and oid not in avoid
        ]  # fmt: skip
        known: list[str] = []
        if case is None and away and self.rng.random() < 0.35:
            oid = self.rng.choice(away)
            address = dict(self.w.db["orders"][oid]["address"])
            addr_spec: dict = {"from_order": {"id": oid}}
            words = f"the address order {oid} was shipped to (you would rather not spell it out)"
            known.append(f"The order id is {oid}.")
        else:
            address = self.new_address(user["address"])
            addr_spec = dict(address)
            words = _address_words(address)
        step: dict = {"intent": "modify_user_address", "address": addr_spec}
        text = self.rng.choice(TEMPLATES["modify_user_address"]).format(address=words)
        call = _call("modify_user_address", user_id=owner, **{k: address[k] for k in rules.ADDRESS_KEYS})
        part = _Part("modify_user_address", step, text, known)
        if case == "other_user":
            who = self._relation()
            step["for_user"] = owner
            part.text = (
                f"Your {who} {user['name']['first_name']} {user['name']['last_name']} (email {user['email']}) moved. "
                f"You want the default address on their account changed to {words}."
            )
            part.instructions.append(_ACCEPT)
            part.forbidden = [call]
            part.other_user = owner
        return part

    def _part_info(self, uid: str, case: Optional[str], avoid: set[str], order: Optional[str]) -> Optional[_Part]:  # noqa: ARG002 - a part builder's signature (_part_<intent>)
        user = self.w.db["users"][uid]
        mine = [o for s in self.w.user_orders[uid].values() for o in s if o not in avoid]
        kinds = ["available_count", "cheapest_available"]
        if mine:
            kinds += ["status", "total", "item_price"]
        if any(self.w.db["orders"][o]["fulfillments"] for o in mine):
            kinds.append("tracking")
        if sum(d["source"] == "gift_card" for d in user["payment_methods"].values()) == 1:
            kinds.append("gift_card_balance")
        kind = self.rng.choice(kinds)
        known: list[str] = []
        ask: dict = {"what": kind}
        if kind in ("available_count", "cheapest_available"):
            pids = [p for p in sorted(self.w.db["products"]) if p not in self.w.exclude]
            pid = self.rng.choice(pids)
            name = self.w.db["products"][pid]["name"]
            ask["product"] = name
            q = (
                f"How many {name} options are available in the store right now?"
                if kind == "available_count"
                else f"What is the price of the cheapest {name} available right now?"
            )
        elif kind == "gift_card_balance":
            q = "What is the balance of your gift card?"
        else:
            pool = [o for o in mine if self.w.db["orders"][o]["fulfillments"]] if kind == "tracking" else mine
            oid = self.rng.choice(pool)
            ask["order"] = {"id": oid}
            known.append(f"The order id is {oid}.")
            if kind == "item_price":
                o = self.w.db["orders"][oid]
                i = self.rng.randrange(len(o["items"]))
                words, spec = self.item_ref(o, i)
                if not spec:
                    return None
                ask["item"] = spec
                q = f"How much did you pay for {words} in order {oid}?"
            else:
                q = {
                    "status": f"What is the current status of order {oid}?",
                    "total": f"How much did you pay in total for order {oid}?",
                    "tracking": f"What is the tracking number of order {oid}?",
                }[kind]
        step = {"intent": "info", "ask": ask}
        text = self.rng.choice(TEMPLATES["info"]).format(question=q, question_lc=q[0].lower() + q[1:])
        return _Part("info", step, text, known, ["You only want the answer; you do not want anything changed."])

    def _relation(self) -> str:
        return self.rng.choice(RELATIONS)


# ------------------------------------------------------------------------------------------------ drafting


def _call(name: str, **arguments: Any) -> dict:
    return {"name": name, "arguments": arguments}


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _opts(options: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _address_words(a: dict) -> str:
    line2 = f", {a['address2']}" if a["address2"] else ""
    return f"{a['address1']}{line2}, {a['city']}, {a['state']} {a['zip']}, {a['country']}"


def _schedule(intents: Sequence[str], rng: random.Random) -> list[tuple[str, str, Optional[str]]]:
    """One cycle of (intent, variant, case) slots, shuffled: allowed slots weighted, every refused case once."""
    slots: list[tuple[str, str, Optional[str]]] = []
    for intent in intents:
        if "+" in intent:
            slots.append((intent, "allowed", None))
            continue
        slots += [(intent, "allowed", None)] * ALLOWED_WEIGHT
        slots += [(intent, "refused", case) for case in REFUSED_CASES[intent]]
    rng.shuffle(slots)
    return slots


def _check_intents(intents: Optional[Sequence[str]]) -> tuple[str, ...]:
    if intents is None:
        return INTENTS + COMBINED
    intents = tuple(intents)
    bad = [i for i in intents if any(p not in INTENTS for p in i.split("+"))]
    if bad or not intents:
        raise ValueError(f"intents {list(intents)!r}: choose from {list(INTENTS)} or pairs such as {COMBINED[0]!r}")
    return intents


def draft_tasks(
    db: dict,
    *,
    n: int,
    seed: int,
    exclude: frozenset[str] = frozenset(),
    intents: Optional[Sequence[str]] = None,
    id_prefix: str = "gen_",
) -> Iterator[dict]:
    """Yield retail task drafts (the generation contract): ``n`` drafts, then up to ``n // 4 + 8`` more for the
    machinery to draw on when some fail verification. Deterministic for (db, n, seed, exclude, intents).

    ``db`` is the retail DB as plain data (``load_domain("retail").base_db.data``); no user, order, product or item
    id in ``exclude`` is used. ``intents``: names from :data:`INTENTS` and pairs such as ``"cancel+return"``
    (default: every intent and the pairs of :data:`COMBINED`), each in its allowed variant and, where the policy
    refuses, in its refused ones (:data:`REFUSED_CASES`).
    """
    if n < 1:
        raise ValueError(f"n={n!r}: must be at least 1")
    chosen = _check_intents(intents)
    rng = random.Random(seed)
    gen = _Gen(_World(db, frozenset(exclude)), rng)
    total = n + n // 4 + 8
    made, seen = 0, set()
    while made < total:
        progress = False
        for intent, variant, case in _schedule(chosen, rng):
            if made >= total:
                break
            draft = None
            for _ in range(30):  # users and orders drawn at random until one fits the slot
                draft = _draft(gen, intent, variant, case, f"{id_prefix}{made:05d}", seed)
                if draft is not None and draft["signature"] not in seen:
                    break
                draft = None
            if draft is None:
                continue
            seen.add(draft.pop("signature"))
            made += 1
            progress = True
            yield draft
        if not progress:
            return


def _draft(gen: _Gen, intent: str, variant: str, case: Optional[str], task_id: str, seed: int) -> Optional[dict]:
    rng, w = gen.rng, gen.w
    names = intent.split("+")
    needs = {"cancel": "pending", "modify_items": "pending", "modify_address": "pending", "modify_payment": "pending",
             "return": "delivered", "exchange": "delivered"}  # fmt: skip
    flipped = {"not_pending": "delivered", "not_delivered": "pending"}
    statuses = [flipped.get(case or "", needs[i]) for i in names if i in needs and case != "other_user"]
    pool = w.users
    for s in statuses:
        pool = [u for u in pool if len(w.user_orders[u].get(s, [])) >= statuses.count(s)]
    if not pool:
        return None
    uid = rng.choice(pool)
    mode = rng.choice(("email", "name_zip"))
    if case == "not_authenticated":
        mode = "name_zip"
    parts: list[_Part] = []
    avoid: set[str] = set()
    same_order = intent in ("modify_address+modify_items", "modify_payment+modify_address")
    for k, name in enumerate(names):
        order = parts[0].orders[0] if same_order and k == 1 and parts else None
        part = gen.part(name, uid, case, avoid, order)
        if part is None:
            return None
        parts.append(part)
        avoid |= set(part.orders)
    customer, who, unknown = gen.identity(uid, mode)
    if case == "not_authenticated":
        user = w.db["users"][uid]
        first, last = user["name"]["first_name"], user["name"]["last_name"]
        zips = [z for _, _, z in rng.sample(w.places, min(40, len(w.places)))]
        wrong = next((z for z in zips if (first.lower(), last.lower(), z) not in w.name_zip), None)
        if wrong is None:
            return None
        customer = {"name": f"{first} {last}", "zip": wrong}
        who = f"You are {first} {last}, and your zip code is {wrong}."
        unknown = "You do not remember your email address, and you know no other zip code."
        parts[0].instructions.append("If the agent cannot find your account, accept it and end the conversation.")
    request = {"customer": customer, "steps": [p.step for p in parts]}
    initial_state = next((p.initial_state for p in parts if p.initial_state), None)
    base = w.db if initial_state is None else merge_update(w.db, initial_state["initialization_data"]["agent_data"])
    result = rules.resolve(request, base)
    if any(note.split(" ")[0] not in ("transfer",) for note in result["notes"]):
        return None  # the wish has several answers: the customer's words would not decide it
    forbidden = [f for p in parts for f in p.forbidden]
    if variant == "allowed":
        if not result["allowed"] or not (result["actions"] or result["communicate"]):
            return None
    else:
        if result["allowed"] or result["actions"] or not forbidden or not _changes_db(base, forbidden):
            return None
    gold = _clean_trace(base, result["trace"])
    if gold is None:
        return None
    texts = [parts[0].text] + [f"Also, {p.text[0].lower()}{p.text[1:]}" for p in parts[1:]]
    known = [who] + [k for p in parts for k in p.known]
    instr = [i for p in parts for i in p.instructions] + [
        "If the agent asks you to confirm the details of a change you asked for, say yes.",
        _CLOSE,
    ]
    task = {
        "id": task_id,
        "description": {
            "purpose": f"Generated retail request: {intent} ({variant}{', ' + case if case else ''})",
            "relevant_policies": "\n".join(result["rules"]),
            "notes": f"generated by {GENERATOR} v{GENERATOR_VERSION} (seed {seed})",
        },
        "user_scenario": {
            "persona": rng.choice(PERSONAS),
            "instructions": {
                "domain": "retail",
                "reason_for_call": " ".join(texts),
                "known_info": " ".join(dict.fromkeys(known)),
                "unknown_info": unknown,
                "task_instructions": " ".join(dict.fromkeys(instr)),
            },
        },
        "evaluation_criteria": {
            "actions": [
                {"action_id": f"{task_id}_{k}", "name": a["name"], "arguments": a["arguments"], "info": None}
                for k, a in enumerate(gold)
            ],
            "communicate_info": list(result["communicate"]),
            "nl_assertions": None,
            "reward_basis": ["DB", "COMMUNICATE"],
        },
    }
    if initial_state is not None:
        task["initial_state"] = initial_state
    users = [uid] + [p.other_user for p in parts if p.other_user]
    orders = sorted(
        {a["arguments"]["order_id"] for a in gold + forbidden if "order_id" in a["arguments"]}
        | {o for p in parts for o in p.orders}
    )
    products = sorted({a["arguments"]["product_id"] for a in gold if "product_id" in a["arguments"]})
    items = sorted(
        {i for a in gold + forbidden for key in ("item_ids", "new_item_ids") for i in a["arguments"].get(key, [])}
    )
    if w.exclude and _mentions(gold + forbidden, w.exclude) | (set(users + orders + products + items) & w.exclude):
        return None  # e.g. "the cheapest one" turned out to be an excluded item
    writes = [a for a in gold if a["name"] in rules.WRITE_TOOLS]
    return {
        "task": task,
        "intent": intent,
        "variant": variant,
        "case": case,
        "auth": "email" if "email" in customer else "name_zip",
        "forbidden_actions": forbidden,
        "needs_write": bool(writes),
        "rules": list(result["rules"]),
        "entities": {"users": users, "orders": orders, "products": products, "items": items},
        "signature": (intent, variant, case, uid, tuple(orders)),
    }


def _mentions(calls: list[dict], keys: frozenset[str]) -> set[str]:
    """The ``keys`` that the calls' arguments name (strings and lists of strings)."""
    out: set[str] = set()
    for c in calls:
        for v in c["arguments"].values():
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, str) and x in keys:
                    out.add(x)
    return out


def _changes_db(db: dict, calls: list[dict]) -> bool:
    """Whether ``calls`` run without error and leave the DB different (so an episode can tell them apart)."""
    base = BaseData(db, rules.TABLES)
    state = base.new_state()
    tools = RetailTools(state)
    try:
        for c in calls:
            tools.use_tool(c["name"], **c["arguments"])
    except Exception:  # noqa: BLE001 - any tool error: the calls do not run
        return False
    return not state.same_as(base.new_state())


def _clean_trace(db: dict, trace: list[dict]) -> Optional[list[dict]]:
    """The gold actions: the trace's calls that run without error (a careful agent's failed lookups are left out,
    since gold actions must replay cleanly); None when a write fails (a bug in the rules)."""
    tools = RetailTools(BaseData(db, rules.TABLES).new_state())
    out = []
    for call in trace:
        try:
            tools.use_tool(call["name"], **call["arguments"])
        except Exception:  # noqa: BLE001 - any tool error leaves the call out
            if call["name"] in rules.WRITE_TOOLS:
                return None
            continue
        out.append(call)
    return out


# ------------------------------------------------------------------------------------------------ the benchmark


def _canon(action: dict) -> str:
    """A write as the tools store it: return and exchange item lists are kept sorted."""
    name, args = action["name"], dict(action["arguments"])
    if name in ("return_delivered_order_items", "exchange_delivered_order_items"):
        for key in ("item_ids", "new_item_ids"):
            if key in args:
                args[key] = sorted(args[key])
    return json.dumps([name, args], sort_keys=True)


def _replay(base: BaseData, actions: list[dict]) -> tuple[str, list[dict]]:
    """The DB hash after ``actions`` and the ones that ran (a failing call changes nothing, as in tau2's evaluator)."""
    state = base.new_state()
    tools = RetailTools(state)
    ran = []
    for a in actions:
        try:
            tools.use_tool(a["name"], **a["arguments"])
        except Exception:  # noqa: BLE001 - the evaluator logs and ignores a failing gold call; so does the comparison
            continue
        ran.append(a)
    return state.hash(), ran


def reproduce_benchmark(tasks: Sequence[dict], base: BaseData, requests: Optional[dict] = None) -> dict:
    """Resolve every annotated benchmark request (``benchmark_requests.json``) through the rule engine and compare
    its writes with the task's gold writes (as the tools store them, and the DB they leave):
    ``{"tasks", "reproduced", "misses": {id: the engine's reason}, "unrunnable": [ids whose resolved writes fail]}``."""
    requests = requests if requests is not None else json.loads(REQUESTS.read_text(encoding="utf-8"))
    misses: dict[str, str] = {}
    unrunnable = []
    for task in tasks:
        tid = str(task["id"])
        request = requests["tasks"][tid]
        crit = task.get("evaluation_criteria") or {}
        gold = [
            {"name": a["name"], "arguments": a["arguments"]}
            for a in crit.get("actions") or []
            if a["name"] in rules.WRITE_TOOLS
        ]
        gold_hash, gold_ran = _replay(base, gold)
        result = rules.resolve(request, base.data)
        mine_hash, mine_ran = _replay(base, result["actions"])
        if mine_ran != result["actions"]:
            unrunnable.append(tid)
        if sorted(map(_canon, gold_ran)) != sorted(map(_canon, result["actions"])) or gold_hash != mine_hash:
            misses[tid] = result["reason"]
    return {"tasks": len(tasks), "reproduced": len(tasks) - len(misses), "misses": misses, "unrunnable": unrunnable}


def rule_engine_coverage(data_dir: Optional[str] = None) -> dict:
    """How much of the benchmark the rule engine reproduces: ``{"tasks", "reproduced", "misses": {id: reason}}``
    (recorded in a generated set's ``generated.json``)."""
    return json.loads(_coverage(data_dir))


@lru_cache(maxsize=4)
def _coverage(data_dir: Optional[str]) -> str:
    dom = load_domain("retail", data_dir)
    tasks = json.loads(dom.task_file().read_text(encoding="utf-8"))
    result = reproduce_benchmark(tasks, dom.base_db)
    return json.dumps({k: result[k] for k in ("tasks", "reproduced", "misses")})
