"""Rollouts on Ray actors (tau2_gym.runner.ray): same episodes and rewards as the single-process collector, the
same resumable log, nothing lost or duplicated when actors die, and the CLI's ``--ray`` (and its error without
Ray). One local Ray runtime (2 CPUs) serves the whole module: starting one costs seconds."""

from __future__ import annotations

import asyncio
import builtins
import json
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from tau2_gym.players.agents.base import AgentPolicy  # noqa: E402 - after the importorskip guard
from tau2_gym.players.agents.scripted import ScriptedPolicy  # noqa: E402 - after the importorskip guard
from tau2_gym.runner.collect import collect, log_path, read_log, trial_seeds  # noqa: E402 - after the importorskip guard
from tau2_gym.runner.ray import acollect_ray, collect_ray  # noqa: E402 - after the importorskip guard

pytestmark = pytest.mark.slow  # a Ray runtime

ray.cloudpickle.register_pickle_by_value(
    sys.modules[__name__]
)  # the actors need SlowOracle; tests/ is not on their path

VOLATILE = {"timestamp", "start_time", "end_time", "duration", "id", "info", "wall_time", "agent_cost", "user_cost"}
AIRLINE = dict(domain="airline", num_tasks=8, num_trials=2, progress=False)
RUN = dict(domain="mock", task_split=None, num_trials=2, progress=False)  # 20 episodes, some scored 0.0


def _stable(value):
    """A record without its clock readings and uuids (as test_determinism)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def keys(runs):
    return [(r["task_id"], r["trial"], r["seed"]) for r in runs]


@pytest.fixture(scope="module", autouse=True)
def ray_runtime():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def single_process(tmp_path_factory):
    """The reference of the kill/resume tests: the single-process collector over the same episodes."""
    report = collect(None, "oracle", None, output=str(tmp_path_factory.mktemp("single") / "run.json"), **RUN)
    assert {r["reward_info"]["reward"] for r in report.simulations} == {0.0, 1.0}  # both outcomes are compared
    return report


class SlowOracle(AgentPolicy):
    """Oracle turns, each after a short await: episodes overlap inside an actor and a kill lands mid-run."""

    def __init__(self, delay: float = 0.05) -> None:
        self.inner = ScriptedPolicy("oracle")
        self.delay = delay

    async def agenerate(self, request):
        await asyncio.sleep(self.delay)
        return self.inner.generate(request)

    def generate(self, request):
        return self.inner.generate(request)

    def info(self):
        return self.inner.info()

    def episode_done(self, episode_id):
        self.inner.episode_done(episode_id)


def _killer(log, n_lines: int, victims):
    """A driver thread: once the log holds ``n_lines`` lines, ray.kill the actors ``victims(pool)`` picks."""
    state = {}

    def on_pool(pool):
        def kill():
            t0 = time.time()
            while time.time() - t0 < 60:
                if log.exists() and log.read_bytes().count(b"\n") >= n_lines:
                    break
                time.sleep(0.01)
            state["killed"] = victims(pool)
            state["inflight_at_kill"] = len(pool.inflight)
            for actor in state["killed"]:
                ray.kill(actor)

        state["pool"] = pool
        state["thread"] = threading.Thread(target=kill, daemon=True)
        state["thread"].start()

    return on_pool, state


def test_two_actors_give_the_single_process_episodes_and_rewards(tmp_path):
    single = collect(None, "oracle", None, output=str(tmp_path / "single.json"), **AIRLINE)
    out = tmp_path / "ray.json"
    report = collect_ray(None, "oracle", None, num_actors=2, concurrency=2, output=str(out), **AIRLINE)
    seeds = trial_seeds(300, 2)
    assert report.ran == 16 and report.resumed == 0 and report.failed == 0
    assert keys(report.simulations) == [(str(t), trial, seeds[trial]) for trial in (0, 1) for t in range(8)]
    assert keys(report.simulations) == keys(single.simulations)
    assert _stable(report.simulations) == _stable(single.simulations)
    assert [r["reward_info"] for r in report.simulations] == [r["reward_info"] for r in single.simulations]
    # the same files: header with the same signature, one line per episode; results info as collect's
    header, records = read_log(log_path(out))
    single_header, _ = read_log(single.log)
    assert header["run"] == single_header["run"] and len(records) == 16
    saved = json.loads(out.read_text())
    assert _stable(saved["info"]) == _stable(single.results["info"])
    assert [t["id"] for t in saved["tasks"]] == [str(t) for t in range(8)]
    # each collector resumes the other's output: nothing left to run (and no actor is started for nothing)
    again = collect(None, "oracle", None, output=str(out), **AIRLINE)
    assert again.ran == 0 and again.resumed == 16
    again = collect_ray(None, "oracle", None, output=str(single.output), on_pool=pytest.fail, **AIRLINE)
    assert again.ran == 0 and again.resumed == 16
    assert [r["id"] for r in again.simulations] == [r["id"] for r in single.simulations]


def test_a_killed_actor_loses_and_duplicates_nothing(tmp_path, single_process):
    out = tmp_path / "ray.json"
    log = log_path(out)
    on_pool, state = _killer(log, 1 + 4, lambda pool: [pool.actors[min(pool.actors)]])
    report = collect_ray(None, SlowOracle(), None, num_actors=2, concurrency=2, output=str(out), on_pool=on_pool, **RUN)
    state["thread"].join(5)
    pool = state["pool"]
    assert len(state["killed"]) == 1 and pool.deaths == 1 and pool.requeued >= 1  # it died with episodes in hand
    assert report.ran == 20 and report.failed == 0
    lines = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert len(lines) == 20 and len(set(keys(lines))) == 20  # each episode logged once
    assert _stable(report.simulations) == _stable(single_process.simulations)


def test_a_run_whose_actors_all_died_resumes_into_the_same_output(tmp_path, single_process):
    out = tmp_path / "ray.json"
    log = log_path(out)
    on_pool, state = _killer(log, 1 + 3, lambda pool: list(pool.actors.values()))
    with pytest.raises(RuntimeError, match="every Ray actor died"):
        collect_ray(
            None,
            SlowOracle(),
            None,
            num_actors=2,
            concurrency=2,
            output=str(out),
            on_pool=on_pool,
            max_actor_restarts=0,
            **RUN,
        )
    _, before = read_log(log)
    assert 3 <= len(before) < 20
    assert len(json.loads(out.read_text())["simulations"]) == len(before)  # the results file holds what finished
    kept = {k: r["id"] for k, r in before.items()}
    report = collect_ray(None, "oracle", None, num_actors=2, concurrency=2, output=str(out), **RUN)
    assert report.resumed == len(before) and report.ran == 20 - len(before)
    assert {k: r["id"] for k, r in zip(keys(report.simulations), report.simulations) if k in kept} == kept
    lines = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert len(lines) == 20 and len(set(keys(lines))) == 20
    assert _stable(report.simulations) == _stable(single_process.simulations)


def test_cli_rollout_on_ray_matches_the_single_process_cli(tmp_path, capsys):
    from tau2_gym.cli import main

    base = [
        "rollout",
        "--domain",
        "mock",
        "--task-split-name",
        "none",
        "--agent",
        "oracle",
        "--user",
        "oracle",
        "--num-tasks",
        "4",
        "--num-trials",
        "2",
        "--no-progress",
    ]
    assert main(base + ["--output", str(tmp_path / "one.json")]) == 0
    single = capsys.readouterr().out
    assert main(base + ["--output", str(tmp_path / "ray.json"), "--ray", "--ray-actors", "2"]) == 0
    distributed = capsys.readouterr().out
    assert "8 run now" in distributed and "pass^2=" in distributed
    assert single.splitlines()[:4] == distributed.splitlines()[:4]
    a = json.loads((tmp_path / "one.json").read_text())["simulations"]
    b = json.loads((tmp_path / "ray.json").read_text())["simulations"]
    assert _stable(a) == _stable(b)


def test_cli_without_ray_names_the_extra(tmp_path, monkeypatch, capsys):
    from tau2_gym.cli import main

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    code = main(
        [
            "rollout",
            "--agent",
            "oracle",
            "--user",
            "oracle",
            "--num-tasks",
            "1",
            "--no-progress",
            "--output",
            str(tmp_path / "x.json"),
            "--ray",
        ]
    )
    assert code == 2 and "error: --ray: " in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()  # refused before anything ran


def test_an_unpicklable_llm_client_is_refused_with_the_factory_advice(tmp_path):
    import threading as th

    class Held(SlowOracle):
        def __init__(self):
            super().__init__()
            self.lock = th.Lock()  # as an LLM client's

    with pytest.raises(TypeError, match=r"zero-argument factory"):
        collect_ray(None, Held(), None, output=str(tmp_path / "x.json"), **RUN)
    assert not json.loads((tmp_path / "x.json").read_text())["simulations"]


def test_acollect_ray_serves_callers_inside_an_event_loop(tmp_path):
    out = str(tmp_path / "run.json")
    collect(None, "oracle", None, output=out, num_tasks=2, **RUN)

    async def main():
        return await acollect_ray(None, "oracle", None, output=out, on_pool=pytest.fail, num_tasks=2, **RUN)

    report = asyncio.run(main())
    assert report.resumed == 4 and report.ran == 0

    async def wrong():
        collect_ray(None, "oracle", None, output=out, num_tasks=2, **RUN)

    with pytest.raises(RuntimeError, match="await acollect_ray"):
        asyncio.run(wrong())


class Boom(BaseException):
    """Escapes the collector's per-episode retry (which catches Exception): as a bug inside an actor would."""


class Exploding(SlowOracle):
    async def agenerate(self, request):
        raise Boom("bug")


def test_a_call_that_raises_on_a_live_actor_stops_the_run_with_its_error(tmp_path):
    out = tmp_path / "x.json"
    with pytest.raises(RuntimeError, match="failed on its Ray actor.*Boom"):
        collect_ray(None, Exploding(), None, num_actors=1, output=str(out), num_tasks=2, **RUN)
    assert json.loads(out.read_text())["simulations"] == []  # the results file is still written
