"""Rollout throughput against a local OpenAI-compatible stub with a fixed per-call latency.

Agent and user are LLMs behind two stub servers (127.0.0.1) that sleep ``--latency`` seconds per request,
so the run is server-bound: an episode of ``k`` sequential LLM calls cannot take less than ``k * latency``
and ``concurrency`` episodes in flight give at most ``concurrency / (k * latency)`` episodes/s. We print
episodes/s, requests/s and the fraction of that limit (requests/s * latency / concurrency), for each
concurrency, with no user cache, with a cold cache (filling it) and a warm one (user requests -> 0).

    python bench/bench_serving.py [--latency 0.2] [--concurrency 1 8 32] [--episodes 32]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from openai_stub import OpenAIStub  # noqa: E402

from tau2_gym.policies import OpenAIAgentPolicy  # noqa: E402
from tau2_gym.rollout import collect  # noqa: E402
from tau2_gym.users.openai_user import OpenAIUserSimulator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per LLM request (default: 0.2)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--episodes", type=int, default=20,
                    help="episodes per measurement, at least 4 x concurrency (mock tasks x trials)")
    ap.add_argument("--user-turns", type=int, default=3, help="user replies before the user stops")
    args = ap.parse_args()
    lat = args.latency
    stop_at = 2 * args.user_turns + 1

    ctx = multiprocessing.get_context("fork")
    counts = ctx.Array("i", 2)  # agent, user requests (the servers live in a child process: no shared GIL)
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(lat, stop_at, counts, child), daemon=True)
    server.start()
    agent_url, user_url = parent.recv()
    print(f"latency {lat * 1000:.0f} ms per request; mock domain; agent and user both LLM stubs (own process)")
    print(f"{'concurrency':>11} {'user cache':>10} {'episodes':>8} {'wall s':>7} {'eps/s':>7} {'req/s':>7} "
          f"{'user req':>8} {'% of limit':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for conc in args.concurrency:
            cache = os.path.join(tmp, f"cache{conc}")
            for mode in ("off", "cold", "warm"):
                policy = OpenAIAgentPolicy(model="stub-model", base_url=agent_url, max_concurrency=conc,
                                           max_retries=0)
                user = OpenAIUserSimulator(model="stub-model", base_url=user_url, max_concurrency=conc,
                                           max_retries=0, cache_dir=None if mode == "off" else cache)
                a0, u0 = counts[0], counts[1]
                t0 = time.perf_counter()
                # enough episodes that the last, partly filled wave does not dominate; mock has 10 tasks
                trials = max(1, -(-max(args.episodes, 4 * conc) // 10))
                report = collect(None, policy, user, domain="mock", task_split=None, num_trials=trials,
                                 concurrency=conc, progress=False, max_retries=0, evaluate=False)
                wall = time.perf_counter() - t0
                policy.close()
                user.close()
                n = len(report.simulations)
                failed = report.failed
                areq, ureq = counts[0] - a0, counts[1] - u0
                rps = (areq + ureq) / wall
                # server-bound limit: `conc` sequential request chains, each request `lat` seconds
                frac = rps * lat / conc
                print(f"{conc:>11} {mode:>10} {n:>8} {wall:>7.2f} {n / wall:>7.2f} {rps:>7.1f} {ureq:>8} "
                      f"{100 * frac:>9.1f}%" + (f"  ({failed} failed)" if failed else ""))
    parent.send("stop")
    server.join(5)


def _serve(lat: float, stop_at: int, counts, conn) -> None:
    def count(i: int) -> None:
        with counts.get_lock():
            counts[i] += 1

    def agent_reply(body, n):
        count(0)
        return {"delay": lat, "then": "Could you tell me more?"}

    def user_reply(body, n):
        count(1)
        text = "###STOP###" if len(body["messages"]) >= stop_at else f"Please help me (turn {len(body['messages'])})."
        return {"delay": lat, "then": text}

    with OpenAIStub(agent_reply) as agent_srv, OpenAIStub(user_reply) as user_srv:
        conn.send((agent_srv.base_url, user_srv.base_url))
        conn.recv()


if __name__ == "__main__":
    main()
