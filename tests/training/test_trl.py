"""TRL integration against the installed trl: rollout_func output through GRPOTrainer's own processing, a
2-step GRPO run on CPU, the environment_factory adapter, the dataset builder and the vLLM adapter's contract.

Tiny random model + tokenizer built in code (tests/hfutil.py); no download.
"""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
trl = pytest.importorskip("trl")

import gymnasium as gym  # noqa: E402 - after the importorskip guard
from hfutil import ForceScript, oracle_scripts, set_threads, tiny  # noqa: E402 - after the importorskip guard

import tau2_gym  # noqa: E402,F401 - after the importorskip guard
from tau2_gym import load_domain  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.chat import ChatRenderer  # noqa: E402 - after the importorskip guard
from tau2_gym.training.trl import (  # noqa: E402 - after the importorskip guard
    SEND_MESSAGE_TOOL,
    TRLVLLMGenerator,
    build_dataset,
    make_environment_factory,
    make_rollout_func,
    parse_task_prompt,
    task_prompt,
    tau2_reward,
)

pytestmark = pytest.mark.slow  # TRL training runs on a tiny model

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(autouse=True)
def _threads():
    set_threads()


def fresh_tiny(template="chatml"):
    """A private copy of the cached tiny model (training changes weights)."""
    import copy

    model, tok = tiny(template)
    return copy.deepcopy(model), tok


def grpo_args(tmp_path, **kw):
    from trl import GRPOConfig

    base = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=256,
        max_steps=2,
        learning_rate=5e-3,
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
    base.update(kw)
    return GRPOConfig(**base)


def token_mean_reward(completion_ids, **kwargs):
    """A shaping reward that differs between sampled completions (so GRPO has advantages to learn from)."""
    return [sum(c) / (len(c) * 1000.0) for c in completion_ids]


def test_dataset_prompts_name_their_tasks():
    ds = build_dataset("mock", split="base", repeats=2)
    assert ds.column_names == ["prompt", "task_id", "domain", "split", "reward_integrity"] and len(ds) == 2 * len(
        load_domain("mock").tasks()
    )
    for row in ds:
        assert parse_task_prompt(row["prompt"]) == ("mock", row["task_id"])
    assert parse_task_prompt([{"role": "user", "content": task_prompt("airline", "7")}]) == ("airline", "7")
    with pytest.raises(ValueError, match="does not name a tau2 task"):
        parse_task_prompt("hello")
    env_ds = build_dataset("mock", task_ids=["create_task_1", "update_task_with_message_history"], environment=True)
    first, history = env_ds[0]["prompt"], env_ds[1]["prompt"]
    assert first[0]["role"] == "system" and first[-1] == {**first[-1], "role": "user", "content": ""}
    assert first[1]["content"] == "Hi! How can I help you today?"
    assert any(m.get("tool_calls") for m in history)  # the task's message history is part of the prompt


def test_rollout_func_output_passes_trls_own_processing():
    """GRPOTrainer._generate_and_score_completions on our output: keys, masks, EOS check, rewards, advantages."""
    from trl import GRPOTrainer

    model, tok = fresh_tiny()
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    make_env = lambda: gym.make("tau2/mock-v0", disable_env_checker=True)  # noqa: E731 - a one-line factory
    scripts, base, oracle = oracle_scripts(renderer, make_env, ["create_task_1"])
    force = ForceScript(tok, scripts, base, strict=False)  # create_task_1 plays the oracle; update_task_1 is free
    rollout = make_rollout_func(max_new_tokens=64, logits_processor=[force])
    ds = build_dataset("mock", task_ids=["create_task_1", "update_task_1"])
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[tau2_reward],
            args=grpo_args(tmp),
            train_dataset=ds,
            processing_class=tok,
            rollout_func=rollout,
        )
        inputs = [dict(ds[i]) for i in (0, 0, 1, 1)]  # TRL's sampler repeats each prompt num_generations times
        out = trainer._generate_and_score_completions(inputs)
    trajs = rollout.last_trajectories
    assert [t.task_id for t in trajs] == ["create_task_1", "create_task_1", "update_task_1", "update_task_1"]
    assert [inp["tau2_reward"] for inp in inputs[:2]] == [oracle["create_task_1"]] * 2 == [1.0, 1.0]
    assert all(inp["termination_reason"] for inp in inputs) and inputs[0]["reward_info"]["reward"] == 1.0
    for i, t in enumerate(trajs):
        n = len(t.completion_ids)
        assert out["completion_ids"][i, :n].tolist() == t.completion_ids
        assert out["tool_mask"][i, :n].tolist() == t.env_mask  # TRL's name for our env_mask
        assert out["completion_mask"][i, :n].tolist() == [1] * n
        assert out["prompt_ids"][i][out["prompt_mask"][i].bool()].tolist() == t.prompt_ids
        assert torch.allclose(out["sampling_per_token_logps"][i, :n], torch.tensor(t.logprobs))
    rewards = torch.tensor([t.reward for t in trajs])
    assert out["advantages"].shape == (4,) and torch.equal(out["advantages"], torch.zeros(4)) == bool(
        (rewards.view(2, 2).std(dim=1) == 0).all()
    )


def test_grpo_two_steps_on_mock_tasks_change_the_weights(tmp_path):
    from trl import GRPOTrainer

    model, tok = fresh_tiny()
    rollout = make_rollout_func(max_new_tokens=48)
    ds = build_dataset("mock", task_ids=["create_task_1", "update_task_1", "impossible_task_1"])
    seen = []

    def spy_reward(prompts, completions, tau2_reward, reward_info, task_id, **kwargs):
        seen.append((list(task_id), list(tau2_reward), list(reward_info)))
        return [0.0] * len(prompts)

    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[tau2_reward, token_mean_reward, spy_reward],
        args=grpo_args(tmp_path),
        train_dataset=ds,
        processing_class=tok,
        rollout_func=rollout,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    changed = [k for k, v in trainer.model.named_parameters() if not torch.equal(before[k], v.detach())]
    assert changed, "no parameter changed in 2 GRPO steps"
    assert len(seen) == 2 and all(len(ids) == 4 for ids, _, _ in seen)
    for _ids, rewards, _infos in seen:
        assert all(r in (0.0, 1.0) for r in rewards)
    logged = [h for h in trainer.state.log_history if "rewards/tau2_reward/mean" in h]
    assert len(logged) == 2


def test_environment_factory_adapter_runs_tau2_tools_and_scores_like_the_oracle():
    from transformers.utils import get_json_schema

    from tau2_gym.players.agents.scripted import OracleAgent

    factory = make_environment_factory("mock")
    env = factory()
    probe = gym.make("tau2/mock-v0", disable_env_checker=True)
    tools = probe.unwrapped.tools
    # the schemas TRL derives from the methods keep names, parameters, required lists and descriptions
    for schema in tools:
        fn = schema["function"]
        derived = get_json_schema(getattr(env, fn["name"]))["function"]
        assert derived["name"] == fn["name"] and derived["description"] == " ".join(fn["description"].split())
        assert list(derived["parameters"]["properties"]) == list(fn["parameters"]["properties"])
        assert sorted(derived["parameters"].get("required", [])) == sorted(fn["parameters"].get("required", []))
        for p, ps in fn["parameters"]["properties"].items():
            assert derived["parameters"]["properties"][p]["description"] == ps["description"]
            if "enum" in ps:
                assert derived["parameters"]["properties"][p]["enum"] == ps["enum"]
    assert get_json_schema(env.send_message_to_user)["function"]["parameters"]["required"] == ["message"]

    row = build_dataset("mock", task_ids=["create_task_1"], environment=True)[0]
    opening = env.reset(**row)
    obs, info = probe.reset(options={"task_id": "create_task_1"})
    assert opening == obs[-1]["content"]
    agent = OracleAgent()
    agent.reset(info["task"], info)
    for action in agent._plan:
        if action.get("tool_calls"):
            fn = action["tool_calls"][0]["function"]
            result = getattr(env, fn["name"])(**json.loads(fn["arguments"]))
            assert result.startswith("{") and not env.ended
        else:
            reply = getattr(env, SEND_MESSAGE_TOOL)(action["content"])
    assert env.ended and env.termination_reason == "user_stop" and "###STOP###" in reply
    assert env.get_reward() == 1.0
    assert env.create_task(user_id="user_1", title="x").startswith("Error: the conversation has ended")
    # a wrong call is answered by the env as an error message, never raised
    env.reset(**row)
    assert env.update_task_status(task_id="nope", status="completed").startswith("Error")
    assert env.get_reward() == 0.0


def test_environment_factory_trains_with_trls_tool_loop(tmp_path):
    """TRL's own tool loop drives the adapter: the model (made to write the oracle's calls in Qwen2.5's format)
    calls create_task, then send_message_to_user; the customer stops; the env's reward reaches the trainer."""
    import functools

    from hfutil import count_gen_prompts
    from trl import GRPOTrainer

    model, tok = fresh_tiny("qwen2_5")
    ds = build_dataset("mock", task_ids=["create_task_1"], environment=True)
    factory = make_environment_factory("mock")
    env = factory()
    opening = env.reset(**ds[0])
    prompt = ds[0]["prompt"][:-1] + [{"role": "user", "content": opening}]
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    call = '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>'
    script = [
        call % ("create_task", json.dumps({"user_id": "user_1", "title": "Important Meeting"})),
        call % (SEND_MESSAGE_TOOL, json.dumps({"message": "Your task is created."})),
        "Goodbye.",
    ]
    base = {opening: count_gen_prompts(tok, renderer.render(prompt, add_generation_prompt=True))}
    force = ForceScript(tok, {opening: script}, base)
    model.generate = functools.partial(model.generate, logits_processor=[force])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[token_mean_reward],
        args=grpo_args(tmp_path, max_steps=1, per_device_train_batch_size=2),
        train_dataset=ds,
        processing_class=tok,
        environment_factory=factory,
    )
    trainer.train()
    assert trainer.state.global_step == 1
    names = {m.__name__ for m in trainer.tools}
    assert {"create_task", "get_users", "update_task_status", SEND_MESSAGE_TOOL} <= names
    logged = next(h for h in trainer.state.log_history if "rewards/Tau2MockToolEnv/mean" in h)
    assert logged["rewards/Tau2MockToolEnv/mean"] == 1.0 and logged["tools/call_frequency"] == 2.0
    assert logged["tools/failure_frequency"] == 0.0
    for e in trainer.environments:
        assert e.termination_reason == "user_stop" and e.reward == 1.0
        tail = e.messages[-4:]  # what tau2 recorded: the call, its result, the text to the customer, the stop
        assert [m["role"] for m in tail] == ["assistant", "tool", "assistant", "user"]
        assert tail[0]["tool_calls"][0]["function"]["name"] == "create_task"
        assert tail[2]["content"] == "Your task is created." and "###STOP###" in tail[3]["content"]


class FakeVLLMBackend:
    """TRL's VLLMGeneration.generate contract (server/colocate, one process), backed by a fixed reply."""

    def __init__(self, reply):
        self.reply = reply
        self.max_completion_length = 16
        self.calls = []

    def generate(self, prompts, images, num_generations):
        assert images is None and num_generations == 1
        self.calls.append((list(prompts), self.max_completion_length))
        ids = self.reply[: self.max_completion_length]
        return prompts, [list(ids) for _ in prompts], [[[-0.5]] * len(ids) for _ in prompts], None


class FakeAccelerator:
    num_processes = 1
    device = "cpu"


def test_vllm_generator_uses_trls_backend_per_turn():
    model, tok = tiny()
    reply = tok.encode("Hello there", add_special_tokens=False) + [tok.eos_token_id]
    backend = FakeVLLMBackend(reply)
    trainer = type(
        "T", (), {"vllm_generation": backend, "accelerator": FakeAccelerator(), "eos_token_ids": [tok.eos_token_id]}
    )()
    gen = TRLVLLMGenerator(trainer)
    out = gen.generate([[1, 2, 3], [4, 5]], [64, 3])
    assert backend.calls == [([[1, 2, 3], [4, 5]], 64)] and backend.max_completion_length == 16  # restored
    assert out[0].token_ids == reply and out[0].finish_reason == "stop" and out[0].logprobs == [-0.5] * len(reply)
    assert out[1].token_ids == reply[:3] and out[1].finish_reason == "length"
    assert gen.keep_going(True) and not gen.keep_going(False)


def test_rollout_func_with_its_vector_env_in_worker_processes_gives_the_same_rows():
    """``processes=2``: the same rows (tokens, masks, rewards) as the in-process vector env; ``close`` ends the
    workers and a later call builds them again."""
    from types import SimpleNamespace

    from tau2_gym.training.hf.tiny import tiny_tokenizer

    tok = tiny_tokenizer()
    reply = tok.encode("Hello there", add_special_tokens=False) + [tok.eos_token_id]

    def trainer():
        return SimpleNamespace(
            use_vllm=True,
            vllm_generation=FakeVLLMBackend(reply),
            accelerator=FakeAccelerator(),
            eos_token_ids=[tok.eos_token_id],
            processing_class=tok,
            max_completion_length=512,
            args=SimpleNamespace(seed=0, max_completion_length=512),
            state=SimpleNamespace(global_step=0),
            chat_template_kwargs=None,
        )

    prompts = [task_prompt("mock", t) for t in ("create_task_1", "create_task_1", "update_task_1")]
    rows = {}
    for processes in (1, 2):
        rollout = make_rollout_func(max_new_tokens=16, max_turns=3, processes=processes)
        rows[processes] = rollout(prompts, trainer())
        vec = next(iter(rollout._vectors.values()))
        workers = [] if vec.unwrapped._shards is None else vec.unwrapped._shards.procs
        assert len(workers) == (0 if processes == 1 else 2) and all(p.is_alive() for p in workers)
        if processes == 2:
            rollout.close()
            assert not any(p.is_alive() for p in workers) and not rollout._vectors
            assert rollout(prompts, trainer()) == rows[2]  # built again
            rollout.close()
    assert rows[1]["completion_ids"] and rows[1] == rows[2]
    with pytest.raises(ValueError, match="processes=0"):
        make_rollout_func(processes=0)
