"""Many tau2 episodes at once: the vector env (RL loop) and the async rollout API (data collection).

Runs offline as written -- scripted agents (the oracle and deliberately flawed ones) and an offline customer:

    python examples/vector_rollouts.py
    python examples/vector_rollouts.py --num-envs 1024 --steps 40

Point it at OpenAI-compatible endpoints (vLLM, SGLang, OpenAI) for the rollout part:

    python examples/vector_rollouts.py --agent-base-url http://localhost:8000/v1 --agent-model Qwen/Qwen3-8B \\
        --user-base-url http://localhost:8001/v1 --user-model Qwen/Qwen3-32B --concurrency 64

Part 1 steps ``gym.make_vec("tau2/airline-v0", num_envs=N)``: one action per sub-env per step, the customers'
replies of all episodes answered as one batch per step, finished episodes reset on the next step (Gymnasium's
NEXT_STEP autoreset). Part 2 collects every (task, trial) episode with :func:`tau2_gym.runner.collect.collect` into a
tau2 results file (re-scorable with ``tau2-gym eval``); run it twice -- the second run resumes and has nothing
left to do.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import gymnasium as gym
import numpy as np

import tau2_gym  # noqa: F401 - registers tau2/<domain>-v0
from tau2_gym.players.agents.scripted import GiveUpAgent, HallucinatingAgent, OracleAgent, SkipLastActionAgent
from tau2_gym.runner.collect import collect

AGENTS = (OracleAgent, OracleAgent, SkipLastActionAgent, GiveUpAgent, HallucinatingAgent)


def vector_env_demo(num_envs: int, steps: int, seed: int) -> None:
    envs = gym.make_vec("tau2/airline-v0", num_envs=num_envs)
    obs, infos = envs.reset(seed=seed)  # sub-env i is seeded with seed + i

    def new_agent(i: int):
        agent = AGENTS[i % len(AGENTS)]()
        agent.reset(infos["task"][i], {"domain": "airline", "solo": False})
        return agent

    agents = [new_agent(i) for i in range(num_envs)]
    resetting = np.zeros(num_envs, dtype=bool)
    rewards: dict[str, list[float]] = {}
    reasons: Counter = Counter()
    t0 = time.perf_counter()
    for _ in range(steps):
        actions = [agent.act(o) for agent, o in zip(agents, obs)]  # an LLM policy would read obs (chat messages)
        obs, reward, terminated, truncated, infos = envs.step(actions)
        for i in np.nonzero(resetting)[0]:  # these sub-envs were reset by this step: a new task each
            agents[i] = new_agent(int(i))
        for i in np.nonzero(terminated | truncated)[0]:
            rewards.setdefault(type(agents[i]).__name__, []).append(float(reward[i]))
            reasons[infos["termination_reason"][i]] += 1
        resetting = terminated | truncated
    dt = time.perf_counter() - t0
    batches, requests = envs.unwrapped.user_batches, envs.unwrapped.user_requests
    envs.close()
    print(
        f"== vector env: {num_envs} airline episodes at once, {steps} steps in {dt:.2f}s "
        f"({num_envs * steps / dt:,.0f} env steps/s incl. the scripted agents)"
    )
    print(f"   user turns: {requests} answered in {batches} batches ({requests / max(1, batches):.0f} per batch)")
    for name, rs in sorted(rewards.items()):
        print(f"   {name:22s} {len(rs):5d} episodes  mean reward {sum(rs) / len(rs):.2f}")
    print(f"   endings: {dict(reasons)}")


def rollout_demo(args: argparse.Namespace) -> None:
    if args.agent_base_url:
        from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy

        policy = OpenAIAgentPolicy(model=args.agent_model, base_url=args.agent_base_url)
    else:
        policy = "oracle"  # the scripted oracle agent
    if args.user_base_url:
        from tau2_gym.players.users.openai_user import OpenAIUserSimulator

        user = OpenAIUserSimulator(model=args.user_model, base_url=args.user_base_url)
    else:
        user = "talking"  # the offline customer that answers from the task
    for attempt in ("first run", "same command again"):
        t0 = time.perf_counter()
        report = collect(
            None,
            policy,
            user,
            domain="airline",
            num_tasks=args.tasks,
            num_trials=args.trials,
            concurrency=args.concurrency,
            output=args.output,
            progress=args.progress,
        )
        print(
            f"== rollout ({attempt}): {report.ran} episodes run, {report.resumed} resumed from the log, "
            f"{report.failed} failed, mean reward {report.mean_reward}, {time.perf_counter() - t0:.2f}s"
        )
    print(f"   results: {report.output} (re-score: tau2-gym eval {report.output})  log: {report.log}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=256, help="episodes in the vector env")
    parser.add_argument("--steps", type=int, default=30, help="vector-env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=10, help="airline tasks for the rollout part")
    parser.add_argument("--trials", type=int, default=2, help="trials per task")
    parser.add_argument("--concurrency", type=int, default=32, help="episodes in flight during the rollout")
    parser.add_argument("--output", default="tau2_runs/vector_rollouts_example.json", help="results file")
    parser.add_argument("--agent-base-url", default=None, help="OpenAI-compatible agent endpoint (else: oracle)")
    parser.add_argument("--agent-model", default="gpt-4.1-2025-04-14")
    parser.add_argument(
        "--user-base-url", default=None, help="OpenAI-compatible user endpoint (else: the talking offline customer)"
    )
    parser.add_argument("--user-model", default="gpt-4.1-2025-04-14")
    parser.add_argument("--progress", action="store_true", help="show the rollout progress bar")
    args = parser.parse_args(argv)
    vector_env_demo(args.num_envs, args.steps, args.seed)
    rollout_demo(args)


if __name__ == "__main__":
    main()
