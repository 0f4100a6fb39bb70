"""Vector-env throughput and memory: many concurrent airline episodes in one process, scripted agent and user.

    python bench/bench_vector.py                 # sizes 1, 64, 1024, 10000; TAU2_REFERENCE_PYTHON=... adds upstream
    python bench/bench_vector.py --sizes 1 64    # fewer sizes

Each size runs in its own subprocess (so its peak RSS is its own) and plays two scripted workloads through
``gym.make_vec("tau2/airline-v0", num_envs=N)`` with NEXT_STEP autoreset:

* ``oracle``: the oracle agent performs each task's gold actions (writes included) and tells the customer the
  required facts; the oracle user opens with the task's request and stops -- short episodes (~4 agent
  actions), every one scored (replay + DB comparison), reward 1.0.
* ``lookup``: a longer conversation without writes -- per customer turn the agent makes two read calls
  (user details, reservation details / flight search) and then writes a text; the scripted customer answers
  8 times, then stops (~24 agent actions per episode, then scored).

Each workload also runs once through ``gym.make`` (row "N=1 (gym.make)"): a single episode at a time in the
plain env, as a user with one episode runs it, next to ``make_vec(num_envs=1)`` whose per-step Gymnasium
vector bookkeeping (one array and one mask per info key) is a large share of a step at N=1.

"env steps" are agent actions (sub-env steps); only the time inside ``VectorEnv.reset``/``step`` counts (the
scripted agents' own time does not), measured as process CPU time ("one core") and wall time, plus the cyclic
garbage collector's time between steps (a collection the agents' allocations trigger still scans the live
episodes; see ``GcClock``). Peak RSS is the
child's ``ru_maxrss``; "per live episode" is the RSS growth over the loaded domain (N >= 1024 only; smaller N
are within allocator noise), / N: right after resetting the N episodes, and at the peak (trajectories grown,
DB records copied on write, finished episodes' records held in the infos).

Upstream (same run, when TAU2_REFERENCE_PYTHON is set): tau2's ``AgentGymEnv`` plays the same oracle
episodes (agent actions and user replies recorded from ours; its user LLM call replaced by the recording), one
episode at a time as upstream allows; its per-episode wall time is set beside every oracle row of ours
(wall / episodes).
With TAU2_UPSTREAM_DATA_DIR both sides use that data.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_bytes, fmt_time, print_table, ratio, record_oracle, reference_python, run_upstream

SIZES = (1, 64, 1024, 10000)
LOOKUP_TURNS = 8


class GcClock:
    """Wall time the cyclic collector spends, wherever it runs. A collection triggered in the scripted agents'
    code (outside ``reset``/``step``) still scans the live episodes, so it is counted as env time too."""

    def __init__(self) -> None:
        import gc

        self.total = 0.0
        self._t = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t


def rss_mb() -> float:
    """Current RSS in MB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------- workloads


class LookupAgent:
    """Per customer turn: two read calls, then a text. Reads use ids from the airline DB (index-dependent)."""

    def __init__(self, ids: dict, k: int) -> None:
        self.ids, self.k, self.n = ids, k, 0

    def reset(self, task, info=None) -> None:
        self.n = 0

    def act(self, obs=None, info=None) -> dict:
        from tau2_gym.players.agents.scripted import call_message, text_message

        ids, k = self.ids, self.k + self.n
        phase = self.n % 3
        self.n += 1
        if phase == 0:
            return call_message("get_user_details", {"user_id": ids["users"][k % len(ids["users"])]}, f"c{self.n}")
        if phase == 1:
            if self.n % 2:
                return call_message(
                    "get_reservation_details",
                    {"reservation_id": ids["reservations"][k % len(ids["reservations"])]},
                    f"c{self.n}",
                )
            o, d, date = ids["routes"][k % len(ids["routes"])]
            return call_message("search_direct_flight", {"origin": o, "destination": d, "date": date}, f"c{self.n}")
        return text_message("I have checked your account and reservations. Anything else I should look at?")


def db_ids(domain) -> dict:
    data = domain.base_db.data
    users = list(data["users"])[:200]
    reservations = list(data["reservations"])[:200]
    routes = []
    for flight in list(data["flights"].values())[:200]:
        dates = list(flight["dates"])
        routes.append((flight["origin"], flight["destination"], dates[len(dates) // 2]))
    return {"users": users, "reservations": reservations, "routes": routes}


def child(n: int, workload: str, min_seconds: float, min_steps: int, data_dir, single: bool = False) -> dict:
    logging.getLogger("tau2_gym").setLevel(logging.ERROR)
    import gymnasium as gym
    import numpy as np

    import tau2_gym  # noqa: F401 - registers the envs
    from tau2_gym import load_domain
    from tau2_gym.players.agents.scripted import OracleAgent
    from tau2_gym.players.users.scripted import ScriptedUser

    dom = load_domain("airline", data_dir)
    dom.tasks()
    rss0 = rss_mb()
    kwargs = {"data_dir": data_dir}
    if workload == "lookup":
        ids = db_ids(dom)
        kwargs["user"] = ScriptedUser(["Hi, I need help with my trip."] + ["Thanks, please go on."] * LOOKUP_TURNS)

        def make_agent(i: int, task, info):
            a = LookupAgent(ids, i)
            a.reset(task, info)
            return a
    else:

        def make_agent(i: int, task, info):
            a = OracleAgent()
            a.reset(task, info)
            return a

    if single:
        return single_child(make_agent, kwargs, workload, min_seconds, min_steps, rss0)
    t0 = time.perf_counter()
    vec = gym.make_vec("tau2/airline-v0", num_envs=n, **kwargs)
    make_s = time.perf_counter() - t0
    c0, w0 = time.process_time(), time.perf_counter()
    obs, infos = vec.reset(seed=0)
    reset_cpu, reset_wall = time.process_time() - c0, time.perf_counter() - w0
    rss_live = rss_mb()
    info_one = {"domain": "airline", "solo": False}
    agents = [make_agent(i, infos["task"][i], info_one) for i in range(n)]
    prev = np.zeros(n, dtype=bool)
    env_cpu = env_wall = 0.0
    steps = episodes = vsteps = 0
    rewards = 0.0
    gc_clock = GcClock()
    gc_outside = 0.0  # collector time between steps (see GcClock)
    while vsteps < min_steps or env_wall + gc_outside < min_seconds:
        actions = [a.act() for a in agents]
        c0, w0 = time.process_time(), time.perf_counter()
        gc_outside += gc_clock.total
        obs, rew, term, trunc, infos = vec.step(actions)
        env_cpu += time.process_time() - c0
        env_wall += time.perf_counter() - w0
        gc_outside -= gc_clock.total
        vsteps += 1
        steps += n - int(prev.sum())  # autoreset steps take no action
        done = term | trunc
        episodes += int(done.sum())
        rewards += float(rew[done].sum())
        for i in np.nonzero(prev)[0]:
            agents[i] = make_agent(int(i), infos["task"][i], info_one)
        prev = done
    gc_outside += gc_clock.total  # (the running sum is "all collector time" minus "collector time in steps")
    u = vec.unwrapped
    return {
        "n": n,
        "workload": workload,
        "make_s": make_s,
        "reset_cpu": reset_cpu,
        "reset_wall": reset_wall,
        "env_cpu": env_cpu + gc_outside,
        "env_wall": env_wall + gc_outside,
        "gc_outside": gc_outside,
        "steps": steps,
        "episodes": episodes,
        "vsteps": vsteps,
        "mean_reward": rewards / episodes if episodes else None,
        "rss_before": rss0,
        "rss_live": rss_live,
        "peak": peak_mb(),
        "user_batches": u.user_batches,
        "user_requests": u.user_requests,
    }


def single_child(make_agent, kwargs: dict, workload: str, min_seconds: float, min_steps: int, rss0: float) -> dict:
    """One episode at a time through ``gym.make`` (what a user running a single episode has): the same
    workload, env time = time inside ``env.reset``/``env.step``."""
    import gymnasium as gym

    t0 = time.perf_counter()
    env = gym.make("tau2/airline-v0", **kwargs)
    make_s = time.perf_counter() - t0
    env_cpu = env_wall = 0.0
    steps = episodes = 0
    rewards = 0.0
    c0, w0 = time.process_time(), time.perf_counter()
    obs, info = env.reset(seed=0)
    reset_cpu, reset_wall = time.process_time() - c0, time.perf_counter() - w0
    env_cpu, env_wall = reset_cpu, reset_wall
    agent = make_agent(0, info["task"], info)
    gc_clock = GcClock()
    gc_outside = 0.0
    while steps < min_steps or env_wall + gc_outside < min_seconds:
        action = agent.act(obs, info)
        c0, w0 = time.process_time(), time.perf_counter()
        gc_outside += gc_clock.total
        obs, reward, term, trunc, info = env.step(action)
        if term or trunc:
            obs, info = env.reset()
        env_cpu += time.process_time() - c0
        env_wall += time.perf_counter() - w0
        gc_outside -= gc_clock.total
        steps += 1
        if term or trunc:
            episodes += 1
            rewards += float(reward)
            agent = make_agent(episodes, info["task"], info)
    gc_outside += gc_clock.total
    return {
        "n": 1,
        "workload": workload,
        "make_s": make_s,
        "reset_cpu": reset_cpu,
        "reset_wall": reset_wall,
        "env_cpu": env_cpu + gc_outside,
        "env_wall": env_wall + gc_outside,
        "gc_outside": gc_outside,
        "steps": steps,
        "episodes": episodes,
        "vsteps": steps,
        "mean_reward": rewards / episodes if episodes else None,
        "rss_before": rss0,
        "rss_live": rss_mb(),
        "peak": peak_mb(),
        "user_batches": 0,
        "user_requests": 0,
    }


# ------------------------------------------------------------------------------------------- upstream


def record_oracle_airline(n_tasks: int, data_dir) -> list[dict]:
    """Oracle episodes as upstream-gym action strings + the user's replies (for AgentGymEnv)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    return record_oracle("airline", data_dir, n=n_tasks)


UPSTREAM = """
import tau2.user.user_simulator as us
from tau2.gym.gym_agent import AgentGymEnv
from tau2.data_model.message import AssistantMessage, ToolCall
items = json.load(open(SCRIPTS))
times, rewards = [], []
for item in items:
    replies = iter(item["user"])
    def scripted(model=None, messages=None, tools=None, _r=replies, **kw):
        d = next(_r)
        calls = d.get("tool_calls")
        return AssistantMessage(role="assistant", content=d.get("content"), cost=0.0,
                                tool_calls=[ToolCall(**c) for c in calls] if calls else None)
    us.generate = scripted
    t0 = time.perf_counter()
    env = AgentGymEnv(domain="airline", task_id=item["task_id"])
    env.reset()
    for a in item["agent"]:
        obs, r, term, trunc, info = env.step(a)
        if term:
            break
    times.append(time.perf_counter() - t0)
    rewards.append(r)
print(json.dumps({"episode": statistics.mean(times), "episodes": len(times), "mean_reward": statistics.mean(rewards)}))
"""


def upstream_episode(data_dir) -> dict | None:
    if reference_python() is None:
        return None
    scripts = record_oracle_airline(10, data_dir)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(scripts, fh)
    try:
        return run_upstream(f"SCRIPTS = {fh.name!r}\n" + UPSTREAM)
    finally:
        os.unlink(fh.name)


# ------------------------------------------------------------------------------------------- main


def run_child(n: int, workload: str, data_dir, single: bool = False) -> dict:
    min_seconds = 3.0 if n < 10000 else 0.0
    if workload == "lookup":  # run whole episodes (~27 agent actions each) at every size
        min_steps = {1: 300}.get(n, 30)
    else:
        min_steps = {1: 200, 64: 20}.get(n, 8)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        str(n),
        "--workload",
        workload,
        "--min-seconds",
        str(min_seconds),
        "--min-steps",
        str(min_steps),
    ] + (["--single"] if single else [])
    if data_dir:
        cmd += ["--data-dir", str(data_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"child n={n} {workload} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--workloads", nargs="*", default=["oracle", "lookup"])
    parser.add_argument("--child", type=int, default=None)
    parser.add_argument("--workload", default="oracle")
    parser.add_argument("--min-seconds", type=float, default=3.0)
    parser.add_argument("--min-steps", type=int, default=10)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--single", action="store_true", help="(child) one env through gym.make, N=1")
    parser.add_argument("--no-single", action="store_true", help="skip the gym.make rows")
    args = parser.parse_args()
    data_dir = args.data_dir or (os.environ.get("TAU2_UPSTREAM_DATA_DIR") if reference_python() else None)
    if args.child is not None:
        print(json.dumps(child(args.child, args.workload, args.min_seconds, args.min_steps, data_dir, args.single)))
        return

    results = {}
    for w in args.workloads:
        if not args.no_single:
            results[(w, "1 (gym.make)")] = run_child(1, w, data_dir, single=True)
        for n in args.sizes:
            results[(w, n)] = run_child(n, w, data_dir)
    up = upstream_episode(data_dir)
    rows = []
    for (w, n), r in results.items():
        tag = f"{w} N={n}"
        rows.append(
            (
                f"{tag}: env steps/s (CPU | wall)",
                f"{r['steps'] / r['env_cpu']:,.0f} | {r['steps'] / r['env_wall']:,.0f}",
                "-",
                "-",
            )
        )
        rows.append(
            (
                f"{tag}: episodes/s (CPU | wall)",
                f"{r['episodes'] / r['env_cpu']:,.1f} | {r['episodes'] / r['env_wall']:,.1f}",
                "-",
                "-",
            )
        )
        per_ep = r["env_wall"] / r["episodes"] if r["episodes"] else None
        up_ep = up["episode"] if (up and w == "oracle") else None
        rows.append((f"{tag}: env time per episode (wall)", fmt_time(per_ep), fmt_time(up_ep), ratio(up_ep, per_ep)))
        rows.append((f"{tag}: reset of all N (wall)", fmt_time(r["reset_wall"]), "-", "-"))
        rows.append(
            (f"{tag}: of env time: collector between steps", f"{r['gc_outside'] / r['env_wall']:.1%}", "-", "-")
        )
        big = isinstance(n, int) and n >= 1024
        per_live = fmt_bytes((r["rss_live"] - r["rss_before"]) * 2**20 / n) if big else "-"
        per_peak = fmt_bytes((r["peak"] - r["rss_before"]) * 2**20 / n) if big else "-"
        rows.append(
            (
                f"{tag}: peak RSS | per live episode at reset | at peak",
                f"{fmt_bytes(r['peak'] * 2**20)} | {per_live} | {per_peak}",
                "-",
                "-",
            )
        )
        rows.append(
            (
                f"{tag}: user batches (requests/batch), mean reward",
                f"{r['user_batches']} ({r['user_requests'] / max(1, r['user_batches']):.0f}), "
                f"{r['mean_reward'] if r['mean_reward'] is None else round(r['mean_reward'], 3)}",
                "-",
                "-",
            )
        )
    print_table("Vector env, airline, scripted agent + user (upstream: AgentGymEnv, one episode at a time)", rows)
    if up is None:
        print("\n(set TAU2_REFERENCE_PYTHON to measure upstream's per-episode cost in the same run)")
    else:
        print(f"\nupstream: {up['episodes']} oracle episodes, mean reward {up['mean_reward']}")


if __name__ == "__main__":
    main()
