"""Rollouts with the agent and the user behind OpenAI-compatible endpoints (the local stub server), with injected
failures: 5xx, garbage bodies, slow replies, a dead endpoint. The run always completes and records its errors."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym import load_domain
from tau2_gym.core.messages import AssistantMessage
from tau2_gym.core.termination import TerminationReason
from tau2_gym.core.turn_loop import agent_system_prompt
from tau2_gym.llm.client import ServerCheckError
from tau2_gym.players.agents.base import AgentTurnRequest
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy, PolicyError
from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator
from tau2_gym.runner.collect import collect, trial_seeds

FAST = dict(api_key_env=None, timeout=0.5, max_retries=2, backoff_base=0.01, backoff_max=0.02, empty_retries=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_reply(body: dict, n: int):
    """A tool call first, a text once a tool result is in; every few requests a failure instead."""
    if n % 6 == 2:
        return {"status": 503, "body": '{"error": {"message": "overloaded"}}'}
    if n % 6 == 4:
        return {"raw": "<html>bad gateway"}
    if n == 7:
        return {"delay": 8.0, "then": "too late"}  # beyond the test's 4 s client timeout: retried
    if body["messages"][-1]["role"] == "tool":
        return "Your booking is confirmed; the total was 1628 dollars."
    return {"tool_calls": [{"id": f"call_{n}", "name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}]}


def test_rollout_over_stub_endpoints_survives_injected_failures_and_records_the_dead_ones(tmp_path):
    dom = load_domain("airline")
    doomed = dom.task("2").user_scenario.render()[:60]

    def user_reply(body: dict, n: int):
        if doomed in body["messages"][0]["content"]:
            return {"status": 500}  # this task's user endpoint never recovers
        agent_texts = sum(1 for m in body["messages"][1:] if m["role"] == "user")
        return "Hi, I want to check my booking." if agent_texts <= 1 else "Thanks. ###STOP###"

    with OpenAIStub(agent_reply) as agent_srv, OpenAIStub(user_reply) as user_srv:
        # a timeout with room for a loaded machine: only the injected delay may time out
        roomy = {**FAST, "timeout": 4.0}
        policy = OpenAIAgentPolicy(OpenAIAgentConfig(model="agent-m", base_url=agent_srv.base_url, **roomy))
        user = OpenAIUserSimulator(OpenAIUserConfig(model="user-m", base_url=user_srv.base_url, **roomy))
        out = tmp_path / "run.json"
        report = collect(
            ["0", "1", "2"],
            policy,
            user,
            domain="airline",
            num_trials=2,
            concurrency=6,
            max_retries=1,
            retry_delay=0.0,
            output=str(out),
            progress=False,
        )
        agent_bodies, user_bodies = list(agent_srv.requests), list(user_srv.requests)
    seeds = trial_seeds(300, 2)
    by = {(r["task_id"], r["trial"]): r for r in report.simulations}
    assert len(by) == 6
    for tid in ("0", "1"):
        for trial in (0, 1):
            run = by[(tid, trial)]
            assert run["termination_reason"] == "user_stop" and run["reward_info"] is not None
            roles = [m["role"] for m in run["messages"]]
            assert roles == ["assistant", "user", "assistant", "tool", "assistant", "user"]
            assert run["messages"][2]["raw_data"]["model"] == "stub-model"  # the provider response is kept
            assert run["seed"] == seeds[trial]
    for trial in (0, 1):
        dead = by[("2", trial)]
        assert dead["termination_reason"] == TerminationReason.INFRASTRUCTURE_ERROR and dead["messages"] == []
        assert "HTTP 500" in dead["info"]["error"] and dead["info"]["failed_after_attempts"] == 2
    assert report.failed == 2
    # failures were injected (and survived): 503s, a garbage body, a timeout
    injected = sum(1 for n in range(len(agent_bodies)) if n % 6 in (2, 4) or n == 7)
    assert injected >= 3 and len(agent_bodies) == 4 * 2 + injected  # 4 episodes x 2 agent turns + the retries
    body = agent_bodies[0]
    assert body["model"] == "agent-m" and body["temperature"] == 0.0 and body["tool_choice"] == "auto"
    # the agent prompt (policy) is the same for every airline task outside solo mode
    assert body["messages"][0] == {"role": "system", "content": agent_system_prompt(dom, dom.task("0"), False)}
    assert [t["function"]["name"] for t in body["tools"]] == [t["function"]["name"] for t in dom.agent_tool_schemas()]
    assert {b["seed"] for b in agent_bodies} == set(seeds) and {b["seed"] for b in user_bodies} == set(seeds)
    assert report.results["info"]["agent_info"]["llm"] == "agent-m"
    assert report.results["info"]["user_info"]["llm"] == "user-m"


def test_a_dead_agent_endpoint_fails_the_server_check_before_any_episode(tmp_path):
    policy = OpenAIAgentPolicy(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", **FAST)
    out = tmp_path / "dead.json"
    with pytest.raises(ServerCheckError, match=r"agent server http://127\.0\.0\.1:\d+/v1: connection error"):
        collect(["0", "1"], policy, domain="airline", output=str(out), progress=False)
    assert not out.exists() and not out.with_suffix(".jsonl").exists()  # nothing started, nothing written


def test_a_dead_agent_endpoint_without_the_check_fails_every_episode_but_the_run_completes(tmp_path):
    policy = OpenAIAgentPolicy(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", **FAST)
    out = tmp_path / "dead.json"
    report = collect(
        ["0", "1"],
        policy,
        domain="airline",
        max_retries=1,
        retry_delay=0.0,
        output=str(out),
        progress=False,
        check_servers=False,
    )
    assert [r["termination_reason"] for r in report.simulations] == [TerminationReason.INFRASTRUCTURE_ERROR] * 2
    assert all(
        "connection error" in r["info"]["error"] and r["info"]["error_type"] == "PolicyError"
        for r in report.simulations
    )
    assert out.exists() and report.mean_reward is None


def test_openai_agent_policy_request_and_reply():
    dom = load_domain("mock")
    task = dom.tasks()[0]
    tools = list(dom.agent_tool_schemas())
    req = AgentTurnRequest(
        episode_id="e",
        system_prompt="SYS",
        messages=[{"role": "user", "content": "hi"}],
        tools=tools,
        task=task,
        seed=7,
        solo=True,
        tool_choice="required",
    )
    with OpenAIStub([{"tool_calls": [{"id": "c1", "name": "get_users", "arguments": {}}]}, {"status": 400}]) as srv:
        policy = OpenAIAgentPolicy(model="m", base_url=srv.base_url, **FAST)
        msg = policy.generate(req)
        body = srv.requests[0]
        with pytest.raises(PolicyError, match="agent model 'm'.*HTTP 400"):
            policy.generate(req)
        policy.close()
    assert isinstance(msg, AssistantMessage) and msg.content is None
    assert [(c.id, c.name, c.arguments, c.requestor) for c in msg.tool_calls] == [("c1", "get_users", {}, "assistant")]
    assert body["messages"] == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "hi"}]
    assert body["tool_choice"] == "required" and body["seed"] == 7 and body["temperature"] == 0.0
    assert policy.info()["implementation"] == "llm_agent" and "describe" in dir(policy.config)
