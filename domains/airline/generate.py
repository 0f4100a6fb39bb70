"""Generated airline tasks: customer requests drawn from the DB, resolved by the rule engine, written as upstream tasks.

The benchmark has 30 airline train tasks; this module drafts as many as a trainer needs (the machinery in
:mod:`tau2_gym.generation` verifies each draft through the env before writing it). Seeded and deterministic, no
LLM: slot ``k`` of seed ``s`` draws with ``random.Random(f"airline:{s}:{k}:{attempt}")`` from the DB's users,
reservations and flights (never one in ``exclude``), so the same arguments give the same drafts byte for byte.

Every draft is a request in the customer's terms (the format of :mod:`.rules`, the same the benchmark annotations
use); :func:`~tau2_gym.domains.airline.rules.resolve` decides what the policy allows and which writes a careful
agent makes, and the draft carries them as gold actions (with the reads a careful agent makes), the numbers the
agent must say (``communicate_info``), the rules applied (each citing its policy paragraph) and, for refused
variants, the write the customer asks for (``forbidden_actions``). The customer's side is upstream's structured
instructions (reason for call, known and unknown info, task instructions), worded from several templates per intent.

Intent families (:data:`INTENTS`), each in allowed and refused variants where the policy refuses:

* ``cancel``: within 24 h, airline-cancelled flight, business, insured with a covered reason / not eligible;
* ``change_flight``: another date or a nonstop on the same route / basic economy, another destination;
* ``change_cabin``: upgrades and downgrades with the fare difference / a segment already flown;
* ``bags``: added bags against the free allowance of membership and cabin / removing bags;
* ``passengers``: replacing or renaming a passenger / removing one (their number is fixed);
* ``book``: search, cabins, passengers, bags, insurance, certificates, gift cards and cards / two certificates,
  six passengers;
* ``compensation``: cancelled flights, delayed flights with a cancellation / not eligible, no change, no such flight;
* ``transfer``: a trip already under way the customer wants cancelled;
* ``info``: free bag allowance, gift card and certificate balances, what upcoming trips cost (COMMUNICATE);
* two intents in one call: ``a+b`` (:data:`COMBOS` by default; any pair on request).
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from tau2_gym.core.db import BaseData, json_strings, same_json
from tau2_gym.domains.airline.rules import (
    DAY_BEFORE_NOW,
    FLOWN,
    FREE_BAGS,
    NOT_DEPARTED,
    TABLES,
    RequestError,
    resolve,
)
from tau2_gym.domains.airline.tools import AIRPORTS, AirlineTools

GENERATOR = "tau2_gym.domains.airline.generate"
GENERATOR_VERSION = 1
INTENTS = (
    "cancel", "change_flight", "change_cabin", "bags", "passengers", "book", "compensation", "transfer", "info",
)  # fmt: skip
#: the two-intent calls drafted by default (any ``a+b`` of INTENTS may be asked for)
COMBOS = ("change_cabin+bags", "cancel+book", "info+change_flight", "passengers+bags", "change_flight+bags")
#: intents whose drafts alternate allowed and refused variants
REFUSABLE = frozenset({"cancel", "change_flight", "change_cabin", "bags", "passengers", "book", "compensation"})
WRITE_TOOLS = frozenset(n for n in AirlineTools.tool_names if AirlineTools.mutates_state(n))
REQUESTS_FILE = Path(__file__).with_name("benchmark_requests.json")
CITY = dict(AIRPORTS)
FIRST_NAMES = (
    "Ava",
    "Ben",
    "Clara",
    "Diego",
    "Elif",
    "Femi",
    "Greta",
    "Hugo",
    "Iris",
    "Jonah",
    "Keiko",
    "Lars",
    "Mira",
    "Nadia",
    "Oscar",
    "Priya",
    "Ruben",
    "Selma",
    "Theo",
    "Vera",
    "Wyatt",
    "Yuki",
    "Zane",
)
LAST_NAMES = (
    "Adler",
    "Brandt",
    "Castro",
    "Dubois",
    "Engel",
    "Falk",
    "Grant",
    "Holm",
    "Ibarra",
    "Jansen",
    "Klein",
    "Lund",
    "Marsh",
    "Nolan",
    "Ortiz",
    "Pike",
    "Quinn",
    "Reyes",
    "Stone",
    "Thorne",
    "Vance",
    "Wolfe",
)
PERSONAS = (
    None,
    "Polite and patient; answers exactly what is asked.",
    "In a hurry, writes short messages and wants this done quickly.",
    "Friendly and a bit chatty, but clear about what they want.",
    "Anxious about money; double-checks every amount.",
    "Calm and methodical; repeats key details to be sure.",
    "Frustrated after a long week, but cooperative.",
)
MONTH = "May"


# ----------------------------------------------------------------------------------------------- words


def _date_words(date: str) -> str:
    return f"{MONTH} {int(date[-2:])}"


def _city(code: str) -> str:
    return CITY.get(code, code)


def _trip_words(res: dict) -> str:
    first = res["flights"][0]["date"]
    kind = "round trip" if res["flight_type"] == "round_trip" else "one-way trip"
    return f"{kind} from {_city(res['origin'])} to {_city(res['destination'])} departing {_date_words(first)}"


def _card_words(method: dict) -> str:
    if method["source"] == "credit_card":
        return f"{method['brand']} credit card ending in {method['last_four']}"
    if method["source"] == "gift_card":
        return "gift card"
    return f"${int(method['amount'])} travel certificate"


def _money(value: float) -> str:
    return f"${int(value)}" if float(value).is_integer() else f"${value:.2f}"


def _cabin_words(cabin: str) -> str:
    return {"basic_economy": "basic economy", "economy": "economy", "business": "business"}[cabin]


def _pick(rng: random.Random, options: Sequence[str], **values: Any) -> str:
    return rng.choice(options).format(**values)


# ----------------------------------------------------------------------------------------------- the DB, indexed


@dataclass
class _Res:
    """What the builders need to know about a reservation (computed once per call of :func:`draft_tasks`)."""

    rid: str
    user_id: str
    cabin: str
    insurance: str
    pax: int
    flight_type: str
    recent: bool  # booked within 24 hours
    upcoming: bool  # nothing flown, something still to fly
    started: bool  # something flown, something still to fly
    airline_cancelled: bool
    delayed: bool
    flights: tuple[str, ...]


class _World:
    """The DB as the builders draw from it: entities in ``exclude`` (and reservations touching them) left out."""

    def __init__(self, db: dict, exclude: frozenset[str]) -> None:
        self.db = db
        self.base = BaseData(db, TABLES)
        self.exclude = exclude
        flights = db["flights"]
        self.res: dict[str, _Res] = {}
        for rid, r in db["reservations"].items():
            if r.get("status") == "cancelled" or rid in exclude or r["user_id"] in exclude:
                continue
            numbers = tuple(s["flight_number"] for s in r["flights"])
            if any(n in exclude for n in numbers) or r["origin"] == r["destination"]:
                continue
            statuses = [flights[s["flight_number"]]["dates"][s["date"]]["status"] for s in r["flights"]]
            flown = any(s in FLOWN for s in statuses)
            ahead = any(s in NOT_DEPARTED for s in statuses)
            self.res[rid] = _Res(
                rid=rid,
                user_id=r["user_id"],
                cabin=r["cabin"],
                insurance=r["insurance"],
                pax=len(r["passengers"]),
                flight_type=r["flight_type"],
                recent=r["created_at"] >= DAY_BEFORE_NOW,
                upcoming=ahead and not flown,
                started=ahead and flown,
                airline_cancelled="cancelled" in statuses,
                delayed="delayed" in statuses,
                flights=numbers,
            )
        self.users = [u for u in db["users"] if u not in exclude]
        self.flights = [f for f in flights if f not in exclude]
        self._pools: dict[str, list[str]] = {}
        self.described: dict[str, dict] = {}  # reservation -> how the customer of the current draw names it

    def pool(self, name: str, test: Callable[[_Res], bool]) -> list[str]:
        if name not in self._pools:
            self._pools[name] = [rid for rid, r in self.res.items() if test(r)]
        return self._pools[name]

    def user(self, uid: str) -> dict:
        return self.db["users"][uid]

    def reservation(self, rid: str) -> dict:
        return self.db["reservations"][rid]

    def membership(self, uid: str) -> str:
        return self.db["users"][uid]["membership"]

    def methods(self, uid: str, source: str) -> list[tuple[str, dict]]:
        return [(pid, m) for pid, m in self.db["users"][uid]["payment_methods"].items() if m["source"] == source]


# ----------------------------------------------------------------------------------------------- a request, drafted


@dataclass
class _Part:
    """One intent of a call: the customer's steps (request format of :mod:`.rules`) and how they say it."""

    intent: str
    variant: str
    user_id: str
    steps: list[dict]
    reason: str  # what the customer calls about (second person, upstream style)
    instructions: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    payment: Optional[dict] = None  # the customer's stated payment preference for changes
    forbidden: list[dict] = field(default_factory=list)  # a builder's own forbidden write (else the engine's)


class _Skip(Exception):
    """This draw does not make a draft (no fitting record); the drafter draws again."""


def _choice(rng: random.Random, items: Sequence[Any]) -> Any:
    if not items:
        raise _Skip("nothing to draw from")
    return items[rng.randrange(len(items))]


def _describe(rng: random.Random, world: _World, rid: str, part: _Part) -> dict:
    """How the customer names a reservation: its id (known), or its route when that is unique for the user (the
    agent has to find it). The same reservation is named the same way in every part of one call."""
    if rid in world.described:
        return world.described[rid]
    res = world.reservation(rid)
    same_route = [
        r
        for r in world.user(res["user_id"])["reservations"]
        if r in world.db["reservations"]
        and world.db["reservations"][r].get("status") != "cancelled"
        and world.db["reservations"][r]["origin"] == res["origin"]
        and world.db["reservations"][r]["destination"] == res["destination"]
    ]
    if rng.random() < 0.35 and same_route == [rid]:
        trip = _trip_words(res)
        part.unknown.append(f"You do not remember the reservation id of your {trip}.")
        part.known.append(f"You have a {trip}.")
        sel: dict = {"origin": [res["origin"]], "destination": [res["destination"]]}
    else:
        part.known.append(
            f"Your reservation id is {rid}." if not world.described else f"Your other reservation id is {rid}."
        )
        sel = {"id": rid}
    world.described[rid] = sel
    return sel


def _payment_pref(rng: random.Random, world: _World, uid: str, allow_original: bool = True) -> tuple[dict, str]:
    """A stated payment method for a change: (request preference, the customer's words)."""
    cards = world.methods(uid, "credit_card")
    gifts = world.methods(uid, "gift_card")
    options = []
    if cards:
        pid, card = _choice(rng, cards)
        options.append(({"kind": "credit_card", "last_four": card["last_four"]}, f"your {_card_words(card)}"))
    if len(gifts) == 1:
        options.append(({"kind": "gift_card"}, "your gift card"))
    elif gifts:
        options.append(({"kind": "gift_card", "pick": "largest_balance"}, "your gift card with the largest balance"))
    if allow_original:
        options.append(({"kind": "original"}, "the payment method you used to book it"))
    return _choice(rng, options)


# cancel -------------------------------------------------------------------------------------------------------


_CANCEL_OPEN = (
    "You want to cancel your {trip}.",
    "You need to cancel a reservation: your {trip}.",
    "You are calling to call off your {trip}.",
    "Please help: you have to cancel your {trip}.",
)
_REASONS = {
    "change_of_plan": ("Your plans have changed.", "change of plans"),
    "health": ("You are ill and your doctor told you not to travel.", "health"),
    "weather": ("A severe storm is forecast at your destination.", "weather"),
    "airline_cancelled": ("The airline cancelled one of the flights of this trip.", "the airline cancelled a flight"),
    "other": ("The dates no longer suit you.", "the dates no longer suit you"),
}


def _cancel(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    mine = _mine(world, uid)
    if variant == "allowed":
        kind = rng.choice(("recent", "airline", "business", "insured"))
        tests = {
            "recent": lambda r: r.upcoming and r.recent and r.cabin != "business",
            "airline": lambda r: (
                r.airline_cancelled
                and not r.started
                and not r.recent
                and r.cabin != "business"
                and _any_ahead(world, r)
            ),
            "business": lambda r: r.upcoming and r.cabin == "business" and not r.recent,
            "insured": lambda r: r.upcoming and r.insurance == "yes" and r.cabin != "business" and not r.recent,
        }
        rid = _choice(rng, [r for r in world.pool(f"cancel_{kind}", tests[kind]) if mine(r)])
        reason = {"recent": "change_of_plan", "airline": "airline_cancelled", "business": "change_of_plan",
                  "insured": rng.choice(("health", "weather"))}[kind]  # fmt: skip
    else:
        test = lambda r: (r.upcoming and r.cabin != "business" and not r.recent  # noqa: E731
                          and not r.airline_cancelled)  # fmt: skip
        rid = _choice(rng, [r for r in world.pool("cancel_refused", test) if mine(r)])
        insured = world.res[rid].insurance == "yes"
        reason = (
            rng.choice(("change_of_plan", "other")) if insured else rng.choice(("change_of_plan", "other", "health"))
        )
    return _cancel_part(rng, world, rid, reason, variant)


def _any_ahead(world: _World, r: _Res) -> bool:
    flights = world.db["flights"]
    res = world.reservation(r.rid)
    return any(flights[s["flight_number"]]["dates"][s["date"]]["status"] in NOT_DEPARTED for s in res["flights"])


def _cancel_part(rng: random.Random, world: _World, rid: str, reason: str, variant: str) -> _Part:
    res = world.reservation(rid)
    part = _Part("cancel", variant, res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    says, _ = _REASONS[reason]
    part.reason = _pick(rng, _CANCEL_OPEN, trip=_trip_words(res)) + " " + says
    part.steps = [{"intent": "cancel", "reservation": sel, "reason": reason}]
    if reason == "health" and res["insurance"] != "yes":
        part.instructions.append("You believe you bought travel insurance, but you are not sure.")
    part.instructions.append(
        rng.choice(
            (
                "You want the full refund to go back to the original payment method.",
                "You only want to cancel if you get a full refund.",
                "If the agent says the reservation cannot be cancelled, accept it and end the conversation.",
            )
        )
    )
    if reason not in ("health", "weather"):
        part.instructions.append("You are healthy; do not claim a health or weather reason.")
    return part


def _mine(world: _World, uid: Optional[str]) -> Callable[[str], bool]:
    return (lambda rid: True) if uid is None else (lambda rid: world.res[rid].user_id == uid)  # noqa: ARG005 - a reservation filter's signature


# change flights -----------------------------------------------------------------------------------------------


_MOVE_OPEN = (
    "You want to move the {leg} of your {trip} to {date}.",
    "Your schedule changed: the {leg} of your {trip} should be on {date} instead.",
    "You need to fly the {leg} of your {trip} on {date}.",
)
_NONSTOP_OPEN = (
    "You want to switch the {leg} of your {trip} to a nonstop flight on the same day.",
    "The {leg} of your {trip} has a connection; you want a direct flight that day instead.",
    "You would like a nonstop {leg} for your {trip}, same date.",
)
_ROUTE_OPEN = (
    "You want the {leg} of your {trip} to go to {city} instead.",
    "Plans changed: you now need the {leg} of your {trip} to fly into {city} rather than {old}.",
)


def _change_flight(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    mine = _mine(world, uid)
    if variant == "allowed":
        test = lambda r: r.upcoming and r.cabin != "basic_economy"  # noqa: E731
        rid = _choice(rng, [r for r in world.pool("change_ok", test) if mine(r)])
        mode = rng.choice(("date", "date", "nonstop"))
    else:
        mode = rng.choice(("basic", "route"))
        if mode == "basic":
            test = lambda r: r.upcoming and r.cabin == "basic_economy"  # noqa: E731
            rid = _choice(rng, [r for r in world.pool("change_basic", test) if mine(r)])
        else:
            test = lambda r: r.upcoming and r.cabin != "basic_economy"  # noqa: E731
            rid = _choice(rng, [r for r in world.pool("change_ok", test) if mine(r)])
    res = world.reservation(rid)
    part = _Part("change_flight", variant, res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    legs = ["outbound"] + (["return"] if res["flight_type"] == "round_trip" else [])
    leg = rng.choice(legs)
    leg_words = "outbound flight" if leg == "outbound" else "return flight"
    first = _leg_first_date(res, leg)
    trip = _trip_words(res)
    spec: dict[str, Any] = {}
    if mode in ("date", "basic"):
        shift = rng.choice((1, 1, 2, -1))
        new = _shift_date(first, shift)
        if not "2024-05-16" <= new <= "2024-05-30":
            raise _Skip("date out of range")
        if leg == "outbound" and res["flight_type"] == "round_trip" and new >= _leg_first_date(res, "return"):
            raise _Skip("outbound after return")
        if leg == "return" and new <= first and shift < 0:
            raise _Skip("return moved earlier")
        spec = {"date": new}
        part.reason = _pick(rng, _MOVE_OPEN, leg=leg_words, trip=trip, date=_date_words(new))
        if rng.random() < 0.5:
            spec["choose"] = "same_flights"
            part.instructions.append("You want the same flight numbers as now, just on the new date.")
        else:
            spec["choose"] = "cheapest"
            part.instructions.append("You want the cheapest option in your current cabin that day, direct or not.")
    elif mode == "nonstop":
        spec = {"date": "same", "nonstop": True}
        part.reason = _pick(rng, _NONSTOP_OPEN, leg=leg_words, trip=trip)
        part.instructions.append("If there are several nonstop flights, you want the cheapest one.")
    else:  # route
        old = res["destination"] if leg == "outbound" else res["origin"]
        origin = res["origin"] if leg == "outbound" else res["destination"]
        others = sorted({world.db["flights"][f]["destination"] for f in world.flights
                         if world.db["flights"][f]["origin"] == origin} - {old, origin})  # fmt: skip
        city = _choice(rng, others)
        spec = {"date": "same", "nonstop": True, ("destination"): [city]}
        part.reason = _pick(rng, _ROUTE_OPEN, leg=leg_words, trip=trip, city=_city(city), old=_city(old))
        part.instructions.append("You want a nonstop flight on the same date; you do not want to cancel or book a new "
                                 "reservation.")  # fmt: skip
    step: dict[str, Any] = {"intent": "change_flights", "reservation": sel, leg: spec}
    pref, words = _payment_pref(rng, world, part.user_id)
    part.payment = pref
    part.instructions.append(f"Any fare difference should be charged or refunded to {words}.")
    if variant == "refused":
        if mode == "basic":
            part.instructions.append("If the agent says the ticket cannot be changed, accept it; you do not want to "
                                     "upgrade, cancel or buy a new ticket.")  # fmt: skip
        elif rng.random() < 0.5:
            step["if_refused"] = [
                {
                    "intent": "transfer",
                    "summary": f"The customer wants the {leg_words} of {rid} to "
                    f"fly to {_city(city)} instead of {_city(old)}; the destination cannot change.",
                }
            ]
            part.instructions.append("If the agent says this change is not possible, ask to be transferred to a human "
                                     "agent.")  # fmt: skip
        else:
            part.instructions.append("If the agent says this change is not possible, accept it and end the call.")
    part.steps = [step]
    return part


def _leg_first_date(res: dict, leg: str) -> str:
    segs = res["flights"]
    if leg == "outbound":
        return segs[0]["date"]
    for i, s in enumerate(segs):
        if s["destination"] == res["destination"]:
            return segs[i + 1]["date"] if i + 1 < len(segs) else segs[-1]["date"]
    return segs[-1]["date"]


def _shift_date(date: str, days: int) -> str:
    return f"{date[:8]}{int(date[8:]) + days:02d}"


# change cabin -------------------------------------------------------------------------------------------------


_CABIN_OPEN = (
    "You want to change your {trip} to {cabin} for all passengers.",
    "You would like to move your {trip} into {cabin}.",
    "You are calling to switch the cabin of your {trip} to {cabin}.",
)


def _change_cabin(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    mine = _mine(world, uid)
    if variant == "allowed":
        rid = _choice(rng, [r for r in world.pool("cabin_ok", lambda r: r.upcoming) if mine(r)])
    else:
        rid = _choice(rng, [r for r in world.pool("cabin_started", lambda r: r.started) if mine(r)])
    res = world.reservation(rid)
    cabin = rng.choice([c for c in ("basic_economy", "economy", "business") if c != res["cabin"]])
    if variant == "allowed" and cabin == "basic_economy" and rng.random() < 0.6:
        cabin = "economy" if res["cabin"] == "business" else "business"
    part = _Part("change_cabin", variant, res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    part.reason = _pick(rng, _CABIN_OPEN, trip=_trip_words(res), cabin=_cabin_words(cabin))
    down = ["basic_economy", "economy", "business"].index(cabin) < ["basic_economy", "economy", "business"].index(
        res["cabin"]
    )
    if down:
        part.reason += " " + rng.choice(("You need to save money.", "You want the price difference back."))
    pref, words = _payment_pref(rng, world, part.user_id)
    part.payment = pref
    part.instructions.append(f"{'Refunds' if down else 'Any extra cost'} should go to {words}.")
    step: dict[str, Any] = {"intent": "change_cabin", "reservation": sel, "cabin": cabin}
    if variant == "refused":  # no write can change the cabin of flown segments: the fallback is the forbidden write
        part.instructions.append("Part of the trip is already behind you; the remaining flights are what matter.")
        part.instructions.append("If the cabin cannot be changed, you want to cancel the rest of the trip instead; if "
                                 "that is not possible either, accept it and end the call.")  # fmt: skip
        step["if_refused"] = [{"intent": "cancel", "reservation": {"this": True}, "reason": "change_of_plan"}]
        part.forbidden = [{"name": "cancel_reservation", "arguments": {"reservation_id": rid}}]
    part.steps = [step]
    return part


# bags ---------------------------------------------------------------------------------------------------------


_BAGS_OPEN = (
    "You want to add {n} checked bag{s} to your {trip}.",
    "You are bringing {n} more suitcase{s} on your {trip} and want {them} checked.",
    "You need {n} extra checked bag{s} on your {trip}.",
)
_UNBAG_OPEN = (
    "You want to remove {n} checked bag{s} from your {trip} and get a refund for {them}.",
    "You no longer need {n} of the checked bags on your {trip}; you want {them} taken off and refunded.",
)


def _bags(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    mine = _mine(world, uid)
    if variant == "allowed":
        rid = _choice(rng, [r for r in world.pool("bags_ok", lambda r: r.upcoming) if mine(r)])
        n = rng.choice((1, 1, 2, 2, 3))
    else:
        test = lambda r: r.upcoming and world.reservation(r.rid)["total_baggages"] > 0  # noqa: E731
        rid = _choice(rng, [r for r in world.pool("bags_removable", test) if mine(r)])
        n = rng.randint(1, world.reservation(rid)["total_baggages"])
    res = world.reservation(rid)
    part = _Part("bags", variant, res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    words = dict(n=n, s="s" if n > 1 else "", them="them" if n > 1 else "it", trip=_trip_words(res))
    if variant == "allowed":
        part.reason = _pick(rng, _BAGS_OPEN, **words)
        pref, how = _payment_pref(rng, world, part.user_id, allow_original=False)
        part.payment = pref
        part.instructions.append(f"If there is a fee, pay it with {how}.")
        if rng.random() < 0.4:
            part.instructions.append(f"You believe you are a {world.membership(part.user_id)} member.")
        part.steps = [{"intent": "add_bags", "reservation": sel, "add": n}]
    else:
        part.reason = _pick(rng, _UNBAG_OPEN, **words)
        part.instructions.append("If the agent says bags cannot be removed, accept it and end the conversation.")
        part.steps = [{"intent": "remove_bags", "reservation": sel, "remove": n}]
    return part


# passengers ---------------------------------------------------------------------------------------------------


def _new_person(rng: random.Random) -> dict:
    year = rng.randint(1950, 2005)
    return {
        "first_name": rng.choice(FIRST_NAMES),
        "last_name": rng.choice(LAST_NAMES),
        "dob": f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
    }


def _passengers(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    mine = _mine(world, uid)
    if variant == "allowed":
        rid = _choice(rng, [r for r in world.pool("pax_ok", lambda r: r.upcoming) if mine(r)])
    else:  # removing a passenger, and cancelling if that is impossible -- which the policy refuses too
        test = lambda r: r.upcoming and r.pax > 1 and r.cabin != "business" and not r.recent  # noqa: E731
        cand = [r for r in world.pool("pax_refused", test) if mine(r)]
        rid = _choice(rng, [r for r in cand if world.res[r].insurance == "no" and not world.res[r].airline_cancelled])
    res = world.reservation(rid)
    part = _Part("passengers", variant, res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    old = _choice(rng, res["passengers"])
    old_name = f"{old['first_name']} {old['last_name']}"
    trip = _trip_words(res)
    if sum(f"{p['first_name']} {p['last_name']}" == old_name for p in res["passengers"]) != 1:
        raise _Skip("two passengers share a name")
    if variant == "allowed":
        if rng.random() < 0.5:
            new = _new_person(rng)
            part.reason = rng.choice((
                f"{old_name} can no longer travel on your {trip}; {new['first_name']} {new['last_name']} will fly "
                "instead.",
                f"You want to replace passenger {old_name} on your {trip} with {new['first_name']} "
                f"{new['last_name']}.",
            ))  # fmt: skip
            part.instructions.append(f"{new['first_name']} {new['last_name']}'s date of birth is {new['dob']}.")
            to: Any = new
        else:
            last = rng.choice([n for n in LAST_NAMES if n != old["last_name"]])
            part.reason = rng.choice((
                f"The last name of passenger {old_name} on your {trip} is wrong: it should be {last}.",
                f"{old['first_name']} recently changed their last name to {last}; you want the passenger {old_name} "
                f"on your {trip} updated.",
            ))  # fmt: skip
            part.instructions.append("The date of birth stays the same.")
            to = {"first_name": old["first_name"], "last_name": last}
        part.steps = [{"intent": "change_passenger", "reservation": sel, "from": old_name, "to": to}]
    else:
        part.reason = f"{old_name} is no longer coming on your {trip}; you want them removed from the reservation."
        part.instructions.append("If the agent says a passenger cannot be removed, you want to cancel the whole "
                                 "reservation instead; if that is not possible either, accept it.")  # fmt: skip
        part.instructions.append("You are healthy; your plans simply changed.")
        part.steps = [{"intent": "remove_passenger", "reservation": sel, "name": old_name, "if_refused": [
            {"intent": "cancel", "reservation": {"this": True}, "reason": "change_of_plan"}]}]  # fmt: skip
        part.forbidden = [{"name": "cancel_reservation", "arguments": {"reservation_id": rid}}]
    return part


# book ---------------------------------------------------------------------------------------------------------


_BOOK_OPEN = (
    "You want to book a {kind} from {o} to {d} on {date}{back}.",
    "You are planning a {kind} from {o} to {d}, leaving {date}{back}, and want to book it.",
    "You need a {kind}: {o} to {d} on {date}{back}.",
)


def _book(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    uid = uid or _choice(rng, world.users)
    user = world.user(uid)
    flights = world.db["flights"]
    first = flights[_choice(rng, world.flights)]
    origin = first["origin"]
    if rng.random() < 0.6:
        destination = first["destination"]
    else:
        destination = rng.choice([c for c, _ in AIRPORTS if c != origin])
    date = f"2024-05-{rng.randint(17, 27):02d}"
    round_trip = rng.random() < 0.45
    back = f"2024-05-{int(date[-2:]) + rng.randint(1, 3):02d}" if round_trip else None
    cabin = rng.choice(("basic_economy", "economy", "economy", "business"))
    part = _Part("book", variant, uid, [], "")
    part.known.append(f"Your user id is {uid}.")
    kind = "round trip" if round_trip else "one-way trip"
    part.reason = _pick(rng, _BOOK_OPEN, kind=kind, o=_city(origin), d=_city(destination), date=_date_words(date),
                        back=f", returning {_date_words(back)}" if back else "")  # fmt: skip
    step: dict[str, Any] = {
        "intent": "book",
        "origin": [origin],
        "destination": [destination],
        "flight_type": "round_trip" if round_trip else "one_way",
        "dates": {"outbound": date, **({"return": back} if back else {})},
        "cabin": cabin,
    }
    part.instructions.append(f"You want to fly {_cabin_words(cabin)}.")
    leg: dict[str, Any] = {}
    if rng.random() < 0.3:
        leg["nonstop"] = True
        part.instructions.append("You only want nonstop flights; among them, the cheapest.")
    else:
        part.instructions.append("Direct or one stop is fine; you want the cheapest option.")
    if rng.random() < 0.25:
        hour = rng.choice((8, 10, 12))
        leg["depart_after"] = f"{hour:02d}:00"
        part.instructions.append(f"You do not want to depart before {hour}am." if hour < 12 else
                                 "You do not want to depart before noon.")  # fmt: skip
    step["flights"] = {"outbound": dict(leg), "return": dict(leg)} if leg else {}
    passengers: list[Any] = ["self"]
    n_extra = 5 if variant == "refused" and rng.random() < 0.5 else rng.choice((0, 0, 1, 2))
    saved = list(user["saved_passengers"])
    rng.shuffle(saved)
    lines = []
    for k in range(n_extra):
        if saved and k == 0 and n_extra < 5:
            p = saved.pop()
            passengers.append({"saved": f"{p['first_name']} {p['last_name']}"})
            lines.append(f"{p['first_name']} {p['last_name']} (saved in your profile)")
        else:
            p = _new_person(rng)
            passengers.append(p)
            lines.append(f"{p['first_name']} {p['last_name']}, born {p['dob']}")
    if lines:
        part.instructions.append("You travel with " + "; ".join(lines) + ".")
        part.instructions.append("Your own date of birth is in your profile.")
    else:
        part.instructions.append("You travel alone; your date of birth is in your profile.")
    step["passengers"] = passengers
    bags = rng.choice((0, 0, 1, 2, 3))
    step["bags"] = bags
    part.instructions.append(f"You have {bags} checked bag{'s' if bags != 1 else ''} in total." if bags else
                             "You have no checked bags.")  # fmt: skip
    insurance = rng.choice(("yes", "no", "no"))
    step["insurance"] = insurance
    part.instructions.append("You want travel insurance." if insurance == "yes" else "You do not want insurance.")
    certs = world.methods(uid, "certificate")
    gifts = world.methods(uid, "gift_card")
    cards = world.methods(uid, "credit_card")
    refuse_certs = variant == "refused" and n_extra < 5
    if refuse_certs:
        if len(certs) < 2:
            raise _Skip("needs two certificates")
        step["payment"] = {"use": [{"kind": "certificate", "pick": "all"}], "only": True}
        part.instructions.append("You want to pay with your travel certificates only, all of them together; you do "
                                 "not accept any other payment method.")  # fmt: skip
    else:
        if not cards:
            raise _Skip("no credit card")
        pid, card = _choice(rng, cards)
        use: list[dict] = []
        words = []
        mode = rng.choice(("card", "certificate", "gift", "card"))
        if mode == "certificate" and certs:
            use.append({"kind": "certificate", "pick": "largest"})
            words.append("your largest travel certificate")
        elif mode == "gift" and gifts:
            use.append({"kind": "gift_card", "order": "smallest_first"})
            words.append("your gift card balance" if len(gifts) == 1 else "your gift cards, smallest balance first")
        use.append({"kind": "credit_card", "last_four": card["last_four"]})
        words.append(f"your {_card_words(card)}")
        step["payment"] = {"use": use}
        part.instructions.append("For payment, use " + ", then ".join(words) + ".")
    if variant == "refused" and n_extra == 5:
        part.instructions.append("If the agent says it cannot book six people on one reservation, accept it.")
    elif refuse_certs:
        part.instructions.append("If the agent says only one certificate can be used, you decide not to book.")
    part.steps = [step]
    return part


# compensation -------------------------------------------------------------------------------------------------


_CANCELLED_OPEN = (
    "The airline cancelled a flight of your {trip}; you are upset and want compensation.",
    "You are calling because one of your flights ({trip}) was cancelled by the airline, and you expect something "
    "for the trouble.",
    "Your flight on {date} was cancelled; you want to know what the airline will do for you.",
)
_DELAYED_OPEN = (
    "Your flight today is delayed and you are fed up: you want to cancel your {trip} and be compensated.",
    "Because of the delay of today's flight you no longer want to travel: cancel your {trip}, and you want "
    "compensation for the delay.",
)
_DELAYED_STAY_OPEN = (
    "Your flight today is delayed; you want compensation for the delay on your {trip}.",
    "You are frustrated that today's flight of your {trip} is delayed and want to be compensated.",
)


def _compensation(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:
    mine = _mine(world, uid)
    kind = rng.choice(("cancelled", "cancelled", "delayed"))
    eligible = lambda r: (world.membership(r.user_id) != "regular" or r.insurance == "yes"  # noqa: E731
                          or r.cabin == "business")  # fmt: skip
    if kind == "cancelled":
        test = lambda r: r.airline_cancelled  # noqa: E731
        pool = [r for r in world.pool("comp_cancelled", test) if mine(r)]
        rid = _choice(rng, [r for r in pool if eligible(world.res[r]) == (variant == "allowed")])
    else:
        test = lambda r: r.delayed and not r.started  # noqa: E731
        pool = [r for r in world.pool("comp_delayed", test) if mine(r) and eligible(world.res[r])]
        if variant == "allowed":  # the cancellation must itself be allowed
            pool = [r for r in pool if world.res[r].cabin == "business" or world.res[r].recent
                    or world.res[r].insurance == "yes"]  # fmt: skip
        rid = _choice(rng, pool)
    res = world.reservation(rid)
    part = _Part("compensation", variant, res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    trip = _trip_words(res)
    steps: list[dict] = []
    if kind == "cancelled":
        bad = next(s for s in res["flights"]
                   if world.db["flights"][s["flight_number"]]["dates"][s["date"]]["status"] == "cancelled")  # fmt: skip
        part.reason = _pick(rng, _CANCELLED_OPEN, trip=trip, date=_date_words(bad["date"]))
        part.instructions.append("You do not want to change or cancel anything; you want compensation.")
        steps.append({"intent": "compensation", "complaint": "cancelled", "reservation": sel})
    elif variant == "allowed":
        part.reason = _pick(rng, _DELAYED_OPEN, trip=trip)
        reason = "change_of_plan"
        if world.res[rid].cabin != "business" and not world.res[rid].recent:
            reason = "health"
            part.instructions.append("The stress of the delay made you ill; you cannot travel now.")
        steps.append({"intent": "cancel", "reservation": sel, "reason": reason})
        steps.append({"intent": "compensation", "complaint": "delayed", "reservation": sel})
    else:
        part.reason = _pick(rng, _DELAYED_STAY_OPEN, trip=trip)
        part.instructions.append("You do NOT want to change or cancel the reservation; it must stay as it is.")
        steps.append({"intent": "compensation", "complaint": "delayed", "reservation": sel})
    part.instructions.append("If the agent says no compensation is possible, accept it.")
    part.steps = steps
    return part


# transfer -----------------------------------------------------------------------------------------------------


def _transfer(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:  # noqa: ARG001 - a part builder's signature (BUILDERS)
    mine = _mine(world, uid)
    rid = _choice(rng, [r for r in world.pool("transfer_started", lambda r: r.started) if mine(r)])
    res = world.reservation(rid)
    part = _Part("transfer", "refused", res["user_id"], [], "")
    sel = _describe(rng, world, rid, part)
    part.reason = rng.choice((
        f"You are in the middle of your {_trip_words(res)} and want to cancel the rest of it.",
        f"You already flew part of your {_trip_words(res)}; you want to cancel the remaining flights.",
        f"Something came up during your {_trip_words(res)}: you will not fly the remaining flights and want them "
        "cancelled.",
        f"You want to cancel what is left of your {_trip_words(res)}; the first flight is already behind you.",
    ))  # fmt: skip
    part.instructions.append("If the agent cannot do it, you want to be transferred to a human agent.")
    part.steps = [{"intent": "cancel", "reservation": sel, "reason": "change_of_plan", "if_refused": [
        {"intent": "transfer", "summary": f"The customer wants to cancel reservation {rid}, part of which has "
         "already been flown; cancellation needs a human agent."}]}]  # fmt: skip
    return part


# information --------------------------------------------------------------------------------------------------


_TOTALS = {
    "gift_card_balance_total": (
        "You want to know the total balance of all your gift cards together.",
        "How much money is left on your gift cards, all of them added up? That is what you want to find out.",
        "You are planning a trip and want to know the combined balance of your gift cards.",
    ),
    "certificate_balance_total": (
        "You want to know how much your travel certificates are worth in total.",
        "You have several travel certificates and want to know their combined value.",
        "Before booking anything, you want the total amount of your travel certificates.",
    ),
    "upcoming_total_cost": (
        "You want to know how much you paid in total for all your upcoming trips.",
        "For your budget, you want the total amount you paid for the trips you have not flown yet.",
        "You are reviewing your expenses: what did all your upcoming reservations cost together?",
    ),
}


def _info(rng: random.Random, world: _World, variant: str, uid: Optional[str] = None) -> _Part:  # noqa: ARG001 - a part builder's signature (BUILDERS)
    question = rng.choice(("bag_allowance", "bag_allowance", "gift_card_balance_total", "certificate_balance_total",
                           "upcoming_total_cost"))  # fmt: skip
    mine = _mine(world, uid)
    if question == "bag_allowance":
        rid = _choice(rng, [r for r in world.pool("info_upcoming", lambda r: r.upcoming) if mine(r)])
        res = world.reservation(rid)
        part = _Part("info", "allowed", res["user_id"], [], "")
        sel = _describe(rng, world, rid, part)
        part.reason = rng.choice((
            f"You want to know how many checked bags your {_trip_words(res)} includes for free, in total.",
            f"Before packing for your {_trip_words(res)}, you want the total number of free checked bags.",
        ))  # fmt: skip
        if rng.random() < 0.5:
            wrong = rng.choice([m for m in FREE_BAGS if m != world.membership(res["user_id"])])
            part.instructions.append(f"You think you are a {wrong} member.")
        part.instructions.append("You want the answer as a number.")
        part.steps = [{"intent": "info", "question": question, "reservation": sel}]
        return part
    if uid is None:
        source = {"gift_card_balance_total": "gift_card", "certificate_balance_total": "certificate"}.get(question)
        users = [u for u in world.users if source is None or len(world.methods(u, source)) >= 2]
        if question == "upcoming_total_cost":
            upcoming = Counter(r.user_id for r in world.res.values() if r.upcoming)
            users = [u for u in users if upcoming[u] >= 1 and _all_upcoming_clean(world, u)]
        uid = _choice(rng, users)
    part = _Part("info", "allowed", uid, [], "")
    part.known.append(f"Your user id is {uid}.")
    part.reason = rng.choice(_TOTALS[question])
    part.instructions.append("If the agent gives separate amounts, ask for the total as one number.")
    part.steps = [{"intent": "info", "question": question}]
    return part


def _all_upcoming_clean(world: _World, uid: str) -> bool:
    """Every reservation of the user is known to the world (none touches an excluded entity)."""
    return all(r in world.res or world.db["reservations"][r].get("status") == "cancelled"
               for r in world.user(uid)["reservations"])  # fmt: skip


BUILDERS: dict[str, Callable[..., _Part]] = {
    "cancel": _cancel,
    "change_flight": _change_flight,
    "change_cabin": _change_cabin,
    "bags": _bags,
    "passengers": _passengers,
    "book": _book,
    "compensation": _compensation,
    "transfer": _transfer,
    "info": _info,
}


# ----------------------------------------------------------------------------------------------- a draft, assembled


_TOKEN = re.compile(r"#?\w+")


def _named_entities(world: _World, value: Any) -> dict[str, set[str]]:
    """The DB keys a JSON value names (whole strings or word tokens), by table."""
    db = world.db
    found: dict[str, set[str]] = {}
    for s in json_strings(value):
        for token in {s, *_TOKEN.findall(s)}:
            for table in TABLES:
                if token in db[table]:
                    found.setdefault(table, set()).add(token)
    return found


def _nl(result: dict) -> list[str]:
    """Plain-language statements of the outcome (informational: the reward basis is DB and COMMUNICATE)."""
    out = []
    for w in result["actions"]:
        a = w["arguments"]
        if w["name"] == "cancel_reservation":
            out.append(f"Agent cancels reservation {a['reservation_id']}.")
        elif w["name"] == "book_reservation":
            fl = ", ".join(f"{f['flight_number']} on {f['date']}" for f in a["flights"])
            out.append(f"Agent books {a['flight_type']} {a['cabin']} {a['origin']}-{a['destination']} ({fl}).")
        elif w["name"] == "update_reservation_flights":
            out.append(f"Agent updates reservation {a['reservation_id']} to {a['cabin']} with the new itinerary.")
        elif w["name"] == "update_reservation_baggages":
            out.append(f"Agent sets reservation {a['reservation_id']} to {a['total_baggages']} checked bags "
                       f"({a['nonfree_baggages']} paid).")  # fmt: skip
        elif w["name"] == "update_reservation_passengers":
            out.append(f"Agent updates the passengers of reservation {a['reservation_id']}.")
        elif w["name"] == "send_certificate":
            out.append(f"Agent issues a ${a['amount']} certificate.")
    for o in result["outcomes"]:
        if o["outcome"] == "refused":
            out.append(f"Agent refuses: {o['reason']}.")
    for c in result["communicate"]:
        out.append(f"Agent tells the customer {c}.")
    return out


def _assemble(world: _World, parts: list[_Part], index: int, seed: int, id_prefix: str, rng: random.Random) -> dict:
    uid = parts[0].user_id
    user = world.user(uid)
    intent = "+".join(p.intent for p in parts)
    variant = "refused" if any(p.variant == "refused" for p in parts) else "allowed"
    payment = next((p.payment for p in parts if p.payment is not None), None)
    request = {"user_id": uid, "steps": [s for p in parts for s in p.steps]}
    if payment is not None:
        request["payment"] = payment
    try:
        result = resolve(request, world.base)
    except RequestError as exc:
        raise _Skip(str(exc)) from exc
    writes = result["actions"]
    forbidden = [f for p in parts for f in p.forbidden] or result["forbidden"]
    for p in parts:
        if p.variant == "refused" and p.intent == "book" and not p.forbidden:
            forbidden = _forbidden_booking(world, p)
    failed = [o for o in result["outcomes"] if o["outcome"] != "done"]
    needs_write = bool(writes) and _changes_db(world, writes)
    if writes and not needs_write:
        raise _Skip("the writes change nothing")
    if variant == "allowed":
        if failed:
            raise _Skip(f"an allowed draft the engine does not fully allow: {result['reason']}")
        if not writes and not all(p.intent == "info" for p in parts):
            raise _Skip("an allowed draft without writes")
    else:
        if not any(o["outcome"] == "refused" for o in failed):
            raise _Skip(f"a refused draft the policy does not refuse: {result['reason']}")
        if not forbidden or not _changes_db(world, forbidden):
            raise _Skip("a refused draft needs a forbidden write that changes the DB")
        if all(p.variant == "refused" for p in parts) and writes:
            raise _Skip("a refused draft whose engine outcome writes")
        if any(p.variant == "allowed" and p.intent != "info" for p in parts) and not writes:
            raise _Skip("the allowed part of a two-intent draft did not write")
    if any(p.intent == "info" for p in parts) and not result["communicate"]:
        raise _Skip("an information request without an answer")
    gold = []
    for k, a in enumerate(result["gold"]):
        gold.append({"action_id": f"{index}_{k}", "requestor": "assistant", "name": a["name"],
                     "arguments": a["arguments"], "info": None})  # fmt: skip
    name = f"{user['name']['first_name']} {user['name']['last_name']}"
    known = [f"You are {name}.", f"Your user id is {uid}."]
    for p in parts:
        known += [k for k in p.known if k not in known and not k.startswith("Your user id")]
    unknown = [u for p in parts for u in p.unknown]
    reason = " ".join(p.reason for p in parts) if len(parts) == 1 else " Also: ".join(p.reason for p in parts)
    instructions = [i for p in parts for i in p.instructions]
    instructions.append(rng.choice((
        "Once everything is settled, end the conversation.",
        "When the agent has dealt with everything, thank them and end the call.",
        "Do not give information the agent does not ask for.",
    )))  # fmt: skip
    task = {
        "id": f"{id_prefix}{index:05d}",
        "description": {
            "purpose": f"Generated airline {intent} request ({variant}).",
            "relevant_policies": "\n".join(result["rules"]),
            "notes": f"generated by {GENERATOR} v{GENERATOR_VERSION} (seed {seed}, draft {index})",
        },
        "user_scenario": {
            "persona": rng.choice(PERSONAS),
            "instructions": {
                "domain": "airline",
                "reason_for_call": reason,
                "known_info": "\n".join(known),
                "unknown_info": "\n".join(unknown) if unknown else None,
                "task_instructions": "\n\n".join(instructions),
            },
        },
        "initial_state": None,
        "evaluation_criteria": {
            "actions": gold,
            "communicate_info": list(result["communicate"]),
            "nl_assertions": _nl(result),
            "reward_basis": ["DB", "COMMUNICATE"],
        },
    }
    named = _named_entities(world, {"task": task, "forbidden": forbidden})
    touched = {t: set(v) for t, v in named.items()}
    for w in writes + forbidden:
        rid = w["arguments"].get("reservation_id")
        if rid:
            touched.setdefault("reservations", set()).add(rid)
            touched.setdefault("flights", set()).update(s["flight_number"] for s in world.reservation(rid)["flights"])
    touched.setdefault("users", set()).add(uid)
    if any(v in world.exclude for vs in touched.values() for v in vs):
        raise _Skip("touches an excluded entity")
    return {
        "task": task,
        "intent": intent,
        "variant": variant,
        "forbidden_actions": forbidden if variant == "refused" else [],
        "needs_write": needs_write,
        "rules": list(result["rules"]),
        "entities": {t: sorted(touched.get(t, ())) for t in TABLES},
    }


def _forbidden_booking(world: _World, part: _Part) -> list[dict]:
    """A refused booking's forbidden write: the booking as the customer asks for it (six passengers on one
    reservation, or all their certificates together), on the flights a booking within the policy would take."""
    step = dict(part.steps[0])
    if len(step["passengers"]) > 5:
        five = resolve({"user_id": part.user_id, "steps": [dict(step, passengers=step["passengers"][:5])]}, world.base)
        if not five["actions"]:
            return []
        args = five["actions"][0]["arguments"]
        extra = step["passengers"][5]
        flights = world.db["flights"]
        per_pax = sum(flights[f["flight_number"]]["dates"][f["date"]]["prices"][args["cabin"]] for f in args["flights"])
        per_pax += 30 if args["insurance"] == "yes" else 0
        payments = [dict(p) for p in args["payment_methods"]]
        payments[-1]["amount"] += per_pax  # the credit card pays the sixth fare
        return [
            {
                "name": "book_reservation",
                "arguments": dict(args, passengers=args["passengers"] + [extra], payment_methods=payments),
            }
        ]
    probe = dict(step, payment={"use": [{"kind": "credit_card"}]})
    done = resolve({"user_id": part.user_id, "steps": [probe]}, world.base)["actions"]
    if not done:
        return []
    args = done[0]["arguments"]
    remaining = args["payment_methods"][0]["amount"]
    payments = []
    for pid, m in sorted(world.methods(part.user_id, "certificate"), key=lambda c: -c[1]["amount"]):
        if remaining <= 0:
            break
        amount = min(int(m["amount"]), remaining)
        payments.append({"payment_id": pid, "amount": amount})
        remaining -= amount
    if remaining > 0 or len(payments) < 2:
        return []
    return [{"name": "book_reservation", "arguments": dict(args, payment_methods=payments)}]


def _changes_db(world: _World, actions: list[dict]) -> bool:
    """Whether the writes run without a tool error and change the DB (a forbidden write must cost the reward):
    the records they touched, compared with the base."""
    state = world.base.new_state()
    tools = AirlineTools(state)
    try:
        for a in actions:
            getattr(tools, a["name"])(**a["arguments"])
    except (ValueError, KeyError, TypeError):
        return False
    for name in TABLES:
        table, base = state.get_field(name), world.db[name]
        if any(k not in base or not same_json(table[k], base[k]) for k in table.changed_keys()):
            return True
    return False


# ----------------------------------------------------------------------------------------------- the drafter


def _plan(intents: Sequence[str]) -> list[tuple[str, str]]:
    """The (intent, variant) cycle: each intent in turn, refusable ones alternating allowed and refused."""
    cycle = []
    for round_ in range(2):
        for intent in intents:
            parts = intent.split("+")
            refusable = any(p in REFUSABLE for p in parts)
            if intent == "transfer":
                cycle.append((intent, "refused"))
            elif refusable:
                cycle.append((intent, "allowed" if round_ == 0 else "refused"))
            else:
                cycle.append((intent, "allowed"))
    return cycle


def _draw(world: _World, intent: str, variant: str, rng: random.Random) -> list[_Part]:
    """The parts of one call: several intents are one customer's; in a refused variant the last part is the
    refused one and the others go through."""
    world.described = {}
    names = intent.split("+")
    parts: list[_Part] = []
    for k, name in enumerate(names):
        wanted = variant if k == len(names) - 1 and name in REFUSABLE else "allowed"
        parts.append(BUILDERS[name](rng, world, wanted, parts[0].user_id if parts else None))
    return parts


def draft_tasks(
    db: dict,
    *,
    n: int,
    seed: int,
    exclude: frozenset[str] = frozenset(),
    intents: Optional[Sequence[str]] = None,
    id_prefix: str = "gen_",
) -> Iterator[dict]:
    """Drafts of airline tasks (see the module docstring), deterministic for the arguments.

    Intents cycle in order (:data:`INTENTS` then :data:`COMBOS` when ``intents`` is None), refusable ones
    alternating allowed and refused variants. Yields ``n`` drafts, then keeps yielding (the machinery stops once it
    has ``n`` accepted), up to ``20 * n + 1000`` in all. A draw that does not fit (no matching record, an excluded
    entity on the chosen flights, an outcome that is not the variant's) is drawn again.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    chosen = tuple(intents) if intents is not None else INTENTS + COMBOS
    for intent in chosen:
        if not intent or any(p not in INTENTS for p in intent.split("+")):
            raise ValueError(f"unknown intent {intent!r}; intents are: {', '.join(INTENTS)} (two in one call: 'a+b')")
    world = _World(db, frozenset(exclude))
    cycle = _plan(chosen)
    seen: set[str] = set()
    index = 0
    for k in range(20 * n + 1000):
        intent, variant = cycle[k % len(cycle)]
        draft = None
        for attempt in range(40):
            rng = random.Random(f"airline:{seed}:{k}:{attempt}")
            try:
                parts = _draw(world, intent, variant, rng)
                draft = _assemble(world, parts, index, seed, id_prefix, rng)
            except _Skip:
                continue
            key = json.dumps(draft["task"]["user_scenario"], sort_keys=True) + json.dumps(
                draft["task"]["evaluation_criteria"]["actions"], sort_keys=True
            )
            if key in seen:
                draft = None
                continue
            seen.add(key)
            break
        if draft is None:
            continue
        index += 1
        yield draft


# ----------------------------------------------------------------------------------------------- the benchmark


def reproduce_benchmark(tasks: Sequence[dict], db: Any, requests: Optional[dict] = None) -> dict:
    """Resolve every annotated benchmark request (``benchmark_requests.json``) and compare with the task's gold:
    the write actions (same calls, any order, and the same DB after replaying both in order) and the
    ``communicate_info``. Returns the counts, the misses with the annotation's reason, and the per-task verdicts."""
    requests = requests if requests is not None else json.loads(REQUESTS_FILE.read_text(encoding="utf-8"))
    by_id = {str(t["id"]): t for t in tasks}
    base = db if isinstance(db, BaseData) else BaseData(db, TABLES)
    verdicts: dict[str, dict] = {}
    for entry in requests["tasks"]:
        tid = entry["task_id"]
        task = by_id.get(tid)
        if task is None:
            continue
        criteria = task.get("evaluation_criteria") or {}
        gold = [{"name": a["name"], "arguments": a["arguments"]} for a in criteria.get("actions") or []
                if a["name"] in WRITE_TOOLS]  # fmt: skip
        try:
            result = resolve(entry["request"], base)
            mine, said = result["actions"], result["communicate"]
        except (RequestError, ValueError, KeyError) as exc:
            verdicts[tid] = {"reproduced": False, "error": str(exc)}
            continue
        same_calls = sorted(map(_key, gold)) == sorted(map(_key, mine))
        same_db = same_calls and _replay_hash(base, gold) == _replay_hash(base, mine)
        same_said = sorted(criteria.get("communicate_info") or []) == sorted(said)
        verdicts[tid] = {"reproduced": same_calls and same_db and same_said, "writes": same_calls and same_db,
                         "communicate": same_said, "expected_miss": entry.get("miss")}  # fmt: skip
    misses = {tid: v.get("expected_miss") or v.get("error") or "unexplained" for tid, v in verdicts.items()
              if not v["reproduced"]}  # fmt: skip
    return {
        "tasks": len(verdicts),
        "reproduced": sum(v["reproduced"] for v in verdicts.values()),
        "misses": misses,
        "verdicts": verdicts,
    }


def _key(action: dict) -> str:
    return json.dumps([action["name"], action["arguments"]], sort_keys=True)


def _replay_hash(base: BaseData, actions: list[dict]) -> str:
    state = base.new_state()
    tools = AirlineTools(state)
    for a in actions:
        try:
            getattr(tools, a["name"])(**a["arguments"])
        except (ValueError, KeyError, TypeError):
            pass  # the evaluator logs and ignores a failing gold call; so does the comparison
    return state.hash()


@lru_cache(maxsize=4)
def _coverage(data_dir: Optional[str]) -> str:
    from tau2_gym.core.domain import load_domain

    dom = load_domain("airline", data_dir)
    tasks = json.loads(dom.task_file().read_text(encoding="utf-8"))
    result = reproduce_benchmark(tasks, dom.base_db)
    return json.dumps({k: result[k] for k in ("tasks", "reproduced", "misses")})


def rule_engine_coverage(data_dir: Optional[str] = None) -> dict:
    """How much of the benchmark the rule engine reproduces: ``{"tasks", "reproduced", "misses": {id: reason}}``
    (recorded in a generated set's ``generated.json``)."""
    return json.loads(_coverage(data_dir))
