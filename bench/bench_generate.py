"""Generation benchmark: how fast tasks to train on are made and verified (target: 1,000 verified airline tasks in
at most 2 minutes on 2 cores).

Run ``python bench/bench_generate.py [--n 1000] [--domains airline retail ...]``. Two tables, measured in this run:

1. *verification* (independent of any generator): the machinery's checks -- oracle agent with the oracle and the
   talking customer, do-nothing where the task writes -- on each domain's benchmark ``train`` tasks taken as drafts,
   repeated to ``--n`` verifications; the time per task and for ``--n`` tasks;
2. *generate*: ``tau2_gym.generation.generate`` end to end (drafting, contamination check, verification, writing)
   for every domain that has a generator, ``--n`` tasks with seed 0, split into drafting, verification and the rest.

One process (the machinery does not fork); the wall times include every draft the machinery rejected.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import tau2_gym  # noqa: F401 - registers the domains
from tau2_gym.core.domain import load_domain
from tau2_gym.core.tasks import Task
from tau2_gym.generation import Verifier, drafter_domains, generate

TARGET = {"airline": 120.0}  # seconds for 1,000 verified tasks (issue 40)


def benchmark_drafts(domain: str) -> list[tuple[Task, dict]]:
    """The domain's benchmark train tasks as drafts (NL assertions out of the reward basis: verification needs
    no judge); tasks that fail a check are left in -- a rejection costs the same checks up to its failure."""
    loaded = load_domain(domain)
    splits = loaded.splits()
    wanted = set(splits.get("train") or splits.get("base") or ())
    out = []
    for raw in json.loads(loaded.task_file().read_text(encoding="utf-8")):
        if raw["id"] not in wanted:
            continue
        crit = raw["evaluation_criteria"]
        crit["reward_basis"] = [b for b in crit["reward_basis"] if b != "NL_ASSERTION"]
        kit = loaded.agent_toolkit
        writes = any(
            a.get("requestor") == "user" or (a["name"] in kit.tool_names and kit.mutates_state(a["name"]))
            for a in crit.get("actions") or []
        )
        out.append((Task.model_validate(raw), {"needs_write": writes, "variant": "allowed"}))
    return out


def verification_row(domain: str, n: int) -> list[str]:
    drafts = benchmark_drafts(domain)
    verifier = Verifier(load_domain(domain))
    for task, draft in drafts[:3]:  # warm: gold states of the first tasks, tool schemas
        verifier.verify(Task.model_validate(task.model_dump(mode="json")), draft)
    passed = 0
    t0 = time.perf_counter()
    for i in range(n):
        task, draft = drafts[i % len(drafts)]
        fresh = Task.model_validate(task.model_dump(mode="json"))  # a new task object: no cached gold state
        passed += verifier.verify(fresh, draft) is None
    dt = time.perf_counter() - t0
    target = TARGET.get(domain)
    return [
        domain,
        f"{len(drafts)} train tasks x {n // len(drafts) + 1}",
        f"{dt / n * 1e3:.2f} ms",
        f"{dt:.1f} s",
        f"{passed}/{n}",
        f"<= {target:.0f} s" if target else "-",
    ]


def generate_row(domain: str, n: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        made = generate(domain, n=n, seed=0, held_out=0.1, out=os.path.join(tmp, "set"))
    t, d = made.timings, made.manifest["drafts"]
    target = TARGET.get(domain)
    rest = t["total"] - t["drafting"] - t["verification"]
    return [
        domain,
        f"{d['accepted']} ({d['rejected']} rejected)",
        f"{t['total']:.1f} s",
        f"{t['drafting']:.1f} s",
        f"{t['verification']:.1f} s",
        f"{rest:.1f} s",
        f"<= {target * n / 1000:.0f} s" if target else "-",
    ]


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print(f"\n{title}")
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--domains", nargs="+", default=["airline", "retail", "telecom", "mock"])
    args = p.parse_args()
    print(f"tau2_gym.generation, {args.n} tasks per domain, 1 process on {os.cpu_count()} cores")
    rows = [verification_row(d, args.n) for d in args.domains if d != "mock"]
    table(
        "verification of benchmark train tasks as drafts (no generator involved)",
        ["domain", "drafts", "per task", f"{args.n} tasks", "passed", "target"],
        rows,
    )
    with_generator = [d for d in args.domains if d in set(drafter_domains())]
    rows = [generate_row(d, args.n) for d in with_generator]
    table(
        f"generate: {args.n} verified tasks, seed 0 (domains with a generator: {', '.join(with_generator)})",
        ["domain", "accepted", "wall", "drafting", "verification", "other", "target"],
        rows,
    )


if __name__ == "__main__":
    main()
