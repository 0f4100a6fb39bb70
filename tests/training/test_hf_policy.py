"""PolicyRunner: token-exact multi-turn trajectories with a tiny random model and tokenizer built in code.

Scripted outputs come from a logits processor (tests/hfutil.py ForceScript) that makes the random model write
the scripted oracle's turns exactly as the chat template renders them; the expected rewards come from the
same oracle run on the plain env in the same test.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import gymnasium as gym  # noqa: E402 - after the importorskip guard
from hfutil import ForceScript, oracle_scripts, set_threads, tiny  # noqa: E402 - after the importorskip guard

import tau2_gym  # noqa: E402,F401 - after the importorskip guard
from tau2_gym.training.hf.chat import ChatRenderer  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.generation import HFGenerator  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.policy import PolicyRunner  # noqa: E402 - after the importorskip guard

pytestmark = pytest.mark.slow  # token-exact generation with a tiny model

TASKS = ["create_task_1", "update_task_1", "update_task_with_message_history", "impossible_task_1"]


def make_env():
    return gym.make("tau2/mock-v0", disable_env_checker=True)


class Spy:
    """Wraps a generator and records what it returned, per call."""

    def __init__(self, inner):
        self.inner = inner
        self.stop_ids = inner.stop_ids
        self.calls = []

    def keep_going(self, active):
        return self.inner.keep_going(active)

    def session(self):
        return self.inner.session()

    def generate(self, contexts, limits):
        out = self.inner.generate(contexts, limits)
        self.calls.append([(list(c), g) for c, g in zip(contexts, out)])
        return out


def cross_checked(renderer):
    """Make every turn_suffix call also run the token-level reference method and compare (counted)."""
    fast = renderer.turn_suffix
    renderer.checked = 0

    def both(messages, k, tools=None):
        got = fast(messages, k, tools)
        assert got == renderer.turn_suffix_ids(messages, k, tools)
        renderer.checked += 1
        return got

    renderer.turn_suffix = both
    return renderer


def scripted_runner(template="chatml", think=None, tasks=TASKS, **runner_kw):
    model, tok = tiny(template)
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    scripts, base, rewards = oracle_scripts(renderer, make_env, tasks, think=think)
    force = ForceScript(tok, scripts, base)
    gen = Spy(HFGenerator(model, tok, do_sample=False, logits_processor=[force]))
    runner_kw.setdefault("max_new_tokens", 200)
    runner = PolicyRunner(gen, tok, **runner_kw)
    assert runner.renderer._stop_texts == ("<|im_end|>",)  # the text fast path is in use ...
    cross_checked(runner.renderer)  # ... and agrees with the token-level diff on every turn
    return runner, gen, rewards, tok


def segments(traj):
    """[(mask, [ids...]), ...]: maximal runs of equal env_mask."""
    out = []
    for t, m in zip(traj.completion_ids, traj.env_mask):
        if out and out[-1][0] == m:
            out[-1][1].append(t)
        else:
            out.append((m, [t]))
    return out


@pytest.fixture(autouse=True)
def _threads():
    set_threads()


@pytest.mark.parametrize("template", ["chatml", "qwen2_5"])
def test_scripted_oracle_trajectory_is_the_template_rendering_and_scores_like_the_oracle(template):
    if template != "chatml":
        pytest.importorskip("trl")
    runner, gen, rewards, tok = scripted_runner(template)
    trajs = runner.run([make_env() for _ in TASKS], [{"task_id": t} for t in TASKS])
    assert runner.renderer.checked == sum(len(t.turns) - 1 for t in trajs) > 0
    for traj in trajs:
        assert traj.reward == rewards[traj.task_id] == 1.0, traj.summary()
        assert traj.termination_reason == "user_stop"
        assert len(traj.completion_ids) == len(traj.env_mask) == len(traj.logprobs)
        assert traj.completion_ids[-1] == tok.eos_token_id and traj.env_mask[-1] == 1  # ends with the policy's stop
        assert all(t.exact_suffix for t in traj.turns)
        # prefix-preserving template + outputs written exactly as the template renders them: the whole
        # sequence is the template's rendering of the final conversation up to the policy's last turn.
        last = max(i for i, m in enumerate(traj.messages) if m["role"] == "assistant")
        expected = runner.renderer.render(traj.messages[: last + 1], traj.tools, add_generation_prompt=False)
        expected = expected[: max(i for i, t in enumerate(expected) if t == tok.eos_token_id) + 1]
        assert traj.prompt_ids + traj.completion_ids == expected


def test_policy_tokens_are_exactly_the_generated_tokens_and_env_tokens_the_template_diff():
    runner, gen, _, tok = scripted_runner()
    trajs = runner.run([make_env() for _ in TASKS], [{"task_id": t} for t in TASKS])
    # what the generator returned for each episode, in order (contexts identify the episode)
    generated = {i: [] for i in range(len(trajs))}
    for call in gen.calls:
        for ctx, g in call:
            i = next(
                i
                for i, tr in enumerate(trajs)
                if ctx[: len(tr.prompt_ids)] == tr.prompt_ids and (tr.prompt_ids + tr.completion_ids)[: len(ctx)] == ctx
            )
            generated[i].append(g)
    for i, traj in enumerate(trajs):
        segs = segments(traj)
        policy = [ids for m, ids in segs if m == 1]
        env = [ids for m, ids in segs if m == 0]
        assert policy == [g.token_ids for g in generated[i]]
        assert tok.decode(traj.policy_token_ids()) == tok.decode([t for g in generated[i] for t in g.token_ids])
        assert [lp for lp, m in zip(traj.logprobs, traj.env_mask) if m] == [x for g in generated[i] for x in g.logprobs]
        assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.env_mask) if not m)
        # each env segment: the rendering of the history after it minus the rendering before it
        assert len(env) == len(traj.turns) - 1
        for seg, turn in zip(env, traj.turns):
            ctx = traj.prompt_ids + traj.completion_ids[: turn.end]
            after = traj.prompt_ids + traj.completion_ids[: turn.end + turn.env_tokens]
            assert after[len(ctx) :] == seg
            text = tok.decode(seg)
            assert text.startswith("\n<|im_start|>") and text.endswith("<|im_start|>assistant\n")


def test_logprobs_are_the_models_tempered_log_probabilities():
    model, tok = tiny()
    gen = HFGenerator(model, tok, do_sample=True, temperature=0.7, top_k=None)
    runner = PolicyRunner(gen, tok, max_new_tokens=24, max_turns=2)
    torch.manual_seed(0)
    (traj,) = runner.run([make_env()], [{"task_id": "update_task_1"}])
    ids = torch.tensor([traj.prompt_ids + traj.completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(traj.prompt_ids) - 1 : -1].float() / 0.7
    logp = torch.log_softmax(logits, -1).gather(1, torch.tensor(traj.completion_ids)[:, None])[:, 0]
    mask = torch.tensor(traj.env_mask, dtype=torch.bool)
    assert mask.sum() > 0
    assert torch.allclose(logp[mask], torch.tensor(traj.logprobs)[mask], atol=1e-4)


def test_non_prefix_preserving_template_keeps_the_context_append_only():
    """Qwen3's template drops <think> blocks of past turns; asked for one sequence, the context keeps the policy's
    own tokens (``"auto"`` would train one sample per turn: tests/training/test_per_turn_training.py)."""
    pytest.importorskip("trl")
    runner, gen, rewards, tok = scripted_runner("qwen3", think="Let me plan.", sample_mode="sequence")
    assert not runner.renderer.is_prefix_preserving()
    trajs = runner.run([make_env() for _ in TASKS], [{"task_id": t} for t in TASKS])
    assert runner.renderer.checked > 0
    for traj in trajs:
        assert traj.reward == rewards[traj.task_id] == 1.0, traj.summary()
        assert traj.inexact_turns > 0
        assert all(t.reasoning == "Let me plan." for t in traj.turns)
        assert all("<think>" not in (m.get("content") or "") for m in traj.messages)  # never shown to the customer
        for turn in traj.turns[:-1]:
            seg = traj.completion_ids[turn.end : turn.end + turn.env_tokens]
            assert set(traj.env_mask[turn.end : turn.end + turn.env_tokens]) == {0}
            # the env tokens are the tail of the template's rendering of the conversation after that turn
            render = runner.renderer.render
            n_msgs = next(
                k
                for k in range(len(traj.messages), 0, -1)
                if render(traj.messages[:k], traj.tools, add_generation_prompt=True)[-len(seg) :] == seg
            )
            rendered = runner.renderer.render_text(traj.messages[:n_msgs], traj.tools, add_generation_prompt=True)
            text = tok.decode(seg)
            assert rendered.endswith(text) and rendered[: -len(text)].endswith("<|im_end|>")
            assert "<think>" in tok.decode(traj.completion_ids[turn.start : turn.end])  # kept in the context


def chatty_runner(script, **runner_kw):
    """A runner whose model writes ``script`` to a scripted customer who never stops on its own."""
    from hfutil import count_gen_prompts

    from tau2_gym.players.users.scripted import ScriptedUser

    model, tok = tiny()
    opening = "Hello, I have a question about my tasks."
    user = ScriptedUser([opening] + ["Please go on."] * 20)
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    env = gym.make("tau2/mock-v0", user=user, disable_env_checker=True)
    obs, info = env.reset(options={"task_id": "update_task_1"})
    base = {opening: count_gen_prompts(tok, renderer.prompt_ids(obs, info["tools"]))}
    force = ForceScript(tok, {opening: script}, base)
    runner = PolicyRunner(HFGenerator(model, tok, do_sample=False, logits_processor=[force]), tok, **runner_kw)
    return runner, env, tok


def test_turn_cut_by_the_token_limit_is_closed_with_the_end_of_turn_token():
    runner, env, tok = chatty_runner(
        ["Let me look into that for you right away.", "Done."], max_new_tokens=6, max_turns=2
    )
    (traj,) = runner.run([env], [{"task_id": "update_task_1"}])
    first = traj.turns[0]
    assert first.finish_reason == "length" and first.end - first.start == 6
    assert traj.completion_ids[first.end] == tok.eos_token_id and traj.env_mask[first.end] == 0
    assert tok.decode(traj.completion_ids[first.end + 1 : first.end + first.env_tokens]) == (
        "\n<|im_start|>user\nPlease go on.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert traj.termination_reason == "max_turns" and traj.reward == 0.0 and len(traj.turns) == 2


def test_completion_budget_ends_the_episode_as_max_tokens():
    runner, env, tok = chatty_runner(["Let me check."] * 50, max_completion_tokens=100)
    (traj,) = runner.run([env], [{"task_id": "update_task_1"}])
    assert traj.termination_reason == "max_tokens" and traj.truncated and traj.reward == 0.0
    assert len(traj.completion_ids) == 100 and len(traj.turns) > 2


def test_each_turn_continues_the_episodes_one_context_and_a_generator_that_changes_it_is_refused():
    """Sequence mode hands the generator the episode's own append-only list (the same object every turn, grown by
    the turn and the env's tokens); a generator that appends to it gets a clear error instead of a corrupt
    trajectory."""
    runner, gen, _, _ = scripted_runner(tasks=TASKS[:1])
    seen = []
    inner = gen.generate

    def watching(contexts, limits):
        seen.append((contexts[0], len(contexts[0])))
        return inner(contexts, limits)

    gen.generate = watching
    (traj,) = runner.run([make_env()], [{"task_id": TASKS[0]}])
    assert len(seen) == len(traj.turns) > 1
    assert all(ctx is seen[0][0] for ctx, _ in seen)  # one list per episode, never a copy per turn
    lengths = [n for _, n in seen]
    assert lengths == [len(traj.prompt_ids) + t.start for t in traj.turns]  # each turn starts where it was handed
    assert seen[0][0] is not traj.prompt_ids and seen[0][0] is not traj.completion_ids  # cut out at the end

    def appending(contexts, limits):
        out = inner(contexts, limits)
        for ctx, g in zip(contexts, out):
            ctx.extend(g.token_ids)  # a backend writing into the prompt it was given
        return out

    gen.generate = appending
    with pytest.raises(RuntimeError, match="the generator changed the context of episode 0"):
        runner.run([make_env()], [{"task_id": TASKS[0]}])


def test_malformed_tool_call_markup_ends_the_episode_as_agent_error():
    model, tok = tiny()
    bad = '<tool_call>{"name": "get_users", "arguments": {</tool_call>'
    env = make_env()
    obs, _ = env.reset(options={"task_id": "update_task_1"})
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    from hfutil import count_gen_prompts

    base = {obs[-1]["content"]: count_gen_prompts(tok, renderer.prompt_ids(obs, env.unwrapped.tools))}
    force = ForceScript(tok, {obs[-1]["content"]: [bad]}, base)
    runner = PolicyRunner(HFGenerator(model, tok, do_sample=False, logits_processor=[force]), tok, max_new_tokens=100)
    (traj,) = runner.run([make_env()], [{"task_id": "update_task_1"}])
    assert traj.termination_reason == "agent_error" and traj.reward == 0.0
    assert traj.turns[0].parse_error is not None
    assert len(traj.turns) == 1 and traj.env_mask == [1] * len(traj.completion_ids)


def test_hermes_parser_and_response_template_parser_read_the_same_calls():
    runner_t, _, _, _ = scripted_runner(tasks=["create_task_1"], parser="transformers")
    runner_h, _, _, _ = scripted_runner(tasks=["create_task_1"], parser="hermes")
    (a,) = runner_t.run([make_env()], [{"task_id": "create_task_1"}])
    (b,) = runner_h.run([make_env()], [{"task_id": "create_task_1"}])
    assert a.reward == b.reward == 1.0
    assert a.completion_ids == b.completion_ids and a.messages == b.messages


def test_renderer_prefix_diff_on_a_prefix_preserving_template():
    _, tok = tiny()
    r = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    assert r.is_prefix_preserving()
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "V"},
    ]
    suffix = r.turn_suffix(msgs, 3)
    assert suffix.exact and tok.decode(suffix.ids) == "\n<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n"


def test_runner_rejects_transcript_observations():
    _, tok = tiny()
    runner = PolicyRunner(HFGenerator(tiny()[0], tok), tok)
    with pytest.raises(ValueError, match="obs_format='messages'"):
        runner.run([gym.make("tau2/mock-v0", obs_format="text", disable_env_checker=True)])


def test_vector_env_gives_the_same_trajectories_with_batched_user_turns():
    from tau2_gym.players.users.scripted import OracleUser

    class CountingUser(OracleUser):
        batches = []

        def generate_batch(self, requests):
            self.batches.append(len(requests))
            return super().generate_batch(requests)

    runner, _, rewards, _ = scripted_runner()
    single = runner.run([make_env() for _ in TASKS], [{"task_id": t} for t in TASKS])
    user = CountingUser()
    vec = gym.make_vec("tau2/mock-v0", num_envs=len(TASKS), user=user)
    runner2, _, _, _ = scripted_runner()
    batched = runner2.run(vec, [{"task_id": t} for t in TASKS])
    for a, b in zip(single, batched):
        assert (a.task_id, a.reward, a.termination_reason) == (b.task_id, b.reward, b.termination_reason)
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids and a.env_mask == b.env_mask
    assert user.batches[0] == len(TASKS)  # the opening lines: one batch
    assert max(user.batches) > 1 and sum(user.batches) > len(user.batches)


def test_prefix_space_tokenizer_falls_back_to_full_renderings():
    """A SentencePiece-style tokenizer (prefix space on the first piece of a text) tokenizes a tail alone
    differently: the renderer notices on the first turn and diffs full renderings from then on."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from tau2_gym.training.hf.tiny import CHATML_TOOLS_TEMPLATE, SPECIAL_TOKENS

    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    raw.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    texts = ["Hello there user, how are you today?", "I need help with my task please.\n"] * 5
    raw.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>"] + SPECIAL_TOKENS, show_progress=False)
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = CHATML_TOOLS_TEMPLATE
    r = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    assert r._stop_texts is not None
    msgs = [
        {"role": "system", "content": "Hello"},
        {"role": "user", "content": "I need help"},
        {"role": "assistant", "content": "Hello there"},
        {"role": "user", "content": "how are you"},
    ]
    first = r.turn_suffix(msgs, 3)
    assert first == r.turn_suffix_ids(msgs, 3)
    assert r._stop_texts is None  # the fast path was dropped
    assert r.turn_suffix(msgs, 3) == first


@pytest.mark.parametrize("template", ["chatml", "qwen2_5", "qwen3"])
def test_new_turns_rendered_without_the_history_equal_whole_renderings_on_every_turn(template):
    """The renderer renders each turn's new messages after the policy's last message alone (constant work per turn)
    once that agreed with whole renderings; on every turn of a long conversation with tool calls the tokens equal
    the token-level diff of whole renderings, and a template that renders turns by their history (Qwen3's) keeps
    whole renderings."""
    if template != "chatml":
        pytest.importorskip("trl")
    _, tok = tiny(template)
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    tools = [{"type": "function", "function": {"name": "get_user", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Hi, I need help."}]
    for turn in range(12):
        if turn % 3 == 1:
            call = {"id": f"c{turn}", "type": "function", "function": {"name": "get_user", "arguments": "{}"}}
            mine = {"role": "assistant", "content": None, "tool_calls": [call]}
            new = [{"role": "tool", "tool_call_id": f"c{turn}", "content": f'{{"user": {turn}}}'}]
        else:
            mine = {"role": "assistant", "content": f"Answer {turn}."}
            new = [{"role": "user", "content": f"Question {turn}?"}]
        messages += [mine, *new]
        k = len(messages) - len(new)
        assert renderer.turn_suffix(messages, k, tools) == renderer.turn_suffix_ids(messages, k, tools), turn
    assert renderer._window_checks == (None if template == "qwen3" else 0)


@pytest.mark.parametrize("template", ["chatml", "qwen2_5", "qwen3"])
def test_prompts_tokenized_after_a_kept_head_equal_whole_tokenizations(template):
    """Every episode's first prompt shares its head (system prompt, tools): tokenized once and kept, the rest
    tokenized per episode -- the same ids as tokenizing the whole rendering, past the checks of the first prompts."""
    if template != "chatml":
        pytest.importorskip("trl")
    _, tok = tiny(template)
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    tools = [{"type": "function", "function": {"name": "get_user", "parameters": {"type": "object", "properties": {}}}}]
    for i in range(10):
        messages = [
            {"role": "system", "content": "You are an agent. Follow the policy."},
            {"role": "assistant", "content": "Hi! How can I help you today?"},
            {"role": "user", "content": f"I need help with reservation {i}."},
        ]
        assert renderer.prompt_ids(messages, tools) == renderer.render(messages, tools, add_generation_prompt=True)
    assert renderer._prompt_checks == 0 and len(renderer._heads) == 1


def test_a_groups_equal_first_prompts_are_rendered_once_each_caller_getting_its_own_list(monkeypatch):
    """A GRPO group's episodes start from one observation: the prompt is rendered once, kept by a digest of its
    messages and tools, and equals a fresh rendering; a changed message, tool or value type is another prompt."""
    _, tok = tiny("chatml")
    renderer = ChatRenderer(tok, stop_ids={tok.eos_token_id})
    tools = [{"type": "function", "function": {"name": "get_user", "parameters": {"type": "object", "properties": {}}}}]
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "I need help with reservation 1."},
    ]
    renders = []
    real = renderer._prompt_ids
    monkeypatch.setattr(renderer, "_prompt_ids", lambda m, t: renders.append(1) or real(m, t))
    first = renderer.prompt_ids(messages, tools)
    again = renderer.prompt_ids([dict(m) for m in messages], [dict(t) for t in tools])  # equal, other objects
    assert first == again == renderer.render(messages, tools, add_generation_prompt=True) and len(renders) == 1
    first.append(7)  # a caller's list: the next caller is not given it
    assert renderer.prompt_ids(messages, tools) == again and len(renders) == 1
    other = [messages[0], {"role": "user", "content": "I need help with reservation 2."}]
    assert renderer.prompt_ids(other, tools) == renderer.render(other, tools, add_generation_prompt=True)
    typed = [{**tools[0], "strict": True}], [{**tools[0], "strict": 1}]
    assert renderer.prompt_ids(messages, typed[0]) and renderer.prompt_ids(messages, typed[1]) and len(renders) == 4
