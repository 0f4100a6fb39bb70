"""A malformed tool call from a server (arguments that are not JSON) is the policy's fault in every path: the env
and ``rollout`` end the episode as ``agent_error`` with the same reward, and rollout counts it in the average
instead of retrying it as an ``infrastructure_error``."""

from __future__ import annotations

import gymnasium as gym
import pytest

openai = pytest.importorskip("openai")

from openai_stub import OpenAIStub  # noqa: E402 - after the importorskip guard

from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy  # noqa: E402 - after the importorskip guard
from tau2_gym.runner.collect import collect  # noqa: E402 - after the importorskip guard

GOOD = {
    "tool_calls": [
        {"id": "c0", "name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"}}
    ]
}
BROKEN = {"tool_calls": [{"id": "c1", "name": "get_users", "arguments": '{"user_id": '}]}


def reply(body, n):
    """A good call first; once its result is in, a call whose arguments are cut off mid-JSON."""
    return BROKEN if body["messages"][-1]["role"] == "tool" else GOOD


def _strip(messages):
    return [
        (m["role"], m.get("content"), [(c["name"], c["arguments"]) for c in m.get("tool_calls") or []])
        for m in messages
    ]


def test_malformed_server_call_is_agent_error_in_env_and_rollout_alike(tmp_path):
    with OpenAIStub(reply) as srv:
        # env path: the user's own loop sends the env's observation to the server and steps the reply as sent
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        env = gym.make("tau2/mock-v0", user="oracle")
        obs, info = env.reset(options={"task_id": "create_task_1"})
        for _ in range(10):
            resp = client.chat.completions.create(model="stub-model", messages=obs, tools=info["tools"])
            obs, env_reward, term, trunc, info = env.step(resp.choices[0].message.model_dump(exclude_none=True))
            if term or trunc:
                break
        client.close()
        env_requests = len(srv.requests)
        # rollout path: the same server behind the LLM agent policy (request retries allowed: none happen)
        policy = OpenAIAgentPolicy(
            model="stub-model", base_url=srv.base_url, api_key_env=None, max_retries=2, backoff_base=0.01
        )
        report = collect(
            ["create_task_1"],
            policy,
            "oracle",
            domain="mock",
            max_retries=2,
            retry_delay=0.0,
            progress=False,
            output=str(tmp_path / "run.json"),
        )
        policy.close()
        rollout_requests = len(srv.requests) - env_requests
    (run,) = report.simulations
    assert info["termination_reason"] == run["termination_reason"] == "agent_error"
    assert term and not trunc
    assert env_reward == run["reward_info"]["reward"]
    assert "not valid JSON" in info["error"] and "not valid JSON" in run["info"]["error"]
    assert rollout_requests == env_requests == 2  # the malformed reply was not re-requested
    assert report.failed == 0 and report.rewards == [env_reward] and report.mean_reward == env_reward
    assert _strip(env.unwrapped.simulation_run()["messages"]) == _strip(run["messages"])  # same trajectory
    rejected = run["info"]["rejected_agent_reply"]  # not in the trajectory (as in the env), but kept
    assert rejected["raw_data"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"user_id": '
    assert run["agent_usage"] == {"prompt_tokens": 20, "completion_tokens": 10}  # both replies the stub reported
