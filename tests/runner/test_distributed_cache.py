"""Ray rollouts with the LLM reply cache: every actor's user-cache counts are summed into the driver's results
info and summary (the driver's own user asks nothing), and a rerun on Ray is answered from the shared file."""

from __future__ import annotations

import json
import os

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("openai")

from openai_stub import OpenAIStub  # noqa: E402 - after the importorskip guard

from tau2_gym.cli import main  # noqa: E402 - after the importorskip guard

pytestmark = pytest.mark.slow  # a Ray runtime


@pytest.fixture(scope="module", autouse=True)
def ray_runtime(tmp_path_factory):
    # the actors' processes inherit this environment: their default cache is a test folder, never ~/.cache
    old = os.environ.get("TAU2_GYM_CACHE_DIR")
    os.environ["TAU2_GYM_CACHE_DIR"] = str(tmp_path_factory.mktemp("ray-llm-cache"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("TAU2_GYM_CACHE_DIR", None)
    else:
        os.environ["TAU2_GYM_CACHE_DIR"] = old


def user_reply(body, n):
    return "###STOP###" if len(body["messages"]) >= 5 else f"Please help me with turn {len(body['messages'])}."


def test_cache_counts_are_summed_over_two_actors(tmp_path, capsys):
    cache = tmp_path / "shared.sqlite"

    def args(out):
        return [
            "rollout",
            "--domain",
            "mock",
            "--num-tasks",
            "4",
            "--num-trials",
            "2",
            "--agent",
            "oracle",
            "--user",
            "user_simulator",
            "--user-llm",
            "stub-model",
            "--max-retries",
            "0",
            "--no-progress",
            "--user-cache",
            str(cache),
            "--ray",
            "--ray-actors",
            "2",
            "--max-concurrency",
            "2",
            "--output",
            str(out),
        ]

    with OpenAIStub(user_reply) as srv:
        assert main(args(tmp_path / "a.json") + ["--user-base-url", srv.base_url]) == 0
        first = len(srv.requests)
        out1 = capsys.readouterr().out
        assert main(args(tmp_path / "b.json") + ["--user-base-url", srv.base_url]) == 0
        assert len(srv.requests) == first  # the rerun is answered from the file both actors filled
        out2 = capsys.readouterr().out
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert len(a["simulations"]) == 8 and all(s["termination_reason"] == "user_stop" for s in a["simulations"])
    sa, sb = a["info"]["user_cache"], b["info"]["user_cache"]
    assert sa["clients"] == 2 and sb["clients"] == 2  # both actors' counts, not the driver's idle user
    # run 1: every request a miss, stored; alike requests of tasks that share a scenario may hit already
    assert first > 0 and sa["misses"] == sa["stored"] == first
    turns_asked = sa["hits"] + sa["misses"]
    assert sb["hits"] == turns_asked and sb["misses"] == 0 and sb["path"] == str(cache)
    assert f"user cache: {sa['hits']} hits, {first} misses, {first} stored ({cache})" in out1
    assert f"user cache: {turns_asked} hits, 0 misses, 0 stored ({cache})" in out2
    turns = [[(m["role"], m.get("content")) for m in s["messages"]] for s in a["simulations"]]
    assert turns == [[(m["role"], m.get("content")) for m in s["messages"]] for s in b["simulations"]]
