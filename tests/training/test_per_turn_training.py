"""Training thinking models: a template that drops earlier turns' reasoning (our Qwen3-like THINKING_TEMPLATE) is
found by rendering, and then each LLM call is one sample whose prompt is what serving renders for that turn; GRPO
trains on such samples (every sample of an episode with the episode's reward and advantage), SFT export writes them.

Tiny random model + tokenizer built in code (tests/hfutil.py); scripted outputs through a logits processor.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import gymnasium as gym  # noqa: E402 - after the importorskip guard
from hfutil import ForceScript, oracle_scripts, set_threads, tiny  # noqa: E402 - after the importorskip guard

import tau2_gym  # noqa: E402,F401 - after the importorskip guard
from tau2_gym.training.hf.chat import ChatRenderer, resolve_sample_mode  # noqa: E402
from tau2_gym.training.hf.generation import HFGenerator  # noqa: E402
from tau2_gym.training.hf.policy import PolicyRunner, Sample, Trajectory  # noqa: E402
from tau2_gym.training.hf.tiny import THINKING_TEMPLATE, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.slow  # GRPO and SFT runs on a tiny model

TASKS = ["create_task_1", "update_task_1"]
THOUGHT = "I should check the policy first."


@pytest.fixture(autouse=True)
def _threads():
    set_threads()


class Spy:
    """Wraps a generator and records each call's contexts and generations."""

    def __init__(self, inner):
        self.inner, self.stop_ids, self.calls = inner, inner.stop_ids, []

    def keep_going(self, active):
        return self.inner.keep_going(active)

    def session(self):
        return self.inner.session()

    def generate(self, contexts, limits):
        out = self.inner.generate(contexts, limits)
        self.calls.append([(list(c), g) for c, g in zip(contexts, out)])
        return out


def serving_render(tok, body: dict) -> list[int]:
    """What a server renders for a chat request: the template over the messages (tool-call arguments decoded from
    their JSON strings, as vLLM hands them to the template) and the tools, with the generation prompt."""
    messages = []
    for m in body["messages"]:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
        messages.append(m)
    return list(
        tok.apply_chat_template(
            messages, tools=body.get("tools"), add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )


# ---------------------------------------------------------------------------------------- the template


def test_the_thinking_template_renders_conversations_as_qwen3s_does():
    trl = pytest.importorskip("trl")
    tok = tiny_tokenizer(THINKING_TEMPLATE)
    call = {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    conversation = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": None, "reasoning_content": "r2", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "res"},
        {"role": "tool", "tool_call_id": "d", "content": "res2"},
        {"role": "assistant", "content": "<think>r3</think>\n\na3"},
    ]
    for k in range(2, len(conversation) + 1):
        for gen in (True, False):
            ours = tok.apply_chat_template(conversation[:k], tokenize=False, add_generation_prompt=gen)
            qwen3 = tok.apply_chat_template(
                conversation[:k],
                tokenize=False,
                add_generation_prompt=gen,
                chat_template=trl.chat_template_utils.qwen3_chat_template,
            )
            assert ours == qwen3, (k, gen)
    text = tok.apply_chat_template(conversation[:4], tokenize=False)
    assert "r1" not in text and "<think>\nr1" in tok.apply_chat_template(conversation[:3], tokenize=False)


# A template that renders every assistant turn's reasoning, wherever it is: prefix-preserving once the env shows
# the agent its past reasoning
KEEP_ALL = THINKING_TEMPLATE.replace("loop.index0 > ns.last_user and (loop.last or thought)", "loop.last or thought")


@pytest.mark.parametrize(
    "template,drop,keep",
    [(None, "sequence", "sequence"), (THINKING_TEMPLATE, "per_turn", "per_turn"), (KEEP_ALL, "per_turn", "sequence")],
    ids=["chatml", "thinking", "keep_all"],
)
def test_the_sample_mode_is_found_by_rendering_a_turn_with_reasoning(template, drop, keep):
    assert KEEP_ALL != THINKING_TEMPLATE
    tok = tiny_tokenizer(template)
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    assert resolve_sample_mode("auto", renderer, None, "drop") == drop
    assert resolve_sample_mode("auto", renderer, None, "keep") == keep
    assert resolve_sample_mode("sequence", renderer, None, "drop") == "sequence"  # an explicit choice wins
    with pytest.raises(ValueError, match="sample_mode='turns'; choose one of auto, sequence, per_turn"):
        resolve_sample_mode("turns", renderer)


# ------------------------------------------------------------------------------------- per-turn samples


def scripted_thinker(history: str, **runner_kw):
    model, tok = tiny("thinking")
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})

    def make_env():
        return gym.make("tau2/mock-v0", disable_env_checker=True, reasoning_history=history)

    scripts, base, rewards = oracle_scripts(renderer, make_env, TASKS, think=THOUGHT)
    gen = Spy(HFGenerator(model, tok, do_sample=False, logits_processor=[ForceScript(tok, scripts, base)]))
    runner_kw.setdefault("max_new_tokens", 200)
    return PolicyRunner(gen, tok, **runner_kw), gen, scripts, rewards, make_env, tok


@pytest.mark.parametrize("history", ["drop", "keep"])
def test_each_per_turn_sample_is_the_turns_serving_prompt_and_its_own_tokens(history, tmp_path):
    """The same scripted thinking oracle played twice: in-process by the PolicyRunner (per-turn samples), and
    through ``rollout`` by the OpenAI agent against a stub server that answers with the same raw text (a vLLM
    without tool or reasoning parser). Every sample's prompt is token for token what that server's template
    renders from the request it received for that turn; its completion is exactly what was generated."""
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
    from tau2_gym.runner.collect import collect

    runner, gen, scripts, rewards, make_env, tok = scripted_thinker(history)
    trajs = runner.run([make_env() for _ in TASKS], [{"task_id": t} for t in TASKS])
    generated = {}
    for call in gen.calls:
        for ctx, g in call:
            generated.setdefault(tuple(ctx), []).append(g)

    def reply(body, n):
        key = next(k for k in scripts if any(m["role"] == "user" and m.get("content") == k for m in body["messages"]))
        return scripts[key][
            sum(1 for m in body["messages"] if m["role"] == "assistant") - 1
        ]  # the greeting is not ours

    with OpenAIStub(reply) as server:
        policy = OpenAIAgentPolicy(OpenAIAgentConfig(model="m", base_url=server.base_url, api_key_env=None))
        report = collect(TASKS, policy, None, domain="mock", parser="hermes", reasoning_history=history, progress=False)
        requests = list(server.requests)
    assert [r["reward_info"]["reward"] for r in report.simulations] == [1.0, 1.0]
    think_in_prompts = 0
    for traj in trajs:
        assert traj.sample_mode == "per_turn" and traj.reward == rewards[traj.task_id] == 1.0, traj.summary()
        assert traj.completion_ids == [] and len(traj.samples) == len(traj.turns) > 1
        assert all(t.reasoning == THOUGHT for t in traj.turns)
        assert all("<think>" not in (m.get("content") or "") for m in traj.messages)
        served = [r for r in requests if any(m.get("content") == traj.messages[2]["content"] for m in r["messages"])]
        assert [serving_render(tok, r) for r in served] == [s.prompt_ids for s in traj.samples]
        for s in traj.samples:
            (g,) = generated[tuple(s.prompt_ids)]  # the context the policy was given ...
            assert s.completion_ids == g.token_ids and s.logprobs == g.logprobs and s.env_mask == [1] * len(g.token_ids)
            assert s.completion_ids[-1] == tok.eos_token_id  # ... and what it generated, to its stop token
            assert tok.decode(s.completion_ids).startswith(f"<think>\n{THOUGHT}\n</think>")
            think_in_prompts += THOUGHT in tok.decode(s.prompt_ids)
        seen = [m.get("reasoning_content") for m in traj.messages if m["role"] == "assistant"][1:]
        assert seen == ([THOUGHT] * len(seen) if history == "keep" else [None] * len(seen))
    # Qwen3's rule: a thought is shown back only inside the current tool chain, and only when the env keeps it
    assert (think_in_prompts > 0) == (history == "keep")


def test_sequence_mode_is_unchanged_when_asked_for_on_a_template_that_drops_reasoning():
    runner, _, _, rewards, make_env, tok = scripted_thinker("drop", sample_mode="sequence")
    (traj,) = runner.run([make_env()], [{"task_id": TASKS[0]}])
    assert traj.sample_mode == "sequence" and traj.samples == [] and traj.reward == rewards[TASKS[0]] == 1.0
    (sample,) = traj.training_samples()
    assert sample.prompt_ids == traj.prompt_ids and sample.completion_ids == traj.completion_ids
    assert sample.env_mask == traj.env_mask and 0 in sample.env_mask


# --------------------------------------------------------------------------------------------- GRPO


def fake_trajectory(task_id, reward, turns, mode="per_turn"):
    samples = [Sample([1, 2, 3 + i], [10 + i, 99], [1, 1], [-0.5, -0.25]) for i in range(turns)]
    return Trajectory(task_id=task_id, prompt_ids=[1, 2, 3], reward=reward, sample_mode=mode, samples=samples)


def test_rollout_output_fills_every_episode_to_its_slots_with_the_episodes_reward():
    from tau2_gym.training.trl import rollout_output

    out = rollout_output([fake_trajectory("a", 1.0, 2), fake_trajectory("b", 0.0, 3)], stop_id=99, slots=3)
    assert out["tau2_episode"] == [0, 0, 0, 1, 1, 1] and out["tau2_turn"] == [0, 1, None, 0, 1, 2]
    assert out["tau2_reward"] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]  # group mean over rows = mean over episodes
    assert out["prompt_ids"][:2] == [[1, 2, 3], [1, 2, 4]] and out["completion_ids"][1] == [11, 99]
    assert out["env_mask"][2] == [0] and out["completion_ids"][2] == [99]  # padding: one masked stop token
    assert set(out["tau2_sample_mode"]) == {"per_turn"}
    with pytest.raises(ValueError, match="4 samples for 3 slots"):
        rollout_output([fake_trajectory("c", 0.0, 4)], stop_id=99, slots=3)


def grpo_args(tmp_path, **kw):
    from trl import GRPOConfig

    base = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=6,
        num_generations=6,
        max_completion_length=24,
        max_steps=1,
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


def episode_token_reward(completion_ids, tau2_episode, **kwargs):
    """An episode-level shaping reward (from the tokens the episode sampled): the same for every sample of an
    episode, different between sampled episodes, so GRPO has advantages to learn from."""
    totals: dict = {}
    for ids, episode in zip(completion_ids, tau2_episode):
        totals[episode] = totals.get(episode, 0) + sum(ids)
    return [totals[e] / 1e5 for e in tau2_episode]


def test_grpo_trains_on_per_turn_samples_of_the_thinking_template(tmp_path):
    """Groups of 2 episodes x max_turns=3 slots (num_generations=6): TRL's own processing of the rows (prompts,
    completions, masks, one advantage per episode), then a training step with a finite loss and a gradient."""
    pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    import copy
    import os

    from tau2_gym.training.trl import build_dataset, make_rollout_func, tau2_reward

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = tiny("thinking")
    model = copy.deepcopy(model)
    rollout = make_rollout_func(max_new_tokens=24, max_turns=3)
    ds = build_dataset("mock", task_ids=["create_task_1"])
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[tau2_reward, episode_token_reward],
        args=grpo_args(tmp_path),
        train_dataset=ds,
        processing_class=tok,
        rollout_func=rollout,
    )
    inputs = [dict(ds[0]) for _ in range(6)]
    out = trainer._generate_and_score_completions(inputs)
    assert (rollout.resolved_sample_mode, rollout.last_slots) == ("per_turn", 3)
    trajs = rollout.last_trajectories
    assert len(trajs) == 2 and all(t.sample_mode == "per_turn" for t in trajs)
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    for e, traj in enumerate(trajs):
        rows = range(3 * e, 3 * e + 3)
        assert len({float(out["advantages"][i]) for i in rows}) == 1  # every sample of an episode: one advantage
        turns = [i for i, m in enumerate(traj.messages) if m["role"] == "assistant"][1:]  # after the greeting
        for i, sample in zip(rows, traj.samples):
            assert out["prompt_ids"][i][out["prompt_mask"][i].bool()].tolist() == sample.prompt_ids
            n = len(sample.completion_ids)
            assert out["completion_ids"][i, :n].tolist() == sample.completion_ids
            assert out["tool_mask"][i, :n].tolist() == [1] * n
        for turn_at, sample in zip(turns, traj.samples):  # the prompt: that turn's observation, rendered
            assert sample.prompt_ids == renderer.prompt_ids(traj.messages[:turn_at], traj.tools)
        for i in rows[len(traj.samples) :]:
            assert (out["completion_mask"][i] * out["tool_mask"][i]).sum() == 0  # padding rows never enter the loss
    assert float(out["advantages"][0]) != float(out["advantages"][3])

    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert logged and math.isfinite(logged[-1]["loss"]) and logged[-1]["grad_norm"] > 0
    assert any(not torch.equal(before[k], v.detach()) for k, v in trainer.model.named_parameters())


def test_per_turn_rollout_needs_slots_and_says_how_to_set_them(tmp_path):
    pytest.importorskip("datasets")
    from tau2_gym.training.trl import make_rollout_func

    model, tok = tiny("thinking")

    class Trainer:
        num_generations = 4

    with pytest.raises(ValueError, match="per-turn samples .* need max_turns"):
        make_rollout_func().slots("per_turn", ["p"] * 4, Trainer())
    with pytest.raises(ValueError, match="num_generations=4 is not a multiple of max_turns=3"):
        make_rollout_func(max_turns=3).slots("per_turn", ["p"] * 6, Trainer())
    with pytest.raises(ValueError, match="do not come in runs of max_turns=2"):
        make_rollout_func(max_turns=2).slots("per_turn", ["p", "q", "q", "q"], Trainer())
    assert make_rollout_func(max_turns=2).slots("per_turn", ["p", "p", "q", "q"], Trainer()) == 2
    assert make_rollout_func(max_turns=2).slots("sequence", ["p", "q"], Trainer()) is None


# ------------------------------------------------------------------------------------------- SFT export


def test_sft_export_of_a_thinking_run_has_one_row_per_turn_equal_to_the_rollouts_samples(tmp_path):
    """The results of the per-turn rollout, exported: the assistant turns keep their reasoning, and the tokens
    format makes one row per policy turn -- exactly the rollout's sample (prompt, then the turn, masked) -- each
    with the episode's reward; SFT and GRPO train on the same token contexts."""
    from tau2_gym.core.records import as_dict
    from tau2_gym.training.export import TOKEN_METADATA_COLUMNS, export_rows, tokenize_rows

    runner, _, _, rewards, make_env, tok = scripted_thinker("drop")
    envs = [make_env() for _ in TASKS]
    trajs = runner.run(envs, [{"task_id": t} for t in TASKS])
    path = tmp_path / "thinking.json"
    envs[0].unwrapped.save_results(path, [as_dict(t.info["simulation_run"]) for t in trajs])
    rows = export_rows([path], split=None)
    assert {r["reasoning_history"] for r in rows} == {"drop"}
    for row in rows:
        mine = [m for m in row["messages"] if m["role"] == "assistant"][1:]
        assert mine and all(m["reasoning_content"] == THOUGHT and "<think>" not in (m["content"] or "") for m in mine)
    tokens = tokenize_rows(rows, tok)
    assert set(TOKEN_METADATA_COLUMNS) <= set(tokens[0])
    for traj in trajs:
        mine = [r for r in tokens if r["task_id"] == traj.task_id]
        assert [r["turn"] for r in mine] == list(range(len(traj.samples))) and len(mine) > 1
        assert {r["sample_mode"] for r in mine} == {"per_turn"} and {r["reward"] for r in mine} == {traj.reward}
        for row, sample in zip(mine, traj.samples):
            assert row["input_ids"] == sample.prompt_ids + sample.completion_ids
            assert row["assistant_masks"] == [0] * len(sample.prompt_ids) + [1] * len(sample.completion_ids)
    sequence = tokenize_rows(rows, tok, sample_mode="sequence")
    assert len(sequence) == len(rows) and {r["turn"] for r in sequence} == {None}
