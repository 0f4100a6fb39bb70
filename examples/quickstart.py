"""Quickstart: play one tau2 episode with a scripted agent and get its reward.

    python examples/quickstart.py                          # mock domain, task create_task_1
    python examples/quickstart.py --domain airline --task-id 0
    python examples/quickstart.py --domain retail          # a random task of the base split

The customer is the offline talking customer (``user="talking"``: it opens with the reason for its call, answers
questions from what the task says it knows, confirms what it wants; no model, no network). The agent is
:class:`tau2_gym.players.agents.scripted.OracleAgent`, which replays the task's gold actions -- swap in your own policy:
anything that maps the observation (OpenAI chat messages) to an assistant message works as an action.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym

import tau2_gym  # noqa: F401 - registers the tau2/<domain>-v0 environments
from tau2_gym.players.agents.scripted import OracleAgent


def show(message: dict) -> str:
    """One line per message: role and text, or the tool calls."""
    if message.get("tool_calls"):
        calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in message["tool_calls"])
        return f"{message['role']:>9}: {calls}"
    text = " ".join(str(message.get("content")).split())
    return f"{message['role']:>9}: {text[:160]}{'...' if len(text) > 160 else ''}"


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="mock", help="tau2 domain: mock, airline, retail, telecom, ...")
    parser.add_argument(
        "--task-id",
        default=None,
        help="task to play (default: create_task_1 on mock, else a random task of the base split)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    env = gym.make(f"tau2/{args.domain}-v0", user="talking")  # user="openai:MODEL" for an LLM customer
    task_id = args.task_id if args.task_id is not None else ("create_task_1" if args.domain == "mock" else None)
    options = {"task_id": task_id} if task_id is not None else None
    obs, info = env.reset(seed=args.seed, options=options)
    print(
        f"task {info['task_id']!r} of {args.domain}: {len(info['tools'])} tools, policy of {len(info['policy'])} chars"
    )
    for message in obs[1:]:  # obs[0] is the system prompt (policy)
        print(show(message))

    agent = OracleAgent()
    agent.reset(info["task"], info)
    reward, terminated, truncated, seen = 0.0, False, False, len(obs)
    while not (terminated or truncated):
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        for message in obs[seen:]:
            print(show(message))
        seen = len(obs)

    print(f"\nreward = {reward}  ({info['termination_reason']})")
    if info.get("reward_info"):
        print(
            "reward breakdown:",
            json.dumps({k: v for k, v in info["reward_info"].items() if k in ("reward", "reward_breakdown")}),
        )
    env.close()
    return reward


if __name__ == "__main__":
    main()
