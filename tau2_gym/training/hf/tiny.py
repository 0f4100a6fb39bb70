"""A tiny random causal LM and byte-level tokenizer, built in code (no download).

For smoke tests and CPU examples of the whole pipeline -- chat template, batched generation, token
bookkeeping, TRL training -- where what the model says does not matter. The tokenizer has one token per
byte (a byte-level BPE without merges) plus ChatML control tokens, so any text round-trips exactly.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from tau2_gym.core.domain import load_domain
from tau2_gym.core.prompts import done_tool_schema

__all__ = [
    "CHATML_TOOLS_TEMPLATE",
    "THINKING_TEMPLATE",
    "tiny_tokenizer",
    "tiny_model",
    "tiny_model_and_tokenizer",
    "domain_corpus",
    "CHATML_RESPONSE_TEMPLATE",
]

GREETING_HINT = "Hi! How can I help you today?"

# Our own minimal ChatML template with tools: system prompt + tool schemas, Hermes-style <tool_call> blocks,
# tool results as `tool` turns. Prefix-preserving: earlier turns render the same whatever follows.
CHATML_TOOLS_TEMPLATE = (
    "{% set rest = messages %}"
    "{% if messages and messages[0].role == 'system' %}{% set rest = messages[1:] %}{% endif %}"
    "{% if (messages and messages[0].role == 'system') or tools %}"
    "{{ '<|im_start|>system\\n' }}"
    "{% if messages and messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}"
    "{% if tools %}{{ '\\n\\n# Tools' }}{% for t in tools %}{{ '\\n' }}{{ t | tojson }}{% endfor %}"
    '{{ \'\\nCall a tool by writing <tool_call>{"name": ..., "arguments": {...}}</tool_call>.\' }}'
    "{% endif %}{{ '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% for m in rest %}"
    "{{ '<|im_start|>' + m.role + '\\n' }}"
    "{% if m.content %}{{ m.content }}{% endif %}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "{% set f = c.function if c.function is defined else c %}"
    "{{ '<tool_call>' }}{{ {'name': f.name, 'arguments': f.arguments} | tojson }}{{ '</tool_call>' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# A template that treats reasoning as Qwen3's does, for tests and CPU examples of thinking models: an assistant turn
# after the last customer message renders its reasoning (the `reasoning_content` field, else a `</think>` in the
# content) as a <think> block -- the last assistant message always gets one, empty if need be -- and every earlier
# assistant turn renders its content only; tool calls are Hermes <tool_call> JSON blocks; tool results are grouped
# into one `user` turn of <tool_response> blocks; `enable_thinking=False` pre-writes an empty think block into the
# generation prompt. Not prefix-preserving: a turn's <think> block disappears once the customer speaks again.
THINKING_TEMPLATE = (
    "{%- if messages and messages[0].role == 'system' %}"
    "{% set system = messages[0].content %}{% set rest = messages[1:] %}"
    "{%- else %}{% set system = none %}{% set rest = messages %}{% endif %}"
    "{%- if system is not none or tools %}"
    "{{- '<|im_start|>system\\n' }}{% if system is not none %}{{- system }}{% endif %}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nFunctions you may call, as JSON schemas:\\n<tools>' }}"
    "{%- for t in tools %}{{- '\\n' }}{{- t | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nTo call one, write <tool_call>\\n' }}"
    '{{- \'{"name": <name>, "arguments": <object>}\\n</tool_call>\' }}'
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for m in rest %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{%- for m in rest %}"
    "{%- set content = m.content if m.content is string else '' %}"
    "{%- if m.role == 'user' or m.role == 'system' %}"
    "{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'assistant' %}"
    "{%- set thought = m.reasoning_content if m.reasoning_content is string else '' %}"
    "{%- if m.reasoning_content is not string and '</think>' in content %}"
    "{%- set thought = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if loop.index0 > ns.last_user and (loop.last or thought) %}"
    "{{- '<think>\\n' + thought.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
    "{%- else %}{{- content }}{%- endif %}"
    "{%- for c in m.tool_calls or [] %}"
    "{%- set f = c.function if c.function is defined else c %}"
    "{%- if not loop.first or content %}{{- '\\n' }}{% endif %}"
    '{{- \'<tool_call>\\n{"name": "\' + f.name + \'", "arguments": \' }}'
    "{{- f.arguments if f.arguments is string else f.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}"
    "{%- if loop.first or rest[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{% endif %}"
    "{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}"
    "{%- if loop.last or rest[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{% endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{%- endif %}"
)

# How transformers' `parse_response` reads a reply written in CHATML_TOOLS_TEMPLATE's format (optional
# <think> block, <tool_call> JSON blocks, text up to <|im_end|>).
CHATML_RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def tiny_tokenizer(
    chat_template: Optional[str] = None, corpus: Optional[Iterable[str]] = None, vocab_size: int = 1024
) -> Any:
    """Byte-level tokenizer with ``<|im_start|>``/``<|im_end|>`` (EOS) / ``<|endoftext|>`` (pad) and the tool
    and thinking tags as single tokens; ``chat_template`` defaults to :data:`CHATML_TOOLS_TEMPLATE` (any
    ChatML-style template works, e.g. TRL's bundled Qwen templates).

    Without ``corpus`` every byte is one token. With it, BPE merges (up to ``vocab_size``) are learned from
    those texts in a few milliseconds -- about 4x shorter sequences on the texts it saw, which is what
    makes CPU training runs fast (attention cost grows with the square of the length).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    if corpus is None:
        tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.add_special_tokens(SPECIAL_TOKENS)
    else:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, initial_alphabet=alphabet, special_tokens=SPECIAL_TOKENS, show_progress=False
        )
        tok.train_from_iterator(list(corpus), trainer=trainer)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(MARKUP_TOKENS)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|im_end|>")
    hf_tok.chat_template = chat_template or CHATML_TOOLS_TEMPLATE
    if chat_template is None:
        try:
            hf_tok.response_template = CHATML_RESPONSE_TEMPLATE  # transformers >= 5.13 parses replies with it
        except Exception:  # noqa: BLE001 - older transformers: the Hermes parser reads the same format
            pass
    hf_tok.padding_side = "left"
    return hf_tok


def domain_corpus(domain: str = "mock", data_dir: Optional[str] = None) -> list[str]:
    """Texts a tau2 domain's prompts are made of (policy, tool schemas, task texts), to fit a tiny tokenizer."""
    import json

    loaded = load_domain(domain, data_dir)
    texts = [loaded.policy(False), GREETING_HINT]
    texts += [json.dumps(s) for s in loaded.agent_tool_schemas()]
    try:
        texts.append(json.dumps(done_tool_schema(loaded.source)))
    except Exception:  # noqa: BLE001 - the corpus is only a hint
        pass
    for task in loaded.tasks(None, None):
        texts.append(json.dumps(task.model_dump(mode="json")))
    return texts


def tiny_model(
    tokenizer: Any, *, seed: int = 0, hidden_size: int = 32, num_layers: int = 2, max_positions: int = 16384
) -> Any:
    """A random 2-layer Qwen2 over ``tokenizer``'s vocabulary (about 30k parameters)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(cfg)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model.eval()


def tiny_model_and_tokenizer(
    chat_template: Optional[str] = None,
    *,
    domain: Optional[str] = "mock",
    seed: int = 0,
    data_dir: Optional[str] = None,
) -> tuple[Any, Any]:
    """A tiny model and tokenizer; the tokenizer's merges are fitted to ``domain``'s texts (None: bytes only)."""
    corpus = domain_corpus(domain, data_dir) if domain is not None else None
    tokenizer = tiny_tokenizer(chat_template, corpus)
    return tiny_model(tokenizer, seed=seed), tokenizer
