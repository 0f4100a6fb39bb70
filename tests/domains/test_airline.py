"""Airline domain: initial state, task sets, gold-state conformance vectors and per-tool behaviour.

Expected values come from the reference spec (tau2-domains.md §2, §5, §6: verified hashes, texts and
the worked booking example) or are derived from the raw db.json by the documented dump rules.
"""

from __future__ import annotations

import json

import pytest
from datautil import LEGACY

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.scoring.rebuild import gold_environment

INITIAL_HASH = "124e39a664b56402bcd09cb8a6a9cece6acb8462337c969799d5658e3250f263"
MEI = "mei_hernandez_8984"  # gift_card_5309492 98.0, certificate_7502997 250.0, credit_card_2140654
PAX = [{"first_name": "Mei", "last_name": "Hernandez", "dob": "1991-01-01"}]

# Reference §6: first 12 hex of the DB hash after each task's gold actions (unlisted: initial hash).
UPSTREAM_VECTORS = dict(
    x.split(":")
    for x in (
        "7:0087f8266f0f 8:00766aa3e034 11:1e46d540ec2e 12:df1e46c5aaf8 14:b4ea8effd45e 15:c9500f310090 "
        "16:c9500f310090 17:37ea6df3bdb7 18:361a067372a4 19:e5defef608c9 20:a561da60bcd2 21:9ede9d0dc436 "
        "22:37ea6df3bdb7 23:b46d1bed5ba2 24:db03cad58150 25:d0579b8ae59e 29:55e7aa074a76 30:dc171787dd84 "
        "32:caea57241d7a 33:735ba8f15206 35:e0c0bf3e578e 37:b659ba383c77 39:964c9e1c81f8 40:96b61d516184 "
        "42:768a1bf6bced 44:0c7887491b21"
    ).split()
)
V26_3_VECTORS = {
    **UPSTREAM_VECTORS,
    **dict(
        x.split(":")
        for x in (
            "2:d9e9d254b5ca 7:7bc5a4fa21c5 9:7eedd0698349 23:7536455e0ca5 27:91d3895047cd 29:9ecc04e81c3d "
            "33:95b5a97e2197 35:9adec732713f 37:2c62f7389ce2 38:d9e9d254b5ca 44:a1b4b3c043c5"
        ).split()
    ),
}


@pytest.fixture(scope="module")
def airline():
    return load_domain("airline")


@pytest.fixture(scope="module")
def legacy_airline():
    return load_domain("airline", data_version=LEGACY)


@pytest.fixture(scope="module")
def upstream_airline(upstream_data_dir):
    return load_domain("airline", upstream_data_dir)


def call(env, name, **args):
    return env.get_response(ToolCall(name=name, arguments=args, id="c"))


def content(env, name, **args):
    return call(env, name, **args).content


def raw_db(domain) -> dict:
    with open(domain.folder / "db.json", encoding="utf-8") as fh:
        return json.load(fh)


def reservation_as_dumped(raw: dict) -> dict:
    """A db.json reservation in dump order (reference §2.2, §5.1-2): segments start with flight_number,
    the optional status is present as null."""
    out = dict(raw)
    out["flights"] = [
        {k: f[k] for k in ("flight_number", "origin", "destination", "date", "price")} for f in raw["flights"]
    ]
    out.setdefault("status", None)
    return out


# ----------------------------------------------------------------------------- state, tasks, spec


def test_initial_hash_equals_verified_value(airline):
    assert airline.make_environment().get_db_hash() == INITIAL_HASH
    assert airline.base_db.hash_from_scratch() == INITIAL_HASH


def test_upstream_data_has_same_initial_hash(upstream_airline):
    assert upstream_airline.make_environment().get_db_hash() == INITIAL_HASH


@pytest.mark.parametrize("split,size", [("base", 50), ("train", 30), ("test", 20), (None, 50)])
def test_26_3_task_set_splits(legacy_airline, split, size):
    tasks = legacy_airline.tasks("airline", split)
    assert len(tasks) == size
    assert all(t.initial_state is None for t in tasks)


@pytest.mark.parametrize("split,size", [("base", 50), ("train", 30), ("test", 20), (None, 50)])
def test_upstream_task_set_splits(upstream_airline, split, size):
    assert len(upstream_airline.tasks("airline", split)) == size


def test_default_split_is_base_and_ids_are_0_to_49(airline):
    assert [t.id for t in airline.tasks()] == [str(i) for i in range(50)]


def test_solo_mode_is_refused_with_upstream_message(airline):
    with pytest.raises(ValueError, match="^Airline domain does not support solo mode$"):
        airline.make_environment(solo=True)
    env = airline.make_environment()
    assert env.domain_name == "airline" and env.user_tools is None
    assert env.get_policy() == (airline.folder / "policy.md").read_text(encoding="utf-8")


def test_tool_names_in_upstream_order(airline):
    assert [s["function"]["name"] for s in airline.agent_tool_schemas()] == [
        "book_reservation",
        "calculate",
        "cancel_reservation",
        "get_reservation_details",
        "get_user_details",
        "list_all_airports",
        "search_direct_flight",
        "search_onestop_flight",
        "send_certificate",
        "transfer_to_human_agents",
        "update_reservation_baggages",
        "update_reservation_flights",
        "update_reservation_passengers",
        "get_flight_status",
    ]


# ----------------------------------------------------------------------------- conformance vectors


def _gold_hashes(domain) -> dict[str, str]:
    return {t.id: gold_environment(domain, t).get_db_hash()[:12] for t in domain.tasks(split=None)}


def test_conformance_vectors_26_3_tasks(legacy_airline):
    got = _gold_hashes(legacy_airline)
    expected = {tid: V26_3_VECTORS.get(tid, INITIAL_HASH[:12]) for tid in got}
    assert got == expected


def test_conformance_vectors_upstream_tasks(upstream_airline):
    got = _gold_hashes(upstream_airline)
    expected = {tid: UPSTREAM_VECTORS.get(tid, INITIAL_HASH[:12]) for tid in got}
    assert got == expected


def test_gold_replay_never_touches_the_shared_base(airline):
    _gold_hashes(airline)
    assert airline.base_db.hash_from_scratch() == INITIAL_HASH


# ----------------------------------------------------------------------------- book / update flights


def _book_321(env, **over):
    args = dict(
        user_id=MEI,
        origin="JFK",
        destination="SFO",
        flight_type="one_way",
        cabin="economy",
        flights=[{"flight_number": "HAT023", "date": "2024-05-20"}],
        passengers=PAX,
        payment_methods=[
            {"payment_id": "certificate_7502997", "amount": 100},
            {"payment_id": "credit_card_2140654", "amount": 221},
        ],
        total_baggages=2,
        nonfree_baggages=2,
        insurance="yes",
    )
    args.update(over)
    return call(env, "book_reservation", **args)


def test_booking_worked_example(airline):
    env = airline.make_environment()
    msg = _book_321(env)
    assert not msg.error
    assert msg.content == (
        '{"reservation_id": "HATHAT", "user_id": "mei_hernandez_8984", "origin": "JFK", "destination": "SFO", '
        '"flight_type": "one_way", "cabin": "economy", "flights": [{"flight_number": "HAT023", "origin": "JFK", '
        '"destination": "SFO", "date": "2024-05-20", "price": 191}], "passengers": [{"first_name": "Mei", '
        '"last_name": "Hernandez", "dob": "1991-01-01"}], "payment_history": [{"payment_id": "certificate_7502997", '
        '"amount": 100}, {"payment_id": "credit_card_2140654", "amount": 221}], "created_at": "2024-05-15T15:00:00", '
        '"total_baggages": 2, "nonfree_baggages": 2, "insurance": "yes", "status": null}'
    )
    db = env.tools.db
    assert "certificate_7502997" not in db.users[MEI]["payment_methods"]  # deleted whole (250.0)
    assert db.flights["HAT023"]["dates"]["2024-05-20"]["available_seats"]["economy"] == 12
    assert db.users[MEI]["reservations"][-1] == "HATHAT"
    assert airline.base_db.data["flights"]["HAT023"]["dates"]["2024-05-20"]["available_seats"]["economy"] == 13

    # Re-cabin to business (473): +282 on the card; back to economy with the gift card: -282, card +282.
    flights = [{"flight_number": "HAT023", "date": "2024-05-20"}]
    up = json.loads(
        content(
            env,
            "update_reservation_flights",
            reservation_id="HATHAT",
            cabin="business",
            flights=flights,
            payment_id="credit_card_2140654",
        )
    )
    assert up["payment_history"][-1] == {"payment_id": "credit_card_2140654", "amount": 282}
    assert up["cabin"] == "business" and up["flights"][0]["price"] == 473
    down = json.loads(
        content(
            env,
            "update_reservation_flights",
            reservation_id="HATHAT",
            cabin="economy",
            flights=flights,
            payment_id="gift_card_5309492",
        )
    )
    assert down["payment_history"][-1] == {"payment_id": "gift_card_5309492", "amount": -282}
    assert db.users[MEI]["payment_methods"]["gift_card_5309492"]["amount"] == 380.0
    # No seat inventory change on flight updates.
    assert db.flights["HAT023"]["dates"]["2024-05-20"]["available_seats"] == {
        "basic_economy": 20,
        "economy": 12,
        "business": 11,
    }
    # Same flight, date and cabin: old price kept, zero difference -> no record; a certificate still errors.
    same = json.loads(
        content(
            env,
            "update_reservation_flights",
            reservation_id="HATHAT",
            cabin="economy",
            flights=flights,
            payment_id="credit_card_2140654",
        )
    )
    assert same["payment_history"] == down["payment_history"] and same["flights"] == down["flights"]
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="HATHAT",
            cabin="economy",
            flights=flights,
            payment_id="certificate_3321326",
        )
        == "Error: Certificate cannot be used to update reservation"
    )


def test_booking_error_paths_in_check_order(airline):
    env = airline.make_environment()
    missing = call(
        env,
        "book_reservation",
        user_id=MEI,
        origin="JFK",
        destination="SFO",
        flight_type="one_way",
        cabin="economy",
        flights=[],
        passengers=[],
        payment_methods=[],
        total_baggages=0,
        nonfree_baggages=0,
    )
    assert missing.content == (
        "Error: AirlineTools.book_reservation() missing 1 required positional argument: 'insurance'"
    )
    assert _book_321(env, user_id="nobody_1").content == "Error: User nobody_1 not found"
    bad_cabin = _book_321(env, cabin="first").content
    assert bad_cabin.startswith(
        "Error: 1 validation error for Reservation\ncabin\n  Input should be 'business', "
        "'economy' or 'basic_economy' [type=literal_error"
    )
    assert _book_321(env, flights=[{"flight_number": "HAT999", "date": "2024-05-20"}]).content == (
        "Error: Flight HAT999 not found"
    )
    assert _book_321(env, flights=[{"flight_number": "HAT023", "date": "2024-06-01"}]).content == (
        "Error: Flight HAT023 not found on date 2024-06-01"
    )
    assert _book_321(env, flights=[{"flight_number": "HAT023", "date": "2024-05-10"}]).content == (
        "Error: Flight HAT023 not available on date 2024-05-10"
    )
    assert _book_321(env, passengers=PAX * 14).content == "Error: Not enough seats on flight HAT023"
    assert _book_321(env, payment_methods=[{"payment_id": "gift_card_1", "amount": 321}]).content == (
        "Error: Payment method gift_card_1 not found"
    )
    assert _book_321(env, payment_methods=[{"payment_id": "gift_card_5309492", "amount": 321}]).content == (
        "Error: Not enough balance in payment method gift_card_5309492"
    )
    assert _book_321(env, payment_methods=[{"payment_id": "credit_card_2140654", "amount": 320}]).content == (
        "Error: Payment amount does not add up, total price is 321, but paid 320"
    )
    assert env.get_db_hash() == INITIAL_HASH  # every failure above happened before any change


def test_booking_reservation_ids_run_out_after_three(airline):
    env = airline.make_environment()
    card = [{"payment_id": "credit_card_2140654", "amount": 321}]
    ids = [json.loads(_book_321(env, payment_methods=card).content)["reservation_id"] for _ in range(3)]
    assert ids == ["HATHAT", "HATHAU", "HATHAV"]
    assert _book_321(env, payment_methods=card).content == "Error: Too many reservations"


def test_booking_duplicate_certificate_fails_after_partial_charge(airline):
    env = airline.make_environment()
    msg = _book_321(
        env,
        payment_methods=[
            {"payment_id": "certificate_7502997", "amount": 200},
            {"payment_id": "certificate_7502997", "amount": 121},
        ],
    )
    assert msg.error and msg.content == "Error: 'certificate_7502997'"
    db = env.tools.db
    assert "certificate_7502997" not in db.users[MEI]["payment_methods"]  # first deletion persists
    assert "HATHAT" not in db.reservations
    assert db.flights["HAT023"]["dates"]["2024-05-20"]["available_seats"]["economy"] == 13


def test_booking_duplicate_gift_card_is_charged_twice(airline):
    env = airline.make_environment()
    msg = _book_321(
        env,
        payment_methods=[
            {"payment_id": "gift_card_5309492", "amount": 60},
            {"payment_id": "gift_card_5309492", "amount": 60},
            {"payment_id": "credit_card_2140654", "amount": 201},
        ],
    )
    assert not msg.error
    assert env.tools.db.users[MEI]["payment_methods"]["gift_card_5309492"]["amount"] == -22.0


def test_update_flights_error_paths(airline):
    env = airline.make_environment()
    flights = [{"flight_number": "HAT034", "date": "2024-05-20"}]
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="NOPE00",
            cabin="economy",
            flights=flights,
            payment_id="credit_card_2140654",
        )
        == "Error: Reservation NOPE00 not found"
    )
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="R9QDGB",
            cabin="first",
            flights=flights,
            payment_id="credit_card_2140654",
        )
        == "Error: 'first'"
    )
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="R9QDGB",
            cabin="economy",
            flights=[{"flight_number": "HAT034", "date": "2024-05-10"}],
            payment_id="credit_card_2140654",
        )
        == "Error: Flight HAT034 not available on date 2024-05-10"
    )
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="R9QDGB",
            cabin="economy",
            flights=[{"flight_number": "HAT088", "date": "2024-05-20"}],  # economy: 0 seats
            payment_id="credit_card_2140654",
        )
        == "Error: Not enough seats on flight HAT088"
    )
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="R9QDGB",
            cabin="economy",
            flights=flights,
            payment_id="gift_card_0",
        )
        == "Error: Payment method not found"
    )
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="R9QDGB",
            cabin="business",
            flights=[{"flight_number": "HAT034", "date": "2024-05-28"}] * 3,
            payment_id="gift_card_5309492",
        )
        == "Error: Gift card balance is not enough"
    )
    assert (
        content(
            env,
            "update_reservation_flights",
            reservation_id="R9QDGB",
            cabin="economy",
            flights="HAT034",
            payment_id="credit_card_2140654",
        )
        == "Error: 'str' object has no attribute 'flight_number'"
    )
    assert env.get_db_hash() == INITIAL_HASH


# ----------------------------------------------------------------------------- other write tools


def test_cancel_negates_every_entry_and_is_repeatable(airline):
    env = airline.make_environment()
    first = json.loads(content(env, "cancel_reservation", reservation_id="R9QDGB"))
    assert first["status"] == "cancelled"
    assert first["payment_history"] == [
        {"payment_id": "credit_card_6082923", "amount": 1911},
        {"payment_id": "credit_card_6082923", "amount": -1911},
    ]
    second = json.loads(content(env, "cancel_reservation", reservation_id="R9QDGB"))
    assert [p["amount"] for p in second["payment_history"]] == [1911, -1911, -1911, 1911]
    assert content(env, "cancel_reservation", reservation_id="r9qdgb") == "Error: Reservation r9qdgb not found"


def test_update_baggages_charges_new_paid_bags_and_assigns_raw_counts(airline):
    env = airline.make_environment()
    res = json.loads(
        content(
            env,
            "update_reservation_baggages",
            reservation_id="R9QDGB",
            total_baggages=3,
            nonfree_baggages=2,
            payment_id="credit_card_2140654",
        )
    )
    assert res["payment_history"][-1] == {"payment_id": "credit_card_2140654", "amount": 100}
    assert (res["total_baggages"], res["nonfree_baggages"]) == (3, 2)
    # Decrease: price 0, no record, no refund.
    res = json.loads(
        content(
            env,
            "update_reservation_baggages",
            reservation_id="R9QDGB",
            total_baggages=1,
            nonfree_baggages=0,
            payment_id="gift_card_5309492",
        )
    )
    assert len(res["payment_history"]) == 2
    int_hash = env.get_db_hash()
    float_msg = content(
        env,
        "update_reservation_baggages",
        reservation_id="R9QDGB",
        total_baggages=1.0,
        nonfree_baggages=0,
        payment_id="gift_card_5309492",
    )
    assert '"total_baggages": 1.0' in float_msg and env.get_db_hash() != int_hash  # stored as given
    for pid, err in (
        ("certificate_7502997", "Certificate cannot be used to update reservation"),
        ("credit_card_0", "Payment method not found"),
    ):
        assert (
            content(
                env,
                "update_reservation_baggages",
                reservation_id="R9QDGB",
                total_baggages=1,
                nonfree_baggages=0,
                payment_id=pid,
            )
            == f"Error: {err}"
        )
    assert (
        content(
            env,
            "update_reservation_baggages",
            reservation_id="R9QDGB",
            total_baggages=9,
            nonfree_baggages=9,
            payment_id="gift_card_5309492",
        )
        == "Error: Gift card balance is not enough"
    )


def test_update_passengers_keeps_count(airline):
    env = airline.make_environment()
    assert content(env, "update_reservation_passengers", reservation_id="R9QDGB", passengers=PAX) == (
        "Error: Number of passengers does not match"
    )
    res = json.loads(
        content(env, "update_reservation_passengers", reservation_id="R9QDGB", passengers=[dict(PAX[0], extra=1)] * 3)
    )
    assert res["passengers"] == PAX * 3


def test_model_arguments_work_as_their_dicts_when_toolkit_methods_are_called_directly(airline):
    """Upstream's tools take ``FlightInfo | dict``, ``Passenger | dict``, ``Payment | dict``: a Python caller may
    pass the models. Each tool gives the result and state its dict twin gives; the caller's models stay as
    they were."""
    from tau2_gym.core.tools import to_content
    from tau2_gym.domains.airline.data_model import FlightInfo, Passenger, Payment

    flights = [{"flight_number": "HAT023", "date": "2024-05-20"}]
    payments = [
        {"payment_id": "certificate_7502997", "amount": 100},
        {"payment_id": "credit_card_2140654", "amount": 221},
    ]
    people = [dict(PAX[0], first_name=name) for name in ("Ann", "Bo", "Cy")]
    steps = [
        (
            "book_reservation",
            dict(
                user_id=MEI,
                origin="JFK",
                destination="SFO",
                flight_type="one_way",
                cabin="economy",
                flights=flights,
                passengers=PAX,
                payment_methods=payments,
                total_baggages=2,
                nonfree_baggages=2,
                insurance="yes",
            ),
            {"flights": FlightInfo, "passengers": Passenger, "payment_methods": Payment},
        ),
        (
            "update_reservation_flights",
            dict(
                reservation_id="R9QDGB",
                cabin="economy",
                flights=[{"flight_number": "HAT034", "date": "2024-05-20"}],
                payment_id="credit_card_2140654",
            ),
            {"flights": FlightInfo},
        ),
        ("update_reservation_passengers", dict(reservation_id="R9QDGB", passengers=people), {"passengers": Passenger}),
    ]
    with_dicts, with_models = airline.make_environment(), airline.make_environment()
    for name, args, model_of in steps:
        as_models = {k: [model_of[k](**x) for x in v] if k in model_of else v for k, v in args.items()}
        before = [[m.model_dump() for m in as_models[k]] for k in model_of]
        want = to_content(getattr(with_dicts.tools, name)(**args))
        got = to_content(getattr(with_models.tools, name)(**as_models))
        assert got == want and got.startswith('{"reservation_id": "'), name
        assert with_models.get_db_hash() == with_dicts.get_db_hash(), name
        assert [[m.model_dump() for m in as_models[k]] for k in model_of] == before
    # stored as plain data, like the dicts an LLM sends
    assert with_models.tools.db.reservations["R9QDGB"]["passengers"] == people


def test_send_certificate_message_uses_raw_amount_and_ids_run_out(airline):
    env = airline.make_environment()
    assert content(env, "send_certificate", user_id=MEI, amount=100) == (
        "Certificate certificate_3221322 added to user mei_hernandez_8984 with amount 100."
    )
    assert env.tools.db.users[MEI]["payment_methods"]["certificate_3221322"] == {
        "source": "certificate",
        "id": "certificate_3221322",
        "amount": 100.0,
    }
    assert content(env, "send_certificate", user_id=MEI, amount=100.0).endswith("with amount 100.0.")
    assert content(env, "send_certificate", user_id=MEI, amount=50.5) == (
        "Certificate certificate_3221324 added to user mei_hernandez_8984 with amount 50.5."
    )
    assert content(env, "send_certificate", user_id=MEI, amount=1) == "Error: Too many certificates"
    assert content(env, "send_certificate", user_id="nobody_1", amount=1) == "Error: User nobody_1 not found"


# ----------------------------------------------------------------------------- read and generic tools


def test_get_reservation_details_dump_order_and_null_status(airline):
    env = airline.make_environment()
    raw = raw_db(airline)["reservations"]["07S7FC"]
    assert content(env, "get_reservation_details", reservation_id="07S7FC") == json.dumps(reservation_as_dumped(raw))
    assert content(env, "get_reservation_details", reservation_id="XXXXXX") == "Error: Reservation XXXXXX not found"


def test_get_user_details(airline):
    env = airline.make_environment()
    raw = raw_db(airline)["users"][MEI]
    assert content(env, "get_user_details", user_id=MEI) == json.dumps(raw)  # file order == dump order here
    assert content(env, "get_user_details", user_id="x") == "Error: User x not found"
    assert content(env, "get_user_details", user_id=MEI, foo=1) == (
        "Error: AirlineTools.get_user_details() got an unexpected keyword argument 'foo'"
    )
    assert content(env, "get_user_details") == (
        "Error: AirlineTools.get_user_details() missing 1 required positional argument: 'user_id'"
    )


def test_list_all_airports(airline):
    airports = json.loads(content(airline.make_environment(), "list_all_airports"))
    assert len(airports) == 20
    assert airports[0] == {"iata": "SFO", "city": "San Francisco"}
    assert airports[-1] == {"iata": "LGA", "city": "LaGuardia"}


def test_search_direct_flight(airline):
    env = airline.make_environment()
    found = json.loads(content(env, "search_direct_flight", origin="LAX", destination="SFO", date="2024-05-20"))
    raw = raw_db(airline)["flights"]
    expected = [
        fn
        for fn, f in raw.items()
        if f["origin"] == "LAX" and f["destination"] == "SFO" and f["dates"]["2024-05-20"]["status"] == "available"
    ]
    assert [f["flight_number"] for f in found] == expected and expected
    first = raw[expected[0]]
    assert found[0] == {
        "flight_number": first["flight_number"],
        "origin": "LAX",
        "destination": "SFO",
        "status": "available",
        "scheduled_departure_time_est": first["scheduled_departure_time_est"],
        "scheduled_arrival_time_est": first["scheduled_arrival_time_est"],
        "date": None,
        "available_seats": first["dates"]["2024-05-20"]["available_seats"],
        "prices": first["dates"]["2024-05-20"]["prices"],
    }
    assert content(env, "search_direct_flight", origin="lax", destination="SFO", date="2024-05-20") == "[]"
    # 0-seat cabins are still listed (HAT088 economy on 05-20).
    hat088 = json.loads(content(env, "search_direct_flight", origin="JFK", destination="DTW", date="2024-05-20"))
    assert any(f["flight_number"] == "HAT088" and f["available_seats"]["economy"] == 0 for f in hat088)


def test_search_onestop_next_day_leg_and_string_time_comparison(airline):
    env = airline.make_environment()
    pairs = json.loads(content(env, "search_onestop_flight", origin="LGA", destination="SEA", date="2024-05-20"))
    assert pairs and all(len(p) == 2 for p in pairs)
    for leg1, leg2 in pairs:
        assert leg1["date"] == "2024-05-20" and leg1["origin"] == "LGA" and leg2["destination"] == "SEA"
        assert leg2["origin"] == leg1["destination"]
        assert leg2["scheduled_departure_time_est"] >= leg1["scheduled_arrival_time_est"]
        expected_date = "2024-05-21" if "+1" in leg1["scheduled_arrival_time_est"] else "2024-05-20"
        assert leg2["date"] == expected_date
    assert any("+1" in leg1["scheduled_arrival_time_est"] for leg1, _ in pairs)  # HAT002 LGA->PHX arrives +1
    # On 05-08 the next-day date is the unpadded "2024-05-9": no +1 connections are found.
    early = json.loads(content(env, "search_onestop_flight", origin="LGA", destination="SEA", date="2024-05-08"))
    assert all("+1" not in leg1["scheduled_arrival_time_est"] for leg1, _ in early)


def test_get_flight_status(airline):
    env = airline.make_environment()
    assert content(env, "get_flight_status", flight_number="HAT034", date="2024-05-20") == "available"
    assert content(env, "get_flight_status", flight_number="HAT034", date="2024-05-10") == "landed"
    assert content(env, "get_flight_status", flight_number="HAT002", date="2024-05-15") == "delayed"
    assert (
        content(env, "get_flight_status", flight_number="HAT999", date="2024-05-20") == "Error: Flight HAT999 not found"
    )
    assert content(env, "get_flight_status", flight_number="HAT034", date="2024-06-01") == (
        "Error: Flight HAT034 not found on date 2024-06-01"
    )


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("2+2", "4.0"),
        ("10/3", "3.33"),
        ("2.675*1", "2.67"),
        ("2**10", "1024.0"),
        ("7//2", "3.0"),
        ("2 + x", "Error: Invalid characters in expression"),
        ("1/0", "Error: division by zero"),
        ("(1+2", "Error: '(' was never closed (<string>, line 1)"),
    ],
)
def test_calculate(airline, expression, expected):
    assert content(airline.make_environment(), "calculate", expression=expression) == expected


def test_transfer_and_unknown_tool(airline):
    env = airline.make_environment()
    assert content(env, "transfer_to_human_agents", summary="x") == "Transfer successful"
    msg = call(env, "cancel_everything")
    assert msg.error and msg.content == "Error: Tool 'cancel_everything' not found."


def test_writes_stay_in_their_episode(airline):
    one, two = airline.make_environment(), airline.make_environment()
    _book_321(one)
    call(one, "cancel_reservation", reservation_id="R9QDGB")
    assert one.get_db_hash() != INITIAL_HASH
    assert two.get_db_hash() == INITIAL_HASH
    assert airline.base_db.hash_from_scratch() == INITIAL_HASH


def test_read_content_follows_episode_changes(airline):
    one, two = airline.make_environment(), airline.make_environment()
    before = content(one, "get_user_details", user_id=MEI)
    assert content(one, "get_user_details", user_id=MEI) == before
    _book_321(one)
    after = json.loads(content(one, "get_user_details", user_id=MEI))
    assert after["reservations"][-1] == "HATHAT" and "certificate_7502997" not in after["payment_methods"]
    assert content(two, "get_user_details", user_id=MEI) == before
    assert content(one, "get_reservation_details", reservation_id="HATHAT").startswith('{"reservation_id": "HATHAT"')
