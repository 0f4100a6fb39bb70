"""Differential test of the whole episode loop against upstream tau2-bench's ``Orchestrator``.

Each case runs one episode in our env with a scripted agent and a scripted/oracle user, recording both sides'
messages. The very same scripts then drive upstream's orchestrator (tests/reference/driver_gym.py: upstream's
LLMAgent / LLMSoloAgent / UserSimulator with only the LLM call replaced). Compared per episode: the stored
trajectory (roles, contents, tool calls, results, order), the termination reason, the reward (and whether
evaluation failed), every view sent to the agent's and the user's LLM (hashes), both system prompts and the
tool lists. Upstream raises where we end with ``agent_error``/``user_error`` (unreadable or empty messages);
those must line up too.

Cases: every mock task with every scripted agent, solo mock/telecom, 30 airline, 30 retail and 30 telecom
tasks with the oracle and flawed agents, and perturbations (step and error limits swept through the
deferred-check and stop-override paths, mixed messages with and without the protocol check, several calls
per message, agent stops, empty and unreadable actions, user transfers, user tool calls, user failures).
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymutil import RecordingUser, canonical_trajectory, raw_task, run_episode
from reference.driver_gym import stub_judge_reply, view_hash
from refutil import run_reference

from tau2_gym.players.agents.scripted import (
    ALL_AGENTS,
    OracleAgent,
    SkipLastActionAgent,
    WrongArgumentsAgent,
    call_message,
)
from tau2_gym.players.users.scripted import OracleUser, ScriptedUser, opening_line
from tau2_gym.scoring.judges import CallableJudge

pytestmark = [pytest.mark.reference, pytest.mark.slow]

JUDGE = CallableJudge(stub_judge_reply, name="stub")


# ------------------------------------------------------------------------------- perturbed agents


class MixedOracle(OracleAgent):
    """Every tool call also carries text (routed to the environment; a protocol error when enforced)."""

    name = "mixed"

    def plan(self, task):
        return [{**m, "content": "Let me take care of that."} if m.get("tool_calls") else m for m in super().plan(task)]


class MultiCallOracle(OracleAgent):
    """Consecutive gold calls sent together in one message (a multi-tool step)."""

    name = "multi_call"

    def plan(self, task):
        out = []
        for m in super().plan(task):
            if (
                m.get("tool_calls")
                and out
                and out[-1].get("tool_calls")
                and m["tool_calls"][0]["function"]["name"] != "done"
            ):
                out[-1] = {**out[-1], "tool_calls": out[-1]["tool_calls"] + m["tool_calls"]}
            else:
                out.append(m)
        return out


class StopMidway(OracleAgent):
    """After its first step, calls a tool together with ``done`` (the calls are dropped; the agent stops)."""

    name = "stop_midway"

    def plan(self, task):
        plan = super().plan(task)
        stop = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call_message("get_users", {}, "s1")["tool_calls"][0],
                call_message("done", {}, "s2")["tool_calls"][0],
            ],
        }
        return plan[:1] + [stop]


class StopText(OracleAgent):
    """Says ###STOP### first (a stop only for an agent that may stop)."""

    name = "stop_text"

    def plan(self, task):
        return [{"role": "assistant", "content": "All set. ###STOP###"}] + super().plan(task)


class EmptyFirst(OracleAgent):
    name = "empty_first"

    def plan(self, task):
        return [""] + super().plan(task)


class SoloText(OracleAgent):
    name = "solo_text"

    def plan(self, task):
        return [{"role": "assistant", "content": "I will fix it."}]


class ErrorsThenOracle(OracleAgent):
    """Three failing calls first (cumulative errors with max_errors small)."""

    name = "errors_first"

    def plan(self, task):
        bad = [call_message("nope", {}, f"e{i}") for i in range(3)]
        return bad[:1] + super().plan(task)[:1] + bad[1:] + super().plan(task)[1:]


# ------------------------------------------------------------------------------- perturbed users


def transfer_user(req):
    return opening_line(req.task) if req.turn == 0 else "I want a human. ###TRANSFER###"


def empty_user(req):
    return opening_line(req.task) if req.turn == 0 else ""


def mock_tool_user(req):
    """Checks its notifications (a user tool of upstream-HEAD mock), also mixed with text, then follows the oracle."""
    script = [
        opening_line(req.task),
        {"tool_calls": [{"id": "u1", "name": "check_notifications", "arguments": {}}]},
        {"content": "Checking my inbox too.", "tool_calls": [{"id": "u2", "name": "nope", "arguments": {}}]},
        "I checked. Please go on.",
    ]
    if req.turn < len(script):
        return script[req.turn]
    return OracleUser().generate(req)


# ------------------------------------------------------------------------------- cases


def cases(data_dir):
    """(env id, env kwargs, agent factory, task ids, job extras)."""
    out = []
    mock_ids = [t.id for t in gym.make("tau2/mock-v0", data_dir=data_dir).unwrapped.tasks]
    solo_mock = [t.id for t in gym.make("tau2/mock-solo-v0", data_dir=data_dir).unwrapped.tasks]
    for cls in ALL_AGENTS:
        out.append(("tau2/mock-v0", {}, cls, mock_ids))
    out.append(("tau2/mock-solo-v0", {}, OracleAgent, solo_mock))
    out.append(("tau2/mock-solo-v0", {}, SoloText, solo_mock[:2]))
    out.append(("tau2/mock-solo-v0", {"max_steps": 2}, OracleAgent, solo_mock[:2]))
    # limits: deferred checks while a tool result is pending, a stop on the last step, cumulative errors
    for k in range(1, 9):
        out.append(
            ("tau2/mock-v0", {"max_steps": k}, OracleAgent, ["create_task_1", "update_task_with_message_history"])
        )
    for k in (1, 2, 3):
        out.append(("tau2/mock-v0", {"max_errors": k}, ErrorsThenOracle, ["create_task_1"]))
    out.append(("tau2/mock-v0", {}, MixedOracle, mock_ids[:4]))
    out.append(("tau2/mock-v0", {"enforce_protocol": True}, MixedOracle, mock_ids[:2]))
    out.append(("tau2/mock-v0", {}, MultiCallOracle, mock_ids))
    out.append(("tau2/mock-v0", {"agent_can_stop": True}, StopMidway, mock_ids[:3]))
    out.append(("tau2/mock-v0", {"agent_can_stop": True}, StopText, mock_ids[:2]))
    out.append(("tau2/mock-v0", {}, StopText, mock_ids[:2]))
    out.append(("tau2/mock-v0", {}, EmptyFirst, mock_ids[:1]))
    out.append(("tau2/mock-v0", {"user": ScriptedUser(transfer_user)}, OracleAgent, mock_ids[:3]))
    out.append(("tau2/mock-v0", {"user": ScriptedUser(empty_user)}, OracleAgent, mock_ids[:2]))
    out.append(("tau2/mock-v0", {"user": ScriptedUser(mock_tool_user)}, OracleAgent, mock_ids))
    out.append(
        ("tau2/mock-v0", {"user": ScriptedUser(mock_tool_user), "enforce_protocol": True}, OracleAgent, mock_ids[:1])
    )
    # real domains
    airline = [t.id for t in gym.make("tau2/airline-v0", data_dir=data_dir).unwrapped.tasks][:30]
    retail = [t.id for t in gym.make("tau2/retail-v0", data_dir=data_dir).unwrapped.tasks][:30]
    small = [t.id for t in gym.make("tau2/telecom-v0", data_dir=data_dir, task_split="small").unwrapped.tasks]
    base = [t.id for t in gym.make("tau2/telecom-v0", data_dir=data_dir).unwrapped.tasks][:10]
    out.append(("tau2/airline-v0", {}, OracleAgent, airline))
    out.append(("tau2/airline-v0", {}, SkipLastActionAgent, airline[5:10]))
    out.append(("tau2/airline-v0", {}, WrongArgumentsAgent, airline[10:15]))
    out.append(("tau2/retail-v0", {}, OracleAgent, retail))
    out.append(("tau2/retail-v0", {}, WrongArgumentsAgent, retail[:5]))
    out.append(("tau2/retail-v0", {}, MultiCallOracle, retail[5:10]))
    out.append(("tau2/telecom-v0", {"task_split": "small"}, OracleAgent, small))
    out.append(("tau2/telecom-v0", {"task_split": "small"}, SkipLastActionAgent, small[:5]))
    out.append(
        ("tau2/telecom-v0", {"task_split": "small", "user": ScriptedUser(transfer_user)}, OracleAgent, small[:2])
    )
    out.append(("tau2/telecom-solo-v0", {"task_split": "small"}, OracleAgent, small[:10]))
    out.append(("tau2/telecom-v0", {}, OracleAgent, base))
    out.append(("tau2/telecom-workflow-v0", {"task_split": "small"}, OracleAgent, small[:3]))
    return out


def compare(ep, up, env) -> list[str]:
    probs = []
    ours_reason = ep.info["termination_reason"]
    if up.get("exception"):
        if ours_reason not in ("agent_error", "user_error"):
            probs.append(f"upstream raised {up['exception']!r}, ours ended {ours_reason}")
    else:
        if up.get("termination_reason") != ours_reason:
            probs.append(f"termination {up.get('termination_reason')} vs ours {ours_reason}")
        if up.get("messages") != canonical_trajectory(ep.info["simulation_run"]):
            probs.append("stored trajectories differ")
        if not up.get("timestamps_sorted"):
            probs.append("upstream trajectory not sorted")
        up_reward = (up.get("reward_info") or {}).get("reward")
        if ("evaluation_error" in up) != ("evaluation_error" in ep.info):
            probs.append(
                f"evaluation error: upstream {up.get('evaluation_error')!r}, ours {ep.info.get('evaluation_error')!r}"
            )
        elif up_reward is not None and up_reward != ep.reward:
            probs.append(f"reward {up_reward} vs ours {ep.reward}")
    if up["agent_views"] != [view_hash(v) for v in ep.agent_views]:
        probs.append(f"agent views differ ({len(up['agent_views'])} vs {len(ep.agent_views)})")
    if up["user_views"] != [view_hash(v) for v in ep.user_views]:
        probs.append(f"user views differ ({len(up['user_views'])} vs {len(ep.user_views)})")
    if ep.agent_views and up["agent_system"] != ep.agent_views[0][0]["content"]:
        probs.append("agent system prompts differ")
    if ep.user_systems and up["user_system"] != ep.user_systems[0]:
        probs.append("user system prompts differ")
    if up["agent_tools"] is not None:
        ours = [t["function"]["name"] for t in ep.reset_info["tools"]]
        if [t["function"]["name"] for t in up["agent_tools"]] != ours:
            probs.append("agent tool lists differ")
        if ours[-1] == "done" and up["agent_tools"][-1] != ep.reset_info["tools"][-1]:
            probs.append(f"done schemas differ: {up['agent_tools'][-1]} vs {ep.reset_info['tools'][-1]}")
    if up["user_tools"] is not None or (ep.user_tools and ep.user_tools[0]):
        up_names = [t["function"]["name"] for t in up["user_tools"] or []]
        if up_names != [t["function"]["name"] for t in (ep.user_tools[0] or [])]:
            probs.append("user tool lists differ")
    return probs


def test_episodes_match_upstream_orchestrator(upstream_data_dir):
    data_dir = str(upstream_data_dir)
    episodes, jobs = [], []
    for eid, kwargs, agent_cls, task_ids in cases(data_dir):
        kwargs = dict(kwargs)
        solo = eid.endswith("-solo-v0")
        user = kwargs.pop("user", OracleUser())
        env = gym.make(eid, data_dir=data_dir, judge=JUDGE, user=RecordingUser(user), **kwargs)
        u = env.unwrapped
        for tid in task_ids:
            ep = run_episode(env, agent_cls(), options={"task_id": tid})
            episodes.append((eid, kwargs, agent_cls.name, ep))
            jobs.append(
                {
                    "domain": u.config.domain,
                    "task": raw_task(env, tid),
                    "solo": solo,
                    "max_steps": u.config.max_steps,
                    "max_errors": u.config.max_errors,
                    "agent_can_stop": bool(u.config.agent_can_stop),
                    "enforce_protocol": u.config.enforce_protocol,
                    "agent_script": ep.agent_script,
                    "user_script": ep.user_script,
                }
            )
    results = run_reference("driver_gym", jobs, timeout=3600)
    mismatches, reasons, tasks = [], {}, set()
    for (eid, kwargs, agent, ep), res in zip(episodes, results):
        if "failed" in res:
            mismatches.append(f"{eid} {kwargs} {agent} {ep.task_id}: driver failed\n{res['failed'][-1500:]}")
            continue
        tasks.add((eid.split("/")[1].replace("-solo", ""), ep.task_id))
        reasons[ep.info["termination_reason"]] = reasons.get(ep.info["termination_reason"], 0) + 1
        for p in compare(ep, res["ok"], None):
            mismatches.append(f"{eid} {kwargs} {agent} {ep.task_id}: {p}")
    print(
        f"\n{len(jobs)} episodes, {len(tasks)} distinct tasks, termination reasons {reasons}, "
        f"{len(mismatches)} mismatches"
    )
    assert len(tasks) >= 100
    assert {"user_stop", "agent_stop", "max_steps", "too_many_errors", "agent_error", "user_error"} <= set(reasons)
    assert not mismatches, "\n".join(mismatches[:40])
