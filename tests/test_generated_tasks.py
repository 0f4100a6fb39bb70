"""Generated mock tasks (domains/mock/generate.py): verified by episodes, disjoint across splits, deterministic,
and loaded by the ordinary data paths (env, mixture, rollout, dataset builder) from the folder they are written to.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import gymnasium as gym
import pytest

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.domains.mock.generate import (
    GENERATOR,
    INTENTS,
    argument_values,
    episode_verifier,
    generate_tasks,
    read_manifest,
    write_task_set,
)
from tau2_gym.players.agents.scripted import make_agent


def make_env(data_dir: str) -> gym.Env:
    return gym.make("tau2/mock-v0", data_dir=data_dir, task_split=None, user="oracle", disable_env_checker=True)


VERIFY = episode_verifier(make_env, make_agent)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    gen = generate_tasks(seed=7, n_train=12, n_test=6)
    folder = write_task_set(tmp_path_factory.mktemp("gen"), gen, VERIFY)
    return gen, folder


def test_every_task_verified_by_oracle_and_do_nothing_episodes(generated):
    gen, folder = generated
    manifest = read_manifest(folder)
    assert manifest["generator"] == GENERATOR
    assert manifest["verified"] == {"tasks": 18, "oracle_reward": 1.0, "do_nothing_reward": 0.0}
    # the verifier itself: re-run it and look at every task's pair
    results = VERIFY(folder, [t["id"] for t in gen.tasks])
    assert set(results.values()) == {(1.0, 0.0)}
    assert {t["id"].rsplit("_", 1)[-1] for t in gen.tasks} == set(INTENTS)


def test_a_broken_task_fails_verification(tmp_path):
    gen = generate_tasks(seed=3, n_train=3, n_test=0)
    broken = copy.deepcopy(gen)
    action = broken.tasks[0]["evaluation_criteria"]["actions"][0]
    action["arguments"]["task_id"] = "task_1"  # gold acts on another task: the env assertion fails for the oracle
    with pytest.raises(ValueError, match="failed verification"):
        write_task_set(tmp_path, broken, VERIFY)
    unverified = write_task_set(tmp_path / "u", gen, None)
    assert read_manifest(unverified)["verified"] is None


def test_train_and_test_share_no_argument_value(generated):
    gen, _ = generated
    by_id = gen.by_id()
    train = set().union(*(argument_values(by_id[i]) for i in gen.ids("train")))
    test = set().union(*(argument_values(by_id[i]) for i in gen.ids("test")))
    assert train and test and not train & test
    assert len({t["id"] for t in gen.tasks}) == len(gen.tasks) == 18
    assert set(gen.ids("train")).isdisjoint(gen.ids("test"))
    # two-digit ids: still disjoint, and every digit occurs in both splits
    short = generate_tasks(seed=5, n_train=40, n_test=40, id_digits=2)
    tr = set().union(*(argument_values(short.by_id()[i]) for i in short.ids("train")))
    te = set().union(*(argument_values(short.by_id()[i]) for i in short.ids("test")))
    assert not tr & te
    assert all(len(v) == len("task_12") for v in tr | te if v.startswith("task_"))


def test_deterministic_from_the_seed(tmp_path):
    a, b = generate_tasks(seed=11, n_train=5, n_test=3), generate_tasks(seed=11, n_train=5, n_test=3)
    assert json.dumps(a.tasks) == json.dumps(b.tasks) and a.splits == b.splits
    assert json.dumps(generate_tasks(seed=12, n_train=5, n_test=3).tasks) != json.dumps(a.tasks)
    p1 = Path(write_task_set(tmp_path / "1", a, None)) / "data/tau2/domains/mock/tasks.json"
    p2 = Path(write_task_set(tmp_path / "2", b, None)) / "data/tau2/domains/mock/tasks.json"
    assert p1.read_bytes() == p2.read_bytes()


def test_records_that_it_is_generated(generated):
    gen, folder = generated
    assert all(GENERATOR in t["description"]["notes"] for t in gen.tasks)
    assert read_manifest(folder)["settings"]["seed"] == 7
    env = gym.make("tau2/mock-v0", data_dir=folder, task_split="train", disable_env_checker=True)
    _, info = env.reset(seed=0)
    assert GENERATOR in info["task"].description.notes
    assert info["data_version"]["origin"] == "argument"  # a folder of the user's, not the verified cache


def test_loads_in_env_with_splits(generated):
    gen, folder = generated
    for split in ("train", "test"):
        env = gym.make("tau2/mock-v0", data_dir=folder, task_split=split, disable_env_checker=True)
        assert [t.id for t in env.unwrapped.tasks] == gen.ids(split)
        obs, info = env.reset(seed=1)
        task = gen.by_id()[info["task_id"]]
        # the customer's opening message names what the gold call needs
        opening = obs[-1]["content"]
        for key, value in task["evaluation_criteria"]["actions"][0]["arguments"].items():
            if key != "status":
                assert str(value) in opening


def test_loads_in_mixture(generated):
    gen, folder = generated
    env = gym.make("tau2/mix-v0", domains=["mock"], split="test", data_dir=folder, disable_env_checker=True)
    seen = {env.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert seen and seen <= set(gen.ids("test"))


def test_loads_in_dataset_builder_with_the_split_guard(generated):
    pytest.importorskip("datasets")
    from tau2_gym.training.export import SplitGuardError
    from tau2_gym.training.trl import build_dataset, parse_task_prompt

    gen, folder = generated
    ds = build_dataset("mock", split="train", data_dir=folder)
    assert list(ds["task_id"]) == gen.ids("train")
    assert parse_task_prompt(ds["prompt"][0]) == ("mock", gen.ids("train")[0])
    with pytest.raises(SplitGuardError):
        build_dataset("mock", split="test", data_dir=folder)
    assert list(build_dataset("mock", split="test", data_dir=folder, allow_test_split=True)["task_id"]) == gen.ids(
        "test"
    )


def test_loads_in_rollout(generated, tmp_path):
    from tau2_gym.cli import main as cli

    gen, folder = generated
    out = tmp_path / "oracle.json"
    argv = ["rollout", "--domain", "mock", "--data-dir", folder, "--task-split-name", "test", "--agent", "oracle"]
    assert cli(argv + ["--user", "oracle", "--output", str(out), "--no-progress"]) == 0
    runs = json.loads(out.read_text())["simulations"]
    assert sorted(r["task_id"] for r in runs) == sorted(gen.ids("test"))
    assert all(r["reward_info"]["reward"] == 1.0 for r in runs)


@pytest.mark.reference
def test_upstream_scores_a_rollout_on_generated_tasks_as_we_do(generated, tmp_path):
    """Differential: a results file of scripted agents (oracle and flawed ones) on every generated task, re-scored
    by upstream tau2-bench from the file alone (the tasks travel inside it), gets our rewards, episode by episode."""
    import itertools

    from refutil import ok, run_reference

    from tau2_gym.players.agents.scripted import GiveUpAgent, OracleAgent, ScriptedPolicy, WrongArgumentsAgent
    from tau2_gym.runner.collect import collect

    gen, folder = generated
    kinds = itertools.cycle([OracleAgent, GiveUpAgent, WrongArgumentsAgent])
    out = tmp_path / "run.json"
    report = collect(
        None,
        ScriptedPolicy(lambda: next(kinds)()),
        domain="mock",
        data_dir=folder,
        task_split="base",
        num_trials=1,
        concurrency=1,
        output=str(out),
        progress=False,
    )
    ours = {(r["task_id"], r["trial"]): r for r in report.simulations}
    assert len(ours) == len(gen.tasks)
    assert {r["reward_info"]["reward"] for r in ours.values()} == {0.0, 1.0}
    up = ok(run_reference("driver_rollout", [{"path": str(out)}])[0])
    assert len(up["simulations"]) == len(ours)
    for row in up["simulations"]:
        mine = ours[(row["task_id"], row["trial"])]
        assert row["reward"] == mine["reward_info"]["reward"], row
        assert row["db_match"] == mine["reward_info"]["db_check"]["db_match"], row
