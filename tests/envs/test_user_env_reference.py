"""Differential test: tau2/<domain>-user-v0 against upstream tau2-bench's own ``UserGymEnv``, same scripts.

The agent's turns (upstream: its LLMAgent with the LLM call replaced; ours: a callable agent) and the customer's
actions (upstream gym action strings, read by upstream's ``parse_action_string`` and by our ``parser="tau2"``)
are the recorded oracle episodes of the agent env (oracle and flawed agents). Both envs must produce the same
trajectory, termination, reward breakdown and per-step rewards; our text observation equals upstream's
``all_messages_as_observation=True`` string (but at the end, where upstream's is empty). Skipped without
TAU2_REFERENCE_PYTHON.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from datautil import TESTS
from gymutil import RecordingUser, run_episode
from refutil import ok, reference_python, run_reference

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym import get_domain_spec, load_domain
from tau2_gym.players.agents.scripted import OracleAgent, SkipLastActionAgent
from tau2_gym.players.users.scripted import OracleUser


def _action_string(entry: dict) -> str:
    calls = entry["tool_calls"]
    if not calls:
        return entry["content"]
    assert len(calls) == 1, "an upstream gym action string holds one call"
    c = calls[0]  # requestor "user": upstream's JSON ToolCall defaults to the agent's toolkit otherwise
    return json.dumps({"id": c["id"], "name": c["name"], "arguments": c["arguments"], "requestor": "user"})


def _cases(data_dir) -> list[tuple[str, str, type]]:
    kit = get_domain_spec("airline").agent_toolkit
    writes = next(
        t.id
        for t in load_domain("airline", data_dir).tasks(None, "base")
        if any(kit.mutates_state(a.name) for a in t.evaluation_criteria.actions or [])
    )
    telecom = load_domain("telecom", data_dir).tasks(None, "base")[0].id
    return [
        ("mock", "create_task_1", OracleAgent),
        ("mock", "update_task_with_user_tools", OracleAgent),
        ("airline", writes, OracleAgent),
        ("airline", writes, SkipLastActionAgent),
        ("retail", "5", OracleAgent),
        ("telecom", telecom, OracleAgent),
    ]


def test_user_env_equals_upstreams_user_gym_env(upstream_data_dir):
    reference_python()
    jobs, ours = [], []
    for domain, task_id, agent_cls in _cases(upstream_data_dir):
        aenv = gym.make(
            f"tau2/{domain}-v0", data_dir=str(upstream_data_dir), user=RecordingUser(OracleUser()), judge="pass"
        )
        ep = run_episode(aenv, agent_cls(), options={"task_id": task_id}, seed=0)
        actions = [_action_string(e) for e in ep.user_script]
        jobs.append({"domain": domain, "task_id": task_id, "agent_script": ep.agent_script, "user_actions": actions})
        script = list(ep.agent_script)
        env = gym.make(
            f"tau2/{domain}-user-v0",
            data_dir=str(upstream_data_dir),
            judge="pass",
            parser="tau2",
            obs_format="text",
            agent=lambda request, script=script: {
                "role": "assistant",
                "content": script[request.turn]["content"],
                "tool_calls": script[request.turn]["tool_calls"],
            },
        )
        obs, _ = env.reset(seed=0, options={"task_id": task_id})
        mine = {"observations": [obs], "rewards": []}
        for a in actions:
            obs, reward, term, trunc, info = env.step(a)
            mine["observations"].append(obs)
            mine["rewards"].append(reward)
            if term or trunc:
                break
        mine.update(info=info, terminated=term, truncated=trunc)
        ours.append(mine)
    results = run_reference("driver_user_gym", jobs)
    rewarded = 0
    for job, mine, res in zip(jobs, ours, results):
        theirs = ok(res)
        where = f"{job['domain']} task {job['task_id']}"
        info = mine["info"]
        assert info["termination_reason"] == theirs["termination_reason"] == "user_stop", where
        assert canonical(info) == theirs["messages"], where
        assert mine["rewards"] == theirs["rewards"], where
        assert mine["terminated"] == theirs["terminated"], where
        for key in ("reward", "reward_basis"):
            assert info["reward_info"][key] == theirs["reward_info"][key], (where, key)
        # every observation but the last is upstream's string; at the end upstream returns "" where we return
        # the final view (a Gymnasium env's terminal observation)
        assert mine["observations"][:-1] == theirs["observations_all"][:-1], where
        assert theirs["observations_all"][-1] == "" and mine["observations"][-1].startswith(mine["observations"][-2])
        rewarded += mine["rewards"][-1] == 1.0
    assert 0 < rewarded < len(jobs)  # passes and a failure both compared


def canonical(info: dict) -> list[dict]:
    import sys

    sys.path.insert(0, str(TESTS / "reference"))
    from driver_gym import canonical_message

    return [canonical_message(m) for m in info["simulation_run"]["messages"]]


pytestmark = [pytest.mark.reference, pytest.mark.filterwarnings("ignore::UserWarning")]
