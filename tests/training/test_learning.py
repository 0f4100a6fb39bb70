"""It learns from the reward: a reduced examples/learning_proof.py (tiny model, CPU, one fixed seed).

From one SFT checkpoint, GRPO on the env's reward must raise held-out success (sampled at the training
temperature, on generated tasks that share no argument value with the train tasks) above a control arm trained
on the same rewards shuffled within each group. The mutation check: the same assertion, with the real arm's
reward negated, must fail -- so the test can tell a working reward signal from a broken one.

Every number compared comes from the run: success rates are the env's tau2 rewards of sampled episodes.
Marked ``slow`` (about two minutes on 2 cores); ``-m "not slow"`` leaves it out.
"""

from __future__ import annotations

import sys

import pytest
from datautil import REPO

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("trl")

pytestmark = pytest.mark.slow

EXAMPLES = str(REPO / "examples")

#: the reduced run: one seed, fewer GRPO steps (at a higher learning rate), held-out evaluations only
REDUCED = [
    "--seeds", "1", "--grpo-steps", "24", "--grpo-learning-rate", "3e-4", "--eval-every", "0",
    "--eval-splits", "test",
]  # fmt: skip

#: held-out success must beat the control's by this much (sampling noise on 16 x 4 episodes: sd <= 0.0625)
MARGIN = 0.15


def learned(report: dict, arm: str) -> bool:
    """The claim under test: ``arm`` raised held-out success above after-SFT, and above the control by MARGIN."""
    after = report[arm]["after"]["test"]
    return after >= report["control"]["after"]["test"] + MARGIN and after > report["after_sft"]["test"]


def test_env_reward_beats_control_on_held_out_and_a_flipped_reward_does_not(tmp_path):
    sys.path.insert(0, EXAMPLES)
    try:
        import learning_proof as example
    finally:
        sys.path.remove(EXAMPLES)
    args = example.parse_args(REDUCED + ["--output-dir", str(tmp_path)])
    tasks = example.prepare_tasks(args, str(tmp_path))
    report = example.run_seed(args, 0, tasks, str(tmp_path), extra_arms=("flip",))

    assert report["real"]["masked"] == {}  # the oracle customer never fails: every episode trained on
    assert report["after_sft"]["test"] < 0.9, report["after_sft"]  # SFT left room to improve
    assert learned(report, "real"), {k: report[k] for k in ("after_sft", "real", "control")}
    # mutation: the reward's sign flipped -- the same check must fail
    assert not learned(report, "flip"), report["flip"]
    assert report["flip"]["after"]["test"] <= report["after_sft"]["test"]
