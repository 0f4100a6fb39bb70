"""Replay throughput: simulations per second of ``tau2_gym.replay`` on a results file of N simulations.

    python bench/bench_replay.py                      # N = 2,000 (airline + retail + telecom)
    python bench/bench_replay.py --n 10000 --domains airline retail

The file is made with the env itself: the oracle agent and two perturbed ones (wrong arguments, a skipped
write) against the oracle user, tasks of each domain's base split in turn, written as one results file per
domain (``.json``). Timed: the whole ``replay`` call per file (reading the JSON, building the envs, driving
every simulation, scoring it, comparing the trajectories), best of ``--repeat`` runs; the single-process
figure on this machine's CPU, as the rest of ``bench/``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from tau2_gym.envs.tau2_env import Tau2Env  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.players.agents.scripted import OracleAgent, SkipLastActionAgent, WrongArgumentsAgent  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.results.replay import replay  # noqa: E402 - after sys.path gets the helpers' folder

AGENTS = (OracleAgent, WrongArgumentsAgent, SkipLastActionAgent)


def make_file(domain: str, n: int, path: Path) -> float:
    """Write ``n`` simulations of ``domain`` to ``path``; return the seconds it took to play them."""
    env = Tau2Env(domain, user="oracle", judge="pass")
    runs = []
    t0 = time.perf_counter()
    i = 0
    while len(runs) < n:
        task = env.tasks[i % len(env.tasks)]
        agent = AGENTS[(i // len(env.tasks)) % len(AGENTS)]()
        obs, info = env.reset(seed=i, options={"task": task})
        agent.reset(info["task"], info)
        done = bool(info.get("episode_over"))
        if done:
            env.step(None)
        while not done:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            done = term or trunc
        runs.append(env.simulation_run())
        i += 1
    played = time.perf_counter() - t0
    path.write_text(json.dumps(env.results(runs)))
    return played


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="simulations in total (split evenly over the domains)")
    parser.add_argument("--domains", nargs="+", default=["airline", "retail", "telecom"])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    per = max(1, args.n // len(args.domains))
    rows = []
    total_sims = total_time = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for d in args.domains:
            path = Path(tmp) / f"{d}.json"
            played = make_file(d, per, path)
            files[d] = path
            print(
                f"{d}: {per} simulations played in {played:.1f} s ({per / played:.0f}/s), file "
                f"{path.stat().st_size / 1e6:.1f} MB",
                file=sys.stderr,
            )
        for d, path in files.items():
            best = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                report = replay(path, judge="pass")
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            assert report.identical == per, report.summary_line()
            msgs = sum(s.recorded_messages for s in report.simulations)
            rows.append(
                [d, str(per), f"{msgs / per:.1f}", f"{best:.2f} s", f"{per / best:,.0f}", f"{1e3 * best / per:.2f} ms"]
            )
            total_sims += per
            total_time += best
    rows.append(
        [
            "all",
            f"{int(total_sims)}",
            "",
            f"{total_time:.2f} s",
            f"{total_sims / total_time:,.0f}",
            f"{1e3 * total_time / total_sims:.2f} ms",
        ]
    )
    header = ["domain", "simulations", "messages/sim", "replay time", "simulations/s", "per simulation"]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
