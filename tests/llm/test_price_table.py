"""``--price-table FILE`` / ``price_table=``: costs equal the stub's reported usage times the table's prices;
lookup by exact name, then without a ``provider/`` prefix; precedence server usage.cost > table > configured
prices > litellm's table > 0.0; a bad file is an error naming it before any request."""

from __future__ import annotations

import json
import sys
import types

import pytest

pytest.importorskip("openai")

from test_usage_and_cost import UsageStub, user_reply

from tau2_gym.cli import main
from tau2_gym.llm.cost import PriceTableError, load_price_table, message_cost, model_price

AGENT = (2e-6, 5e-6)
USER = (1e-7, 4e-7)


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "agent-model": {"input_cost_per_token": AGENT[0], "output_cost_per_token": AGENT[1], "mode": "chat"},
                "user-model": {"input_cost_per_token": USER[0], "output_cost_per_token": USER[1]},
            }
        )
    )
    return path


def test_rollout_costs_are_usage_times_table_prices(tmp_path, table, capsys):
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
                "openai/agent-model",
                "--agent-base-url",
                agent.base_url,
                "--user",
                "user_simulator",
                "--user-llm",
                "user-model",
                "--user-base-url",
                user.base_url,
                "--max-retries",
                "0",
                "--no-progress",
                "--no-user-cache",
                "--output",
                str(out),
                "--price-table",
                str(table),
            ]
        )
        a_sent, u_sent = list(agent.usages), list(user.usages)
    assert code == 0 and a_sent and u_sent
    sims = json.loads(out.read_text())["simulations"]
    for key, sent, (pin, pout) in (("agent_cost", a_sent, AGENT), ("user_cost", u_sent, USER)):
        expected = sum(u["prompt_tokens"] * pin + u["completion_tokens"] * pout for u in sent)
        assert sum(s[key] for s in sims) == pytest.approx(expected, rel=1e-12) and expected > 0
    for s in sims:  # per message too
        for m in s["messages"]:
            if m["role"] in ("assistant", "user") and m.get("usage"):
                pin, pout = AGENT if m["role"] == "assistant" else USER
                u = m["usage"]
                assert m["cost"] == pytest.approx(u["prompt_tokens"] * pin + u["completion_tokens"] * pout)
    printed = capsys.readouterr().out
    total_user = sum(u["prompt_tokens"] * USER[0] + u["completion_tokens"] * USER[1] for u in u_sent)
    assert f"${total_user:.4f}" in printed


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not valid JSON (line 1"),
        ("[1, 2]", "must be a non-empty object"),
        ('{"m": {"input_cost_per_token": 1e-6}}', "entry 'm' lacks output_cost_per_token"),
        ('{"m": {"input_cost_per_token": "cheap", "output_cost_per_token": 0}}', "m.input_cost_per_token must be a"),
        ('{"m": {"input_cost_per_token": -1, "output_cost_per_token": 0}}', "non-negative"),
        ('{"m": 3}', "entry 'm' must be an object"),
    ],
)
def test_a_bad_price_table_is_refused_before_any_request(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    from openai_stub import OpenAIStub

    with OpenAIStub(["hi"]) as srv:
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--num-tasks",
                "1",
                "--agent",
                "llm_agent",
                "--agent-llm",
                "m",
                "--agent-base-url",
                srv.base_url,
                "--user",
                "oracle",
                "--no-progress",
                "--output",
                str(tmp_path / "x.json"),
                "--price-table",
                str(bad),
            ]
        )
        assert not srv.requests
    assert code == 2
    err = capsys.readouterr().err
    assert str(bad) in err and message in err
    assert not (tmp_path / "x.json").exists()


def test_a_missing_price_table_names_the_file(tmp_path):
    from tau2_gym.players.users.openai_user import OpenAIUserConfig

    with pytest.raises(PriceTableError, match=r"nowhere\.json' cannot be read"):
        OpenAIUserConfig(price_table=str(tmp_path / "nowhere.json"))


def test_yaml_tables_and_provider_prefixes(tmp_path):
    pytest.importorskip("yaml")
    path = tmp_path / "prices.yaml"
    path.write_text("gpt-x:\n  input_cost_per_token: 0.5\n  output_cost_per_token: 2\n")
    assert load_price_table(path) == {"gpt-x": (0.5, 2.0)}
    usage = {"prompt_tokens": 4, "completion_tokens": 3}
    assert message_cost({}, usage, "gpt-x", str(path)) == 8.0
    assert message_cost({}, usage, "openai/gpt-x", str(path)) == 8.0  # without the provider prefix


def test_precedence_server_table_configured_litellm_zero(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"tabled": {"input_cost_per_token": 1.0, "output_cost_per_token": 10.0}}))
    fake = types.SimpleNamespace(
        model_cost={
            "tabled": {"input_cost_per_token": 100.0, "output_cost_per_token": 0},
            "litellm-only": {"input_cost_per_token": 3.0, "output_cost_per_token": 0.0},
        }
    )
    monkeypatch.setitem(sys.modules, "litellm", fake)
    model_price.cache_clear()
    usage = {"prompt_tokens": 2, "completion_tokens": 1}
    table = str(path)
    try:
        assert message_cost({"usage": {"cost": 0.125}}, usage, "tabled", table, (7.0, 7.0)) == 0.125  # server
        assert message_cost({}, usage, "tabled", table, (7.0, 7.0)) == 12.0  # table beats configured
        assert message_cost({}, usage, "other", table, (7.0, 7.0)) == 21.0  # configured when the table lacks it
        assert message_cost({}, usage, "tabled", None, (0.0, 0.0)) == 200.0  # litellm's table
        assert message_cost({}, usage, "litellm-only", table) == 6.0  # table lacks it -> litellm
        assert message_cost({}, usage, "unknown", table) == 0.0
        assert message_cost({}, None, "tabled", table) == 0.0  # no usage, nothing to price
    finally:
        model_price.cache_clear()
