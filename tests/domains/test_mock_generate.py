"""Generated mock tasks (domains/mock/generate.py on tau2_gym.generation): verified by episodes, disjoint across
splits, deterministic, and loaded by the ordinary data paths (env, mixture, rollout, dataset builder) from the folder
they are written to.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import gymnasium as gym
import pytest

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.domains.mock import generate as mock_generate
from tau2_gym.domains.mock.generate import GENERATOR, INTENTS, argument_values
from tau2_gym.generation import GenerationError, generate, read_manifest
from tau2_gym.players.agents.scripted import make_agent


def play(folder: str, task_id: str, agent_name: str) -> float:
    """One episode of a written task in the env, with a scripted agent and the oracle customer."""
    env = gym.make("tau2/mock-v0", data_dir=folder, task_split=None, user="oracle", disable_env_checker=True)
    agent = make_agent(agent_name)
    obs, info = env.reset(seed=0, options={"task_id": task_id})
    agent.reset(info["task"], info)
    for _ in range(50):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        if terminated or truncated:
            env.close()
            return float(reward)
    raise AssertionError("episode did not end")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    gen = generate("mock", n=18, seed=7, held_out=1 / 3, out=str(tmp_path_factory.mktemp("gen") / "set"))
    return gen, gen.folder


def test_every_task_verified_by_oracle_and_do_nothing_episodes(generated):
    gen, folder = generated
    manifest = read_manifest(folder)
    assert manifest["generator"] == GENERATOR
    assert manifest["verification"]["tasks"] == 18
    assert manifest["verification"]["passed"]["oracle_with_talking_customer"] == 18
    assert manifest["verification"]["passed"]["do_nothing"] == 18
    # the written tasks, played again in the env of the folder: oracle 1.0, do-nothing 0.0 on every one
    assert {(play(folder, t["id"], "oracle"), play(folder, t["id"], "give_up")) for t in gen.tasks} == {(1.0, 0.0)}
    assert {t["id"].rsplit("_", 1)[-1] for t in gen.tasks} == set(INTENTS)


def _corrupting(which):
    """The mock generator with the gold action of the drafts ``which(i)`` selects acting on another task."""

    def draft_tasks(db, **kw):
        for i, draft in enumerate(mock_generate.draft_tasks(db, **kw)):
            if which(i):
                draft["task"]["evaluation_criteria"]["actions"][0]["arguments"]["task_id"] = "task_1"
            yield draft

    return SimpleNamespace(
        __name__=GENERATOR, GENERATOR_VERSION=mock_generate.GENERATOR_VERSION, INTENTS=INTENTS, draft_tasks=draft_tasks
    )


def test_a_broken_task_fails_verification_and_is_not_written(tmp_path):
    # a draft whose gold acts on another task: the env assertion fails for the oracle -> rejected, counted
    gen = generate("mock", n=4, seed=3, held_out=0.5, out=str(tmp_path / "a"), drafter=_corrupting(lambda i: i == 0))
    assert gen.manifest["rejections"] == {"oracle_below_1": 1}
    assert len(gen.tasks) == 4
    # every draft broken: the generator cannot deliver, nothing is written
    with pytest.raises(GenerationError, match="oracle_below_1"):
        generate("mock", n=4, seed=3, out=str(tmp_path / "b"), drafter=_corrupting(lambda i: True), max_drafts=40)
    assert not (tmp_path / "b").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["a"]  # no staging folder left behind


def test_train_and_held_out_share_no_argument_value(generated, tmp_path):
    gen, _ = generated
    by_id = gen.by_id()
    train = set().union(*(argument_values(by_id[i]) for i in gen.ids("train")))
    held = set().union(*(argument_values(by_id[i]) for i in gen.ids("held_out")))
    assert train and held and not train & held
    assert len({t["id"] for t in gen.tasks}) == len(gen.tasks) == 18
    assert set(gen.ids("train")).isdisjoint(gen.ids("held_out"))
    # two-digit ids: still disjoint, and every digit occurs in both splits
    short = generate("mock", n=60, seed=5, held_out=0.5, options={"id_digits": 2}, out=str(tmp_path / "s"))
    tr = set().union(*(argument_values(short.by_id()[i]) for i in short.ids("train")))
    te = set().union(*(argument_values(short.by_id()[i]) for i in short.ids("held_out")))
    assert not tr & te
    assert all(len(v) == len("task_12") for v in tr | te if v.startswith("task_"))


def test_deterministic_from_the_seed(tmp_path):
    a = generate("mock", n=8, seed=11, out=str(tmp_path / "1"))
    b = generate("mock", n=8, seed=11, out=str(tmp_path / "2"))
    assert json.dumps(a.tasks) == json.dumps(b.tasks) and a.splits == b.splits
    assert json.dumps(generate("mock", n=8, seed=12, out=str(tmp_path / "3")).tasks) != json.dumps(a.tasks)
    for name in ("tasks.json", "split_tasks.json", "generated.json"):
        p1, p2 = (tmp_path / d / "data/tau2/domains/mock" / name for d in ("1", "2"))
        assert p1.read_bytes() == p2.read_bytes(), name


def test_train_tasks_do_not_depend_on_the_held_out_share(tmp_path):
    """The mock train stream is drawn from the seed alone: asking for more held-out tasks changes no train task."""
    few = generate("mock", n=8, seed=2, held_out=0.25, out=str(tmp_path / "few"))
    many = generate("mock", n=12, seed=2, held_out=0.5, out=str(tmp_path / "many"))
    assert [few.by_id()[i] for i in few.ids("train")] == [many.by_id()[i] for i in many.ids("train")]
    # n_train (generator v1's order): the same train tasks, then held-out ones from the same stream
    v1 = generate("mock", n=8, seed=2, held_out=0.25, options={"n_train": 6}, out=str(tmp_path / "v1"))
    assert [v1.by_id()[i] for i in v1.ids("train")] == [few.by_id()[i] for i in few.ids("train")]
    assert [v1.by_id()[i] for i in v1.ids("held_out")] != [few.by_id()[i] for i in few.ids("held_out")]


def test_records_that_it_is_generated(generated):
    gen, folder = generated
    assert all(GENERATOR in t["description"]["notes"] for t in gen.tasks)
    assert read_manifest(folder)["seed"] == 7
    env = gym.make("tau2/mock-v0", data_dir=folder, task_split="train", disable_env_checker=True)
    _, info = env.reset(seed=0)
    assert GENERATOR in info["task"].description.notes
    assert info["data_version"]["origin"] == "argument"  # a folder of the user's, not the verified cache


def test_loads_in_env_with_splits(generated):
    gen, folder = generated
    for split in ("train", "held_out"):
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
    env = gym.make("tau2/mix-v0", domains=["mock"], split="held_out", data_dir=folder, disable_env_checker=True)
    seen = {env.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert seen and seen <= set(gen.ids("held_out"))


def test_loads_in_dataset_builder_with_the_split_guard(generated):
    pytest.importorskip("datasets")
    from tau2_gym.training.export import SplitGuardError
    from tau2_gym.training.trl import build_dataset, parse_task_prompt

    gen, folder = generated
    ds = build_dataset("mock", split="train", data_dir=folder)
    assert list(ds["task_id"]) == gen.ids("train")
    assert parse_task_prompt(ds["prompt"][0]) == ("mock", gen.ids("train")[0])
    for held_out in ("held_out", "base", None):
        with pytest.raises(SplitGuardError, match="held_out"):
            build_dataset("mock", split=held_out, data_dir=folder)
    held = build_dataset("mock", split="held_out", data_dir=folder, allow_test_split=True)
    assert list(held["task_id"]) == gen.ids("held_out")


def test_loads_in_rollout(generated, tmp_path):
    from tau2_gym.cli import main as cli

    gen, folder = generated
    out = tmp_path / "oracle.json"
    argv = ["rollout", "--domain", "mock", "--data-dir", folder, "--task-split-name", "held_out", "--agent", "oracle"]
    assert cli(argv + ["--user", "oracle", "--output", str(out), "--no-progress"]) == 0
    runs = json.loads(out.read_text())["simulations"]
    assert sorted(r["task_id"] for r in runs) == sorted(gen.ids("held_out"))
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
