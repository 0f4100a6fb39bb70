"""Airline rule engine: a customer's request, in the customer's own terms, resolved through the DB and the airline
policy into the writes a careful agent makes, what it must tell the customer, and the policy rules it applied.

One home for the airline policy: the task generator drafts requests and asks :func:`resolve` for their outcome, and
the benchmark reproduction resolves the annotated benchmark requests (``benchmark_requests.json``) the same way.
Every write is executed on a private copy-on-write state through the domain's own tools, so prices, refunds,
balances and seat counts are the tools' (a write that would fail there is a bug here, not a guess).

A request is ``{"user_id": ..., "payment": <preference>, "steps": [<step>, ...]}``; the steps are what the customer
asks, in order. Every step has an ``intent`` and may carry the customer's fallbacks: ``if_refused`` (steps tried when
the policy refuses it, e.g. "if basic economy cannot be changed, cancel"), ``if_over_budget`` (with ``max_cost``:
steps tried when the customer's budget is exceeded), ``if_certificate_limit`` (booking: when only one certificate may
be used). Intents:

* ``cancel`` {reservation, reason}: ``reason`` is change_of_plan | airline_cancelled | health | weather | other.
* ``change_flights`` {reservation, outbound, return, cabin?}: a leg spec is ``{date: "+1" | "same" | YYYY-MM-DD,
  origin?, destination? (airport lists the customer accepts), nonstop?, depart_after?, depart_before?,
  arrive_before? (HH:MM), choose: cheapest | second_cheapest | fastest | same_flights | earliest | latest,
  flights?: [numbers]}``; a leg that is not given is kept.
* ``change_cabin`` {reservation, cabin, scope: all | outbound | return | {passengers: [names]}}.
* ``add_bags`` {reservation, add | total}; ``remove_bags``; ``add_insurance``; ``remove_insurance``.
* ``change_passenger`` {reservation, from?: "First Last", to: "self" | {first_name, last_name, dob?}};
  ``remove_passenger`` / ``add_passenger`` {reservation, name}.
* ``book`` {origin, destination (airport lists), flight_type, dates: {outbound, return?}, like?: <selector>,
  cabin (a cabin or "cheapest"), passengers: ["self" | {first_name, last_name, dob} | {saved: "First Last"} |
  {from_reservation: true}], flights: {outbound/return leg specs | same_as_reference: true}, bags: n |
  "free_allowance", insurance, payment: <booking payment>}.
* ``compensation`` {complaint: cancelled | delayed, flight?, reservation?, claims?}: asked explicitly.
* ``info`` {question: bag_allowance | gift_card_balance_total | certificate_balance_total | upcoming_total_cost |
  refunds_total | charges_total, reservation?, payment?}: the answer goes to ``communicate``.
* ``double_bookings`` {facts: [{date, arrive: [...], from: [...]} | {date, depart: [...]}]}.
* ``transfer`` {summary}; ``package`` {steps, max_cost?}: all or nothing (a refusal or an exceeded budget undoes
  the package's writes).

A reservation selector is ``{"id": ...}``, ``{"this": true}`` (the reservation the refused step was about), or
filters over the user's reservations: ``origin``/``destination`` (lists), ``date``, ``not_route``, ``has_flight``,
``upcoming``, ``passengers`` (count), ``cabin``, ``with_self`` (the user flies), ``has_delayed_flight``,
``has_cancelled_flight``, ``longest_flight_over_hours``, ``legs_at_most_hours``, ``most_recent`` (the latest
booked of the matches).

Where the customer states no preference the engine follows fixed conventions (marked "engine convention", not
policy): a change is paid with the payment method already chosen in the call, else the reservation's original
method when it can pay, else the first credit card; the cheapest flights satisfying the customer's constraints;
a cabin change before bags on the same reservation (the allowance depends on the cabin); no insurance unless asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Optional

from tau2_gym.core.db import BaseData, DBState
from tau2_gym.domains.airline.tools import NOW, AirlineTools

TABLES = ("flights", "users", "reservations")
CABINS = ("basic_economy", "economy", "business")
BAG_FEE = 50
INSURANCE_FEE = 30
MAX_PASSENGERS = 5
MAX_GIFT_CARDS = 3
#: bookings created at or after this are within 24 hours of the benchmark's clock
DAY_BEFORE_NOW = (datetime.fromisoformat(NOW) - timedelta(days=1)).isoformat()
#: free checked bags per passenger: membership -> cabin -> bags
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
COVERED_REASONS = ("health", "weather")
FLOWN = ("landed", "flying")
NOT_DEPARTED = ("available", "on time", "delayed")


@dataclass(frozen=True)
class Rule:
    """One policy paragraph the engine implements: ``quote`` is text of paragraph ``paragraph`` (1-based, blank-line
    separated) under the heading ``heading`` of policy.md (a test checks it); ``says`` is what the engine does."""

    heading: str
    paragraph: int
    quote: str
    says: str

    def cite(self) -> str:
        return f"airline policy: {self.heading} ¶{self.paragraph} ({self.says})"


R = Rule
RULES: dict[str, Rule] = {
    "deny": R("Airline Agent Policy", 6, "You should deny user requests that are against this policy.",
              "refuse what the policy forbids"),
    "transfer": R("Airline Agent Policy", 7, "if and only if the request cannot be handled within the scope of your "
                  "actions", "transfer only what no tool can handle"),
    "tools_only": R("Airline Agent Policy", 4, "You should not provide any information, knowledge, or procedures not "
                    "provided by the user or available tools", "answer from the tools' data"),
    "status": R("Flight", 2, "If the status is **available**, the flight has not taken off",
                "only available flight dates are bookable; landed/flying segments have been flown"),
    "seats": R("Flight", 4, "Seat availability and prices are listed for each cabin class.",
               "a cabin needs a free seat per passenger"),
    "book_user": R("Book flight", 1, "The agent must first obtain the user id from the user.", "book for the user"),
    "book_trip": R("Book flight", 2, "ask for the trip type, origin, destination", "the trip the customer asks for"),
    "book_cabin": R("Book flight", 3, "Cabin class must be the same across all the flights in a reservation.",
                    "one cabin for every segment"),
    "book_passengers": R("Book flight", 4, "Each reservation can have at most five passengers.",
                         "at most five passengers, names and dates of birth"),
    "same_flights": R("Book flight", 4, "All passengers must fly the same flights in the same cabin.",
                      "no cabin for only some passengers"),
    "payment_limits": R("Book flight", 5, "at most one travel certificate, at most one credit card, and at most "
                        "three gift cards", "payment mix limits"),
    "payment_profile": R("Book flight", 5, "All payment methods must already be in user profile for safety reasons.",
                         "pay only with saved methods"),
    "certificate_rest": R("Book flight", 5, "The remaining amount of a travel certificate is not refundable.",
                          "a certificate pays at most the amount due"),
    "free_bags": R("Book flight", 6, "Checked bag allowance", "free bags by membership and cabin, $50 each extra"),
    "needed_bags": R("Book flight", 7, "Do not add checked bags that the user does not need.",
                     "only the bags the customer asks for"),
    "insurance": R("Book flight", 8, "The travel insurance is 30 dollars per passenger",
                   "insurance $30 per passenger, only when the customer wants it"),
    "insurance_cover": R("Book flight", 8, "full refund if the user needs to cancel the flight given health or "
                         "weather reasons", "insurance covers health and weather"),
    "find_reservation": R("Modify flight", 1, "If the user doesn't know their reservation id, the agent should help "
                          "locate it using available tools.", "find the reservation from the customer's description"),
    "basic_no_change": R("Modify flight", 2, "Basic economy flights cannot be modified.",
                         "no flight change on basic economy"),
    "same_route": R("Modify flight", 2, "without changing the origin, destination, and trip type",
                    "a change keeps origin, destination and trip type"),
    "kept_price": R("Modify flight", 2, "Some flight segments can be kept, but their prices will not be updated",
                    "kept segments keep their price"),
    "cabin_flown": R("Modify flight", 3, "Cabin cannot be changed if any flight in the reservation has already been "
                     "flown.", "no cabin change once a segment is flown"),
    "cabin_basic": R("Modify flight", 3, "all reservations, including basic economy, can change cabin without "
                     "changing the flights", "cabin changes allowed, basic economy included"),
    "cabin_whole": R("Modify flight", 3, "changing cabin for just one flight segment is not possible",
                     "one cabin for the whole reservation"),
    "cabin_price": R("Modify flight", 3, "the user is required to pay for the difference",
                     "pay the fare difference, or get it refunded"),
    "bags_add_only": R("Modify flight", 4, "The user can add but not remove checked bags.", "bags: add only"),
    "insurance_later": R("Modify flight", 4, "The user cannot add insurance after initial booking.",
                         "no insurance after booking"),
    "passenger_count": R("Modify flight", 5, "cannot modify the number of passengers",
                         "passengers may change, their number may not (not even by a human agent)"),
    "passenger_edit": R("Modify flight", 5, "The user can modify passengers", "passenger details may change"),
    "change_payment": R("Modify flight", 6, "a single gift card or credit card for payment or refund method",
                        "one saved gift card or credit card pays or receives the difference"),
    "cancel_reason": R("Cancel flight", 2, "The agent must also obtain the reason for cancellation",
                       "the customer's reason decides insurance cover"),
    "cancel_flown": R("Cancel flight", 3, "If any portion of the flight has already been flown, the agent cannot help "
                      "and transfer is needed.", "no cancellation once a segment is flown"),
    "cancel_24h": R("Cancel flight", 4, "The booking was made within the last 24 hrs", "cancel: booked within 24 h"),
    "cancel_airline": R("Cancel flight", 4, "The flight is cancelled by airline", "cancel: airline cancelled a flight"),
    "cancel_business": R("Cancel flight", 4, "It is a business flight", "cancel: business cabin"),
    "cancel_insured": R("Cancel flight", 4, "The user has travel insurance and the reason for cancellation is covered "
                        "by insurance", "cancel: insured and a covered reason"),
    "cancel_otherwise": R("Cancel flight", 4, "flight can be cancelled if any of the following is true",
                          "no other cancellation"),
    "refund": R("Cancel flight", 6, "The refund will go to original payment methods", "refund to original payment"),
    "comp_ask": R("Refunds and Compensation", 1, "Do not proactively offer a compensation unless the user explicitly "
                  "asks for one.", "compensate only when asked"),
    "comp_regular": R("Refunds and Compensation", 2, "Do not compensate if the user is regular member and has no "
                      "travel insurance and flies (basic) economy.", "no compensation: regular, uninsured, economy"),
    "comp_facts": R("Refunds and Compensation", 3, "Always confirms the facts before offering compensation.",
                    "confirm the flight's status first"),
    "comp_eligible": R("Refunds and Compensation", 4, "Only compensate if the user is a silver/gold member or has "
                       "travel insurance or flies business.", "eligible: silver/gold, insured or business"),
    "comp_cancelled": R("Refunds and Compensation", 5, "with the amount being $100 times the number of passengers",
                        "cancelled flight: $100 certificate per passenger"),
    "comp_delayed": R("Refunds and Compensation", 6, "wants to change or cancel the reservation",
                      "delayed flight: $50 per passenger, only with a change or cancellation"),
    "comp_other": R("Refunds and Compensation", 7, "Do not offer compensation for any other reason than the ones "
                    "listed above.", "no other compensation"),
}  # fmt: skip
#: conventions of the engine where the customer says nothing (not policy)
CONVENTIONS = {
    "payment_default": "engine convention: a change is paid with the method already chosen in this call, else the "
    "reservation's original method when it can pay, else the first credit card",
    "cheapest": "engine convention: among the flights meeting the customer's constraints, the cheapest",
    "cabin_first": "engine convention: on one reservation, flights/cabin change before passengers and bags",
    "book_payment_default": "engine convention: a booking without a stated method is paid with the replaced "
    "reservation's method, else the first credit card",
}


class RequestError(ValueError):
    """A request the engine cannot read (unknown intent, selector matching nothing where one is needed, ...)."""


class _Refused(Exception):
    """A step the policy forbids: ``rule`` names the RULES entry, ``forbidden`` the write the customer asked for."""

    def __init__(self, rule: str, reason: str, forbidden: Optional[list[dict]] = None, transfer: bool = False):
        super().__init__(reason)
        self.rule, self.reason, self.forbidden, self.transfer = rule, reason, forbidden or [], transfer


class _Declined(Exception):
    """The customer says no (over budget, no acceptable payment or flight)."""

    def __init__(self, reason: str, event: str = "over_budget"):
        super().__init__(reason)
        self.reason, self.event = reason, event


# ----------------------------------------------------------------------------------------------- time and flights


def _minutes(clock: str) -> int:
    """Minutes after midnight of a scheduled time ("HH:MM:SS", "+1" for the next day)."""
    day = 1440 if clock.endswith("+1") else 0
    hh, mm = clock[:5].split(":")
    return day + int(hh) * 60 + int(mm)


def _day_number(date: str) -> int:
    y, m, d = (int(x) for x in date.split("-"))
    return (y * 12 + m) * 31 + d  # dates of one month apart compare correctly (all data is May 2024)


def _hhmm(text: str) -> int:
    hh, mm = text.split(":")[:2]
    return int(hh) * 60 + int(mm)


@dataclass
class _Seg:
    flight_number: str
    date: str
    dep: str  # scheduled departure clock
    arr: str  # scheduled arrival clock (may end in +1)
    prices: dict
    seats: dict

    def start(self) -> int:
        return _day_number(self.date) * 1440 + _minutes(self.dep)

    def end(self) -> int:
        return _day_number(self.date) * 1440 + _minutes(self.arr)


def _duration(segs: list[_Seg]) -> int:
    return segs[-1].end() - segs[0].start()


def _shift(date: str, days: int) -> str:
    y, m, d = (int(x) for x in date.split("-"))
    return f"{y:04d}-{m:02d}-{d + days:02d}"


# ----------------------------------------------------------------------------------------------- the engine


class _Run:
    """One resolution: a private DB state, the tools over it, and what the agent does and says."""

    def __init__(self, db: dict, request: dict) -> None:
        self.base = db if isinstance(db, BaseData) else BaseData(db, TABLES)
        self.state: DBState = self.base.new_state()
        self.tools = AirlineTools(self.state)
        self.user_id = request.get("user_id")
        self.pref = request.get("payment")
        self.writes: list[dict] = []
        self.charges: list[list[tuple[str, int]]] = []  # per write: (payment id, signed amount) it recorded
        self.reads: list[dict] = []
        self.actions: list[tuple[str, dict]] = []  # ("read" | "write" | "transfer", action), in order
        self.package: Optional[tuple[int, int]] = None  # (budget, index of the package's first write)
        self.communicate: list[str] = []
        self.rules: list[str] = []
        self.forbidden: list[dict] = []
        self.outcomes: list[dict] = []
        self.chosen_payment: Optional[str] = None
        self.transferred = False

    # ------------------------------------------------------------------ bookkeeping

    def rule(self, key: str) -> None:
        text = RULES[key].cite() if key in RULES else CONVENTIONS[key]
        if text not in self.rules:
            self.rules.append(text)

    def read(self, name: str, **arguments: Any) -> Any:
        action = {"name": name, "arguments": arguments}
        if action not in self.reads:
            self.reads.append(action)
            self.actions.append(("read", action))
        result = getattr(self.tools, name)(**arguments)
        return getattr(result, "data", result)

    def write(self, name: str, **arguments: Any) -> None:
        """Run a write through the domain's tool (a failure raises: the engine mispredicted) and record what it
        charged or refunded, read back from the reservation's payment history."""
        rid = arguments.get("reservation_id")
        before = len(self.state.reservations[rid]["payment_history"]) if rid in self.state.reservations else 0
        owned = len(self.state.users[self.user_id]["reservations"]) if self.user_id in self.state.users else 0
        getattr(self.tools, name)(**arguments)
        if name == "book_reservation":
            new = self.state.users[self.user_id]["reservations"][owned]
            paid = self.state.reservations[new]["payment_history"]
        elif rid is not None:
            paid = self.state.reservations[rid]["payment_history"][before:]
        else:
            paid = []
        action = {"name": name, "arguments": arguments}
        self.writes.append(action)
        self.charges.append([(p["payment_id"], p["amount"]) for p in paid])
        self.actions.append(("write", action))

    def spent(self, since: int = 0) -> int:
        """Net amount the customer paid through the writes from index ``since`` (refunds negative)."""
        return sum(amount for paid in self.charges[since:] for _, amount in paid)

    def snapshot(self) -> tuple:
        return (self.state.copy(), len(self.writes), len(self.actions), len(self.communicate), self.chosen_payment,
                self.transferred)  # fmt: skip

    def restore(self, snap: tuple) -> None:
        """Undo the writes (and transfers, answers) since ``snap``; the reads stay: the agent did look."""
        state, n_writes, n_actions, n_comm, chosen, transferred = snap
        self.state = state
        self.tools = AirlineTools(state)
        del self.writes[n_writes:]
        del self.charges[n_writes:]
        self.actions = self.actions[:n_actions] + [a for a in self.actions[n_actions:] if a[0] == "read"]
        del self.communicate[n_comm:]
        self.chosen_payment = chosen
        self.transferred = transferred

    # ------------------------------------------------------------------ DB views

    @property
    def user(self) -> dict:
        if self.user_id not in self.state.users:
            raise RequestError(f"unknown user {self.user_id!r}")
        return self.state.users[self.user_id]

    def reservation(self, rid: str) -> dict:
        self.read("get_reservation_details", reservation_id=rid)
        return self.state.reservations[rid]

    def day(self, flight_number: str, date: str) -> Optional[dict]:
        flight = self.state.flights.get(flight_number)
        return None if flight is None else flight["dates"].get(date)

    def status(self, seg: dict) -> str:
        day = self.day(seg["flight_number"], seg["date"])
        return "unknown" if day is None else day["status"]

    def flown(self, res: dict) -> bool:
        return any(self.status(s) in FLOWN for s in res["flights"])

    def upcoming(self, res: dict) -> bool:
        statuses = [self.status(s) for s in res["flights"]]
        return (
            res.get("status") != "cancelled"
            and not any(s in FLOWN for s in statuses)
            and any(s in NOT_DEPARTED for s in statuses)
        )

    def legs(self, res: dict) -> list[list[int]]:
        """Segment indices per leg: the outbound up to the first arrival at the destination, then the return."""
        segs = res["flights"]
        if res["flight_type"] != "round_trip":
            return [list(range(len(segs)))]
        for i, seg in enumerate(segs):
            if seg["destination"] == res["destination"]:
                return [list(range(i + 1)), list(range(i + 1, len(segs)))]
        return [list(range(len(segs)))]

    def seg_view(self, seg: dict) -> _Seg:
        flight = self.state.flights[seg["flight_number"]]
        day = self.day(seg["flight_number"], seg["date"]) or {}
        return _Seg(
            seg["flight_number"],
            seg["date"],
            flight["scheduled_departure_time_est"],
            flight["scheduled_arrival_time_est"],
            day.get("prices", {}),
            day.get("available_seats", {}),
        )

    def allowance(self, res: dict, cabin: Optional[str] = None) -> int:
        owner = self.state.users[res["user_id"]]
        return FREE_BAGS[owner["membership"]][cabin or res["cabin"]] * len(res["passengers"])

    # ------------------------------------------------------------------ selectors

    def select(self, sel: Optional[dict], context: Optional[str], *, many: bool = False) -> list[str]:
        if sel is None or sel.get("this"):
            if context is None:
                raise RequestError("a step refers to 'this' reservation outside a fallback")
            return [context]
        if "id" in sel:
            return [sel["id"]]
        if "ids" in sel:
            return list(sel["ids"])
        self.read("get_user_details", user_id=self.user_id)
        self.rule("find_reservation")
        found = []
        for rid in self.user["reservations"]:
            res = self.reservation(rid) if rid in self.state.reservations else None
            if res is not None and self._matches(res, sel):
                found.append(rid)
        if sel.get("most_recent") and found:
            found = [max(found, key=lambda r: self.state.reservations[r]["created_at"])]
        if not found and not sel.get("may_be_empty"):
            raise RequestError(f"selector {sel} matches none of {self.user_id}'s reservations")
        if not many and len(found) > 1:
            raise RequestError(f"selector {sel} matches several reservations: {found}")
        return found

    def _matches(self, res: dict, sel: dict) -> bool:
        if res.get("status") == "cancelled":
            return False
        if "origin" in sel and res["origin"] not in sel["origin"]:
            return False
        if "destination" in sel and res["destination"] not in sel["destination"]:
            return False
        if "date" in sel:
            segs = [s for s in res["flights"] if s["date"] == sel["date"]]
            if not segs or ("from" in sel and segs[0]["origin"] not in sel["from"]):
                return False
        if "not_route" in sel and [res["origin"], res["destination"]] == list(sel["not_route"]):
            return False
        if "has_flight" in sel and not any(s["flight_number"] == sel["has_flight"] for s in res["flights"]):
            return False
        if sel.get("upcoming") and not self.upcoming(res):
            return False
        if "passengers" in sel and len(res["passengers"]) != sel["passengers"]:
            return False
        if "cabin" in sel and res["cabin"] != sel["cabin"]:
            return False
        if sel.get("with_self") and not self._self_flies(res):
            return False
        if sel.get("has_delayed_flight") and not any(self.status(s) == "delayed" for s in res["flights"]):
            return False
        if sel.get("has_cancelled_flight") and not any(self.status(s) == "cancelled" for s in res["flights"]):
            return False
        if "longest_flight_over_hours" in sel:
            if max(_duration([self.seg_view(s)]) for s in res["flights"]) <= 60 * sel["longest_flight_over_hours"]:
                return False
        if "legs_at_most_hours" in sel:
            for leg in self.legs(res):
                if _duration([self.seg_view(res["flights"][i]) for i in leg]) > 60 * sel["legs_at_most_hours"]:
                    return False
        return True

    def _self_flies(self, res: dict) -> bool:
        name = self.user["name"]
        return any(p["first_name"] == name["first_name"] and p["last_name"] == name["last_name"]
                   for p in res["passengers"])  # fmt: skip

    # ------------------------------------------------------------------ payment

    def _can_pay_change(self, pid: Optional[str], amount: int) -> bool:
        methods = self.state.users[self.user_id]["payment_methods"]
        if pid is None or pid not in methods:
            return False
        m = methods[pid]
        return m["source"] == "credit_card" or (m["source"] == "gift_card" and m["amount"] >= amount)

    def change_payment(self, res: dict, amount: int, pref: Optional[dict]) -> str:
        """The one gift card or credit card that pays (or receives) ``amount`` for a change of ``res``: the
        reservation's original method when the customer asks for it, else the method chosen earlier in the call,
        else the customer's stated kind, else (no preference) the original method or the first credit card."""
        self.rule("change_payment")
        self.read("get_user_details", user_id=self.user_id)
        pref = pref if pref is not None else self.pref
        methods = self.state.users[self.user_id]["payment_methods"]
        original = res["payment_history"][0]["payment_id"] if res["payment_history"] else None
        if pref and pref.get("kind") == "original":
            candidates = [original]
        elif self.chosen_payment is not None and self._can_pay_change(self.chosen_payment, amount):
            return self.chosen_payment
        elif pref:
            candidates = self._preferred(pref, original)
        else:
            self.rule("payment_default")
            candidates = [original] + [pid for pid, m in methods.items() if m["source"] == "credit_card"]
            candidates += [pid for pid, m in methods.items() if m["source"] == "gift_card"]
        for pid in candidates:
            if pid is not None and self._can_pay_change(pid, amount):
                self.chosen_payment = pid
                return pid
        if self.over_package_budget(amount):
            raise _Declined("over the package's budget")
        raise _Declined(f"no acceptable gift card or credit card can pay {amount}", "no_payment")

    def _preferred(self, pref: dict, original: Optional[str]) -> list[str]:
        """Saved methods matching a customer's stated preference, best first."""
        methods = self.state.users[self.user_id]["payment_methods"]
        kind = pref.get("kind")
        if kind == "original":
            return [original] if original else []
        if "id" in pref:
            return [pref["id"]]
        out = [pid for pid, m in methods.items() if m["source"] == kind and _card_matches(m, pref)]
        if pref.get("pick") == "smallest_balance":
            out.sort(key=lambda pid: methods[pid]["amount"])
        elif pref.get("pick") == "largest_balance":
            out.sort(key=lambda pid: -methods[pid]["amount"])
        elif original in out:
            out.remove(original)
            out.insert(0, original)
        return out

    # ------------------------------------------------------------------ flight search

    def options(self, origin: str, destination: str, date: str, spec: dict, cabin: str, pax: int) -> list[list[_Seg]]:
        """Itineraries the tools list for the route and date, within the customer's constraints and with a seat
        per passenger in ``cabin`` (cabin "cheapest": any cabin; the caller prices them)."""
        found: list[list[_Seg]] = []
        for f in self.read("search_direct_flight", origin=origin, destination=destination, date=date):
            found.append([_Seg(f["flight_number"], date, f["scheduled_departure_time_est"],
                               f["scheduled_arrival_time_est"], f["prices"], f["available_seats"])])  # fmt: skip
        if not spec.get("nonstop"):
            for pair in self.read("search_onestop_flight", origin=origin, destination=destination, date=date):
                found.append([_Seg(f["flight_number"], f["date"], f["scheduled_departure_time_est"],
                                   f["scheduled_arrival_time_est"], f["prices"], f["available_seats"])
                              for f in pair])  # fmt: skip
        self.rule("status")
        out = []
        for segs in found:
            if cabin != "cheapest" and any(s.seats.get(cabin, 0) < pax for s in segs):
                continue
            first, last = segs[0], segs[-1]
            if "depart_after" in spec and _minutes(first.dep) < _hhmm(spec["depart_after"]):
                continue
            if "depart_before" in spec and _minutes(first.dep) > _hhmm(spec["depart_before"]):
                continue
            if "arrive_before" in spec and (
                last.date != first.date or _minutes(last.arr) >= _hhmm(spec["arrive_before"])
            ):
                continue
            if "after" in spec and first.start() < spec["after"]:
                continue
            if "flights" in spec and [s.flight_number for s in segs] != list(spec["flights"]):
                continue
            out.append(segs)
        return out

    def choose(self, options: list[list[_Seg]], spec: dict, cabin: str, old: Optional[list[_Seg]] = None) -> list[_Seg]:
        how = spec.get("choose", "cheapest")
        if how == "same_flights" and old is not None:
            wanted = [s.flight_number for s in old]
            options = [o for o in options if [s.flight_number for s in o] == wanted]
            how = "cheapest"
        if not options:
            raise _Declined("no flight meets the customer's constraints", "no_flight")

        def price(o: list[_Seg]) -> int:
            return sum(s.prices[cabin] for s in o)

        def order(o: list[_Seg]) -> tuple:
            return (o[0].start(), len(o), [s.flight_number for s in o])

        if how in ("cheapest", "second_cheapest"):
            self.rule("cheapest")
            ranked = sorted(options, key=lambda o: (price(o), *order(o)))
            if how == "second_cheapest":
                prices = sorted({price(o) for o in ranked})
                if len(prices) < 2:
                    raise _Declined("there is no second cheapest flight", "no_flight")
                return next(o for o in ranked if price(o) == prices[1])
            return ranked[0]
        if how == "fastest":
            return min(options, key=lambda o: (_duration(o), price(o), *order(o)))
        if how == "earliest":
            return min(options, key=order)
        if how == "latest":
            return max(options, key=lambda o: (o[0].start(), -price(o)))
        raise RequestError(f"unknown flight choice {how!r}")

    # ------------------------------------------------------------------ steps

    def run_steps(self, steps: list[dict], context: Optional[str] = None, *, top: bool = False,
                  strict: bool = False) -> bool:  # fmt: skip
        """Resolve ``steps`` in order (changes to one reservation asked together: cabin/flights first); whether
        all were done as asked. ``strict`` (inside a package): a step that fails even with its fallbacks raises."""
        ok = True
        for step in self._ordered(steps):
            intent = step.get("intent")
            if f"do_{intent}" not in dir(self):
                raise RequestError(f"unknown intent {intent!r}")
            targets: list[Optional[str]] = [context]
            if intent in _PER_RESERVATION:
                targets = list(self.select(step.get("reservation"), context, many=True))
            for rid in targets:
                ok = self.attempt(step, rid, top=top, strict=strict) and ok
        return ok

    def _ordered(self, steps: list[dict]) -> list[dict]:
        """Steps in the customer's order, except that consecutive changes of the same reservation run cabin and
        flights first, then passengers, then bags (the bag allowance depends on the cabin)."""
        out: list[dict] = []
        i = 0
        while i < len(steps):
            j = i
            while (j < len(steps) and steps[j].get("intent") in _CHANGE_ORDER
                   and steps[j].get("reservation") == steps[i].get("reservation")):  # fmt: skip
                j += 1
            run = steps[i:j] if j > i else steps[i : i + 1]
            ordered = sorted(run, key=lambda st: _CHANGE_ORDER.get(st.get("intent"), 0))
            if ordered != run:
                self.rule("cabin_first")
            out.extend(ordered)
            i = max(j, i + 1)
        return out

    def attempt(self, step: dict, rid: Optional[str], *, top: bool = False, strict: bool = False) -> bool:
        """One step on one reservation, with the customer's fallbacks when the policy refuses it or the customer
        declines; whether it was done as asked."""
        intent = step["intent"]
        snap = self.snapshot()
        try:
            getattr(self, f"do_{intent}")(step, rid)
            self.outcomes.append({"intent": intent, "reservation": rid, "outcome": "done"})
            return True
        except _Refused as exc:
            self.restore(snap)
            self.rule(exc.rule)
            self.rule("deny")
            self.outcomes.append({"intent": intent, "reservation": rid, "outcome": "refused", "reason": exc.reason})
            if top:
                self.forbidden.extend(exc.forbidden)
            follow = step.get("if_refused")
            if follow is None and strict:
                raise
        except _Declined as exc:
            self.restore(snap)
            self.outcomes.append({"intent": intent, "reservation": rid, "outcome": "declined", "reason": exc.reason})
            follow = step.get(f"if_{exc.event}")
            if follow is None and strict:
                raise
        if follow is not None:
            self.run_steps(follow, rid, strict=strict)
        return False

    def budget(self, step: dict, cost: int) -> None:
        """The customer's budget for this step (a package's budget is checked when the package is complete)."""
        if "max_cost" in step and cost > step["max_cost"]:
            raise _Declined(f"costs {cost}, over the customer's budget of {step['max_cost']}")

    def over_package_budget(self, cost: int) -> bool:
        if self.package is None:
            return False
        limit, since = self.package
        return self.spent(since) + cost > limit

    # cancel -------------------------------------------------------------

    def do_cancel(self, step: dict, rid: str) -> None:
        res = self.reservation(rid)
        self.read("get_user_details", user_id=self.user_id)
        forbidden = [{"name": "cancel_reservation", "arguments": {"reservation_id": rid}}]
        if rid not in self.user["reservations"]:
            raise RequestError(f"{rid} is not {self.user_id}'s reservation")
        if res.get("status") == "cancelled":
            raise _Refused("deny", f"{rid} is already cancelled")
        self.rule("cancel_reason")
        if self.flown(res):
            raise _Refused("cancel_flown", f"{rid} has a flown segment", forbidden, transfer=True)
        reason = step.get("reason", "change_of_plan")
        if res["created_at"] >= DAY_BEFORE_NOW:
            self.rule("cancel_24h")
        elif any(self.status(s) == "cancelled" for s in res["flights"]):
            self.rule("cancel_airline")
        elif res["cabin"] == "business":
            self.rule("cancel_business")
        elif res["insurance"] == "yes" and reason in COVERED_REASONS:
            self.rule("cancel_insured")
            self.rule("insurance_cover")
        else:
            why = "no insurance" if res["insurance"] != "yes" else f"insurance does not cover {reason}"
            raise _Refused("cancel_otherwise", f"{rid}: booked over 24 h ago, {res['cabin']}, {why}", forbidden)
        self.rule("refund")
        self.write("cancel_reservation", reservation_id=rid)

    # change flights -----------------------------------------------------

    def do_change_flights(self, step: dict, rid: str) -> None:
        res = self.reservation(rid)
        cabin = step.get("cabin", res["cabin"])
        if cabin != res["cabin"] and step.get("cabin_scope", "all") != "all":
            raise _Refused("cabin_whole", f"{rid}: a cabin for only part of the reservation")
        pax = len(res["passengers"])
        old_legs = [[res["flights"][i] for i in leg] for leg in self.legs(res)]
        new_legs: list[list[dict]] = []
        wanted_legs: list[Optional[dict]] = [step.get("outbound"), step.get("return")]
        forbidden = None
        after = None
        for k, old in enumerate(old_legs):
            spec = wanted_legs[k] if k < len(wanted_legs) else None
            if spec is None:
                new_legs.append([{"flight_number": s["flight_number"], "date": s["date"]} for s in old])
                if old:
                    after = self.seg_view(old[-1]).end()
                continue
            origin, destination = old[0]["origin"], old[-1]["destination"]
            if k == 0:
                origin, destination = res["origin"], res["destination"]
            elif res["flight_type"] == "round_trip":
                origin, destination = res["destination"], res["origin"]
            want_o = spec.get("origin", [origin])
            want_d = spec.get("destination", [destination])
            if origin not in want_o or destination not in want_d:
                wo, wd = want_o[0], want_d[0]
                forbidden = forbidden or self._forbidden_route_change(res, k, wo, wd, spec, cabin)
                raise _Refused("same_route", f"{rid}: {origin}-{destination} cannot become {wo}-{wd}", forbidden,
                               transfer=True)  # fmt: skip
            if len(want_o) > 1 or len(want_d) > 1:
                self.rule("same_route")
            date = self._leg_date(spec, old)
            constraints = dict(spec)
            if after is not None:
                constraints["after"] = after
            options = self.options(origin, destination, date, constraints, cabin, pax)
            if res["cabin"] == "basic_economy":  # refused; the write asked for is the customer's pick, if any
                try:
                    pick = self.choose(options, spec, cabin, [self.seg_view(s) for s in old])
                except _Declined:
                    pick = []
                forbidden = self._forbidden_update(res, k, pick, cabin, new_legs, old_legs)
                raise _Refused("basic_no_change", f"{rid} is basic economy", forbidden)
            if any(self.status(s) in FLOWN for s in old):
                raise _Refused("status", f"{rid}: the leg to change has been flown", transfer=True)
            pick = self.choose(options, spec, cabin, [self.seg_view(s) for s in old])
            new_legs.append([{"flight_number": s.flight_number, "date": s.date} for s in pick])
            after = pick[-1].end()
        if res["cabin"] == "basic_economy":
            raise _Refused("basic_no_change", f"{rid} is basic economy")
        self.rule("same_route")
        flights = [f for leg in new_legs for f in leg]
        self._update_flights(step, res, cabin, flights)

    def _leg_date(self, spec: dict, old: list[dict]) -> str:
        when = spec.get("date", "same")
        first = old[0]["date"]
        if when == "same":
            return first
        if isinstance(when, str) and when.startswith(("+", "-")):
            return _shift(first, int(when))
        return when

    def _forbidden_update(self, res, k, pick, cabin, new_legs, old_legs) -> list[dict]:
        if not pick:
            return []
        flights = [f for leg in new_legs for f in leg]
        flights += [{"flight_number": s.flight_number, "date": s.date} for s in pick]
        for leg in old_legs[k + 1 :]:
            flights += [{"flight_number": s["flight_number"], "date": s["date"]} for s in leg]
        pid = self._any_change_method(res)
        if pid is None:
            return []
        args = {"reservation_id": res["reservation_id"], "cabin": cabin, "flights": flights, "payment_id": pid}
        return [{"name": "update_reservation_flights", "arguments": args}]

    def _forbidden_route_change(self, res, k, origin, destination, spec, cabin) -> list[dict]:
        """The write a customer who wants another route asks for: the new route's flights in the itinerary."""
        old_legs = [[res["flights"][i] for i in leg] for leg in self.legs(res)]
        date = self._leg_date(spec, old_legs[k])
        options = self.options(origin, destination, date, dict(spec), cabin, len(res["passengers"]))
        if not options:
            return []
        try:
            pick = self.choose(options, spec, cabin)
        except _Declined:
            return []
        new_legs = [[{"flight_number": s["flight_number"], "date": s["date"]} for s in leg] for leg in old_legs[:k]]
        return self._forbidden_update(res, k, pick, cabin, new_legs, old_legs)

    def _any_change_method(self, res: dict) -> Optional[str]:
        original = res["payment_history"][0]["payment_id"] if res["payment_history"] else None
        methods = self.state.users[self.user_id]["payment_methods"]
        if original in methods and methods[original]["source"] == "credit_card":
            return original
        return next((pid for pid, m in methods.items() if m["source"] == "credit_card"), None)

    def _update_flights(self, step: dict, res: dict, cabin: str, flights: list[dict]) -> None:
        """Price the new itinerary as the tool does (kept segments at their old price in the same cabin), check
        seats and the budget, pick the payment method and write."""
        pax = len(res["passengers"])
        current = [{"flight_number": s["flight_number"], "date": s["date"]} for s in res["flights"]]
        if flights == current and cabin == res["cabin"]:
            raise _Declined(f"{res['reservation_id']} already has these flights in {cabin}", "no_change")
        total = 0
        kept = False
        for f in flights:
            old = next((s for s in res["flights"] if s["flight_number"] == f["flight_number"]
                        and s["date"] == f["date"] and cabin == res["cabin"]), None)  # fmt: skip
            if old is not None:
                total += old["price"] * pax
                kept = True
                continue
            day = self.day(f["flight_number"], f["date"])
            if day is None or day["status"] != "available":
                raise _Refused("status", f"{f['flight_number']} is not available on {f['date']}")
            if day["available_seats"][cabin] < pax:
                self.rule("seats")
                raise _Declined(f"{f['flight_number']} has no {cabin} seats for {pax}", "no_flight")
            total += day["prices"][cabin] * pax
        if kept:
            self.rule("kept_price")
        diff = total - sum(s["price"] for s in res["flights"]) * pax
        self.budget(step, diff)
        pid = self.change_payment(res, diff, step.get("payment"))
        self.write("update_reservation_flights", reservation_id=res["reservation_id"], cabin=cabin, flights=flights,
                   payment_id=pid)  # fmt: skip

    # change cabin -------------------------------------------------------

    def do_change_cabin(self, step: dict, rid: str) -> None:
        res = self.reservation(rid)
        cabin = step["cabin"]
        flights = [{"flight_number": s["flight_number"], "date": s["date"]} for s in res["flights"]]
        forbidden_pid = self._any_change_method(res)
        forbidden = []
        if forbidden_pid is not None:
            forbidden = [{"name": "update_reservation_flights", "arguments": {
                "reservation_id": rid, "cabin": cabin, "flights": flights, "payment_id": forbidden_pid}}]  # fmt: skip
        if self.flown(res):
            raise _Refused("cabin_flown", f"{rid} has a flown segment", forbidden)
        scope = step.get("scope", "all")
        if scope != "all":
            if isinstance(scope, dict) and "passengers" in scope and len(scope["passengers"]) == len(res["passengers"]):
                pass
            else:
                key = "same_flights" if isinstance(scope, dict) else "cabin_whole"
                raise _Refused(key, f"{rid}: a cabin for only part of the reservation")
        if cabin == res["cabin"]:
            raise _Refused("deny", f"{rid} is already {cabin}")
        if res["cabin"] == "basic_economy":
            self.rule("cabin_basic")
        self.rule("cabin_price")
        self._update_flights(step, res, cabin, flights)

    # bags, insurance ----------------------------------------------------

    def do_add_bags(self, step: dict, rid: str) -> None:
        res = self.reservation(rid)
        self.read("get_user_details", user_id=self.user_id)
        total = step["total"] if "total" in step else res["total_baggages"] + step["add"]
        if total < res["total_baggages"]:
            raise _Refused("bags_add_only", f"{rid}: bags can be added, not removed")
        free = self.allowance(res)
        self.rule("free_bags")
        nonfree = max(res["nonfree_baggages"], total - free, 0)
        cost = BAG_FEE * (nonfree - res["nonfree_baggages"])
        self.budget(step, cost)
        pid = self.change_payment(res, cost, step.get("payment"))
        self.write("update_reservation_baggages", reservation_id=rid, total_baggages=total, nonfree_baggages=nonfree,
                   payment_id=pid)  # fmt: skip

    def do_remove_bags(self, step: dict, rid: str) -> None:
        res = self.reservation(rid)
        total = max(0, res["total_baggages"] - step.get("remove", 1))
        pid = self._any_change_method(res)
        forbidden = []
        if pid is not None and total != res["total_baggages"]:
            args = {"reservation_id": rid, "total_baggages": total,
                    "nonfree_baggages": min(res["nonfree_baggages"], total), "payment_id": pid}  # fmt: skip
            forbidden = [{"name": "update_reservation_baggages", "arguments": args}]
        raise _Refused("bags_add_only", f"{rid}: checked bags cannot be removed", forbidden)

    def do_add_insurance(self, step: dict, rid: str) -> None:  # noqa: ARG002 - a step handler's signature (do_<intent>)
        self.reservation(rid)
        raise _Refused("insurance_later", f"{rid}: insurance cannot be added after booking")

    def do_remove_insurance(self, step: dict, rid: str) -> None:  # noqa: ARG002 - a step handler's signature (do_<intent>)
        self.reservation(rid)
        raise _Refused("transfer", f"{rid}: insurance is neither removed nor refunded by any action")

    # passengers ---------------------------------------------------------

    def do_change_passenger(self, step: dict, rid: str) -> None:
        res = self.reservation(rid)
        self.read("get_user_details", user_id=self.user_id)
        passengers = [dict(p) for p in res["passengers"]]
        who = step.get("from")
        if who is None:
            if len(passengers) != 1:
                raise RequestError(f"{rid} has {len(passengers)} passengers: say which one changes")
            index = 0
        else:
            index = next((i for i, p in enumerate(passengers) if f"{p['first_name']} {p['last_name']}" == who), None)
            if index is None:
                raise RequestError(f"{who!r} is not a passenger of {rid}")
        to = step["to"]
        if to == "self":
            user = self.user
            new = {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"], "dob": user["dob"]}
        else:
            new = {
                "first_name": to["first_name"],
                "last_name": to["last_name"],
                "dob": to.get("dob", passengers[index]["dob"]),
            }
        passengers[index] = new
        self.rule("passenger_edit")
        self.write("update_reservation_passengers", reservation_id=rid, passengers=passengers)

    def do_remove_passenger(self, step: dict, rid: str) -> None:  # noqa: ARG002 - a step handler's signature (do_<intent>)
        self.reservation(rid)
        raise _Refused("passenger_count", f"{rid}: the number of passengers cannot change")

    do_add_passenger = do_remove_passenger

    # booking ------------------------------------------------------------

    def do_book(self, step: dict, rid: Optional[str]) -> None:
        self.rule("book_user")
        self.rule("book_trip")
        user = self.read("get_user_details", user_id=self.user_id)
        ref = None
        if "like" in step:
            ref_id = self.select(step["like"], rid)[0]
            ref = self.reservation(ref_id)
        like = ref if ref is not None else {}  # (without one, the step names all three)
        origins = step.get("origin") or [like["origin"]]
        destinations = step.get("destination") or [like["destination"]]
        flight_type = step.get("flight_type") or like["flight_type"]
        passengers = self._passengers(step.get("passengers", ["self"]), user, ref)
        self.rule("book_passengers")
        if len(passengers) > MAX_PASSENGERS:
            raise _Refused("book_passengers", f"{len(passengers)} passengers: at most {MAX_PASSENGERS}")
        pax = len(passengers)
        dates = dict(step.get("dates", {}))
        if ref is not None:
            ref_legs = [[ref["flights"][i] for i in leg] for leg in self.legs(ref)]
            dates.setdefault("outbound", ref_legs[0][0]["date"])
            if flight_type == "round_trip" and len(ref_legs) > 1:
                dates.setdefault("return", ref_legs[1][0]["date"])
        cabins = [step["cabin"]] if step.get("cabin", "cheapest") != "cheapest" else list(CABINS)
        if step.get("cabin") == "same" and ref is not None:
            cabins = [ref["cabin"]]
        flights_spec = step.get("flights", {})
        best = None
        for cabin in cabins:
            for o in origins:
                for d in destinations:
                    trip = self._trip(o, d, flight_type, dates, flights_spec, cabin, pax, ref)
                    if trip is None:
                        continue
                    price = sum(s.prices[cabin] for leg in trip for s in leg)
                    key = (price, trip[0][0].start())
                    if best is None or key < best[0]:
                        best = (key, cabin, o, d, trip)
        if best is None:
            raise _Declined("no flight meets the customer's constraints", "no_flight")
        _, cabin, origin, destination, trip = best
        self.rule("book_cabin")
        bags = step.get("bags", 0)
        free = FREE_BAGS[user["membership"]][cabin] * pax
        self.rule("free_bags")
        self.rule("needed_bags")
        total_bags = free if bags == "free_allowance" else int(bags)
        nonfree = max(0, total_bags - free)
        insurance = step.get("insurance", "no")
        self.rule("insurance")
        total = sum(s.prices[cabin] for leg in trip for s in leg) * pax
        total += (INSURANCE_FEE * pax if insurance == "yes" else 0) + BAG_FEE * nonfree
        self.budget(step, total)
        payments = self._book_payment(step, total, ref)
        flights = [{"flight_number": s.flight_number, "date": s.date} for leg in trip for s in leg]
        self.write("book_reservation", user_id=self.user_id, origin=origin, destination=destination,
                   flight_type=flight_type, cabin=cabin, flights=flights, passengers=passengers,
                   payment_methods=payments, total_baggages=total_bags, nonfree_baggages=nonfree,
                   insurance=insurance)  # fmt: skip

    def _passengers(self, wanted: list, user: dict, ref: Optional[dict]) -> list[dict]:
        out = []
        for p in wanted:
            if p == "self":
                out.append({"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                            "dob": user["dob"]})  # fmt: skip
            elif isinstance(p, dict) and "saved" in p:
                match = [s for s in user["saved_passengers"] if f"{s['first_name']} {s['last_name']}" == p["saved"]]
                if not match:
                    raise RequestError(f"{p['saved']!r} is not a saved passenger of {self.user_id}")
                out.append(dict(match[0]))
            elif isinstance(p, dict) and p.get("from_reservation"):
                if ref is None:
                    raise RequestError("passengers from_reservation needs 'like'")
                out.extend(dict(x) for x in ref["passengers"])
            elif isinstance(p, dict) and "first_name" in p:
                out.append({"first_name": p["first_name"], "last_name": p["last_name"], "dob": p["dob"]})
            else:
                raise RequestError(f"unknown passenger {p!r}")
        return out

    def _trip(self, origin, destination, flight_type, dates, spec, cabin, pax, ref) -> Optional[list[list[_Seg]]]:
        legs = [("outbound", origin, destination)]
        if flight_type == "round_trip":
            legs.append(("return", destination, origin))
        trip: list[list[_Seg]] = []
        after = None
        for k, (name, o, d) in enumerate(legs):
            leg_spec = dict(spec.get(name, {}))
            if spec.get("same_as_reference") and ref is not None:
                ref_leg = [ref["flights"][i] for i in self.legs(ref)[k]]
                leg_spec["flights"] = [s["flight_number"] for s in ref_leg]
            if after is not None:
                leg_spec["after"] = after
            date = dates.get(name)
            if date is None:
                raise RequestError(f"booking needs a {name} date")
            found = self.options(o, d, date, leg_spec, cabin, pax)
            if cabin == "cheapest":
                raise RequestError("cabin 'cheapest' is resolved per cabin")
            if not found:
                return None
            try:
                pick = self.choose(found, leg_spec, cabin)
            except _Declined:
                return None
            trip.append(pick)
            after = pick[-1].end()
        return trip

    def _book_payment(self, step: dict, total: int, ref: Optional[dict]) -> list[dict]:
        """Split ``total`` over the customer's methods in their order, within the policy's mix limits."""
        self.rule("payment_profile")
        self.rule("payment_limits")
        spec = step.get("payment")
        if spec is None:
            self.rule("book_payment_default")
            methods = self.state.users[self.user_id]["payment_methods"]
            original = ref["payment_history"][0]["payment_id"] if ref and ref["payment_history"] else None
            if original in methods and methods[original]["source"] == "credit_card":
                return [{"payment_id": original, "amount": total}]
            card = next((pid for pid, m in methods.items() if m["source"] == "credit_card"), None)
            if card is None:
                raise _Declined("no credit card to pay with", "no_payment")
            return [{"payment_id": card, "amount": total}]
        for choice in spec.get("choices", [spec]):
            if "if_total_over" in choice and not total > choice["if_total_over"]:
                continue
            return self._split(choice, total, step)
        raise RequestError("no payment choice applies")

    def _split(self, spec: dict, total: int, step: dict) -> list[dict]:
        methods = self.state.users[self.user_id]["payment_methods"]
        items = spec["use"]
        certs = [pid for pid, m in methods.items() if m["source"] == "certificate"]
        wants_all_certs = any(i["kind"] == "certificate" and i.get("pick") == "all" for i in items)
        if wants_all_certs and len(certs) > 1:
            if "if_certificate_limit" in spec:
                return self._split(spec["if_certificate_limit"], total, step)
            if "if_certificate_limit" in step:
                raise _Declined("only one certificate per reservation", "certificate_limit")
            if spec.get("only") and max(methods[c]["amount"] for c in certs) < total:
                raise _Refused("payment_limits", "only one certificate per reservation, and it does not cover the "
                               "price; the customer accepts no other method")  # fmt: skip
        out: list[dict] = []
        remaining = total
        used_certs = used_cards = used_gifts = 0
        for item in items:
            if remaining <= 0:
                break
            kind = item["kind"]
            if kind == "certificate":
                pick = self._pick_certificate(item, certs, remaining)
                if pick is None:
                    if spec.get("only"):
                        raise _Declined("no certificate covers the price", "no_payment")
                    continue
                used_certs += 1
                self.rule("certificate_rest")
                amount = min(int(methods[pick]["amount"]), remaining)
                out.append({"payment_id": pick, "amount": amount})
                remaining -= amount
            elif kind == "gift_card":
                gifts = [pid for pid, m in methods.items() if m["source"] == "gift_card" and m["amount"] > 0]
                if item.get("order") == "smallest_first":
                    gifts.sort(key=lambda pid: methods[pid]["amount"])
                elif item.get("order") == "largest_first":
                    gifts.sort(key=lambda pid: -methods[pid]["amount"])
                if "id" in item:
                    gifts = [item["id"]]
                for pid in gifts:
                    if remaining <= 0 or used_gifts >= MAX_GIFT_CARDS:
                        break
                    amount = min(int(methods[pid]["amount"]), remaining)
                    out.append({"payment_id": pid, "amount": amount})
                    remaining -= amount
                    used_gifts += 1
            elif kind == "credit_card":
                cards = [pid for pid, m in methods.items() if m["source"] == "credit_card" and _card_matches(m, item)]
                if not cards or used_cards:
                    continue
                out.append({"payment_id": cards[0], "amount": remaining})
                remaining = 0
                used_cards += 1
            else:
                raise RequestError(f"unknown payment kind {kind!r}")
        if used_certs > 1:
            raise _Refused("payment_limits", "at most one certificate")
        if remaining > 0:
            raise _Declined(f"the customer's methods leave {remaining} unpaid", "no_payment")
        card_limit = spec.get("max_credit_card")
        on_card = sum(p["amount"] for p in out if methods[p["payment_id"]]["source"] == "credit_card")
        if card_limit is not None and on_card > card_limit:
            raise _Declined(f"{on_card} on the credit card, over the customer's limit of {card_limit}")
        return out

    def _pick_certificate(self, item: dict, certs: list[str], remaining: int) -> Optional[str]:
        methods = self.state.users[self.user_id]["payment_methods"]
        if "id" in item:
            return item["id"] if item["id"] in methods else None
        if "amount" in item:
            return next((c for c in certs if methods[c]["amount"] == item["amount"]), None)
        if not certs:
            return None
        pick = item.get("pick", "largest")
        if pick in ("largest", "all"):
            if pick == "all" and len(certs) > 1:
                self.rule("payment_limits")
            return max(certs, key=lambda c: (methods[c]["amount"], -certs.index(c)))
        if pick == "smallest":
            return min(certs, key=lambda c: methods[c]["amount"])
        if pick == "one_covering":
            covering = [c for c in certs if methods[c]["amount"] >= remaining]
            return min(covering, key=lambda c: methods[c]["amount"]) if covering else None
        if pick == "remaining":
            return certs[0] if len(certs) == 1 else None
        raise RequestError(f"unknown certificate pick {pick!r}")

    # compensation -------------------------------------------------------

    def do_compensation(self, step: dict, rid: Optional[str]) -> None:
        self.rule("comp_ask")
        user = self.read("get_user_details", user_id=self.user_id)
        complaint = step["complaint"]
        if complaint not in ("cancelled", "delayed"):
            forbidden = [{"name": "send_certificate", "arguments": {"user_id": self.user_id, "amount": 100}}]
            raise _Refused("comp_other", f"no compensation for {complaint}", forbidden)
        wanted = "cancelled" if complaint == "cancelled" else "delayed"
        self.rule("comp_facts")
        found = None
        sel = step.get("reservation")
        candidates = self.select(sel, rid, many=True) if sel else list(user["reservations"])
        for cand in candidates:
            res = self.reservation(cand)
            for seg in res["flights"]:
                if step.get("flight") and seg["flight_number"] != step["flight"]:
                    continue
                if self.status(seg) == wanted:
                    found = (cand, res)
                    break
            if found:
                break
        amount_each = 100 if complaint == "cancelled" else 50
        forbidden = [
            {
                "name": "send_certificate",
                "arguments": {"user_id": self.user_id, "amount": amount_each * _pax(candidates, self)},
            }
        ]
        if found is None:
            raise _Refused("comp_facts", f"no {wanted} flight in the customer's reservations", forbidden)
        cand, res = found
        forbidden = [
            {
                "name": "send_certificate",
                "arguments": {"user_id": self.user_id, "amount": amount_each * len(res["passengers"])},
            }
        ]
        if step.get("claims", {}).get("cabin") and step["claims"]["cabin"] != res["cabin"]:
            raise _Refused("comp_facts", f"{cand} is {res['cabin']}, not {step['claims']['cabin']}", forbidden)
        eligible = user["membership"] in ("silver", "gold") or res["insurance"] == "yes" or res["cabin"] == "business"
        if not eligible:
            self.rule("comp_regular")
            raise _Refused("comp_eligible", f"{self.user_id} is regular, uninsured, in {res['cabin']}", forbidden)
        self.rule("comp_eligible")
        if complaint == "delayed":
            self.rule("comp_delayed")
            changed = any(
                w["arguments"].get("reservation_id") == cand
                and w["name"] in ("cancel_reservation", "update_reservation_flights")
                for w in self.writes
            )
            if not changed:
                raise _Refused("comp_delayed", f"{cand}: no change or cancellation, no delay compensation", forbidden)
        else:
            self.rule("comp_cancelled")
        self.write("send_certificate", user_id=self.user_id, amount=amount_each * len(res["passengers"]))

    # information --------------------------------------------------------

    def do_info(self, step: dict, rid: Optional[str]) -> None:
        self.rule("tools_only")
        question = step["question"]
        user = self.read("get_user_details", user_id=self.user_id)
        methods = user["payment_methods"]
        if question == "bag_allowance":
            res = self.reservation(self.select(step.get("reservation"), rid)[0])
            self.rule("free_bags")
            value: float = self.allowance(res)
        elif question == "gift_card_balance_total":
            value = sum(m["amount"] for m in methods.values() if m["source"] == "gift_card")
        elif question == "certificate_balance_total":
            value = sum(m["amount"] for m in methods.values() if m["source"] == "certificate")
        elif question == "upcoming_total_cost":
            value = 0
            for r in user["reservations"]:
                res = self.reservation(r)
                if self.upcoming(res):
                    value += sum(p["amount"] for p in res["payment_history"])
        elif question == "refunds_total":
            value = -sum(amount for paid in self.charges for _, amount in paid if amount < 0)
        elif question == "charges_total":
            pref = step.get("payment", {})
            value = sum(
                amount
                for paid in self.charges
                for pid, amount in paid
                if amount > 0
                and pid in methods
                and methods[pid]["source"] == pref.get("kind", methods[pid]["source"])
                and _card_matches(methods[pid], pref)
            )
        else:
            raise RequestError(f"unknown question {question!r}")
        self.communicate.append(_number(value))

    # double bookings ----------------------------------------------------

    def do_double_bookings(self, step: dict, rid: Optional[str]) -> None:  # noqa: ARG002 - a step handler's signature (do_<intent>)
        """The customer says where they will be on some days; their own bookings (they fly) on those days that
        contradict it are cancelled, each under the cancellation rules; bookings for others stay."""
        user = self.read("get_user_details", user_id=self.user_id)
        owned = [(r, self.reservation(r)) for r in user["reservations"]]
        for fact in step["facts"]:
            for r, res in owned:
                if res.get("status") == "cancelled" or not self._self_flies(res):
                    continue
                segs = [s for s in res["flights"] if s["date"] == fact["date"] and self.status(s) not in FLOWN]
                if not segs:
                    continue
                if "arrive" in fact:
                    fits = any(s["destination"] in fact["arrive"] and s["origin"] in fact.get("from", [s["origin"]])
                               for s in segs)  # fmt: skip
                else:
                    fits = any(s["origin"] in fact["depart"] for s in segs)
                if not fits:
                    cancel = {"intent": "cancel", "reservation": {"id": r}, "reason": step.get("reason", "other")}
                    self.attempt(cancel, r)

    # transfer -----------------------------------------------------------

    def do_transfer(self, step: dict, rid: Optional[str]) -> None:  # noqa: ARG002 - a step handler's signature (do_<intent>)
        self.rule("transfer")
        summary = step.get("summary") or "The customer needs help that is outside my actions."
        self.actions.append(("transfer", {"name": "transfer_to_human_agents", "arguments": {"summary": summary}}))
        self.transferred = True

    # package ------------------------------------------------------------

    def do_package(self, step: dict, rid: Optional[str]) -> None:
        """All steps or none: a part that fails even with its fallbacks undoes the package (the customer wants it
        whole); the package's budget is the net amount of all its writes."""
        outer = self.package
        if "max_cost" in step:
            self.package = (step["max_cost"], len(self.writes))
        try:
            self.run_steps(step["steps"], rid, strict=True)
            if self.package is not None and self.over_package_budget(0):
                limit, since = self.package
                raise _Declined(f"the package costs {self.spent(since)}, over the budget of {limit}")
        finally:
            self.package = outer


_CHANGE_ORDER = {"change_flights": 0, "change_cabin": 0, "change_passenger": 1, "add_bags": 2}
_PER_RESERVATION = {
    "cancel", "change_flights", "change_cabin", "add_bags", "remove_bags", "add_insurance", "remove_insurance",
    "change_passenger", "remove_passenger", "add_passenger",
}  # fmt: skip


def _pax(rids: list[str], run: _Run) -> int:
    return len(run.state.reservations[rids[0]]["passengers"]) if rids else 1


def _card_matches(method: dict, pref: dict) -> bool:
    if "last_four" in pref and method.get("last_four") != pref["last_four"]:
        return False
    if "brand" in pref and method.get("brand") != pref["brand"]:
        return False
    if "id" in pref and method.get("id") != pref["id"]:
        return False
    return True


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def resolve(request: dict, db: Any) -> dict:
    """Resolve a customer's request (see the module docstring) against ``db`` (the airline DB as plain data, or
    its shared :class:`~tau2_gym.core.db.BaseData`) under the airline policy.

    Returns ``{"allowed", "reason", "actions" (the writes, in order), "communicate", "rules", "gold" (reads, writes
    and transfers a careful agent makes, in order), "forbidden" (refused asks: the write the customer wanted),
    "outcomes" (per step and reservation: done / refused / declined, with the reason), "transferred"}``.
    """
    run = _Run(db, request)
    allowed = run.run_steps(list(request.get("steps", [])), None, top=True)
    refused = [o for o in run.outcomes if o["outcome"] != "done"]
    return {
        "allowed": allowed,
        "reason": "; ".join(o["reason"] for o in refused) if refused else "allowed",
        "actions": run.writes,
        "communicate": run.communicate,
        "rules": run.rules,
        "gold": [a for _, a in run.actions],
        "forbidden": run.forbidden,
        "outcomes": run.outcomes,
        "transferred": run.transferred,
    }
