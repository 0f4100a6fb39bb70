"""OpenAIUserSimulator over real HTTP against the local stub server (tests/openai_stub.py)."""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.core.messages import UserMessage
from tau2_gym.core.tasks import Task
from tau2_gym.players.users.base import UserSimulatorError, UserTurnRequest
from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "check_status_bar",
            "description": "Look at the phone's status bar.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }
]
TASK = Task(id="t0", user_scenario={"instructions": "Ask about your bill."})
HISTORY = [
    {"role": "user", "content": "Hi! How can I help you today?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "check_status_bar", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "Signal: none"},
]


def make_request(tools=None, seed=None, episode="e0", history=None) -> UserTurnRequest:
    return UserTurnRequest(
        episode_id=episode,
        system_prompt="You are a customer.",
        messages=list(history if history is not None else HISTORY[:1]),
        tools=tools,
        task=TASK,
        seed=seed,
    )


def sim_for(server: OpenAIStub, **kw) -> OpenAIUserSimulator:
    cfg = dict(
        model="stub-model",
        base_url=server.base_url,
        api_key_env=None,
        timeout=2.0,
        max_retries=3,
        backoff_base=0.01,
        backoff_max=0.05,
        empty_retries=2,
        cache="off",
    )  # retry tests repeat one request: each must reach the server
    cfg.update(kw)
    return OpenAIUserSimulator(OpenAIUserConfig(**cfg))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------ request bodies


def test_text_reply_becomes_user_message_with_usage_cost_and_raw_data():
    with OpenAIStub(["I have a question about my bill."]) as server:
        msg = sim_for(server, input_cost_per_token=0.5, output_cost_per_token=1.0).generate(make_request())
    assert isinstance(msg, UserMessage)
    assert msg.content == "I have a question about my bill."
    assert msg.tool_calls is None
    assert msg.usage == {"completion_tokens": 5, "prompt_tokens": 10}
    assert msg.cost == pytest.approx(10 * 0.5 + 5 * 1.0)
    assert msg.raw_data["id"] == "chatcmpl-stub"
    assert msg.raw_data["choices"][0]["message"]["content"] == "I have a question about my bill."


def test_request_body_carries_system_prompt_flipped_messages_temperature_and_no_tools():
    req = make_request(history=HISTORY)
    with OpenAIStub(["ok"]) as server:
        sim_for(server).generate(req)
        body = server.requests[0]
    assert body["model"] == "stub-model"
    assert body["messages"] == [{"role": "system", "content": "You are a customer."}] + HISTORY
    assert body["temperature"] == 0.0
    assert "tools" not in body and "tool_choice" not in body
    assert "seed" not in body


def test_tools_are_sent_with_tool_choice_auto_and_the_episode_seed():
    with OpenAIStub(["ok"]) as server:
        sim_for(server, seed=1).generate(make_request(tools=TOOLS, seed=300))
        body = server.requests[0]
    assert body["tools"] == TOOLS
    assert body["tool_choice"] == "auto"
    assert body["seed"] == 300  # the episode seed wins over the configured one


def test_configured_seed_and_sampling_args_are_forwarded_when_the_request_has_none():
    with OpenAIStub(["ok"]) as server:
        sim_for(
            server,
            seed=7,
            temperature=0.3,
            top_p=0.9,
            max_tokens=64,
            llm_args={"presence_penalty": 0.1},
            extra_body={"chat_template_kwargs": {"x": 1}},
        ).generate(make_request())
        body = server.requests[0]
    assert (body["seed"], body["temperature"], body["top_p"], body["max_tokens"]) == (7, 0.3, 0.9, 64)
    assert body["presence_penalty"] == 0.1
    assert body["chat_template_kwargs"] == {"x": 1}


def test_tool_call_reply_is_retagged_as_user_call_with_id_kept():
    reply = {
        "tool_calls": [
            {"id": "call_xyz", "name": "toggle_airplane_mode", "arguments": {"on": False}},
            {"id": "call_2", "name": "check_status_bar", "arguments": {}},
        ],
        "content": None,
    }
    with OpenAIStub([reply]) as server:
        msg = sim_for(server).generate(make_request(tools=TOOLS))
    assert msg.content is None
    assert [(c.id, c.name, c.arguments, c.requestor) for c in msg.tool_calls] == [
        ("call_xyz", "toggle_airplane_mode", {"on": False}, "user"),
        ("call_2", "check_status_bar", {}, "user"),
    ]
    assert msg.is_tool_call()


def test_text_and_tool_calls_together_are_both_kept():
    reply = {"tool_calls": [{"id": "c1", "name": "check_status_bar", "arguments": {}}], "content": "Let me look."}
    with OpenAIStub([reply]) as server:
        msg = sim_for(server).generate(make_request(tools=TOOLS))
    assert msg.content == "Let me look." and msg.tool_calls[0].name == "check_status_bar"


# ------------------------------------------------------------------------------------ retries


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 503},
        {"status": 500},
        {"status": 429},
        {"raw": "not json at all"},
        {"raw": '{"object": "nothing"}'},
        {"tool_calls": [{"id": "c", "name": "f", "arguments": "{broken"}]},
        {"tool_calls": [{"id": "c", "name": "f", "arguments": "[1, 2]"}]},
    ],
    ids=["503", "500", "429", "garbage", "no-choices", "bad-args-json", "args-not-object"],
)
def test_transient_failure_is_retried_then_succeeds(failure):
    with OpenAIStub([failure, "recovered"]) as server:
        msg = sim_for(server).generate(make_request())
        assert len(server.requests) == 2
    assert msg.content == "recovered"


def test_timeout_is_retried():
    with OpenAIStub([{"delay": 1.0, "then": "too late"}, "in time"]) as server:
        t0 = time.perf_counter()
        msg = sim_for(server, timeout=0.3).generate(make_request())
        elapsed = time.perf_counter() - t0
        assert len(server.requests) == 2
    assert msg.content == "in time"
    assert elapsed < 0.9  # gave up on the slow reply instead of waiting for it


def test_retries_exhausted_raise_user_simulator_error_with_reason():
    with OpenAIStub([{"status": 503}]) as server:
        with pytest.raises(UserSimulatorError, match=r"HTTP 503.*after 3 attempt") as info:
            sim_for(server, max_retries=2).generate(make_request())
        assert len(server.requests) == 3
    assert "stub-model" in str(info.value) and server.base_url in str(info.value)


def test_client_error_is_not_retried():
    with OpenAIStub([{"status": 400, "body": '{"error": {"message": "bad tool schema"}}'}, "never"]) as server:
        with pytest.raises(UserSimulatorError, match=r"HTTP 400.*bad tool schema.*after 1 attempt"):
            sim_for(server).generate(make_request())
        assert len(server.requests) == 1


def test_unauthorized_error_names_the_api_key_variable():
    with OpenAIStub([{"status": 401}]) as server:
        with pytest.raises(UserSimulatorError, match=r"HTTP 401.*\$MY_KEY"):
            sim_for(server, api_key_env="MY_KEY").generate(make_request())


def test_dead_port_raises_user_simulator_error_naming_a_connection_error():
    sim = OpenAIUserSimulator(
        OpenAIUserConfig(
            model="m",
            base_url=f"http://127.0.0.1:{free_port()}/v1",
            api_key_env=None,
            max_retries=2,
            backoff_base=0.01,
            timeout=1.0,
        )
    )
    with pytest.raises(UserSimulatorError, match=r"connection error.*after 3 attempt"):
        sim.generate(make_request())


def test_empty_reply_is_re_requested_then_accepted():
    with OpenAIStub(["", "   ", "finally"]) as server:
        msg = sim_for(server, empty_retries=2).generate(make_request())
        assert len(server.requests) == 3
    assert msg.content == "finally"


def test_persistently_empty_reply_raises_after_the_empty_budget():
    with OpenAIStub([""]) as server:
        with pytest.raises(UserSimulatorError, match=r"empty response.*after 3 attempt"):
            sim_for(server, empty_retries=2).generate(make_request())
        assert len(server.requests) == 3


def test_backoff_grows_exponentially_within_jitter_and_cap():
    with OpenAIStub(["x"]) as server:
        sim = sim_for(server, backoff_base=1.0, backoff_max=5.0, jitter=0.5)
    for k, nominal in enumerate([1.0, 2.0, 4.0, 5.0, 5.0]):
        for _ in range(50):
            d = sim.client.backoff(k, None)
            assert nominal * 0.5 <= d <= nominal
    assert sim.client.backoff(0, retry_after=3.0) >= 3.0  # Retry-After honoured
    assert sim.client.backoff(0, retry_after=100.0) <= 5.0  # but capped


# ------------------------------------------------------------------------------------ concurrency


def test_agenerate_requests_overlap():
    n, delay = 6, 0.5
    with OpenAIStub(lambda body, i: {"delay": delay, "then": body["messages"][-1]["content"] + "!"}) as server:
        sim = sim_for(server, timeout=5.0)
        reqs = [make_request(history=[{"role": "user", "content": f"m{i}"}], episode=f"e{i}") for i in range(n)]

        async def run():
            try:
                return await asyncio.gather(*(sim.agenerate(r) for r in reqs))
            finally:
                await sim.aclose()

        t0 = time.perf_counter()
        msgs = asyncio.run(run())
        elapsed = time.perf_counter() - t0
    assert [m.content for m in msgs] == [f"m{i}!" for i in range(n)]
    assert elapsed < delay * 2.5, f"{n} requests of {delay}s took {elapsed:.2f}s: not concurrent"


def test_agenerate_retries_and_raises_like_generate():
    with OpenAIStub([{"status": 502}, "ok"]) as server:
        sim = sim_for(server)
        assert asyncio.run(sim.agenerate(make_request())).content == "ok"
    with OpenAIStub([{"status": 502}]) as server:
        sim = sim_for(server, max_retries=1)
        with pytest.raises(UserSimulatorError, match="HTTP 502"):
            asyncio.run(sim.agenerate(make_request()))


def test_generate_batch_overlaps_and_keeps_order_with_errors_in_place():
    n, delay = 6, 0.5

    def reply(body, i):
        text = body["messages"][-1]["content"]
        if text == "m3":
            return {"status": 400}
        return {"delay": delay, "then": text.upper()}

    with OpenAIStub(reply) as server:
        sim = sim_for(server, timeout=5.0)
        reqs = [make_request(history=[{"role": "user", "content": f"m{i}"}], episode=f"e{i}") for i in range(n)]
        t0 = time.perf_counter()
        out = sim.generate_batch(reqs)
        elapsed = time.perf_counter() - t0
        sim.close()
    assert [getattr(m, "content", None) for m in out] == ["M0", "M1", "M2", None, "M4", "M5"]
    assert isinstance(out[3], UserSimulatorError)
    assert elapsed < delay * 2.5, f"{n} requests of {delay}s took {elapsed:.2f}s: not concurrent"


# ------------------------------------------------------------------------------------ config and packaging


def test_config_prints_every_field_with_help_and_upstream_defaults():
    cfg = OpenAIUserConfig()
    assert cfg.temperature == 0.0 and cfg.tool_choice == "auto" and cfg.max_retries == 3
    assert cfg.model == "gpt-4.1-2025-04-14"
    text = cfg.describe()
    assert "temperature = 0.0  # " in text and "api_key_env = 'OPENAI_API_KEY'" in text
    assert "OpenAIUserConfig(model='gpt-4.1-2025-04-14'" in repr(cfg)
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAIUserConfig(max_concurrency=0)


def test_info_reports_model_and_llm_args():
    sim = OpenAIUserSimulator(model="my-user", base_url="http://x/v1", temperature=0.5, api_key_env=None)
    assert sim.info() == {
        "implementation": "user_simulator",
        "llm": "my-user",
        "llm_args": {"temperature": 0.5, "api_base": "http://x/v1"},
    }


def test_missing_openai_package_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"tau2-gym\[openai\]"):
        OpenAIUserSimulator()


def test_user_from_spec_builds_an_openai_user_against_a_local_server():
    from tau2_gym.players.users import user_from_spec

    with OpenAIStub(["from spec"]) as server:
        sim = user_from_spec(f"openai:stub-model@{server.base_url}")
        assert (sim.config.model, sim.config.base_url) == ("stub-model", server.base_url)
        assert sim.generate(make_request()).content == "from spec"
    assert user_from_spec("openai:org/model@v2").config.model == "org/model@v2"
    with pytest.raises(ValueError, match="unknown user simulator spec"):
        user_from_spec("nope:x")


_ASYNC_ONLY = """
import sys, gymnasium as gym, tau2_gym
from tau2_gym.players.users.openai_user import OpenAIUserSimulator
sim = OpenAIUserSimulator(model="stub-model", base_url=sys.argv[1], max_concurrency=2, cache="off", max_retries=0)
vec = gym.make_vec("tau2/airline-v0", num_envs=2, user=sim)
obs, infos = vec.reset(seed=0)
vec.close()
print(obs[0][-1]["content"], "openai" in sys.modules)
"""


def test_async_requests_never_import_the_openai_sdk():
    """A process whose customer requests all go through aiohttp (here a vector env's) does not load the SDK --
    its modules would sit in every full garbage collection -- though the constructor still checks it is there."""
    import subprocess

    pytest.importorskip("aiohttp")
    with OpenAIStub(["Hello, I need help."]) as server:
        out = subprocess.run(
            [sys.executable, "-c", _ASYNC_ONLY, server.base_url], capture_output=True, text=True, timeout=300
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Hello,", "I", "need", "help.", "False"]
