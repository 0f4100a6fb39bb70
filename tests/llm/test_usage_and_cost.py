"""Usage and cost per simulation (``agent_usage``/``user_usage``, ``agent_cost``/``user_cost``): the sums
equal what the servers reported; prices from litellm's table when it knows the model, else 0.0."""

from __future__ import annotations

import json
import sys
import types

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.cli import main


class UsageStub(OpenAIStub):
    """Reports a different usage per request and remembers it."""

    def __init__(self, replies) -> None:
        super().__init__(replies)
        self.usages: list[dict] = []

    def _completion(self, item):
        out = super()._completion(item)
        with self._lock:
            n = len(self.usages)
            usage = {"prompt_tokens": 100 + 7 * n, "completion_tokens": 3 + n}
            self.usages.append(usage)
        out["usage"] = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        return out


def user_reply(body, n):
    return "###STOP###" if len(body["messages"]) >= 5 else "I would like to create a task."


@pytest.fixture
def priced(monkeypatch):
    from tau2_gym.llm.cost import model_price

    fake = types.SimpleNamespace(
        model_cost={"priced-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 3e-6}}
    )
    monkeypatch.setitem(sys.modules, "litellm", fake)
    model_price.cache_clear()
    yield
    model_price.cache_clear()


def test_usage_and_cost_sum_what_the_servers_reported(tmp_path, priced, capsys):
    out = tmp_path / "run.json"
    with UsageStub(["Hello, how can I help?"]) as agent, UsageStub(user_reply) as user:
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--task-ids",
                "create_task_1",
                "--num-trials",
                "2",
                "--agent",
                "llm_agent",
                "--agent-llm",
                "openai/priced-model",
                "--agent-base-url",
                agent.base_url,
                "--user",
                "user_simulator",
                "--user-llm",
                "unknown-model",
                "--user-base-url",
                user.base_url,
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
            ]
        )
        a_sent, u_sent = list(agent.usages), list(user.usages)
        seeds_sent = ({r.get("seed") for r in agent.requests}, {r.get("seed") for r in user.requests})
    assert code == 0
    sims = json.loads(out.read_text())["simulations"]
    assert all(s["termination_reason"] != "infrastructure_error" for s in sims)
    trial_seeds = {s["seed"] for s in sims}
    assert len(trial_seeds) == 2 and seeds_sent == (trial_seeds, trial_seeds)  # episode seeds reach both LLMs
    for key, sent in (("agent_usage", a_sent), ("user_usage", u_sent)):
        for k in ("prompt_tokens", "completion_tokens"):
            assert sum(s[key][k] for s in sims) == sum(u[k] for u in sent)
    expected = sum(u["prompt_tokens"] * 1e-6 + u["completion_tokens"] * 3e-6 for u in a_sent)
    assert sum(s["agent_cost"] for s in sims) == pytest.approx(expected)
    assert all(s["user_cost"] == 0.0 for s in sims)  # unknown to the price table: 0.0, usage still there
    printed = capsys.readouterr().out
    assert f"agent {sum(u['prompt_tokens'] for u in a_sent)} prompt + " in printed
    assert f"${expected:.4f}" in printed


def test_configured_prices_beat_the_table_and_no_litellm_gives_zero(monkeypatch):
    from tau2_gym.llm.cost import model_price
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    monkeypatch.setitem(sys.modules, "litellm", None)  # import fails
    model_price.cache_clear()
    usage = {"prompt_tokens": 10, "completion_tokens": 4}
    assert OpenAIUserSimulator(model="priced-model").client.cost({}, usage) == 0.0
    sim = OpenAIUserSimulator(model="priced-model", input_cost_per_token=0.5, output_cost_per_token=1.0)
    assert sim.client.cost({}, usage) == 9.0
    assert sim.client.cost({"usage": {"cost": 0.25}}, usage) == 0.25  # a server-reported cost wins
    model_price.cache_clear()
