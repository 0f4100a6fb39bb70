"""``tau2-gym demo``: runs offline and prints a per-env table of rewards and termination reasons."""

from __future__ import annotations

from tau2_gym.cli import main


def test_demo_prints_rewards_and_termination_reasons(capsys):
    assert main(["demo", "--envs", "mock", "tau2/telecom-solo-v0", "--num-tasks", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("data: tau2-bench==1.0.1 (verified cache")
    assert "== tau2/mock-v0: 3 of 10 tasks" in out and "== tau2/telecom-solo-v0: 3 of" in out
    oracle = [line for line in out.splitlines() if line.strip().startswith("oracle")]
    assert len(oracle) == 2 and all(line.split()[1] == "1.00" for line in oracle)
    assert "of wall time" in out and "µs" in out
