"""Scoring time per simulation, per domain: tau2-gym's evaluate_simulation vs upstream's (EvaluationType.ALL).

    python bench/bench_scoring.py                 # add TAU2_REFERENCE_PYTHON=... to time upstream in the same run

Simulations are built from each task's gold actions plus perturbations (dropped / changed / duplicated
writes, extra calls, missing info ...), executed against a live environment; only scored endings
(user/agent stop) are timed. "warm" = the task's gold state is already cached (what RL and re-scoring see
after the first episode of a task); "cold" = first scoring of each task, gold state built. The process is
pinned to one CPU. Upstream is timed on a subset (it builds three full environments per evaluation), best
of two runs per simulation. A second table times ``reward_integrity="hardened"`` against upstream-exact scoring in
the same run, with an in-process judge that gives one verdict per NL assertion (so the hardened judge prompt and
verdict check are timed too).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from _common import fmt_time, print_table, ratio, reference_python  # noqa: E402 - after sys.path gets the helpers' folder
from test_evaluation_cases import build_cases  # noqa: E402 - after sys.path gets the helpers' folder

from tau2_gym import load_domain  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.core.messages import messages_to_dicts  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.scoring.evaluation import EvaluationError, clear_cache, evaluate_simulation  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.scoring.judges import CallableJudge  # noqa: E402 - after sys.path gets the helpers' folder

DOMAINS = ("mock", "airline", "retail", "telecom")
UPSTREAM_SIMS = {"mock": 40, "airline": 10, "retail": 12, "telecom": 30}


def simulations(name: str, max_tasks: int):
    dom = load_domain(name)
    tasks = list(dom.tasks(split=None) if name == "mock" else dom.tasks())[:max_tasks]
    cases = [c for c in build_cases(dom, tasks, seed=0, per_task=5) if c.termination in ("user_stop", "agent_stop")]
    keep = []
    for c in cases:
        try:
            evaluate_simulation(dom, c.task, c.messages, c.termination, solo=c.solo)
            keep.append(c)
        except EvaluationError:
            pass
    return dom, keep


def time_ours(dom, cases, rounds: int, **kwargs) -> tuple[float, float]:
    clear_cache()
    seen: set = set()
    cold = []
    for c in cases:  # first scoring of each task: gold state built
        t0 = time.perf_counter()
        evaluate_simulation(dom, c.task, c.messages, c.termination, solo=c.solo, **kwargs)
        if c.task.id not in seen:
            cold.append(time.perf_counter() - t0)
            seen.add(c.task.id)
    t0 = time.perf_counter()
    for _ in range(rounds):
        for c in cases:
            evaluate_simulation(dom, c.task, c.messages, c.termination, solo=c.solo, **kwargs)
    warm = (time.perf_counter() - t0) / (rounds * len(cases))
    return warm, sum(cold) / len(cold)


def _verdicts(system: str, user: str) -> str:
    """An in-process judge: every expected outcome of the prompt met, one verdict each."""
    listed = ast.literal_eval(user.rsplit("expectedOutcomes:", 1)[1].strip())
    return json.dumps({"results": [{"expectedOutcome": a, "reasoning": "", "metExpectation": True} for a in listed]})


def time_integrity(built: dict, rounds: int) -> None:
    """Warm scoring per simulation, upstream-exact vs hardened: each simulation scored many times under each
    setting, alternating, and its fastest time kept (short timings dodge a loaded machine's slices); the figure is
    the mean over simulations of those minima."""
    judge = CallableJudge(_verdicts, name="in-process")
    print("\nReward integrity: hardened vs upstream-exact scoring (ours, warm, in-process judge)")
    header = f"{'figure':<44}  {'upstream':>10}  {'hardened':>10}  {'cost':>7}"
    print(header + "\n" + "-" * len(header))
    for name, (dom, cases) in built.items():
        total = {"upstream": 0.0, "hardened": 0.0}
        for c in cases:
            best = {"upstream": float("inf"), "hardened": float("inf")}
            for _ in range(max(8, 2 * rounds)):
                for setting in best:
                    t0 = time.perf_counter()
                    evaluate_simulation(
                        dom, c.task, c.messages, c.termination, solo=c.solo, judge=judge, integrity=setting
                    )
                    best[setting] = min(best[setting], time.perf_counter() - t0)
            for setting in total:
                total[setting] += best[setting] / len(cases)
        cost = total["hardened"] / total["upstream"] - 1
        print(
            f"{name + ': scoring / simulation (n=' + str(len(cases)) + ')':<44}  {fmt_time(total['upstream']):>10}  "
            f"{fmt_time(total['hardened']):>10}  {cost:+7.1%}"
        )


def time_upstream(jobs: list[dict]) -> list[list[float]] | None:
    py = reference_python()
    if py is None:
        return None
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run(
        [py, str(ROOT / "tests" / "reference" / "driver_eval.py")],
        input=json.dumps({"jobs": jobs}),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT / "tests" / "reference"),
        timeout=7200,
    )
    if proc.returncode != 0:
        print(f"[upstream run failed]\n{proc.stderr[-3000:]}", file=sys.stderr)
        return None
    out = []
    for r in json.loads(proc.stdout)["results"]:
        if "failed" in r:
            print(f"[upstream job failed]\n{r['failed'][-2000:]}", file=sys.stderr)
            out.append([])
        else:
            out.append(r["ok"]["seconds"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=40, help="tasks per domain")
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the simulations (ours)")
    parser.add_argument("--upstream-scale", type=float, default=1.0, help="multiplies the upstream subset sizes")
    parser.add_argument("--integrity-only", action="store_true", help="only the hardened vs upstream-exact table")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    built = {}
    for name in DOMAINS:
        try:
            built[name] = simulations(name, args.tasks)
        except Exception as exc:  # noqa: BLE001 - a domain not available in this checkout is skipped
            print(f"[{name} skipped: {exc}]", file=sys.stderr)
    if args.integrity_only:
        time_integrity(built, args.rounds)
        return
    ours = {name: time_ours(dom, cases, args.rounds) for name, (dom, cases) in built.items()}

    jobs = []
    for name, (_dom, cases) in built.items():
        subset = cases[: max(1, int(UPSTREAM_SIMS.get(name, 10) * args.upstream_scale))]
        jobs.append(
            {
                "kind": "bench",
                "domain": name,
                "repeat": 2,
                "sims": [
                    {
                        "task": c.task.model_dump(mode="json"),
                        "messages": messages_to_dicts(c.messages),
                        "termination": c.termination,
                        "solo": c.solo,
                    }
                    for c in subset
                ],
            }
        )
    up = time_upstream(jobs)

    rows = []
    for i, (name, (_dom, cases)) in enumerate(built.items()):
        warm, cold = ours[name]
        up_t = None
        if up is not None and up[i]:
            up_t = sum(up[i]) / len(up[i])
        rows.append(
            (f"{name}: scoring / simulation (warm, n={len(cases)})", fmt_time(warm), fmt_time(up_t), ratio(up_t, warm))
        )
        rows.append(
            (f"{name}: first scoring of a task (gold built)", fmt_time(cold), fmt_time(up_t), ratio(up_t, cold))
        )
        rows.append(
            (
                f"{name}: simulations / s, one core (warm)",
                f"{1 / warm:,.0f}",
                "-" if up_t is None else f"{1 / up_t:,.1f}",
                ratio(up_t, warm),
            )
        )
    print_table("Scoring (evaluate_simulation, EvaluationType.ALL)", rows)
    if up is None:
        print("\n(set TAU2_REFERENCE_PYTHON to time upstream in the same run)")
    else:
        print(f"\nupstream timed on {', '.join(f'{n}: {len(t)}' for n, t in zip(built, up))} simulations")
    time_integrity(built, args.rounds)


if __name__ == "__main__":
    main()
