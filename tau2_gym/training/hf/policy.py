"""Run a Hugging Face policy on tau2 environments and record token-exact trajectories.

:class:`PolicyRunner` drives a batch of Gymnasium tau2 envs (``obs_format="messages"``) in lockstep: it
renders each observation with the tokenizer's chat template and the env's tool schemas, generates the
next assistant turn of every active episode in one batch (any :class:`~tau2_gym.training.hf.generation.Generator`),
parses tool calls (the tokenizer's response template where it has one, else Hermes/Qwen ``<tool_call>``
blocks, else JSON; see :mod:`tau2_gym.core.parsing`), steps the envs and appends the env/user tokens found by a
prefix diff of the template rendering (:mod:`tau2_gym.training.hf.chat`). Per episode it returns a
:class:`Trajectory`:

- ``prompt_ids``: the first observation, rendered with the generation prompt;
- ``completion_ids``: the policy's sampled tokens and, interleaved, the env/user turns' template tokens;
- ``env_mask``: 1 for the policy's tokens, 0 for env/user tokens (TRL's ``env_mask`` convention);
- ``logprobs``: the policy's per-token log-probabilities, 0.0 for env/user tokens;
- ``reward`` / ``reward_info`` / ``termination_reason``: the env's tau2 result.

Decoding ``completion_ids`` where ``env_mask == 1`` gives exactly the sampled tokens; the rest is exactly
what the chat template renders for the env/user turns. No trailing env tokens follow the policy's last
turn, so a finished episode's completion ends with the policy's stop token.

Thinking models: each turn's ``<think>`` blocks are split from its content by the package's one reasoning split
(:func:`tau2_gym.core.parsing.split_reasoning`; a call written inside a thought is not made) and sent to the env as
the message's ``reasoning_content``, so the customer never sees them. ``sample_mode`` decides how an episode becomes
training data: ``"sequence"`` is the append-only sequence above; ``"per_turn"`` makes one :class:`Sample` per LLM
call -- its prompt is the template's rendering of that turn's observation, re-rendered every turn (what serving
shows the model), its completion that turn's sampled tokens -- for templates that rewrite earlier turns, such as
Qwen3's, which drops past reasoning; ``"auto"`` (default) picks per-turn exactly when a generated turn does not stay
a prefix of the next prompt (:func:`tau2_gym.training.hf.chat.resolve_sample_mode`); the choice is recorded as
``Trajectory.sample_mode``. :meth:`Trajectory.training_samples` gives either as a list of samples.

Runner-side endings (the env's episode is then unfinished and scores 0.0, like upstream's step limit):
``max_tokens`` (the completion budget ``max_completion_tokens`` is used up; the completion is cut to it)
and ``max_turns``. A turn cut by the per-turn limit ``max_new_tokens`` is still sent to the env, and the
template's end-of-turn token is appended as an env token (mask 0) to close it (per-turn samples end where the
generation stopped). In per-turn mode ``max_completion_tokens`` bounds each turn, not the episode.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

from tau2_gym.core.parsing import ParsedCall, has_response_parser, join_reasoning, parse_tool_calls, split_reasoning
from tau2_gym.core.settings import DROP
from tau2_gym.core.termination import MAX_TOKENS
from tau2_gym.training.hf.chat import PER_TURN, SAMPLE_MODES, SEQUENCE, ChatRenderer, resolve_sample_mode
from tau2_gym.training.hf.generation import Generation, Generator, HFGenerator

logger = logging.getLogger(__name__)

__all__ = ["PolicyRunner", "Sample", "Trajectory", "TurnRecord", "hf_runner", "parse_turn", "to_action"]

MAX_TURNS = "max_turns"
_PREFIX_TAIL = 256  # tokens of context handed to a response parser as its `prefix`


@dataclass
class TurnRecord:
    """One policy turn: where its tokens sit in ``completion_ids`` and what became of them."""

    start: int
    end: int
    text: str
    finish_reason: str
    parse_error: Optional[str] = None
    reasoning: Optional[str] = None
    env_tokens: int = 0  # env/user tokens appended after this turn (incl. a closing token)
    exact_suffix: bool = True  # False: found by counting end-of-turn tokens (not prefix-preserving)
    sample: Optional[int] = None  # per-turn mode: the index of this turn's Sample (start/end are within it)


@dataclass
class Sample:
    """One training sample: ``prompt_ids`` then ``completion_ids``, ``env_mask`` 1 on the policy's own tokens,
    ``logprobs`` per completion token (0.0 on env tokens). A per-turn sample is one LLM call (mask all 1)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]


@dataclass
class Trajectory:
    """One episode as token ids, with the tau2 outcome (see the module docstring for the fields)."""

    task_id: Optional[str]
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    reward_info: Optional[dict] = None
    termination_reason: Optional[str] = None
    truncated: bool = False
    messages: list[dict] = field(default_factory=list)  # the agent's final view (OpenAI format)
    tools: list[dict] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # the env's final info (simulation_run, ...)
    sample_mode: str = SEQUENCE  # how this episode is trained on: one sequence, or `samples` (one per LLM call)
    samples: list[Sample] = field(default_factory=list)  # per-turn mode: one per policy turn, in order

    def training_samples(self) -> list[Sample]:
        """The episode as training samples, in lists of their own: the one append-only sequence, or one sample per
        policy turn (every sample of an episode shares its reward)."""
        if self.sample_mode == PER_TURN:
            return [
                Sample(list(s.prompt_ids), list(s.completion_ids), list(s.env_mask), list(s.logprobs))
                for s in self.samples
            ]
        return [Sample(list(self.prompt_ids), list(self.completion_ids), list(self.env_mask), list(self.logprobs))]

    @property
    def num_policy_tokens(self) -> int:
        if self.sample_mode == PER_TURN:
            return sum(len(s.completion_ids) for s in self.samples)
        return sum(self.env_mask)

    @property
    def inexact_turns(self) -> int:
        """Turns whose env tokens were located by counting end-of-turn tokens (template not prefix-preserving)."""
        return sum(not t.exact_suffix for t in self.turns)

    def policy_token_ids(self) -> list[int]:
        if self.sample_mode == PER_TURN:
            return [t for s in self.samples for t in s.completion_ids]
        return [t for t, m in zip(self.completion_ids, self.env_mask) if m]

    def summary(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "reward": self.reward,
            "termination_reason": self.termination_reason,
            "prompt_tokens": len(self.prompt_ids),
            "completion_tokens": len(self.completion_ids),
            "policy_tokens": self.num_policy_tokens,
            "turns": len(self.turns),
            "sample_mode": self.sample_mode,
        }


def to_action(parsed: ParsedCall, text: str) -> Union[str, dict]:
    """The env action for one parsed turn: an OpenAI assistant message (its reasoning as ``reasoning_content``), or
    the raw text when the tool-call markup could not be read (the env's own ``parser`` then decides; by default the
    episode ends as ``agent_error``, as upstream). Call ids are left to the env (per-episode ``call_<n>``)."""
    if parsed.error is not None:
        return text
    content = parsed.content
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if parsed.tool_calls:
        msg["tool_calls"] = [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in parsed.tool_calls
        ]
    if parsed.reasoning is not None:
        msg["reasoning_content"] = parsed.reasoning
    return msg


def parse_turn(
    text: str,
    parser: Union[str, Callable[..., ParsedCall]] = "auto",
    tokenizer: Any = None,
    *,
    prefix: Optional[str] = None,
    tools: Optional[list] = None,
) -> ParsedCall:
    """One generated turn as content, tool calls and reasoning: the reasoning is split off first, by the package's
    one split (a call written inside a thought is not made), then the rest is parsed for tool calls."""
    body, thought = split_reasoning(text)
    parsed = parse_tool_calls(body or "", parser, tokenizer, prefix=prefix, tools=tools)
    parsed.reasoning = join_reasoning(thought, parsed.reasoning)
    return parsed


@dataclass
class _Episode:
    index: int
    traj: Trajectory
    messages: list[dict]
    tools: list[dict]
    done: bool = False
    pending: Any = None  # (action, stopped, turn) between generation and the env step
    # sequence mode: the prompt, then the completion so far -- the context every turn continues, one list appended
    # to and handed to the generator as it is (a copy per turn grew with the episode, and each was walked by the
    # young garbage collections of its turn); the trajectory's prompt_ids and completion_ids are cut from it at
    # the end. None in per-turn mode.
    tokens: Optional[list[int]] = None
    prompt_len: int = 0

    def settle(self) -> None:
        """Cut the trajectory's ``prompt_ids`` and ``completion_ids`` from the one sequence (sequence mode)."""
        tokens = self.tokens
        if tokens is not None:
            self.traj.prompt_ids, self.traj.completion_ids = tokens[: self.prompt_len], tokens[self.prompt_len :]
            self.tokens = None


class _EnvList:
    """Single Gymnasium envs, stepped one after another."""

    def __init__(self, envs: Sequence[Any]) -> None:
        self.envs = list(envs)

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, idx: Sequence[int], seeds: Sequence[Optional[int]], options: Sequence[Optional[dict]]) -> dict:
        return {i: self.envs[i].reset(seed=s, options=o) for i, s, o in zip(idx, seeds, options)}

    def step(self, idx: Sequence[int], actions: Sequence[Any]) -> dict:
        return {i: self.envs[i].step(a) for i, a in zip(idx, actions)}


class _VectorEnvs:
    """A :class:`~tau2_gym.envs.vector.Tau2VectorEnv`: only the active sub-envs are reset and stepped
    (``reset_slots`` / ``step_slots``), their user turns answered in one batch per round."""

    def __init__(self, vec: Any) -> None:
        self.vec = vec

    def __len__(self) -> int:
        return int(self.vec.num_envs)

    def reset(self, idx: Sequence[int], seeds: Sequence[Optional[int]], options: Sequence[Optional[dict]]) -> dict:
        return self.vec.reset_slots(idx, seeds, options)

    def step(self, idx: Sequence[int], actions: Sequence[Any]) -> dict:
        return self.vec.step_slots(idx, actions)


def _drivers(envs: Any) -> Any:
    inner = getattr(envs, "unwrapped", envs)
    if hasattr(inner, "step_slots") and hasattr(inner, "reset_slots") and hasattr(inner, "num_envs"):
        return _VectorEnvs(inner)
    return _EnvList(envs)


def envs_reasoning_history(envs: Any) -> str:
    """The ``reasoning_history`` the envs show their observations with (their config's; ``"drop"`` if unknown)."""
    inner = getattr(envs, "unwrapped", envs)
    if hasattr(inner, "envs") and hasattr(inner, "num_envs"):  # a vector env: its sub-envs' settings
        first = getattr(inner, "template", None) or inner.envs[0]
    else:
        first = next(iter(envs), None)
    config = getattr(getattr(first, "unwrapped", first), "config", None)
    return getattr(config, "reasoning_history", DROP)


class PolicyRunner:
    """Roll out a policy (a generation backend + its tokenizer) on tau2 envs; see the module docstring.

    Args:
        generator: the backend (:class:`~tau2_gym.training.hf.generation.HFGenerator`, TRL's vLLM adapter, ...).
        tokenizer: the policy's tokenizer (chat template, decoding, response parsing).
        parser: tool-call parser for the generated text (``"auto"``: the tokenizer's response template,
            else Hermes ``<tool_call>``, else JSON), or a callable (see :func:`tau2_gym.core.parsing.parse_tool_calls`).
        max_new_tokens: token limit of one policy turn.
        max_completion_tokens: token budget of a whole episode's completion (policy + env tokens); None: none.
        max_turns: policy turns per episode; None: no limit (the env's own step limit still applies).
        chat_template, chat_template_kwargs: override the tokenizer's template / pass template variables
            (e.g. ``{"enable_thinking": False}``).
        sample_mode: ``"auto"`` (default), ``"sequence"`` or ``"per_turn"`` (see the module docstring).
        reasoning_history: what the envs' observations show of past reasoning (default: read from the envs).
    """

    def __init__(
        self,
        generator: Generator,
        tokenizer: Any,
        *,
        parser: Union[str, Callable[..., ParsedCall]] = "auto",
        max_new_tokens: int = 512,
        max_completion_tokens: Optional[int] = None,
        max_turns: Optional[int] = None,
        chat_template: Optional[str] = None,
        chat_template_kwargs: Optional[dict[str, Any]] = None,
        sample_mode: str = "auto",
        reasoning_history: Optional[str] = None,
    ) -> None:
        if sample_mode not in SAMPLE_MODES:
            raise ValueError(f"sample_mode={sample_mode!r}; choose one of {', '.join(SAMPLE_MODES)}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
        if max_completion_tokens is not None and max_completion_tokens < 1:
            raise ValueError(f"max_completion_tokens must be >= 1 or None; got {max_completion_tokens}")
        self.generator = generator
        self.tokenizer = tokenizer
        self.parser = parser
        self.max_new_tokens = int(max_new_tokens)
        self.max_completion_tokens = max_completion_tokens
        self.max_turns = max_turns
        self.renderer = ChatRenderer(
            tokenizer,
            stop_ids=generator.stop_ids,
            chat_template=chat_template,
            chat_template_kwargs=chat_template_kwargs,
        )
        self._needs_prefix = parser == "transformers" or (parser == "auto" and has_response_parser(tokenizer))
        self._warned_inexact = False
        self.sample_mode = sample_mode
        self.reasoning_history = reasoning_history
        self._resolved: dict[tuple[str, str], str] = {}

    def resolve_sample_mode(
        self, reasoning_history: Optional[str] = None, tools: Optional[Sequence[dict]] = None
    ) -> str:
        """``"sequence"`` or ``"per_turn"`` for envs whose observations follow ``reasoning_history`` (default: the
        runner's, else ``"drop"``); ``"auto"`` is decided by rendering, once per history."""
        history = reasoning_history or self.reasoning_history or DROP
        key = (self.sample_mode, history)
        if key not in self._resolved:
            self._resolved[key] = resolve_sample_mode(self.sample_mode, self.renderer, tools, history)
        return self._resolved[key]

    # ------------------------------------------------------------------ public API

    def run(
        self,
        envs: Any,
        options: Optional[Sequence[Optional[dict]]] = None,
        seeds: Optional[Sequence[Optional[int]]] = None,
    ) -> list[Trajectory]:
        """Reset every env (``options[i]``, e.g. ``{"task_id": ...}``; ``seeds[i]``), play the episodes to
        the end in lockstep, and return one :class:`Trajectory` per env, in order.

        ``envs``: a list of tau2 envs (``obs_format="messages"``), or a
        :class:`~tau2_gym.envs.vector.Tau2VectorEnv` -- then the customers' turns of all episodes are answered in
        one batch per round (what an LLM user simulator needs to be fast).
        """
        drivers = _drivers(envs)
        mode = self.resolve_sample_mode(self.reasoning_history or envs_reasoning_history(envs))
        n = len(drivers)
        options = list(options) if options is not None else [None] * n
        seeds = list(seeds) if seeds is not None else [None] * n
        if len(options) != n or len(seeds) != n:
            raise ValueError(f"{n} envs but {len(options)} options and {len(seeds)} seeds")
        with self.generator.session():
            resets = drivers.reset(range(n), seeds, options)
            episodes = [self._start(i, *resets[i], mode) for i in range(n)]
            over = [e for e in episodes if e.pending is not None]  # ended during reset: fetch the terminal step
            self._step(drivers, over)
            while True:
                active = [e for e in episodes if not e.done]
                if not self.generator.keep_going(bool(active)):
                    break
                contexts = [self._context(e) for e in active]
                limits = [self._turn_limit(e) for e in active]
                generations = self.generator.generate(contexts, limits)
                if len(generations) != len(active):
                    raise RuntimeError(
                        f"the generator returned {len(generations)} generations for {len(active)} contexts"
                    )
                for ep, gen, ctx in zip(active, generations, contexts):
                    self._policy_turn(ep, gen, ctx)
                # per-turn contexts are fresh renderings: not held through the customers' round, where every
                # young-generation garbage collection would walk them
                del contexts, generations
                self._step(drivers, [e for e in active if e.pending is not None])
        for e in episodes:
            e.settle()
        return [e.traj for e in episodes]

    # ------------------------------------------------------------------ episode steps

    def _start(self, index: int, obs: Any, info: dict, mode: str = SEQUENCE) -> _Episode:
        if not isinstance(obs, list):
            raise ValueError(
                "PolicyRunner needs observations as chat messages: make the env with "
                f"obs_format='messages' (got {type(obs).__name__})"
            )
        tools = list(info.get("tools") or [])
        prompt = self.renderer.prompt_ids(obs, tools)
        traj = Trajectory(
            task_id=info.get("task_id"),
            prompt_ids=prompt if mode == PER_TURN else [],
            messages=obs,
            tools=tools,
            sample_mode=mode,
        )
        ep = _Episode(index, traj, obs, tools)
        if mode != PER_TURN:
            ep.tokens, ep.prompt_len = prompt, len(prompt)
        if info.get("episode_over"):  # ended during reset: the next step returns the terminal transition
            ep.pending = ("", True, None)
        elif self.max_turns is not None and self.max_turns < 1:
            self._stop(ep, MAX_TURNS)
        return ep

    def _context(self, ep: _Episode) -> list[int]:
        """The tokens the policy's next turn is generated after: the append-only sequence so far (the episode's own
        list, read-only to the generator), or (per turn) the template's rendering of the current observation -- the
        first one is the trajectory's prompt."""
        traj = ep.traj
        if ep.tokens is None:
            return list(traj.prompt_ids) if not traj.samples else self.renderer.prompt_ids(ep.messages, ep.tools)
        return ep.tokens

    def _turn_limit(self, ep: _Episode) -> int:
        limit = self.max_new_tokens
        if self.max_completion_tokens is not None:
            used = 0 if ep.tokens is None else len(ep.traj.env_mask)  # one mask entry per completion token
            limit = min(limit, self.max_completion_tokens - used)
        return limit

    def _parse(self, text: str, context: Sequence[int], tools: list[dict]) -> ParsedCall:
        prefix = None
        if self._needs_prefix:
            prefix = self.tokenizer.decode(list(context[-_PREFIX_TAIL:]), skip_special_tokens=False)
        return parse_turn(text, self.parser, self.tokenizer, prefix=prefix, tools=tools)

    def _policy_turn(self, ep: _Episode, gen: Generation, context: list[int]) -> None:
        """Record the generated turn and decide the env action (stepped later, with the other episodes)."""
        traj, sequence = ep.traj, ep.tokens
        if sequence is not None and len(sequence) != ep.prompt_len + len(traj.env_mask):
            raise RuntimeError(
                f"the generator changed the context of episode {ep.index} it was handed (now {len(sequence)} "
                f"tokens, was {ep.prompt_len + len(traj.env_mask)}): contexts are the runner's own lists; copy one "
                "before changing it"
            )
        tokens = list(gen.token_ids)
        if not tokens and gen.finish_reason == "length":  # no budget left for another turn
            self._stop(ep, MAX_TOKENS)
            return
        stopped = bool(tokens) and tokens[-1] in self.generator.stop_ids
        logprobs = [float(x) for x in gen.logprobs[: len(tokens)]]
        if len(logprobs) != len(tokens):
            raise RuntimeError(f"the generator returned {len(gen.logprobs)} logprobs for {len(tokens)} tokens")
        text = self.tokenizer.decode(tokens[:-1] if stopped else tokens, skip_special_tokens=False)
        parsed = self._parse(text, context, ep.tools)  # before the context grows by this turn
        sample = None
        if sequence is None:  # per turn: one sample per LLM call, this turn's prompt and tokens
            sample = len(traj.samples)
            # the context is this turn's own list (a fresh rendering, or a copy of the prompt): kept, not copied
            traj.samples.append(Sample(context, tokens, [1] * len(tokens), logprobs))
            start, end = 0, len(tokens)
        else:
            start = len(traj.env_mask)
            sequence.extend(tokens)
            traj.env_mask.extend([1] * len(tokens))
            traj.logprobs.extend(logprobs)
            end = len(traj.env_mask)
        turn = TurnRecord(
            start=start,
            end=end,
            text=text,
            finish_reason=gen.finish_reason,
            parse_error=parsed.error,
            reasoning=parsed.reasoning,
            sample=sample,
        )
        traj.turns.append(turn)
        ep.pending = (to_action(parsed, text), stopped, turn)

    def _step(self, drivers: Any, episodes: list[_Episode]) -> None:
        if not episodes:
            return
        results = drivers.step([e.index for e in episodes], [e.pending[0] for e in episodes])
        for ep in episodes:
            _, stopped, turn = ep.pending
            ep.pending = None
            self._after_step(ep, results[ep.index], stopped, turn)

    def _after_step(self, ep: _Episode, result: tuple, stopped: bool, turn: Optional[TurnRecord]) -> None:
        """Append the env/user tokens that follow the policy's turn (or record the episode's end)."""
        traj = ep.traj
        obs, reward, terminated, truncated, info = result
        if terminated or truncated or turn is None:
            self._finish(ep, obs, reward, truncated, info)
            return
        tokens = ep.tokens
        if tokens is None:  # per turn: the next prompt is rendered from the observation itself
            ep.messages = obs
            traj.messages = obs
            if self.max_turns is not None and len(traj.turns) >= self.max_turns:
                self._stop(ep, MAX_TURNS)
            return
        k = len(ep.messages) + 1  # the history now ends with our message at k - 1, then the env/user turns
        if len(obs) <= k or obs[k - 1].get("role") != "assistant":
            raise RuntimeError(
                f"unexpected observation after the agent's turn (episode {ep.index}, task "
                f"{traj.task_id!r}): expected the previous {k - 1} messages, the agent's message and "
                f"new messages; got {len(obs)} messages"
            )
        closing = [] if stopped else [self.renderer.turn_end_token(obs[:k], ep.tools)]
        suffix = self.renderer.turn_suffix(obs, k, ep.tools)
        if not suffix.exact and not self._warned_inexact:
            self._warned_inexact = True
            logger.warning(
                "the chat template is not prefix-preserving (it re-renders earlier turns); env/user "
                "tokens are located by counting end-of-turn tokens and the context stays append-only. "
                "Pass a prefix-preserving chat_template to avoid this."
            )
        env_ids = closing + suffix.ids
        tokens.extend(env_ids)
        traj.env_mask.extend([0] * len(env_ids))
        traj.logprobs.extend([0.0] * len(env_ids))
        turn.env_tokens, turn.exact_suffix = len(env_ids), suffix.exact
        ep.messages = obs
        traj.messages = obs
        if self.max_completion_tokens is not None and len(traj.env_mask) >= self.max_completion_tokens:
            cut = self.max_completion_tokens
            del tokens[ep.prompt_len + cut :], traj.env_mask[cut:], traj.logprobs[cut:]
            self._stop(ep, MAX_TOKENS)
        elif self.max_turns is not None and len(traj.turns) >= self.max_turns:
            self._stop(ep, MAX_TURNS)

    def _finish(self, ep: _Episode, obs: Any, reward: float, truncated: bool, info: dict) -> None:
        traj = ep.traj
        traj.reward = float(reward)
        traj.reward_info = info.get("reward_info")
        traj.termination_reason = info.get("termination_reason")
        traj.truncated = bool(truncated)
        traj.info = info
        if isinstance(obs, list):
            traj.messages = obs
        ep.done = True

    def _stop(self, ep: _Episode, reason: str) -> None:
        """A runner-side ending: the env's episode stays unfinished and scores 0.0."""
        traj = ep.traj
        traj.reward, traj.reward_info, traj.termination_reason, traj.truncated = 0.0, None, reason, True
        ep.done = True


def hf_runner(
    model: Any,
    tokenizer: Any,
    *,
    max_new_tokens: int = 512,
    max_completion_tokens: Optional[int] = None,
    max_turns: Optional[int] = None,
    parser: Union[str, Callable[..., ParsedCall]] = "auto",
    chat_template: Optional[str] = None,
    chat_template_kwargs: Optional[dict[str, Any]] = None,
    sample_mode: str = "auto",
    **generation: Any,
) -> PolicyRunner:
    """A :class:`PolicyRunner` over ``model.generate`` (``generation``: :class:`HFGenerator` arguments such as
    ``do_sample``, ``temperature``, ``batch_size``, ``logits_processor``)."""

    return PolicyRunner(
        HFGenerator(model, tokenizer, **generation),
        tokenizer,
        parser=parser,
        max_new_tokens=max_new_tokens,
        max_completion_tokens=max_completion_tokens,
        max_turns=max_turns,
        chat_template=chat_template,
        chat_template_kwargs=chat_template_kwargs,
        sample_mode=sample_mode,
    )
