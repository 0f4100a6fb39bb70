"""The retail policy as rules: a customer's request, in the customer's terms, plus the DB -> the writes it allows.

One home for what the retail agent may do, used by the task generator (``generate.py``) and by the reproduction
of the benchmark (``benchmark_requests.json``): :func:`resolve` reads a request such as "exchange the keyboard in
order #W2378156 for the same one with clicky switches" or "return everything I received except the tablet, refund
to my gift card", finds the user, orders, items and variants in the DB the way a careful agent would, applies the
policy (each rule cites its paragraph of ``policy.md``), and returns the write actions in the order an agent makes
them, with the reads it made on the way and the facts it should tell the customer.

Writes are applied to a scratch copy of the DB through the domain's own tools (``RetailTools``), so the state a
later part of the request sees (an order already modified, a return already requested) is the tools' state, and a
write the tools would reject is caught here instead of in a generated task.

A request is a plain dict (the format is documented in ``benchmark_requests.json``'s ``format`` entry)::

    {"customer": {"name": "Yusuf Rossi", "zip": "19122"},          # or {"email": ...}; zip/email may be lists
     "steps": [{"intent": "exchange", "order": {"id": "#W2378156"},
                "items": [{"product": "keyboard", "to": {"set": {"switch type": "clicky"}}}]}]}

Intents: ``cancel``, ``cancel_items`` (remove single items: never possible), ``return``, ``exchange`` and
``modify_items`` (both change items to other variants: the order's status picks the tool), ``modify_order_address``,
``modify_payment``, ``modify_user_address``, ``info``, ``transfer`` (the customer asks for a human),
``out_of_scope`` (something no tool does). Combinators: ``{"first_of": [alternative, ...]}`` (the customer's "if
that is not possible, ..."), ``{"best_of": [...], "by": "money_back"}``, and ``"if": {"possible": step}`` /
``"unless"`` on any step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from tau2_gym.core.db import BaseData, DBState
from tau2_gym.domains.retail.tools import RetailTools

TABLES = ("products", "users", "orders")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
WRITE_TOOLS = frozenset(
    {
        "cancel_pending_order",
        "exchange_delivered_order_items",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "modify_pending_order_payment",
        "modify_user_address",
        "return_delivered_order_items",
    }
)
ADDRESS_KEYS = ("address1", "address2", "city", "state", "country", "zip")

# ------------------------------------------------------------------------------------------------ the policy's rules
#: rule name -> (heading of policy.md, paragraph number under it, words quoted from that paragraph)
POLICY_RULES: dict[str, tuple[str, int, str]] = {
    "authenticate": ("Retail agent policy", 3, "authenticate the user identity by locating their user id via email"),
    "information": ("Retail agent policy", 4, "provide the user with information about order, product, profile"),
    "one_user": ("Retail agent policy", 5, "must deny any requests for tasks related to any other user"),
    "confirm": ("Retail agent policy", 6, "obtain explicit user confirmation (yes) to proceed"),
    "no_invention": ("Retail agent policy", 7, "You should not make up any information"),
    "deny": ("Retail agent policy", 9, "You should deny user requests that are against this policy."),
    "transfer": ("Retail agent policy", 10, "if and only if the request cannot be handled within the scope"),
    "scope": ("Retail agent policy", 2, "**modify their default user address**"),
    "act_pending_delivered": ("Generic action rules", 1, "you can only take action on pending or delivered orders"),
    "once_per_order": ("Generic action rules", 2, "can only be called once per order"),
    "cancel_pending": ("Cancel pending order", 1, "An order can only be cancelled if its status is 'pending'"),
    "cancel_reason": ("Cancel pending order", 2, "either 'no longer needed' or 'ordered by mistake'"),
    "cancel_refund": ("Cancel pending order", 3, "refunded via the original payment method"),
    "modify_pending": ("Modify pending order", 1, "An order can only be modified if its status is 'pending'"),
    "modify_what": ("Modify pending order", 2, "shipping address, payment method, or product item options"),
    "payment_single": ("Modify payment", 1, "a single payment method different from the original payment method"),
    "payment_gift_card": ("Modify payment", 2, "it must have enough balance to cover the total amount"),
    "items_once": ("Modify items", 1, "The agent will not be able to modify or cancel the order anymore"),
    "items_same_product": ("Modify items", 2, "There cannot be any change of product types"),
    "items_payment": ("Modify items", 3, "must have enough balance to cover the price difference"),
    "return_delivered": ("Return delivered order", 1, "An order can only be returned if its status is 'delivered'"),
    "return_items": ("Return delivered order", 2, "confirm the order id and the list of items to be returned"),
    "return_refund": ("Return delivered order", 4, "either go to the original payment method, or an existing gift"),
    "exchange_delivered": ("Exchange delivered order", 1, "can only be exchanged if its status is 'delivered'"),
    "exchange_same_product": ("Exchange delivered order", 2, "same product but of different product option"),
    "exchange_payment": ("Exchange delivered order", 3, "must have enough balance to cover the price difference"),
}


def cite(rule: str) -> str:
    """``retail policy: <heading> ¶n ("<quoted words>")`` -- how a draft's ``rules`` list names a rule."""
    heading, para, quote = POLICY_RULES[rule]
    return f'retail policy: {heading} ¶{para} ("{quote}")'


def policy_paragraphs(policy_text: str) -> dict[str, list[str]]:
    """policy.md as {heading: [paragraph, ...]} (paragraphs are blank-line separated blocks; ¶1 is index 0)."""
    out: dict[str, list[str]] = {}
    current: Optional[list[str]] = None
    for block in re.split(r"\n\s*\n", policy_text):
        block = block.strip()
        if not block:
            continue
        if block.startswith("#"):
            head, _, rest = block.partition("\n")
            current = out.setdefault(head.lstrip("#").strip(), [])
            if rest.strip():
                current.append(rest.strip())
        elif current is not None:
            current.append(block)
    return out


# ------------------------------------------------------------------------------------------------ results


class Refused(Exception):
    """A step the policy does not allow (or that cannot be done): why, and the rule that says so."""

    def __init__(self, reason: str, rule: str = "deny") -> None:
        super().__init__(reason)
        self.reason = reason
        self.rule = rule


@dataclass
class Part:
    """The outcome of one step of a request."""

    intent: str
    allowed: bool
    reason: str = ""
    actions: list[dict] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)


class Session:
    """One conversation: the scratch DB (tools applied as the agent would), the authenticated user, and what the
    agent has read, written and should say so far."""

    def __init__(self, db: dict, state: Optional[DBState] = None) -> None:
        self.start = db
        self.state = state if state is not None else BaseData(db, TABLES).new_state()
        self.tools = RetailTools(self.state)
        self.user_id: Optional[str] = None
        self.actions: list[dict] = []
        self.reads: list[dict] = []
        self.trace: list[dict] = []
        self.communicate: list[str] = []
        self.rules: list[str] = []
        self.parts: list[Part] = []
        self.notes: list[str] = []
        self.money_back = 0.0

    def fork(self) -> Session:
        """An independent copy to try an alternative on."""
        new = Session.__new__(Session)
        new.start = self.start
        new.state = self.state.copy()
        new.tools = RetailTools(new.state)
        new.user_id = self.user_id
        for name in ("actions", "reads", "trace", "communicate", "rules", "parts", "notes"):
            setattr(new, name, list(getattr(self, name)))
        new.money_back = self.money_back
        return new

    def adopt(self, other: Session) -> None:
        for name in (
            "state",
            "tools",
            "user_id",
            "actions",
            "reads",
            "trace",
            "communicate",
            "rules",
            "parts",
            "notes",
        ):
            setattr(self, name, getattr(other, name))
        self.money_back = other.money_back

    # -------------------------------------------------------------- reading and writing

    def read(self, name: str, **arguments: Any) -> None:
        call = {"name": name, "arguments": arguments}
        if call not in self.reads:
            self.reads.append(call)
            self.trace.append(call)

    def rule(self, name: str) -> None:
        c = cite(name)
        if c not in self.rules:
            self.rules.append(c)

    def write(self, name: str, **arguments: Any) -> dict:
        """Apply a write through the domain's tools; a tool error means the rules missed a check (a bug here)."""
        self.rule("confirm")
        try:
            self.tools.use_tool(name, **arguments)
        except Exception as exc:  # the tool refuses: report it as a refusal naming the tool's words
            raise Refused(f"the tool refuses {name}: {exc}", "deny") from exc
        action = {"name": name, "arguments": arguments}
        self.actions.append(action)
        self.trace.append(action)
        return action

    @property
    def user(self) -> dict:
        if self.user_id is None:
            raise Refused("the customer is not authenticated", "authenticate")
        return self.state.users[self.user_id]

    def order(self, order_id: str) -> dict:
        return self.state.orders[order_id]

    def known(self, order_id: str) -> dict:
        """The order as the customer knows it: as it was when the conversation started (their words describe
        that order even after this conversation changed its status, address or items)."""
        start = self.start["orders"].get(order_id)
        return start if start is not None else self.state.orders[order_id]

    def product(self, product_id: str) -> dict:
        return self.state.products[product_id]


# ------------------------------------------------------------------------------------------------ words -> catalogue

_SYNONYMS = {
    "coffee machine": ("Coffee Maker", "Espresso Machine"),
    "bike": ("Bicycle",),
    "book shelf": ("Bookshelf",),
}


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def product_matches(term: str, name: str) -> bool:
    """Whether the customer's word for a product ("the cleaner", "tshirt", "watch") names catalogue product
    ``name`` ("Vacuum Cleaner", "T-Shirt", "Smart Watch"/"Wristwatch")."""
    t = term.lower().strip()
    if t in _SYNONYMS:
        return name in _SYNONYMS[t]
    nt, nn = _singular(_norm(t)), _singular(_norm(name))
    if nt == nn:
        return True
    words = [_singular(_norm(w)) for w in re.split(r"[\s-]+", name) if w]
    return nt in words or (len(nt) >= 4 and nn.endswith(nt))


_SCALES = (
    ("xs", "s", "m", "l", "xl", "xxl"),
    ("small", "medium", "large"),
    ("portable", "medium", "large"),
    ("low", "medium", "high"),
    ("beginner", "intermediate", "expert"),
    ("basic", "professional"),
)


def option_number(value: str) -> Optional[float]:
    """A comparable number for an option value ("1000ml", "1.5L", "4K", "i7", "1TB SSD", "XL", "medium")."""
    v = value.strip().lower()
    for scale in _SCALES:
        if v in scale:
            return float(scale.index(v))
    m = re.search(r"(\d+(?:\.\d+)?)\s*(tb|k)?", v)
    if not m:
        return None
    n = float(m.group(1))
    if m.group(2) == "tb":
        n *= 1000
    elif m.group(2) == "k":
        n *= 1000
    if re.fullmatch(r"\d+(?:\.\d+)?\s*l", v):  # litres against millilitres
        n *= 1000
    return n


def money(x: float) -> str:
    return f"{round(x + 0.0, 2):.2f}"


# ------------------------------------------------------------------------------------------------ the engine


def resolve(request: dict, db: dict) -> dict:
    """Resolve a customer's request against ``db`` (plain retail data: products, users, orders) under the policy.

    Returns ``{"allowed", "reason", "actions", "communicate", "rules"}`` plus ``"reads"`` (the lookups a careful
    agent makes, in order), ``"trace"`` (reads and writes interleaved as the agent makes them), ``"parts"`` (one
    outcome per step), ``"user_id"``, ``"notes"`` (choices the request left open) and ``"money_back"``.
    ``allowed`` is False when any step was refused; ``actions`` still holds the writes of the steps that were
    allowed (the policy lets the agent do those).
    """
    session = Session(db)
    try:
        authenticate(session, request.get("customer") or {})
    except Refused as exc:
        return _result(session, False, exc.reason)
    steps = list(request.get("steps") or [])
    for step in _schedule(steps):
        run_step(session, step)
    refused = [p for p in session.parts if not p.allowed]
    reason = "; ".join(f"{p.intent}: {p.reason}" for p in refused) if refused else "allowed"
    return _result(session, not refused, reason)


def _result(session: Session, allowed: bool, reason: str) -> dict:
    return {
        "allowed": allowed,
        "reason": reason,
        "actions": session.actions,
        "communicate": session.communicate,
        "rules": session.rules,
        "reads": session.reads,
        "trace": session.trace,
        "parts": [p.__dict__ for p in session.parts],
        "user_id": session.user_id,
        "notes": session.notes,
        "money_back": round(session.money_back, 2),
    }


def _schedule(steps: list[dict]) -> list[dict]:
    """Address and payment changes first: once an order's items are modified it can no longer be modified
    (Modify items ¶1), so a careful agent makes the other changes of a combined request before that one."""
    first = [s for s in steps if s.get("intent") in ("modify_order_address", "modify_payment", "modify_user_address")]
    return first + [s for s in steps if s not in first]


def authenticate(session: Session, customer: dict) -> None:
    """Find the user id by email, else by name + zip (each may be a list of attempts); Retail agent policy ¶3."""
    session.rule("authenticate")
    emails = customer.get("email") or []
    for email in [emails] if isinstance(emails, str) else emails:
        session.read("find_user_id_by_email", email=email)
        for uid, user in session.state.users.items():
            if user["email"].lower() == email.lower():
                session.user_id = uid
                break
        if session.user_id:
            break
    if session.user_id is None and customer.get("name"):
        first, _, last = customer["name"].partition(" ")
        zips = customer.get("zip") or []
        for z in [zips] if isinstance(zips, str) else zips:
            session.read("find_user_id_by_name_zip", first_name=first, last_name=last, zip=z)
            for uid, user in session.state.users.items():
                n = user["name"]
                if (
                    n["first_name"].lower() == first.lower()
                    and n["last_name"].lower() == last.lower()
                    and user["address"]["zip"] == z
                ):
                    session.user_id = uid
                    break
            if session.user_id:
                break
    if session.user_id is None:
        raise Refused("the customer could not be authenticated (no user with that email or name + zip)", "authenticate")
    session.read("get_user_details", user_id=session.user_id)


def run_step(session: Session, step: Any) -> bool:
    """Run one step (or a list of steps) on ``session``; True when every part was allowed."""
    if isinstance(step, list):
        ok = True
        for s in step:
            ok = run_step(session, s) and ok
        return ok
    if "first_of" in step:
        return _first_of(session, step["first_of"])
    if "best_of" in step:
        return _best_of(session, step["best_of"], step.get("by", "money_back"))
    intent = step.get("intent", "?")
    if "if" in step and not _condition(session, step["if"]):
        return True
    if "unless" in step and _condition(session, step["unless"]):
        return True
    handler = _HANDLERS.get(intent)
    if handler is None:
        raise ValueError(f"unknown intent {intent!r}; intents are {sorted(_HANDLERS)}")
    before = len(session.actions)
    try:
        handler(session, step)
    except Refused as exc:
        session.rule(exc.rule)
        session.parts.append(Part(intent, False, exc.reason, session.actions[before:], [cite(exc.rule)]))
        return False
    session.parts.append(Part(intent, True, "", session.actions[before:]))
    return True


def _first_of(session: Session, alternatives: list) -> bool:
    """The customer's fallbacks: the first alternative whose every part the policy allows is done; when none is,
    the refusal of the first is reported (nothing is written)."""
    first_fail: Optional[Session] = None
    for alt in alternatives:
        trial = session.fork()
        if run_step(trial, alt):
            session.adopt(trial)
            return True
        if first_fail is None:
            first_fail = trial
    assert first_fail is not None
    failed = [p for p in first_fail.parts[len(session.parts) :] if not p.allowed]
    session.parts.extend(Part(p.intent, False, p.reason, [], p.rules) for p in failed[:1])
    for p in failed[:1]:
        for r in p.rules:
            if r not in session.rules:
                session.rules.append(r)
    return False


def _best_of(session: Session, alternatives: list, by: str) -> bool:
    """The allowed alternative that gives the customer the most money back (ties: the first)."""
    if by != "money_back":
        raise ValueError(f"best_of by {by!r}: only 'money_back' is known")
    best: Optional[Session] = None
    for alt in alternatives:
        trial = session.fork()
        if run_step(trial, alt) and (best is None or trial.money_back > best.money_back + 1e-9):
            best = trial
    if best is None:
        return _first_of(session, alternatives)
    session.adopt(best)
    return True


def _condition(session: Session, cond: dict) -> bool:
    if "possible" in cond:
        trial = session.fork()
        return run_step(trial, cond["possible"])
    if "item_price_above" in cond:
        spec = cond["item_price_above"]
        found = find_items(session, spec.get("order"), [spec["item"]], prefer=None)
        return any(session.order(oid)["items"][i]["price"] > spec["value"] for oid, idx in found for i in idx)
    raise ValueError(f"unknown condition {sorted(cond)}")


# ------------------------------------------------------------------------------------------------ finding things


def user_orders(session: Session) -> list[str]:
    return list(session.user["orders"])


def _order_matches(session: Session, oid: str, spec: dict) -> bool:
    order = session.known(oid)
    for term in spec.get("with", []):
        if not any(_item_matches(it, term if isinstance(term, dict) else {"product": term}) for it in order["items"]):
            return False
    if "with_any" in spec and not any(
        _item_matches(it, t if isinstance(t, dict) else {"product": t})
        for t in spec["with_any"]
        for it in order["items"]
    ):
        return False
    for term in spec.get("without", []):
        if any(_item_matches(it, {"product": term}) for it in order["items"]):
            return False
    status = spec.get("status")
    if status is not None:
        statuses = [status] if isinstance(status, str) else status
        if order["status"] not in [x for s in statuses for x in _STATUS_WORDS.get(s, (s,))]:
            return False
    if "item_count" in spec and len(order["items"]) != spec["item_count"]:
        return False
    where = spec.get("shipped_to")
    if where and any(str(order["address"].get(k, "")).lower() != str(v).lower() for k, v in where.items()):
        return False
    not_where = spec.get("not_shipped_to")
    if not_where and all(str(order["address"].get(k, "")).lower() == str(v).lower() for k, v in not_where.items()):
        return False
    return True


#: the customer's word for a status -> the statuses it covers ("the one I received" may already be returned)
_STATUS_WORDS = {
    "received": ("delivered", "exchange requested", "return requested"),
    "pending": ("pending", "pending (item modified)"),
}


def find_orders(
    session: Session, spec: Optional[dict], prefer: Optional[tuple[str, ...]], many: bool = False
) -> list[str]:
    """The user's orders a description names ("#W2378156", "the order with the laptop", "the one sent to Texas",
    "all my pending orders"). ``prefer``: the statuses the intent acts on, used to tell several matches apart.
    An order id that is not the user's is refused (one user per conversation, Retail agent policy ¶5)."""
    spec = spec or {}
    mine = user_orders(session)
    if "of_item" in spec:  # "the order that has the more expensive tablet"
        return [find_items(session, None, [_as_spec(spec["of_item"])], prefer)[0][0]]
    if "id" in spec:
        oid = spec["id"]
        if oid not in mine:
            if oid in session.state.orders:
                raise Refused(f"order {oid} belongs to another user", "one_user")
            if not (spec.get("with") or spec.get("with_any")):
                raise Refused(f"order {oid} does not exist", "no_invention")
        else:
            session.read("get_order_details", order_id=oid)
            rest = {k: v for k, v in spec.items() if k not in ("id",)}
            if not rest or _order_matches(session, oid, rest):
                return [oid]
            # a guessed id that is not the order described: look for the described one
    for oid in mine:
        session.read("get_order_details", order_id=oid)
    found = [oid for oid in mine if _order_matches(session, oid, {k: v for k, v in spec.items() if k != "id"})]
    if spec.get("most_recent") and found:
        found = found[-1:]
    if not found:
        raise Refused("no order of the customer matches the description", "no_invention")
    if many or spec.get("all"):
        if prefer and not spec.get("status"):
            narrowed = [o for o in found if session.known(o)["status"] in prefer]
            found = narrowed or found
        return found
    if len(found) > 1 and prefer:
        narrowed = [o for o in found if session.known(o)["status"] in prefer]
        found = narrowed or found
    if len(found) > 1:
        session.notes.append(f"several orders match {spec}: took {found[0]}")
    return found[:1]


def _item_matches(item: dict, spec: dict) -> bool:
    if "item_id" in spec and item["item_id"] != spec["item_id"]:
        return False
    if "product_id" in spec and item["product_id"] != spec["product_id"]:
        return False
    if "product" in spec and not product_matches(spec["product"], item["name"]):
        return False
    for k, v in (spec.get("options") or {}).items():
        if item["options"].get(k) not in ([v] if isinstance(v, str) else v):
            return False
    return True


def find_items(
    session: Session,
    order_spec: Optional[dict],
    specs: list[dict],
    prefer: Optional[tuple[str, ...]],
    claimed: Optional[set[tuple[str, int]]] = None,
) -> list[tuple[str, list[int]]]:
    """Items of the customer's orders, grouped by order in the order they were named: ``[(order_id, [index in
    order items, ...]), ...]``. Without an order description, every order is searched and ``prefer`` (statuses)
    decides between orders holding the same kind of item; "the more expensive one" picks across orders."""
    if order_spec is not None:
        orders = find_orders(session, order_spec, prefer, many=bool(order_spec.get("all")))
    else:
        orders = user_orders(session)
        for oid in orders:
            session.read("get_order_details", order_id=oid)
    out: dict[str, list[int]] = {}
    taken = set(claimed or ())
    for spec in map(_as_spec, specs):
        if spec == "all" or spec.get("every"):
            excluded = spec.get("except", []) if isinstance(spec, dict) else []
            for oid in orders:
                items = session.known(oid)["items"]
                keep = [
                    i
                    for i, it in enumerate(items)
                    if (oid, i) not in taken and not any(_item_matches(it, _as_spec(e)) for e in excluded)
                ]
                if keep:
                    out.setdefault(oid, []).extend(i for i in keep if i not in out.get(oid, []))
            continue
        hits = [
            (oid, i) for oid in orders for i, it in enumerate(session.known(oid)["items"]) if _item_matches(it, spec)
        ]
        hits = [(o, i) for o, i in hits if i not in out.get(o, []) and (o, i) not in taken]
        if not hits:
            raise Refused(f"no item matching {_describe(spec)} in the customer's orders", "no_invention")
        if prefer and len({o for o, _ in hits}) > 1:
            narrowed = [(o, i) for o, i in hits if session.known(o)["status"] in prefer]
            hits = narrowed or hits
        if spec.get("pick") in ("most_expensive", "cheapest"):
            sign = 1 if spec["pick"] == "cheapest" else -1
            hits = [min(hits, key=lambda h: sign * session.known(h[0])["items"][h[1]]["price"])]
        elif not spec.get("all"):
            if len({o for o, _ in hits}) > 1:
                session.notes.append(f"{_describe(spec)} is in several orders: took {hits[0][0]}")
            hits = [h for h in hits if h[0] == hits[0][0]][:1]
        for oid, i in hits:
            out.setdefault(oid, []).append(i)
    return list(out.items())


def _as_spec(term: Any) -> dict:
    return term if isinstance(term, dict) else {"product": term}


def _describe(spec: dict) -> str:
    parts = [spec.get("product") or spec.get("item_id") or spec.get("product_id") or "item"]
    if spec.get("options"):
        parts.append(str(spec["options"]))
    return " ".join(parts)


# ------------------------------------------------------------------------------------------------ variants


def resolve_target(session: Session, item: dict, target: dict, intent: str, order_items: list[dict]) -> str:
    """The variant an item changes to: same product, available, another option (Modify items ¶2, Exchange ¶2),
    chosen from the customer's description of it (options to set or keep, "bigger", "cheapest", preferences)."""
    same_rule = "exchange_same_product" if intent == "exchange" else "items_same_product"
    product = session.product(item["product_id"])
    session.read("get_product_details", product_id=item["product_id"])
    variants = list(product["variants"].values())
    if target.get("product") and not product_matches(target["product"], product["name"]):
        raise Refused(
            f"a {item['name']} cannot be changed into a {target['product']} (another product type)", same_rule
        )
    if target.get("same"):
        raise Refused(f"the new item must differ in its options from the {item['name']} ordered", same_rule)
    if "item_id" in target or "like" in target:
        new_id = target.get("item_id") or _like_item(session, target["like"], order_items, item)["item_id"]
        if new_id not in product["variants"]:
            raise Refused(f"item {new_id} is not a variant of the {item['name']} (another product type)", same_rule)
        if new_id == item["item_id"]:
            raise Refused(f"item {new_id} is the item already ordered", same_rule)
        if not product["variants"][new_id]["available"]:
            raise Refused(f"item {new_id} is not available", same_rule)
        return new_id
    old = item["options"]
    keys = list(old)
    setv: dict[str, list[str]] = {
        k: ([v] if isinstance(v, str) else list(v)) for k, v in (target.get("set") or {}).items()
    }
    moved = set(setv) | set(target.get("higher", [])) | set(target.get("lower", [])) | set(target.get("max", []))
    moved |= set(target.get("min", [])) | set(target.get("delta", {})) | set(target.get("free", []))
    moved |= {k for p in target.get("prefer", []) for k in p}
    keep = target.get("keep")
    # options the customer did not mention: kept if possible ("soft"), required only when they say so ("keep")
    soft = [k for k in keys if k not in moved] if keep is None else []
    keep = [k for k in keys if k not in moved] if keep == "all" else list(keep or [])
    if "like_keys" in target:
        ref = _like_item(session, target["like_keys"]["item"], order_items, item)
        for k in target["like_keys"]["keys"]:
            setv[k] = [ref["options"][k]]
    cands = [v for v in variants if v["item_id"] != item["item_id"]]
    cands = [v for v in cands if all(v["options"].get(k) in vals for k, vals in setv.items())]
    cands = [v for v in cands if all(v["options"].get(k) == old.get(k) for k in keep)]
    for k, n in (target.get("delta") or {}).items():
        base = option_number(old[k])
        cands = [v for v in cands if base is not None and option_number(v["options"][k]) == base + n]
    for direction in ("higher", "lower"):
        for k in target.get(direction, []):
            base = option_number(old[k])
            sign = 1 if direction == "higher" else -1
            cands = [v for v in cands if (option_number(v["options"][k]) or 0) * sign > (base or 0) * sign]
    wanted = _describe_target(target, item)
    if not cands:
        raise Refused(f"the store has no {wanted}", same_rule)
    avail = [v for v in cands if v["available"]]
    if not avail:
        raise Refused(f"no {wanted} is available", same_rule)
    cands = avail
    price = target.get("price") or {}
    for bound, op in (("below", float.__lt__), ("at_most", float.__le__), ("above", float.__gt__)):
        if bound in price:
            ref = item["price"] if price[bound] == "current" else float(price[bound])
            cands = [v for v in cands if op(float(v["price"]), float(ref))]
    if not cands:
        raise Refused(f"no {wanted} within the price the customer accepts", same_rule)
    for direction in ("higher", "lower"):  # "bigger", "one size smaller": the nearest step
        for k in target.get(direction, []):
            nums = [option_number(v["options"][k]) or 0.0 for v in cands]
            best = min(nums) if direction == "higher" else max(nums)
            cands = [v for v, n in zip(cands, nums) if n == best]
    for direction in ("max", "min"):
        for k in target.get(direction, []):
            nums = [option_number(v["options"][k]) or 0.0 for v in cands]
            best = max(nums) if direction == "max" else min(nums)
            cands = [v for v, n in zip(cands, nums) if n == best]
    for pref in target.get("prefer", []):
        for k, order in pref.items():
            order = [order] if isinstance(order, str) else order
            for value in order:
                hit = [v for v in cands if v["options"].get(k) == value]
                if hit:
                    cands = hit
                    break
    if soft:
        score = [sum(v["options"].get(k) == old.get(k) for k in soft) for v in cands]
        cands = [v for v, n in zip(cands, score) if n == max(score)]
    pick = target.get("pick")
    if pick == "cheapest":
        low = min(v["price"] for v in cands)
        cands = [v for v in cands if v["price"] == low]
    elif pick == "most_expensive":
        high = max(v["price"] for v in cands)
        cands = [v for v in cands if v["price"] == high]
    if len(cands) > 1:
        session.notes.append(
            f"{len(cands)} variants fit {wanted} for item {item['item_id']}: took {cands[0]['item_id']}"
        )
    return cands[0]["item_id"]


def _describe_target(target: dict, item: dict) -> str:
    bits = [f"{k} {'/'.join([v] if isinstance(v, str) else v)}" for k, v in (target.get("set") or {}).items()]
    bits += [f"{'more' if d == 'higher' else 'less'} {k}" for d in ("higher", "lower") for k in target.get(d, [])]
    return f"{item['name']} ({', '.join(bits)})" if bits else f"other {item['name']}"


def _like_item(session: Session, spec: dict, order_items: list[dict], item: dict) -> dict:
    """Another item of the customer's ("the type that is in my pending order", "the one I already received",
    "the cheapest of the others in that order"); never the item being changed."""
    spec = dict(spec)
    order_spec = spec.pop("order", None)
    pick = spec.pop("pick", None)
    if spec.pop("same_order", False):
        cands = [it for it in order_items if _item_matches(it, spec)]
    else:
        order_spec = {**order_spec, "all": True} if order_spec else None
        found = find_items(session, order_spec, [{**spec, "all": True}], prefer=None)
        cands = [session.known(o)["items"][i] for o, idx in found for i in idx]
    cands = [c for c in cands if c is not item and c["item_id"] != item["item_id"]]
    if pick == "cheapest":
        cands = sorted(cands, key=lambda it: it["price"])
    elif pick == "most_expensive":
        cands = sorted(cands, key=lambda it: -it["price"])
    if not cands:
        raise Refused(f"no other {_describe(spec)} to match", "no_invention")
    return cands[0]


# ------------------------------------------------------------------------------------------------ payment


def _methods(session: Session) -> dict[str, dict]:
    return session.user["payment_methods"]


def payment_choices(session: Session, order: dict, spec: Any) -> list[str]:
    """Payment method ids the customer's words name, in their order of preference ("original", "paypal",
    "gift_card", "credit_card", {"brand": "visa"}, "other_card", "other_order", a method id)."""
    specs = spec if isinstance(spec, list) else [spec]
    methods = _methods(session)
    original = order["payment_history"][0]["payment_method_id"] if order["payment_history"] else None
    out: list[str] = []
    for s in specs:
        if s in (None, "original"):
            cands = [original] if original in methods else []
        elif isinstance(s, dict) and "brand" in s:
            cands = [m for m, d in methods.items() if d.get("brand", "").lower() == s["brand"].lower()]
        elif s == "other_card":
            cands = [m for m, d in methods.items() if d["source"] == "credit_card" and m != original]
        elif s == "other_order":
            others = [session.order(o) for o in user_orders(session) if o != order["order_id"]]
            cands = [o["payment_history"][0]["payment_method_id"] for o in others if o["payment_history"]]
            cands = [c for c in cands if c != original][:1]
        elif s in ("paypal", "gift_card", "credit_card"):
            cands = [m for m, d in methods.items() if d["source"] == s]
        elif s in methods:
            cands = [s]
        else:
            cands = []
        out.extend(c for c in cands if c not in out)
    return out


def _describe_payment(spec: Any) -> str:
    if isinstance(spec, list):
        return " or ".join(_describe_payment(s) for s in spec)
    if isinstance(spec, dict):
        return f"the {spec.get('brand')} card"
    return {None: "the original payment method", "original": "the original payment method"}.get(
        spec, str(spec).replace("_", " ")
    )


# ------------------------------------------------------------------------------------------------ intents


def _cancel(session: Session, step: dict) -> None:
    reason = step.get("reason")
    orders = find_orders(session, step.get("order"), ("pending",), many=bool((step.get("order") or {}).get("all")))
    for oid in orders:
        order = session.order(oid)
        session.rule("cancel_pending")
        if order["status"] != "pending":
            raise Refused(f"order {oid} is {order['status']}, not pending", "cancel_pending")
        if reason not in CANCEL_REASONS:
            raise Refused(f"the reason {reason!r} is not one of {CANCEL_REASONS}", "cancel_reason")
        session.rule("cancel_reason")
        refund = step.get("refund")
        if refund not in (None, "original"):
            if order["payment_history"][0]["payment_method_id"] not in payment_choices(session, order, refund):
                session.rule("cancel_refund")
                raise Refused(
                    f"a cancelled order is refunded to its original payment method, not {_describe_payment(refund)}",
                    "cancel_refund",
                )
        total = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment")
        total -= sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "refund")
        session.write("cancel_pending_order", order_id=oid, reason=reason)
        session.money_back += total


def _cancel_items(session: Session, step: dict) -> None:
    find_items(session, step.get("order"), [_as_spec(s) for s in step.get("items", [])], ("pending",))
    raise Refused(
        "single items cannot be removed from an order: only its address, payment method or item options change",
        "modify_what",
    )


def _return(session: Session, step: dict) -> None:
    specs = step.get("items", "all")
    specs = [{"every": True, "except": step.get("except", [])}] if specs == "all" else [_as_spec(s) for s in specs]
    groups = find_items(session, step.get("order"), specs, ("delivered",))
    for oid, idx in groups:
        order = session.order(oid)
        session.rule("return_delivered")
        if order["status"] != "delivered":
            raise Refused(f"order {oid} is {order['status']}, not delivered", "return_delivered")
        refund = step.get("refund")
        choices = payment_choices(session, order, refund)
        original = order["payment_history"][0]["payment_method_id"]
        methods = _methods(session)
        allowed = [m for m in choices if m == original or methods[m]["source"] == "gift_card"]
        session.rule("return_refund")
        if not allowed:
            raise Refused(
                f"the refund must go to the original payment method or a gift card, not {_describe_payment(refund)}",
                "return_refund",
            )
        items = order["items"]
        session.rule("return_items")
        session.write(
            "return_delivered_order_items",
            order_id=oid,
            item_ids=[items[i]["item_id"] for i in idx],
            payment_method_id=allowed[0],
        )
        session.money_back += sum(items[i]["price"] for i in idx)


def _change_items(session: Session, step: dict) -> None:
    """Exchange (delivered) or modify (pending) items: one call per order with every item of it (Generic action
    rules ¶2); the order's status decides which the policy allows."""
    changes = step.get("items") or []
    intent = step.get("intent")
    prefer = ("delivered",) if intent == "exchange" else ("pending",)
    found: list[tuple[str, int, dict]] = []
    claimed: set[tuple[str, int]] = set()
    for change in changes:
        spec = {k: v for k, v in change.items() if k not in ("to", "optional")}
        try:
            groups = find_items(session, step.get("order"), [spec], prefer, claimed)
        except Refused:
            if change.get("optional"):
                continue
            raise
        for oid, idx in groups:
            for i in idx:
                claimed.add((oid, i))
                found.append((oid, i, change))
    by_order: dict[str, list[tuple[int, dict]]] = {}
    for oid, i, change in found:
        by_order.setdefault(oid, []).append((i, change))
    for oid, pairs in by_order.items():
        order = session.order(oid)
        status = order["status"]
        tool_intent = "exchange" if status == "delivered" else "modify_items"
        if status == "delivered":
            session.rule("exchange_delivered")
        else:
            session.rule("modify_pending")
            if status != "pending":
                if "pending" in status:
                    session.rule("items_once")
                    raise Refused(f"the items of order {oid} were already modified once", "items_once")
                raise Refused(
                    f"order {oid} is {status}: items change only in pending (modify) or delivered (exchange) orders",
                    "act_pending_delivered",
                )
        items = order["items"]
        old_ids, new_ids = [], []
        for i, change in pairs:
            targets = change.get("to") or {}
            targets = targets if isinstance(targets, list) else [targets]
            targets = [_for_product(t, items[i]["name"]) for t in targets]
            new_id, first_error = None, None
            for target in targets:
                try:
                    new_id = resolve_target(session, items[i], target, tool_intent, items)
                    break
                except Refused as exc:
                    first_error = first_error or exc
            if new_id is None:
                if change.get("optional"):
                    continue
                assert first_error is not None
                raise first_error
            old_ids.append(items[i]["item_id"])
            new_ids.append(new_id)
        if not old_ids:
            continue
        session.rule("items_same_product" if tool_intent == "modify_items" else "exchange_same_product")
        diff = 0.0
        for old, new in zip(old_ids, new_ids):
            old_price = next(it["price"] for it in items if it["item_id"] == old)
            diff += session.product(_product_of(items, old))["variants"][new]["price"] - old_price
        if "total_at_most" in step:
            total = sum(it["price"] for it in items) + diff
            if total > float(step["total_at_most"]) + 1e-9:
                raise Refused(
                    f"the cheapest options bring order {oid} to {money(total)}, above {step['total_at_most']}", "deny"
                )
        pay_rule = "exchange_payment" if tool_intent == "exchange" else "items_payment"
        session.rule(pay_rule)
        method = _pay_difference(session, order, step.get("payment"), diff, pay_rule)
        name = "exchange_delivered_order_items" if tool_intent == "exchange" else "modify_pending_order_items"
        session.rule("once_per_order")
        session.write(name, order_id=oid, item_ids=old_ids, new_item_ids=new_ids, payment_method_id=method)
        session.money_back -= diff


def _for_product(target: dict, name: str) -> dict:
    """A target with per-product exceptions ("upgrade everything, but the shoes keep their size")."""
    for term, special in (target.get("by_product") or {}).items():
        if product_matches(term, name):
            return special
    return target


def _product_of(items: list[dict], item_id: str) -> str:
    return next(it["product_id"] for it in items if it["item_id"] == item_id)


def _pay_difference(session: Session, order: dict, spec: Any, diff: float, rule: str) -> str:
    """The customer's method for the price difference; a gift card must cover a positive difference."""
    choices = payment_choices(session, order, spec)
    methods = _methods(session)
    for m in choices:
        d = methods[m]
        if d["source"] == "gift_card" and d["balance"] < round(diff, 2):
            continue
        return m
    if not choices:
        raise Refused(f"the customer has no {_describe_payment(spec)}", rule)
    raise Refused(f"the gift card balance does not cover the price difference of {money(diff)}", rule)


def address_of(session: Session, spec: dict) -> dict:
    """The address the customer means: spelled out, or "the address of my other order", "my default address",
    "the address my account had at the start", each with parts changed (``set``)."""
    if "from_order" in spec:
        oid = find_orders(session, spec["from_order"], None)[0]
        base = dict(session.known(oid)["address"])
    elif spec.get("from_user") == "original":
        base = dict(session.start["users"][session.user_id]["address"])
    elif spec.get("from_user"):
        base = dict(session.user["address"])
    elif "of_order" in spec:
        oid = find_orders(session, spec["of_order"], None)[0]
        base = dict(session.known(oid)["address"])
    else:
        base = {}
    base.update({k: v for k, v in spec.items() if k in ADDRESS_KEYS})
    base.update(spec.get("set") or {})
    missing = [k for k in ADDRESS_KEYS if k not in base]
    if missing:
        raise Refused(f"the new address lacks {missing}", "no_invention")
    return {k: base[k] for k in ADDRESS_KEYS}


def _modify_order_address(session: Session, step: dict) -> None:
    address = address_of(session, step["address"])
    orders = find_orders(session, step.get("order"), ("pending",), many=bool((step.get("order") or {}).get("all")))
    for oid in orders:
        status = session.order(oid)["status"]
        session.rule("modify_pending")
        if status != "pending":
            if "pending" in status:
                session.rule("items_once")
                raise Refused(f"order {oid} had its items modified: it cannot be modified any more", "items_once")
            raise Refused(f"order {oid} is {status}, not pending", "modify_pending")
        session.rule("modify_what")
        session.write("modify_pending_order_address", order_id=oid, **address)


def _modify_payment(session: Session, step: dict) -> None:
    oid = find_orders(session, step.get("order"), ("pending",))[0]
    order = session.order(oid)
    session.rule("modify_pending")
    if order["status"] != "pending":
        rule = "items_once" if "pending" in order["status"] else "modify_pending"
        raise Refused(f"order {oid} is {order['status']}, not pending", rule)
    session.rule("payment_single")
    if len(order["payment_history"]) != 1:
        raise Refused(f"order {oid} has more than one payment", "payment_single")
    original = order["payment_history"][0]["payment_method_id"]
    amount = order["payment_history"][0]["amount"]
    methods = _methods(session)
    choices = [m for m in payment_choices(session, order, step.get("payment")) if m != original]
    if not choices:
        raise Refused(
            f"{_describe_payment(step.get('payment'))} is the order's current payment method", "payment_single"
        )
    for m in choices:
        if methods[m]["source"] == "gift_card" and methods[m]["balance"] < amount:
            session.rule("payment_gift_card")
            continue
        session.write("modify_pending_order_payment", order_id=oid, payment_method_id=m)
        return
    raise Refused(f"the gift card balance does not cover the order total {money(amount)}", "payment_gift_card")


def _modify_user_address(session: Session, step: dict) -> None:
    session.rule("scope")
    other = step.get("for_user")  # "my partner's profile": another customer's account
    if other and other != session.user_id:
        raise Refused("the default address of another customer's account", "one_user")
    address = address_of(session, step["address"])
    session.write("modify_user_address", user_id=session.user_id, **address)


def _transfer(session: Session, step: dict) -> None:
    session.rule("transfer")
    session.notes.append(f"transfer to a human agent: {step.get('why', 'the customer asks for one')}")


def _out_of_scope(session: Session, step: dict) -> None:  # noqa: ARG001 - a step handler's signature
    raise Refused(f"no tool or rule covers this: {step.get('what', 'the request')}", "deny")


def _info(session: Session, step: dict) -> None:
    """Facts about the customer's own orders, profile and the products (Retail agent policy ¶4)."""
    session.rule("information")
    asks = step.get("ask")
    if asks is None:
        raise ValueError(f"an info step names what it asks ('ask'); got {step!r}")
    for ask in asks if isinstance(asks, list) else [asks]:
        session.communicate.extend(answer(session, ask))


def answer(session: Session, ask: dict) -> list[str]:
    """The strings an agent must say to answer ``ask`` (what COMMUNICATE checks)."""
    kind = ask["what"]
    if kind == "available_count":
        pid = _product_id(session, ask["product"])
        return [str(sum(v["available"] for v in session.product(pid)["variants"].values()))]
    if kind == "cheapest_available":
        pid = _product_id(session, ask["product"])
        return [money(min(v["price"] for v in session.product(pid)["variants"].values() if v["available"]))]
    if kind == "money_back":
        return [money(session.money_back)]
    if kind == "gift_card_balance":
        cards = [d for d in _methods(session).values() if d["source"] == "gift_card"]
        return [_plain_number(c["balance"]) for c in cards[:1]]
    if kind in ("tracking", "status", "total", "address", "payment_brand", "item_price", "item_option"):
        oid = find_orders(session, ask.get("order"), None)[0]
        order = session.order(oid)
        if kind == "tracking":
            return [t for f in order["fulfillments"] for t in f["tracking_id"]]
        if kind == "status":
            return [order["status"]]
        if kind == "total":
            return [money(sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment"))]
        if kind == "address":
            a = order["address"]
            return [a["address1"], a["city"], a["zip"]]
        if kind == "payment_brand":
            m = _methods(session).get(order["payment_history"][0]["payment_method_id"], {})
            return [m.get("brand") or m.get("source", "")]
        items = [it for it in order["items"] if _item_matches(it, _as_spec(ask["item"]))]
        if kind == "item_price":
            return [money(it["price"]) for it in items[:1]]
        return [it["options"][ask["key"]] for it in items]
    raise ValueError(f"unknown information request {kind!r}")


def _plain_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else money(x)


def _product_id(session: Session, term: str) -> str:
    for pid, p in session.state.products.items():
        if product_matches(term, p["name"]):
            session.read("get_product_details", product_id=pid)
            return pid
    raise Refused(f"the store has no product called {term!r}", "no_invention")


_HANDLERS = {
    "cancel": _cancel,
    "cancel_items": _cancel_items,
    "return": _return,
    "exchange": _change_items,
    "modify_items": _change_items,
    "modify_order_address": _modify_order_address,
    "modify_payment": _modify_payment,
    "modify_user_address": _modify_user_address,
    "transfer": _transfer,
    "out_of_scope": _out_of_scope,
    "info": _info,
}
