"""Vector-env rollout with an LLM customer behind a local stub server: customer requests/s against the limit.

    python bench/bench_vector_llm.py [--sizes 256 1024] [--latency 0.2 1.0] [--episodes-per-env 16]
                                     [--processes K] [--compare /path/to/other/checkout] [--profile]

``gym.make_vec("tau2/airline-v0", N, user=OpenAIUserSimulator(...))``: every agent step is a text turn, so every
step waits for N customer replies. The stub server (tests' ``AsyncOpenAIStub``, in this process; each measured
client runs in a child process) answers each request after the latency and stops the conversation after ``--turns``
customer turns. With N episodes in flight and every request taking the latency, no client exceeds N / latency
requests/s -- the limit. ``--latency`` gives one value for every size or one per size.

A vector env steps in lockstep (a step returns once all N customers have answered), so whatever the server spends
on a burst of N requests lengthens every step, for any client. The stub's own ceiling is therefore measured in the
same run: a raw asyncio client (no env, no HTTP library) sending N requests of the env's size per round, round after
round. The table gives each figure as a share of the limit and of that ceiling, the child's CPU time per agent step
and per request, and the episodes finished per second.

``--compare DIR`` measures another checkout of tau2-gym in the same run (its package on ``PYTHONPATH``), e.g. the
commit before a change, against the same server and workload. ``--profile`` prints the child's top functions
(every thread; needs ``pip install yappi``).

``--processes K`` builds the vector env with its sub-envs in K worker processes (``processes=K``); the CPU per agent
step then sums the child and its workers (read from ``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402 - after sys.path gets the helpers' folder
    ACTION,
    add_lockstep_arguments,
    cpu_of,
    lockstep_against_stub,
    lockstep_ceiling,
    print_table,
    stub_user,
    worker_pids,
)


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:"))


def child(n: int, url: str, episodes_per_env: int, profile: bool, processes: int) -> dict:
    import gymnasium as gym

    import tau2_gym  # noqa: F401 - registers the ids

    kwargs = {} if processes == 1 else {"processes": processes}
    vec = gym.make_vec("tau2/airline-v0", num_envs=n, user=stub_user(url, n), max_steps=400, **kwargs)
    workers = worker_pids(vec)
    if profile:
        import yappi

        yappi.set_clock_type("cpu")
        yappi.start()
    rss0 = _rss()
    c0, t0 = time.process_time(), time.perf_counter()
    w0 = sum(map(cpu_of, workers))
    vec.reset(seed=0)
    target, finished, steps = n * episodes_per_env, 0, 0
    while finished < target:
        _, _, terms, truncs, _ = vec.step([ACTION] * n)
        steps += n
        finished += int((terms | truncs).sum())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0 + sum(map(cpu_of, workers)) - w0
    out = {"wall": wall, "cpu": cpu, "steps": steps, "episodes": finished, "requests": vec.unwrapped.user_requests}
    if not workers:  # N live episodes (and their sockets) over the loaded env
        out["kib_per_episode"] = (_rss() - rss0) / 1024 / n
    if profile:
        yappi.stop()
        stats = sorted(yappi.get_func_stats(), key=lambda s: -s.tsub)[:30]
        out["profile"] = [
            (s.tsub / steps * 1e6, s.ttot / steps * 1e6, s.ncall, f"{s.module}:{s.lineno}({s.name})") for s in stats
        ]
    vec.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    add_lockstep_arguments(parser)
    parser.add_argument(
        "--episodes-per-env", type=int, default=16, help="episodes per sub-env (the rollout bench's 16 per slot)"
    )
    parser.add_argument("--profile", action="store_true", help="print the child's top functions (needs yappi)")
    parser.add_argument("--processes", type=int, default=1, help="the vector env's worker processes (processes=K)")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.url, args.episodes_per_env, args.profile, args.processes)))
        return
    if args.ceiling is not None:
        print(json.dumps(lockstep_ceiling(args.ceiling, args.url, args.ceiling_rounds, stub_user)))
        return

    def describe(prefix: str, r: dict) -> list[tuple]:
        if r.get("profile"):
            print(f"\n{prefix}: top functions by own CPU time, µs per agent step (own, cumulative, calls)")
            for own, cum, calls, name in r["profile"]:
                print(f"  {own:8.1f} {cum:9.1f} {calls:9d}  {name}")
        rss = []
        if "kib_per_episode" in r:  # not with --processes
            rss.append(
                (
                    f"{prefix}: RSS per live episode (growth over the loaded env, end of run)",
                    f"{r['kib_per_episode']:,.1f} KiB",
                    "-",
                    "-",
                )
            )
        return [
            (
                f"{prefix}: CPU per agent step / per request",
                f"{r['cpu'] / r['steps'] * 1e6:,.0f} µs / {r['cpu'] / r['requests'] * 1e6:,.0f} µs",
                "-",
                "-",
            ),
            *rss,
            (
                f"{prefix}: episodes/s",
                f"{r['episodes'] / r['wall']:,.1f} ({r['episodes']} in {r['wall']:.1f} s)",
                "-",
                "-",
            ),
        ]

    child_args = ["--episodes-per-env", str(args.episodes_per_env)]
    child_args += ["--processes", str(args.processes)] if args.processes > 1 else []
    child_args += ["--profile"] if args.profile else []
    rows = lockstep_against_stub(__file__, args, child_args, describe)
    where = f"; sub-envs in {args.processes} worker processes" if args.processes > 1 else ""
    print_table(f"Vector env with an LLM customer (stub server; limit = N / latency{where})", rows)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
