"""The knobs of a tau2 Gymnasium environment, as one printable dataclass (TRL style: one help line per field).

It extends the episode settings every env and run share (:class:`~tau2_gym.core.settings.EpisodeSettings`) with what
only an env has: the customer, how observations look, how the pool is drawn and what the reward is trained on.

>>> from tau2_gym.envs.config import Tau2EnvConfig
>>> print(Tau2EnvConfig(domain="airline").describe())  # doctest: +ELLIPSIS
domain = 'airline'  # ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.scoring.rewards import REWARD_MODES

OBS_FORMATS = ("messages", "text")
TASK_SAMPLING = ("random", "sequential")


@dataclass
class EnvConfig(EpisodeSettings):
    """What the agent env and the user env add to the episode settings: the pool is drawn, observations are
    formatted and rewards computed per step; the defaults are upstream's gym envs'."""

    domain: str = field(
        default="mock", metadata={"help": "tau2 domain (set by the env id: mock, airline, retail, telecom, ...)."}
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
    task_sampling: str = field(
        default="random",
        metadata={"help": "'random' (seeded by reset(seed=...)) or 'sequential' (cycle through the pool)."},
    )
    obs_format: str = field(
        default="messages",
        metadata={"help": "'messages' (OpenAI chat list, system prompt first) or 'text' (role: content transcript)."},
    )
    raise_on_evaluation_error: bool = field(
        default=False, metadata={"help": "re-raise evaluator failures instead of reward 0 + info['evaluation_error']."}
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

    what: ClassVar[str] = "tau2 env"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.obs_format not in OBS_FORMATS:
            raise ValueError(f"obs_format={self.obs_format!r}; choose one of {OBS_FORMATS}")
        if self.task_sampling not in TASK_SAMPLING:
            raise ValueError(f"task_sampling={self.task_sampling!r}; choose one of {TASK_SAMPLING}")
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode={self.reward_mode!r}; choose one of {REWARD_MODES}")


@dataclass
class Tau2EnvConfig(EnvConfig):
    """Configuration of :class:`~tau2_gym.envs.tau2_env.Tau2Env` (every field is also a ``gym.make`` kwarg): the
    shared episode settings, the env settings, then the agent env's own."""

    user: Any = field(
        default="oracle",
        metadata={
            "help": (
                "user simulator: a UserSimulator, 'oracle' (offline, follows the task), or a spec string / "
                "'module:Class'."
            )
        },
    )
    exclude_do_nothing_passes: bool = field(
        default=False,
        metadata={
            "help": "leave out of the task pool the tasks a do-nothing policy passes (tau2_gym.episodes.baseline): "
            "no free reward for refusing; the pool is no longer upstream's split (scores are not comparable)."
        },
    )


@dataclass
class UserEnvConfig(EnvConfig):
    """Configuration of :class:`~tau2_gym.envs.user_env.UserEnv` (every field is also a ``gym.make`` kwarg): the
    shared episode settings, the env settings, then the agent that serves the customer."""

    agent: Any = field(
        default="oracle",
        metadata={
            "help": "the agent policy: 'oracle' or another scripted agent, an AgentPolicy, a callable, "
            "'openai:MODEL[,base_url=...]', 'hf:PATH' or 'package.module:Attr' (tau2_gym.envs.user_env.resolve_agent)."
        },
    )
    agent_parser: Any = field(
        default="auto",
        metadata={"help": "parser of agent replies whose text holds call markup (None: replies as sent)."},
    )
    user_error_penalty: float = field(
        default=0.0,
        metadata={"help": "reward of an episode the customer ends by breaking the protocol is -penalty (0: upstream)."},
    )

    what: ClassVar[str] = "user env"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.solo:
            raise TypeError("solo= does not apply to the user env: solo mode has no customer")
        self.user_error_penalty = float(self.user_error_penalty)
