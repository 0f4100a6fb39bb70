"""Playing the customer (``tau2/airline-user-v0``) vs upstream's ``UserGymEnv``, and the mixture's overhead.

    python bench/bench_user_env.py       # TAU2_REFERENCE_PYTHON=... adds upstream in the same run

Both envs face an OpenAI-compatible agent served by the same local stub (instant replies), and the customer
plays the same script (three texts, then ``###STOP###``), so the figures are each env's own cost per customer
turn: upstream runs its orchestrator in a thread that the env polls every 10 ms; ours steps the turn loop
inline. Also: our env with the scripted oracle agent (no HTTP at all), and ``tau2/mix-v0``'s ``reset`` next to
a single domain env's (the draw plus routing).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import gymnasium as gym  # noqa: E402 - after sys.path gets the helpers' folder
from _common import fmt_time, print_table, ratio, run_upstream  # noqa: E402 - after sys.path gets the helpers' folder
from openai_stub import OpenAIStub  # noqa: E402 - after sys.path gets the helpers' folder

import tau2_gym  # noqa: E402,F401 - after sys.path gets the helpers' folder
from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy  # noqa: E402 - after sys.path gets the helpers' folder

SCRIPT = [
    "Hi, I need help with a reservation.",
    "It is for next week.",
    "Can you check my options?",
    "Thanks, that is all. ###STOP###",
]
EPISODES = 10
AGENT_REPLY = "Sure, could you give me your user id and reservation number?"


def mean_time(fn, n: int = 1000) -> float:
    """Mean wall time per call: the right figure to set against a weighted mean of the components' means."""
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _episode_steps(env, seed: int) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    env.reset(seed=seed, options={"task_id": "0"})
    reset = time.perf_counter() - t0
    steps = []
    for line in SCRIPT:
        t0 = time.perf_counter()
        _, _, term, trunc, _ = env.step(line)
        steps.append(time.perf_counter() - t0)
        if term or trunc:
            break
    return reset, steps


def ours(base_url: str) -> dict:
    agent = OpenAIAgentPolicy(model="stub-model", base_url=base_url, api_key_env=None)
    env = gym.make("tau2/airline-user-v0", agent=agent)
    resets, steps = [], []
    _episode_steps(env, 0)  # warm-up (connection, caches)
    for i in range(EPISODES):
        r, s = _episode_steps(env, i)
        resets.append(r)
        steps += s
    scripted = gym.make("tau2/airline-user-v0", agent="oracle")
    s_steps = []
    for i in range(EPISODES):
        s_steps += _episode_steps(scripted, i)[1]
    weights = {"airline": 0.5, "retail": 0.3, "telecom": 0.2}
    mix = gym.make("tau2/mix-v0", domains=weights, judge="pass")
    mix.reset(seed=0)
    singles = {}
    for key in weights:
        mix.reset(options={"domain": key})  # build the components outside the timing
        env = gym.make(f"tau2/{key}-v0", judge="pass")
        env.reset(seed=0)
        singles[key] = mean_time(lambda env=env: env.reset())
    return {
        "reset": statistics.median(resets),
        "step": statistics.median(steps),
        "scripted_step": statistics.median(s_steps),
        "singles": singles,
        "weighted_reset": sum(weights[k] * singles[k] for k in weights),
        "mix_reset": mean_time(lambda: mix.reset(), n=3000),
    }


UPSTREAM = """
import statistics
from tau2.gym.gym_agent import UserGymEnv
env = UserGymEnv(domain="airline", task_id="0", agent_llm="openai/stub-model",
                 agent_llm_args={"temperature": 0.0, "api_base": BASE_URL, "api_key": "x"})
def episode():
    t0 = time.perf_counter(); env.reset(); reset = time.perf_counter() - t0
    steps = []
    for line in SCRIPT:
        t0 = time.perf_counter(); _, _, term, _, _ = env.step(line); steps.append(time.perf_counter() - t0)
        if term: break
    return reset, steps
episode()
resets, steps = [], []
for _ in range(EPISODES):
    r, s = episode(); resets.append(r); steps += s
print(json.dumps({"reset": statistics.median(resets), "step": statistics.median(steps)}))
"""


def upstream(base_url: str) -> dict | None:
    return run_upstream(f"BASE_URL = {base_url!r}\nSCRIPT = {SCRIPT!r}\nEPISODES = {EPISODES}\n" + UPSTREAM)


def main() -> None:
    with OpenAIStub([AGENT_REPLY]) as srv:
        mine = ours(srv.base_url)
        up = upstream(srv.base_url) or {}
    print_table(
        "Playing the customer: airline task 0, agent = OpenAI-compatible stub on localhost (median)",
        [
            (
                "reset (agent greets)",
                fmt_time(mine["reset"]),
                fmt_time(up.get("reset")),
                ratio(up.get("reset"), mine["reset"]),
            ),
            (
                "customer turn (text -> agent LLM reply)",
                fmt_time(mine["step"]),
                fmt_time(up.get("step")),
                ratio(up.get("step"), mine["step"]),
            ),
            ("customer turn, scripted oracle agent (no HTTP)", fmt_time(mine["scripted_step"]), "-", "-"),
        ],
    )
    print_table(
        "Mixing domains: reset (oracle user's first turn included; mean per call)",
        [
            *[(f"tau2/{k}-v0 reset", fmt_time(v), "-", "-") for k, v in mine["singles"].items()],
            ("the three, weighted 0.5/0.3/0.2", fmt_time(mine["weighted_reset"]), "-", "-"),
            (
                "tau2/mix-v0 reset (same weights; draw + route + the component's reset)",
                fmt_time(mine["mix_reset"]),
                "-",
                "-",
            ),
        ],
    )
    if not up:
        print("\n(set TAU2_REFERENCE_PYTHON to measure upstream's UserGymEnv in the same run)")


if __name__ == "__main__":
    main()
