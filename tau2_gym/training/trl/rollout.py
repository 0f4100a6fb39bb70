"""``rollout_func`` for ``GRPOTrainer``: one tau2 episode per prompt, played in lockstep with batched generation."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Optional, Sequence

from tau2_gym.core.config import describe
from tau2_gym.core.domain import load_domain
from tau2_gym.core.integrity import resolve_integrity
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.envs import env_id
from tau2_gym.episodes.band import band_record, load_profile
from tau2_gym.players.users import resolve_user
from tau2_gym.training.export import SplitGuardError, training_split
from tau2_gym.training.hf.chat import PER_TURN, SAMPLE_MODES
from tau2_gym.training.hf.policy import PolicyRunner, Trajectory
from tau2_gym.training.trl.dataset import parse_task_prompt
from tau2_gym.training.trl.generators import TRLLocalGenerator, TRLVLLMGenerator, _tokenizer_of
from tau2_gym.training.trl.rewards import masked_reason, rollout_output

logger = logging.getLogger("tau2_gym.training.trl")

#: the file a GRPO run's band is recorded in, in the trainer's output_dir
BAND_FILE = "tau2_band.json"


@dataclass
class Tau2RolloutConfig:
    """Settings of the TRL rollout function (:func:`make_rollout_func`), one help line each
    (``print(config.describe())`` lists them).

    ``env_kwargs`` are the ``gym.make`` arguments of every env: a dict, or the episode settings object (an env config,
    :class:`~tau2_gym.envs.config.Tau2EnvConfig`) whose fields are taken but its domain, which each prompt names.
    ``group_seed``: the rollouts of one GRPO group -- the episodes of one (domain, task) in one call; TRL's
    ``RepeatSampler`` sends each prompt ``num_generations`` times in a batch -- share one reset seed, so they meet the
    same user simulator (same seed, same sampled customer replies while their histories agree, same opening message)
    and the group's reward spread comes from the policy alone, which is what GRPO's group baseline assumes; the seed
    changes with every call, so the customer still varies over training. ``sample_mode="per_turn"``: every episode
    fills ``max_turns`` rows (its samples, then masked padding rows), all with the episode's reward: set
    ``GRPOConfig(num_generations=G * max_turns)`` for groups of ``G`` episodes.
    """

    env_kwargs: Any = field(
        default_factory=dict,
        metadata={
            "help": "gym.make arguments of every env (user, max_steps, judge, reward_mode, reward_integrity: "
            "'hardened' recommended for training, ...), or a Tau2EnvConfig whose fields are taken but its domain."
        },
    )
    max_new_tokens: int = field(
        default=512,
        metadata={"help": "token limit of one policy turn (the completion is limited by max_completion_length)."},
    )
    max_turns: Optional[int] = field(
        default=None, metadata={"help": "policy turns per episode (None: the env's own step limit decides)."}
    )
    parser: Any = field(
        default="auto",
        metadata={"help": "tool-call parser of the generated text (auto: the template's, else hermes, else JSON)."},
    )
    chat_template: Optional[str] = field(
        default=None, metadata={"help": "chat template override (default: the tokenizer's)."}
    )
    chat_template_kwargs: Optional[dict[str, Any]] = field(
        default=None, metadata={"help": "template variables (default: the trainer's chat_template_kwargs)."}
    )
    seed: Optional[int] = field(
        default=None,
        metadata={"help": "base of the reset seeds (None: the trainer's args.seed with group_seed, else the envs')."},
    )
    group_seed: bool = field(
        default=True,
        metadata={"help": "the episodes of one GRPO group share one reset seed, hence one customer (see above)."},
    )
    use_vllm: Optional[bool] = field(
        default=None, metadata={"help": "generate through TRL's vLLM backend (None: as the trainer's use_vllm)."}
    )
    batch_size: Optional[int] = field(
        default=None, metadata={"help": "contexts per generate call with local generation (None: every episode)."}
    )
    vectorize: bool = field(
        default=True,
        metadata={"help": "run one domain's prompts in a Tau2VectorEnv (customers answered in one batch per round)."},
    )
    processes: int = field(
        default=1,
        metadata={
            "help": "worker processes of each vector env: more cores for the env side of a lockstep step "
            "(1: all in the trainer's process; capped at the batch size)."
        },
    )
    split: Optional[str] = field(
        default="train",
        metadata={"help": "the split every prompt's task must belong to (recorded per episode; training_split)."},
    )
    allow_test_split: bool = field(
        default=False, metadata={"help": "accept tasks of the test split (refused by default)."}
    )
    sample_mode: str = field(
        default="auto",
        metadata={
            "help": "auto (per-turn samples when the template does not keep a turn as the next prompt's prefix), "
            "sequence (one append-only sequence per episode) or per_turn (one sample per LLM call)."
        },
    )
    profile: Any = field(
        default=None,
        metadata={"help": "the difficulty profile of the band trained on (or {domain: profile}); others refused."},
    )
    keep: Optional[Sequence[str]] = field(
        default=None, metadata={"help": "the profile's buckets kept (default: the profile's band)."}
    )

    def __post_init__(self) -> None:
        if self.sample_mode not in SAMPLE_MODES:
            raise ValueError(f"sample_mode={self.sample_mode!r}; choose one of {', '.join(SAMPLE_MODES)}")
        if isinstance(self.env_kwargs, EpisodeSettings):  # the settings object: its fields, the domain per prompt
            kwargs = {f.name: getattr(self.env_kwargs, f.name) for f in fields(self.env_kwargs)}
            kwargs.pop("domain")
            self.env_kwargs = kwargs
        self.env_kwargs = dict(self.env_kwargs or {})
        self.env_kwargs.setdefault("obs_format", "messages")
        if self.env_kwargs["obs_format"] != "messages":
            raise ValueError("the rollout function needs obs_format='messages'")
        self.max_new_tokens = int(self.max_new_tokens)
        if isinstance(self.processes, bool) or not isinstance(self.processes, int) or self.processes < 1:
            raise ValueError(f"processes={self.processes!r} must be an int >= 1")
        self.group_seed = bool(self.group_seed)
        self.allow_test_split = bool(self.allow_test_split)

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        return describe(self)


class Tau2Rollout:
    """The ``rollout_func`` object (see :func:`make_rollout_func`); keeps a pool of envs per domain.

    ``config`` (:class:`Tau2RolloutConfig`) or its fields as keywords; ``logits_processor``: extra logits processors
    for local generation; ``env_factory``: ``fn(domain) -> env`` instead of ``gym.make("tau2/<domain>-v0",
    **env_kwargs)``.
    """

    def __init__(
        self,
        config: Optional[Tau2RolloutConfig] = None,
        *,
        logits_processor: Optional[Sequence[Any]] = None,
        env_factory: Optional[Callable[[str], Any]] = None,
        **settings: Any,
    ) -> None:
        if config is None:
            config = Tau2RolloutConfig(**settings)
        elif settings:
            raise TypeError("pass either config= or its fields as keywords, not both")
        self.config = config
        self.resolved_sample_mode: Optional[str] = None  # what "auto" became (recorded per row as tau2_sample_mode)
        self.last_slots: Optional[int] = None
        self._calls = 0
        self.logits_processor = list(logits_processor or [])
        self.env_factory = env_factory
        self._pools: dict[str, list[Any]] = {}
        self._vectors: dict[tuple[str, int], Any] = {}
        self._episodes = 0
        self.last_trajectories: list[Trajectory] = []
        self.last_seeds: list[Optional[int]] = []
        self.last_splits: list[str] = []
        self._allowed: dict[str, tuple[frozenset, str]] = {}
        self.masked: Counter = Counter()  # infrastructure failures masked out, by reason (whole run)
        self.episodes = 0
        # the reward the episodes are scored with, said once: upstream-exact unless env_kwargs choose otherwise
        self.reward_integrity = resolve_integrity(self.config.env_kwargs.get("reward_integrity")).name
        logger.info(
            "tau2 rollouts: reward mode %s, reward integrity %s%s",
            self.config.env_kwargs.get("reward_mode", "default"),
            self.reward_integrity,
            " (the benchmark's reward, with its known holes; hardened is recommended for training: docs/scoring.md)"
            if self.reward_integrity == "upstream"
            else "",
        )
        # the band trained on: per domain, the profile's kept task ids and what to record about them
        self.band: dict[str, dict[str, Any]] = {}
        self._band_ids: dict[str, frozenset] = {}
        self._band_written = False
        profile, keep = config.profile, config.keep
        if profile is not None:
            items = profile.items() if isinstance(profile, Mapping) else [(None, profile)]
            for named, one in items:
                prof = load_profile(one)
                domain = prof.identity.domain
                if named is not None and named != domain:
                    raise ValueError(f"profile for {named!r} is a profile of domain {domain!r} ({prof.path})")
                self.band[domain] = band_record(prof, keep)
                self._band_ids[domain] = frozenset(prof.band(keep))

    def check_split(self, domain: str, task_id: str) -> str:
        """The recorded training split of a prompt's task; raises when the task lies outside it (test tasks need
        ``allow_test_split=True``)."""
        allowed = self._allowed.get(domain)
        if allowed is None:
            kw = self.config.env_kwargs
            loaded = load_domain(domain, kw.get("data_dir"), kw.get("data_version"), options=kw.get("domain_options"))
            ids, recorded = training_split(
                loaded, self.config.split, task_set=kw.get("task_set"), allow_test_split=self.config.allow_test_split
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

    def check_band(self, domain: str, task_id: str) -> None:
        """With a band, a prompt's task must be one of its tasks (build the dataset with the same profile/keep)."""
        if not self._band_ids:
            return
        ids = self._band_ids.get(domain)
        if ids is None:
            raise SplitGuardError(
                f"a prompt of domain {domain!r}, but the band covers only {sorted(self._band_ids)}: give a profile "
                "per domain (profile={domain: path})"
            )
        if task_id not in ids:
            record = self.band[domain]
            raise SplitGuardError(
                f"task {task_id!r} of domain {domain!r} is outside the band {record['keep']} of profile "
                f"{record['profile']}; build the dataset with build_dataset(profile=..., keep=...) of the same band"
            )

    def record_band(self, trainer: Any) -> None:
        """Once per run: log the band and write it to ``<output_dir>/tau2_band.json`` beside the trainer's output."""
        if self._band_written or not self.band:
            return
        self._band_written = True
        logger.info("training on the band: %s", self.band)
        out = getattr(getattr(trainer, "args", None), "output_dir", None)
        if out:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, BAND_FILE), "w", encoding="utf-8") as fh:
                json.dump(self.band, fh, indent=1)

    def _kwargs(self) -> dict[str, Any]:
        """The env arguments, with a user-simulator spec resolved once (all envs share one simulator)."""
        user = self.config.env_kwargs.get("user")
        if isinstance(user, str) and user not in ("oracle", "oracle_user"):
            self.config.env_kwargs["user"] = resolve_user(user)
        return dict(self.config.env_kwargs)

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
            if self.config.processes > 1:
                kwargs["processes"] = min(self.config.processes, n)
            vec = self._vectors[key] = gym.make_vec(env_id(domain, solo), num_envs=n, **kwargs)
        return vec

    def _envs(self, domains: Sequence[str]) -> Any:
        """One vector env (batched user turns) when every prompt is of one domain; else single envs."""
        if self.config.vectorize and self.env_factory is None and len(set(domains)) == 1:
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
        use_vllm = bool(getattr(trainer, "use_vllm", False)) if self.config.use_vllm is None else self.config.use_vllm
        if use_vllm:
            generator: Any = TRLVLLMGenerator(trainer)
        else:
            generator = TRLLocalGenerator(
                trainer, batch_size=self.config.batch_size, logits_processor=self.logits_processor
            )
        budget = getattr(trainer, "max_completion_length", None) or trainer.args.max_completion_length
        kwargs = self.config.chat_template_kwargs
        if kwargs is None:
            kwargs = getattr(trainer, "chat_template_kwargs", None) or {}
        return PolicyRunner(
            generator,
            _tokenizer_of(trainer),
            parser=self.config.parser,
            max_new_tokens=min(self.config.max_new_tokens, budget),
            max_completion_tokens=budget,
            max_turns=self.config.max_turns,
            chat_template=self.config.chat_template,
            chat_template_kwargs=kwargs,
            sample_mode=self.config.sample_mode,
            reasoning_history=self.config.env_kwargs.get("reasoning_history") or "drop",
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
        if self.config.group_seed:
            base = (
                self.config.seed
                if self.config.seed is not None
                else getattr(getattr(trainer, "args", None), "seed", None)
            )
            base = 0 if base is None else int(base)
            step = getattr(getattr(trainer, "state", None), "global_step", None)
            key = [base, step if isinstance(step, int) else None, call]
            return [
                int.from_bytes(hashlib.sha256(json.dumps(key + [d, t]).encode()).digest()[:4], "big") & 0x7FFFFFFF
                for d, t in refs
            ]
        if self.config.seed is None:
            return [None] * len(refs)
        return [self.config.seed + start + i for i in range(len(refs))]

    def slots(self, mode: str, prompts: Sequence[Any], trainer: Any) -> Optional[int]:
        """Rows per episode: None (one sequence each) or, per turn, ``max_turns`` -- TRL expects one completion
        per prompt it sent, so an episode of per-turn samples takes ``max_turns`` consecutive copies of its prompt
        (``num_generations`` = episodes per group x ``max_turns``)."""
        if mode != PER_TURN:
            return None
        n = self.config.max_turns
        if n is None:
            raise ValueError(
                "per-turn samples (the chat template does not keep a generated turn as the next prompt's prefix, or "
                "sample_mode='per_turn') need max_turns: each episode fills max_turns rows; set max_turns=T and "
                "GRPOConfig(num_generations=G * T), or sample_mode='sequence' for one append-only sequence"
            )
        generations = getattr(trainer, "num_generations", None)
        if isinstance(generations, int) and generations % n:
            raise ValueError(
                f"per-turn samples: num_generations={generations} is not a multiple of max_turns={n} (each "
                f"episode fills max_turns rows; use num_generations = episodes per group x {n})"
            )
        if len(prompts) % n or any(prompts[i] != prompts[i - i % n] for i in range(len(prompts))):
            raise ValueError(
                f"per-turn samples: the {len(prompts)} prompts of this call do not come in runs of max_turns={n} "
                "copies (per-device batch x steps per generation must be a multiple of max_turns)"
            )
        return n

    def run(self, prompts: Sequence[Any], trainer: Any) -> list[Trajectory]:
        refs = [parse_task_prompt(p) for p in prompts]
        splits = [self.check_split(d, t) for d, t in refs]  # before anything runs: no test task is played
        for d, t in refs:
            self.check_band(d, t)
        self.record_band(trainer)
        runner = self.runner(trainer)
        mode = self.resolved_sample_mode = runner.resolve_sample_mode()
        slots = self.last_slots = self.slots(mode, prompts, trainer)
        if slots is not None:  # one episode per run of `slots` copies
            refs, splits = refs[::slots], splits[::slots]
        self.last_splits = splits
        envs = self._envs([d for d, _ in refs])
        seeds = self.episode_seeds(refs, trainer)
        self.last_seeds = seeds
        trajectories = runner.run(envs, [{"task_id": t} for _, t in refs], seeds)
        self.last_trajectories = trajectories
        return trajectories

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        trajectories = self.run(prompts, trainer)
        stop_id = min(int(i) for i in trainer.eos_token_ids)
        out = rollout_output(trajectories, stop_id, self.last_splits, self.last_slots)
        self.episodes += len(trajectories)
        reasons = Counter(why for why in (masked_reason(t) for t in trajectories) if why)
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

    def close(self) -> None:
        """Close the envs this function built (a vector env's worker processes end with it); a later call builds
        them again."""
        for env in [*self._vectors.values(), *(e for pool in self._pools.values() for e in pool)]:
            env.close()
        self._vectors.clear()
        self._pools.clear()


def make_rollout_func(
    config: Optional[Tau2RolloutConfig] = None,
    *,
    logits_processor: Optional[Sequence[Any]] = None,
    env_factory: Optional[Callable[[str], Any]] = None,
    **settings: Any,
) -> Tau2Rollout:
    """A ``rollout_func`` for ``GRPOTrainer``: one tau2 episode per received prompt (see the module docstring).

    Args:
        config: the rollout's settings (:class:`Tau2RolloutConfig`: the envs' ``env_kwargs`` -- a dict or the episode
            settings object --, generation, seeds, the split guard, the sample mode, the band).
        logits_processor: extra logits processors for local generation.
        env_factory: ``fn(domain) -> env`` instead of ``gym.make("tau2/<domain>-v0", **env_kwargs)``.
        **settings: the fields of :class:`Tau2RolloutConfig` as keywords, instead of ``config``.

    Episodes that fail for infrastructure reasons (``user_error``, ``infrastructure_error``, a failed
    evaluation) come back with reward ``None`` and an all-zero ``env_mask``: masked out of the gradient,
    counted in ``rollout.masked`` and in TRL's logs (see :func:`tau2_reward`).
    """
    return Tau2Rollout(config, logits_processor=logits_processor, env_factory=env_factory, **settings)
