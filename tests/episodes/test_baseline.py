"""The do-nothing baseline: equal to what the `give_up` agent earns when the runner plays it, shown beside a
rollout's score, and a filter that takes the free passes out of envs, mixtures and datasets."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from datautil import REPO

import tau2_gym  # noqa: F401 - registers the env ids
from tau2_gym import load_domain
from tau2_gym.episodes.baseline import do_nothing_baseline
from tau2_gym.runner.collect import collect
from tau2_gym.scoring.metrics import is_pass

DOMAINS = ["mock", "airline", "retail", "telecom", "banking_knowledge"]


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_baseline_is_what_the_give_up_agent_earns_in_a_rollout(domain):
    # independent path: the runner's episode loop with the scripted give_up agent and the oracle customer
    report = collect(None, "give_up", "oracle", domain=domain, progress=False, output=None, max_retries=0)
    played = {s["task_id"]: s["reward_info"]["reward"] if s["reward_info"] else 0.0 for s in report.simulations}
    dom = load_domain(domain)
    base = do_nothing_baseline(dom, dom.tasks(None, "default"))
    assert set(base.rewards) == set(played)
    assert base.rewards == pytest.approx(played)
    assert report.baseline["reward"] == pytest.approx(round(sum(played.values()) / len(played), 4))
    assert report.baseline["passes"] == [t for t in base.rewards if is_pass(played[t])]


def test_airline_has_free_passes_and_strict_mode_has_fewer():
    dom = load_domain("airline")
    default = do_nothing_baseline(dom, dom.tasks(None, "default"))
    strict = do_nothing_baseline(dom, dom.tasks(None, "default"), reward_mode="strict")
    assert len(default.passes) > 0 and set(strict.passes) < set(default.passes)
    assert strict.mean < default.mean


def test_the_env_filter_leaves_out_exactly_the_free_passes():
    plain = gym.make("tau2/airline-v0").unwrapped
    env = gym.make("tau2/airline-v0", exclude_do_nothing_passes=True).unwrapped
    passes = set(do_nothing_baseline(plain.domain, plain.tasks).passes)
    assert passes and [t.id for t in env.tasks] == [t.id for t in plain.tasks if t.id not in passes]
    strict = gym.make("tau2/airline-v0", exclude_do_nothing_passes=True, reward_mode="strict").unwrapped
    assert len(strict.tasks) > len(env.tasks)  # fewer tasks are free under the strict reward
    # doing nothing on the filtered pool earns nothing
    for task in env.tasks[:10]:
        env.reset(options={"task_id": task.id})
        done, reward = False, 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step("Thank you for contacting us. Goodbye!")
            done = terminated or truncated
        assert not is_pass(reward)


def test_the_mixture_and_the_dataset_builder_take_the_filter():
    mix = gym.make("tau2/mix-v0", domains=["airline", "mock"], exclude_do_nothing_passes=True).unwrapped
    mix.reset(seed=0, options={"domain": "airline"})
    passes = set(do_nothing_baseline(load_domain("airline"), load_domain("airline").tasks(None, "default")).passes)
    assert not passes & {t.id for t in mix.component_env("airline").unwrapped.tasks}
    pytest.importorskip("datasets")
    from tau2_gym.training.trl import build_dataset

    full = build_dataset("airline", split=None, allow_test_split=True)
    kept = build_dataset("airline", split=None, allow_test_split=True, exclude_do_nothing_passes=True)
    assert set(kept["task_id"]) == set(full["task_id"]) - passes


def test_the_report_shows_the_baseline_recorded_or_computed(tmp_path):
    from tau2_gym.results.report import build_report, load_run, summarise

    out = tmp_path / "give_up.json"
    report = collect(None, "give_up", "oracle", domain="airline", progress=False, output=str(out))
    run = load_run(out)
    assert summarise(run).baseline == pytest.approx(report.mean_reward, abs=1e-4)  # doing nothing = the baseline
    raw = json.loads(out.read_text())
    del raw["info"]["do_nothing_baseline"]  # as upstream's files: computed from the file's tasks
    raw["simulations"] = raw["simulations"][:10]
    assert load_run(out, raw=raw).baseline == pytest.approx(
        sum(s["reward_info"]["reward"] for s in raw["simulations"]) / 10
    )
    assert "do-nothing baseline" in build_report([run])


def test_the_table_covers_every_split_and_mode_and_agrees_across_splits():
    from tau2_gym.episodes.baseline import baseline_table

    rows = {(r["domain"], r["split"]): r for r in baseline_table(["airline", "mock"])}
    dom = load_domain("airline")
    assert {s for d, s in rows if d == "airline"} == set(dom.splits("airline"))
    for split, ids in dom.splits("airline").items():
        assert rows[("airline", split)]["tasks"] == len(ids)
        assert set(rows[("airline", split)]["baselines"]) == {"default", "strict", "partial"}
    passes = {s: set(rows[("airline", s)]["baselines"]["default"].passes) for s in ("train", "test", "base")}
    assert passes["train"] | passes["test"] == passes["base"] and not passes["train"] & passes["test"]


def _documented_tables() -> dict[str, list[str]]:
    """The baseline tables of the README and the docs (the lines after each ``baseline-table`` marker)."""
    root = REPO
    out = {}
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "baseline-table:" in line:
                table = [x for x in lines[i + 3 :] if x.startswith("|")]
                out[path.name] = table[: next((k for k, x in enumerate(lines[i + 3 :]) if not x.startswith("|")), None)]
    return out


def test_the_documented_tables_are_what_the_code_computes():
    from tau2_gym.episodes.baseline import baseline_table

    tables = _documented_tables()
    assert "scoring.md" in tables
    rows = baseline_table(["mock", "airline", "retail", "telecom", "banking_knowledge"])
    computed = [
        f"| {r['domain']} | {r['split']} | {r['tasks']} | "
        + " | ".join(f"{b.mean:.2f} ({len(b.passes)})" for b in r["baselines"].values())
        + " |"
        for r in rows
    ]
    for name, table in tables.items():
        assert table == computed, name
