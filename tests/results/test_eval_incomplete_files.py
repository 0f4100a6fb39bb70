"""``tau2-gym eval`` re-scores any results file: run metadata it lacks is filled (one warning per file),
OpenAI-format messages are accepted, every schema error is listed at once, unscored simulations set the exit
status, changed stored rewards are counted and listed (``--diff``), failed DB checks are explained
(``--explain``). The complete files come from real env episodes: the oracle and flawed scripted agents."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from tau2_gym.cli import main
from tau2_gym.cli.eval import explain_db_diff
from tau2_gym.core.messages import messages_from_dicts, to_openai_messages
from tau2_gym.core.results_file import MAX_LISTED_ERRORS, load_results

AGENTS = ("oracle", "skip_last_action", "wrong_arguments", "give_up", "hallucinating")
# (name, domain, task ids or a count, solo): a DB domain, one with user tools, and a solo run
RUNS = (
    ("airline", "airline", ["0", "1", "5", "7", "9", "12"], False),
    ("telecom", "telecom", 5, False),
    ("telecom_solo", "telecom", 5, True),
)

# what a complete file carries and scoring never reads
INFO_METADATA = (
    "git_commit",
    "num_trials",
    "max_steps",
    "max_errors",
    "seed",
    "user_info",
    "agent_info",
    "data_version",
    "retrieval_config",
    "retrieval_config_kwargs",
)
SIM_METADATA = (
    "id",
    "timestamp",
    "start_time",
    "end_time",
    "duration",
    "agent_cost",
    "user_cost",
    "trial",
    "seed",
    "skipped",
    "info",
)
MESSAGE_METADATA = ("timestamp", "turn_idx", "cost", "usage", "raw_data")


def read(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def write(path: Path, raw: dict) -> Path:
    path.write_text(json.dumps(raw))
    return path


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> dict[str, Path]:
    """One complete results file per run: every scripted agent's episodes of the selection, merged."""
    from tau2_gym.runner.collect import collect

    root = tmp_path_factory.mktemp("runs")
    files = {}
    for name, domain, tasks, solo in RUNS:
        merged = None
        for agent in AGENTS:
            out = root / f"{name}_{agent}.json"
            collect(
                None,
                agent,
                domain=domain,
                task_ids=tasks if isinstance(tasks, list) else None,
                num_tasks=tasks if isinstance(tasks, int) else None,
                solo=solo,
                output=str(out),
                progress=False,
            )
            raw = read(out)
            if merged is None:
                merged = raw
            else:
                merged["simulations"] += raw["simulations"]
        files[name] = write(root / f"{name}.json", merged)
    return files


def strip_metadata(raw: dict) -> dict:
    out = copy.deepcopy(raw)
    out.pop("timestamp", None)
    for key in INFO_METADATA:
        out["info"].pop(key, None)
    out["info"]["environment_info"] = {"domain_name": out["info"]["environment_info"]["domain_name"]}
    for sim in out["simulations"]:
        for key in SIM_METADATA:
            sim.pop(key, None)
        for m in sim["messages"]:
            for key in MESSAGE_METADATA:
                m.pop(key, None)
    return out


def rescore(src: Path, out: Path, *flags: str) -> tuple[int, dict]:
    code = main(["eval", str(src), "-o", str(out), "--no-progress", *flags])
    return code, read(out)


@pytest.mark.parametrize("name", [r[0] for r in RUNS])
def test_a_file_without_run_metadata_rescores_like_the_complete_file(tmp_path, capsys, complete, name):
    full = read(complete[name])
    code, scored_full = rescore(complete[name], tmp_path / "full_scored.json")
    assert code == 0
    capsys.readouterr()
    bare = write(tmp_path / "bare.json", strip_metadata(full))
    code, scored_bare = rescore(bare, tmp_path / "bare_scored.json")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(scored_bare["simulations"]) == len(full["simulations"]) > 0
    for a, b in zip(scored_full["simulations"], scored_bare["simulations"]):
        assert b["reward_info"] == a["reward_info"], a["task_id"]
    assert any(s["reward_info"]["reward"] == 1.0 for s in scored_bare["simulations"])
    assert any(s["reward_info"]["reward"] == 0.0 for s in scored_bare["simulations"])  # flawed agents fail
    # one warning for the file, naming what was filled
    warnings = [line for line in captured.err.splitlines() if "filled missing run metadata" in line]
    assert len(warnings) == 1
    n = len(full["simulations"])
    for field in (
        "info.agent_info.implementation",
        "info.user_info.implementation",
        "info.environment_info.policy",
        "info.git_commit",
        f"simulations[].start_time ({n} of {n})",
        f"simulations[].id ({n} of {n})",
    ):
        assert field in warnings[0]
    assert ("solo mode" if name.endswith("solo") else "normal mode") in warnings[0]
    # the output is a complete results file again (it loads with the full schema)
    assert len(load_results(tmp_path / "bare_scored.json").simulations) == n
    # the stored rewards (from the live env) are what re-scoring finds
    assert "stored rewards: 0 of" in captured.out
    if name.endswith("solo"):  # the inferred mode decides: scored as a conversation, the rewards differ
        normal = strip_metadata(full)
        normal["info"].update(
            agent_info={"implementation": "llm_agent"}, user_info={"implementation": "user_simulator"}
        )
        code, scored_normal = rescore(
            write(tmp_path / "normal.json", normal), tmp_path / "normal_out.json", "--allow-unscored"
        )
        assert [(s["reward_info"] or {}).get("reward") for s in scored_normal["simulations"]] != [
            s["reward_info"]["reward"] for s in scored_bare["simulations"]
        ]


def test_openai_format_messages_rescore_like_tau2_messages(tmp_path, capsys, complete):
    for name in ("airline", "telecom"):
        raw = read(complete[name])
        code, tau2_scored = rescore(complete[name], tmp_path / f"{name}_tau2.json")
        assert code == 0
        chat = copy.deepcopy(raw)
        for sim in chat["simulations"][::2]:  # every other simulation in the env's chat format
            sim["messages"] = to_openai_messages(messages_from_dicts(sim["messages"]))
        for sim in chat["simulations"][1::4]:  # and some with flat calls whose arguments are JSON text
            for m in sim["messages"]:
                for c in m.get("tool_calls") or ():
                    c["arguments"] = json.dumps(c["arguments"])
        converted = sum(
            any(m.get("tool_calls") for m in s["messages"])
            for i, s in enumerate(chat["simulations"])
            if i % 2 == 0 or i % 4 == 1
        )
        assert converted > 0  # (texts alone read the same in both forms)
        if name == "telecom":  # user tool calls ride on role "user" messages, their results answer them
            assert any(
                m["role"] == "user" and m.get("tool_calls") for s in chat["simulations"][::2] for m in s["messages"]
            )
        capsys.readouterr()
        code, chat_scored = rescore(write(tmp_path / f"{name}_chat.json", chat), tmp_path / f"{name}_chat_out.json")
        err = capsys.readouterr().err
        assert code == 0, err
        assert f"{converted} simulation(s) had OpenAI-format messages" in err
        for a, b, orig in zip(tau2_scored["simulations"], chat_scored["simulations"], raw["simulations"]):
            assert b["reward_info"] == a["reward_info"], a["task_id"]
            # written back in tau2's form: the same messages (roles, texts, calls, requestors, error flags)
            assert messages_from_dicts(b["messages"]) == messages_from_dicts(orig["messages"])


def test_a_file_without_tasks_is_graded_with_the_data_tasks(tmp_path, capsys, complete):
    code, scored = rescore(complete["airline"], tmp_path / "with.json")
    assert code == 0
    raw = read(complete["airline"])
    del raw["tasks"]
    capsys.readouterr()
    code, bare = rescore(write(tmp_path / "run.json", raw), tmp_path / "without.json")
    err = capsys.readouterr().err
    assert code == 0 and "embeds no tasks; graded with the tau2-bench==1.0.1 task definitions" in err
    assert [s["reward_info"] for s in bare["simulations"]] == [s["reward_info"] for s in scored["simulations"]]
    # a directory-format results.json (simulations in a folder beside it) is named as such
    del raw["simulations"]
    raw["simulation_index"] = [{"id": "a", "task_id": "0", "trial": 0}]
    assert main(["eval", str(write(tmp_path / "results.json", raw))]) == 1
    assert "directory-format results" in capsys.readouterr().err


def test_an_openai_tool_result_that_answers_no_call_is_a_schema_error(tmp_path, capsys, complete):
    raw = read(complete["airline"])
    k, sim = next((k, s) for k, s in enumerate(raw["simulations"]) if any(m["role"] == "tool" for m in s["messages"]))
    sim["messages"] = to_openai_messages(messages_from_dicts(sim["messages"]))
    i = next(i for i, m in enumerate(sim["messages"]) if m["role"] == "tool")
    sim["messages"][i]["tool_call_id"] = "nobody_asked"
    code = main(["eval", str(write(tmp_path / "run.json", raw))])
    err = capsys.readouterr().err
    assert code == 1
    assert f"simulations[{k}]: Value error, messages[{i}]: tool_call_id 'nobody_asked' answers no earlier" in err


def test_every_schema_error_of_a_file_is_reported_at_once(tmp_path, capsys, complete):
    raw = read(complete["airline"])
    sims = raw["simulations"]
    sims[1]["termination_reason"] = "bored"
    del sims[2]["task_id"]
    sims[3]["messages"][1]["role"] = "robot"
    del sims[4]["termination_reason"]
    src = write(tmp_path / "sims.json", raw)
    out = tmp_path / "out.json"
    code = main(["eval", str(src), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    expected = [
        "simulations[1].termination_reason",
        "simulations[2].task_id",
        "simulations[3].messages[1]",
        "simulations[4].termination_reason",
    ]
    assert "4 schema error(s)" in err and all(f"  {path}:" in err for path in expected)
    assert "'bored'" in err and "'robot'" in err
    assert "error: 4 simulation(s) could not be scored" in err
    scored = read(out)["simulations"]
    assert [s["reward_info"] is None for s in scored[:6]] == [False, True, True, True, True, False]
    assert "termination_reason" in scored[1]["info"]["evaluation_error"]
    # the same file without its domain cannot be scored at all: still every error, in one report
    del raw["info"]["environment_info"]["domain_name"]
    raw["tasks"][0]["evaluation_criteria"] = "none"
    code = main(["eval", str(write(tmp_path / "nodomain.json", raw))])
    err = capsys.readouterr().err
    assert code == 1 and "6 schema error(s)" in err
    assert all(
        f"  {path}:" in err for path in expected + ["info.environment_info.domain_name", "tasks[0].evaluation_criteria"]
    )
    assert "1 input(s) could not be read" in err


def test_long_error_lists_are_capped(tmp_path, capsys, complete):
    raw = read(complete["airline"])
    n = len(raw["simulations"])
    assert n > MAX_LISTED_ERRORS
    for sim in raw["simulations"]:
        sim["termination_reason"] = "bored"
    assert main(["eval", str(write(tmp_path / "run.json", raw)), "--allow-unscored"]) == 0
    err = capsys.readouterr().err
    assert f"{n} schema error(s)" in err and f"... and {n - MAX_LISTED_ERRORS} more" in err
    assert len(re.findall(r"^  simulations\[\d+\]\.termination_reason:", err, re.M)) == MAX_LISTED_ERRORS
    assert f"note: {n} simulation(s) could not be scored (--allow-unscored" in err


def test_diff_lists_exactly_the_changed_stored_rewards(tmp_path, capsys, complete):
    from tau2_gym import load_domain
    from tau2_gym.core.tasks import Task
    from tau2_gym.scoring.evaluation import evaluate_simulation

    raw = read(complete["airline"])
    sims = raw["simulations"]
    sims[0]["reward_info"]["reward"] = 1.0 - sims[0]["reward_info"]["reward"]  # a stale stored reward
    # an oracle trajectory whose first write now books something else: the stored reward no longer holds
    dom = load_domain("airline")
    tasks = {t["id"]: Task.model_validate(t) for t in raw["tasks"]}
    k, j = next(
        (k, j)
        for k, s in enumerate(sims)
        if s["reward_info"]["reward"] == 1.0 and k > 0
        for j, m in enumerate(s["messages"])
        if m["role"] == "assistant"
        and m.get("tool_calls")
        and m["tool_calls"][0]["name"].startswith(("book", "update", "cancel"))
    )
    call = sims[k]["messages"][j]["tool_calls"][0]
    key = next(iter(call["arguments"]))
    call["arguments"][key] = "TAMPERED"
    expected = evaluate_simulation(
        dom,
        tasks[sims[k]["task_id"]],
        messages_from_dicts(sims[k]["messages"]),
        sims[k]["termination_reason"],
        strict=False,
    )["reward"]
    assert expected != 1.0
    del sims[-1]["reward_info"]  # none stored: not a change
    src = write(tmp_path / "run.json", raw)
    assert main(["eval", str(src)]) == 0
    out = capsys.readouterr().out
    assert f"stored rewards: 2 of {len(sims) - 1} changed (1 scored simulation(s) had none stored) (--diff" in out
    assert main(["eval", str(src), "--diff"]) == 0
    out = capsys.readouterr().out
    old0 = sims[0]["reward_info"]["reward"]
    listed = [line.strip() for line in out.splitlines() if line.startswith("    task ")]
    assert listed == [
        f"task {sims[0]['task_id']!r} trial {sims[0]['trial']}: {old0:g} -> {1.0 - old0:g}",
        f"task {sims[k]['task_id']!r} trial {sims[k]['trial']}: 1 -> {expected:g}",
    ]


def test_explain_prints_a_hand_built_db_diff():
    info = {
        "db_diff": [
            {
                "db": "agent",
                "path": "reservations.ABC123.flights[1].date",
                "kind": "changed",
                "gold": "2024-05-16",
                "predicted": "2024-05-17",
            },
            {
                "db": "agent",
                "path": "reservations.ABC123.total_baggages",
                "kind": "only_predicted",
                "gold": None,
                "predicted": 1,
            },
            {
                "db": "user",
                "path": "device.sim_cards[0]",
                "kind": "only_gold",
                "gold": {"id": "s1", "on": True},
                "predicted": None,
            },
        ],
        "db_diff_truncated": 7,
    }
    lines = explain_db_diff(info)
    assert lines == [
        '    agent DB  reservations.ABC123.flights[1].date: gold "2024-05-16", predicted "2024-05-17"',
        "    agent DB  reservations.ABC123.total_baggages: gold (absent), predicted 1",
        '    user DB  device.sim_cards[0]: gold {"id":"s1","on":true}, predicted (absent)',
        "    ... and 7 more differing field(s) not recorded",
    ]
    assert explain_db_diff({"note": "x"}) == [
        "    no field-level DB diff available (the simulation's info has no db_diff)"
    ]
    long = explain_db_diff(
        {"db_diff": [{"db": "agent", "path": "p", "kind": "changed", "gold": "x" * 500, "predicted": 1}]}
    )
    assert len(long) == 1 and len(long[0]) < 160 and long[0].endswith("predicted 1")


def test_explain_on_real_failing_trajectories(tmp_path, capsys, complete):
    code, scored = rescore(complete["airline"], tmp_path / "out.json", "--explain")
    out = capsys.readouterr().out
    assert code == 0
    failed = [
        (i, s)
        for i, s in enumerate(scored["simulations"])
        if (s["reward_info"].get("db_check") or {}).get("db_match") is False
    ]
    assert failed  # the flawed agents leave other databases than the gold actions
    for i, sim in failed:
        header = f"  simulations[{i}] (task {sim['task_id']!r}, trial {sim['trial']}): DB check failed"
        assert header in out
        block = out.split(header, 1)[1].split("\n  simulations[", 1)[0]
        diff = sim["info"]["db_diff"]  # the evaluator's, on every failed DB check, beside upstream's reward_info
        assert diff and all(f"{e['db']} DB  {e['path']}: " in block for e in diff)
        assert block.count(" DB  ") == len(diff)
        for e in diff:
            line = next(x for x in block.splitlines() if f" DB  {e['path']}: " in x)
            assert ("gold (absent)" in line) == (e["kind"] == "only_predicted")
            assert ("predicted (absent)" in line) == (e["kind"] == "only_gold")
    assert out.count("DB check failed") == len(failed)
