"""Telecom figures: task-file load, environment build, reset (build + init actions), tool calls with sync.

    python bench/bench_telecom.py        # add TAU2_REFERENCE_PYTHON=... to measure upstream in the same run

Reset = a fresh environment plus the task's initialization actions (each followed by a sync), for the
small roaming task (4 init actions) and the task with the most init actions (14). A call = get_response
(tool + sync + serialisation) on a reset environment.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_time, median_time, print_table, ratio, run_upstream

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.core.tasks import _parse_task_file
from tau2_gym.scoring.rebuild import initial_environment

SMALL_ID = "[mobile_data_issue]user_abroad_roaming_enabled_off[PERSONA:None]"
BIG_ID = (
    "[mms_issue]airplane_mode_on|bad_network_preference|bad_wifi_calling|break_apn_mms_setting|"
    "break_app_both_permissions|data_mode_off|data_usage_exceeded|unseat_sim_card|"
    "user_abroad_roaming_disabled_on[PERSONA:Hard]"
)
CALLS = {
    "user write: toggle_airplane_mode": ("toggle_airplane_mode", {}, "user"),
    "user read: run_speed_test": ("run_speed_test", {}, "user"),
    "agent read: get_customer_by_phone": ("get_customer_by_phone", {"phone_number": "555-123-2002"}, "assistant"),
}


def ours() -> dict:
    dom = load_domain("telecom")
    path = dom.task_file("telecom")
    gc.collect()
    t0 = time.perf_counter()
    dom.tasks("telecom_full")  # first (cold) load in this process: parse + validate, GC paused
    out = {"task_load": time.perf_counter() - t0}
    gc.collect()
    t0 = time.perf_counter()
    _parse_task_file(str(path))  # the same work with the cyclic GC running (before the engine change)
    out["task_load_gc"] = time.perf_counter() - t0
    small, big = dom.task(SMALL_ID, "telecom_full"), dom.task(BIG_ID, "telecom_full")
    out["build"] = median_time(dom.make_environment, repeat=2000)
    out["reset_small"] = median_time(lambda: initial_environment(dom, small), repeat=1000)
    out["reset_big"] = median_time(lambda: initial_environment(dom, big), repeat=1000)
    env = initial_environment(dom, big)
    for label, (name, args, who) in CALLS.items():
        call = ToolCall(name, args, id="1", requestor=who)
        out[label] = median_time(lambda: env.get_response(call), repeat=2000)
    out["hash"] = median_time(lambda: (env.get_db_hash(), env.get_user_db_hash()), repeat=500)
    return out


UPSTREAM = f"""
import gc
from tau2.domains.telecom.environment import get_environment, get_tasks
from tau2.data_model.message import ToolCall
gc.collect()
t0 = time.perf_counter()
tasks = {{t.id: t for t in get_tasks(None)}}
out = {{"task_load": time.perf_counter() - t0}}
small, big = tasks[{SMALL_ID!r}], tasks[{BIG_ID!r}]
def reset(task):
    env = get_environment()
    env.set_state(None, task.initial_state.initialization_actions, [])
    return env
out["build"] = median_time(get_environment, repeat=50)
out["reset_small"] = median_time(lambda: reset(small), repeat=50)
out["reset_big"] = median_time(lambda: reset(big), repeat=50)
env = reset(big)
for label, (name, args, who) in {CALLS!r}.items():
    call = ToolCall(id="1", name=name, arguments=args, requestor=who)
    out[label] = median_time(lambda: env.get_response(call), repeat=500)
out["hash"] = median_time(lambda: (env.get_db_hash(), env.get_user_db_hash()), repeat=200)
print(json.dumps(out))
"""


def main() -> None:
    o = ours()
    u = run_upstream(UPSTREAM) or {}
    rows = [
        (
            "task file load (2,285 tasks, cold)",
            fmt_time(o["task_load"]),
            fmt_time(u.get("task_load")),
            ratio(u.get("task_load"), o["task_load"]),
        ),
        ("  same, cyclic GC not paused", fmt_time(o["task_load_gc"]), "", ""),
        ("environment build", fmt_time(o["build"]), fmt_time(u.get("build")), ratio(u.get("build"), o["build"])),
        (
            "reset: build + 4 init actions",
            fmt_time(o["reset_small"]),
            fmt_time(u.get("reset_small")),
            ratio(u.get("reset_small"), o["reset_small"]),
        ),
        (
            "reset: build + 14 init actions",
            fmt_time(o["reset_big"]),
            fmt_time(u.get("reset_big")),
            ratio(u.get("reset_big"), o["reset_big"]),
        ),
    ]
    for label in CALLS:
        rows.append(
            (f"call + sync, {label}", fmt_time(o[label]), fmt_time(u.get(label)), ratio(u.get(label), o[label]))
        )
    rows.append(("agent + user DB hash", fmt_time(o["hash"]), fmt_time(u.get("hash")), ratio(u.get("hash"), o["hash"])))
    print_table("telecom domain (medians)", rows)


if __name__ == "__main__":
    main()
