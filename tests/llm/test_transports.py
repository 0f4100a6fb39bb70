"""The async transports of rollouts (tau2_gym.llm.http: aiohttp, the
openai SDK) are interchangeable: the same rollout sends the same request bodies and records the same
trajectories over each; the aiohttp client reads chunked and close-delimited replies and survives a server that
drops kept-alive connections."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.llm import http as chat_http
from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy
from tau2_gym.players.users.openai_user import OpenAIUserSimulator
from tau2_gym.runner.collect import collect

REPLY = {
    "id": "x",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi there"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
}


def agent_reply(body, n):
    if body["messages"][-1]["role"] == "tool":
        return "Done: your task is created."
    return {
        "tool_calls": [
            {
                "id": f"c{len(body['messages'])}",
                "name": "create_task",
                "arguments": {"user_id": "user_1", "title": "Important Meeting"},
            }
        ]
    }


def user_reply(body, n):
    return "###STOP###" if len(body["messages"]) >= 5 else "Please create a task called Important Meeting."


def _scrub(runs):
    keep = ("role", "content", "tool_calls", "usage", "cost", "error")
    return [
        (
            r["task_id"],
            r["termination_reason"],
            r["reward_info"]["reward"],
            [{k: m.get(k) for k in keep} for m in r["messages"]],
        )
        for r in runs
    ]


@pytest.mark.parametrize("transport", ["aiohttp", "openai"])
def test_same_rollout_over_each_transport(transport):
    if transport == "aiohttp" and not chat_http.available():
        pytest.skip("aiohttp not installed")
    out = {}
    for name in ("auto", transport):
        with OpenAIStub(agent_reply) as a, OpenAIStub(user_reply) as u:
            policy = OpenAIAgentPolicy(model="m", base_url=a.base_url, api_key_env=None, transport=name)
            user = OpenAIUserSimulator(
                model="m", base_url=u.base_url, api_key_env=None, transport=name, cache="off"
            )  # both runs must reach the server
            report = collect(
                ["create_task_1", "update_task_1"],
                policy,
                user,
                domain="mock",
                num_trials=2,
                concurrency=4,
                progress=False,
            )
            out[name] = (
                _scrub(report.simulations),
                sorted(json.dumps(r, sort_keys=True) for r in a.requests),
                sorted(json.dumps(r, sort_keys=True) for r in u.requests),
            )
    assert out["auto"] == out[transport]
    assert all(t[1] == "user_stop" for t in out["auto"][0])


async def _serve(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"


async def _read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return json.loads(await reader.readexactly(length))


def test_client_reads_chunked_and_close_delimited_replies_and_survives_dropped_connections():
    if not chat_http.available():
        pytest.skip("aiohttp not installed")
    body = json.dumps(REPLY).encode()
    seen = []

    async def handler(reader, writer):
        n = len(seen)
        seen.append(await _read_request(reader))
        if n == 0:  # chunked, kept alive ... but the server drops the connection right after
            chunks = [body[:10], body[10:]]
            writer.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
                + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
                + b"0\r\n\r\n"
            )
        else:  # close-delimited, no Content-Length
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    async def main():
        server, url = await _serve(handler)
        client = chat_http.ChatHTTP(url, "k", {"X-Test": "1"}, 5.0)
        try:
            first = await client.create({"model": "m", "messages": [], "extra_body": {"top_k": 2}})
            await asyncio.sleep(0.05)  # the server has closed the kept-alive connection by now
            second = await client.create({"model": "m", "messages": []})
        finally:
            await client.close()
            server.close()
            await server.wait_closed()
        return first, second

    first, second = asyncio.run(main())
    assert first == second == REPLY
    assert seen[0] == {"model": "m", "messages": [], "top_k": 2}  # extra_body merged into the body, as the SDK does
    assert len(seen) == 2


def test_client_errors_are_classified_like_the_sdks():
    if not chat_http.available():
        pytest.skip("aiohttp not installed")

    async def handler(reader, writer):
        await _read_request(reader)
        msg = json.dumps({"error": {"message": "slow down"}}).encode()
        writer.write(
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: %d\r\n\r\n%s" % (len(msg), msg)
        )
        await writer.drain()

    async def main():
        server, url = await _serve(handler)
        client = chat_http.ChatHTTP(url, "k", None, 5.0)
        try:
            with pytest.raises(chat_http.HTTPStatus) as info:
                await client.create({"model": "m", "messages": []})
        finally:
            await client.close()
            server.close()
            await server.wait_closed()
        return info.value

    err = asyncio.run(main())
    assert (err.status, err.message, err.retry_after) == (429, "slow down", 7.0)
    sim = OpenAIUserSimulator(model="m", api_key_env=None)
    reason, retryable, after = sim.client.classify(err)
    assert retryable and after == 7.0 and reason.startswith("HTTP 429")
    assert not sim.client.classify(chat_http.HTTPStatus(400, "bad", None))[1]
    assert sim.client.classify(chat_http.Unreachable("ConnectionRefusedError"))[1]


def test_auto_picks_aiohttp_when_installed_else_the_sdk():
    async def kinds():
        return [
            type(chat_http.make_client(u, "k")).__name__
            for u in ("http://127.0.0.1:9/v1", "https://example.invalid/v1")
        ]

    want = "ChatHTTP" if chat_http.available() else "NoneType"
    assert asyncio.run(kinds()) == [want, want]
