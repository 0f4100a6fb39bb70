"""The generation machinery (tau2_gym.generation) on real domains: the contamination check, verification through the
episode driver, splits by customer, atomic writing with provenance, the telecom training split, ``tau2-gym generate``,
and the training paths that load a generated folder.

Airline and retail are driven by a stand-in generator made of benchmark train tasks (tests/genutil.py), so the
machinery is proven without the domains' own generators.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest
from datautil import REPO
from genutil import benchmark_drafter

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.core.domain import load_domain
from tau2_gym.core.tasks import Task
from tau2_gym.domains.telecom import generate as telecom_generate
from tau2_gym.generation import (
    GenerationError,
    Verifier,
    contamination_check,
    drafter_domains,
    generate,
    get_drafter,
    read_manifest,
)
from tau2_gym.generation.engine import _split_by_group
from tau2_gym.players.agents.scripted import make_agent
from tau2_gym.players.users.scripted import ScriptedUser

BENCHMARK_MEAN_ACTIONS = {"airline": 2.84, "retail": 4.82}  # the figures for the benchmark's tasks


def check_of(domain: str, hook=None):
    loaded = load_domain(domain)
    raw = json.loads(loaded.task_file().read_text(encoding="utf-8"))
    return (
        loaded,
        raw,
        contamination_check(loaded.base_db.data, loaded.base_db.tables, raw, loaded.splits()["test"], hook),
    )


def play(folder: str, domain: str, task_id: str, agent: str, user: str = "oracle") -> float:
    env = gym.make(f"tau2/{domain}-v0", data_dir=folder, task_split=None, user=user, disable_env_checker=True)
    player = make_agent(agent)
    obs, info = env.reset(seed=0, options={"task_id": task_id})
    player.reset(info["task"], info)
    for _ in range(100):
        obs, reward, terminated, truncated, info = env.step(player.act(obs, info))
        if terminated or truncated:
            return float(reward)
    raise AssertionError("episode did not end")


@pytest.fixture(scope="module")
def airline_set(tmp_path_factory):
    return generate(
        "airline", n=10, seed=0, held_out=0.2, drafter=benchmark_drafter("airline"),
        out=str(tmp_path_factory.mktemp("gen") / "set"),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ contamination


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_test_split_entities_come_from_gold_actions_instructions_and_what_customers_own(domain):
    loaded, raw, check = check_of(domain)
    db, test = loaded.base_db.data, set(loaded.splits()["test"])
    named_users = {
        v for t in raw if t["id"] in test for a in t["evaluation_criteria"]["actions"] or []
        for k, v in a["arguments"].items() if k == "user_id"
    }  # fmt: skip
    assert named_users and named_users <= check.entities["users"]
    owner_table = "reservations" if domain == "airline" else "orders"
    named = {
        v for t in raw if t["id"] in test for a in t["evaluation_criteria"]["actions"] or []
        for v in a["arguments"].values() if isinstance(v, str) and v in db[owner_table]
    }  # fmt: skip
    assert named <= check.entities[owner_table]
    # a record named by a test task brings its customer, and the customer everything they own
    owners = {db[owner_table][r]["user_id"] for r in named}
    assert owners <= check.entities["users"]
    own_key = "reservations" if domain == "airline" else "orders"
    assert {r for u in owners for r in db["users"][u][own_key]} <= check.entities[owner_table]
    # catalog entries (flights, products) only where a test task names them, not every one of a test order
    catalog = sorted(check.index.catalog)
    assert catalog == (["flights"] if domain == "airline" else ["products"])
    assert 0 < len(check.entities[catalog[0]]) < len(db[catalog[0]]) // 2
    if domain == "retail":  # retail test tasks find their customer by name + zip: only the closure keeps them out
        assert len(check.entities["users"]) > len(named_users)


def test_a_test_split_user_injected_into_a_draft_fails_the_check(tmp_path):
    """Mutation: a clean draft passes; the same draft naming one test-split customer is rejected, and a generated
    set whose drafts carry one is written without them."""
    loaded, raw, check = check_of("airline")
    drafter = benchmark_drafter("airline")
    clean = next(drafter.draft_tasks(None, n=1, seed=0, exclude=check.values))
    assert check.hits(clean["task"], clean["entities"]) == {}
    intruder = sorted(check.entities["users"])[0]
    dirty = copy.deepcopy(clean)
    dirty["task"]["user_scenario"]["instructions"]["known_info"] += f" Your friend's user id is {intruder}."
    assert check.hits(dirty["task"], dirty["entities"]) == {"users": [intruder]}
    declared = copy.deepcopy(clean)
    declared["entities"]["users"].append(intruder)  # declared only: still caught
    assert check.hits(declared["task"], declared["entities"])

    def injecting(db, **kw):
        for i, d in enumerate(drafter.draft_tasks(db, **kw)):
            if i % 2:
                d["task"]["user_scenario"]["instructions"]["known_info"] += f" (also {intruder})"
            yield d

    fake = SimpleNamespace(**{**vars(drafter), "draft_tasks": injecting})
    made = generate("airline", n=6, seed=1, held_out=0, drafter=fake, out=str(tmp_path / "set"))
    cc = made.manifest["contamination_check"]
    assert made.manifest["rejections"]["contamination"] == cc["drafts_rejected"]["users"] >= 3
    assert cc["accepted_tasks_touching_test_entities"] == 0 and intruder in cc["entities"]["users"]
    written = (Path(made.folder) / "data/tau2/domains/airline/tasks.json").read_text()
    assert intruder not in written
    assert all(check.hits(t) == {} for t in json.loads(written))


# ------------------------------------------------------------------------------------------ verification


def test_generated_airline_set_is_verified_split_by_customer_and_recorded(airline_set):
    made = airline_set
    m = read_manifest(made.folder)
    assert m == made.manifest and m["domain"] == "airline" and m["seed"] == 0 and m["n"] == 10
    assert m["verification"]["passed"]["oracle_with_talking_customer"] == 10
    needs_write = [d for d in made.tasks if any(a["name"].startswith(("book", "cancel", "update"))
                                                for a in d["evaluation_criteria"]["actions"] or [])]  # fmt: skip
    assert m["verification"]["passed"]["do_nothing"] == len(needs_write) > 0
    assert m["verification"]["passed"]["forbidden_writes"] == m["diversity"]["variants"].get("refused", 0) > 0
    # the written tasks, replayed in the env of the folder with both offline customers
    for task in made.tasks:
        assert play(made.folder, "airline", task["id"], "oracle", "talking") == 1.0
    for task in needs_write:
        assert play(made.folder, "airline", task["id"], "give_up") == 0.0
    # splits: all tasks, disjoint, no customer on both sides
    assert sorted(made.ids("train") + made.ids("held_out")) == sorted(made.ids("base")) and len(made.ids("base")) == 10
    assert len(made.ids("held_out")) == 2
    index = check_of("airline")[2].index
    users = {s: {u for i in made.ids(s) for u in index.find(made.by_id()[i]).get("users", ())} for s in made.splits}
    assert users["train"] and users["held_out"] and not users["train"] & users["held_out"]
    # provenance
    assert m["diversity"]["gold_actions"]["benchmark"]["mean"] == BENCHMARK_MEAN_ACTIONS["airline"]
    assert m["contamination_check"]["test_tasks"] == 20 and m["base_data"]["version"] == "tau2-bench==1.0.1"
    assert m["drafts"]["accepted"] == 10 and sum(m["rejections"].values()) == m["drafts"]["rejected"]


def test_retail_benchmark_mean_and_generated_set(tmp_path):
    made = generate("retail", n=6, seed=0, drafter=benchmark_drafter("retail"), out=str(tmp_path / "r"))
    assert made.manifest["diversity"]["gold_actions"]["benchmark"]["mean"] == BENCHMARK_MEAN_ACTIONS["retail"]
    assert made.manifest["contamination_check"]["entity_counts"]["users"] > 20
    assert all(play(made.folder, "retail", i, "oracle") == 1.0 for i in made.ids("base"))


@pytest.fixture(scope="module")
def airline_verifier():
    return Verifier(load_domain("airline"))


def _draft(refused: bool = False) -> dict:
    check = check_of("airline")[2]
    for d in benchmark_drafter("airline").draft_tasks(None, n=30, seed=0, exclude=check.values):
        if (d["variant"] == "refused") == refused and (refused or d["needs_write"]):
            return d
    raise AssertionError("no such benchmark task")


def _verify(verifier, draft):
    return verifier.verify(Task.model_validate(draft["task"]), draft)


def test_a_refused_variant_needs_the_forbidden_write_to_cost_the_reward(airline_verifier):
    draft = _draft(refused=True)
    assert _verify(airline_verifier, draft) is None
    harmless = copy.deepcopy(draft)
    user = draft["entities"]["users"][0]
    harmless["forbidden_actions"] = [{"name": "get_user_details", "arguments": {"user_id": user}}]
    assert _verify(airline_verifier, harmless).reason == "forbidden_writes_above_0"


def test_each_check_rejects_what_it_should(airline_verifier):
    draft = _draft()
    assert _verify(airline_verifier, draft) is None
    broken = copy.deepcopy(draft)  # a gold read of a reservation that does not exist
    broken["task"]["evaluation_criteria"]["actions"].insert(
        0, {"action_id": "x", "name": "get_reservation_details", "arguments": {"reservation_id": "ZZZZZZ"}}
    )
    assert _verify(airline_verifier, broken).reason == "gold_tool_error"
    read_only = _draft(refused=True)
    lying = {**read_only, "variant": "allowed", "needs_write": True}  # nothing to write: do-nothing passes it
    assert _verify(airline_verifier, lying).reason == "do_nothing_above_0"
    judged = copy.deepcopy(draft)
    judged["task"]["evaluation_criteria"]["reward_basis"].append("NL_ASSERTION")
    assert _verify(airline_verifier, judged).reason == "needs_llm_judge"
    silent = Verifier(load_domain("airline"))
    silent.talking_user = ScriptedUser(["###STOP###"])  # a customer who hangs up at once
    assert _verify(silent, draft).reason == "talking_customer_below_1"
    endless = copy.deepcopy(draft)  # more gold steps than the env allows: the oracle's episode is truncated
    read = {"name": "get_user_details", "arguments": {"user_id": draft["entities"]["users"][0]}}
    endless["task"]["evaluation_criteria"]["actions"][:0] = [{"action_id": f"r{i}", **read} for i in range(60)]
    assert _verify(airline_verifier, endless).reason == "oracle_below_1"


def test_the_loop_counts_invalid_and_duplicate_drafts(tmp_path):
    drafter = benchmark_drafter("airline")
    good = list(drafter.draft_tasks(None, n=30, seed=0, exclude=check_of("airline")[2].values))

    def drafts(db, **kw):
        yield {**good[0], "intent": "teleport"}
        yield {k: v for k, v in good[1].items() if k != "needs_write"}
        yield good[2]
        yield {**good[2], "task": {**good[2]["task"], "id": "gen_other"}}  # same task, other id
        yield from good[3:]

    fake = SimpleNamespace(**{**vars(drafter), "draft_tasks": drafts})
    made = generate("airline", n=4, seed=0, held_out=0, drafter=fake, out=str(tmp_path / "s"))
    assert made.manifest["rejections"]["invalid_draft"] == 2 and made.manifest["rejections"]["duplicate"] == 1
    assert made.manifest["rejection_examples"]["invalid_draft"][0]["detail"].startswith("intent 'teleport'")


def test_splits_keep_each_customer_on_one_side():
    drafts = [{"entities": {"users": u}, "task": {"id": str(i)}} for i, u in
              enumerate([["a", "b"], ["b", "c"], ["c"], ["d"], ["e"], ["f"], ["a"]])]  # fmt: skip
    for seed in range(20):
        split = _split_by_group(drafts, 3, seed)
        held = {u for i in split["held_out"] for u in drafts[i]["entities"]["users"]}
        train = {u for i in split["train"] for u in drafts[i]["entities"]["users"]}
        assert not held & train and sorted(split["train"] + split["held_out"]) == list(range(7))
        # a-b, b-c, c, a are one customer group of 4: too big for 3 held-out tasks; d, e, f fill it
        assert {0, 1, 2, 6} <= set(split["train"]) and sorted(split["held_out"]) == [3, 4, 5]


# ------------------------------------------------------------------------------------------ writing


def test_an_existing_folder_that_is_not_a_generated_set_is_refused_untouched(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(GenerationError, match="not a generated task set"):
        generate("mock", n=2, out=str(mine))
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert generate("mock", n=2, out=str(empty)).folder == str(empty)


def test_a_failure_midway_writes_nothing(tmp_path):
    def exploding(db, **kw):
        from tau2_gym.domains.mock.generate import draft_tasks

        for i, d in enumerate(draft_tasks(db, **kw)):
            if i == 3:
                raise RuntimeError("the generator broke")
            yield d

    fake = SimpleNamespace(__name__="x", GENERATOR_VERSION=1, INTENTS=("complete", "reopen", "create"),
                           draft_tasks=exploding)  # fmt: skip
    with pytest.raises(RuntimeError, match="broke"):
        generate("mock", n=10, out=str(tmp_path / "set"), drafter=fake)
    assert list(tmp_path.iterdir()) == []


def test_one_folder_holds_the_sets_of_several_domains(airline_set, tmp_path):
    folder = tmp_path / "both"
    first = generate("airline", n=4, seed=0, held_out=0.25, drafter=benchmark_drafter("airline"), out=str(folder))
    mock_a = generate("mock", n=6, seed=1, out=str(folder))
    airline_bytes = (folder / "data/tau2/domains/airline/tasks.json").read_bytes()
    mock_b = generate("mock", n=6, seed=2, out=str(folder))  # replaces mock, leaves airline
    assert (folder / "data/tau2/domains/airline/tasks.json").read_bytes() == airline_bytes
    assert json.loads((folder / "data/tau2/domains/mock/tasks.json").read_text()) == mock_b.tasks != mock_a.tasks
    assert read_manifest(folder, "mock")["seed"] == 2 and read_manifest(folder, "airline")["seed"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both"]
    env = gym.make("tau2/mix-v0", domains=["airline", "mock"], split="train", data_dir=str(folder),
                   disable_env_checker=True)  # fmt: skip
    seen = {tuple(env.reset(seed=s)[1][k] for k in ("domain", "task_id")) for s in range(30)}
    assert {d for d, _ in seen} == {"airline", "mock"}
    assert {i for d, i in seen if d == "airline"} <= set(first.ids("train"))
    assert {i for d, i in seen if d == "mock"} <= set(mock_b.ids("train"))


# ------------------------------------------------------------------------------------------ discovery, telecom


def test_generators_are_found_by_module_not_by_name():
    assert {"mock", "telecom"} <= set(drafter_domains())
    assert "banking_knowledge" not in drafter_domains()
    with pytest.raises(ValueError, match="has no task generator.*mock"):
        get_drafter("banking_knowledge")
    with pytest.raises(ValueError, match="unknown domain 'atlantis'; domains with a task generator are: .*mock"):
        get_drafter("atlantis")
    with pytest.raises(ValueError, match="unknown intent 'fly' for mock; intents are: complete, reopen, create"):
        get_drafter("mock").check_intents(["complete", "fly"])
    assert get_drafter("mock").check_intents(["complete+create"]) == ("complete+create",)


def test_telecom_training_split_is_full_minus_the_test_scenarios():
    loaded = load_domain("telecom")
    full = json.loads(loaded.task_file("telecom_full").read_text(encoding="utf-8"))
    _, _, check = check_of("telecom", telecom_generate.task_entities)
    test = set(loaded.splits()["test"])
    assert check.entities["scenarios"] == {telecom_generate.scenario(i) for i in test}
    drafts = list(telecom_generate.draft_tasks(None, n=0, seed=0, exclude=check.values, source_tasks=full))
    kept = {d["task"]["id"] for d in drafts}
    left_out = {t["id"] for t in full} - kept
    assert test <= left_out and len(left_out) == 41 and len(kept) == 2244 == len(drafts)
    (extra,) = left_out - test  # another intent with the same sub-issues as a test task
    assert telecom_generate.scenario(extra) in check.entities["scenarios"]
    assert all(check.hits(d["task"], d["entities"]) == {} for d in drafts)
    assert set(loaded.splits()["train"]) <= kept  # the benchmark's own train tasks are in it


def test_telecom_training_set_is_written_verified_and_unchanged(tmp_path):
    made = generate("telecom", n=8, seed=3, held_out=0.25, out=str(tmp_path / "tel"))
    full = {t["id"]: t for t in json.loads(load_domain("telecom").task_file("telecom_full").read_text())}
    for task in made.tasks:  # upstream's tasks, as shipped, with a note of where they come from
        assert {k: v for k, v in task.items() if k != "description"} == {
            k: v for k, v in full[task["id"]].items() if k != "description"
        }
    assert made.manifest["contamination_check"]["entity_counts"] == {"scenarios": 40}
    assert made.manifest["verification"]["passed"]["oracle_with_talking_customer"] == 8
    env = gym.make("tau2/telecom-v0", data_dir=made.folder, task_split="train", disable_env_checker=True)
    assert [t.id for t in env.unwrapped.tasks] == made.ids("train") and len(made.ids("train")) == 6


# ------------------------------------------------------------------------------------------ command line


def test_cli_writes_a_set_and_prints_what_it_verified(tmp_path, capsys):
    from tau2_gym.cli import main

    assert main(["generate", "--domain", "mock", "--n", "6", "--seed", "4", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "wrote 6 verified mock tasks" in out and "oracle agent scored 1.0" in out and "no test split" in out
    assert read_manifest(tmp_path / "s")["seed"] == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--domain", "atlantis"], "unknown domain 'atlantis'; domains with a task generator are: "),
        (["--domain", "banking_knowledge"], "has no task generator"),
        (["--domain", "mock", "--intents", "fly"], "unknown intent 'fly' for mock; intents are: complete, reopen"),
        (["--domain", "mock", "--n", "0"], "argument --n: must be a positive integer, got 0"),
        (["--domain", "mock", "--seed", "1.5"], "argument --seed: must be an integer, got '1.5'"),
        (["--domain", "mock", "--held-out", "2"], "argument --held-out: must be a fraction in [0, 1)"),
        (["--domain", "mock", "--out", "EXISTING"], "exists and is not a generated task set"),
    ],
)
def test_cli_bad_input_is_one_error_line_and_writes_nothing(tmp_path, capsys, argv, message):
    from tau2_gym.cli import main

    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "file").write_text("x")
    defaults = {"--n": "3", "--out": str(tmp_path / "new")}
    argv = [str(existing) if a == "EXISTING" else a for a in argv]
    for flag, value in defaults.items():
        if flag not in argv:
            argv += [flag, value]
    with pytest.raises(SystemExit) if "argument" in message else contextlib.nullcontext():
        assert main(["generate", *argv]) == 2  # argparse's errors exit (2) from inside main
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert sorted(os.listdir(tmp_path)) == ["existing"] and os.listdir(existing) == ["file"]


# ------------------------------------------------------------------------------------------ training paths


def test_training_paths_take_a_generated_set_and_guard_its_held_out_split(airline_set, tmp_path):
    pytest.importorskip("datasets")
    from tau2_gym.cli import main
    from tau2_gym.training.export import SplitGuardError
    from tau2_gym.training.trl import build_dataset, make_environment_factory, make_rollout_func

    made = airline_set
    ds = build_dataset("airline", split="train", data_dir=made.folder)
    assert list(ds["task_id"]) == made.ids("train")
    with pytest.raises(SplitGuardError, match="held_out"):
        build_dataset("airline", split="held_out", data_dir=made.folder)
    rollout = make_rollout_func(env_kwargs={"data_dir": made.folder})
    assert rollout.check_split("airline", made.ids("train")[0]) == "train"
    with pytest.raises(SplitGuardError):
        rollout.check_split("airline", made.ids("held_out")[0])
    env = make_environment_factory("airline", data_dir=made.folder)()
    row = build_dataset("airline", split="train", data_dir=made.folder, environment=True)[0]
    env.reset(**row)
    reason = made.by_id()[row["task_id"]]["user_scenario"]["instructions"]["reason_for_call"]
    assert reason.strip()[:40] in env.messages[-1]["content"]  # the generated task's customer opens
    out = tmp_path / "run.json"
    argv = ["rollout", "--domain", "airline", "--data-dir", made.folder, "--task-split-name", "held_out"]
    assert main(argv + ["--agent", "oracle", "--user", "oracle", "--output", str(out), "--no-progress"]) == 0
    runs = json.loads(out.read_text())["simulations"]
    assert sorted(r["task_id"] for r in runs) == sorted(made.ids("held_out"))
    assert all(r["reward_info"]["reward"] == 1.0 for r in runs)
    # SFT export of a run over the whole set: the train tasks only; the held-out ones are refused
    everything = tmp_path / "all.json"
    argv = ["rollout", "--domain", "airline", "--data-dir", made.folder, "--task-split-name", "base"]
    assert main(argv + ["--agent", "oracle", "--user", "oracle", "--output", str(everything), "--no-progress"]) == 0
    export = ["export", str(everything), "--data-dir", made.folder, "--output"]
    assert main(export + [str(tmp_path / "sft")]) == 0
    from datasets import load_from_disk

    assert sorted(load_from_disk(str(tmp_path / "sft"))["task_id"]) == sorted(made.ids("train"))
    assert main(export + [str(tmp_path / "sft2"), "--split", "held_out"]) == 2


def test_learning_proof_trains_on_a_generated_set_and_measures_its_held_out_split(airline_set, tmp_path):
    import sys

    examples = str(REPO / "examples")
    sys.path.insert(0, examples)
    try:
        import learning_proof
    finally:
        sys.path.remove(examples)
    args = learning_proof.parse_args(["--domain", "airline", "--train-tasks", airline_set.folder])
    tasks = learning_proof.prepare_tasks(args, str(tmp_path))
    assert tasks == {"data_dir": airline_set.folder, "train": airline_set.ids("train"),
                     "test": airline_set.ids("held_out")}  # fmt: skip
    with pytest.raises(SystemExit, match="holds no generated retail set"):
        learning_proof.prepare_tasks(learning_proof.parse_args(["--domain", "retail", "--train-tasks",
                                                                airline_set.folder]), str(tmp_path))  # fmt: skip
    # the CPU recipe's own mock tasks come from the machinery: n train + n held-out, disjoint
    args = learning_proof.parse_args(["--n-train-tasks", "6", "--n-test-tasks", "3"])
    mock = learning_proof.prepare_tasks(args, str(tmp_path))
    assert len(mock["train"]) == 6 and len(mock["test"]) == 3 and not set(mock["train"]) & set(mock["test"])
