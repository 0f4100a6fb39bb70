"""Differential: upstream tau2-bench scores episodes on generated tasks exactly as tau2-gym does.

For every domain with a task generator (found the way ``tau2-gym generate`` finds them, so a domain that gains one
is tested from then on), 100 tasks are generated with seed 0; two results files are collected through the runner
-- the oracle agent on every task, and flawed scripted agents (do-nothing, wrong arguments, a skipped write) on every
task -- and upstream's evaluator re-scores both from the files alone (the tasks travel inside them). Every
episode's reward and DB match must equal ours.
"""

from __future__ import annotations

import itertools

import pytest
from refutil import ok, run_reference

import tau2_gym  # noqa: F401 - registers the domains
from tau2_gym.core.domain import get_domain_spec
from tau2_gym.generation import drafter_domains, generate
from tau2_gym.players.agents.scripted import GiveUpAgent, ScriptedPolicy, SkipLastActionAgent, WrongArgumentsAgent
from tau2_gym.runner.collect import collect

pytestmark = [pytest.mark.slow, pytest.mark.reference]  # slow: generates and plays hundreds of tasks

N_TASKS = 100


def _one_per_data_folder() -> list[str]:
    """Domains with a generator, one per data folder (telecom-workflow scores telecom's tasks as telecom does)."""
    seen: dict[str, str] = {}
    for name in drafter_domains():
        seen.setdefault(get_domain_spec(name).data_folder, name)
    return sorted(seen.values())


@pytest.mark.parametrize("domain", _one_per_data_folder())
def test_upstream_scores_rollouts_on_generated_tasks_as_we_do(domain, tmp_path):
    made = generate(domain, n=N_TASKS, seed=0, out=str(tmp_path / "set"))
    _compare(domain, made, tmp_path, N_TASKS)


@pytest.mark.parametrize("domain, n", [("airline", 15), ("retail", 25)])
def test_upstream_scores_rollouts_on_sets_of_the_stand_in_generator_as_we_do(domain, n, tmp_path):
    """The same comparison on airline and retail sets written by the machinery from benchmark train tasks
    (tests/genutil.py): the folder, provenance and splits are the machinery's whatever the generator."""
    from genutil import benchmark_drafter

    made = generate(domain, n=n, seed=0, out=str(tmp_path / "set"), drafter=benchmark_drafter(domain))
    _compare(domain, made, tmp_path, n)


def _compare(domain: str, made, tmp_path, n_tasks: int) -> None:
    flawed = itertools.cycle([GiveUpAgent, WrongArgumentsAgent, SkipLastActionAgent])
    files = {}
    for name, policy in (("oracle", ScriptedPolicy("oracle")), ("flawed", ScriptedPolicy(lambda: next(flawed)()))):
        path = tmp_path / f"{name}.json"
        report = collect(
            None, policy, domain=domain, data_dir=made.folder, task_split="base", num_trials=1, concurrency=1,
            output=str(path), progress=False,
        )  # fmt: skip
        files[name] = (path, {(r["task_id"], r["trial"]): r for r in report.simulations})
    ours_oracle = files["oracle"][1]
    assert len(ours_oracle) == n_tasks and {r["reward_info"]["reward"] for r in ours_oracle.values()} == {1.0}
    assert 0.0 in {r["reward_info"]["reward"] for r in files["flawed"][1].values()}
    results = run_reference("driver_rollout", [{"path": str(path)} for path, _ in files.values()])
    counts = {}
    for (name, (_, ours)), result in zip(files.items(), results):
        up = ok(result)
        assert len(up["simulations"]) == len(ours) == n_tasks
        for row in up["simulations"]:
            mine = ours[(row["task_id"], row["trial"])]
            assert row["reward"] == mine["reward_info"]["reward"], (name, row)
            assert row["db_match"] == (mine["reward_info"].get("db_check") or {}).get("db_match"), (name, row)
        counts[name] = sum(r["reward"] == 1.0 for r in up["simulations"])
    assert counts["oracle"] == n_tasks
    print(f"{domain}: upstream agrees on {2 * n_tasks} episodes; passes: oracle {counts['oracle']}, "
          f"flawed {counts['flawed']}")  # fmt: skip
