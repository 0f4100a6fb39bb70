"""Honest training signals and the split guard in the TRL integration (trl 1.16's GRPOTrainer processing).

* An infrastructure failure (``user_error``, ``evaluation_error``) is masked out of the gradient -- reward
  ``None`` (TRL: NaN, out of the baseline, advantage 0) and an all-zero ``env_mask`` -- counted and logged;
  never zeroed, which would train the policy on it as a failure.
* A malformed tool call is the policy's fault: ``agent_error``, reward 0.0, kept in the loss.
* Training helpers default to the train split and refuse test tasks without ``allow_test_split``.
"""

from __future__ import annotations

import os
import tempfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("trl")

import gymnasium as gym  # noqa: E402 - after the importorskip guard
from hfutil import ForceScript, oracle_scripts, set_threads, tiny  # noqa: E402 - after the importorskip guard

import tau2_gym  # noqa: E402,F401 - after the importorskip guard
from tau2_gym import load_domain  # noqa: E402 - after the importorskip guard
from tau2_gym.players.users.base import UserSimulatorError  # noqa: E402 - after the importorskip guard
from tau2_gym.players.users.scripted import OracleUser  # noqa: E402 - after the importorskip guard
from tau2_gym.training.export import SplitGuardError  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.chat import ChatRenderer  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.policy import Trajectory  # noqa: E402 - after the importorskip guard
from tau2_gym.training.trl import (  # noqa: E402 - after the importorskip guard
    build_dataset,
    make_environment_factory,
    make_rollout_func,
    rollout_output,
    task_prompt,
    tau2_reward,
)

pytestmark = pytest.mark.slow  # TRL rollouts on a tiny model

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TASKS = ["create_task_1", "update_task_1"]


@pytest.fixture(autouse=True)
def _threads():
    set_threads()


class FlakyUser(OracleUser):
    """The oracle customer, except that its service fails after the opening in the first episode of each task
    (so every GRPO group of two holds one scorable episode and one infrastructure failure)."""

    def __init__(self) -> None:
        super().__init__()
        self.doomed: dict[str, str] = {}

    def generate(self, request):
        doomed = self.doomed.setdefault(request.task.id, request.episode_id)
        if request.turn >= 1 and request.episode_id == doomed:
            raise UserSimulatorError("user endpoint unavailable (simulated outage)")
        return super().generate(request)


def trainer_for(rollout, ds, tmp):
    import copy

    from trl import GRPOConfig, GRPOTrainer

    model, tok = tiny()
    args = GRPOConfig(
        output_dir=tmp,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=256,
        max_steps=1,
        learning_rate=1e-3,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
        activation_checkpointing=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=copy.deepcopy(model),
        reward_funcs=[tau2_reward],
        args=args,
        train_dataset=ds,
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.model.train()  # TRL logs a batch under "train" metrics when the model is in training mode
    return trainer, tok


def forced_oracle(tok, scripts_for=TASKS, replace=None):
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    make_env = lambda: gym.make("tau2/mock-v0", disable_env_checker=True)  # noqa: E731 - a one-line factory
    scripts, base, oracle = oracle_scripts(renderer, make_env, list(scripts_for))
    keys = dict(zip(scripts_for, scripts))  # task id -> its key (the customer's opening), in task order
    for task_id, turns in (replace or {}).items():
        scripts[keys[task_id]] = turns
    return ForceScript(tok, scripts, base), oracle


def test_user_error_episodes_are_masked_not_zeroed():
    _, tok = tiny()
    force, oracle = forced_oracle(tok)
    assert [oracle[t] for t in TASKS] == [1.0, 1.0]  # the surviving episode of each group scores 1.0
    user = FlakyUser()
    rollout = make_rollout_func(env_kwargs={"user": user}, max_new_tokens=96, logits_processor=[force], vectorize=False)
    ds = build_dataset("mock", task_ids=TASKS)
    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = trainer_for(rollout, ds, tmp)
        inputs = [dict(ds[i]) for i in (0, 0, 1, 1)]
        out = trainer._generate_and_score_completions(inputs)
    trajs = rollout.last_trajectories
    reasons = [t.termination_reason for t in trajs]
    assert sorted(reasons) == ["user_error", "user_error", "user_stop", "user_stop"]
    for i, t in enumerate(trajs):
        n = len(t.completion_ids)
        if t.termination_reason == "user_error":
            assert t.num_policy_tokens > 0  # the policy did write tokens before the customer's service failed
            assert inputs[i]["tau2_reward"] is None and inputs[i]["tau2_masked"] == "user_error"
            assert inputs[i]["upstream_reward"] == 0.0
            assert out["tool_mask"][i, :n].sum().item() == 0  # none of its tokens enters the loss
        else:
            assert inputs[i]["tau2_reward"] == 1.0 and inputs[i]["tau2_masked"] is None
            assert out["tool_mask"][i, :n].tolist() == t.env_mask and sum(t.env_mask) > 0
    # zeroed, the groups would read [1, 0] and push the policy away from the failed episode; masked, the
    # only scorable episode of each group is its own baseline: advantage 0 everywhere
    assert torch.equal(out["advantages"], torch.zeros(4))
    metrics = trainer._metrics["train"]
    assert metrics["reward"][-1] == 1.0  # the logged reward leaves the masked episodes out
    assert metrics["tau2/masked_fraction"][-1] == 0.5 and metrics["tau2/masked/user_error"][-1] == 2.0
    assert rollout.masked == {"user_error": 2} and rollout.episodes == 4


def test_a_malformed_call_is_the_policys_failure_not_masked():
    _, tok = tiny()
    broken = ['<tool_call>\n{"name": "create_task", "arguments": {"user_id": </tool_call>']
    force, _ = forced_oracle(tok, replace={"create_task_1": broken})
    rollout = make_rollout_func(max_new_tokens=96, logits_processor=[force], vectorize=False)
    ds = build_dataset("mock", task_ids=TASKS)
    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = trainer_for(rollout, ds, tmp)
        inputs = [dict(ds[i]) for i in (0, 0, 1, 1)]
        out = trainer._generate_and_score_completions(inputs)
    trajs = rollout.last_trajectories
    malformed = [i for i, t in enumerate(trajs) if t.task_id == "create_task_1"]
    assert len(malformed) == 2
    for i in malformed:
        t = trajs[i]
        assert t.termination_reason == "agent_error" and t.turns[0].parse_error
        assert inputs[i]["tau2_reward"] == 0.0 and inputs[i]["tau2_masked"] is None
        assert out["tool_mask"][i, : len(t.completion_ids)].tolist() == t.env_mask and sum(t.env_mask) > 0
    assert trainer._metrics["train"]["reward"][-1] == 0.5  # the zeros count: (0 + 0 + 1 + 1) / 4
    assert trainer._metrics["train"]["tau2/masked_fraction"][-1] == 0.0 and not rollout.masked


class BrokenJudge:
    name = "broken"

    def assess(self, messages, assertions, source=None):
        raise ConnectionError("judge endpoint unavailable")


def test_a_failed_evaluation_is_masked_through_the_reward_function():
    from tau2_gym.players.agents.scripted import OracleAgent
    from tau2_gym.scoring.evaluation import needs_nl_judge

    retail = load_domain("retail")
    task_id = next(t.id for t in retail.tasks(split="train") if needs_nl_judge(retail, t))
    env = gym.make("tau2/retail-v0", judge=BrokenJudge(), disable_env_checker=True)
    obs, info = env.reset(options={"task_id": task_id})
    agent = OracleAgent()
    agent.reset(info["task"], info)
    while True:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        if term or trunc:
            break
    assert info["termination_reason"] == "user_stop" and "judge" in info["evaluation_error"]
    traj = Trajectory(
        task_id=task_id,
        prompt_ids=[1, 2],
        completion_ids=[3, 4, 5],
        env_mask=[1, 1, 0],
        logprobs=[0.0] * 3,
        reward=reward,
        reward_info=info["reward_info"],
        termination_reason=info["termination_reason"],
        info=info,
    )
    out = rollout_output([traj], stop_id=0, splits=["all"])
    assert out["tau2_masked"] == ["evaluation_error"] and out["env_mask"] == [[0, 0, 0]]
    logged = {}
    assert tau2_reward(
        tau2_reward=out["tau2_reward"], tau2_masked=out["tau2_masked"], log_metric=logged.__setitem__
    ) == [None]
    assert logged["tau2/masked_fraction"] == 1.0 and logged["tau2/masked/evaluation_error"] == 1.0


def test_environment_factory_masks_user_errors():
    factory = make_environment_factory("mock", user=FlakyUser())
    row = build_dataset("mock", task_ids=["create_task_1"], environment=True)[0]
    doomed, fine = factory(), factory()
    for env in (doomed, fine):
        env.reset(**row)
        env.create_task(
            user_id="user_1", title="Important Meeting", description="Prepare slides for the quarterly review"
        )
        env.send_message_to_user("Your task has been created.")
    assert doomed.termination_reason == "user_error" and doomed.get_reward() is None
    assert fine.termination_reason == "user_stop" and fine.get_reward() == fine.reward


# ------------------------------------------------------------------------------------------ split guard


def test_dataset_builder_defaults_to_train_and_refuses_test():
    splits = load_domain("airline").splits()
    ds = build_dataset("airline")
    assert set(ds["task_id"]) == set(splits["train"]) and set(ds["split"]) == {"train"}
    for split in ("test", "base", None):
        with pytest.raises(SplitGuardError, match="allow_test_split"):
            build_dataset("airline", split=split)
    test_ds = build_dataset("airline", split="test", allow_test_split=True)
    assert set(test_ds["task_id"]) == set(splits["test"]) and set(test_ds["split"]) == {"test"}
    with pytest.raises(ValueError, match="not in split 'train'"):
        build_dataset("airline", task_ids=[splits["test"][0]])
    mock = build_dataset("mock")  # no train/test split in mock: nothing is held out
    assert len(mock) == len(load_domain("mock").tasks(split=None)) and set(mock["split"]) == {"all"}


def test_rollout_function_refuses_test_tasks_and_records_the_split():
    splits = load_domain("airline").splits()
    rollout = make_rollout_func()
    with pytest.raises(SplitGuardError, match="allow_test_split"):
        rollout([task_prompt("airline", splits["test"][0])], trainer=None)
    assert rollout.check_split("airline", splits["train"][0]) == "train"
    assert make_rollout_func(split="test", allow_test_split=True).check_split("airline", splits["test"][0]) == "test"
    with pytest.raises(SplitGuardError, match="allow_test_split"):
        make_rollout_func(split="test").check_split("airline", splits["test"][0])
    assert rollout.check_split("mock", "create_task_1") == "all"
