"""Rollouts: seeds, selection, the crash-safe log and resume, retries, the results file, and the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from datautil import REPO

from tau2_gym.core.results_file import load_results
from tau2_gym.core.termination import TerminationReason
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import ScriptedPolicy
from tau2_gym.players.users.scripted import OracleUser
from tau2_gym.runner.collect import (
    RolloutConfig,
    acollect,
    collect,
    log_path,
    read_log,
    select_for_run,
    trial_seeds,
)


def keys(runs):
    return [(r["task_id"], r["trial"], r["seed"]) for r in runs]


def test_trial_seeds_are_upstreams():
    assert trial_seeds(300, 5) == [626729, 373753, 361454, 1567, 514337]  # reference §1.4


def test_log_path_sits_beside_the_results_file(tmp_path):
    assert log_path(tmp_path / "run.json") == tmp_path / "run.jsonl"
    assert log_path(tmp_path / "run.json.gz") == tmp_path / "run.jsonl"
    assert log_path("x") == Path("x.jsonl")


def test_config_describes_every_field_and_checks_values():
    text = RolloutConfig().describe()
    assert "concurrency" in text and "tau2 run --max-concurrency" in text and len(text.splitlines()) >= 20
    with pytest.raises(ValueError, match="num_trials"):
        RolloutConfig(num_trials=0)


def _selected(config: RolloutConfig) -> list:
    return select_for_run(config)[1]


def test_task_selection_by_split_ids_and_num_tasks():
    assert len(_selected(RolloutConfig(domain="airline", task_split="test"))) == 20
    assert [t.id for t in _selected(RolloutConfig(domain="airline", task_ids=["3", "1"]))] == ["3", "1"]
    assert len(_selected(RolloutConfig(domain="airline", num_tasks=4))) == 4
    with pytest.raises(ValueError, match="nope"):
        _selected(RolloutConfig(domain="airline", task_ids=["nope"]))


# ------------------------------------------------------------------------------------ runs, resume, results


def test_rollout_writes_a_results_file_that_tau2_gym_eval_rescores_identically(tmp_path):
    out = tmp_path / "run.json"
    report = collect(
        None, "oracle", OracleUser(), domain="airline", num_tasks=4, num_trials=2, output=str(out), progress=False
    )
    assert report.ran == 8 and report.resumed == 0 and report.failed == 0
    assert report.mean_reward == 1.0
    seeds = trial_seeds(300, 2)
    assert keys(report.simulations) == [(t, trial, seeds[trial]) for trial in (0, 1) for t in ("0", "1", "2", "3")]
    res = load_results(out)
    assert res.info.num_trials == 2 and res.info.seed == 300 and len(res.tasks) == 4
    assert res.info.agent_info.implementation == "scripted_oracle"
    assert res.info.user_info.implementation == "oracle_user"
    assert res.info.environment_info.domain_name == "airline" and res.info.user_info.global_simulation_guidelines
    from tau2_gym.cli import main

    rescored = tmp_path / "rescored.json"
    assert main(["eval", str(out), "-o", str(rescored), "--no-progress"]) == 0
    again = json.loads(rescored.read_text())
    assert [s["reward_info"]["reward"] for s in again["simulations"]] == [1.0] * 8
    assert [s["reward_info"] for s in again["simulations"]] == [s["reward_info"] for s in report.simulations]


def test_resume_skips_logged_episodes_and_reruns_infrastructure_errors(tmp_path):
    out = tmp_path / "run.json"
    first = collect(["0", "1"], "oracle", domain="airline", num_trials=1, output=str(out), progress=False)
    ids = {r["task_id"]: r["id"] for r in first.simulations}
    # a failed record for task 2 (as a run whose episode kept raising would leave)
    with open(log_path(out), "a") as fh:
        fh.write(
            json.dumps(
                {
                    "id": "x",
                    "task_id": "2",
                    "trial": 0,
                    "seed": trial_seeds(300, 1)[0],
                    "termination_reason": TerminationReason.INFRASTRUCTURE_ERROR,
                    "messages": [],
                }
            )
            + "\n"
        )
    second = collect(["0", "1", "2"], "oracle", domain="airline", num_trials=2, output=str(out), progress=False)
    assert second.resumed == 2 and second.ran == 4  # task 2 trial 0 re-run; trial 1 of all three
    assert {r["task_id"]: r["id"] for r in second.simulations if r["trial"] == 0 and r["task_id"] in ids} == ids
    assert len(second.simulations) == 6 and len(set(keys(second.simulations))) == 6
    assert all(r["termination_reason"] == "user_stop" for r in second.simulations)
    third = collect(["0", "1", "2"], "oracle", domain="airline", num_trials=2, output=str(out), progress=False)
    assert third.ran == 0 and third.resumed == 6


def test_a_torn_last_line_is_cut_off_and_its_episode_rerun(tmp_path):
    out = tmp_path / "run.json"
    collect(["0", "1"], "oracle", domain="airline", output=str(out), progress=False)
    log = log_path(out)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed mid-append
    header, records = read_log(log)
    assert header["domain"] == "airline" and len(records) == 1
    again = collect(["0", "1"], "oracle", domain="airline", output=str(out), progress=False)
    assert again.resumed == 1 and again.ran == 1 and len(again.simulations) == 2
    assert all(json.loads(line) for line in log.read_bytes().splitlines())  # the log is whole again


def test_resuming_into_another_domains_log_is_refused(tmp_path):
    out = tmp_path / "run.json"
    collect(["0"], "oracle", domain="airline", output=str(out), progress=False)
    with pytest.raises(ValueError, match="logs a 'airline' run"):
        collect(None, "oracle", domain="mock", output=str(out), progress=False)


class FlakyPolicy(AgentPolicy):
    """The oracle, except that every episode of ``bad`` raises, and the first attempt of ``flaky`` raises."""

    def __init__(self, bad=(), flaky=()) -> None:
        self.inner = ScriptedPolicy("oracle")
        self.bad, self.flaky, self.seen = set(bad), set(flaky), set()

    def generate(self, request):
        tid = request.task.id
        if tid in self.bad:
            raise ConnectionError(f"endpoint for {tid} is down")
        if tid in self.flaky and (tid, request.extra["trial"]) not in self.seen:
            self.seen.add((tid, request.extra["trial"]))
            raise TimeoutError("first try times out")
        return self.inner.generate(request)

    def episode_done(self, episode_id):
        self.inner.episode_done(episode_id)


def test_failing_episodes_are_retried_then_recorded_and_the_run_goes_on(tmp_path):
    out = tmp_path / "run.json"
    report = collect(
        ["0", "1", "2"],
        FlakyPolicy(bad={"1"}, flaky={"2"}),
        domain="airline",
        output=str(out),
        max_retries=2,
        retry_delay=0.0,
        progress=False,
    )
    by_id = {r["task_id"]: r for r in report.simulations}
    assert by_id["0"]["reward_info"]["reward"] == 1.0
    assert by_id["2"]["reward_info"]["reward"] == 1.0  # succeeded on its retry
    bad = by_id["1"]
    assert bad["termination_reason"] == TerminationReason.INFRASTRUCTURE_ERROR and bad["reward_info"] is None
    assert bad["info"]["error_type"] == "ConnectionError" and bad["info"]["failed_after_attempts"] == 3
    assert report.failed == 1
    assert load_results(out).simulations[1].termination_reason.value == TerminationReason.INFRASTRUCTURE_ERROR


def test_evaluation_failures_count_as_episode_failures(tmp_path, monkeypatch):
    import tau2_gym.scoring.evaluation as ev

    def boom(*a, **k):
        raise ev.EvaluationError("task '0': replay mismatch")

    monkeypatch.setattr(ev, "evaluate_simulation", boom)
    report = collect(["0"], "oracle", domain="airline", max_retries=1, retry_delay=0.0, progress=False)
    assert report.simulations[0]["termination_reason"] == TerminationReason.INFRASTRUCTURE_ERROR
    assert "replay mismatch" in report.simulations[0]["info"]["error"]


def test_flawed_agents_end_as_upstream_would_and_solo_runs_without_a_user():
    report = collect(["0"], "malformed", domain="airline", progress=False)
    run = report.simulations[0]
    assert run["termination_reason"] == "agent_error" and run["reward_info"]["reward"] == 0.0
    assert "malformed" in run["info"]["error"]
    solo = collect(None, "oracle", domain="mock", solo=True, progress=False)
    assert solo.simulations and {r["termination_reason"] for r in solo.simulations} == {"agent_stop"}
    assert solo.results["info"]["user_info"]["implementation"] == "dummy_user"


def test_acollect_runs_inside_an_existing_event_loop():
    async def main():
        return await acollect(["0", "1"], "oracle", domain="airline", progress=False, concurrency=2)

    assert asyncio.run(main()).mean_reward == 1.0


# ------------------------------------------------------------------------------------ kill -9 and Ctrl-C

CHILD = r"""
import asyncio, faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for a stack dump if we hang
# Ctrl-C as in a terminal, even when the test run itself was started in the background: a shell starts
# background jobs with SIGINT ignored, a child inherits that, and Python then leaves Ctrl-C ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import ScriptedPolicy
from tau2_gym.runner.collect import collect

class Slow(AgentPolicy):
    # oracle turns; after 150 turns (some 30 episodes) every turn hangs, so the kill always lands mid-run
    def __init__(self):
        self.inner = ScriptedPolicy("oracle")
        self.turns = 0
    async def agenerate(self, request):
        self.turns += 1
        await asyncio.sleep(0.01 if self.turns < 150 else 3600)
        return self.inner.generate(request)
    def episode_done(self, episode_id):
        self.inner.episode_done(episode_id)

collect(None, Slow(), domain="airline", num_trials=2, concurrency=4, output=sys.argv[1], progress=False)
"""


def _wait_for_lines(path: Path, n: int, proc, err_path: Path, timeout: float = 120.0) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, err_path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {n} lines")


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGINT"])
def test_a_killed_rollout_resumes_without_losing_or_duplicating_episodes(tmp_path, signal_name):
    import signal

    out = tmp_path / "run.json"
    log = log_path(out)
    err_path = tmp_path / "child.stderr"
    with open(err_path, "wb") as err:  # a file, not a pipe: a chatty child can never block on a full pipe
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out)], stderr=err, cwd=str(REPO))
    try:
        _wait_for_lines(log, 1 + 12, proc, err_path)  # header + a dozen finished episodes
        proc.send_signal(getattr(signal, signal_name))
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack into the stderr file
        time.sleep(2)
        proc.kill()
        proc.wait()
        pytest.fail(f"the child did not exit within 60 s of {signal_name}; its stderr:\n{err_path.read_text()}")
    assert proc.returncode != 0, err_path.read_text()
    _, before = read_log(log)
    assert 12 <= len(before) < 100
    if signal_name == "SIGINT":  # Ctrl-C: what finished is saved in the results file too
        assert len(load_results(out).simulations) == len(before)
    report = collect(
        None, ScriptedPolicy("oracle"), domain="airline", num_trials=2, output=str(out), progress=False
    )  # restarted (here in-process) with the same output path
    assert report.resumed == len(before) and report.ran == 100 - len(before)
    final = json.loads(out.read_text())["simulations"]
    seeds = trial_seeds(300, 2)
    assert keys(final) == [(str(t), trial, seeds[trial]) for trial in (0, 1) for t in range(50)]
    kept = {k: r["id"] for k, r in before.items()}
    assert {
        (r["task_id"], r["trial"], r["seed"]): r["id"] for r in final if (r["task_id"], r["trial"], r["seed"]) in kept
    } == kept  # nothing finished before the kill was lost or re-run
    lines = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert len(lines) == 100 and len({(r["task_id"], r["trial"]) for r in lines}) == 100
    assert {r["reward_info"]["reward"] for r in final} == {1.0}


# ------------------------------------------------------------------------------------ CLI


def test_cli_rollout_runs_offline_and_resumes(tmp_path, capsys):
    from tau2_gym.cli import main

    out = tmp_path / "cli.json"
    argv = [
        "rollout",
        "--domain",
        "airline",
        "--agent",
        "oracle",
        "--user",
        "oracle",
        "--num-tasks",
        "3",
        "--num-trials",
        "2",
        "--output",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "6 run now" in first and "pass^2=1.0000" in first
    assert main(argv) == 0
    assert "6 resumed from the log, 0 run now" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--agent-llm-args is not valid JSON"):
        main(argv[:3] + ["--agent", "llm_agent", "--agent-llm-args", "{not json"])


def test_collect_inside_a_running_loop_points_to_acollect():
    async def main():
        collect(["0"], "oracle", domain="airline", progress=False)

    with pytest.raises(RuntimeError, match="await acollect"):
        asyncio.run(main())


def test_two_runs_on_one_output_are_refused(tmp_path):
    from tau2_gym.runner.log import EpisodeLog

    out = tmp_path / "run.json"
    holder = EpisodeLog(log_path(out))  # as a run in progress holds it
    try:
        with pytest.raises(RuntimeError, match="another rollout is writing"):
            collect(["0"], "oracle", domain="airline", output=str(out), progress=False)
    finally:
        holder.close()
    assert collect(["0"], "oracle", domain="airline", output=str(out), progress=False).ran == 1


def test_results_carry_upstreams_v1_0_1_keys(tmp_path, monkeypatch):
    import subprocess

    from tau2_gym import load_domain

    report = collect(["create_task_1"], "oracle", domain="mock", progress=False, output=str(tmp_path / "r.json"))
    saved = json.loads((tmp_path / "r.json").read_text())
    run = saved["simulations"][0]
    assert run["mode"] == "half_duplex"  # upstream's CommunicationMode of text runs
    assert run["policy"] == load_domain("mock").policy()  # the policy the agent was shown
    assert "agent_usage" in run and "user_usage" in run
    assert "simulation_index" in saved and saved["simulation_index"] is None  # upstream: only its dir format
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    assert report.results["info"]["git_commit"] == (head.stdout.strip() if head.returncode == 0 else "unknown")
    monkeypatch.chdir(tmp_path)  # not a git working tree: "unknown", as upstream
    other = collect(["create_task_1"], "oracle", domain="mock", progress=False)
    assert other.results["info"]["git_commit"] == "unknown"


def test_with_a_log_finished_episodes_live_in_the_log_and_the_report_reads_them_back(tmp_path, monkeypatch):
    """No finished episode is held as objects during a logged run (a long run's records would sit in every full
    garbage collection); the report, read back from the log, equals the report of the same run kept in memory."""
    from tau2_gym.runner import collect as collect_module

    held = []
    count = collect_module.Collection.count

    def counting(self, batch):
        count(self, batch)
        held.append(len(self.records))

    monkeypatch.setattr(collect_module.Collection, "count", counting)
    logged = collect(
        ["0", "1", "2"], "oracle", domain="airline", num_trials=2, output=str(tmp_path / "r.json"), progress=False
    )
    assert held and set(held) == {0}
    held.clear()
    kept = collect(["0", "1", "2"], "oracle", domain="airline", num_trials=2, progress=False)
    assert held[-1] == 6

    volatile = {"id", "timestamp", "start_time", "end_time", "duration"}

    def stable(value):
        if isinstance(value, dict):
            return {k: stable(v) for k, v in value.items() if k not in volatile}
        return [stable(v) for v in value] if isinstance(value, list) else value

    assert keys(logged.simulations) == keys(kept.simulations)
    assert [stable(r) for r in logged.simulations] == [stable(r) for r in kept.simulations]
    assert json.loads((tmp_path / "r.json").read_text())["simulations"] == logged.results["simulations"]


def test_the_log_writes_records_inside_a_record_as_objects(tmp_path):
    from tau2_gym.core.records import Record
    from tau2_gym.runner.log import EpisodeLog

    log = EpisodeLog(tmp_path / "x.jsonl")
    log.write([{"task_id": "0", "trial": 0, "seed": 1, "reward_info": Record({"reward": 1.0}), "when": Path("p")}])
    log.close()
    _, records = read_log(tmp_path / "x.jsonl")
    assert records[("0", 0, 1)]["reward_info"] == {"reward": 1.0} and records[("0", 0, 1)]["when"] == "p"
