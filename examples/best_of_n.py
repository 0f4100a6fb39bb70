"""Best-of-n branching at every agent turn: a weak policy alone vs the same policy searched over env clones.

The policy follows the task's gold plan but slips with probability 0.3 (it says "One moment, please." and the
oracle customer hangs up). Searching 4 branches per turn, each rolled out to the end, recovers from the slips.
Offline: scripted policy and customer, no model or API key.

    python examples/best_of_n.py [--task 7] [--n 4] [--depth N] [--episodes 5]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.training.search import best_of_n, oracle_policy


def play(env, policy, seed: int, task: str) -> float:
    """One episode with the policy alone (sampling with a generator seeded like the search's)."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed, options={"task_id": task})
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs, info, rng))
        if terminated or truncated:
            return reward


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="7", help="airline task id")
    ap.add_argument("--n", type=int, default=4, help="branches per agent turn")
    ap.add_argument("--depth", type=int, default=None, help="agent turns per rollout (default: to the end)")
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=0.3, help="the policy's slip probability")
    args = ap.parse_args(argv)

    env = gym.make("tau2/airline-v0")
    policy = oracle_policy(epsilon=args.epsilon)
    alone = [play(env, policy, seed, args.task) for seed in range(args.episodes)]
    print(f"policy alone:      rewards {alone}  mean {np.mean(alone):.2f}")
    searched = [
        best_of_n(env, policy, n=args.n, depth=args.depth, seed=seed, options={"task_id": args.task})
        for seed in range(args.episodes)
    ]
    print(
        f"best-of-{args.n} search: rewards {[r.reward for r in searched]}  "
        f"mean {np.mean([r.reward for r in searched]):.2f}"
    )
    first = searched[0]
    print("first searched episode:", first.summary())
    for turn in first.turns:
        scores = ", ".join(f"({r:.0f}, {p:.2f})" for r, p in turn.scores)
        print(f"  turn {turn.turn}: branch scores [{scores}] -> took branch {turn.chosen}")


if __name__ == "__main__":
    main()
