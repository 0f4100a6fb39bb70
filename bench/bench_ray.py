"""Rollouts on Ray actors vs the single-process collector, measured in one run on this machine.

    python bench/bench_ray.py                    # all three parts
    python bench/bench_ray.py --parts scripted   # scripted, serving, vector

1. ``scripted``: oracle agent and oracle user on airline (CPU-bound: the env, the turn loop and the scoring are
   all the work). ``collect`` in this process, then ``collect_ray`` with 1 and 2 actors on a local Ray runtime
   (``ray.init(num_cpus=2)``), best of ``--repeat`` runs by wall time. Actor start-up (worker process, imports,
   domain load) is timed apart, up to the moment every actor answers; episodes/s count the episodes after
   that. "driver CPU" is this process's CPU time (all its threads, Ray's included) per episode; "total CPU"
   adds the actors' (sampled from /proc); "Ray's extra CPU" is total minus the single process's. The
   "driver only" rows run collect_ray's own hand-out/commit loop against an actor that returns a canned
   record (2 KiB as these episodes, ~50 KiB as a long LLM episode; the last with ``--wide`` in flight, each
   "episode" 2 s): the single writer's cost per episode, which bounds a cluster's episodes/s.
2. ``serving``: agent and user behind local OpenAI-compatible stubs that sleep ``--latency`` s per request (own
   process), mock domain: the server-bound case. Single process with concurrency 2C vs 2 actors x C.
3. ``vector``: would a Ray-backed ``Tau2VectorEnv`` pay? The oracle workload of ``bench_vector.py`` stepped
   (a) by one local ``Tau2VectorEnv(N)`` and (b) by two actors each holding ``Tau2VectorEnv(N/2)``, stepped in
   parallel by the driver (actions out, observations/rewards/infos back). Wall time per vector step.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import time
from functools import partial
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import fmt_time


def _ray():
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live process, from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        parts = fh.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class _Clock:
    """on_pool hook: waits until every actor answers, noting when (start-up ends, episodes start counting);
    then samples the actors' CPU time every 10 ms (from /proc, until they are gone) for "total CPU"."""

    def __init__(self) -> None:
        self.ready = None
        self.cpu0: dict[int, float] = {}
        self.cpu: dict[int, float] = {}

    def __call__(self, pool) -> None:
        import threading

        ray = _ray()
        pids = [i["pid"] for i in ray.get([a.info.remote() for a in pool.actors.values()])]
        self.ready = time.perf_counter()
        for pid in pids:
            self.cpu0[pid] = self.cpu[pid] = _proc_cpu(pid)

        def sample() -> None:
            live = set(pids)
            while live:
                for pid in list(live):
                    try:
                        self.cpu[pid] = _proc_cpu(pid)
                    except (OSError, IndexError, ValueError):
                        live.discard(pid)
                time.sleep(0.01)

        self.sampler = threading.Thread(target=sample, daemon=True)
        self.sampler.start()

    def actor_cpu(self) -> float:
        self.sampler.join(5)
        return sum(self.cpu[p] - self.cpu0[p] for p in self.cpu0)


def _single(run: dict, out: str) -> tuple[float, float]:
    from tau2_gym.runner.collect import collect

    if os.path.exists(out):
        os.remove(out)
        os.remove(out + "l")
    c0, t0 = time.process_time(), time.perf_counter()
    rep = collect(None, "oracle", None, output=out, **run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert rep.ran == len(rep.simulations) and rep.mean_reward == 1.0
    return wall, cpu


def _on_ray(run: dict, out: str, actors: int) -> tuple[float, float, float, float, dict]:
    """(start-up s, wall s after start-up, driver CPU s, actors' CPU s, a record) of one collect_ray."""
    from tau2_gym.runner.ray import collect_ray

    for path in (out, out + "l"):
        if os.path.exists(path):
            os.remove(path)
    clock = _Clock()
    t0 = time.perf_counter()
    c0 = None

    def hook(pool):
        nonlocal c0
        clock(pool)
        c0 = time.process_time()  # the driver's CPU from the first hand-out on

    rep = collect_ray(None, "oracle", None, num_actors=actors, on_pool=hook, output=out, **run)
    end = time.perf_counter()
    cpu = time.process_time() - c0
    assert rep.ran == len(rep.simulations) and rep.mean_reward == 1.0
    return clock.ready - t0, end - clock.ready, cpu, clock.actor_cpu(), rep.simulations[0]


def scripted(args) -> None:
    from tau2_gym.runner.collect import collect

    run = dict(domain="airline", num_tasks=50, num_trials=args.trials, progress=False, concurrency=args.concurrency)
    n = 50 * args.trials
    rows = []
    with TemporaryDirectory() as tmp:
        collect(None, "oracle", None, **{**run, "num_trials": 1, "num_tasks": 5})  # warm: domain loaded, imports
        single_wall, single_cpu = min(_single(run, f"{tmp}/single.json") for _ in range(args.repeat))
        rows.append(
            (
                "single process (collect)",
                "-",
                f"{n / single_wall:.1f}",
                fmt_time(single_wall / n),
                fmt_time(single_cpu / n),
                fmt_time(single_cpu / n),
                "-",
            )
        )
        _ray()
        for actors in (1, 2):
            start, wall, cpu, actor_cpu, record = min(
                (_on_ray(run, f"{tmp}/ray{actors}.json", actors) for _ in range(args.repeat)), key=lambda r: r[1]
            )
            total = cpu + actor_cpu
            rows.append(
                (
                    f"Ray, {actors} actor{'s' * (actors > 1)}",
                    f"{start:.2f} s",
                    f"{n / wall:.1f}",
                    fmt_time(wall / n),
                    fmt_time(cpu / n),
                    fmt_time(total / n),
                    fmt_time((total - single_cpu) / n),
                )
            )
        rows.append(transport(record, tmp))
        big = dict(record)
        while len(json.dumps(big)) < 48 * 1024:  # a long LLM episode's size: many turns of text
            big["messages"] = list(big["messages"]) * 2
        rows.append(transport(big, tmp, n=1000))
        rows.append(transport(big, tmp, n=3 * args.wide, window=args.wide, delay=2.0))
    print(
        f"\n1. scripted oracle episodes, airline: {n} episodes (50 tasks x {args.trials} trials), "
        f"concurrency {args.concurrency} per collector; best of {args.repeat} by wall time; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )
    _table(
        (
            "run",
            "actor start-up",
            "episodes/s",
            "wall / episode",
            "driver CPU / ep",
            "total CPU / ep",
            "Ray's extra CPU / ep",
        ),
        rows,
    )


class Echo:
    """An actor that hands back a canned episode record (after ``delay`` s): the driver's cost, nothing else."""

    def __init__(self, record: dict, delay: float) -> None:
        self.record, self.delay = record, delay

    def info(self) -> dict:
        return {"pid": os.getpid()}

    async def run(self, task_id: str, trial: int, seed: int) -> dict:
        if self.delay:
            import asyncio

            await asyncio.sleep(self.delay)
        return dict(self.record, seed=seed)


def transport(record: dict, tmp: str, n: int = 3000, window: int = 64, delay: float = 0.0) -> tuple:
    """The driver's share of an episode through collect_ray's own loop (``runner.ray._stream``): hand-out,
    result, the log append (JSON lines, written and fsync'd once); ``window`` episodes in flight on one actor that does
    no
    work but wait ``delay`` s."""
    import asyncio
    import collections

    from tau2_gym.runner.log import EpisodeLog
    from tau2_gym.runner.ray import ActorPool, _stream

    ray = _ray()
    remote = ray.remote(Echo).options(max_concurrency=window, num_cpus=1)
    pool = ActorPool(ray, lambda: remote.remote(record, delay), 1, window, 0)
    ray.get([a.info.remote() for a in pool.actors.values()])
    path = Path(tmp) / "echo.jsonl"
    if path.exists():
        path.unlink()
    log = EpisodeLog(path)
    queue = collections.deque(("0", 0, k) for k in range(n))
    c0, t0 = time.process_time(), time.perf_counter()
    finished: list = []
    asyncio.run(_stream(ray, pool, queue, finished.append))
    log.write(finished)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    log.close()
    assert path.read_bytes().count(b"\n") == n
    pool.kill_all()
    size = len(json.dumps(record))
    return (
        f"driver only: {size / 1024:.0f} KiB records, {window} in flight",
        "-",
        f"{n / wall:.0f}",
        fmt_time(wall / n),
        fmt_time(cpu / n),
        "-",
        "-",
    )


def _serve(lat: float, stop_at: int, conn) -> None:
    from openai_stub import OpenAIStub

    def agent_reply(body, n):
        return {"delay": lat, "then": "Could you tell me more?"}

    def user_reply(body, n):
        text = "###STOP###" if len(body["messages"]) >= stop_at else f"Please help me (turn {len(body['messages'])})."
        return {"delay": lat, "then": text}

    with OpenAIStub(agent_reply) as agent_srv, OpenAIStub(user_reply) as user_srv:
        conn.send((agent_srv.base_url, user_srv.base_url))
        conn.recv()


def serving(args) -> None:
    from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator
    from tau2_gym.runner.collect import collect
    from tau2_gym.runner.ray import collect_ray

    lat, conc, turns = args.latency, args.serving_concurrency, 3
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(lat, 2 * turns + 1, child), daemon=True)
    server.start()
    agent_url, user_url = parent.recv()
    trials = max(1, -(-args.serving_episodes // 10))
    n = 10 * trials
    run = dict(domain="mock", task_split=None, num_trials=trials, progress=False, max_retries=0, evaluate=False)
    rows = []

    def players(c):
        return (
            partial(
                OpenAIAgentPolicy,
                model="stub-model",
                base_url=agent_url,
                max_concurrency=c,
                max_retries=0,
                api_key_env=None,
            ),
            partial(
                OpenAIUserSimulator,
                model="stub-model",
                base_url=user_url,
                max_concurrency=c,
                max_retries=0,
                api_key_env=None,
            ),
        )

    pf, uf = players(2 * conc)
    policy, user = pf(), uf()
    c0, t0 = time.process_time(), time.perf_counter()
    rep = collect(None, policy, user, concurrency=2 * conc, **run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    policy.close()
    user.close()
    calls = sum(len(r["messages"]) - 1 for r in rep.simulations) / n  # LLM calls per episode (messages after the first)
    limit = 2 * conc / (calls * lat)
    rows.append(
        (
            f"single process, concurrency {2 * conc}",
            "-",
            f"{n / wall:.2f}",
            f"{100 * n / wall / limit:.0f}%",
            fmt_time(cpu / n),
        )
    )
    assert rep.failed == 0, rep.failed
    _ray()
    pf, uf = players(conc)
    clock = _Clock()
    c0, t0 = time.process_time(), time.perf_counter()
    rep = collect_ray(None, pf, uf, num_actors=2, concurrency=conc, on_pool=clock, **run)
    wall, cpu = time.perf_counter() - clock.ready, time.process_time() - c0
    assert rep.failed == 0, rep.failed
    rows.append(
        (
            f"Ray, 2 actors x concurrency {conc}",
            f"{clock.ready - t0:.2f} s",
            f"{n / wall:.2f}",
            f"{100 * n / wall / limit:.0f}%",
            fmt_time(cpu / n),
        )
    )
    parent.send("stop")
    server.join(5)
    print(
        f"\n2. server-bound: agent and user LLM stubs, {lat * 1000:.0f} ms per request, mock domain, {n} episodes of "
        f"{calls:.0f} sequential calls; limit {limit:.2f} episodes/s at {2 * conc} in flight"
    )
    _table(("run", "actor start-up", "episodes/s", "% of limit", "driver CPU / episode"), rows)


class VecActor:
    """A Tau2VectorEnv in an actor (the prototype of a Ray-backed vector env)."""

    def __init__(self, n: int) -> None:
        import gymnasium as gym

        import tau2_gym  # noqa: F401 - registers the envs

        logging.getLogger("tau2_gym").setLevel(logging.ERROR)
        self.vec = gym.make_vec("tau2/airline-v0", num_envs=n)

    def reset(self, seed: int):
        return self.vec.reset(seed=seed)

    def step(self, actions):
        return self.vec.step(actions)


def _drive(reset, step, n: int, min_steps: int) -> tuple[float, int, int]:
    """Oracle agents stepping envs through ``reset``/``step``; (env wall seconds, vector steps, episodes)."""
    import numpy as np

    from tau2_gym.players.agents.scripted import OracleAgent

    def agent(task):
        a = OracleAgent()
        a.reset(task, {"domain": "airline", "solo": False})
        return a

    _, infos = reset()
    agents = [agent(infos["task"][i]) for i in range(n)]
    prev = np.zeros(n, dtype=bool)
    wall, episodes = 0.0, 0
    for _ in range(min_steps):
        actions = [a.act() for a in agents]
        t0 = time.perf_counter()
        _, rew, term, trunc, infos = step(actions)
        wall += time.perf_counter() - t0
        done = term | trunc
        episodes += int(done.sum())
        for i in np.nonzero(prev)[0]:
            agents[i] = agent(infos["task"][i])
        prev = done
    return wall, min_steps, episodes


def vector(args) -> None:
    import gymnasium as gym
    import numpy as np

    import tau2_gym  # noqa: F401 - registers the envs

    ray = _ray()
    rows = []
    for n in args.vector_sizes:
        vec = gym.make_vec("tau2/airline-v0", num_envs=n)
        local, steps, eps = _drive(lambda: vec.reset(seed=0), vec.step, n, args.vector_steps)
        vec.close()
        half = n // 2
        remote = ray.remote(VecActor).options(num_cpus=1)
        actors = [remote.remote(half), remote.remote(n - half)]

        def reset():
            parts = ray.get([a.reset.remote(seed=k * half) for k, a in enumerate(actors)])
            return None, {"task": np.concatenate([p[1]["task"] for p in parts])}

        def step(actions):
            parts = ray.get([actors[0].step.remote(actions[:half]), actors[1].step.remote(actions[half:])])
            infos = {"task": np.concatenate([p[4]["task"] for p in parts])}
            return (
                [o for p in parts for o in p[0]],
                *(np.concatenate([p[k] for p in parts]) for k in (1, 2, 3)),
                infos,
            )

        ray_wall, _, ray_eps = _drive(reset, step, n, args.vector_steps)
        for a in actors:
            ray.kill(a)
        rows.append(
            (
                f"N={n}",
                fmt_time(local / steps),
                fmt_time(ray_wall / steps),
                f"{local / ray_wall:.2f}x",
                f"{eps} / {ray_eps}",
            )
        )
    print(
        f"\n3. vector env: oracle workload, {args.vector_steps} vector steps; local Tau2VectorEnv(N) vs 2 Ray actors "
        "x Tau2VectorEnv(N/2) stepped in parallel"
    )
    _table(("size", "local / vector step", "Ray 2 actors / vector step", "speed-up", "episodes local / Ray"), rows)


def _table(header, rows) -> None:
    widths = [max(len(str(r[i])) for r in list(rows) + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--parts", nargs="+", default=["scripted", "serving", "vector"], choices=["scripted", "serving", "vector"]
    )
    ap.add_argument("--trials", type=int, default=8, help="scripted: trials of the 50 airline tasks (default: 8)")
    ap.add_argument("--concurrency", type=int, default=32, help="scripted: episodes in flight per collector")
    ap.add_argument("--wide", type=int, default=4096, help="scripted: in flight in the wide driver-only row")
    ap.add_argument("--repeat", type=int, default=3, help="scripted: runs per row, the fastest kept (default: 3)")
    ap.add_argument("--latency", type=float, default=0.05, help="serving: seconds per LLM request (default: 0.05)")
    ap.add_argument("--serving-concurrency", type=int, default=8, help="serving: in flight per actor (default: 8)")
    ap.add_argument("--serving-episodes", type=int, default=80)
    ap.add_argument("--vector-sizes", type=int, nargs="+", default=[8, 64, 512])
    ap.add_argument("--vector-steps", type=int, default=100)
    args = ap.parse_args()
    logging.getLogger("tau2_gym").setLevel(logging.ERROR)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    for part in args.parts:
        globals()[part](args)
    import ray

    if ray.is_initialized():
        ray.shutdown()


if __name__ == "__main__":
    main()
