"""Branching a live episode: ``Tau2Env.clone()`` vs getting upstream to the same point, and branching throughput.

Upstream tau2-bench has no copy of a live episode (its ``AgentGymEnv`` runs the orchestrator in a thread):
a branch there is a fresh ``AgentGymEnv`` whose ``reset`` and first ``k`` steps replay the conversation so far.
That is timed here in the same run, on the same scripts: our oracle agent and oracle user play long airline
tasks; the recorded agent actions and user replies then drive upstream (its user simulator's LLM call replaced
by the recorded replies, as in ``bench_env.py``). For scale, two partial upstream copies of that point, the DB
and toolkits only (not the conversation, which would still need the orchestrator rebuilt): a fresh tool
environment with ``set_state`` replaying the trajectory so far (what upstream's evaluator does), and a
``deepcopy`` of the live tool environment.

Branching throughput: best-of-n search (:mod:`tau2_gym.training.search`) on airline with rollouts of depth 5 -- every
branch = ``clone_env`` + the candidate step + up to 5 policy steps (scripted oracle policy and oracle user, so
the figure is the env's own cost, no LLM). Then with an LLM customer (a local stub with a fixed latency):
branches one by one vs in a vector env whose rounds send the user turns together.

    python bench/bench_clone.py          # TAU2_REFERENCE_PYTHON=... (+ TAU2_UPSTREAM_DATA_DIR=...) adds upstream
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import gymnasium as gym
from _common import fmt_time, median_time, print_table, ratio, record_oracle, reference_python, run_upstream

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.envs.clone import clone_env
from tau2_gym.players.users.scripted import ScriptedUser

TASKS = ["44", "39", "42"]  # the airline tasks with the longest oracle plans (20, 12, 11 agent turns)
POINTS = (0.25, 0.5, 0.95)  # clone after this fraction of the episode's agent steps
REPEAT = 5  # upstream rebuild+replay repetitions per point
DEPTH, N = 5, 4


def _record(data_dir):
    out = record_oracle("airline", data_dir, task_ids=TASKS)
    for item in out:
        assert item["reward"] == 1.0, item["task_id"]
    return out


def _points(n_actions: int) -> list[int]:
    return sorted({max(1, min(n_actions - 1, round(f * n_actions))) for f in POINTS})


def _replies(item: dict) -> list:
    return [r["content"] if not r.get("tool_calls") else {"tool_calls": r["tool_calls"]} for r in item["user"]]


def ours(scripts: list, data_dir) -> dict:
    logging.getLogger("tau2_gym").setLevel(logging.ERROR)
    res = {}
    for item in scripts:
        env = gym.make("tau2/airline-v0", data_dir=data_dir, parser="tau2", user=ScriptedUser(_replies(item)))
        for k in _points(len(item["agent"])):

            def rebuild(k=k):
                env.reset(options={"task_id": item["task_id"]})
                for a in item["agent"][:k]:
                    env.step(a)

            rebuild_time = median_time(rebuild, repeat=20, warmup=2)
            rebuild()
            base = env.unwrapped
            item.setdefault("messages", {})[str(k)] = [m.to_dict() for m in base.loop.messages()]
            item["task"] = base.task.model_dump(mode="json", exclude_unset=True)
            res[f"{item['task_id']}@{k}"] = {
                "clone": median_time(base.clone, repeat=300, warmup=20),
                "clone_env": median_time(lambda: clone_env(env), repeat=300, warmup=20),
                "rebuild": rebuild_time,
                "messages": len(base.loop.trajectory),
            }
    return res


def branching(data_dir) -> dict:
    """Best-of-N search with depth-5 rollouts over whole airline episodes: branches per second."""
    from tau2_gym.training.search import best_of_n, oracle_policy

    env = gym.make("tau2/airline-v0", data_dir=data_dir)
    policy = oracle_policy(0.0)
    out = {}
    for task_id in TASKS:
        for label, kwargs in (("", {}), (", value=None", {"value": None})):
            # default value: a branch still running after `depth` turns is scored as if the customer hung up
            # (one evaluation per such branch); value=None skips that (those branches tie)
            best_of_n(env, policy, n=N, depth=DEPTH, seed=0, options={"task_id": task_id}, **kwargs)  # warm caches
            runs = [
                best_of_n(env, policy, n=N, depth=DEPTH, seed=s, options={"task_id": task_id}, **kwargs)
                for s in range(3)
            ]
            branches = sum(r.branches for r in runs)
            seconds = sum(r.seconds for r in runs)
            out[task_id + label] = {
                "branches_per_second": branches / seconds,
                "steps_per_branch": sum(r.branch_steps for r in runs) / branches,
                "clone_share": sum(r.clone_seconds for r in runs) / seconds,
                "reward": runs[0].reward,
            }
    return out


LATENCY = 0.05  # seconds per user-simulator request at the local stub


def llm_user_branching() -> dict:
    """Best-of-n with an LLM customer (a local OpenAI-compatible stub answering after LATENCY): branches one by
    one (every user turn a request of its own) vs in a vector env (each round's user turns sent together)."""
    from openai_stub import OpenAIStub

    from tau2_gym.envs.vector import Tau2VectorEnv
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator
    from tau2_gym.training.search import best_of_n

    lines = ["Could you look up my reservation?", "What are my options?", "Please go ahead."]

    def chatty(obs, info, rng):  # every turn is text for the customer: every step waits for the user LLM
        return lines[int(rng.integers(len(lines)))]

    out = {}
    with OpenAIStub(lambda body, n: {"delay": LATENCY, "then": "I see, thanks. Anything else?"}) as server:
        user = OpenAIUserSimulator(model="stub", base_url=server.base_url, max_retries=0)
        env = gym.make("tau2/airline-v0", user=user)
        vec = Tau2VectorEnv(N, domain="airline", user=user)
        vec.reset(seed=0)
        for label, kwargs in (("one by one", {}), ("vector env (batched)", {"vector": vec})):
            sent = len(server.requests)
            res = best_of_n(
                env, chatty, n=N, depth=3, seed=0, options={"task_id": "7"}, max_turns=4, value=None, **kwargs
            )
            out[label] = {"seconds": res.seconds, "branches": res.branches, "requests": len(server.requests) - sent}
        vec.close()
        user.close()
    return out


UPSTREAM = """
import copy
import tau2.user.user_simulator as us
from tau2.gym.gym_agent import AgentGymEnv
from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
from tau2.data_model.tasks import Task
from tau2.registry import registry
KINDS = {"assistant": AssistantMessage, "user": UserMessage, "tool": ToolMessage}
scripts = json.load(open(SCRIPTS))
points = json.load(open(POINTS))
res = {}
for item in scripts:
    task = Task.model_validate(item["task"])
    st = task.initial_state
    for k in points[item["task_id"]]:
        history = [KINDS[m["role"]].model_validate(m) for m in item["messages"][str(k)]]
        def replay():
            env = registry.get_env_constructor("airline")()
            env.set_state(st.initialization_data if st else None, st.initialization_actions if st else None,
                          history)
        set_state_time = median_time(replay, repeat=REPEAT, warmup=1)
        times, copies = [], []
        for _ in range(REPEAT):
            it = iter(item["user"])
            def fake(model=None, messages=None, tools=None, _it=it, **kw):
                d = next(_it)
                calls = d.get("tool_calls")
                return AssistantMessage(role="assistant", content=d.get("content"), cost=0.0,
                                        tool_calls=[ToolCall(**c) for c in calls] if calls else None)
            us.generate = fake
            t0 = time.perf_counter()
            env = AgentGymEnv(domain="airline", task_id=item["task_id"])
            env.reset()
            for a in item["agent"][:k]:
                env.step(a)
            times.append(time.perf_counter() - t0)
            inner = env._orchestrator.environment
            t0 = time.perf_counter()
            copy.deepcopy(inner)
            copies.append(time.perf_counter() - t0)
            env.close() if hasattr(env, "close") else None
        res[f"{item['task_id']}@{k}"] = {"rebuild": statistics.median(times), "env_deepcopy": statistics.median(copies),
                                         "set_state": set_state_time}
print(json.dumps(res))
"""


def main() -> None:
    data_dir = os.environ.get("TAU2_UPSTREAM_DATA_DIR") if reference_python() else None
    scripts = _record(data_dir)
    mine = ours(scripts, data_dir)
    theirs = None
    if reference_python():
        with (
            tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh,
            tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fp,
        ):
            json.dump(scripts, fh)
            json.dump({s["task_id"]: _points(len(s["agent"])) for s in scripts}, fp)
        theirs = run_upstream(f"SCRIPTS = {fh.name!r}\nPOINTS = {fp.name!r}\nREPEAT = {REPEAT}\n" + UPSTREAM)
        os.unlink(fh.name)
        os.unlink(fp.name)
    rows = []
    for key, m in mine.items():
        task, k = key.split("@")
        up = theirs.get(key) if theirs else None
        label = f"task {task}, after {k} agent steps ({m['messages']} messages)"
        rows.append(
            (
                f"{label}: clone()",
                fmt_time(m["clone"]),
                fmt_time(up and up["rebuild"]),
                ratio(up and up["rebuild"], m["clone"]),
            )
        )
        rows.append(("  clone_env(gym.make wrappers)", fmt_time(m["clone_env"]), "", ""))
        rows.append(
            (
                "  ours: reset + replay to the point",
                fmt_time(m["rebuild"]),
                fmt_time(up and up["rebuild"]),
                ratio(up and up["rebuild"], m["rebuild"]),
            )
        )
        if up:
            rows.append(
                (
                    "  upstream, DB only: fresh tool env + set_state replay",
                    "",
                    fmt_time(up["set_state"]),
                    ratio(up["set_state"], m["clone"]),
                )
            )
            rows.append(
                (
                    "  upstream, DB only: deepcopy of the live tool env",
                    "",
                    fmt_time(up["env_deepcopy"]),
                    ratio(up["env_deepcopy"], m["clone"]),
                )
            )
    print_table(
        "Branching an airline episode: clone() vs upstream's fresh AgentGymEnv + reset + replay to the same "
        f"point (data: {data_dir or 'default'})",
        rows,
    )
    br = branching(data_dir)
    rows = [
        (
            f"task {t}: branches/s (N={N}, depth {DEPTH}; {v['steps_per_branch']:.1f} env steps per branch, "
            f"{100 * v['clone_share']:.0f}% of the time in clone)",
            f"{v['branches_per_second']:,.0f}",
            "",
            "",
        )
        for t, v in br.items()
    ]
    if theirs:
        # an upstream branch at the same depth = rebuild + replay to the point and the branch's own steps: the
        # cheapest such point is the episode's start, so this bounds upstream's throughput from above
        for item in scripts:
            key = f"{item['task_id']}@{_points(len(item['agent']))[0]}"
            rows.append(
                (
                    f"upstream, task {item['task_id']}: 1 / (rebuild+replay to step {key.split('@')[1]}) (upper bound)",
                    "",
                    f"{1 / theirs[key]['rebuild']:,.1f}",
                    "",
                )
            )
    print_table("Branching throughput on airline (best-of-n search, scripted oracle policy and user)", rows)
    llm = llm_user_branching()
    rows = [
        (
            f"{label}: {v['branches']} branches, {v['requests']} user requests",
            fmt_time(v["seconds"]),
            "",
            f"{v['branches'] / v['seconds']:.1f} branches/s",
        )
        for label, v in llm.items()
    ]
    print_table(
        f"Best-of-{N} on airline with an LLM customer ({1000 * LATENCY:.0f} ms per request, local stub; "
        "depth 3, 4 turns, every agent turn text)",
        rows,
    )
    if theirs is None:
        print("\n(set TAU2_REFERENCE_PYTHON and TAU2_UPSTREAM_DATA_DIR to measure upstream in the same run)")


if __name__ == "__main__":
    main()
