"""The examples run as written: quickstart as a script; trl_grpo --tiny through its main() (in-process, so the
heavy imports are shared with the other tests)."""

from __future__ import annotations

import runpy
import subprocess
import sys

import pytest
from datautil import REPO

pytestmark = pytest.mark.slow  # the examples run as scripts and train tiny models

EXAMPLES = REPO / "examples"


def test_quickstart_plays_an_episode_to_its_reward():
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=EXAMPLES.parent,
    )
    assert out.returncode == 0, out.stderr
    assert "task 'create_task_1' of mock" in out.stdout
    assert "reward = 1.0  (user_stop)" in out.stdout


def test_trl_grpo_tiny_runs_two_steps_on_cpu(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("datasets")
    pytest.importorskip("trl")
    import torch

    threads = torch.get_num_threads()
    try:
        module = runpy.run_path(str(EXAMPLES / "trl_grpo.py"), run_name="trl_grpo_example")
        trainer = module["main"](["--tiny"])
    finally:
        torch.set_num_threads(threads)
    assert trainer.state.global_step == 2
    out = capsys.readouterr().out
    assert "2 GRPO steps in" in out and out.count("'task_id': ") == 4
