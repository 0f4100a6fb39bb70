"""Vector-env rollout with an LLM customer behind a local stub server: customer requests/s against the limit.

    python bench/bench_vector_llm.py [--sizes 32 256] [--latency 0.2] [--compare /path/to/other/checkout]

``gym.make_vec("tau2/airline-v0", N, user=OpenAIUserSimulator(...))``: every agent step is a text turn, so every
step waits for N customer replies, which the vector env requests as one batch. The stub server (tests'
``AsyncOpenAIStub``, in this process; the measured env runs in a child process) answers each request after
``--latency`` seconds and stops the conversation after ``--turns`` customer turns. With N episodes in flight and
every request taking the latency, no client exceeds N / latency requests/s -- the limit; the table gives the
measured rate and its share of the limit, and the child's CPU time per env step.

``--compare DIR`` measures another checkout of tau2-gym in the same run (its package on ``PYTHONPATH``), e.g. the
commit before a change, against the same server and workload.
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

from _common import print_table  # noqa: E402 - after sys.path gets the helpers' folder


def child(n: int, url: str, episodes_per_env: int) -> dict:
    import gymnasium as gym

    import tau2_gym  # noqa: F401 - registers the ids

    try:  # a checkout from before the layered layout (tried first: an editable install may resolve both)
        from tau2_gym.users.openai_user import OpenAIUserSimulator
    except ImportError:
        from tau2_gym.players.users.openai_user import OpenAIUserSimulator
    user = OpenAIUserSimulator(model="stub", base_url=url, max_concurrency=n, cache="off", max_retries=0)
    vec = gym.make_vec("tau2/airline-v0", num_envs=n, user=user, max_steps=400)
    c0, t0 = time.process_time(), time.perf_counter()
    vec.reset(seed=0)
    target, finished, steps = n * episodes_per_env, 0, 0
    while finished < target:
        _, _, terms, truncs, _ = vec.step(["Could you tell me more about that?"] * n)
        steps += n
        finished += int((terms | truncs).sum())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    requests = vec.unwrapped.user_requests
    vec.close()
    return {"wall": wall, "cpu": cpu, "steps": steps, "episodes": finished, "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[32, 256])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--turns", type=int, default=6, help="customer turns before the stub says ###STOP###")
    parser.add_argument("--episodes-per-env", type=int, default=3)
    parser.add_argument("--compare", default=None, help="another checkout's root, measured in the same run")
    parser.add_argument("--child", type=int, default=None)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.url, args.episodes_per_env)))
        return

    from openai_stub import AsyncOpenAIStub

    def reply(body: dict, k: int) -> dict:
        said = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return {
            "delay": args.latency,
            "then": "###STOP###" if said >= args.turns else f"Yes, and one more thing ({said}).",
        }

    trees = [("this checkout", ROOT)] + ([("--compare", Path(args.compare).resolve())] if args.compare else [])
    rows = []
    with AsyncOpenAIStub(reply) as server:
        for n in args.sizes:
            for label, tree in trees:
                env = dict(os.environ, PYTHONPATH=str(tree))
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        str(n),
                        "--url",
                        server.base_url,
                        "--episodes-per-env",
                        str(args.episodes_per_env),
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=tree,
                    timeout=3600,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"{label} N={n} failed:\n{proc.stderr[-3000:]}")
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                rate, limit = r["requests"] / r["wall"], n / args.latency
                rows.append(
                    (
                        f"N={n} {label}: customer requests/s (% of limit {limit:,.0f})",
                        f"{rate:,.0f} ({rate / limit:.1%})",
                        "-",
                        "-",
                    )
                )
                rows.append(
                    (f"N={n} {label}: env CPU per agent step", f"{r['cpu'] / r['steps'] * 1e6:,.0f} µs", "-", "-")
                )
    print_table(f"Vector env with an LLM customer (stub, {args.latency * 1000:.0f} ms per request)", rows)


if __name__ == "__main__":
    main()
