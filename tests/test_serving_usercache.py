"""``--user-cache DIR``: a repeated run answers every user turn from the cache (zero user requests at the
server) with identical trajectories; concurrent processes share one cache folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub  # noqa: E402

from tau2_gym.cli import main  # noqa: E402


def user_reply(body, n):
    # deterministic in the request: a few turns, then stop
    return "###STOP###" if len(body["messages"]) >= 5 else f"Please help me with turn {len(body['messages'])}."


def _args(srv, out, cache, *extra):
    return ["rollout", "--domain", "mock", "--num-tasks", "3", "--agent", "oracle", "--user", "user_simulator",
            "--user-llm", "stub-model", "--user-base-url", srv.base_url, "--max-retries", "0", "--no-progress",
            "--output", str(out), "--user-cache", str(cache), *extra]


def _turns(path):
    runs = json.loads(path.read_text())["simulations"]
    assert len(runs) == 3 and all(r["termination_reason"] != "infrastructure_error" and r["messages"] for r in runs)
    return [[(m["role"], m.get("content"), json.dumps(m.get("tool_calls"), sort_keys=True)) for m in r["messages"]]
            for r in runs]


def test_cached_rerun_makes_zero_user_requests_and_same_trajectories(tmp_path, capsys):
    cache = tmp_path / "cache"
    with OpenAIStub(user_reply) as srv:
        assert main(_args(srv, tmp_path / "a.json", cache)) == 0
        first = len(srv.requests)
        out1 = capsys.readouterr().out
        assert main(_args(srv, tmp_path / "b.json", cache)) == 0
        second = len(srv.requests) - first
        out2 = capsys.readouterr().out
    assert first > 0 and second == 0
    assert f"user cache: 0 hits, {first} misses, {first} stored" in out1
    assert f"user cache: {first} hits, 0 misses" in out2
    assert _turns(tmp_path / "a.json") == _turns(tmp_path / "b.json")
    info = json.loads((tmp_path / "b.json").read_text())["info"]
    assert info["user_cache"]["hits"] == first
    sims = json.loads((tmp_path / "b.json").read_text())["simulations"]
    assert all(m["cost"] == 0.0 for s in sims for m in s["messages"] if m["role"] == "user" and m.get("raw_data"))


def test_sampled_unseeded_requests_are_not_cached(tmp_path):
    from tau2_gym.usercache import ResponseCache

    cache = ResponseCache(tmp_path)
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7}
    cache.put(req, {"choices": []})
    assert cache.get(req) is None and cache.stored == 0
    seeded = {**req, "seed": 3}
    cache.put(seeded, {"choices": [1]})
    assert cache.get(seeded) == {"choices": [1]} and cache.get({**seeded, "seed": 4}) is None
    (entry,) = [p for p in tmp_path.rglob("*.json")]
    entry.write_text("{torn")
    assert cache.get(seeded) is None  # unreadable entry: a miss, not an error


def test_two_processes_share_one_cache(tmp_path):
    cache = tmp_path / "cache"
    with OpenAIStub(user_reply) as srv:
        procs = [subprocess.Popen([sys.executable, "-c", "import sys; from tau2_gym.cli import main; "
                                   "sys.exit(main(sys.argv[1:]))", *_args(srv, tmp_path / f"p{i}.json", cache)],
                                  env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for i in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-2000:]
        before = len(srv.requests)
        assert main(_args(srv, tmp_path / "c.json", cache)) == 0
        assert len(srv.requests) == before  # everything either process stored is served from the cache
    assert _turns(tmp_path / "p0.json") == _turns(tmp_path / "p1.json") == _turns(tmp_path / "c.json")
    assert not list(cache.rglob(".tmp-*"))  # no temporary files left behind
