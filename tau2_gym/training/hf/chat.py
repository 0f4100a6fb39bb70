"""Chat-template rendering for token-exact multi-turn trajectories.

A multi-turn episode is one growing token sequence: the prompt (the first observation rendered with the
chat template and the env's tool schemas, generation prompt included), then alternately the policy's own
generated tokens and the tokens of what the environment and the customer said back. The policy's tokens
are kept exactly as sampled -- never decoded and re-tokenized. The env/user tokens are cut out of the chat
template's own rendering by a *prefix diff*:

    before = render(history up to and including the policy's last message)            # no generation prompt
    after  = render(history + the env/user messages that followed, generation prompt)
    env/user tokens = after[len(before trimmed after its last end-of-turn token):]

so they are exactly the template's tokens for those turns (``\\n<|im_start|>user\\n...<|im_end|>\\n
<|im_start|>assistant\\n`` for ChatML), including the generation prompt of the policy's next turn.

Templates that render an earlier turn differently once more messages follow (Qwen3 drops the ``<think>``
block of past assistant turns; some templates change the last assistant turn) are not prefix-preserving:
``before`` is then no prefix of ``after``. Strategy: the context stays *append-only* -- the policy keeps
seeing its own earlier tokens as generated, never a re-rendered history -- and the env/user tokens start
right after the same number of end-of-turn tokens in ``after`` as ``before`` holds (the turn structure
does not change when a template edits the inside of an earlier turn). :attr:`TurnSuffix.exact` is False
then, and the trajectory counts such turns. Alternatively, pass a prefix-preserving ``chat_template``
(TRL ships training variants: ``trl.chat_template_utils.get_training_chat_template``).

Thinking models add a second question: does the policy, at its next turn, see its earlier turn as it wrote it?
Serving renders the observation (which holds past reasoning only with ``reasoning_history="keep"``) with the
template, and Qwen3's template drops the ``<think>`` block of every turn before the customer's last message. Then
one append-only sequence shows the policy a context serving never shows; one training sample per LLM call --
prompt = the template's rendering of that turn's observation, completion = that turn's tokens -- is exact.
:meth:`ChatRenderer.keeps_generated_turns` finds out by rendering which applies (:func:`resolve_sample_mode`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from tau2_gym.core.db import value_digest

logger = logging.getLogger(__name__)

FAST_PATH_CHECKS = 4  # turns computed both ways before the text fast path is trusted (see ChatRenderer)
#: first prompts a renderer keeps (a batch's GRPO groups: one per distinct task and seed in a call)
PROMPT_MEMO = 256

__all__ = [
    "ChatRenderer",
    "PER_TURN",
    "SAMPLE_MODES",
    "SEQUENCE",
    "TemplateError",
    "TurnSuffix",
    "observed_messages",
    "resolve_sample_mode",
    "stop_token_ids",
    "template_messages",
]

#: how an episode becomes training samples: one append-only token sequence, or one sample per LLM call
SEQUENCE, PER_TURN = "sequence", "per_turn"
SAMPLE_MODES = ("auto", SEQUENCE, PER_TURN)


class TemplateError(ValueError):
    """The chat template cannot be used for token-exact trajectories (see the message for why)."""


@dataclass(frozen=True)
class TurnSuffix:
    """Tokens the template puts between the end of the policy's turn and its next generation."""

    ids: list[int]
    exact: bool  # True: found by the prefix diff; False: by counting end-of-turn tokens (see module docs)


def template_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as chat templates expect them: tool-call arguments as objects, not JSON strings."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if calls:
            fixed = []
            for c in calls:
                fn = c.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    raw = fn["arguments"]
                    try:
                        args: Any = json.loads(raw) if raw.strip() else {}
                    except json.JSONDecodeError:
                        args = raw
                    c = {**c, "function": {**fn, "arguments": args}}
                fixed.append(c)
            m = {**m, "tool_calls": fixed}
        out.append(m)
    return out


def observed_messages(messages: Iterable[dict[str, Any]], reasoning_history: str) -> list[dict[str, Any]]:
    """Messages as the env's observation shows them under ``reasoning_history``: ``"drop"`` removes the
    ``reasoning_content`` of every message, ``"keep"`` leaves it (what the env itself does; see
    :class:`~tau2_gym.core.settings.EpisodeSettings`)."""
    if reasoning_history == "keep":
        return list(messages)
    return [
        {k: v for k, v in m.items() if k != "reasoning_content"} if "reasoning_content" in m else m for m in messages
    ]


def _reasoning_probes(reasoning_history: str) -> list[tuple[list[dict], list[dict]]]:
    """(a conversation ending with a generated turn that has reasoning, the next observation) pairs: the turn
    followed by the customer's next message, and a tool-call turn followed by its result."""
    call = {"type": "function", "function": {"name": "probe", "arguments": {}}, "id": "c0"}
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    text = {"role": "assistant", "content": "a", "reasoning_content": "r"}
    tool = {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [call]}
    out = []
    for turn, after in (
        (text, {"role": "user", "content": "v"}),
        (tool, {"role": "tool", "tool_call_id": "c0", "content": "o"}),
    ):
        generated = head + [turn]
        out.append((generated, observed_messages(generated, reasoning_history) + [after]))
    return out


def resolve_sample_mode(
    mode: str, renderer: ChatRenderer, tools: Optional[Sequence[dict]] = None, reasoning_history: str = "drop"
) -> str:
    """``"sequence"`` or ``"per_turn"``: ``mode`` itself when explicit; for ``"auto"``, per-turn exactly when the
    template does not keep a generated turn as the next prompt's prefix (:meth:`ChatRenderer.keeps_generated_turns`)."""
    if mode not in SAMPLE_MODES:
        raise ValueError(f"sample_mode={mode!r}; choose one of {', '.join(SAMPLE_MODES)}")
    if mode != "auto":
        return mode
    return SEQUENCE if renderer.keeps_generated_turns(tools, reasoning_history) else PER_TURN


def stop_token_ids(tokenizer: Any, model: Any = None, extra: Optional[Iterable[int]] = None) -> frozenset[int]:
    """Token ids that end a policy turn: the tokenizer's EOS, the model's generation-config EOS id(s), ``extra``."""
    ids: set[int] = set()

    def add(value: Any) -> None:
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            ids.update(v for v in value if isinstance(v, int))

    add(getattr(tokenizer, "eos_token_id", None))
    gc = getattr(model, "generation_config", None)
    if gc is not None:
        add(getattr(gc, "eos_token_id", None))
    if extra is not None:
        add(list(extra))
    if not ids:
        raise TemplateError("no end-of-turn token: the tokenizer has no eos_token_id; pass stop ids explicitly")
    return frozenset(ids)


class ChatRenderer:
    """Renders agent observations to token ids with one tokenizer, chat template and template kwargs.

    ``stop_ids``: the tokens that end a policy turn (the policy's generation stops there); the prefix diff
    trims the rendered history after its last one.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        stop_ids: Iterable[int],
        chat_template: Optional[str] = None,
        chat_template_kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.stop_ids = frozenset(stop_ids)
        self.chat_template = chat_template
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        if chat_template is None and getattr(tokenizer, "chat_template", None) is None:
            raise TemplateError(
                "the tokenizer has no chat_template; set tokenizer.chat_template or pass chat_template="
            )
        self._init_text_split()

    def render(
        self, messages: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]] = None, *, add_generation_prompt: bool
    ) -> list[int]:
        """Token ids of ``messages`` (OpenAI format) under the chat template, ``tools`` as JSON schemas."""
        ids = self.tokenizer.apply_chat_template(
            template_messages(messages),
            tools=list(tools) if tools else None,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=True,
            return_dict=False,
            **self.chat_template_kwargs,
        )
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if ids and isinstance(ids[0], list):  # some processors return a batch of one
            ids = ids[0]
        return list(ids)

    def render_text(
        self, messages: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]] = None, *, add_generation_prompt: bool
    ) -> str:
        return self.tokenizer.apply_chat_template(
            template_messages(messages),
            tools=list(tools) if tools else None,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            **self.chat_template_kwargs,
        )

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]] = None) -> list[int]:
        """The first prompt: the observation with the generation prompt of the policy's first turn, a list of the
        caller's own.

        The episodes of a GRPO group (one task, one reset seed) start from the same observation: the last
        :data:`PROMPT_MEMO` prompts are kept by a digest of their messages and tools, so a group's is rendered once.
        The rendering up to its first end-of-turn token (the system prompt and the tools: the same for every
        episode of an env) is tokenized once and kept (by its text); each episode tokenizes only what follows --
        as :meth:`turn_suffix`, checked against whole tokenizations on the first prompts."""
        key = value_digest((list(messages), list(tools) if tools else None))
        if key is None:
            return self._prompt_ids(messages, tools)
        ids = self._prompts.get(key)
        if ids is None:
            ids = self._prompts[key] = self._prompt_ids(messages, tools)
            if len(self._prompts) > PROMPT_MEMO:
                self._prompts.pop(next(iter(self._prompts)))  # the oldest
        return list(ids)

    def _prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]]) -> list[int]:
        if self._stop_texts is None:
            return self.render(messages, tools, add_generation_prompt=True)
        text = self.render_text(messages, tools, add_generation_prompt=True)
        ends = self._stop_positions(text)
        if not ends:
            return self.render(messages, tools, add_generation_prompt=True)
        head = text[: ends[0]]
        head_ids = self._heads.get(head)
        if head_ids is None:
            if len(self._heads) >= 16:  # a few distinct system prompts (per-task policies): keep the recent ones
                self._heads.pop(next(iter(self._heads)))
            head_ids = self._heads[head] = self.encode(head)
        ids = head_ids + self.encode(text[ends[0] :])
        if self._prompt_checks > 0:
            ref = self.render(messages, tools, add_generation_prompt=True)
            if ref != ids:
                logger.info("tokenizing a prompt in two parts differs for this tokenizer; tokenizing prompts whole")
                self._prompt_checks, self._heads = 0, {}
                self._stop_texts = None
                return ref
            self._prompt_checks -= 1
        return ids

    def _last_stop(self, ids: Sequence[int]) -> Optional[int]:
        stop = self.stop_ids
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] in stop:
                return i
        return None

    def turn_end_token(self, messages: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]] = None) -> int:
        """The end-of-turn token the template closes the last (assistant) message with."""
        before = self.render(messages, tools, add_generation_prompt=False)
        cut = self._last_stop(before)
        if cut is None:
            raise TemplateError(
                "the chat template ends turns with none of the stop tokens "
                f"{sorted(self.stop_ids)}; pass the template's end-of-turn id in stop_ids"
            )
        return before[cut]

    def turn_suffix(
        self, messages: Sequence[dict[str, Any]], k: int, tools: Optional[Sequence[dict]] = None
    ) -> TurnSuffix:
        """Tokens after the policy's turn ``messages[k - 1]`` up to the next generation prompt.

        ``messages[k:]`` are what the environment and the customer said since (as the agent sees them).
        """
        if not 0 < k <= len(messages):
            raise ValueError(f"k={k} must point inside the {len(messages)} messages")
        if self._stop_texts is None:
            return self.turn_suffix_ids(messages, k, tools)
        if self._window_checks == 0:
            window = self._turn_suffix_window(messages, k)
            if window is not None:
                return window
        fast = self._turn_suffix_text(messages, k, tools)
        if self._checks_left > 0:  # trust the fast path only once it agreed with the reference a few times
            ref = self.turn_suffix_ids(messages, k, tools)
            if ref != fast:
                logger.info(
                    "tokenizing the new turns alone differs from tokenizing the whole rendering for this "
                    "tokenizer; using full renderings for the prefix diff"
                )
                self._stop_texts = None
                return ref
            self._checks_left -= 1
        if self._window_checks:  # the window is trusted only once it agreed with the full renderings a few times
            if self._turn_suffix_window(messages, k) == fast:
                self._window_checks -= 1
            else:
                logger.info("this chat template renders new turns differently without the history; rendering it whole")
                self._window_checks = None
        return fast

    def _turn_suffix_window(self, messages: Sequence[dict[str, Any]], k: int) -> Optional[TurnSuffix]:
        """:meth:`turn_suffix` from the policy's last message and the turns after it alone -- no system prompt, no
        tools, no earlier turns: the same work every turn instead of rendering the whole conversation twice (that
        grew with the episode). None when the template cannot render such a window (it refuses a conversation that
        opens with the assistant, or the window is not prefix-preserving)."""
        window = list(messages[k - 1 :])
        try:
            before = self.render_text(window[:1], None, add_generation_prompt=False)
            after = self.render_text(window, None, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - a template's own refusal (raise_exception): keep full renderings
            return None
        ends = self._stop_positions(before)
        if not ends or not after.startswith(before[: ends[-1]]):
            return None
        return TurnSuffix(self.encode(after[ends[-1] :]), True)

    def turn_suffix_ids(
        self, messages: Sequence[dict[str, Any]], k: int, tools: Optional[Sequence[dict]] = None
    ) -> TurnSuffix:
        """:meth:`turn_suffix` computed on the token ids of both full renderings (the reference method)."""
        before = self.render(messages[:k], tools, add_generation_prompt=False)
        after = self.render(messages, tools, add_generation_prompt=True)
        cut = self._last_stop(before)
        if cut is None:
            if after[: len(before)] == before:
                return TurnSuffix(after[len(before) :], True)
            raise TemplateError(
                "the chat template ends turns with none of the stop tokens "
                f"{sorted(self.stop_ids)} and is not prefix-preserving; pass its end-of-turn id "
                "in stop_ids or a prefix-preserving chat_template"
            )
        head = before[: cut + 1]
        if after[: len(head)] == head:
            return TurnSuffix(after[len(head) :], True)
        # Not prefix-preserving: start after as many end-of-turn tokens as the history holds.
        n = sum(1 for t in head if t in self.stop_ids)
        seen = 0
        for i, t in enumerate(after):
            if t in self.stop_ids:
                seen += 1
                if seen == n:
                    return TurnSuffix(after[i + 1 :], False)
        raise TemplateError(
            f"the chat template renders {seen} end-of-turn tokens for a history that had {n}; "
            "cannot locate the new turns -- pass a prefix-preserving chat_template"
        )

    # Fast path. The end-of-turn tokens are added tokens, and tokenizers split text on added tokens before
    # anything else, so the ids of the text after one do not depend on the text before it: diffing the two
    # renderings as text and tokenizing only the new tail gives the same ids as diffing full tokenizations,
    # without re-tokenizing the whole conversation every turn. Tokenizers that treat the start of a text
    # specially (a SentencePiece-style prefix space) break that, so the first few turns are computed both
    # ways and the fast path is dropped for good at the first difference.
    # Rendering itself: a template renders a turn from the turn and its neighbours (roles, the tool-result
    # grouping), not from the system prompt, the tools or turns long past, so the new turns are rendered after
    # the policy's last message alone (the window); checked against whole renderings the same way.

    def _init_text_split(self) -> None:
        tok = self.tokenizer
        added = getattr(tok, "added_tokens_decoder", None)
        self._stop_texts: Optional[tuple[str, ...]] = None
        #: agreements of the window rendering still to see before it is trusted (None: this template disagrees)
        self._window_checks: Optional[int] = None
        self._prompt_checks = 0
        self._heads: dict[str, list[int]] = {}  # the ids of a prompt's head (system prompt, tools), by its text
        self._prompts: dict[bytes, list[int]] = {}  # whole first prompts, by a digest of messages and tools
        if not added or not getattr(tok, "is_fast", False):
            return
        texts = []
        for i in self.stop_ids:
            token = added.get(i)
            if token is None:
                return
            texts.append(str(token))
        self._stop_texts = tuple(texts)
        self._checks_left = FAST_PATH_CHECKS
        self._window_checks = FAST_PATH_CHECKS
        self._prompt_checks = FAST_PATH_CHECKS

    def _stop_positions(self, text: str) -> list[int]:
        """End offsets of every end-of-turn token string in ``text``, in order."""
        ends = []
        for stop in self._stop_texts or ():
            start = text.find(stop)
            while start != -1:
                ends.append(start + len(stop))
                start = text.find(stop, start + len(stop))
        return sorted(ends)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _assistant_ids_text(
        self, messages: Sequence[dict[str, Any]], k: int, tools: Optional[Sequence[dict]]
    ) -> Optional[list[int]]:
        """The fast path of :meth:`assistant_ids` for prefix-preserving renderings (None: use the ids)."""
        head = self.render_text(messages[: k - 1], tools, add_generation_prompt=True)
        full = self.render_text(messages[:k], tools, add_generation_prompt=False)
        head_ends, full_ends = self._stop_positions(head), self._stop_positions(full)
        start = head_ends[-1] if head_ends else 0
        if not full_ends or full_ends[-1] <= start or not full.startswith(head[:start]):
            return None
        prompt = self.encode(head[start:])
        turn = self.encode(full[start : full_ends[-1]])
        if turn[: len(prompt)] != prompt:
            return None
        return turn[len(prompt) :]

    def _turn_suffix_text(
        self, messages: Sequence[dict[str, Any]], k: int, tools: Optional[Sequence[dict]]
    ) -> TurnSuffix:
        before = self.render_text(messages[:k], tools, add_generation_prompt=False)
        after = self.render_text(messages, tools, add_generation_prompt=True)
        ends = self._stop_positions(before)
        if not ends:
            return self.turn_suffix_ids(messages, k, tools)
        cut = ends[-1]
        if after.startswith(before[:cut]):
            return TurnSuffix(self.encode(after[cut:]), True)
        after_ends = self._stop_positions(after)
        if len(after_ends) < len(ends):
            raise TemplateError(
                f"the chat template renders {len(after_ends)} end-of-turn tokens for a history "
                f"that had {len(ends)}; cannot locate the new turns -- pass a prefix-preserving "
                "chat_template"
            )
        return TurnSuffix(self.encode(after[after_ends[len(ends) - 1] :]), False)

    def assistant_ids(
        self, messages: Sequence[dict[str, Any]], k: int, tools: Optional[Sequence[dict]] = None
    ) -> list[int]:
        """Tokens the template writes for the assistant message ``messages[k - 1]`` after its generation
        prompt, through its end-of-turn token: what a policy that wrote this message would have generated.

        Found like :meth:`turn_suffix`: a prefix diff against the history rendered with the generation prompt,
        or -- for a template that renders the last turn differently -- by skipping as many end-of-turn tokens
        and the generation prompt's own tokens.
        """
        if not 0 < k <= len(messages) or messages[k - 1].get("role") != "assistant":
            raise ValueError(f"messages[{k - 1}] is not an assistant message")
        if self._stop_texts is not None:
            fast = self._assistant_ids_text(messages, k, tools)
            if fast is not None:
                if self._checks_left <= 0:
                    return fast
                ref = self.assistant_ids_from_ids(messages, k, tools)
                if ref == fast:
                    self._checks_left -= 1
                else:
                    logger.info(
                        "tokenizing the assistant turn alone differs from tokenizing the whole rendering "
                        "for this tokenizer; using full renderings"
                    )
                    self._stop_texts = None
                return ref
        return self.assistant_ids_from_ids(messages, k, tools)

    def assistant_ids_from_ids(
        self, messages: Sequence[dict[str, Any]], k: int, tools: Optional[Sequence[dict]] = None
    ) -> list[int]:
        """:meth:`assistant_ids` computed on the token ids of both full renderings (the reference method)."""
        head = self.render(messages[: k - 1], tools, add_generation_prompt=True)
        full = self.render(messages[:k], tools, add_generation_prompt=False)
        cut = self._last_stop(full)
        if cut is None:
            raise TemplateError(
                "the chat template ends turns with none of the stop tokens "
                f"{sorted(self.stop_ids)}; pass the template's end-of-turn id in stop_ids"
            )
        if full[: len(head)] == head:
            return full[len(head) : cut + 1]
        last = self._last_stop(head)
        prompt = head[last + 1 :] if last is not None else head
        n = sum(1 for t in head if t in self.stop_ids)
        seen, start = 0, 0 if n == 0 else None
        for i, t in enumerate(full):
            if start is None and t in self.stop_ids:
                seen += 1
                if seen == n:
                    start = i + 1
        if start is None or full[start : start + len(prompt)] != prompt:
            raise TemplateError(
                "cannot locate the assistant turn in the chat template's rendering -- pass a "
                "prefix-preserving chat_template"
            )
        return full[start + len(prompt) : cut + 1]

    def episode_ids(
        self, messages: Sequence[dict[str, Any]], tools: Optional[Sequence[dict]] = None, *, first_policy: int = 0
    ) -> tuple[list[int], list[int]]:
        """``(input_ids, assistant_mask)`` of a finished conversation, built as :class:`PolicyRunner` builds
        a rollout: the prompt (everything before the policy's first turn, generation prompt included), then
        each policy turn (:meth:`assistant_ids`, mask 1) and the env/user tokens after it (:meth:`turn_suffix`,
        mask 0), up to the policy's last turn. Assistant messages before ``first_policy`` (a greeting, a task's
        history) belong to the prompt. Why the same construction: SFT then trains on exactly the token
        contexts that GRPO's rollouts produce, also for templates that are not prefix-preserving.
        """
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i >= first_policy]
        if not turns:
            raise ValueError("the conversation has no policy turn")
        ids = self.prompt_ids(messages[: turns[0]], tools)
        mask = [0] * len(ids)
        for j, nxt in zip(turns, turns[1:] + [None]):
            own = self.assistant_ids(messages, j + 1, tools)
            ids += own
            mask += [1] * len(own)
            if nxt is not None:
                env = self.turn_suffix(messages[:nxt], j + 1, tools).ids
                ids += env
                mask += [0] * len(env)
        return ids, mask

    def keeps_generated_turns(self, tools: Optional[Sequence[dict]] = None, reasoning_history: str = "drop") -> bool:
        """Whether a turn the policy generated -- rendered with its reasoning, as the template says the model writes
        it -- is a prefix of the next prompt, the template's rendering of the env's next observation (which holds
        past reasoning only with ``reasoning_history="keep"``). Probed on a turn followed by the customer's next
        message and on a tool call followed by its result. False for Qwen3's template (it drops past ``<think>``
        blocks) under either history, and for any template that renders reasoning under ``"drop"``; True for a
        template that ignores reasoning, or renders it everywhere under ``"keep"``."""
        for generated, after in _reasoning_probes(reasoning_history):
            try:
                turn = self.render(generated, tools, add_generation_prompt=False)
                nxt = self.render(after, tools, add_generation_prompt=True)
            except Exception:  # noqa: BLE001 - a template that cannot render the probe cannot be trusted either
                return False
            cut = self._last_stop(turn)
            head = turn if cut is None else turn[: cut + 1]
            if nxt[: len(head)] != head:
                return False
        return True

    def is_prefix_preserving(self, tools: Optional[Sequence[dict]] = None) -> bool:
        """Whether earlier turns render identically whatever follows (probed on a small tool conversation)."""
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "probe", "arguments": {}}}],
        }
        probe = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            call,
            {"role": "tool", "tool_call_id": "c0", "content": "r"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "v"},
        ]
        try:
            return all(self.turn_suffix(probe[:n], k, tools).exact for k, n in ((3, 4), (5, 6)))
        except TemplateError:
            return False
