"""It trains: a short run of examples/sft_then_grpo.py (tiny model, CPU) must improve the env's reward by SFT
and reach GRPO steps with a learning signal (non-zero reward spread within a group, non-zero gradient).

Every number asserted comes from the run itself: rewards are the env's tau2 rewards of greedy episodes
before and after SFT, and the GRPO figures are what TRL logged for its steps.
"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("trl")

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def test_sft_then_grpo_learns_on_the_env_reward(tmp_path):
    sys.path.insert(0, EXAMPLES)
    try:
        import sft_then_grpo as example
    finally:
        sys.path.remove(EXAMPLES)
    args = example.tiny_settings(example.parse_args(["--tiny", "--output-dir", str(tmp_path)]))
    args.task_ids = ["create_task_1", "update_task_1"]  # the quick version: 2 tasks, shorter SFT and GRPO
    args.sft_steps, args.grpo_steps, args.batch_size = 100, 4, 8
    report = example.run(args)

    assert report["sft_rows"] == 2  # the oracle's episodes; give_up's (reward 0) are filtered out
    before, after = sum(report["before_sft"]), sum(report["after_sft"])
    assert len(report["before_sft"]) == len(report["after_sft"]) == 2
    assert after > before, report
    assert report["sft_losses"][-1] < report["sft_losses"][0]
    steps = list(zip(report["grpo_reward_std"], report["grpo_grad_norm"]))
    assert len(steps) == 4
    assert any(std > 0 and grad > 0 for std, grad in steps), report
    assert all(grad == 0 for std, grad in steps if std == 0)  # no spread in any group: nothing to learn from
    assert report["grpo_masked"] == {}  # the oracle customer never fails: no episode was masked out
