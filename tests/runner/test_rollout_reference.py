"""Differential: upstream tau2-bench loads our rollout results file and re-scores every episode identically."""

from __future__ import annotations

import itertools
import os

import pytest
from refutil import ok, run_reference

from tau2_gym.core.termination import TerminationReason
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import (
    GiveUpAgent,
    OracleAgent,
    ScriptedPolicy,
    SkipLastActionAgent,
    WrongArgumentsAgent,
)
from tau2_gym.runner.collect import collect

pytestmark = pytest.mark.reference


class MixedPolicy(AgentPolicy):
    """Scripted agents in turn (oracle and flawed ones); every episode of task ``down`` raises."""

    offline = True

    def __init__(self, down: str) -> None:
        kinds = itertools.cycle([OracleAgent, SkipLastActionAgent, GiveUpAgent, WrongArgumentsAgent])
        self.inner = ScriptedPolicy(lambda: next(kinds)())
        self.down = down

    def generate(self, request):
        if request.task.id == self.down:
            raise ConnectionError("agent endpoint down")
        return self.inner.generate(request)

    def episode_done(self, episode_id):
        self.inner.episode_done(episode_id)


def test_upstream_reads_and_rescores_our_rollout_results(tmp_path):
    out = tmp_path / "run.json"
    data_dir = os.environ.get("TAU2_UPSTREAM_DATA_DIR")
    report = collect(
        ["0", "1", "2", "4", "5", "7", "10"],
        MixedPolicy(down="5"),
        domain="airline",
        data_dir=data_dir,
        num_trials=2,
        concurrency=1,
        max_retries=0,
        output=str(out),
        progress=False,
    )
    ours = {(r["task_id"], r["trial"]): r for r in report.simulations}
    assert sum(1 for r in ours.values() if r["termination_reason"] == TerminationReason.INFRASTRUCTURE_ERROR) == 2
    rewards = {r["reward_info"]["reward"] for r in ours.values() if r["reward_info"]}
    assert rewards == {0.0, 1.0}
    up = ok(run_reference("driver_rollout", [{"path": str(out)}])[0])
    assert len(up["simulations"]) == len(ours) == 14
    for row in up["simulations"]:
        mine = ours[(row["task_id"], row["trial"])]
        assert row["seed"] == mine["seed"] and row["termination_reason"] == mine["termination_reason"]
        if mine["reward_info"] is None:
            assert row["reward"] is None
        else:
            assert row["reward"] == mine["reward_info"]["reward"], row
            assert row["db_match"] == mine["reward_info"]["db_check"]["db_match"], row
    assert up["metrics"]["infra_error_count"] == 2
    assert up["metrics"]["avg_reward"] == pytest.approx(report.mean_reward)


def test_upstream_reads_our_solo_rollout_as_solo(tmp_path):
    """A solo run of a scripted agent is recorded as ``llm_agent_solo`` (upstream's only solo marker, with
    ``dummy_user``), so upstream re-scores it in solo mode and agrees; our agent's name is kept beside it."""
    out = tmp_path / "solo.json"
    data_dir = os.environ.get("TAU2_UPSTREAM_DATA_DIR")
    kinds = itertools.cycle([OracleAgent, SkipLastActionAgent])
    report = collect(
        None,
        ScriptedPolicy(lambda: next(kinds)()),
        domain="telecom",
        data_dir=data_dir,
        solo=True,
        num_tasks=4,
        num_trials=1,
        concurrency=1,
        output=str(out),
        progress=False,
    )
    import json

    info = json.loads(out.read_text())["info"]
    assert (
        info["agent_info"]["implementation"] == "llm_agent_solo" and info["user_info"]["implementation"] == "dummy_user"
    )
    assert info["agent_info"]["tau2_gym_agent"]
    ours = {(r["task_id"], r["trial"]): r for r in report.simulations}
    assert {r["reward_info"]["reward"] for r in ours.values()} == {0.0, 1.0}
    up = ok(run_reference("driver_rollout", [{"path": str(out)}])[0])
    for row in up["simulations"]:
        mine = ours[(row["task_id"], row["trial"])]
        assert row["reward"] == mine["reward_info"]["reward"], row
