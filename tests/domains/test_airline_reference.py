"""Differential tests of the airline domain against upstream tau2-bench run as a subprocess.

Every gold action of every airline task (both task sets) and a set of perturbed calls per tool are run in
ours and in upstream; each tool message (content, error flag) and the agent DB hash after each call must
be equal. Needs TAU2_REFERENCE_PYTHON (and TAU2_UPSTREAM_DATA_DIR for the upstream-HEAD task set).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from refutil import ok, run_reference

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.scoring.rebuild import initial_environment

pytestmark = pytest.mark.reference

# --------------------------------------------------------------------------------- perturbations
# Users/reservations/flights below are picked from the airline DB (identical in 26.3 and upstream HEAD):
# mei_hernandez_8984 holds gift_card_5309492 (98.0), certificate_7502997 and certificate_3321326
# (250.0 each), credit_card_2140654; reservation R9QDGB (3 pax, economy, card-paid), 79G8A9 (2 pax,
# gift-card-paid). HAT034 LAX->SFO 2024-05-20 economy 106 (4 seats); HAT026 economy 2 seats on 05-20;
# HAT088 economy 0 seats on 05-20; HAT002 arrives +1.

MEI = "mei_hernandez_8984"
PAX1 = [{"first_name": "Mei", "last_name": "Hernandez", "dob": "1991-01-01"}]
SEG = [{"flight_number": "HAT034", "date": "2024-05-20"}]
R9QDGB_FLIGHTS = [
    {"flight_number": f, "date": d}
    for f, d in (("HAT034", "2024-05-28"), ("HAT026", "2024-05-28"), ("HAT247", "2024-05-30"), ("HAT232", "2024-05-30"))
]
PAY106 = [{"payment_id": "certificate_7502997", "amount": 100}, {"payment_id": "credit_card_2140654", "amount": 6}]


def book(**over: Any) -> tuple[str, dict]:
    args = dict(
        user_id=MEI,
        origin="LAX",
        destination="SFO",
        flight_type="one_way",
        cabin="economy",
        flights=SEG,
        passengers=PAX1,
        payment_methods=PAY106,
        total_baggages=0,
        nonfree_baggages=0,
        insurance="no",
    )
    for k, v in over.items():
        if v is _DROP:
            args.pop(k)
        else:
            args[k] = v
    return ("book_reservation", args)


_DROP = object()


def c(name: str, **args: Any) -> tuple[str, dict]:
    return (name, args)


SEQUENCES: dict[str, list[list[tuple[str, dict]]]] = {
    "book_reservation": [
        [
            book(),
            book(),
            book(
                payment_methods=[
                    {"payment_id": "gift_card_5309492", "amount": 98},
                    {"payment_id": "credit_card_2140654", "amount": 8},
                ]
            ),
            book(payment_methods=[{"payment_id": "credit_card_2140654", "amount": 106}]),
            book(payment_methods=[{"payment_id": "credit_card_2140654", "amount": 106}]),
            c("get_user_details", user_id=MEI),
            c("get_flight_status", flight_number="HAT034", date="2024-05-20"),
            # scans over a table with private (booked) records
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-20"),
            c("search_onestop_flight", origin="LAX", destination="BOS", date="2024-05-20"),
        ],
        [
            book(user_id="mei_hernandez_0000"),
            book(user_id=["x"]),
            book(user_id=5),
            book(flights=[{"flight_number": "HAT034", "date": "2024-05-10"}]),
            book(flights=[{"flight_number": "HAT034", "date": "2024-05-31"}]),
            book(flights=[{"flight_number": "HAT999", "date": "2024-05-20"}]),
            book(flights=[{"flight_number": "HAT034"}]),
            book(flights="HAT034"),
            book(flights=[SEG[0], "HAT034"]),
            book(flights=None),
            book(flights={"flight_number": "HAT034"}),
            book(cabin="first"),
            book(cabin="Economy"),
            book(flight_type="roundtrip"),
            book(insurance=True),
            book(origin=5),
            book(total_baggages=1.5),
            book(nonfree_baggages=1.5),
            book(nonfree_baggages="1"),
            book(nonfree_baggages=1.0),
            book(passengers=[{"first_name": "Mei", "last_name": "Hernandez"}]),
            book(passengers="Mei"),
            book(passengers=[PAX1[0], "x"]),
            book(passengers=None),
            book(
                payment_methods=[
                    {"payment_id": "certificate_7502997", "amount": 100.5},
                    {"payment_id": "credit_card_2140654", "amount": 6},
                ]
            ),
            book(payment_methods=[{"payment_id": "gift_card_5309492", "amount": 106}]),
            book(payment_methods=[{"payment_id": "gift_card_0000000", "amount": 106}]),
            book(payment_methods=[{"payment_id": "credit_card_2140654", "amount": 105}]),
            book(payment_methods=["credit_card_2140654"]),
            book(insurance=_DROP),
            book(foo=1),
            book(
                passengers=PAX1 * 3,
                flights=[{"flight_number": "HAT026", "date": "2024-05-20"}],
                origin="SFO",
                destination="BOS",
            ),
            book(flights=[{"flight_number": "HAT088", "date": "2024-05-20"}]),
            book(flights=[{"flight_number": "HAT034", "date": "2024-05-21"}]),
            book(flights=[{"flight_number": "HAT034", "date": "2024-05-19"}]),
        ],
        [
            book(
                payment_methods=[
                    {"payment_id": "certificate_7502997", "amount": 53},
                    {"payment_id": "certificate_7502997", "amount": 53},
                ]
            ),
            c("get_user_details", user_id=MEI),
            book(
                payment_methods=[
                    {"payment_id": "gift_card_5309492", "amount": 53},
                    {"payment_id": "gift_card_5309492", "amount": 53},
                ]
            ),
            book(flights=[], payment_methods=[], insurance="yes", passengers=[]),
            book(
                payment_methods=[
                    {"payment_id": "certificate_3321326", "amount": "100"},
                    {"payment_id": "credit_card_2140654", "amount": 6.0},
                ],
                total_baggages="2",
                passengers=[dict(PAX1[0], extra="ignored")],
            ),
            book(),
        ],
        [
            book(flights=SEG * 2, payment_methods=[{"payment_id": "credit_card_2140654", "amount": 212}]),
            book(
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}],
                nonfree_baggages=1.0,
                insurance="yes",
                payment_methods=[{"payment_id": "credit_card_2140654", "amount": 186}],
            ),
            book(nonfree_baggages=True, payment_methods=[{"payment_id": "credit_card_2140654", "amount": 156}]),
            c("get_reservation_details", reservation_id="HATHAU"),
        ],
    ],
    "calculate": [
        [
            c("calculate", expression=e)
            for e in [
                "2+2",
                "10/3",
                "2.675*1",
                "2**10",
                "7//2",
                "1/0",
                "(1+2",
                "",
                "2+",
                "abc",
                "2 + x",
                "()",
                "--1",
                ")",
                "08",
                "10**400",
                "(3 * 106 + 30) - 250",
            ]
        ]
        + [
            c("calculate", expression=5),
            c("calculate", expression=None),
            c("calculate"),
            c("calculate", expression="1", extra=2),
        ],
    ],
    "cancel_reservation": [
        [
            c("cancel_reservation", reservation_id="R9QDGB"),
            c("cancel_reservation", reservation_id="R9QDGB"),
            c("cancel_reservation", reservation_id="r9qdgb"),
            c("cancel_reservation", reservation_id=None),
            c("cancel_reservation", reservation_id=["R9QDGB"]),
            c("cancel_reservation"),
            c("cancel_reservation", reservation_id="79G8A9", reason="change of plan"),
            c("get_user_details", user_id=MEI),
            c("get_reservation_details", reservation_id="R9QDGB"),
        ],
    ],
    "get_reservation_details": [
        [
            c("get_reservation_details", reservation_id="07S7FC"),
            c("get_reservation_details", reservation_id="XXXXXX"),
            c("get_reservation_details", reservation_id=7),
            c("get_reservation_details", reservation_id={"a": 1}),
            c("get_reservation_details"),
        ],
    ],
    "get_user_details": [
        [
            c("get_user_details", user_id=MEI),
            c("get_user_details", user_id="sara_doe_496"),
            c("get_user_details", user_id=MEI.upper()),
            c("get_user_details", user_id=MEI, foo="x"),
            c("get_user_details"),
            c("get_user_details", user_id=None),
        ],
    ],
    "list_all_airports": [[c("list_all_airports"), c("list_all_airports", city="x")]],
    "search_direct_flight": [
        [
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-20"),
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-21"),
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-19"),
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-10"),
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-31"),
            c("search_direct_flight", origin="lax", destination="SFO", date="2024-05-20"),
            c("search_direct_flight", origin=None, destination="SFO", date="2024-05-20"),
            c("search_direct_flight", origin=None, destination=None, date="2024-05-16"),
            c("search_direct_flight", origin="XXX", destination="SFO", date=["2024-05-20"]),
            c("search_direct_flight", origin="LAX", destination="SFO", date=["2024-05-20"]),
            c("search_direct_flight", origin="LAX", destination="SFO", date=20),
            c("search_direct_flight", origin="LAX", destination="SFO"),
            c("search_direct_flight", origin="LAX", destination="SFO", date="2024-05-20", cabin="economy"),
        ],
    ],
    "search_onestop_flight": [
        [
            c("search_onestop_flight", origin="JFK", destination="SFO", date="2024-05-20"),
            c("search_onestop_flight", origin="JFK", destination="SFO", date="2024-05-21"),
            c("search_onestop_flight", origin="LGA", destination="SEA", date="2024-05-20"),
            c("search_onestop_flight", origin="LGA", destination="SEA", date="2024-05-08"),
            c("search_onestop_flight", origin="LGA", destination="SEA", date="2024-05-09"),
            c("search_onestop_flight", origin="SEA", destination="LAX", date="2024-05-30"),
            c("search_onestop_flight", origin="JFK", destination="JFK", date="2024-05-18"),
            c("search_onestop_flight", origin="JFK", destination="SFO", date="2024-05-14"),
            c("search_onestop_flight", origin="JFK", destination="SFO", date=20),
            c("search_onestop_flight", origin="JFK", destination=None, date="2024-05-25"),
            c("search_onestop_flight", origin="JFK", date="2024-05-25"),
        ],
    ],
    "send_certificate": [
        [
            c("send_certificate", user_id=MEI, amount=100),
            c("send_certificate", user_id=MEI, amount=100.0),
            c("send_certificate", user_id=MEI, amount=50.5),
            c("send_certificate", user_id=MEI, amount=100),
            c("send_certificate", user_id="nobody_1", amount=100),
            c("get_user_details", user_id=MEI),
        ],
        [
            c("send_certificate", user_id=MEI, amount="150"),
            c("send_certificate", user_id=MEI, amount="abc"),
            c("send_certificate", user_id=MEI, amount=None),
            c("send_certificate", user_id=MEI, amount=True),
            c("send_certificate", user_id=MEI),
            c("send_certificate", user_id=MEI, amount=-5),
            c("get_user_details", user_id=MEI),
        ],
    ],
    "transfer_to_human_agents": [
        [
            c("transfer_to_human_agents", summary="wants a refund"),
            c("transfer_to_human_agents"),
            c("transfer_to_human_agents", summary=3),
            c("transfer_to_human_agents", summary="x", reason="y"),
        ],
    ],
    "update_reservation_baggages": [
        [
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=2,
                nonfree_baggages=1,
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=3,
                nonfree_baggages=2,
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=5,
                nonfree_baggages=4,
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=5,
                nonfree_baggages=4,
                payment_id="certificate_7502997",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=5,
                nonfree_baggages=4,
                payment_id="credit_card_0000000",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=0,
                nonfree_baggages=0,
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=0,
                nonfree_baggages=0,
                payment_id="certificate_7502997",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="XXXXXX",
                total_baggages=1,
                nonfree_baggages=1,
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=1,
                nonfree_baggages="1",
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=2.0,
                nonfree_baggages=1.0,
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=2,
                nonfree_baggages=2.3,
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages="many",
                nonfree_baggages=2.5,
                payment_id="credit_card_2140654",
            ),
            c("update_reservation_baggages", reservation_id="R9QDGB", total_baggages=1, nonfree_baggages=1),
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=1,
                nonfree_baggages=1,
                payment_id=["credit_card_2140654"],
            ),
            c("get_reservation_details", reservation_id="R9QDGB"),
            c("get_user_details", user_id=MEI),
            c("cancel_reservation", reservation_id="R9QDGB"),
        ],
        [
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=1,
                nonfree_baggages=1.01,
                payment_id="gift_card_5309492",
            ),  # gift card charged 50.5, then the Payment record fails
            c(
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=1,
                nonfree_baggages=True,
                payment_id="gift_card_5309492",
            ),
            c("get_user_details", user_id=MEI),
            c("get_reservation_details", reservation_id="R9QDGB"),
        ],
    ],
    "update_reservation_flights": [
        [
            c(
                "update_reservation_flights",
                reservation_id="R9QDGB",
                cabin="business",
                flights=R9QDGB_FLIGHTS,
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="R9QDGB",
                cabin="economy",
                flights=R9QDGB_FLIGHTS,
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="R9QDGB",
                cabin="economy",
                flights=R9QDGB_FLIGHTS[:3] + [{"flight_number": "HAT232", "date": "2024-05-29"}],
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="R9QDGB",
                cabin="economy",
                flights=R9QDGB_FLIGHTS[:2]
                + [
                    {"flight_number": "HAT247", "date": "2024-05-29"},
                    {"flight_number": "HAT232", "date": "2024-05-31"},
                ],
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="R9QDGB",
                cabin="economy",
                flights=list(reversed(R9QDGB_FLIGHTS)),
                payment_id="credit_card_2140654",
            ),
            c("get_user_details", user_id=MEI),
        ],
        [
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[
                    {"flight_number": "HAT292", "date": "2024-05-16"},
                    {"flight_number": "HAT088", "date": "2024-05-16"},
                    {"flight_number": "HAT169", "date": "2024-05-17"},
                    {"flight_number": "HAT126", "date": "2024-05-17"},
                ],
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="business",
                flights=[
                    {"flight_number": "HAT292", "date": "2024-05-16"},
                    {"flight_number": "HAT088", "date": "2024-05-16"},
                    {"flight_number": "HAT169", "date": "2024-05-17"},
                    {"flight_number": "HAT126", "date": "2024-05-17"},
                ],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[
                    {"flight_number": "HAT292", "date": "2024-05-16"},
                    {"flight_number": "HAT088", "date": "2024-05-16"},
                    {"flight_number": "HAT169", "date": "2024-05-17"},
                    {"flight_number": "HAT126", "date": "2024-05-17"},
                ],
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="basic_economy",
                flights=[
                    {"flight_number": "HAT292", "date": "2024-05-17"},
                    {"flight_number": "HAT088", "date": "2024-05-17"},
                ],
                payment_id="certificate_7502997",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-10"}],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="first",
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT999", "date": "2024-05-20"}],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-32"}],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT088", "date": "2024-05-20"}],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}],
                payment_id="credit_card_0000000",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="business",
                flights=[{"flight_number": "HAT034", "date": "2024-05-21"}],
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034"}],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}, "HAT034"],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights="HAT034",
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="XXXXXX",
                cabin="economy",
                flights=[],
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}] * 2,
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}] * 2,
                payment_id="credit_card_2140654",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[],
                payment_id="gift_card_5309492",
            ),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin=["economy"],
                flights=[],
                payment_id="credit_card_2140654",
            ),
            c("get_reservation_details", reservation_id="79G8A9"),
            c("get_user_details", user_id=MEI),
            c("cancel_reservation", reservation_id="79G8A9"),
        ],
    ],
    "update_reservation_passengers": [
        [
            c(
                "update_reservation_passengers",
                reservation_id="79G8A9",
                passengers=[
                    {"first_name": "A", "last_name": "B", "dob": "1990-01-01"},
                    {"first_name": "C", "last_name": "D", "dob": "1990-01-02", "x": 1},
                ],
            ),
            c("update_reservation_passengers", reservation_id="79G8A9", passengers=PAX1),
            c(
                "update_reservation_passengers",
                reservation_id="79G8A9",
                passengers=[{"first_name": "A", "last_name": "B"}, {"first_name": "C", "last_name": "D", "dob": 5}],
            ),
            c("update_reservation_passengers", reservation_id="XXXXXX", passengers=PAX1),
            c("update_reservation_passengers", reservation_id="79G8A9", passengers=None),
            c("update_reservation_passengers", reservation_id="79G8A9", passengers=[]),
            c("update_reservation_passengers", reservation_id="79G8A9"),
            c("update_reservation_passengers", reservation_id="79G8A9", passengers=[PAX1[0], "x"]),
            c("get_reservation_details", reservation_id="79G8A9"),
            c("update_reservation_passengers", reservation_id="79G8A9", passengers="ab"),
            c("get_reservation_details", reservation_id="79G8A9"),
            c(
                "update_reservation_flights",
                reservation_id="79G8A9",
                cabin="economy",
                flights=[],
                payment_id="credit_card_2140654",
            ),
            c("cancel_reservation", reservation_id="79G8A9"),
        ],
    ],
    "get_flight_status": [
        [
            c("get_flight_status", flight_number="HAT034", date="2024-05-20"),
            c("get_flight_status", flight_number="HAT034", date="2024-05-10"),
            c("get_flight_status", flight_number="HAT002", date="2024-05-15"),
            c("get_flight_status", flight_number="HAT292", date="2024-05-10"),
            c("get_flight_status", flight_number="HAT999", date="2024-05-20"),
            c("get_flight_status", flight_number="HAT034", date="2024-06-01"),
            c("get_flight_status", flight_number="HAT034", date=20),
            c("get_flight_status", flight_number="HAT034"),
            c("get_flight_status", flight_number="HAT034", date=["2024-05-20"]),
            c("no_such_tool", x=1),
        ],
    ],
}


# --------------------------------------------------------------------------------- comparison


def _ours(domain, task, calls: list[tuple[str, dict]]) -> list[dict]:
    env = initial_environment(domain, task) if task is not None else domain.make_environment()
    out = []
    for i, (name, args) in enumerate(calls):
        msg = env.get_response(ToolCall(name=name, arguments=json.loads(json.dumps(args)), id=f"c{i}"))
        out.append({"content": msg.content, "error": msg.error, "agent_hash": env.get_db_hash()})
    return out


def _compare(label: str, ours: list[dict], theirs: list[dict], calls, mismatches: list[str]) -> None:
    assert len(ours) == len(theirs), label
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if "exception" in b:
            mismatches.append(f"{label}#{i} {calls[i][0]}: upstream raised {b['exception']}")
            continue
        for key in ("content", "error", "agent_hash"):
            if a[key] != b[key]:
                mismatches.append(f"{label}#{i} {calls[i][0]} {key}:\n  ours:     {a[key]!r}\n  upstream: {b[key]!r}")


def _raw_tasks(domain) -> list[dict]:
    path: Path = domain.task_file()
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _gold_calls(task: dict) -> list[tuple[str, dict]]:
    actions = (task.get("evaluation_criteria") or {}).get("actions") or []
    return [(a["name"], a.get("arguments") or {}) for a in actions]


def _gold_job(task: dict) -> dict:
    calls = [{"name": n, "arguments": a, "id": f"c{i}"} for i, (n, a) in enumerate(_gold_calls(task))]
    return {"kind": "calls", "domain": "airline", "task": task, "calls": calls}


def _sequence_jobs() -> list[tuple[str, int, list, dict]]:
    return [
        (
            tool,
            i,
            seq,
            {
                "kind": "calls",
                "domain": "airline",
                "calls": [{"name": n, "arguments": a, "id": f"c{j}"} for j, (n, a) in enumerate(seq)],
            },
        )
        for tool, group in SEQUENCES.items()
        for i, seq in enumerate(group)
    ]


def _key(job: dict) -> str:
    """Identity of a job's outcome: the driver uses only a task's initial state, so two tasks with the same
    initial state and gold calls share one upstream run."""
    if "task" in job:
        job = dict(job, task=job["task"].get("initial_state"))
    return json.dumps(job, sort_keys=True)


@pytest.fixture(scope="module")
def upstream_results() -> dict[str, Any]:
    """All reference jobs of this module in ONE upstream subprocess (its import alone costs ~10 s);
    identical jobs (most gold sequences are the same in both task sets) run once."""
    jobs = [{"kind": "schemas", "domain": "airline"}]
    jobs += [_gold_job(t) for t in _raw_tasks(load_domain("airline"))]
    upstream_dir = os.environ.get("TAU2_UPSTREAM_DATA_DIR")
    if upstream_dir:
        jobs += [_gold_job(t) for t in _raw_tasks(load_domain("airline", upstream_dir))]
    jobs += [job for *_, job in _sequence_jobs()]
    unique: dict[str, dict] = {}
    for j in jobs:
        unique.setdefault(_key(j), j)
    results = run_reference("driver_env", list(unique.values()))
    print(f"\n[airline differential] {len(jobs)} jobs, {len(unique)} distinct run upstream")
    return {k: ok(r) for k, r in zip(unique, results)}


def _diff_task_set(domain, upstream_results) -> tuple[int, int, list[str]]:
    mismatches: list[str] = []
    calls = 0
    tasks = {t.id: t for t in domain.tasks(split=None)}
    raw = _raw_tasks(domain)
    for t in raw:
        theirs = upstream_results[_key(_gold_job(t))]
        gold = _gold_calls(t)
        ours = _ours(domain, tasks[str(t["id"])], gold)
        _compare(f"task {t['id']}", ours, theirs["calls"], gold, mismatches)
        calls += len(gold)
    return len(raw), calls, mismatches


def _report(what: str, tasks: int, calls: int, mismatches: list[str]) -> None:
    print(
        f"\n[airline differential] {what}: {tasks} tasks/sequences, {calls} calls compared, "
        f"{len(mismatches)} mismatches"
    )


def test_gold_actions_equal_upstream_on_26_3_tasks(upstream_results):
    domain = load_domain("airline")
    tasks, calls, mismatches = _diff_task_set(domain, upstream_results)
    _report("26.3 gold actions", tasks, calls, mismatches)
    assert tasks == 50 and calls > 140
    assert not mismatches, "\n".join(mismatches)


def test_gold_actions_equal_upstream_on_upstream_tasks(upstream_data_dir, upstream_results):
    domain = load_domain("airline", upstream_data_dir)
    tasks, calls, mismatches = _diff_task_set(domain, upstream_results)
    _report("upstream-HEAD gold actions", tasks, calls, mismatches)
    assert tasks == 50 and calls > 140
    assert not mismatches, "\n".join(mismatches)


def test_perturbed_calls_equal_upstream(upstream_results):
    domain = load_domain("airline")
    mismatches: list[str] = []
    seqs = _sequence_jobs()
    calls = 0
    for tool, i, seq, job in seqs:
        theirs = upstream_results[_key(job)]
        _compare(f"{tool}[{i}]", _ours(domain, None, seq), theirs["calls"], seq, mismatches)
        calls += len(seq)
    _report("perturbed calls", len(seqs), calls, mismatches)
    assert set(SEQUENCES) == set(domain.spec.agent_toolkit.tool_names)
    assert not mismatches, "\n".join(mismatches)


def test_tool_schemas_and_policy_equal_upstream(upstream_results):
    theirs = upstream_results[_key({"kind": "schemas", "domain": "airline"})]
    domain = load_domain("airline")
    assert list(domain.agent_tool_schemas()) == theirs["agent"]
    assert domain.policy() == theirs["policy"]
    assert theirs["user"] is None
