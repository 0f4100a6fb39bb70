"""Vector-env rollout with an LLM customer behind a local stub server: customer requests/s against the limit.

    python bench/bench_vector_llm.py [--sizes 256 1024] [--latency 0.2 1.0] [--episodes-per-env 16]
                                     [--compare /path/to/other/checkout] [--profile]

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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ACTION, lockstep_ceiling, print_table  # noqa: E402 - after sys.path gets the helpers' folder


def _user(url: str, n: int):
    try:  # a checkout from before the layered layout (tried first: an editable install may resolve both)
        from tau2_gym.users.openai_user import OpenAIUserSimulator
    except ImportError:
        from tau2_gym.players.users.openai_user import OpenAIUserSimulator
    return OpenAIUserSimulator(model="stub", base_url=url, max_concurrency=n, cache="off", max_retries=0)


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:"))


def child(n: int, url: str, episodes_per_env: int, profile: bool) -> dict:
    import gymnasium as gym

    import tau2_gym  # noqa: F401 - registers the ids

    vec = gym.make_vec("tau2/airline-v0", num_envs=n, user=_user(url, n), max_steps=400)
    if profile:
        import yappi

        yappi.set_clock_type("cpu")
        yappi.start()
    rss0 = _rss()
    c0, t0 = time.process_time(), time.perf_counter()
    vec.reset(seed=0)
    target, finished, steps = n * episodes_per_env, 0, 0
    while finished < target:
        _, _, terms, truncs, _ = vec.step([ACTION] * n)
        steps += n
        finished += int((terms | truncs).sum())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"wall": wall, "cpu": cpu, "steps": steps, "episodes": finished, "requests": vec.unwrapped.user_requests}
    out["kib_per_episode"] = (_rss() - rss0) / 1024 / n  # N live episodes (and their sockets) over the loaded env
    if profile:
        yappi.stop()
        stats = sorted(yappi.get_func_stats(), key=lambda s: -s.tsub)[:30]
        out["profile"] = [
            (s.tsub / steps * 1e6, s.ttot / steps * 1e6, s.ncall, f"{s.module}:{s.lineno}({s.name})") for s in stats
        ]
    vec.close()
    return out


def _spawn(args: list[str], tree: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, cwd=tree, timeout=7200
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{args} in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--latency", type=float, nargs="*", default=[0.2, 1.0], help="seconds; one, or one per size")
    parser.add_argument("--turns", type=int, default=6, help="customer turns before the stub says ###STOP###")
    parser.add_argument(
        "--episodes-per-env", type=int, default=16, help="episodes per sub-env (the rollout bench's 16 per slot)"
    )
    parser.add_argument("--ceiling-rounds", type=int, default=20, help="rounds of the stub-ceiling client")
    parser.add_argument("--compare", default=None, help="another checkout's root, measured in the same run")
    parser.add_argument("--profile", action="store_true", help="print the child's top functions (needs yappi)")
    parser.add_argument("--child", type=int, default=None)
    parser.add_argument("--ceiling", type=int, default=None)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.url, args.episodes_per_env, args.profile)))
        return
    if args.ceiling is not None:
        print(json.dumps(lockstep_ceiling(args.ceiling, args.url, args.ceiling_rounds, _user)))
        return
    latencies = args.latency if len(args.latency) == len(args.sizes) else [args.latency[0]] * len(args.sizes)

    from openai_stub import AsyncOpenAIStub

    latency = {"s": 0.0}

    def reply(body: dict, k: int) -> dict:
        said = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return {
            "delay": latency["s"],
            "then": "###STOP###" if said >= args.turns else f"Yes, and one more thing ({said}).",
        }

    trees = [("this checkout", ROOT)] + ([("--compare", Path(args.compare).resolve())] if args.compare else [])
    rows = []
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    with AsyncOpenAIStub(reply) as server:
        for n, lat in zip(args.sizes, latencies):
            latency["s"] = lat
            limit = n / lat
            ceil = _spawn(
                ["--ceiling", str(n), "--url", server.base_url, "--ceiling-rounds", str(args.ceiling_rounds)], ROOT
            )
            top = ceil["requests"] / ceil["wall"]
            rows.append(
                (
                    f"N={n}, {lat * 1000:.0f} ms: stub ceiling, raw lockstep client (% of limit {limit:,.0f}/s)",
                    f"{top:,.0f}/s ({top / limit:.1%})",
                    "-",
                    "-",
                )
            )
            for label, tree in trees:
                cmd = ["--child", str(n), "--url", server.base_url, "--episodes-per-env", str(args.episodes_per_env)]
                r = _spawn(cmd + (["--profile"] if args.profile else []), tree)
                rate = r["requests"] / r["wall"]
                rows.append(
                    (
                        f"N={n} {label}: customer requests/s (% of limit; % of stub ceiling)",
                        f"{rate:,.0f} ({rate / limit:.1%}; {rate / top:.1%})",
                        "-",
                        "-",
                    )
                )
                rows.append(
                    (
                        f"N={n} {label}: CPU per agent step / per request",
                        f"{r['cpu'] / r['steps'] * 1e6:,.0f} µs / {r['cpu'] / r['requests'] * 1e6:,.0f} µs",
                        "-",
                        "-",
                    )
                )
                rows.append(
                    (
                        f"N={n} {label}: RSS per live episode (growth over the loaded env, end of run)",
                        f"{r.get('kib_per_episode', float('nan')):,.1f} KiB",
                        "-",
                        "-",
                    )
                )
                rows.append(
                    (
                        f"N={n} {label}: episodes/s",
                        f"{r['episodes'] / r['wall']:,.1f} ({r['episodes']} in {r['wall']:.1f} s)",
                        "-",
                        "-",
                    )
                )
                if r.get("profile"):
                    print(f"\nN={n} {label}: top functions by own CPU time, µs per agent step (own, cumulative, calls)")
                    for own, cum, calls, name in r["profile"]:
                        print(f"  {own:8.1f} {cum:9.1f} {calls:9d}  {name}")
                print(f"N={n} {label} done (load average {os.getloadavg()[0]:.2f})", flush=True)
    print_table("Vector env with an LLM customer (stub server; limit = N / latency)", rows)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
