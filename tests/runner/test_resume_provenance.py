"""Provenance: a resume with another agent refuses instead of relabelling the first run's results file."""

from __future__ import annotations

import json

from tau2_gym.cli import main


def _rollout(out, agent, *extra):
    return main(
        [
            "rollout",
            "--domain",
            "mock",
            "--agent",
            agent,
            "--user",
            "oracle",
            "--num-tasks",
            "2",
            "--no-progress",
            "--output",
            str(out),
            *extra,
        ]
    )


def test_resume_with_another_agent_refuses_and_keeps_the_file(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert _rollout(out, "oracle") == 0
    before = out.read_text()
    capsys.readouterr()
    assert _rollout(out, "give_up") != 0
    err = capsys.readouterr().err
    assert "other settings" in err and "agent" in err and "give_up" in err
    assert out.read_text() == before  # not relabelled


def test_allow_config_change_appends_anyway(tmp_path):
    out = tmp_path / "run.json"
    assert _rollout(out, "oracle") == 0
    assert _rollout(out, "give_up", "--allow-config-change") == 0
    assert json.loads(out.read_text())["simulations"]


def test_llm_agent_gt_is_rejected_up_front(tmp_path, capsys):
    assert _rollout(tmp_path / "gt.json", "llm_agent_gt") == 2
    assert "llm_agent_gt" in capsys.readouterr().err
    assert not (tmp_path / "gt.json").exists()


def test_library_resume_refuses_with_allow_config_change_false(tmp_path):
    import pytest

    from tau2_gym.players.agents.scripted import ScriptedPolicy
    from tau2_gym.runner.collect import collect

    out = str(tmp_path / "lib.json")
    collect(None, ScriptedPolicy("oracle"), domain="mock", num_tasks=1, output=out, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        collect(
            None,
            ScriptedPolicy("give_up"),
            domain="mock",
            num_tasks=1,
            output=out,
            progress=False,
            allow_config_change=False,
        )
