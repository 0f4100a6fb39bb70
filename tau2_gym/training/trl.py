"""GRPO on tau2 environments with TRL (tested with trl 1.16, transformers 5.24).

Two ways in:

1. ``rollout_func`` (recommended): :func:`make_rollout_func` returns a function for
   ``GRPOTrainer(rollout_func=...)``. Each received prompt names a task (:func:`build_dataset` makes such
   prompts: :func:`task_prompt`); TRL has already repeated every prompt ``num_generations`` times, so the
   function plays one episode per prompt -- all of them in lockstep, batched generation -- with
   :class:`~tau2_gym.training.hf.policy.PolicyRunner` and returns, per episode, ``prompt_ids``, ``completion_ids``
   (policy tokens interleaved with the env/user turns' template tokens), ``logprobs``, ``env_mask``
   (1 = policy token; TRL masks the rest out of the loss) and the extra fields ``tau2_reward``,
   ``upstream_reward``, ``tau2_masked``, ``reward_info``, ``termination_reason``, ``task_id`` and ``split``,
   which TRL forwards to reward functions -- :func:`tau2_reward` reads the first. The rollouts of one prompt
   share one reset seed (``group_seed=True``), hence one user-simulator seed: as in TRL's own groups (one
   prompt, G samples), the group differs only by what the policy sampled. Honest signals: an episode
   that failed for infrastructure reasons (``user_error``, ``infrastructure_error``, a failed evaluation such
   as an NL judge error) is masked out of the gradient (reward ``None``, the TRL convention, and an all-zero
   ``env_mask``), counted and logged, never trained on as a policy failure; a malformed tool call is the
   policy's (``agent_error``, reward 0, trained on). Split guard: prompts must name tasks of the training
   split (``train`` by default; ``test`` tasks only with ``allow_test_split=True``). The model sees the exact tau2
   conversation: the domain's tool
   schemas, the customer's messages as ``user`` turns, tool results as ``tool`` turns.
   Generation uses the trainer's model (``model.generate`` with the trainer's sampling settings) or,
   with ``use_vllm=True``, TRL's vLLM backend (server or colocate mode), one batched request per turn.

2. ``environment_factory``: :func:`make_environment_factory` adapts a tau2 env to TRL's built-in tool loop.
   TRL only continues a rollout while the model calls tools, so the customer is exposed as a tool too:
   ``send_message_to_user(message)`` sends a text to the customer and returns the customer's reply as the
   tool result. The chat changes accordingly: every agent text becomes a tool call, customer replies
   arrive as ``tool`` messages, an answer without tool calls ends the rollout (an unfinished episode
   scores 0.0), several calls in one message run one after another (tau2 records them as separate agent
   turns), and the tool schemas are the ones TRL derives from Python signatures (nested object types
   appear as plain ``object``/``array``). Solo mode has no customer, so no such tool: ``done`` ends the
   episode. Use :func:`build_dataset` with ``environment=True``.

Multi-process training: episodes run per process; the vLLM backend pads every turn's batch to the same
size on all processes, so the collective calls line up. With local generation, DeepSpeed ZeRO-3 needs
``ds3_gather_for_generation=True`` (the default), since processes run different numbers of forward passes.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import threading
from collections import Counter
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Literal, Optional, Sequence, Union

from tau2_gym.core.domain import load_domain
from tau2_gym.core.orchestrator import solo_task_error
from tau2_gym.envs import env_id
from tau2_gym.envs.baseline import without_do_nothing_passes
from tau2_gym.envs.episode import USER, EpisodeSetup
from tau2_gym.players.users import resolve_user
from tau2_gym.scoring.judges import apply_no_judge_choice, make_judge
from tau2_gym.scoring.rewards import infrastructure_failure
from tau2_gym.training.export import SplitGuardError, training_split
from tau2_gym.training.hf.generation import Generation, HFGenerator, finish_row
from tau2_gym.training.hf.policy import PolicyRunner, Trajectory

logger = logging.getLogger(__name__)

__all__ = [
    "build_dataset",
    "task_prompt",
    "parse_task_prompt",
    "make_rollout_func",
    "Tau2Rollout",
    "tau2_reward",
    "rollout_output",
    "make_environment_factory",
    "Tau2ToolEnv",
    "TRLLocalGenerator",
    "TRLVLLMGenerator",
    "SEND_MESSAGE_TOOL",
    "masked_reason",
    "INFRASTRUCTURE_REASONS",
]

SEND_MESSAGE_TOOL = "send_message_to_user"
_TASK_KEYS = ("tau2_domain", "tau2_task_id")


# ----------------------------------------------------------------------------------------- prompts


def task_prompt(domain: str, task_id: str) -> str:
    """The dataset prompt that names one task: a small JSON object (what the rollout function resets to)."""
    return json.dumps({"tau2_domain": domain, "tau2_task_id": str(task_id)})


def parse_task_prompt(prompt: Any) -> tuple[str, str]:
    """``(domain, task_id)`` of a prompt made by :func:`task_prompt` (also inside a chat message list)."""
    value = prompt
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        value = value[-1].get("content")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if isinstance(value, dict) and all(isinstance(value.get(k), str) for k in _TASK_KEYS):
        return value["tau2_domain"], value["tau2_task_id"]
    raise ValueError(
        f"prompt {str(prompt)[:200]!r} does not name a tau2 task; build the dataset with "
        "tau2_gym.training.trl.build_dataset (prompts made by task_prompt(domain, task_id))"
    )


def build_dataset(
    domain: str = "mock",
    *,
    split: Optional[str] = "train",
    task_set: Optional[str] = None,
    task_ids: Optional[Sequence[str]] = None,
    data_dir: Optional[str] = None,
    repeats: int = 1,
    environment: bool = False,
    solo: bool = False,
    data_version: Optional[str] = None,
    judge: Any = None,
    allow_test_split: bool = False,
    exclude_do_nothing_passes: bool = False,
    reward_mode: str = "default",
) -> Any:
    """A ``datasets.Dataset`` with one row per task of a domain split (``repeats`` times over).

    The split defaults to ``train``; tasks of the ``test`` split (``split="test"``, ``None`` = all, ``"base"``,
    or such ``task_ids``) are refused unless ``allow_test_split=True`` (see
    :func:`tau2_gym.training.export.training_split`; a domain without train/test splits, such as mock, gives all tasks).

    Columns: ``prompt``, ``task_id``, ``domain``, ``split`` (recorded). For ``rollout_func`` training (default) the
    prompt is
    :func:`task_prompt`; with ``environment=True`` (TRL's ``environment_factory``) it is the agent's
    opening view -- system prompt, greeting or task history -- ending with an empty user message that the
    environment's ``reset`` fills with the customer's first message. ``data_version`` / ``data_dir`` choose
    the data (default tau2-bench==1.0.1); ``judge`` is the env's NL judge: ``"exclude"`` leaves out the tasks
    whose reward needs one, the default (no judge) warns when there are such tasks.
    ``exclude_do_nothing_passes`` leaves out the tasks a do-nothing policy passes under ``reward_mode`` (as the
    env option of that name; :mod:`tau2_gym.envs.baseline`).
    """
    from datasets import Dataset

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1; got {repeats}")

    loaded = load_domain(domain, data_dir, data_version)
    ids, recorded = training_split(loaded, split, task_set=task_set, allow_test_split=allow_test_split)
    by_id = {t.id: t for t in loaded.tasks(task_set, None)}
    if task_ids is not None:  # a subset of the split, in the caller's order
        outside = [str(t) for t in task_ids if str(t) not in set(ids)]
        if outside:
            raise ValueError(
                f"task_ids {outside[:5]} of domain {domain!r} are not in split {recorded!r}; "
                "choose the split that holds them (test tasks need allow_test_split=True)"
            )
        ids = tuple(str(t) for t in task_ids)
    tasks = [by_id[i] for i in ids]
    if solo:
        tasks = [t for t in tasks if solo_task_error(t) is None]
    if not tasks:
        raise ValueError(f"no tasks for domain {domain!r} (task_set={task_set!r}, split={split!r})")

    tasks = list(
        apply_no_judge_choice(
            loaded, tasks, judge if hasattr(judge, "assess") else make_judge(judge), f"dataset of {domain!r}"
        )
    )
    if exclude_do_nothing_passes:
        tasks = list(without_do_nothing_passes(loaded, tasks, reward_mode, judge))
    rows: dict[str, list] = {"prompt": [], "task_id": [], "domain": [], "split": []}
    for task in tasks:
        prompt: Any = opening_messages(loaded, task, solo) if environment else task_prompt(domain, task.id)
        for _ in range(repeats):
            rows["prompt"].append(prompt)
            rows["task_id"].append(task.id)
            rows["domain"].append(domain)
            rows["split"].append(recorded)
    return Dataset.from_dict(rows)


def opening_messages(loaded: Any, task: Any, solo: bool = False) -> list[dict[str, Any]]:
    """The agent's view before the customer's first turn (+ an empty user message when that turn is next).

    Tool-call arguments stay JSON strings (a dataset needs one schema for every row).
    """
    episode = EpisodeSetup(loaded, solo=solo).start(task)
    messages = episode.agent_messages()
    if episode.status == USER:
        messages.append({"role": "user", "content": ""})
    return messages


# ----------------------------------------------------------------------------------------- rewards


def tau2_reward(
    prompts: Any = None,
    completions: Any = None,
    tau2_reward: Optional[list] = None,
    tau2_masked: Optional[list] = None,
    log_metric: Optional[Callable[[str, float], None]] = None,
    **kwargs: Any,
) -> list[Optional[float]]:
    """TRL reward function: the reward the rollout function computed for each episode (the env's reward under
    its ``reward_mode``; upstream's raw reward is the ``upstream_reward`` field).

    An episode that failed for infrastructure reasons (``tau2_masked``: ``user_error``, ``infrastructure_error``,
    ``evaluation_error``) gets ``None`` -- TRL's convention for "no reward": the trainer turns it into NaN,
    leaves it out of the group baseline and the logged reward, and gives it advantage 0 (the rollout function
    also zeroes its ``env_mask``, so none of its tokens enters the loss). With TRL's ``log_metric`` the counts
    are logged as ``tau2/masked_fraction`` and ``tau2/masked/<reason>``.
    """
    if tau2_reward is None:
        raise ValueError("tau2_reward needs the 'tau2_reward' field; use it with make_rollout_func's rollout function")
    masked = list(tau2_masked) if tau2_masked is not None else [None] * len(tau2_reward)
    out = [None if (r is None or why) else float(r) for r, why in zip(tau2_reward, masked)]
    if log_metric is not None and out:
        reasons = [why for why in masked if why]
        log_metric("tau2/masked_fraction", len(reasons) / len(out))
        for why in INFRASTRUCTURE_REASONS:
            log_metric(f"tau2/masked/{why}", float(reasons.count(why)))
    return out


#: The ``tau2_masked`` reasons (see :func:`tau2_gym.scoring.rewards.infrastructure_failure`).
INFRASTRUCTURE_REASONS = ("user_error", "infrastructure_error", "evaluation_error")


def masked_reason(t: Trajectory) -> Optional[str]:
    """Why a trajectory carries no signal about the policy (None: it does): see ``tau2_gym.scoring.rewards``."""
    return infrastructure_failure(t.termination_reason, t.info)


def rollout_output(
    trajectories: Sequence[Trajectory], stop_id: int, splits: Optional[Sequence[Optional[str]]] = None
) -> dict[str, list]:
    """The dict a TRL ``rollout_func`` returns for these trajectories (one entry each, in order).

    An episode that ended before the policy's first turn gets a one-token completion (``stop_id``, masked
    out) because TRL reads each completion's last token. An infrastructure failure (:func:`masked_reason`)
    gets reward ``None`` and an all-zero ``env_mask``: it is masked out of the gradient, never a policy failure.
    ``splits`` (recorded per episode as ``split``) are the training splits the tasks were checked against.
    """
    out: dict[str, list] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "tau2_reward": [],
        "upstream_reward": [],
        "tau2_masked": [],
        "reward_info": [],
        "termination_reason": [],
        "task_id": [],
        "split": [],
    }
    splits = list(splits) if splits is not None else [None] * len(trajectories)
    for t, split in zip(trajectories, splits):
        completion, mask, logprobs = list(t.completion_ids), list(t.env_mask), list(t.logprobs)
        if not completion:
            completion, mask, logprobs = [stop_id], [0], [0.0]
        why = masked_reason(t)
        if why is not None:
            mask = [0] * len(completion)
        out["prompt_ids"].append(list(t.prompt_ids))
        out["completion_ids"].append(completion)
        out["logprobs"].append(logprobs)
        out["env_mask"].append(mask)
        out["tau2_reward"].append(None if why is not None else float(t.reward))
        out["upstream_reward"].append(float(t.info.get("tau2_reward", t.reward)))
        out["tau2_masked"].append(why)
        out["reward_info"].append(t.reward_info)
        out["termination_reason"].append(t.termination_reason)
        out["task_id"].append(t.task_id)
        out["split"].append(split)
    return out


# ----------------------------------------------------------------------------------------- generators


def _tokenizer_of(trainer: Any) -> Any:
    tok = getattr(trainer, "_tokenizer", None) or trainer.processing_class
    return getattr(tok, "tokenizer", tok)


class TRLLocalGenerator:
    """Generates with the trainer's own model (as TRL does without vLLM): unwrapped once per rollout,
    sampling with the trainer's temperature / top-p / top-k / min-p / repetition penalty."""

    def __init__(
        self, trainer: Any, *, batch_size: Optional[int] = None, logits_processor: Optional[Sequence[Any]] = None
    ) -> None:
        self.trainer = trainer
        self.tokenizer = _tokenizer_of(trainer)
        self.stop_ids = frozenset(int(i) for i in trainer.eos_token_ids)
        self.batch_size = batch_size
        self.logits_processor = list(logits_processor or [])
        self._hf: Optional[HFGenerator] = None

    def keep_going(self, active: bool) -> bool:
        return active

    @contextmanager
    def session(self) -> Iterator[None]:
        import torch
        from trl.models import unwrap_model_for_generation

        t = self.trainer
        args = t.args
        with ExitStack() as stack:
            model = stack.enter_context(
                unwrap_model_for_generation(
                    t.model_wrapped,
                    t.accelerator,
                    gather_deepspeed3_params=args.ds3_gather_for_generation,
                    generation_kwargs=getattr(t, "generation_kwargs", None),
                    gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
                )
            )
            stack.enter_context(torch.no_grad())
            dist = getattr(t, "_dist", None)
            if dist is not None:
                stack.enter_context(dist.summon_full_params(t.model_wrapped, recurse=False))
            self._hf = HFGenerator(
                model,
                self.tokenizer,
                do_sample=True,
                temperature=t.temperature,
                top_p=t.top_p,
                top_k=t.top_k,
                min_p=t.min_p,
                repetition_penalty=t.repetition_penalty,
                batch_size=self.batch_size,
                stop_ids=self.stop_ids,
                generation_config=getattr(t, "generation_config", None),
                logits_processor=self.logits_processor,
            )
            try:
                yield
            finally:
                self._hf = None

    def generate(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> list[Generation]:
        if self._hf is None:
            raise RuntimeError("TRLLocalGenerator.generate must run inside session()")
        return self._hf.generate(contexts, max_new_tokens)


class TRLVLLMGenerator:
    """Generates through the trainer's vLLM backend (``trainer.vllm_generation``: server or colocate mode).

    Every call is collective: all processes call it once per round, each batch padded to the largest
    one across processes (vLLM's backend slices results by equal per-process shares), and rounds go on
    while any process has an active episode (:meth:`keep_going`).
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.backend = trainer.vllm_generation
        self.accelerator = trainer.accelerator
        self.stop_ids = frozenset(int(i) for i in trainer.eos_token_ids)
        self._filler = [min(self.stop_ids)]
        self._lock = threading.Lock()

    def session(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()

    def _global_max(self, value: int) -> int:
        if getattr(self.accelerator, "num_processes", 1) <= 1:
            return value
        import torch

        t = torch.tensor([value], device=self.accelerator.device)
        return int(self.accelerator.gather(t).max().item())

    def keep_going(self, active: bool) -> bool:
        return bool(self._global_max(int(active)))

    def generate(self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> list[Generation]:
        n = len(contexts)
        width = self._global_max(n)
        if width == 0:
            return []
        limit = self._global_max(max(max_new_tokens, default=1))
        prompts = [list(c) for c in contexts] + [list(self._filler)] * (width - n)
        backend = self.backend
        with self._lock:
            saved = backend.max_completion_length
            backend.max_completion_length = max(limit, 1)
            try:
                _, completions, logprobs, _ = backend.generate(prompts=prompts, images=None, num_generations=1)
            finally:
                backend.max_completion_length = saved
        out = []
        for i in range(n):
            row = completions[i]
            if logprobs:  # top-1 entry = the sampled token; vLLM gives None where it has no value
                lps = [lp[0] if lp and lp[0] is not None else float("nan") for lp in logprobs[i]]
            else:
                lps = [0.0] * len(row)
            out.append(finish_row(row, lps, self.stop_ids, max_new_tokens[i]))
        return out


# ----------------------------------------------------------------------------------------- rollout_func


class Tau2Rollout:
    """The ``rollout_func`` object (see :func:`make_rollout_func`); keeps a pool of envs per domain."""

    def __init__(
        self,
        *,
        env_kwargs: Optional[dict[str, Any]] = None,
        max_new_tokens: int = 512,
        max_turns: Optional[int] = None,
        parser: Union[str, Callable[..., Any]] = "auto",
        chat_template: Optional[str] = None,
        chat_template_kwargs: Optional[dict[str, Any]] = None,
        seed: Optional[int] = None,
        use_vllm: Optional[bool] = None,
        batch_size: Optional[int] = None,
        logits_processor: Optional[Sequence[Any]] = None,
        env_factory: Optional[Callable[[str], Any]] = None,
        vectorize: bool = True,
        split: Optional[str] = "train",
        allow_test_split: bool = False,
        group_seed: bool = True,
    ) -> None:
        self.env_kwargs = dict(env_kwargs or {})
        self.env_kwargs.setdefault("obs_format", "messages")
        if self.env_kwargs["obs_format"] != "messages":
            raise ValueError("the rollout function needs obs_format='messages'")
        self.max_new_tokens = int(max_new_tokens)
        self.max_turns = max_turns
        self.parser = parser
        self.chat_template = chat_template
        self.chat_template_kwargs = chat_template_kwargs
        self.seed = seed
        self.group_seed = bool(group_seed)
        self._calls = 0
        self.use_vllm = use_vllm
        self.batch_size = batch_size
        self.logits_processor = list(logits_processor or [])
        self.env_factory = env_factory
        self.vectorize = vectorize
        self._pools: dict[str, list[Any]] = {}
        self._vectors: dict[tuple[str, int], Any] = {}
        self._episodes = 0
        self.last_trajectories: list[Trajectory] = []
        self.last_seeds: list[Optional[int]] = []
        self.split = split
        self.last_splits: list[str] = []
        self.allow_test_split = bool(allow_test_split)
        self._allowed: dict[str, tuple[frozenset, str]] = {}
        self.masked: Counter = Counter()  # infrastructure failures masked out, by reason (whole run)
        self.episodes = 0

    def check_split(self, domain: str, task_id: str) -> str:
        """The recorded training split of a prompt's task; raises when the task lies outside it (test tasks need
        ``allow_test_split=True``)."""
        allowed = self._allowed.get(domain)
        if allowed is None:
            kw = self.env_kwargs
            loaded = load_domain(domain, kw.get("data_dir"), kw.get("data_version"), options=kw.get("domain_options"))
            ids, recorded = training_split(
                loaded, self.split, task_set=kw.get("task_set"), allow_test_split=self.allow_test_split
            )
            allowed = self._allowed[domain] = (frozenset(ids), recorded)
        ids, recorded = allowed
        if task_id not in ids:
            raise SplitGuardError(
                f"task {task_id!r} of domain {domain!r} is not in the training split "
                f"{recorded!r}; build the dataset with build_dataset(split=...) of the same split "
                "(test tasks need allow_test_split=True on both)"
            )
        return recorded

    def _kwargs(self) -> dict[str, Any]:
        """The env arguments, with a user-simulator spec resolved once (all envs share one simulator)."""
        user = self.env_kwargs.get("user")
        if isinstance(user, str) and user not in ("oracle", "oracle_user"):
            self.env_kwargs["user"] = resolve_user(user)
        return dict(self.env_kwargs)

    def make_env(self, domain: str) -> Any:
        if self.env_factory is not None:
            return self.env_factory(domain)
        import gymnasium as gym

        kwargs = self._kwargs()
        solo = bool(kwargs.pop("solo", False))
        return gym.make(env_id(domain, solo), disable_env_checker=True, **kwargs)

    def _vector(self, domain: str, n: int) -> Any:
        key = (domain, n)
        vec = self._vectors.get(key)
        if vec is None:
            import gymnasium as gym

            kwargs = self._kwargs()
            solo = bool(kwargs.pop("solo", False))
            vec = self._vectors[key] = gym.make_vec(env_id(domain, solo), num_envs=n, **kwargs)
        return vec

    def _envs(self, domains: Sequence[str]) -> Any:
        """One vector env (batched user turns) when every prompt is of one domain; else single envs."""
        if self.vectorize and self.env_factory is None and len(set(domains)) == 1:
            return self._vector(domains[0], len(domains))
        taken: dict[str, int] = {}
        envs = []
        for d in domains:
            pool = self._pools.setdefault(d, [])
            i = taken.get(d, 0)
            if i == len(pool):
                pool.append(self.make_env(d))
            taken[d] = i + 1
            envs.append(pool[i])
        return envs

    def runner(self, trainer: Any) -> PolicyRunner:
        use_vllm = bool(getattr(trainer, "use_vllm", False)) if self.use_vllm is None else self.use_vllm
        if use_vllm:
            generator: Any = TRLVLLMGenerator(trainer)
        else:
            generator = TRLLocalGenerator(trainer, batch_size=self.batch_size, logits_processor=self.logits_processor)
        budget = getattr(trainer, "max_completion_length", None) or trainer.args.max_completion_length
        kwargs = self.chat_template_kwargs
        if kwargs is None:
            kwargs = getattr(trainer, "chat_template_kwargs", None) or {}
        return PolicyRunner(
            generator,
            _tokenizer_of(trainer),
            parser=self.parser,
            max_new_tokens=min(self.max_new_tokens, budget),
            max_completion_tokens=budget,
            max_turns=self.max_turns,
            chat_template=self.chat_template,
            chat_template_kwargs=kwargs,
        )

    def episode_seeds(self, refs: Sequence[tuple[str, str]], trainer: Any = None) -> list[Optional[int]]:
        """The reset seeds of one call's episodes (``refs``: their (domain, task id)); counts the call.

        With ``group_seed`` every episode of one (domain, task) in the call gets one seed, a hash of the base
        seed (``seed``, else the trainer's ``args.seed``, else 0), the trainer's ``state.global_step`` (a run
        resumed from a checkpoint does not replay the first steps' seeds), the call number and the task: the
        same in every process (TRL spreads a group over processes; each calls once per generation) and in
        every run with that base. Without it, ``seed + i`` over all episodes so far (None without ``seed``: the
        envs' own RNGs).
        """
        call = self._calls
        self._calls += 1
        start = self._episodes
        self._episodes += len(refs)
        if self.group_seed:
            base = self.seed if self.seed is not None else getattr(getattr(trainer, "args", None), "seed", None)
            base = 0 if base is None else int(base)
            step = getattr(getattr(trainer, "state", None), "global_step", None)
            key = [base, step if isinstance(step, int) else None, call]
            return [
                int.from_bytes(hashlib.sha256(json.dumps(key + [d, t]).encode()).digest()[:4], "big") & 0x7FFFFFFF
                for d, t in refs
            ]
        if self.seed is None:
            return [None] * len(refs)
        return [self.seed + start + i for i in range(len(refs))]

    def run(self, prompts: Sequence[Any], trainer: Any) -> list[Trajectory]:
        refs = [parse_task_prompt(p) for p in prompts]
        self.last_splits = [self.check_split(d, t) for d, t in refs]
        envs = self._envs([d for d, _ in refs])
        seeds = self.episode_seeds(refs, trainer)
        self.last_seeds = seeds
        trajectories = self.runner(trainer).run(envs, [{"task_id": t} for _, t in refs], seeds)
        self.last_trajectories = trajectories
        return trajectories

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        trajectories = self.run(prompts, trainer)
        stop_id = min(int(i) for i in trainer.eos_token_ids)
        out = rollout_output(trajectories, stop_id, self.last_splits)
        self.episodes += len(trajectories)
        reasons = Counter(why for why in out["tau2_masked"] if why)
        if reasons:
            self.masked.update(reasons)
            logger.warning(
                "masked %d of %d episodes out of the gradient (infrastructure, not the policy): %s; run total %s of %d",
                sum(reasons.values()),
                len(trajectories),
                dict(reasons),
                dict(self.masked),
                self.episodes,
            )
        return out


def make_rollout_func(
    *,
    env_kwargs: Optional[dict[str, Any]] = None,
    max_new_tokens: int = 512,
    max_turns: Optional[int] = None,
    parser: Union[str, Callable[..., Any]] = "auto",
    chat_template: Optional[str] = None,
    chat_template_kwargs: Optional[dict[str, Any]] = None,
    seed: Optional[int] = None,
    use_vllm: Optional[bool] = None,
    batch_size: Optional[int] = None,
    logits_processor: Optional[Sequence[Any]] = None,
    env_factory: Optional[Callable[[str], Any]] = None,
    vectorize: bool = True,
    split: Optional[str] = "train",
    allow_test_split: bool = False,
    group_seed: bool = True,
) -> Tau2Rollout:
    """A ``rollout_func`` for ``GRPOTrainer``: one tau2 episode per received prompt (see the module docstring).

    Args:
        env_kwargs: ``gym.make`` arguments of every env (``user``, ``max_steps``, ``solo``, ``judge``, ...).
        max_new_tokens: token limit of one policy turn; the whole completion is limited by the trainer's
            ``max_completion_length`` (an episode that runs out ends as ``max_tokens`` with reward 0.0).
        max_turns: policy turns per episode (None: the env's own step limit decides).
        parser: tool-call parser of the generated text (``"auto"``: the tokenizer's response template, else
            Hermes ``<tool_call>``, else JSON).
        chat_template, chat_template_kwargs: template override / variables (default: the trainer's
            ``chat_template_kwargs``).
        seed: base of the per-episode reset seeds (None: the trainer's ``args.seed`` with ``group_seed``, else
            the envs' own RNGs). A reset seed seeds the env's RNG, which draws the user simulator's seed.
        group_seed: the rollouts of one GRPO group -- the episodes of one (domain, task) in one call; TRL's
            ``RepeatSampler`` sends each prompt ``num_generations`` times in a batch -- share one reset seed, so
            they meet the same user simulator (same seed, same sampled customer replies while their histories
            agree, same opening message) and the group's reward spread comes from the policy alone, which is
            what GRPO's group baseline assumes (as in TRL without an env: one prompt, G samples of the
            policy); the seed changes with every call, so the customer still varies
            over training. A temperature-0 user with the cache on answers the group's identical requests once.
            Deterministic from the base seed, the call number and the task. Default on; ``False``: a distinct
            seed per episode (``seed + i``), for user variety inside a group.
        use_vllm: generate through TRL's vLLM backend (default: when the trainer has ``use_vllm=True``).
        batch_size: contexts per ``generate`` call with local generation (None: all active episodes).
        logits_processor: extra logits processors for local generation.
        env_factory: ``fn(domain) -> env`` instead of ``gym.make("tau2/<domain>-v0", **env_kwargs)``.
        vectorize: run a batch of one domain's prompts in a ``Tau2VectorEnv`` so the customers' turns are
            answered in one batch per round (LLM user simulators batch or run concurrently); else single envs.
        split, allow_test_split: the training split every prompt's task must belong to (default ``train``;
            recorded per episode as ``split``); tasks of the ``test`` split are refused unless
            ``allow_test_split=True`` (see :func:`tau2_gym.training.export.training_split`).

    Episodes that fail for infrastructure reasons (``user_error``, ``infrastructure_error``, a failed
    evaluation) come back with reward ``None`` and an all-zero ``env_mask``: masked out of the gradient,
    counted in ``rollout.masked`` and in TRL's logs (see :func:`tau2_reward`).
    """
    return Tau2Rollout(
        env_kwargs=env_kwargs,
        max_new_tokens=max_new_tokens,
        max_turns=max_turns,
        parser=parser,
        chat_template=chat_template,
        chat_template_kwargs=chat_template_kwargs,
        seed=seed,
        use_vllm=use_vllm,
        batch_size=batch_size,
        logits_processor=logits_processor,
        env_factory=env_factory,
        vectorize=vectorize,
        split=split,
        allow_test_split=allow_test_split,
        group_seed=group_seed,
    )


# ----------------------------------------------------------------------------------------- environment_factory

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def _hint(schema: Any) -> Any:
    """A Python type hint that transformers' ``get_json_schema`` turns back into (about) this JSON schema."""
    if not isinstance(schema, dict):
        return Any
    if "enum" in schema and schema["enum"]:
        return Literal[tuple(schema["enum"])]  # type: ignore[misc]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            hints = [_hint(s) for s in schema[key]]
            non_null = [h for h in hints if h is not type(None)]
            if not non_null:
                return Any
            out = non_null[0] if len(non_null) == 1 else Union[tuple(non_null)]  # type: ignore[valid-type]
            return Optional[out] if len(non_null) < len(hints) else out
    kind = schema.get("type")
    if isinstance(kind, list):
        return _hint({"anyOf": [{"type": k} for k in kind]})
    if kind == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, dict) and items else list
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    if "$ref" in schema or "properties" in schema:
        return dict
    return Any


def _one_line(text: Any) -> str:
    words = " ".join(str(text or "").split())
    for tag in ("Args:", "Returns:", "Raises:"):  # would end the docstring sections early
        words = words.replace(tag, tag[:-1] + " -")
    return words


def _tool_method(schema: dict) -> Callable[..., str]:
    """A method that runs one tau2 tool through the env, with the signature/docstring TRL reads."""
    fn_schema = schema["function"]
    name = fn_schema["name"]
    params = fn_schema.get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or [])

    def method(self: Tau2ToolEnv, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    arg_lines = []
    ordered = [p for p in props if p in required] + [p for p in props if p not in required]
    for pname in ordered:
        pschema = props[pname]
        hint = _hint(pschema)
        default = inspect.Parameter.empty if pname in required else pschema.get("default", None)
        sig_params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[pname] = hint
        arg_lines.append(f"    {pname}: {_one_line(pschema.get('description') or pschema.get('title') or pname)}")
    annotations["return"] = str
    method.__name__ = name
    method.__qualname__ = f"Tau2ToolEnv.{name}"
    method.__signature__ = inspect.Signature(sig_params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    doc = _one_line(fn_schema.get("description") or name)
    method.__doc__ = doc + ("\n\nArgs:\n" + "\n".join(arg_lines) if arg_lines else "")
    return method


def _send_message_method() -> Callable[..., str]:
    def send_message_to_user(self, message: str) -> str:
        """Send a message to the customer and return the customer's reply.

        Args:
            message: The text the customer reads.
        """
        return self._send(message)

    return send_message_to_user


class Tau2ToolEnv:
    """One tau2 episode behind TRL's ``environment_factory`` tool loop (build with :func:`make_environment_factory`).

    Subclasses carry one method per tau2 tool (plus ``send_message_to_user`` unless solo); TRL exposes them
    to the model. ``reset(**row)`` starts the row's task and returns the customer's first message;
    ``get_reward()`` is the tau2 reward (0.0 while the episode is unfinished).
    """

    env_kwargs: dict[str, Any] = {}
    domain: str = "mock"
    ENDED = "Error: the conversation has ended; no further actions are possible."
    OVER = "The conversation is over."

    def __init__(self) -> None:
        import gymnasium as gym

        kwargs = dict(self.env_kwargs)
        solo = bool(kwargs.pop("solo", False))
        kwargs["obs_format"] = "messages"
        self.env = gym.make(env_id(self.domain, solo), disable_env_checker=True, **kwargs)
        self._reset_state()

    def _reset_state(self) -> None:
        self.ended = False
        self.reward = 0.0
        self.reward_info: Optional[dict] = None
        self.termination_reason: Optional[str] = None
        self.info: dict = {}
        self.messages: list[dict] = []

    def reset(
        self, task_id: Optional[str] = None, prompt: Any = None, seed: Optional[int] = None, **row: Any
    ) -> Optional[str]:
        self._reset_state()
        obs, info = self.env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
        self.messages = obs
        if info.get("episode_over"):
            self._step("")
        seen = (
            len(prompt) - 1
            if isinstance(prompt, list)
            and prompt
            and prompt[-1].get("role") == "user"
            and not prompt[-1].get("content")
            else None
        )
        if seen is None:
            return None
        texts = [m.get("content") or "" for m in self.messages[seen:] if m.get("role") == "user"]
        return "\n".join(texts) if texts else None

    def get_reward(self) -> Optional[float]:
        """The tau2 reward; ``None`` (TRL: no reward, advantage 0) when the episode failed for infrastructure
        reasons (``user_error``, ``evaluation_error``): never trained on as a policy failure."""
        if not self.ended:
            return 0.0

        why = infrastructure_failure(self.termination_reason, self.info)
        if why is not None:
            logger.warning("episode %s masked out of the gradient: %s", self.info.get("task_id"), why)
            return None
        return self.reward

    def _step(self, action: Any) -> list[dict]:
        """Step the env; returns the messages that followed the agent's action."""
        before = len(self.messages)
        obs, reward, terminated, truncated, info = self.env.step(action)
        new = obs[before + 1 :] if isinstance(obs, list) and len(obs) > before else []
        if isinstance(obs, list):
            self.messages = obs
        if terminated or truncated:
            self.ended = True
            self.reward = float(reward)
            self.reward_info = info.get("reward_info")
            self.termination_reason = info.get("termination_reason")
            self.info = info
        return new

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if self.ended:
            return self.ENDED
        new = self._step(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
            }
        )
        results = [m.get("content") or "" for m in new if m.get("role") == "tool"]
        if results:
            return "\n".join(results)
        return self.OVER if self.ended else ""

    def _send(self, message: str) -> str:
        if self.ended:
            return self.ENDED
        new = self._step({"role": "assistant", "content": message})
        replies = [m.get("content") or "" for m in new if m.get("role") == "user"]
        if replies:
            return "\n".join(replies)
        return self.OVER if self.ended else ""


def make_environment_factory(domain: str = "mock", **env_kwargs: Any) -> Callable[[], Tau2ToolEnv]:
    """An ``environment_factory`` for ``GRPOTrainer``: a fresh :class:`Tau2ToolEnv` of ``domain`` per call.

    ``env_kwargs`` go to ``gym.make`` (``user``, ``max_steps``, ``solo``, ...). The agent's tools become
    methods (their JSON schemas as Python signatures + docstrings); in normal mode ``send_message_to_user``
    is added (see the module docstring for how this changes the chat).
    """
    import gymnasium as gym

    kwargs = dict(env_kwargs)
    solo = bool(kwargs.pop("solo", False))
    probe = gym.make(
        env_id(domain, solo), disable_env_checker=True, **{k: v for k, v in kwargs.items() if k not in ("user",)}
    )
    tools = probe.unwrapped.tools
    shared = dict(env_kwargs)
    user = shared.get("user")
    if isinstance(user, str) and user not in ("oracle", "oracle_user"):  # one simulator for all instances
        shared["user"] = resolve_user(user)
    members: dict[str, Any] = {"env_kwargs": shared, "domain": domain}
    reserved = set(dir(Tau2ToolEnv)) | {
        "env",
        "ended",
        "reward",
        "reward_info",
        "termination_reason",
        "info",
        "messages",
    }
    for schema in tools:
        name = schema["function"]["name"]
        if name in reserved or name.startswith("_"):
            raise ValueError(f"tool name {name!r} clashes with a Tau2ToolEnv member")
        members[name] = _tool_method(schema)
    if not solo:
        if SEND_MESSAGE_TOOL in members:
            raise ValueError(f"the domain already has a tool named {SEND_MESSAGE_TOOL!r}")
        members[SEND_MESSAGE_TOOL] = _send_message_method()
    words = "".join(p.capitalize() for p in domain.replace("-", "_").split("_"))
    cls_name = f"Tau2{words}{'Solo' if solo else ''}ToolEnv"
    cls = type(cls_name, (Tau2ToolEnv,), members)

    def factory() -> Tau2ToolEnv:
        return cls()

    factory.env_class = cls  # type: ignore[attr-defined]
    return factory
