"""Airline benchmark: episode reset, read calls, write calls, the DB hash, memory per live episode.

    python bench/bench_airline.py     # add TAU2_REFERENCE_PYTHON=... to measure upstream in the same run

Ours: ``load_domain("airline").make_environment()`` (the 7 MB DB is validated once per process; an episode
is a copy-on-write view). Upstream: ``get_environment()`` (loads and validates db.json into pydantic each
time), measured in a subprocess under the reference python. Tool calls go through ``get_response`` on both
sides. Write calls are timed on a fresh episode (ours copies the touched records then). Memory is the
``tracemalloc`` growth per live environment, each after one booking. Targets: reset >= 100x faster, a
tool call >= 5x faster, memory per live episode <= 1% of upstream's.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_bytes, fmt_time, median_time, print_table, ratio, run_upstream

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall

N_LIVE = 200  # ours; upstream keeps N_LIVE_UPSTREAM (each of its episodes holds a full DB)
N_LIVE_UPSTREAM = 4

CALLS = {
    "read": ("get_reservation_details", {"reservation_id": "R9QDGB"}),
    "read_user": ("get_user_details", {"user_id": "mei_hernandez_8984"}),
    "search": ("search_direct_flight", {"origin": "LAX", "destination": "SFO", "date": "2024-05-20"}),
    "onestop": ("search_onestop_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-20"}),
    "write": (
        "update_reservation_baggages",
        {"reservation_id": "R9QDGB", "total_baggages": 2, "nonfree_baggages": 1, "payment_id": "credit_card_2140654"},
    ),
    "book": (
        "book_reservation",
        {
            "user_id": "mei_hernandez_8984",
            "origin": "JFK",
            "destination": "SFO",
            "flight_type": "one_way",
            "cabin": "economy",
            "flights": [{"flight_number": "HAT023", "date": "2024-05-20"}],
            "passengers": [{"first_name": "Mei", "last_name": "Hernandez", "dob": "1991-01-01"}],
            "payment_methods": [
                {"payment_id": "certificate_7502997", "amount": 100},
                {"payment_id": "credit_card_2140654", "amount": 221},
            ],
            "total_baggages": 2,
            "nonfree_baggages": 2,
            "insurance": "yes",
        },
    ),
}


def first_write_time(make, call: ToolCall, n: int) -> float:
    """Median time of the first write on a fresh episode (the build itself is not timed)."""
    times = []
    for _ in range(n):
        env = make()
        t0 = time.perf_counter()
        env.get_response(call)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ours() -> dict:
    dom = load_domain("airline")
    make = dom.make_environment
    out = {"reset": median_time(make, repeat=5000)}
    env = make()
    for key in ("read", "read_user", "search", "onestop"):
        call = ToolCall(*CALLS[key], id="1")
        out[key] = median_time(lambda: env.get_response(call), repeat=200 if key == "onestop" else 2000)
    users = list(dom.base_db.data["users"])
    cold = [ToolCall("get_user_details", {"user_id": u}, id="1") for u in users]
    it = iter(cold)
    out["read_cold"] = median_time(lambda: env.get_response(next(it)), repeat=len(users) - 10, warmup=5)
    for key in ("write", "book"):
        out[key] = first_write_time(make, ToolCall(*CALLS[key], id="1"), 2000)
    env = make()
    env.get_response(ToolCall(*CALLS["book"], id="1"))
    out["hash"] = median_time(env.get_db_hash, repeat=50)
    out["hash_fresh"] = median_time(make().get_db_hash, repeat=50)
    book = ToolCall(*CALLS["book"], id="1")
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    live = []
    for _ in range(N_LIVE):
        e = make()
        e.get_response(book)
        live.append(e)
    out["mem"] = (tracemalloc.get_traced_memory()[0] - base) / N_LIVE
    tracemalloc.stop()
    return out


USERS = [u for u in json.load(open(load_domain("airline").folder / "db.json"))["users"]]

UPSTREAM = f"""
from tau2.domains.airline.environment import get_environment
from tau2.data_model.message import ToolCall
CALLS = {CALLS!r}
USERS = {USERS!r}
out = {{"reset": median_time(get_environment, repeat=20)}}
env = get_environment()
for key in ("read", "read_user", "search", "onestop"):
    call = ToolCall(id="1", name=CALLS[key][0], arguments=CALLS[key][1])
    out[key] = median_time(lambda: env.get_response(call), repeat=50 if key == "onestop" else 200)
users = USERS
it = iter([ToolCall(id="1", name="get_user_details", arguments={{"user_id": u}}) for u in users])
out["read_cold"] = median_time(lambda: env.get_response(next(it)), repeat=len(users) - 10, warmup=5)
def first_write_time(make, call, n):
    ts = []
    for _ in range(n):
        e = make()
        t0 = time.perf_counter(); e.get_response(call); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
for key in ("write", "book"):
    call = ToolCall(id="1", name=CALLS[key][0], arguments=CALLS[key][1])
    out[key] = first_write_time(get_environment, call, 20)
env = get_environment()
env.get_response(ToolCall(id="1", name=CALLS["book"][0], arguments=CALLS["book"][1]))
out["hash"] = median_time(env.get_db_hash, repeat=10)
out["hash_fresh"] = median_time(get_environment().get_db_hash, repeat=10)
book = ToolCall(id="1", name=CALLS["book"][0], arguments=CALLS["book"][1])
get_environment()  # warm
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
live = []
for _ in range({N_LIVE_UPSTREAM}):
    e = get_environment(); e.get_response(book); live.append(e)
out["mem"] = (tracemalloc.get_traced_memory()[0] - base) / {N_LIVE_UPSTREAM}
tracemalloc.stop()
print(json.dumps(out))
"""

ROWS = [
    ("reset", "reset (environment build + initial state)"),
    ("read", "read: get_reservation_details (same again)"),
    ("read_user", "read: get_user_details (same user again)"),
    ("read_cold", "read: get_user_details (each user once)"),
    ("search", "read: search_direct_flight LAX->SFO"),
    ("onestop", "read: search_onestop_flight JFK->SFO"),
    ("write", "write: update_reservation_baggages (fresh episode)"),
    ("book", "write: book_reservation (fresh episode)"),
    ("hash", "DB hash after a booking"),
    ("hash_fresh", "DB hash of an untouched episode"),
]


def main() -> None:
    o = ours()
    u = run_upstream(UPSTREAM) or {}
    rows = [(label, fmt_time(o[k]), fmt_time(u.get(k)), ratio(u.get(k), o[k])) for k, label in ROWS]
    mem_share = f"{100 * o['mem'] / u['mem']:.3f}% of upstream" if u.get("mem") else "-"
    rows.append(("memory per live episode (after a booking)", fmt_bytes(o["mem"]), fmt_bytes(u.get("mem")), mem_share))
    print_table("airline domain", rows)


if __name__ == "__main__":
    main()
