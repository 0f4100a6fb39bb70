"""The OpenEnv server's cost (``tau2-gym serve``) over localhost WebSocket, against the in-process env in the same run.

The server runs in its own process (``tau2-gym serve tau2/airline-v0``); the clients are OpenAI-free: OpenEnv's
``EnvClient`` (``tau2_gym.frameworks.openenv.Tau2Client``) in this process, driving the oracle's actions (the gold
actions, then the communicated info), so every step is env work and wire, no model. Printed:

- step latency, median and p99, in-process ``env.step`` vs a served ``client.step`` (one session, sequential), and
  the difference: what serving adds per step;
- episodes/s and steps/s with 1, 64 and 1,000 concurrent sessions in one server process (each session runs
  oracle episodes back to back), and the in-process env's episodes/s on one thread; beside it, the steps/s that
  the same number of sessions would ask for if each step waited on a 200 ms LLM call (the server keeps up when
  its steps/s is above that);
- the server process's CPU time per step during those runs, and the steps/s one server core could sustain at that
  cost (the capacity to hold against the 200 ms figure when the clients, not the server, limit the measured rate);
- the server's resident memory per session, from its RSS with N sessions each mid-episode (after reset) vs none.

Client and server share this machine's cores, so the concurrent figures are a floor for a server with cores of
its own.

    python bench/bench_openenv.py [--sessions 1 64 1000] [--episodes 200] [--latency-episodes 100] [--workers 1 2]
                                   [--floor] [--compare DIR --rounds K] [--loops asyncio uvloop --rounds K]

``--floor`` also serves an env that does nothing on the same stack (OpenEnv's app, the guard, uvicorn, the wire
types) and prints its server CPU per step: what serving costs whatever the env does. ``--workers`` runs the server
with that many processes (``tau2-gym serve --workers N``), one set of rows each; the server CPU and the RSS growth
are summed over the processes.

``--compare DIR --rounds K`` measures the server of another checkout of tau2-gym (its package first on the server's
path) against this one's, one process each, the two alternated K times (the order swapped every round), and prints
each one's server CPU per step: every round's figure and the median. The machine's drift between runs is larger
than many changes; alternating pairs is what makes a small one visible. ``--loops A B --rounds K`` alternates this
checkout's server on two event loops the same way (``tau2-gym serve --loop``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import gymnasium as gym

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import fmt_bytes, fmt_time, in_tree  # noqa: E402 - after sys.path gets the helpers' folder

import tau2_gym  # noqa: E402,F401 - registers the ids
from tau2_gym.frameworks.openenv import Tau2Client  # noqa: E402
from tau2_gym.players.agents.scripted import OracleAgent  # noqa: E402

ENV_ID = "tau2/airline-v0"


def oracle_plans(env) -> dict[str, list]:
    """Every task's oracle actions (fixed at reset: the oracle does not read tool results)."""
    plans = {}
    for task in env.unwrapped.tasks:
        agent = OracleAgent()
        agent.reset(task, {"solo": False, "domain": env.unwrapped.config.domain})
        plans[task.id] = [agent.act() for _ in range(len(agent._plan) + 10)]  # then the closing text
    return plans


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def rss(pid: int) -> int:
    """Resident memory of a process and its live children (a session's growth lands in the worker that holds it)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:")), 0)
        except FileNotFoundError:
            continue
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its live children (the workers ``--workers`` forks)."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def start_server(
    max_sessions: int, workers: int = 1, tree: Optional[Path] = None, loop: Optional[str] = None
) -> tuple[subprocess.Popen, str]:
    """``tau2-gym serve`` in a process of its own; ``tree``: another checkout whose package it runs; ``loop``: its
    ``--loop`` (None: the server's default)."""
    return _start(
        [sys.executable, "-m", "tau2_gym.cli", "serve", ENV_ID, "--port", "0"]
        + ["--max-sessions", str(max_sessions), "--idle-timeout", "0"]
        + (["--workers", str(workers)] if workers > 1 else [])
        + (["--loop", loop] if loop else []),
        tree,
    )


def _start(cmd: list[str], tree: Optional[Path] = None) -> tuple[subprocess.Popen, str]:
    env = in_tree(tree, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("the server did not start")


def in_process_latency(env, plans: dict, episodes: int) -> tuple[list[float], float]:
    """Per-step wall times of env.step, and episodes/s, over `episodes` oracle episodes on one thread."""
    ids = list(plans)
    times: list[float] = []
    t0 = time.perf_counter()
    for i in range(episodes):
        tid = ids[i % len(ids)]
        env.reset(seed=i, options={"task_id": tid})
        for action in plans[tid]:
            s = time.perf_counter()
            _, _, term, trunc, _ = env.step(action)
            times.append(time.perf_counter() - s)
            if term or trunc:
                break
    return times, episodes / (time.perf_counter() - t0)


async def run_episode(client: Tau2Client, plans: dict, tid: str, seed: int, times: list | None) -> int:
    await client.reset(task_id=tid, seed=seed)
    steps = 0
    for action in plans[tid]:
        s = time.perf_counter()
        result = await client.step(action)
        if times is not None:
            times.append(time.perf_counter() - s)
        steps += 1
        if result.done:
            break
    return steps


async def served_latency(url: str, plans: dict, episodes: int) -> list[float]:
    ids = list(plans)
    times: list[float] = []
    async with Tau2Client(url) as client:
        for i in range(3):  # warm-up
            await run_episode(client, plans, ids[i % len(ids)], i, None)
        for i in range(episodes):
            await run_episode(client, plans, ids[i % len(ids)], i, times)
    return times


async def served_throughput(url: str, plans: dict, sessions: int, episodes: int, pid: int) -> dict:
    """`sessions` clients run `episodes` oracle episodes between them; also the server's RSS per live session."""
    ids = list(plans)
    clients = [Tau2Client(url, message_timeout_s=600) for _ in range(sessions)]
    base = rss(pid)
    for start in range(0, sessions, 100):  # connect in waves: a 1,000-connection burst overflows no backlog
        await asyncio.gather(*(c.connect() for c in clients[start : start + 100]))
    await asyncio.gather(*(c.reset(task_id=ids[i % len(ids)], seed=i) for i, c in enumerate(clients)))
    per_session = (rss(pid) - base) / sessions
    counter = iter(range(episodes))
    steps_total = 0

    async def worker(client: Tau2Client) -> None:
        nonlocal steps_total
        for i in counter:
            steps = await run_episode(client, plans, ids[i % len(ids)], 1000 + i, None)
            steps_total += steps

    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    elapsed = time.perf_counter() - t0
    server_cpu = cpu_seconds(pid) - cpu0
    await asyncio.gather(*(c.close() for c in clients))
    return {
        "episodes_per_s": episodes / elapsed,
        "steps_per_s": steps_total / elapsed,
        "rss_per_session": per_session,
        "server_cpu_per_step": server_cpu / max(1, steps_total),
    }


def serve_floor() -> None:
    """The server's floor: the same stack (OpenEnv's app behind the guard, uvicorn, the wire types) around an env
    that does nothing (a one-message observation; done after four steps). Prints its URL, serves until killed."""
    import socket

    import uvicorn
    from openenv.core.env_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import ConcurrencyConfig

    from tau2_gym.frameworks.openenv.guard import Guard
    from tau2_gym.frameworks.openenv.models import Tau2Action, Tau2Observation, Tau2State

    class Nothing(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True
        REQUIRES_SINGLE_THREAD_EXECUTOR = True

        def __init__(self) -> None:
            super().__init__()
            self.steps = 0

        def reset(self, seed=None, episode_id=None, **kwargs):
            self.steps = 0
            return Tau2Observation.model_construct(messages=[{"role": "user", "content": "hi"}], done=False)

        async def reset_async(self, seed=None, episode_id=None, **kwargs):
            return self.reset()

        def step(self, action, timeout_s=None, **kwargs):
            self.steps += 1
            done = self.steps >= 4
            return Tau2Observation.model_construct(messages=[{"role": "user", "content": "ok"}], done=done, reward=0.0)

        async def step_async(self, action, timeout_s=None, **kwargs):
            return self.step(action)

        @property
        def state(self):
            return Tau2State()

    app = create_app(
        Nothing,
        Tau2Action,
        Tau2Observation,
        env_name="nothing",
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=2048, session_timeout=None),
        state_cls=Tau2State,
    )
    guarded = Guard(app, token=None, max_message_bytes=1 << 20, idle_timeout=None)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"serving http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(guarded, log_level="warning", ws_per_message_deflate=False, backlog=2048)
    uvicorn.Server(config).run(sockets=[sock])


def compare(args: argparse.Namespace, plans: dict) -> None:
    """Server CPU per step of this checkout and ``args.compare``'s (or of this checkout's on ``args.loops``),
    alternated ``args.rounds`` times."""
    if args.loops:
        servers = [(f"--loop {loop}", ROOT, loop) for loop in args.loops]
    else:
        servers = [("this checkout", ROOT, None), ("--compare", Path(args.compare).resolve(), None)]
    cpu: dict[str, dict[int, list[float]]] = {name: {n: [] for n in args.sessions} for name, _, _ in servers}
    for r in range(args.rounds):
        for name, tree, loop in servers if r % 2 == 0 else servers[::-1]:
            proc, url = start_server(max(args.sessions) + 8, 1, tree, loop)
            try:
                for n in args.sessions:
                    out = asyncio.run(served_throughput(url, plans, n, max(args.episodes, 2 * n), proc.pid))
                    cpu[name][n].append(out["server_cpu_per_step"])
            finally:
                proc.terminate()
                proc.wait(10)
    print(f"\n{ENV_ID}, oracle actions, one server process; {args.rounds} alternated rounds (order swapped each round)")
    print("\nserver           sessions  server CPU/step (median)  every round")
    for name, tree, _ in servers:
        for n in args.sessions:
            values = cpu[name][n]
            each = ", ".join(fmt_time(v) for v in values)
            print(f"{name:<16} {n:>8} {fmt_time(statistics.median(values)):>25}  {each}  ({tree})")


def main() -> None:
    if sys.argv[1:] == ["--serve-floor"]:
        serve_floor()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 64, 1000])
    parser.add_argument("--episodes", type=int, default=200, help="episodes per concurrency (at least 2/session)")
    parser.add_argument("--latency-episodes", type=int, default=100)
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="server processes (tau2-gym serve --workers); one row each"
    )
    parser.add_argument(
        "--floor", action="store_true", help="also serve an env that does nothing on the same stack (the floor)"
    )
    parser.add_argument("--compare", default=None, help="another checkout's root: its server against this one's")
    parser.add_argument(
        "--loops", nargs=2, default=None, metavar=("A", "B"), help="this checkout's server on two event loops"
    )
    parser.add_argument("--rounds", type=int, default=4, help="alternated rounds of --compare or --loops")
    args = parser.parse_args()

    env = gym.make(ENV_ID).unwrapped
    plans = oracle_plans(env)
    if args.compare or args.loops:
        compare(args, plans)
        return
    local_times, local_eps = in_process_latency(env, plans, args.latency_episodes)
    for workers in args.workers:
        proc, url = start_server(max(args.sessions) + 8, workers)
        try:
            served_times = asyncio.run(served_latency(url, plans, args.latency_episodes))
            head = f"{ENV_ID}, oracle actions, {len(served_times)} steps; server {url}"
            print(f"\n{head} (pid {proc.pid}, {workers} workers)")
            print("\nstep latency        median      p99")
            lm, sm = statistics.median(local_times), statistics.median(served_times)
            print(f"  in-process     {fmt_time(lm):>10} {fmt_time(p99(local_times)):>10}")
            print(f"  served (ws)    {fmt_time(sm):>10} {fmt_time(p99(served_times)):>10}")
            print(f"  added by serving {fmt_time(sm - lm):>8}")
            print(f"\nin-process: {local_eps:.0f} episodes/s on one thread")
            print(
                "\nworkers sessions  episodes/s   steps/s  server CPU/step  steps/s of one server core"
                "  steps/s a 200 ms LLM would ask  RSS/session"
            )
            for n in args.sessions:
                episodes = max(args.episodes, 2 * n)
                out = asyncio.run(served_throughput(url, plans, n, episodes, proc.pid))
                cpu = out["server_cpu_per_step"]
                print(
                    f"{workers:>7} {n:>8} {out['episodes_per_s']:>11.1f} {out['steps_per_s']:>9.0f} {fmt_time(cpu):>16}"
                    f" {1 / cpu if cpu else float('inf'):>27.0f} {n / 0.2:>32.0f}"
                    f"  {fmt_bytes(out['rss_per_session']):>11}",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait(10)
    if args.floor:
        proc, url = _start([sys.executable, __file__, "--serve-floor"])
        try:
            print("\nthe floor: the same server stack around an env that does nothing (four steps an episode)")
            for n in args.sessions:
                out = asyncio.run(served_throughput(url, plans, n, max(args.episodes, 2 * n), proc.pid))
                cpu = out["server_cpu_per_step"]
                rate = out["steps_per_s"]
                print(f"  {n:>5} sessions: {rate:>7.0f} steps/s, server CPU/step {fmt_time(cpu)}", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
