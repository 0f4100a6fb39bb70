"""Retail benchmark: episode reset, a read call, a write call, the DB hash, memory per live episode.

Run ``python bench/bench_retail.py``. With TAU2_REFERENCE_PYTHON set, the same figures are measured for
upstream tau2-bench in a subprocess of this run (this file re-run with ``--upstream``) and ratios printed.
Times are medians of per-sample ``perf_counter_ns``, best of BENCH_ROUNDS (default 3) rounds that alternate
ours and upstream; memory is ``tracemalloc``'s traced growth per live environment. Targets: reset >= 100x faster, tool
call >= 5x faster, memory <= 1% of upstream's.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc

ORDER = "#W2443586"  # a pending order of the shipped db.json
ADDRESS = {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"}
READ = ("get_order_details", {"order_id": ORDER})
WRITE = ("modify_pending_order_address", {"order_id": ORDER, **ADDRESS})


def median_us(samples_ns: list[int]) -> float:
    return statistics.median(samples_ns) / 1000.0


def timed(fn, n: int) -> float:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t0)
    return median_us(out)


def measure(
    make_env, tool_call, n_fast: int, n_slow: int, n_mem: int, gold: list[list[tuple[str, dict]]]
) -> dict[str, float]:
    """The figures for one implementation; ``make_env()`` = build + initial state, ``tool_call(name, args)``."""
    make_env()  # warm caches (ours: domain load; upstream: imports)
    res: dict[str, float] = {}
    res["reset_us"] = timed(make_env, n_slow)

    total_ns, n_calls = 0, 0
    for task_calls in gold:  # a realistic mix: each task's gold actions on a fresh episode (build not timed)
        e = make_env()
        calls = [tool_call(name, args) for name, args in task_calls]
        t0 = time.perf_counter_ns()
        for c in calls:
            c(e)
        total_ns += time.perf_counter_ns() - t0
        n_calls += len(calls)
    res["gold_call_us"] = total_ns / max(1, n_calls) / 1000.0

    env = make_env()
    read = tool_call(*READ)
    read(env)
    res["read_us"] = timed(lambda: read(env), n_fast)

    write = tool_call(*WRITE)
    envs = [make_env() for _ in range(n_slow)]
    samples = []
    for e in envs:  # the first write on a fresh episode (ours copies the record then)
        t0 = time.perf_counter_ns()
        write(e)
        samples.append(time.perf_counter_ns() - t0)
    res["write_us"] = median_us(samples)
    res["write_again_us"] = timed(lambda: write(env), n_fast)
    res["hash_us"] = timed(lambda: env.get_db_hash(), max(5, n_slow // 2))
    del envs

    for label, after_write in (("mem_fresh_bytes", False), ("mem_written_bytes", True)):
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        live = []
        for _ in range(n_mem):
            e = make_env()
            if after_write:
                write(e)
            live.append(e)
        gc.collect()
        res[label] = (tracemalloc.get_traced_memory()[0] - before) / n_mem
        tracemalloc.stop()
        del live
    return res


# ------------------------------------------------------------------------------------- ours


GOLD_TASKS = 20  # tasks "0".."19" of the default task set


def gold_calls() -> list[list[tuple[str, dict]]]:
    from tau2_gym import load_domain

    tasks = load_domain("retail").tasks(split=None)[:GOLD_TASKS]
    return [[(a.name, a.arguments) for a in t.evaluation_criteria.actions] for t in tasks]


def ours(gold: list[list[tuple[str, dict]]]) -> dict[str, float]:
    from tau2_gym import load_domain
    from tau2_gym.core.messages import ToolCall

    dom = load_domain("retail")

    def make_env():
        env = dom.make_environment()
        env.set_state(None, None, [])
        return env

    def tool_call(name, args):
        call = ToolCall(name=name, arguments=args, id="c")
        return lambda env: env.get_response(call)

    res = measure(make_env, tool_call, n_fast=3000, n_slow=300, n_mem=300, gold=gold)
    return res


# ------------------------------------------------------------------------------------- upstream


def upstream(gold: list[list[tuple[str, dict]]]) -> dict[str, float]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loguru import logger

    logger.remove()
    from tau2.data_model.message import ToolCall
    from tau2.domains.retail.environment import get_environment

    def make_env():
        env = get_environment()  # what every upstream episode pays: read + validate db.json
        env.set_state(None, None, [])
        return env

    def tool_call(name, args):
        call = ToolCall(name=name, arguments=args, id="c")
        return lambda env: env.get_response(call)

    return measure(make_env, tool_call, n_fast=300, n_slow=15, n_mem=5, gold=gold)


def run_upstream(gold: list[list[tuple[str, dict]]]) -> dict[str, float] | None:
    py = os.environ.get("TAU2_REFERENCE_PYTHON")
    if not py:
        return None
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LOGURU_LEVEL="ERROR")
    proc = subprocess.run(
        [py, os.path.abspath(__file__), "--upstream"],
        input=json.dumps(gold),
        capture_output=True,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.abspath(__file__)),
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"upstream run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


ROWS = [
    ("environment build + initial state", "reset_us", "us"),
    ("read call (get_order_details)", "read_us", "us"),
    ("write call, first on a fresh episode (modify_pending_order_address)", "write_us", "us"),
    ("write call, repeated on one episode", "write_again_us", "us"),
    (f"gold actions of tasks 0-{GOLD_TASKS - 1}, mean per call", "gold_call_us", "us"),
    ("agent DB hash (after a write)", "hash_us", "us"),
    ("memory per live episode, fresh", "mem_fresh_bytes", "B"),
    ("memory per live episode, after one write", "mem_written_bytes", "B"),
]


def best_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, the best round (times: the lowest median; the machine may be shared and loaded)."""
    out = dict(rounds[0])
    for r in rounds[1:]:
        for k, v in r.items():
            if k.endswith("_us"):
                out[k] = min(out[k], v)
    return out


def main() -> None:
    if "--upstream" in sys.argv:
        print(json.dumps(upstream([[(n, a) for n, a in t] for t in json.load(sys.stdin)])))
        return
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    t0 = time.perf_counter()
    from tau2_gym import load_domain

    load_domain("retail")  # once per process: validate db.json into the shared base
    load_s = time.perf_counter() - t0
    gold = gold_calls()
    mine_rounds, their_rounds = [], []
    for _ in range(rounds):  # alternate the two so both see the same machine load
        mine_rounds.append(ours(gold))
        theirs_round = run_upstream(gold)
        if theirs_round is not None:
            their_rounds.append(theirs_round)
    mine = best_of(mine_rounds)
    theirs = best_of(their_rounds) if their_rounds else None
    print(
        f"retail benchmark (python {sys.version.split()[0]}; medians, best of {rounds} alternating rounds); "
        f"domain load once per process: {load_s:.2f} s"
    )
    print(f"{'figure':<70} {'ours':>12} {'upstream':>14} {'ratio':>10}")
    for label, key, unit in ROWS:
        a = mine[key]
        fmt = (lambda v: f"{v:,.1f} {unit}") if unit == "us" else (lambda v: f"{v:,.0f} {unit}")
        if theirs is None:
            print(f"{label:<70} {fmt(a):>12} {'-':>14} {'-':>10}")
            continue
        b = theirs[key]
        if unit == "B":
            ratio = f"{100.0 * a / b:.3f}%"  # ours as a share of upstream's
        else:
            ratio = f"{b / a:,.0f}x"  # how many times faster
        print(f"{label:<70} {fmt(a):>12} {fmt(b):>14} {ratio:>10}")
    if theirs is None:
        print("(set TAU2_REFERENCE_PYTHON to measure upstream in the same run)")


if __name__ == "__main__":
    main()
