"""Migrating from ``tau2 run``: its way of pointing at a server (``api_base``/``api_key`` in the LLM args) and
litellm's ``openai/`` model prefix work with ``tau2-gym rollout``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub  # noqa: E402

from tau2_gym.cli import main  # noqa: E402


def test_llm_args_api_base_and_key_and_openai_prefix_reach_the_server(tmp_path):
    out = tmp_path / "run.json"
    with OpenAIStub(["Hello, how can I help?"]) as srv:
        code = main(["rollout", "--domain", "mock", "--task-ids", "create_task_1", "--agent", "llm_agent",
                     "--agent-llm", "openai/stub-model", "--user", "oracle", "--max-steps", "6",
                     "--max-retries", "0", "--no-progress", "--output", str(out),
                     "--agent-llm-args", json.dumps({"temperature": 0.0, "api_base": srv.base_url,
                                                     "api_key": "sk-secret-test"})])
        requests = list(srv.requests)
    assert code == 0
    assert requests, "the agent's requests never reached the api_base server"
    assert {r["model"] for r in requests} == {"stub-model"}  # prefix stripped, as litellm does
    assert all("api_base" not in r and "api_key" not in r for r in requests)  # not sent as sampling args
    text = out.read_text()
    assert "sk-secret-test" not in text  # the literal key is never recorded
    runs = json.loads(text)["simulations"]
    assert runs and all(r["termination_reason"] != "infrastructure_error" for r in runs)



def test_cli_task_ids_keep_split_order_and_reject_ids_outside_the_split(tmp_path, capsys):
    from tau2_gym import load_domain

    split = [t.id for t in load_domain("mock").tasks(None, "base")]
    out = tmp_path / "ids.json"
    assert main(["rollout", "--domain", "mock", "--agent", "oracle", "--user", "oracle", "--no-progress",
                 "--output", str(out), "--task-ids", split[2], split[0]]) == 0
    assert [r["task_id"] for r in json.loads(out.read_text())["simulations"]] == [split[0], split[2]]
    assert main(["rollout", "--domain", "mock", "--agent", "oracle", "--user", "oracle", "--no-progress",
                 "--output", str(tmp_path / "bad.json"), "--task-ids", split[0], "no-such-task"]) == 2
    assert "no-such-task" in capsys.readouterr().err
