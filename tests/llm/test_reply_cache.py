"""The LLM reply cache (tau2_gym.llm.cache, one SQLite file): a repeated run answers every user turn from it
(zero user requests at the server) with identical trajectories; on by default at temperature 0 (in
``$TAU2_GYM_CACHE_DIR``, a per-test folder here), off for sampled users unless given a path, off with
``--no-user-cache``; concurrent processes share one file; a corrupt file is a warning and an uncached run."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.cli import main
from tau2_gym.llm.cache import ResponseCache, default_cache_path


def user_reply(body, n):
    # deterministic in the request: a few turns, then stop
    return "###STOP###" if len(body["messages"]) >= 5 else f"Please help me with turn {len(body['messages'])}."


def _args(srv, out, *extra):
    return [
        "rollout",
        "--domain",
        "mock",
        "--num-tasks",
        "3",
        "--agent",
        "oracle",
        "--user",
        "user_simulator",
        "--user-llm",
        "stub-model",
        "--user-base-url",
        srv.base_url,
        "--max-retries",
        "0",
        "--no-progress",
        "--output",
        str(out),
        *extra,
    ]


def _turns(path):
    runs = json.loads(path.read_text())["simulations"]
    assert len(runs) == 3 and all(r["termination_reason"] != "infrastructure_error" and r["messages"] for r in runs)
    return [
        [(m["role"], m.get("content"), json.dumps(m.get("tool_calls"), sort_keys=True)) for m in r["messages"]]
        for r in runs
    ]


def test_cached_rerun_makes_zero_user_requests_and_same_trajectories(tmp_path, capsys):
    cache = tmp_path / "replies.sqlite"
    with OpenAIStub(user_reply) as srv:
        assert main(_args(srv, tmp_path / "a.json", "--user-cache", str(cache))) == 0
        first = len(srv.requests)
        out1 = capsys.readouterr().out
        assert main(_args(srv, tmp_path / "b.json", "--user-cache", str(cache))) == 0
        second = len(srv.requests) - first
        out2 = capsys.readouterr().out
        distinct = len({json.dumps(r, sort_keys=True) for r in srv.requests})  # episodes in flight may ask alike
    assert first > 0 and second == 0
    # episodes in flight can send one identical request: the later may find the earlier's reply (a hit)
    early = re.search(rf"user cache: (\d+) hits, {first} misses, {first} stored \({re.escape(str(cache))}\)", out1)
    assert early, out1
    asked = first + int(early.group(1))  # the user turns of one run
    assert f"user cache: {asked} hits, 0 misses, 0 stored" in out2
    assert _turns(tmp_path / "a.json") == _turns(tmp_path / "b.json")
    info = json.loads((tmp_path / "b.json").read_text())["info"]
    assert info["user_cache"] == {
        "on": True,
        "path": str(cache),
        "mode": "explicit",
        "hits": asked,
        "misses": 0,
        "stored": 0,
    }
    sims = json.loads((tmp_path / "b.json").read_text())["simulations"]
    assert all(m["cost"] == 0.0 for s in sims for m in s["messages"] if m["role"] == "user" and m.get("raw_data"))
    assert len(ResponseCache(cache)) == distinct
    assert not default_cache_path().exists()  # an explicit path: the default file is not touched


def test_on_by_default_at_temperature_zero_in_the_cache_dir(tmp_path, capsys):
    default = default_cache_path()
    assert str(default).startswith(os.environ["TAU2_GYM_CACHE_DIR"])  # conftest: a folder of this test's own
    with OpenAIStub(user_reply) as srv:
        assert main(_args(srv, tmp_path / "a.json")) == 0
        first = len(srv.requests)
        assert main(_args(srv, tmp_path / "b.json")) == 0
        assert len(srv.requests) == first  # the second run asked nothing
    out = capsys.readouterr().out
    early = re.search(rf"user cache: (\d+) hits, {first} misses, {first} stored", out)  # hits: alike in flight
    assert early, out
    assert f"user cache: {first + int(early.group(1))} hits, 0 misses, 0 stored ({default})" in out
    assert json.loads((tmp_path / "a.json").read_text())["info"]["user_cache"]["mode"] == "auto"
    assert _turns(tmp_path / "a.json") == _turns(tmp_path / "b.json")


def test_sampled_users_and_no_user_cache_ask_every_time(tmp_path, capsys):
    hot = ["--user-llm-args", '{"temperature": 0.7}']
    with OpenAIStub(user_reply) as srv:
        assert main(_args(srv, tmp_path / "a.json", *hot)) == 0
        first = len(srv.requests)
        assert main(_args(srv, tmp_path / "b.json", *hot)) == 0
        assert len(srv.requests) == 2 * first  # auto: no cache away from temperature 0 (even with episode seeds)
        assert not default_cache_path().exists()
        assert main(_args(srv, tmp_path / "c.json", "--no-user-cache")) == 0
        assert main(_args(srv, tmp_path / "d.json", "--no-user-cache")) == 0
        assert len(srv.requests) == 4 * first
        assert not default_cache_path().exists()
        # an explicit path caches a sampled user's seeded requests (every episode request carries its seed)
        path = tmp_path / "seeded.sqlite"
        assert main(_args(srv, tmp_path / "e.json", *hot, "--user-cache", str(path))) == 0
        filled = len(srv.requests) - 4 * first
        # episodes in flight can send one identical request: the later may already find the earlier's reply
        assert 0 < filled <= first
        assert main(_args(srv, tmp_path / "f.json", *hot, "--user-cache", str(path))) == 0
        assert len(srv.requests) == 4 * first + filled  # the rerun asked nothing
    out = capsys.readouterr().out
    assert "user cache: off" in out
    info = json.loads((tmp_path / "c.json").read_text())["info"]
    assert info["user_cache"] == {"on": False}


def test_the_old_folder_form_still_works(tmp_path):
    folder = tmp_path / "cachedir"
    folder.mkdir()
    cache = ResponseCache(folder)
    assert cache.path == folder / "cache.sqlite"
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    cache.put(req, {"choices": [{"message": {"content": "x"}}]})
    assert ResponseCache(folder).get(req) == {"choices": [{"message": {"content": "x"}}]}


def test_sampled_unseeded_requests_are_not_cached_and_bad_rows_are_misses(tmp_path, caplog):
    import sqlite3

    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7}
    cache.put(req, {"choices": []})
    assert cache.get(req) is None and cache.stored == 0
    seeded = {**req, "seed": 3}
    cache.put(seeded, {"choices": [1]})
    assert cache.get(seeded) == {"choices": [1]} and cache.get({**seeded, "seed": 4}) is None
    assert ResponseCache(path, seeded=False).get(seeded) is None  # the default cache keeps temperature 0 only
    with sqlite3.connect(path) as db:
        db.execute("UPDATE responses SET response = '{torn'")
    with caplog.at_level(logging.WARNING, logger="tau2_gym.llm.cache"):
        assert cache.get(seeded) is None  # unreadable row: a miss with a warning, not an error
    assert "unreadable" in caplog.text
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 2


def test_a_corrupt_cache_file_warns_and_the_run_goes_on_uncached(tmp_path, capsys):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 200)
    with OpenAIStub(user_reply) as srv:
        assert main(_args(srv, tmp_path / "a.json", "--user-cache", str(bad))) == 0
        first = len(srv.requests)
        assert main(_args(srv, tmp_path / "b.json", "--user-cache", str(bad))) == 0
        assert len(srv.requests) == 2 * first > 0
    captured = capsys.readouterr()
    # one warning per run, at start, at the default --log-level
    assert captured.err.count("warning: user cache") == 2 and "is unusable (DatabaseError" in captured.err
    assert "user cache: off (" in captured.out
    assert bad.read_bytes() == b"this is not a database" * 200  # left as it was
    assert _turns(tmp_path / "a.json") == _turns(tmp_path / "b.json")


def _worker(path: str, start: int, count: int, queue) -> None:
    cache = ResponseCache(path)
    for i in range(start, start + count):  # write ours, read everything so far of both
        req = {"model": "m", "messages": [{"role": "user", "content": str(i)}], "temperature": 0}
        cache.put(req, {"i": i, "pad": "x" * 500})
        assert cache.get(req) == {"i": i, "pad": "x" * 500}
    queue.put(cache.stats())


@pytest.mark.slow
def test_two_spawned_processes_write_and_read_one_file(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, k * 1000, 150, queue)) for k in range(2)]
    for p in procs:
        p.start()
    stats = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(s["on"] and s["stored"] == 150 and s["hits"] == 150 and s["misses"] == 0 for s in stats)
    cache = ResponseCache(path)
    assert len(cache) == 300
    for k in range(2):
        for i in range(k * 1000, k * 1000 + 150):
            req = {"model": "m", "messages": [{"role": "user", "content": str(i)}], "temperature": 0}
            assert cache.get(req)["i"] == i
    assert cache.stats()["hits"] == 300


@pytest.mark.slow
def test_two_rollout_processes_share_one_cache(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with OpenAIStub(user_reply) as srv:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; from tau2_gym.cli import main; sys.exit(main(sys.argv[1:]))",
                    *_args(srv, tmp_path / f"p{i}.json", "--user-cache", str(cache)),
                ],
                env=dict(os.environ),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for i in range(2)
        ]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-2000:]
        before = len(srv.requests)
        assert main(_args(srv, tmp_path / "c.json", "--user-cache", str(cache))) == 0
        assert len(srv.requests) == before  # everything either process stored is served from the cache
    assert _turns(tmp_path / "p0.json") == _turns(tmp_path / "p1.json") == _turns(tmp_path / "c.json")


def test_env_cached_rerun_same_trajectory_and_counts_in_info():
    import gymnasium as gym

    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    def episode(user):
        env = gym.make("tau2/mock-v0", user=user)
        obs, info = env.reset(seed=7, options={"task_id": "create_task_1"})
        for k in range(10):
            obs, reward, term, trunc, info = env.step(f"How can I help? ({k})")
            if term or trunc:
                break
        assert term and info["termination_reason"] == "user_stop"
        msgs = [(m["role"], m.get("content")) for m in info["simulation_run"]["messages"]]
        return msgs, reward, info

    with OpenAIStub(user_reply) as srv:
        make = lambda: OpenAIUserSimulator(model="stub-model", base_url=srv.base_url, max_retries=0)  # noqa: E731 - a one-line factory
        first_msgs, first_reward, first_info = episode(make())
        n = len(srv.requests)
        again_msgs, again_reward, again_info = episode(make())
        assert len(srv.requests) == n > 0
    assert again_msgs == first_msgs and again_reward == first_reward
    assert first_info["user_cache"]["misses"] == n and first_info["user_cache"]["hits"] == 0
    assert again_info["user_cache"]["hits"] == n and again_info["user_cache"]["misses"] == 0
    assert Path(again_info["user_cache"]["path"]) == default_cache_path()
