"""``timeout`` bounds the whole request, not one socket read (issue 22): a server that drips one byte at a
time resets httpx's per-read timer and used to hold a ``timeout=2`` request for 30 s."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("openai")

from test_openai_user import make_request

from tau2_gym.players.users.base import UserSimulatorError
from tau2_gym.players.users.openai_user import OpenAIUserSimulator

TIMEOUT = 1.0
SLACK = 1.0


class _Drip(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(60):  # one byte every 0.2 s: each read is fast, the request never ends in time
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass


@pytest.fixture
def drip_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _sim(url, transport="auto"):
    return OpenAIUserSimulator(
        model="m", base_url=url, api_key_env=None, timeout=TIMEOUT, max_retries=0, transport=transport
    )


def test_sync_request_to_dripping_server_ends_within_timeout(drip_url):
    sim = _sim(drip_url)
    start = time.monotonic()
    with pytest.raises(UserSimulatorError, match="timed out"):
        sim.generate(make_request())
    assert time.monotonic() - start < TIMEOUT + SLACK


@pytest.mark.parametrize("transport", ["auto", "openai"])  # aiohttp's total timeout; the SDK under wait_for
def test_async_request_to_dripping_server_ends_within_timeout(drip_url, transport):
    sim = _sim(drip_url, transport)

    async def go():
        start = time.monotonic()
        with pytest.raises(UserSimulatorError, match="timed out"):
            await sim.agenerate(make_request())
        return time.monotonic() - start

    assert asyncio.run(go()) < TIMEOUT + SLACK


def test_agent_and_user_share_the_bounded_request_path(drip_url):
    from tau2_gym.core.turns import AgentTurnRequest, PolicyError
    from tau2_gym.llm.client import ChatClient
    from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy

    policy = OpenAIAgentPolicy(model="m", base_url=drip_url, api_key_env=None, timeout=TIMEOUT, max_retries=0)
    assert isinstance(policy.client, ChatClient) and isinstance(_sim(drip_url).client, ChatClient)
    user_request = make_request()
    request = AgentTurnRequest(
        episode_id="e", system_prompt="S", messages=user_request.messages, tools=[], task=user_request.task
    )
    start = time.monotonic()
    with pytest.raises(PolicyError, match="agent model 'm'.*timed out"):
        policy.generate(request)
    assert time.monotonic() - start < TIMEOUT + SLACK
