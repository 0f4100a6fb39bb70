"""The one LLM client (tau2_gym.llm.client) behind the agent, the user simulator and the judge: client options in
``llm_args`` configure the client and never reach the request body; parse's exceptions decide retries; the cache
serves replies at no cost; every role maps the client's error to its own class."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub
from test_openai_user import make_request

from tau2_gym.core.config import describe
from tau2_gym.llm.client import BadReply, ChatClient, LLMConfig, LLMError, chat_message
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
from tau2_gym.players.users.base import UserSimulator
from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator
from tau2_gym.scoring.judges import JudgeError, OpenAIJudgeConfig, parse_judge_spec

FAST = dict(
    model="m",
    api_key_env=None,
    timeout=2.0,
    max_retries=2,
    backoff_base=0.01,
    backoff_max=0.02,
    empty_retries=1,
    cache="off",
)


def client_for(server: OpenAIStub, **kw) -> ChatClient:
    return ChatClient(LLMConfig(**{**FAST, "base_url": server.base_url, **kw}), who="tester")


def ask(client: ChatClient, text: str = "hi") -> dict:
    return client.request_kwargs([{"role": "user", "content": text}])


def text_of(raw: dict) -> str:
    content, _ = chat_message(raw, "user")
    return content


# ------------------------------------------------------------------------------------ client options in llm_args


def test_client_options_in_llm_args_move_to_their_fields():
    cfg = LLMConfig(
        llm_args={
            "timeout": 30,
            "num_retries": 5,
            "api_base": "http://h/v1",
            "api_key": "sk-x",
            "reasoning_effort": "low",
        }
    )
    assert (cfg.timeout, cfg.max_retries, cfg.base_url, cfg.api_key) == (30.0, 5, "http://h/v1", "sk-x")
    assert cfg.llm_args == {"reasoning_effort": "low"}
    assert "sk-x" not in repr(cfg) and "api_key = '***'" in cfg.describe()
    both = LLMConfig(
        llm_args={"num_retries": 1, "max_retries": 2, "api_base": "http://a/v1", "base_url": "http://b/v1"}
    )
    assert (both.max_retries, both.base_url) == (2, "http://b/v1")  # the field's own name wins over litellm's alias
    assert LLMConfig(timeout=9.0, llm_args={"timeout": None}).timeout == 9.0  # None: not set
    with pytest.raises(ValueError, match="timeout must be > 0"):
        LLMConfig(llm_args={"timeout": 0})


def test_llm_args_timeout_sets_the_client_timeout_and_is_never_sent():
    with OpenAIStub(["hello"]) as server:
        sim = OpenAIUserSimulator(
            OpenAIUserConfig(
                **{**FAST, "base_url": server.base_url, "llm_args": {"timeout": 30, "presence_penalty": 0.5}}
            )
        )
        assert sim.generate(make_request()).content == "hello"  # the SDK
        assert asyncio.run(sim.agenerate(make_request())).content == "hello"  # aiohttp (the SDK without it)
        bodies = list(server.requests)
    assert len(bodies) == 2 and all("timeout" not in b and b["presence_penalty"] == 0.5 for b in bodies)
    assert sim.config.timeout == 30 and sim.client._sync_client().timeout == 30
    assert "timeout" not in sim.info()["llm_args"]


def test_user_llm_args_timeout_on_the_command_line_is_the_clients_not_the_servers(tmp_path):
    from tau2_gym.cli import main
    from tau2_gym.cli.rollout import add_arguments, player_settings
    from tau2_gym.runner.players import build_user

    argv = [
        "--domain",
        "mock",
        "--task-ids",
        "create_task_1",
        "--agent",
        "oracle",
        "--user",
        "user_simulator",
        "--user-llm",
        "stub-model",
        "--user-llm-args",
        json.dumps({"timeout": 30}),
        "--no-user-cache",
        "--max-retries",
        "0",
        "--no-progress",
    ]
    with OpenAIStub(["###STOP###"]) as server:
        argv += ["--user-base-url", server.base_url]
        assert main(["rollout", *argv, "--output", str(tmp_path / "run.json")]) == 0
        assert server.requests and all("timeout" not in body for body in server.requests)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    _, settings = player_settings(parser.parse_args(argv))
    user = build_user(settings)
    assert user.config.timeout == 30 and "timeout" not in user.config.llm_args


# ------------------------------------------------------------------------------------ the failure policy


def test_parse_decides_bad_replies_are_retried_and_empty_replies_re_requested():
    def parse(raw):
        text = text_of(raw)
        if text == "bad":
            raise BadReply("the caller cannot use it")
        return text

    with OpenAIStub(["bad", "", "fine"]) as server:
        reply = client_for(server).complete(ask(client_for(server)), parse)
        assert len(server.requests) == 3
    assert reply.value == "fine" and not reply.cached
    assert reply.usage == {"completion_tokens": 5, "prompt_tokens": 10} and reply.raw["id"] == "chatcmpl-stub"


def test_the_callers_own_exception_from_parse_is_raised_as_is_without_a_retry():
    class Mine(Exception):
        pass

    def parse(raw):
        raise Mine("not for me")

    with OpenAIStub(["x", "y"]) as server:
        with pytest.raises(Mine):
            client_for(server).complete(ask(client_for(server)), parse)
        assert len(server.requests) == 1


def test_the_final_error_names_role_model_endpoint_reason_and_attempts():
    with OpenAIStub([{"status": 503}]) as server:
        with pytest.raises(LLMError) as info:
            client_for(server).complete(ask(client_for(server)), text_of)
        assert len(server.requests) == 3
    err = info.value
    assert (err.who, err.model, err.where, err.attempts) == ("tester", "m", server.base_url, 3)
    assert err.reason.startswith("HTTP 503") and str(err).startswith(f"tester model 'm' at {server.base_url}: HTTP 503")
    with OpenAIStub([""]) as server:
        with pytest.raises(LLMError, match=r"empty response.*after 2 attempt"):
            client_for(server).complete(ask(client_for(server)), text_of)


def test_async_path_retries_like_the_sync_path():
    with OpenAIStub([{"status": 502}, {"raw": "garbage"}, "ok"]) as server:
        client = client_for(server)

        async def go():
            try:
                return await client.acomplete(ask(client), text_of)
            finally:
                await client.aclose()

        assert asyncio.run(go()).value == "ok"
        assert len(server.requests) == 3


def test_cached_replies_cost_nothing_and_count_as_hits(tmp_path):
    path = tmp_path / "c.sqlite"
    with OpenAIStub(["first", "second"]) as server:
        priced = dict(cache=str(path), input_cost_per_token=1.0, output_cost_per_token=1.0)
        fresh = client_for(server, **priced).complete(ask(client_for(server)), text_of)
        again_client = client_for(server, **priced)
        again = again_client.complete(ask(again_client), text_of)
        assert len(server.requests) == 1
    assert (fresh.value, fresh.cost, fresh.cached) == ("first", 15.0, False)
    assert (again.value, again.cost, again.cached, again.usage) == ("first", 0.0, True, fresh.usage)
    assert {k: again_client.cache_stats()[k] for k in ("hits", "misses", "stored")} == {
        "hits": 1,
        "misses": 0,
        "stored": 0,
    }


def test_an_agent_caches_only_with_an_explicit_path(tmp_path):
    auto = {**FAST, "cache": "auto"}
    assert OpenAIAgentPolicy(**auto).client.cache is None
    assert OpenAIUserSimulator(**auto).client.cache is not None  # temperature 0
    assert OpenAIAgentPolicy(**{**FAST, "cache": str(tmp_path / "a.sqlite")}).client.cache is not None


def test_batch_keeps_order_and_returns_exceptions_in_place():
    with OpenAIStub(lambda body, n: {"status": 400} if body["messages"][-1]["content"] == "b" else "ok") as server:
        client = client_for(server)

        async def value(text):
            return (await client.acomplete(ask(client, text), text_of)).value

        out = client.batch(value, ["a", "b", "c"])
        client.close()
    assert out[0] == out[2] == "ok" and isinstance(out[1], LLMError) and out[1].attempts == 1


# ------------------------------------------------------------------------------------ the three roles


def test_agent_user_and_judge_share_one_client_and_keep_their_error_classes():
    from tau2_gym.core.turns import AgentTurnRequest, PolicyError, UserSimulatorError

    policy = OpenAIAgentPolicy(**FAST)
    assert not isinstance(policy, UserSimulator) and isinstance(policy.client, ChatClient)
    assert isinstance(policy.config, LLMConfig) and isinstance(OpenAIAgentConfig(), LLMConfig)
    with OpenAIStub([{"status": 404}]) as server:
        req = make_request()
        agent_req = AgentTurnRequest(episode_id="e", system_prompt="S", messages=req.messages, tools=[], task=req.task)
        with pytest.raises(PolicyError, match=rf"^agent model 'm' at {server.base_url}: HTTP 404.*after 1 attempt"):
            OpenAIAgentPolicy(**{**FAST, "base_url": server.base_url}).generate(agent_req)
        with pytest.raises(UserSimulatorError, match=r"^user simulator model 'm' at .*HTTP 404.*after 1 attempt"):
            OpenAIUserSimulator(**{**FAST, "base_url": server.base_url}).generate(req)
        judge = OpenAIJudgeConfig(**{**FAST, "base_url": server.base_url}).build()
        with pytest.raises(JudgeError, match=r"^openai:m at .* failed after 1 attempt\(s\): HTTP 404"):
            judge.complete("system", "user")  # a 4xx is final for the judge too
        assert len(server.requests) == 3


def test_judge_without_text_is_a_judge_error_and_its_spec_takes_the_client_field_names():
    reply = {"tool_calls": [{"id": "c", "name": "f", "arguments": {}}], "content": None}
    with OpenAIStub([reply]) as server:
        judge = OpenAIJudgeConfig(**{**FAST, "base_url": server.base_url}).build()
        with pytest.raises(JudgeError, match="answered without text content"):
            judge.complete("system", "user")
        assert len(server.requests) == 1
    cfg = parse_judge_spec("openai:j,timeout=5,jitter=0,backoff_max=2,empty_retries=0,top_p=0.5")
    assert (cfg.timeout, cfg.jitter, cfg.backoff_max, cfg.empty_retries, cfg.top_p) == (5.0, 0.0, 2.0, 0, 0.5)
    with pytest.raises(ValueError, match="mapping"):
        parse_judge_spec("openai:j,llm_args=x")


def test_describe_is_one_helper_for_every_config():
    assert OpenAIUserConfig().describe() == describe(OpenAIUserConfig())
    text = describe(OpenAIJudgeConfig(api_key="secret"))
    assert "secret" not in text and "api_key = '***'  # Literal API key" in text
    assert "backoff_base = 1.0  # First retry delay" in text


def test_a_batch_runs_on_the_clients_loop_from_any_thread_even_one_running_a_loop():
    """``batch`` is synchronous for its caller -- also inside a running event loop (a notebook) -- and its requests
    share the client's kept-alive connections across batches; ``close`` ends the loop and a later batch starts it
    again."""
    with OpenAIStub(lambda body, n: body["messages"][-1]["content"].upper()) as server:
        client = client_for(server)

        async def value(text):
            return (await client.acomplete(ask(client, text), text_of)).value

        async def inside_a_loop():
            return client.batch(value, ["a", "b"])

        assert asyncio.run(inside_a_loop()) == ["A", "B"]
        assert client.batch(value, ["c"]) == ["C"] and client.batch(value, []) == []
        loop = client._batch_loop.loop()
        client.close()
        assert loop.is_closed()
        assert client.batch(value, ["d"]) == ["D"]  # a new loop
        client.close()


def test_the_loop_thread_raises_the_coroutines_error_and_refuses_to_wait_on_itself():
    from tau2_gym.llm.loop import LoopThread

    async def boom():
        raise ValueError("inside")

    thread = LoopThread("test-loop")
    with pytest.raises(ValueError, match="inside"):
        thread.run(boom())

    async def nested():
        return thread.run(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="wait for ever"):
        thread.run(nested())
    thread.close()
