"""``tau2-gym demo``: a no-API-key demonstration on the default (fetched) data.

Replays every task's gold actions in each available domain and prints the resulting DB hashes and
timings. (Later issues turn this into a demo of the Gymnasium envs with scripted agents.)
"""

from __future__ import annotations

import argparse
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--domains", nargs="*", default=None, help="domains to run (default: all registered)")
    parser.add_argument("--data-dir", default=None, help="a tau2-bench checkout's data/ folder")


def run(args: argparse.Namespace) -> int:
    from tau2_gym import domain_names, load_domain
    from tau2_gym.data import DataError
    from tau2_gym.replay import gold_environment

    names = args.domains or domain_names()
    for name in names:
        try:
            dom = load_domain(name, args.data_dir)
        except DataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        tasks = dom.tasks(split=None)
        print(f"\n== {name}: {len(tasks)} tasks (data: {dom.source.origin})")
        t0 = time.perf_counter()
        for task in tasks:
            env = gold_environment(dom, task)
            print(f"  {task.id[:60]:60s} agent {str(env.get_db_hash())[:12]}  user {str(env.get_user_db_hash())[:12]}")
        dt = time.perf_counter() - t0
        print(f"  gold replay of {len(tasks)} tasks: {dt * 1000:.1f} ms")
    return 0
