"""Helpers for the Hugging Face / TRL tests: a tiny random model and tokenizer built in code (cached per
process), and a logits processor that makes the random model write a given script, so a test can check
the real pipeline (template, batched left-padded generation, parsing, env steps, token bookkeeping) on
outputs it knows. Import only after ``pytest.importorskip("torch")``/``("transformers")``."""

from __future__ import annotations

import functools
from typing import Any, Optional

import torch

from tau2_gym.training.hf.chat import ChatRenderer


def set_threads() -> None:
    torch.set_num_threads(1)  # a 32-wide model gains nothing from threads; on a busy 2-core box they cost a lot


@functools.cache
def tiny(template: str = "chatml") -> tuple[Any, Any]:
    """(model, tokenizer) with merges fitted to the mock domain; template: chatml or thinking (ours: the Qwen3-like
    THINKING_TEMPLATE), qwen2_5 or qwen3 (TRL's)."""
    from tau2_gym.training.hf.tiny import THINKING_TEMPLATE, tiny_model_and_tokenizer

    set_threads()
    chat_template = None
    if template == "thinking":
        chat_template = THINKING_TEMPLATE
    elif template != "chatml":
        from trl import chat_template_utils as ctu

        chat_template = {"qwen2_5": ctu.qwen2_5_chat_template, "qwen3": ctu.qwen3_chat_template}[template]
    return tiny_model_and_tokenizer(chat_template)


def assistant_body(renderer: ChatRenderer, message: dict) -> str:
    """The text the template writes for an assistant message between its generation prompt and end of turn."""
    head = [{"role": "user", "content": "x"}]
    pre = renderer.render_text(head, add_generation_prompt=True)
    full = renderer.render_text(head + [message], add_generation_prompt=False)
    assert full.startswith(pre), (pre, full)
    body = full[len(pre) :]
    body = body[: body.rindex("<|im_end|>")]
    if body.startswith("<think>"):  # Qwen3 writes an empty think block into the last assistant turn
        body = body[body.index("</think>") + len("</think>") :].lstrip()
    return body


class ForceScript:
    """Logits processor: the row whose text contains ``key`` writes ``scripts[key][turn]`` then EOS, where
    ``turn`` counts the generation prompts after the episode's prompt (``base[key]`` of them are in it)."""

    def __init__(
        self,
        tokenizer: Any,
        scripts: dict[str, list[str]],
        base: dict[str, int],
        fallback: str = "Bye.",
        gen_prompt: str = "<|im_start|>assistant\n",
        strict: bool = True,
    ) -> None:
        self.tok = tokenizer
        self.strict = strict  # False: rows of unscripted episodes are left to the model
        self.scripts = scripts
        self.base = base
        self.fallback = fallback
        self.start = tokenizer.encode(gen_prompt, add_special_tokens=False)
        self.eos = tokenizer.eos_token_id
        self._keys: dict[tuple, str] = {}

    def _key(self, row: list[int]) -> Optional[str]:
        sig = tuple(row[:2048])
        if sig not in self._keys:
            text = self.tok.decode(row)
            found = [k for k in self.scripts if k in text]
            assert len(found) == 1 or (not found and not self.strict), f"row matches {found} of the scripted keys"
            self._keys[sig] = found[0] if found else None
        return self._keys[sig]

    def _starts(self, row: list[int]) -> list[int]:
        n = len(self.start)
        return [i for i in range(len(row) - n + 1) if row[i : i + n] == self.start]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        pad = self.tok.pad_token_id
        for b, row in enumerate(input_ids.tolist()):
            while row and row[0] == pad:
                row = row[1:]
            key = self._key(row)
            if key is None:
                continue
            starts = self._starts(row)
            turn = len(starts) - self.base[key]
            script = self.scripts[key]
            text = script[turn] if 0 <= turn < len(script) else self.fallback
            target = self.tok.encode(text, add_special_tokens=False) + [self.eos]
            done = len(row) - (starts[-1] + len(self.start))
            nxt = target[done] if done < len(target) else self.eos
            scores[b, :] = -float("inf")
            scores[b, nxt] = 0.0
        return scores


def count_gen_prompts(tokenizer: Any, ids: list[int], gen_prompt: str = "<|im_start|>assistant\n") -> int:
    start = tokenizer.encode(gen_prompt, add_special_tokens=False)
    n = len(start)
    return sum(1 for i in range(len(ids) - n + 1) if ids[i : i + n] == start)


def oracle_scripts(
    renderer: ChatRenderer, env_factory: Any, task_ids: list[str], think: Optional[str] = None
) -> tuple[dict[str, list[str]], dict[str, int], dict[str, float]]:
    """For each task: (key -> the scripted oracle's turns as template text, key -> generation prompts already
    in the first prompt, task_id -> the reward the scripted oracle gets on the plain env). The key is the
    customer's opening message, which identifies the episode in the rendered context."""
    from tau2_gym.players.agents.scripted import OracleAgent

    scripts, base, rewards = {}, {}, {}
    for task_id in task_ids:
        env = env_factory()
        obs, info = env.reset(options={"task_id": task_id})
        key = obs[-1]["content"]
        agent = OracleAgent()
        agent.reset(info["task"], info)
        bodies = [assistant_body(renderer, m) for m in agent._plan]
        if think is not None:
            bodies = [f"<think>\n{think}\n</think>\n\n{b}" for b in bodies]
        scripts[key] = bodies
        base[key] = count_gen_prompts(renderer.tokenizer, renderer.prompt_ids(obs, info["tools"]))
        reward, done = 0.0, False
        while not done:
            obs, reward, term, trunc, info = env.step(agent.act(obs, info))
            done = term or trunc
        rewards[task_id] = reward
    assert len(set(scripts)) == len(task_ids), "opening messages must differ between the tasks"
    return scripts, base, rewards
