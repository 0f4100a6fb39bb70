"""The OpenEnv server (``tau2-gym serve``) driven by OpenEnv's own client code.

* oracle episodes over the wire reach the same observations, trajectory and reward as the in-process env, on
  every domain;
* 50 sessions stepped in an interleaved order each see only their own episode;
* hostile frames (invalid JSON, binary, non-objects, deep nesting, oversized payloads, unknown types, a step
  before a reset, bad actions and options) get an error reply and leave that session and every other one serving;
* the bearer token, the session bound and the idle expiry; the ``serve`` command end to end.

Skipped without the ``openenv`` extra (``pip install tau2-gym[openenv]``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core.env_server", reason="needs the openenv extra: pip install tau2-gym[openenv]")
pytest.importorskip("openenv.validation", reason="needs OpenEnv 0.10 (the openenv extra), not openenv-core")

import httpx
from openenv import GenericEnvClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tau2_gym.cli import main as cli_main
from tau2_gym.core.records import as_dict
from tau2_gym.frameworks.openenv import ACTION_SHAPE, Tau2Action, Tau2Client, Tau2Server
from tau2_gym.players.agents.scripted import OracleAgent

pytestmark = pytest.mark.slow  # servers in subprocesses

VOLATILE = {"id", "timestamp", "start_time", "end_time", "duration"}


def stable_run(run: dict) -> dict:
    """A SimulationRun without its wall-clock fields and episode id (two runs of one episode differ only there)."""
    out = {k: v for k, v in run.items() if k not in VOLATILE}
    out["messages"] = [{k: v for k, v in m.items() if k != "timestamp"} for m in run["messages"]]
    return out


def local_episode(env, task_id: str, seed: int) -> dict:
    """The oracle's episode in-process: every observation, reward and the end."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    agent = OracleAgent()
    agent.reset(info["task"], info)
    out = {"observations": [obs], "tools": info["tools"], "rewards": [], "actions": []}
    while True:
        action = agent.act(obs, info)
        out["actions"].append(action)
        obs, reward, term, trunc, info = env.step(action)
        out["observations"].append(obs)
        out["rewards"].append(reward)
        if term or trunc:
            break
    out.update(
        terminated=term,
        truncated=trunc,
        termination_reason=info["termination_reason"],
        reward_info=as_dict(info["reward_info"]),
        tau2_reward=info.get("tau2_reward"),
        simulation_run=stable_run(as_dict(info["simulation_run"])),
    )
    return out


async def served_episode(client: Tau2Client, actions: list, task_id: str, seed: int) -> dict:
    """The same actions over the wire, as the local run chose them."""
    result = await client.reset(task_id=task_id, seed=seed)
    obs = result.observation
    out = {"observations": [obs.messages], "tools": obs.tools, "rewards": []}
    for action in actions:
        result = await client.step(Tau2Action(action=action))
        out["observations"].append(result.observation.messages)
        out["rewards"].append(result.reward)
    obs = result.observation
    assert result.done
    out.update(
        terminated=obs.terminated,
        truncated=obs.truncated,
        termination_reason=obs.termination_reason,
        reward_info=obs.reward_info,
        tau2_reward=obs.tau2_reward,
        simulation_run=stable_run(obs.simulation_run),
    )
    return out


@pytest.fixture(scope="module")
def airline_server():
    server = Tau2Server("tau2/airline-v0", port=0, max_message_bytes=64 * 1024).start()
    yield server
    server.stop()


# ---------------------------------------------------------------------------------------------- parity


DOMAINS = [
    ("tau2/mock-v0", {}),
    ("tau2/mock-solo-v0", {}),
    ("tau2/airline-v0", {}),
    ("tau2/retail-v0", {"judge": "pass"}),
    ("tau2/telecom-v0", {"task_split": "small"}),
    ("tau2/telecom-workflow-v0", {"task_split": "small"}),
    ("tau2/banking_knowledge-v0", {"judge": "pass"}),
]


def test_the_served_env_copies_neither_observations_nor_infos():
    """The server serialises each at once, so private copies would be work for nothing (what the settings hand out:
    tests/envs/test_info_isolation.py); the episodes stay the in-process env's (the test below)."""
    from tau2_gym.frameworks.openenv.environment import LoadedEnv

    env = LoadedEnv("tau2/airline-v0").new_env()
    assert env.copy_observations is False and env.copy_infos is False


@pytest.mark.parametrize("env_id,kwargs", DOMAINS, ids=[d[0] for d in DOMAINS])
def test_oracle_episodes_match_the_in_process_env(env_id, kwargs):
    local = gym.make(env_id, **kwargs)
    tasks = [t.id for t in local.unwrapped.tasks[:3]]
    expected = {(t, seed): local_episode(local, t, seed) for t in tasks for seed in (0, 7)}

    async def drive(url: str) -> dict:
        out = {}
        # whole views on the wire, and incremental ones that the client puts back together
        async with Tau2Client(url, incremental=False) as whole, Tau2Client(url) as incremental:
            for (task_id, seed), episode in expected.items():
                client = whole if seed == 0 else incremental
                out[(task_id, seed)] = await served_episode(client, episode["actions"], task_id, seed)
        return out

    with Tau2Server(env_id, kwargs, port=0) as server:
        served = asyncio.run(drive(server.url))
    for key, want in expected.items():
        got = served[key]
        assert got["tools"] == want["tools"], key
        assert got["observations"] == want["observations"], key
        assert got["rewards"] == want["rewards"], key
        for field in ("terminated", "truncated", "termination_reason", "reward_info", "tau2_reward"):
            assert got[field] == want[field], (key, field)
        assert got["simulation_run"] == want["simulation_run"], key
    # the oracle solves some of them: the comparison covered scored endings, not only failures
    assert any(ep["rewards"][-1] == 1.0 for ep in expected.values())


def test_each_event_loop_serves_the_in_process_episodes_and_a_bad_one_is_refused_in_words():
    import importlib.util

    local = gym.make("tau2/airline-v0")
    tasks = [t.id for t in local.unwrapped.tasks[:2]]
    expected = {t: local_episode(local, t, 3) for t in tasks}

    async def drive(url: str) -> dict:
        async with Tau2Client(url) as client:
            return {t: await served_episode(client, ep["actions"], t, 3) for t, ep in expected.items()}

    has_uvloop = importlib.util.find_spec("uvloop") is not None
    for loop in ["asyncio"] + (["uvloop"] if has_uvloop else []):
        with Tau2Server("tau2/airline-v0", port=0, loop=loop) as server:
            assert server.loop == loop
            # the listening socket belongs to the loop asked for
            assert type(server.server.servers[0]).__module__.split(".")[0] == loop
            served = asyncio.run(drive(server.url))
        for t, want in expected.items():
            got = served[t]
            assert (got["observations"], got["rewards"], got["simulation_run"]) == (
                want["observations"],
                want["rewards"],
                want["simulation_run"],
            ), (loop, t)
    auto = Tau2Server("tau2/mock-v0", port=0)
    assert auto.loop == ("uvloop" if has_uvloop else "asyncio")
    auto.socket.close()
    with pytest.raises(ValueError, match="expected one of auto, asyncio, uvloop"):
        Tau2Server("tau2/mock-v0", port=0, loop="trio")


# ---------------------------------------------------------------------------------------------- isolation


def test_fifty_interleaved_sessions_stay_isolated(airline_server):
    local = gym.make("tau2/airline-v0")
    tasks = [t.id for t in local.unwrapped.tasks]
    plan = [(tasks[i % len(tasks)], 100 + i) for i in range(50)]
    expected = [local_episode(local, task_id, seed) for task_id, seed in plan]

    async def drive() -> list:
        clients = [Tau2Client(airline_server.url) for _ in plan]
        await asyncio.gather(*(c.connect() for c in clients))
        try:
            results = await asyncio.gather(*(c.reset(task_id=t, seed=s) for c, (t, s) in zip(clients, plan)))
            seen = [[r.observation.messages] for r in results]
            finals: list = [None] * len(plan)
            # round-robin, one step per live session per round, in a shuffled order each round
            rnd = 0
            while any(f is None for f in finals):
                order = [i for i in range(len(plan)) if finals[i] is None]
                order = order[rnd % len(order) :] + order[: rnd % len(order)]
                order = order[::-1] if rnd % 2 else order
                steps = await asyncio.gather(
                    *(clients[i].step(expected[i]["actions"][len(seen[i]) - 1]) for i in order)
                )
                for i, result in zip(order, steps):
                    seen[i].append(result.observation.messages)
                    if result.done:
                        finals[i] = result
                rnd += 1
            return [(s, f) for s, f in zip(seen, finals)]
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    for (observations, final), want in zip(asyncio.run(drive()), expected):
        assert observations == want["observations"]
        assert final.reward == want["rewards"][-1]
        assert final.observation.termination_reason == want["termination_reason"]
        assert stable_run(final.observation.simulation_run) == want["simulation_run"]


# ---------------------------------------------------------------------------------------------- hostile frames


async def _reply(ws) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), 10))


async def _episode_works(ws) -> None:
    await ws.send(json.dumps({"type": "reset", "data": {"task_id": "1"}}))
    reply = await _reply(ws)
    assert reply["type"] == "observation", reply
    await ws.send(json.dumps({"type": "step", "data": {"action": "Could you give me your user id?"}}))
    reply = await _reply(ws)
    assert reply["type"] == "observation", reply
    assert reply["data"]["observation"]["messages"][-2]["content"] == "Could you give me your user id?"


def test_hostile_frames_get_error_replies_and_the_server_keeps_serving(airline_server):
    ws_url = airline_server.url.replace("http://", "ws://") + "/ws"
    limit = 64 * 1024

    hostile = [
        ("not json at all {", "INVALID_JSON"),
        ("[1, 2, 3]", "VALIDATION_ERROR"),
        ('"a string"', "VALIDATION_ERROR"),
        ("[" * 100_000 + "]" * 100_000, "VALIDATION_ERROR"),  # over the limit, and nested too deep for json
        ("[" * 20_000 + "]" * 20_000, "INVALID_JSON"),  # under the limit: too deep to parse
        (json.dumps({"type": "step", "data": {"action": "x" * (2 * limit)}}), "VALIDATION_ERROR"),
        (json.dumps({"type": "launch_missiles", "data": {}}), "UNKNOWN_TYPE"),
        (json.dumps({"type": "step", "data": {"action": "hello"}}), "EXECUTION_ERROR"),  # before any reset
        (json.dumps({"type": "step", "data": "not an object"}), "VALIDATION_ERROR"),
        (json.dumps({"type": "reset", "data": {"task_id": "no-such-task"}}), "EXECUTION_ERROR"),
        (json.dumps({"type": "reset", "data": {"task_index": "zero"}}), "EXECUTION_ERROR"),
        (json.dumps({"type": "reset", "data": {"warp_speed": 9}}), "EXECUTION_ERROR"),
        (json.dumps({"type": "reset", "data": {"task_id": "1", "incremental": "yes"}}), "EXECUTION_ERROR"),
        (json.dumps({"type": "step", "data": {"action": "hi", "sneaky": 1}}), "VALIDATION_ERROR"),
        (json.dumps({"type": "step", "data": {"action": 42}}), "VALIDATION_ERROR"),
        (json.dumps({"type": "step", "data": {"name": "get_user_details", "arguments": {}}}), "VALIDATION_ERROR"),
        (json.dumps({"no_type": True}), "UNKNOWN_TYPE"),
    ]

    async def scenario() -> None:
        async with connect(ws_url, max_size=None) as bystander, connect(ws_url, max_size=None) as ws:
            await bystander.send(json.dumps({"type": "reset", "data": {"task_id": "1", "seed": 5}}))
            before = (await _reply(bystander))["data"]["observation"]["messages"]
            for frame, code in hostile:
                await ws.send(frame)
                reply = await _reply(ws)
                assert reply["type"] == "error" and reply["data"]["code"] == code, (frame[:60], reply)
            await ws.send(b"\x00\x01binary")
            reply = await _reply(ws)
            assert reply["type"] == "error", reply
            await _episode_works(ws)  # the hostile session itself still serves
            # a malformed action inside a live episode is the agent's error, as in the env: the episode ends
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": "1"}}))
            assert (await _reply(ws))["type"] == "observation"
            await ws.send(json.dumps({"type": "step", "data": {"action": {"role": "assistant", "tool_calls": 7}}}))
            reply = await _reply(ws)
            assert reply["type"] == "observation" and reply["data"]["done"], reply
            assert reply["data"]["observation"]["termination_reason"] == "agent_error"
            # the bystander's episode was untouched
            await bystander.send(json.dumps({"type": "state"}))
            state = (await _reply(bystander))["data"]
            assert state["task_id"] == "1" and state["status"] == "agent" and state["step_count"] == 0
            await bystander.send(json.dumps({"type": "step", "data": {"action": "Hello!"}}))
            after = (await _reply(bystander))["data"]["observation"]["messages"]
            assert after[: len(before)] == before

        # a frame over the transport's hard cap closes only its own connection
        async with connect(ws_url, max_size=None, close_timeout=1) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.send("x" * (4 << 20))  # the cap: max(4 x the limit, the limit + 1 MiB)
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        async with connect(ws_url, max_size=None) as ws:
            await _episode_works(ws)

    asyncio.run(scenario())
    # HTTP: oversized bodies are refused, the health check answers
    with httpx.Client(base_url=airline_server.url, timeout=10) as http:
        assert http.get("/health").status_code == 200
        big = http.post(
            "/reset", content=b"{" + b" " * (2 * limit) + b"}", headers={"content-type": "application/json"}
        )
        assert big.status_code == 413
        ok = http.post("/reset", json={"task_id": "1"})
        assert ok.status_code == 200 and ok.json()["observation"]["task_id"] == "1"
        assert http.post("/reset", json={"task_id": "no-such-task"}).status_code == 422
        assert http.post("/step", json={"action": {"action": "hi"}}).status_code == 409  # HTTP has no sessions


# ---------------------------------------------------------------------------------------------- access and bounds


def test_bearer_token_session_bound_and_idle_expiry():
    with Tau2Server("tau2/mock-v0", port=0, token="s3cret", max_sessions=2, idle_timeout=1.5) as server:
        ws_url = server.url.replace("http://", "ws://") + "/ws"

        async def scenario() -> None:
            with pytest.raises(InvalidStatus):
                async with connect(ws_url):
                    pass
            with pytest.raises(InvalidStatus):
                async with connect(ws_url, additional_headers={"Authorization": "Bearer wrong"}):
                    pass
            auth = {"Authorization": "Bearer s3cret"}
            async with connect(ws_url, additional_headers=auth) as a, connect(ws_url, additional_headers=auth) as b:
                for ws in (a, b):
                    await ws.send(json.dumps({"type": "state"}))
                    assert (await _reply(ws))["type"] == "state"
                async with connect(ws_url, additional_headers=auth) as c:  # one over the bound: told at once
                    reply = await _reply(c)
                    assert reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED"
                # idle past the expiry: an error reply, then the session is closed and its slot freed
                reply = await _reply(a)
                assert reply["type"] == "error" and "expired" in reply["data"]["message"]
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(a.recv(), 5)
            async with Tau2Client(server.url, token="s3cret") as client:
                result = await client.reset(task_index=0)
                assert result.observation.task_id == server.app.loaded.base.tasks[0].id

        asyncio.run(scenario())
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/health").status_code == 200
            assert http.get("/schema").status_code == 401
            assert http.get("/schema", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_openenv_own_clients_reach_a_token_protected_server():
    """OpenEnv's ``GenericEnvClient`` (and every ``EnvClient``) sends ``headers=`` on its WebSocket handshake: with
    the bearer token it plays an episode, without it the handshake is refused (403)."""
    with Tau2Server("tau2/mock-v0", port=0, token="s3cret") as server:
        with GenericEnvClient(base_url=server.url, headers={"Authorization": "Bearer s3cret"}).sync() as env:
            result = env.reset(task_index=0, seed=1)
            assert result.observation["task_id"] == server.app.loaded.base.tasks[0].id and not result.done
            for _ in range(30):
                result = env.step({"action": "Is there anything else I can help you with?"})
                if result.done:
                    break
            assert result.done and result.observation["termination_reason"]
            assert env.state()["episode_id"]
        for headers in (None, {"Authorization": "Bearer wrong"}):
            with pytest.raises(ConnectionError, match="403"):
                with GenericEnvClient(base_url=server.url, headers=headers).sync() as env:
                    env.reset()
        with Tau2Client(server.url, token="s3cret").sync() as env:  # the same header, from token=
            assert env.reset(task_index=1).observation.task_id == server.app.loaded.base.tasks[1].id
            assert env.num_tasks(env.list_splits()[0]["name"]) == len(server.app.loaded.base.tasks)


def test_wrong_action_shapes_are_answered_with_the_expected_shape(airline_server):
    """What OpenEnv's clients show of an error is its message: a step of the wrong shape names the right one (and
    the session goes on); the shapes the action schema allows are accepted from ``GenericEnvClient``."""
    with GenericEnvClient(base_url=airline_server.url).sync() as env:
        env.reset(task_id="1")
        bare_call = {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}
        with pytest.raises(RuntimeError) as raised:
            env.step(bare_call)
        assert ACTION_SHAPE in str(raised.value) and 'wrap it as {"action": ...}' in str(raised.value)
        with pytest.raises(RuntimeError, match="unknown key"):
            env.step({"action": "hi", "text": "hi"})
        with pytest.raises(RuntimeError, match="got action int"):
            env.step({"action": 7})
        result = env.step({"action": bare_call})  # wrapped: the env reads the call
        assert result.observation["messages"][-1]["role"] == "tool" and not result.done
        result = env.step(Tau2Action(action="Could you confirm the reservation id?"))  # the typed action, dumped
        assert result.observation["messages"][-2]["content"] == "Could you confirm the reservation id?"
        # a string is not a dict: GenericEnvClient refuses it itself, before anything is sent
        with pytest.raises(ValueError):
            env.step("Hello")
        assert env.reset(task_id="2").observation["task_id"] == "2"  # the session still serves
    with httpx.Client(base_url=airline_server.url, timeout=10) as http:
        reply = http.post("/step", json={"action": {"name": "x", "arguments": {}}})
        assert reply.status_code == 422 and reply.json()["detail"][0]["msg"].startswith(ACTION_SHAPE)


# ---------------------------------------------------------------------------------------------- the command


def test_serve_command_runs_an_episode(monkeypatch, capsys):
    """``tau2-gym serve`` end to end: argument parsing, the env's options, the printed URL, a blocking run (on a
    thread here: a subprocess would pay OpenEnv's import again), a client's episode, a clean stop."""
    servers = []
    real_run = Tau2Server.run

    def run(self, workers=1):
        servers.append(self)
        real_run(self, workers)

    monkeypatch.setattr(Tau2Server, "run", run)
    argv = ["serve", "--domain", "mock", "--port", "0", "--max-sessions", "4", "--env-arg", "max_steps=30"]
    thread = threading.Thread(target=cli_main, args=(argv,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (servers and servers[0].server.started) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert servers and servers[0].server.started, capsys.readouterr()
    server = servers[0]
    printed = capsys.readouterr().out
    url = re.search(r"(http://127\.0\.0\.1:\d+)", printed).group(1)
    assert url == server.url and server.env_id == "tau2/mock-v0"
    assert f"; {server.loop} loop" in printed  # the loop auto resolved to
    assert server.app.loaded.base.config.max_steps == 30
    try:
        with Tau2Client(url).sync() as client:
            result = client.reset(task_index=0)
            assert result.observation.tools and not result.done
            for _ in range(100):
                result = client.step("Is there anything else I can help you with?")
                if result.done:
                    break
            assert result.done and result.observation.termination_reason
            assert result.observation.simulation_run["task_id"] == result.observation.task_id
    finally:
        server.server.should_exit = True
        thread.join(10)
    assert not thread.is_alive()
    assert cli_main(["serve", "--domain", "mock", "--port", "0", "--loop", "trio"]) == 1
    assert capsys.readouterr().err.strip() == "error: loop='trio': expected one of auto, asyncio, uvloop"


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the worker processes")
def test_workers_serve_sessions_from_several_processes_on_one_port():
    """``--workers 2``: two server processes on one port; concurrent sessions all finish their episodes, and
    stopping the server stops its workers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tau2_gym.cli", "serve", "--domain", "mock", "--port", "0", "--workers", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+)", line).group(1)
        deadline = time.monotonic() + 30
        while len(_children(proc.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert len(workers) == 1  # the parent serves too

        async def episode(i: int) -> float:
            async with Tau2Client(url) as client:
                result = await client.reset(task_index=i % 3)
                while not result.done:
                    result = await client.step("Is there anything else I can help you with?")
                return result.observation.termination_reason

        async def scenario() -> list:
            return await asyncio.gather(*(episode(i) for i in range(8)))

        assert all(reason for reason in asyncio.run(scenario()))
    finally:
        proc.terminate()
        proc.wait(30)
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{pid}") for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in workers)  # the parent stopped and reaped its worker


# ---------------------------------------------------------------------------------------------- an LLM customer


def test_an_llm_customer_is_awaited_and_matches_the_in_process_env():
    """The customer behind an OpenAI-compatible endpoint (the local stub, 0.2 s a reply): served episodes equal the
    in-process env's, and concurrent sessions wait for their customers side by side, not one after another."""
    from openai_stub import OpenAIStub

    from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator

    lines = ["Hi, I need help with a reservation.", "My user id is mia_li_3668.", "Thanks, that is all. ###STOP###"]

    def customer(body: dict, n: int):
        agent_texts = sum(1 for m in body["messages"][1:] if m["role"] == "user")  # the user's view is role-flipped
        return {"delay": 0.2, "then": lines[min(agent_texts, len(lines)) - 1]}

    actions = [
        "Could you give me your user id?",
        {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}},
        "I found your profile. Anything else?",
        "Goodbye!",
    ]
    with OpenAIStub(customer) as stub:

        def user() -> OpenAIUserSimulator:
            return OpenAIUserSimulator(
                OpenAIUserConfig(model="user-m", base_url=stub.base_url, api_key_env=None, cache="off", timeout=10)
            )

        local = gym.make("tau2/airline-v0", user=user())
        obs, _ = local.reset(seed=3, options={"task_id": "1"})
        expected = [obs]
        for action in actions:
            obs, reward, term, trunc, info = local.step(action)
            expected.append(obs)
            if term or trunc:
                break
        assert info["termination_reason"] == "user_stop"

        async def one(url: str) -> list:
            async with Tau2Client(url) as client:
                result = await client.reset(task_id="1", seed=3)
                seen = [result.observation.messages]
                for action in actions[: len(expected) - 1]:
                    result = await client.step(action)
                    seen.append(result.observation.messages)
                assert result.done and result.observation.termination_reason == "user_stop"
                return seen

        async def many(url: str, n: int) -> list:
            return await asyncio.gather(*(one(url) for _ in range(n)))

        with Tau2Server("tau2/airline-v0", {"user": user()}, port=0) as server:
            t0 = time.perf_counter()
            before = len(stub.requests)
            (alone,) = asyncio.run(many(server.url, 1))
            single = time.perf_counter() - t0
            customer_turns = len(stub.requests) - before
            t0 = time.perf_counter()
            together = asyncio.run(many(server.url, 6))
            elapsed = time.perf_counter() - t0
    assert alone == expected
    assert all(seen == expected for seen in together)
    assert customer_turns >= 2 and single >= 0.2 * customer_turns  # the customer's replies were awaited in turn
    assert elapsed < 3 * single, (elapsed, single)  # six sessions in about the time of one, not six


def test_incremental_observations_carry_only_the_new_messages(airline_server):
    ws_url = airline_server.url.replace("http://", "ws://") + "/ws"

    actions = ({"name": "get_user_details", "arguments": {"user_id": "x"}}, "Could you give me your user id?")

    async def views(incremental: bool) -> list:
        async with connect(ws_url, max_size=None) as ws:
            reset = {"task_id": "1", "seed": 2, "incremental": incremental}
            await ws.send(json.dumps({"type": "reset", "data": reset}))
            out = [(await _reply(ws))["data"]["observation"]]
            for action in actions:
                await ws.send(json.dumps({"type": "step", "data": {"action": action}}))
                out.append((await _reply(ws))["data"]["observation"])
            return out

    whole, parts = asyncio.run(views(False)), asyncio.run(views(True))
    assert all(o["messages_offset"] == 0 for o in whole)
    assert parts[0]["messages_offset"] == 0 and parts[0]["messages"] == whole[0]["messages"]
    for before, after, part in zip(whole, whole[1:], parts[1:]):
        assert part["messages_offset"] == len(before["messages"]) > 0
        assert part["messages"] and before["messages"] + part["messages"] == after["messages"]  # what the step added
