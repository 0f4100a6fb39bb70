"""HFUserSimulator with a tiny random Qwen2 model and a byte-level tokenizer built in code (no downloads).

Outputs are made deterministic by a logits processor that forces, for each row, the text written between
``SAY|`` and ``|END`` in that row's prompt -- so the tests check the real pipeline (template, left-padded
batches, generation, decoding, tool-call parsing) without relying on what a random model would say.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from tau2_gym.core.messages import ToolCall  # noqa: E402 - after the importorskip guard
from tau2_gym.core.parsing import ParsedCall  # noqa: E402 - after the importorskip guard
from tau2_gym.core.tasks import Task  # noqa: E402 - after the importorskip guard
from tau2_gym.players.users.base import UserSimulatorError, UserTurnRequest  # noqa: E402 - after the importorskip guard
from tau2_gym.players.users.hf_user import HFUserConfig, HFUserSimulator  # noqa: E402 - after the importorskip guard

CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTOOLS {{ tools | tojson }}<|im_end|>\n{% endif -%}"
    "{%- for m in messages -%}"
    "<|im_start|>{{ m.role }}\n{% if m.content %}{{ m.content }}{% endif %}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}{% "
    "endif -%}"
    "<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "check_status_bar",
            "description": "Look at the status bar.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }
]
TASK = Task(id="t0", user_scenario={"instructions": "Say what you are told."})


def build_tiny():
    """A 2-layer random Qwen2 and a byte-level BPE tokenizer (no merges) with ChatML-like special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|pad|>", "<|im_start|>", "<|im_end|>"])
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|im_end|>")
    hf_tok.chat_template = CHAT_TEMPLATE
    cfg = Qwen2Config(
        vocab_size=len(hf_tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=hf_tok.pad_token_id,
        eos_token_id=hf_tok.eos_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).eval()
    return model, hf_tok


@pytest.fixture(scope="module")
def tiny():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 32-wide model gains nothing from threads; on a busy box they cost 10x
    try:
        yield build_tiny()
    finally:
        torch.set_num_threads(threads)


class ForceSay:
    """Logits processor: each row generates the text between SAY| and |END in its prompt, then EOS."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.start = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
        self.calls = 0

    def _generated(self, row: list[int]) -> list[int]:
        n = len(self.start)
        last = max(i for i in range(len(row) - n + 1) if row[i : i + n] == self.start)
        return row[last + n :]

    def __call__(self, input_ids, scores):
        self.calls += 1
        for b, row in enumerate(input_ids.tolist()):
            text = self.tok.decode(row)
            said = re.findall(r"SAY\|(.*?)\|END", text, flags=re.DOTALL)
            target = self.tok.encode(said[-1] if said else "", add_special_tokens=False) + [self.tok.eos_token_id]
            done = len(self._generated(row))
            nxt = target[done] if done < len(target) else self.tok.eos_token_id
            scores[b, :] = -float("inf")
            scores[b, nxt] = 0.0
        return scores


def forced(tiny, **kw) -> HFUserSimulator:
    from transformers import LogitsProcessorList

    model, tok = tiny
    cfg = HFUserConfig(max_new_tokens=96, generate_kwargs={"logits_processor": LogitsProcessorList([ForceSay(tok)])})
    return HFUserSimulator(cfg, model=model, tokenizer=tok, **kw)


def request(say: str, tools=None, history=None, episode="e0") -> UserTurnRequest:
    messages = list(history or []) + [{"role": "user", "content": f"Please SAY|{say}|END now."}]
    return UserTurnRequest(
        episode_id=episode, system_prompt="You are a customer.", messages=messages, tools=tools, task=TASK
    )


def test_batched_generation_returns_one_message_per_request_in_order(tiny):
    sim = forced(tiny, batch_size=2)
    says = ["hi", "a much longer sentence to force padding", "mid length", "x", "bye now"]
    out = sim.generate_batch([request(s, episode=f"e{i}") for i, s in enumerate(says)])
    assert [m.content for m in out] == says
    tok = tiny[1]
    for m, s in zip(out, says):
        assert m.tool_calls is None
        assert m.usage["completion_tokens"] == len(tok.encode(s, add_special_tokens=False)) + 1  # + EOS
        assert m.raw_data["finish_reason"] == "stop" and m.raw_data["text"] == s


def test_generated_tool_call_is_parsed_and_tagged_user(tiny):
    call = '<tool_call>{"name": "check_status_bar", "arguments": {}}</tool_call>'
    sim = forced(tiny)
    msg = sim.generate(request(call, tools=TOOLS))
    assert msg.content is None
    assert msg.tool_calls == [ToolCall(name="check_status_bar", arguments={}, id="call_0", requestor="user")]
    mixed = sim.generate(
        request('Checking. <tool_call>{"name": "toggle_data", "arguments": {"on": true}}</tool_call>', tools=TOOLS)
    )
    assert mixed.content == "Checking."
    assert [(c.name, c.arguments, c.requestor) for c in mixed.tool_calls] == [("toggle_data", {"on": True}, "user")]


def test_malformed_tool_call_is_a_user_error_or_text_as_configured(tiny):
    bad = '<tool_call>{"name": "check_status_bar", "arguments": [1]}</tool_call>'
    out = forced(tiny).generate_batch([request(bad), request("fine")])
    assert isinstance(out[0], UserSimulatorError) and "arguments must be a JSON object" in str(out[0])
    assert out[1].content == "fine"
    as_text = forced(tiny, on_parse_error="text").generate(request(bad))
    assert as_text.content == bad and as_text.tool_calls is None


def test_empty_output_is_a_user_error(tiny):
    with pytest.raises(UserSimulatorError, match="empty response"):
        forced(tiny).generate(request(""))


def test_prompt_renders_tools_and_tool_call_arguments_as_objects(tiny):
    model, tok = tiny
    sim = HFUserSimulator(model=model, tokenizer=tok)
    history = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "toggle_data", "arguments": '{"on": false}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    prompt = sim.build_prompt(request("x", tools=TOOLS, history=history))
    assert prompt.startswith("<|im_start|>system\nTOOLS ") and '"check_status_bar"' in prompt
    assert '<tool_call>{"name": "toggle_data", "arguments": {"on": false}}</tool_call>' in prompt
    assert "<|im_start|>system\nYou are a customer.<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert "TOOLS" not in sim.build_prompt(request("x"))


def test_random_model_greedy_is_deterministic_and_uses_the_parser(tiny):
    model, tok = tiny
    seen = []

    def stub(text: str) -> ParsedCall:
        seen.append(text)
        return ParsedCall(content=None, tool_calls=[ToolCall(name="check_status_bar", arguments={"n": len(seen)})])

    sim = HFUserSimulator(
        HFUserConfig(max_new_tokens=6, parser=stub, generate_kwargs={"min_new_tokens": 6}), model=model, tokenizer=tok
    )
    a, b = sim.generate_batch([request("ignored"), request("ignored")])
    assert seen[0] == seen[1] and a.raw_data["text"] == seen[0]  # identical prompts, greedy: identical output
    assert a.raw_data["finish_reason"] == "length" and a.usage["completion_tokens"] == 6
    assert [(c.name, c.requestor) for c in a.tool_calls] == [("check_status_bar", "user")]
    assert sim.info() == {
        "implementation": "hf_user_simulator",
        "llm": sim._model_name(),
        "llm_args": {"do_sample": False, "max_new_tokens": 6},
    }


def test_concurrent_agenerate_calls_share_one_generate_call(tiny):
    sim = forced(tiny, batch_size=8)
    calls = []
    original = sim.model.generate

    def counting_generate(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return original(*args, **kwargs)

    sim.model.generate = counting_generate
    try:

        async def run():
            return await asyncio.gather(*(sim.agenerate(request(f"r{i}", episode=f"e{i}")) for i in range(4)))

        msgs = asyncio.run(run())
    finally:
        del sim.model.generate
    assert [m.content for m in msgs] == ["r0", "r1", "r2", "r3"]
    assert calls == [4]


def test_transformers_response_template_parses_generated_calls(tiny):
    model, tok = tiny
    if not callable(getattr(tok, "parse_response", None)) or "prefix" not in str(
        __import__("inspect").signature(tok.parse_response)
    ):
        pytest.skip("this transformers has no response_template parser")
    template = {
        "start_anchor": "<|im_start|>assistant\n",
        "defaults": {"role": "assistant"},
        "fields": {
            "tool_calls": {
                "open_pattern": r"\s*<tool_call>",
                "close": "</tool_call>",
                "repeats": True,
                "content": "json",
                "transform": {"type": "function", "function": "{content}"},
            },
            "content": {"close_pattern": r"\s*<\|im_end\|>", "content": "text"},
        },
    }
    tok.response_template = template
    try:
        sim = forced(tiny)  # parser="auto" picks the tokenizer's own parser
        msg = sim.generate(
            request('On it <tool_call>{"name": "check_status_bar", "arguments": {"a": 1}}</tool_call>', tools=TOOLS)
        )
    finally:
        tok.response_template = None
    assert msg.content == "On it"
    assert [(c.name, c.arguments, c.id, c.requestor) for c in msg.tool_calls] == [
        ("check_status_bar", {"a": 1}, "call_0", "user")
    ]


def test_config_describes_fields_and_rejects_bad_values():
    text = HFUserConfig().describe()
    assert "do_sample = False  # " in text and "parser = 'auto'" in text
    with pytest.raises(ValueError, match="on_parse_error"):
        HFUserConfig(on_parse_error="ignore")
    with pytest.raises(ValueError, match="model_name_or_path"):
        HFUserSimulator()
    assert json.loads(json.dumps(HFUserConfig().batch_size)) == 8
