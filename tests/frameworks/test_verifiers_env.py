"""tau2 as a verifiers environment, run by verifiers' own evaluation entry points -- ``run_eval`` in-process and the
``vf-eval`` command by the environment's name in a fresh process -- against a local OpenAI-compatible stub on
127.0.0.1, and compared with ``tau2-gym rollout``'s library form (``collect``) given the same stub replies: the same
reward per task, recorded on verifiers' traces.

The stub plays the oracle behind an endpoint: it recognises the task from the customer's opening message and
answers with the oracle's next action, so some episodes earn 1.0 and the comparison covers scored endings.

Skipped without the ``verifiers`` extra (``pip install tau2-gym[verifiers]``; verifiers 0.4 pins ``openai<3``, so
CI's default install leaves it out).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("verifiers.v1", reason="needs the verifiers extra: pip install tau2-gym[verifiers]")

from openai_stub import OpenAIStub
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.clients import EvalClientConfig
from verifiers.v1.configs.cli.eval import EvalConfig

from tau2_gym.frameworks.verifiers import TASKSET_ID, Tau2Env, load_environment
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
from tau2_gym.players.agents.scripted import OracleAgent
from tau2_gym.players.users.base import UserSimulator
from tau2_gym.runner.collect import collect

DOMAIN = "airline"
TASKS = ["0", "1", "5", "7"]


def oracle_endpoint(domain: str, task_ids: list[str]):
    """A stub reply function: the oracle's next action for the task whose opening message the request carries;
    a flawed agent (it skips the oracle's last tool call, a cancellation) for task "7", so not every episode earns
    1.0."""
    env = gym.make(f"tau2/{domain}-v0")
    plans = {}
    for task_id in task_ids:
        obs, info = env.reset(seed=0, options={"task_id": task_id})
        agent = OracleAgent()
        agent.reset(info["task"], info)
        plan = list(agent._plan)
        if task_id == "7":
            calls = [i for i, a in enumerate(plan) if isinstance(a, dict) and a.get("tool_calls")]
            if calls:
                del plan[calls[-1]]
        opening = next(m["content"] for m in obs if m["role"] == "user")
        plans[opening] = plan

    def reply(body: dict, n: int):
        messages = body["messages"]
        opening = next((m.get("content") for m in messages if m["role"] == "user"), None)
        plan = plans.get(opening)
        if plan is None:
            return "Is there anything else I can help you with?"
        k = sum(1 for m in messages if m["role"] == "assistant") - 1  # the greeting is the env's
        action = plan[k] if k < len(plan) else {"role": "assistant", "content": "Anything else?"}
        if action.get("tool_calls"):
            return {
                "content": None,
                "tool_calls": [
                    {
                        "id": tc["id"],
                        "name": tc["function"]["name"],
                        "arguments": json.loads(tc["function"]["arguments"]),
                    }
                    for tc in action["tool_calls"]
                ],
            }
        return action["content"]

    return reply


def test_verifiers_eval_records_the_rewards_of_our_rollout(tmp_path, monkeypatch):
    reply = oracle_endpoint(DOMAIN, TASKS)
    monkeypatch.setenv("TAU2_STUB_KEY", "stub-key")
    with OpenAIStub(reply) as stub:
        # ours: tau2-gym rollout's library form, the agent behind the stub
        policy = OpenAIAgentPolicy(OpenAIAgentConfig(model="stub-model", base_url=stub.base_url, api_key_env=None))
        report = collect(TASKS, policy, "oracle", domain=DOMAIN, progress=False, check_servers=False)
        ours = {r["task_id"]: r for r in report.simulations}
        ours_requests = len(stub.requests)

        # verifiers': its eval entry point over the environment, the model client pointed at the same stub
        env = load_environment(domain=DOMAIN, task_ids=TASKS, user="oracle")
        config = EvalConfig(
            env=env.config,
            model="stub-model",
            client=EvalClientConfig(base_url=stub.base_url, api_key_var="TAU2_STUB_KEY"),
            push=False,
            rich=None,
            output_dir=tmp_path / "vf",
            max_concurrent=4,
        )
        episodes = asyncio.run(run_eval(config))
        theirs_requests = len(stub.requests) - ours_requests

    assert env.config.taskset.id == TASKSET_ID and isinstance(env, Tau2Env)
    assert env.config.agent.runtime.type == "subprocess"  # verifiers' default (a Prime sandbox) needs an account
    traces = {ep.traces[0].task.data.tau2_task_id: ep.traces[0] for ep in episodes}
    assert sorted(traces) == sorted(TASKS)
    for task_id, trace in traces.items():
        run = ours[task_id]
        assert trace.ok, (task_id, trace.errors)
        assert trace.state.termination_reason == run["termination_reason"]
        assert trace.rewards["tau2"].score == run["reward_info"]["reward"], task_id
        assert trace.reward == run["reward_info"]["reward"]
        assert trace.stop_condition == run["termination_reason"]
        # the model's turns went through verifiers' interception: the trace holds the agent's replies
        agent_texts = [m.get("content") for m in run["messages"] if m["role"] == "assistant"][1:]
        assert trace.num_turns == len(agent_texts)
    rewards = sorted(r["reward_info"]["reward"] for r in ours.values())
    assert rewards[0] == 0.0 and rewards[-1] == 1.0, rewards  # scored endings both ways
    assert theirs_requests == ours_requests  # one model call per agent turn on both paths


def test_step_limit_is_verifiers_truncation(tmp_path, monkeypatch):
    monkeypatch.setenv("TAU2_STUB_KEY", "stub-key")

    def lookup(body: dict, n: int):  # tool calls forever: only the step limit ends the episode
        return {
            "content": None,
            "tool_calls": [{"id": f"c{n}", "name": "get_user_details", "arguments": {"user_id": "x"}}],
        }

    with OpenAIStub(lookup) as stub:
        env = load_environment(domain=DOMAIN, task_ids=["1"], max_steps=6)
        config = EvalConfig(
            env=env.config,
            model="stub-model",
            client=EvalClientConfig(base_url=stub.base_url, api_key_var="TAU2_STUB_KEY"),
            push=False,
            rich=None,
            output_dir=tmp_path / "vf",
        )
        (episode,) = asyncio.run(run_eval(config))
    trace = episode.traces[0]
    assert trace.ok and trace.state.termination_reason == "max_steps"
    assert trace.stop_condition == "max_turns" and trace.is_truncated
    assert trace.reward == 0.0


class BrokenUser(UserSimulator):
    """A customer whose simulator always fails (an infrastructure failure, not the agent's)."""

    def generate(self, request):
        raise RuntimeError("user LLM unreachable")


def test_a_broken_customer_masks_the_episode(tmp_path, monkeypatch):
    monkeypatch.setenv("TAU2_STUB_KEY", "stub-key")
    module = types.ModuleType("vf_test_players.users")
    module.BrokenUser = BrokenUser
    monkeypatch.setitem(sys.modules, "vf_test_players.users", module)  # a "package.module:Class" user spec
    with OpenAIStub(["Hello! How can I help?"]) as stub:
        env = load_environment(domain=DOMAIN, task_ids=["1"], user="vf_test_players.users:BrokenUser")
        config = EvalConfig(
            env=env.config,
            model="stub-model",
            client=EvalClientConfig(base_url=stub.base_url, api_key_var="TAU2_STUB_KEY"),
            push=False,
            rich=None,
            output_dir=tmp_path / "vf",
        )
        (episode,) = asyncio.run(run_eval(config))
    trace = episode.traces[0]
    assert not trace.ok and not episode.ok
    assert trace.stop_condition == "env_error" and "user LLM unreachable" in trace.errors[-1].message, trace.errors


def _ours(stub, tasks):
    policy = OpenAIAgentPolicy(OpenAIAgentConfig(model="stub-model", base_url=stub.base_url, api_key_env=None))
    report = collect(tasks, policy, "oracle", domain=DOMAIN, progress=False, check_servers=False)
    return {r["task_id"]: r for r in report.simulations}


def test_vf_eval_finds_the_environment_by_name_in_a_fresh_process(tmp_path):
    """``vf-eval tau2-gym-env``: verifiers' own command resolves the installed package ``tau2_gym_env``, runs the
    agent in a local runtime (no Prime account: no runtime flag, no login) and records the rewards of our rollout."""
    vf_eval = Path(sys.executable).parent / "vf-eval"
    assert vf_eval.is_file(), "the verifiers extra installs the vf-eval command"
    reply = oracle_endpoint(DOMAIN, TASKS)
    with OpenAIStub(reply) as stub:
        ours = _ours(stub, TASKS)
        before = len(stub.requests)
        proc = subprocess.run(
            [
                str(vf_eval),
                TASKSET_ID,
                "--env.taskset.domain",
                DOMAIN,
                "--env.taskset.task-ids",
                json.dumps(TASKS),
                "--model",
                "stub-model",
                "--client.base-url",
                stub.base_url,
                "--client.api-key-var",
                "TAU2_STUB_KEY",
                "--no-push",
                "--no-rich",
                "-c",
                "4",
                "-o",
                str(tmp_path),
                "--run.dir",
                "run",
            ],
            env={**os.environ, "TAU2_STUB_KEY": "stub-key"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        theirs_requests = len(stub.requests) - before
    assert proc.returncode == 0, proc.stderr[-3000:]
    episodes = [json.loads(line) for line in (tmp_path / "run" / "traces.jsonl").read_text().splitlines()]
    traces = {ep["traces"][0]["task"]["data"]["tau2_task_id"]: ep["traces"][0] for ep in episodes}
    assert sorted(traces) == sorted(TASKS)
    for task_id, trace in traces.items():
        run = ours[task_id]
        assert trace["ok"], (task_id, trace["errors"])
        assert trace["agent"]["config"]["harness"]["id"] == TASKSET_ID
        assert trace["agent"]["runtime"]["type"] == "subprocess"
        assert trace["rewards"]["tau2"]["score"] == run["reward_info"]["reward"], task_id
        assert trace["stop_condition"] == run["termination_reason"]
    assert sorted(t["rewards"]["tau2"]["score"] for t in traces.values())[-1] == 1.0
    assert theirs_requests == sum(1 for r in ours.values() for m in r["messages"] if m["role"] == "assistant") - len(
        TASKS
    )  # one model call per agent turn (the greeting is the env's)
