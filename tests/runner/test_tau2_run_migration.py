"""Migrating from ``tau2 run``: its way of pointing at a server (``api_base``/``api_key`` in the LLM args) and
litellm's ``openai/`` model prefix work with ``tau2-gym rollout``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.cli import main


def test_llm_args_api_base_and_key_and_openai_prefix_reach_the_server(tmp_path):
    out = tmp_path / "run.json"
    with OpenAIStub(["Hello, how can I help?"]) as srv:
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--task-ids",
                "create_task_1",
                "--agent",
                "llm_agent",
                "--agent-llm",
                "openai/stub-model",
                "--user",
                "oracle",
                "--max-steps",
                "6",
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
                "--agent-llm-args",
                json.dumps({"temperature": 0.0, "api_base": srv.base_url, "api_key": "sk-secret-test"}),
            ]
        )
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
    assert (
        main(
            [
                "rollout",
                "--domain",
                "mock",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--no-progress",
                "--output",
                str(out),
                "--task-ids",
                split[2],
                split[0],
            ]
        )
        == 0
    )
    assert [r["task_id"] for r in json.loads(out.read_text())["simulations"]] == [split[0], split[2]]
    assert (
        main(
            [
                "rollout",
                "--domain",
                "mock",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--no-progress",
                "--output",
                str(tmp_path / "bad.json"),
                "--task-ids",
                split[0],
                "no-such-task",
            ]
        )
        == 2
    )
    assert "no-such-task" in capsys.readouterr().err


def _first_request(tmp_path, model, llm_args):
    out = tmp_path / f"{model.replace('/', '_')}.json"
    with OpenAIStub(["Hello, how can I help?"]) as srv:
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--task-ids",
                "create_task_1",
                "--agent",
                "llm_agent",
                "--agent-llm",
                model,
                "--agent-base-url",
                srv.base_url,
                "--user",
                "oracle",
                "--max-steps",
                "4",
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
                "--agent-llm-args",
                json.dumps(llm_args),
            ]
        )
        requests = list(srv.requests)
    assert code == 0 and requests
    return requests[0]


def test_reasoning_effort_and_sampling_args_follow_tau2_runs_model_family_rules(tmp_path, capsys):
    args = {"temperature": 0.0, "reasoning_effort": "low", "top_p": 0.9, "max_tokens": 64}
    chat = _first_request(tmp_path, "openai/gpt-4.1", args)  # a chat model: no reasoning_effort
    assert "reasoning_effort" not in chat and chat["temperature"] == 0.0 and chat["top_p"] == 0.9
    assert chat["max_tokens"] == 64
    assert "reasoning_effort" in capsys.readouterr().err  # the drop is said, not silent
    own = _first_request(tmp_path, "Qwen/Qwen3-8B", args)  # a self-hosted name is a chat model too
    assert "reasoning_effort" not in own
    o3 = _first_request(tmp_path, "openai/o3-mini", args)  # o-series: effort kept, temperature 0 / top_p dropped
    assert o3["reasoning_effort"] == "low" and "temperature" not in o3 and "top_p" not in o3
    assert o3["max_completion_tokens"] == 64 and "max_tokens" not in o3


@pytest.mark.reference
def test_model_family_rules_equal_litellms_in_the_reference_venv():
    import os
    import subprocess

    from tau2_gym.llm.params import tau2_run_args

    ref = os.environ.get("TAU2_REFERENCE_PYTHON")
    if not ref:
        pytest.skip("TAU2_REFERENCE_PYTHON not set")
    models = [
        "gpt-4.1-2025-04-14",
        "gpt-4o",
        "o1",
        "o3",
        "o3-mini",
        "o4-mini-2025-04-16",
        "o3-pro",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-chat-latest",
        "gpt-5.1",
        "gpt-5.2",
        "Qwen/Qwen3-8B",
        "my-model",
        "o3-custom",
    ]
    argsets = [
        {"temperature": 0.0, "reasoning_effort": "low"},
        {"temperature": 1, "top_p": 0.5, "max_tokens": 9},
        {"temperature": 0.3, "top_p": 0.5, "logprobs": True, "top_logprobs": 2, "seed": 4},
        {"reasoning_effort": "none", "temperature": 0.2, "presence_penalty": 0.1, "stop": ["x"]},
    ]
    script = (
        "import json, sys, litellm\n"
        "litellm.drop_params = True\n"
        "from litellm.utils import get_optional_params\n"
        "cases = json.loads(sys.stdin.read())\n"
        "out = []\n"
        "for m, a in cases:\n"
        "    p = get_optional_params(model=m, custom_llm_provider='openai', **a)\n"
        "    out.append({k: v for k, v in p.items() if k not in ('stream', 'extra_body')})\n"
        "print(json.dumps(out))\n"
    )
    cases = [(m, a) for m in models for a in argsets]
    done = subprocess.run(
        [ref, "-c", script], input=json.dumps(cases), capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    for (m, a), want in zip(cases, theirs):
        assert tau2_run_args(m, a)[0] == want, (m, a)


def test_tau2_run_flags_without_effect_on_text_runs_are_accepted_and_said(tmp_path, capsys):
    out = tmp_path / "compat.json"
    assert (
        main(
            [
                "rollout",
                "--domain",
                "mock",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--no-progress",
                "--output",
                str(out),
                "--task-ids",
                "create_task_1",
                "--auto-resume",
                "--xml-prompt",
                "--user-persona",
                '{"verbosity": "minimal"}',
                "--hallucination-retries",
                "0",
                "--llm-log-mode",
                "all",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    for flag in ("--user-persona", "--xml-prompt", "--hallucination-retries", "--llm-log-mode"):
        assert f"note: {flag} has no effect" in captured.err
    # the rest of tau2 run's end-of-run panel
    assert "terminations: user_stop 1" in captured.out and "DB match: 1 / 1 (100.0%)" in captured.out
