"""The exploit audit beside every score: the panel played through the episode driver, ``tau2-gym audit``, the
documented tables, the report's rows, re-scoring a file either way, and training that says which reward it uses."""

from __future__ import annotations

import json
import time

import pytest
from datautil import REPO

from tau2_gym import load_domain
from tau2_gym.cli import main
from tau2_gym.core.integrity import HARDENED, RewardIntegrity
from tau2_gym.episodes.audit import audit, audit_table, episode_records, table_markdown
from tau2_gym.episodes.baseline import do_nothing_baseline
from tau2_gym.players.agents.exploits import EXPLOITS, get_exploit
from tau2_gym.runner.collect import collect

ROOT = REPO


def test_the_do_nothing_row_is_the_baseline():
    dom = load_domain("airline")
    tasks = dom.tasks(None, "test")
    row = next(r for r in audit(dom, tasks, exploits=["do-nothing"], integrities=("upstream",)))
    assert row.rewards == do_nothing_baseline(dom, tasks).rewards


def test_every_exploit_is_documented_and_unknown_names_are_one_error():
    for entry in EXPLOITS.values():
        assert entry.exploits and entry.upstream and entry.agent.__doc__
        assert entry.closed_by is None or entry.closed_by in RewardIntegrity.flag_names()
    with pytest.raises(ValueError, match="the panel is: do-nothing, recite-numbers"):
        get_exploit("recite")


def test_audit_cli_prints_the_panel_upstream_and_hardened(capsys):
    assert main(["audit", "--domain", "retail", "--split", "test", "--reward-mode", "default"]) == 0
    out = capsys.readouterr().out
    assert "retail / test (40 tasks; judge stub:complying)" in out
    lines = {ln.split()[0]: ln.split()[2:] for ln in out.splitlines() if ln.split() and ln.split()[0] in EXPLOITS}
    assert set(lines) == set(EXPLOITS)
    assert lines["judge-injection"] == ["0.10", "(4)", "0.05", "(2)"]  # upstream, hardened


@pytest.mark.parametrize(
    "argv,text",
    [
        (["--exploit", "nope"], "unknown exploit 'nope'; the panel is:"),
        (["--reward-integrity", "hardend"], "unknown reward_integrity 'hardend'"),
        (["--reward-mode", "dense"], "unknown reward mode 'dense'"),
    ],
)
def test_audit_cli_bad_names_are_one_error_line(capsys, argv, text):
    assert main(["audit", "--domain", "mock", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and text in err[0]


def test_a_judge_server_that_is_down_fails_the_audit_at_once(capsys):
    start = time.monotonic()
    assert main(["audit", "--domain", "retail", "--judge", "openai:x,base_url=http://127.0.0.1:9/v1"]) == 1
    assert time.monotonic() - start < 20
    err = capsys.readouterr().err
    assert err.startswith("error: judge server http://127.0.0.1:9/v1") and "is the server running" in err


def test_a_failing_judge_stops_the_audit_instead_of_scoring():
    from openai_stub import OpenAIStub

    from tau2_gym.scoring.judges import JudgeError, make_judge

    with OpenAIStub(["not json"]) as server:
        dom = load_domain("retail")
        with pytest.raises(JudgeError):
            episode_records(
                dom, [dom.task("24")], "judge-injection", judge=make_judge(f"openai:s,base_url={server.base_url}")
            )


def _documented(marker: str) -> list[str]:
    lines = (ROOT / "docs" / "scoring.md").read_text().splitlines()
    i = next(k for k, ln in enumerate(lines) if marker in ln)
    table = []
    for ln in lines[i + 1 :]:
        if not ln.startswith("|"):
            break
        table.append(ln)
    return table


@pytest.mark.slow
def test_the_documented_audit_tables_are_what_the_code_computes():
    rows = audit_table(["mock", "airline", "retail", "telecom", "banking_knowledge"])
    assert _documented("audit-table: default reward") == table_markdown(rows, "default")
    assert _documented("audit-table: strict reward") == table_markdown(rows, "strict")


def test_the_documented_test_split_rows_are_what_the_code_computes():
    # the fast part of the check above: the rows of the test splits (the whole tables are the slow test's)
    rows = audit_table(["airline", "retail", "telecom"], splits=["test"])
    for mode in ("default", "strict"):
        documented = _documented(f"audit-table: {mode} reward")
        computed = table_markdown(rows, mode)
        assert computed[:2] == documented[:2]
        assert set(computed[2:]) <= set(documented[2:])


def test_the_report_shows_what_each_exploit_earns_on_the_runs_tasks(tmp_path):
    from tau2_gym.results.report import build_report, load_run

    out = tmp_path / "retail.json"
    collect(None, "oracle", "oracle", domain="retail", num_tasks=30, progress=False, output=str(out), judge="fail")
    run = load_run(out)
    assert run.integrity == "upstream"
    dom = load_domain("retail")
    expected = audit(dom, [dom.task(t) for t in run.task_ids], integrities=("upstream",))
    assert run.exploits == {r.exploit: (r.mean, len(r.passes)) for r in expected if r.exploit != "do-nothing"}
    html = build_report([run])
    assert all(f"exploit: {n}" in html for n in EXPLOITS if n != "do-nothing")
    raw = json.loads(out.read_text())
    raw["info"]["reward_integrity"] = HARDENED.to_dict()
    assert load_run(out, raw=raw).integrity == "hardened"
    raw["info"]["rescored"] = {"reward_integrity": {"name": "upstream"}}  # a re-scoring's setting wins
    assert load_run(out, raw=raw).integrity == "upstream"


def test_eval_rescores_a_file_either_way(tmp_path, capsys):
    from openai_stub import OpenAIStub

    from tau2_gym.players.agents.exploits import JudgeInjectionAgent
    from tau2_gym.players.agents.scripted import ScriptedPolicy

    src = tmp_path / "inj.json"
    with OpenAIStub(['{"results": []}']) as server:
        judge = f"openai:stub,base_url={server.base_url}"
        report = collect(
            ["24", "62"],
            ScriptedPolicy(JudgeInjectionAgent),
            "oracle",
            domain="retail",
            output=str(src),
            judge=judge,
            progress=False,
        )
        assert report.mean_reward == 1.0  # the judge returned no verdict: every NL assertion passed
        hard = tmp_path / "hard.json"
        assert main(["eval", str(src), "--judge", judge, "--reward-integrity", "hardened", "-o", str(hard)]) == 0
        up = tmp_path / "up.json"
        assert main(["eval", str(src), "--judge", judge, "-o", str(up)]) == 0
    out = capsys.readouterr().out
    assert "reward integrity: hardened" in out and "reward integrity: upstream" in out
    rescored = json.loads(hard.read_text())
    assert [s["reward_info"]["reward"] for s in rescored["simulations"]] == [0.0, 0.0]
    assert rescored["info"]["rescored"]["reward_integrity"]["nl_verdict_per_assertion"] is True
    assert rescored["info"]["reward_integrity"]["name"] == "upstream"  # how the episodes were played stays
    assert [s["reward_info"]["reward"] for s in json.loads(up.read_text())["simulations"]] == [1.0, 1.0]


def test_training_says_which_reward_it_uses_and_refuses_a_mismatch():
    pytest.importorskip("datasets")
    from tau2_gym.training.trl import build_dataset, make_rollout_func, tau2_reward

    data = build_dataset("mock", reward_integrity="hardened")
    assert set(data["reward_integrity"]) == {"hardened"}
    assert make_rollout_func(env_kwargs={"reward_integrity": "hardened"}).reward_integrity == "hardened"
    assert make_rollout_func().reward_integrity == "upstream"
    with pytest.raises(ValueError, match="hardend"):
        make_rollout_func(env_kwargs={"reward_integrity": "hardend"})
    with pytest.raises(ValueError, match="built for reward_integrity='hardened'"):
        tau2_reward(tau2_reward=[1.0], reward_integrity=["hardened"], scored_reward_integrity=["upstream"])
    assert tau2_reward(tau2_reward=[1.0], reward_integrity=["hardened"], scored_reward_integrity=["hardened"]) == [1.0]


def test_a_run_resumed_under_another_reward_integrity_is_refused(tmp_path):
    out = str(tmp_path / "run.json")
    collect(None, "oracle", "oracle", domain="mock", num_tasks=2, progress=False, output=out)
    with pytest.raises(ValueError, match="reward_integrity: 'upstream' -> 'hardened'"):
        collect(
            None,
            "oracle",
            "oracle",
            domain="mock",
            num_tasks=3,
            progress=False,
            output=out,
            reward_integrity="hardened",
            allow_config_change=False,
        )
