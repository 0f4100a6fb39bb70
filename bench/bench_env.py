"""Env overhead of the Gymnasium envs (everything but LLMs): ``reset``, ``step``, the final (scored) step and a
whole episode, ours vs upstream's ``AgentGymEnv`` driven by the same scripts in the same run.

Scripts: our oracle agent and oracle user play N tasks per domain; the recorded agent actions and user replies
then drive upstream's ``AgentGymEnv`` (actions as its ``{"name", "arguments"}`` JSON strings or text; the user
simulator's LLM call replaced by the recorded replies).

    python bench/bench_env.py            # TAU2_REFERENCE_PYTHON=... (+ TAU2_UPSTREAM_DATA_DIR=...) adds upstream
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import gymnasium as gym
from _common import fmt_time, print_table, ratio, record_oracle, reference_python, run_upstream

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.players.users.scripted import ScriptedUser

DOMAINS = {"mock": 9, "airline": 6, "telecom": 4}  # upstream needs ~25 s per telecom episode
REPEAT = 5


def _record(domain: str, n: int, data_dir):
    return record_oracle(domain, data_dir, n=n)


def ours(scripts: dict, data_dir) -> dict:
    logging.getLogger("tau2_gym").setLevel(logging.ERROR)
    res = {}
    for domain, items in scripts.items():
        resets, steps, finals, episodes = [], [], [], []
        env = gym.make(f"tau2/{domain}-v0", data_dir=data_dir, parser="tau2")  # one env, many episodes (as in RL)
        for _ in range(REPEAT):
            for item in items:
                replies = [
                    r["content"] if not r.get("tool_calls") else {"tool_calls": r["tool_calls"]} for r in item["user"]
                ]
                env.unwrapped.user = ScriptedUser(replies)
                t_ep = time.perf_counter()
                t0 = time.perf_counter()
                env.reset(options={"task_id": item["task_id"]})
                resets.append(time.perf_counter() - t0)
                for a in item["agent"]:
                    t0 = time.perf_counter()
                    _, _, term, trunc, _ = env.step(a)
                    dt = time.perf_counter() - t0
                    if term or trunc:
                        finals.append(dt)
                        break
                    steps.append(dt)
                episodes.append(time.perf_counter() - t_ep)
        res[domain] = {
            "reset": statistics.median(resets),
            "step": statistics.median(steps),
            "final": statistics.median(finals),
            "episode": statistics.median(episodes),
        }
    return res


UPSTREAM = """
import threading
import tau2.user.user_simulator as us
from tau2.gym.gym_agent import AgentGymEnv
from tau2.data_model.message import AssistantMessage, ToolCall
scripts = json.load(open(SCRIPTS))
res = {}
for domain, items in scripts.items():
    resets, steps, finals, episodes = [], [], [], []
    for item in items:
        it = iter(item["user"])
        def fake(model=None, messages=None, tools=None, _it=it, **kw):
            d = next(_it)
            calls = d.get("tool_calls")
            return AssistantMessage(role="assistant", content=d.get("content"), cost=0.0,
                                    tool_calls=[ToolCall(**c) for c in calls] if calls else None)
        us.generate = fake
        env = AgentGymEnv(domain=domain, task_id=item["task_id"])
        t_ep = time.perf_counter()
        t0 = time.perf_counter(); env.reset(); resets.append(time.perf_counter() - t0)
        for a in item["agent"]:
            t0 = time.perf_counter()
            obs, r, term, trunc, info = env.step(a)
            dt = time.perf_counter() - t0
            if term:
                finals.append(dt); break
            steps.append(dt)
        episodes.append(time.perf_counter() - t_ep)
    res[domain] = {"reset": statistics.median(resets), "step": statistics.median(steps),
                   "final": statistics.median(finals) if finals else None, "episode": statistics.median(episodes)}
print(json.dumps(res))
"""


def main() -> None:
    data_dir = os.environ.get("TAU2_UPSTREAM_DATA_DIR") if reference_python() else None
    scripts = {d: _record(d, n, data_dir) for d, n in DOMAINS.items()}
    mine = ours(scripts, data_dir)
    theirs = None
    if reference_python():
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(scripts, fh)
        theirs = run_upstream(f"SCRIPTS = {fh.name!r}\n" + UPSTREAM)
        os.unlink(fh.name)
    rows = []
    for domain in DOMAINS:
        for key, label in (
            ("reset", "reset (task init + first user turn)"),
            ("step", "step (median, not final)"),
            ("final", "final step (incl. tau2 evaluation)"),
            ("episode", "whole oracle episode (median)"),
        ):
            up = theirs[domain][key] if theirs else None
            rows.append((f"{domain}: {label}", fmt_time(mine[domain][key]), fmt_time(up), ratio(up, mine[domain][key])))
    n_tasks = ", ".join(f"{d} {n}" for d, n in DOMAINS.items())
    print_table(
        f"Gymnasium env overhead, scripted oracle agent and user ({n_tasks} tasks; data: "
        f"{data_dir or 'default'}; upstream = tau2 AgentGymEnv)",
        rows,
    )
    if theirs is None:
        print("\n(set TAU2_REFERENCE_PYTHON and TAU2_UPSTREAM_DATA_DIR to measure upstream in the same run)")


if __name__ == "__main__":
    main()
