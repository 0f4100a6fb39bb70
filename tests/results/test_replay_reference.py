"""Differential: trajectories recorded by *upstream* tau2-bench's orchestrator replay identically in tau2-gym.

The scripts of episodes played in our env (scripted agents, oracle and scripted users, user tool calls, agent
stops, limits) drive upstream's ``Orchestrator`` (tests/reference/driver_gym.py); upstream's stored trajectories
and termination reasons are written as a results file, which :func:`tau2_gym.replay` must reproduce message for
message, with upstream's reward.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymutil import RecordingUser, raw_task, run_episode
from refutil import run_reference
from test_turn_loop_reference import JUDGE, MultiCallOracle, StopMidway, mock_tool_user, transfer_user

from tau2_gym.players.agents.scripted import ALL_AGENTS, OracleAgent, WrongArgumentsAgent
from tau2_gym.players.users.scripted import OracleUser, ScriptedUser
from tau2_gym.results.replay import replay

pytestmark = [pytest.mark.reference, pytest.mark.slow]


def cases(data_dir):
    def ids(eid, **kw):
        return [t.id for t in gym.make(eid, data_dir=data_dir, judge="fail", **kw).unwrapped.tasks]

    mock, solo_mock = ids("tau2/mock-v0"), ids("tau2/mock-solo-v0")
    airline, retail = ids("tau2/airline-v0")[:4], ids("tau2/retail-v0")[:4]
    small = ids("tau2/telecom-v0", task_split="small")[:6]
    out = [("tau2/mock-v0", {}, cls, mock[i % 2 :: 2]) for i, cls in enumerate(ALL_AGENTS)]
    out += [
        ("tau2/mock-v0", {"user": ScriptedUser(mock_tool_user)}, OracleAgent, mock[:5]),
        ("tau2/mock-v0", {"user": ScriptedUser(transfer_user)}, OracleAgent, mock[:2]),
        ("tau2/mock-v0", {"agent_can_stop": True}, StopMidway, mock[:2]),
        ("tau2/mock-v0", {"max_steps": 5}, OracleAgent, mock[:3]),
        ("tau2/mock-solo-v0", {}, OracleAgent, solo_mock[:5]),
        ("tau2/airline-v0", {}, OracleAgent, airline),
        ("tau2/airline-v0", {}, WrongArgumentsAgent, airline),
        ("tau2/retail-v0", {}, OracleAgent, retail),
        ("tau2/retail-v0", {}, MultiCallOracle, retail),
        ("tau2/telecom-v0", {"task_split": "small"}, OracleAgent, small),
        ("tau2/telecom-solo-v0", {"task_split": "small"}, OracleAgent, small[:2]),
    ]
    return out


def test_upstream_trajectories_replay_identically(upstream_data_dir):
    data_dir = str(upstream_data_dir)
    files: dict[tuple, dict] = {}
    jobs, keys = [], []
    for eid, kwargs, agent_cls, task_ids in cases(data_dir):
        kwargs = dict(kwargs)
        solo = eid.endswith("-solo-v0")
        user = kwargs.pop("user", OracleUser())
        env = gym.make(eid, data_dir=data_dir, judge=JUDGE, user=RecordingUser(user), **kwargs)
        u = env.unwrapped
        for tid in task_ids:
            ep = run_episode(env, agent_cls(), options={"task_id": tid})
            jobs.append(
                {
                    "domain": u.config.domain,
                    "task": raw_task(env, tid),
                    "solo": solo,
                    "max_steps": u.config.max_steps,
                    "max_errors": u.config.max_errors,
                    "agent_can_stop": bool(u.config.agent_can_stop),
                    "enforce_protocol": False,
                    "agent_script": ep.agent_script,
                    "user_script": ep.user_script,
                }
            )
            key = (u.config.domain, solo, u.config.max_steps, u.config.max_errors)
            keys.append(key)
            files.setdefault(
                key,
                {
                    "info": {
                        "environment_info": {"domain_name": u.config.domain, "policy": ""},
                        "agent_info": {"implementation": "llm_agent_solo" if solo else "llm_agent"},
                        "user_info": {"implementation": "dummy_user" if solo else "user_simulator"},
                        "max_steps": u.config.max_steps,
                        "max_errors": u.config.max_errors,
                    },
                    "tasks": [],
                    "simulations": [],
                },
            )
            if tid not in {t["id"] for t in files[key]["tasks"]}:
                files[key]["tasks"].append(raw_task(env, tid))
    results = run_reference("driver_gym", jobs, timeout=3600)
    upstream_raised = 0
    for job, key, res in zip(jobs, keys, results):
        assert "ok" in res, res.get("failed", "")[-1500:]
        up = res["ok"]
        if up.get("exception"):  # upstream aborts the run (our agent_error/user_error): no trajectory to replay
            upstream_raised += 1
            continue
        sims = files[key]["simulations"]
        sims.append(
            {
                "id": f"up-{len(sims)}",
                "task_id": job["task"]["id"],
                "termination_reason": up["termination_reason"],
                "messages": up["messages"],
                "reward_info": up.get("reward_info"),
            }
        )
    report = replay(list(files.values()), data_dir=data_dir, judge=JUDGE)
    bad = [(s.task_id, s.status, s.error or s.difference) for s in report.simulations if s.status != "identical"]
    changed = [(s.task_id, s.stored_reward, s.new_reward) for s in report.simulations if s.reward_changed]
    endings = {s.recorded_termination for s in report.simulations}
    print(
        f"\n{len(report.simulations)} upstream trajectories replayed ({upstream_raised} upstream aborts skipped): "
        f"{report.summary_line()}; endings {sorted(endings)}"
    )
    assert len(report.simulations) >= 60
    assert {"user_stop", "agent_stop", "max_steps", "too_many_errors"} <= endings
    assert not bad, bad[:20]
    assert not changed, changed[:20]
