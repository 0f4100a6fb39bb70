"""Core engine figures on the mock domain: reset (environment build) and memory per live episode.

python bench/bench_core.py        # add TAU2_REFERENCE_PYTHON=... to measure upstream in the same run
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_bytes, fmt_time, median_time, print_table, ratio, run_upstream

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall

N_LIVE = 2000


def ours() -> dict:
    dom = load_domain("mock")
    reset = median_time(dom.make_environment, repeat=5000)
    call = ToolCall("create_task", {"user_id": "user_1", "title": "t"}, id="1")

    def write():
        env = dom.make_environment()
        env.get_response(call)

    write_t = median_time(write, repeat=2000)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    live = []
    for _ in range(N_LIVE):
        env = dom.make_environment()
        env.get_response(call)
        live.append(env)
    mem = (tracemalloc.get_traced_memory()[0] - base) / N_LIVE
    tracemalloc.stop()
    return {"reset": reset, "reset_write": write_t, "mem": mem}


UPSTREAM = f"""
from tau2.registry import registry
from tau2.data_model.message import ToolCall
make = registry.get_env_constructor("mock")
reset = median_time(make, repeat=200)
call = ToolCall(id="1", name="create_task", arguments={{"user_id": "user_1", "title": "t"}})
def write():
    env = make(); env.get_response(call)
write_t = median_time(write, repeat=200)
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
live = []
for _ in range({N_LIVE} // 10):
    env = make(); env.get_response(call); live.append(env)
mem = (tracemalloc.get_traced_memory()[0] - base) / ({N_LIVE} // 10)
print(json.dumps({{"reset": reset, "reset_write": write_t, "mem": mem}}))
"""


def main() -> None:
    o = ours()
    u = run_upstream(UPSTREAM) or {}
    print_table(
        "mock domain (core engine)",
        [
            (
                "reset (environment build)",
                fmt_time(o["reset"]),
                fmt_time(u.get("reset")),
                ratio(u.get("reset"), o["reset"]),
            ),
            (
                "reset + one write call",
                fmt_time(o["reset_write"]),
                fmt_time(u.get("reset_write")),
                ratio(u.get("reset_write"), o["reset_write"]),
            ),
            (
                "memory per live episode",
                fmt_bytes(o["mem"]),
                fmt_bytes(u.get("mem")),
                ratio(u.get("mem"), o["mem"], "x smaller"),
            ),
        ],
    )


if __name__ == "__main__":
    main()
