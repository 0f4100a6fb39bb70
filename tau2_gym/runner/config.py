"""The settings of a rollout, as one printable dataclass (``tau2-gym rollout`` flags map onto its fields); it extends
the episode settings every env and run share (:class:`~tau2_gym.core.settings.EpisodeSettings`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

from tau2_gym.core.settings import EpisodeSettings

__all__ = ["RolloutConfig", "trial_seeds"]


def trial_seeds(seed: int, num_trials: int) -> list[int]:
    """upstream's per-trial seeds: ``random.seed(seed)`` then one ``randint(0, 1_000_000)`` per trial."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(num_trials)]


@dataclass
class RolloutConfig(EpisodeSettings):
    """Settings of a rollout (``tau2-gym rollout`` flags map 1:1): the shared episode settings, with ``tau2 run``'s
    defaults where they differ, then the run's own. ``print(config.describe())`` lists them."""

    domain: str = field(
        default="airline", metadata={"help": "tau2 domain: airline, retail, telecom, telecom-workflow, mock."}
    )
    max_steps: int = field(
        default=200, metadata={"help": "orchestrator step limit per episode (tau2 run default 200)."}
    )
    parser: Any = field(
        default=None,
        metadata={
            "help": (
                "tool-call parser (hermes, json, auto, tau2, ... or a callable): also parses `<tool_call>` markup "
                "in the content of a server's reply (vLLM without a tool parser); None: raw-text actions use "
                "'auto', replies are sent as they are (upstream)."
            )
        },
    )
    parse_replies: Optional[bool] = field(  # ty: ignore[incompatible-attribute-override] - a bool after __post_init__
        default=None,
        metadata={"help": "parse call markup in server replies without calls; None: when a parser is given."},
    )
    num_tasks: Optional[int] = field(default=None, metadata={"help": "run only the first N tasks of the selection."})
    num_trials: int = field(default=1, metadata={"help": "trials per task (each with upstream's per-trial seed)."})
    seed: int = field(
        default=300,
        metadata={"help": "run seed; trial seeds = upstream's random.seed(seed) + randint(0, 1e6) per trial."},
    )
    concurrency: int = field(
        default=32, metadata={"help": "episodes in flight at once (tau2 run --max-concurrency, default there 3)."}
    )
    max_retries: int = field(
        default=3,
        metadata={"help": "re-runs of an episode whose run raised, before it is recorded as infrastructure_error."},
    )
    retry_delay: float = field(default=1.0, metadata={"help": "seconds before re-running a failed episode."})
    output: Optional[str] = field(
        default=None,
        metadata={"help": "tau2 results file to write (.json/.json.gz); its .jsonl log makes the run resumable."},
    )
    allow_config_change: bool = field(
        default=True,
        metadata={
            "help": (
                "resume into an output logged with other settings (agent, user, models, seed, data...), mixing "
                "both runs, with a warning; False refuses (the CLI's default: a Python caller may swap in an "
                "equivalent policy object)."
            )
        },
    )
    progress: bool = field(
        default=True, metadata={"help": "show a progress bar (tqdm if installed, else a status line)."}
    )
    check_servers: bool = field(
        default=True,
        metadata={
            "help": "before the first episode, send one small request to each LLM server of the run (agent, "
            "customer, judge): a wrong URL, a failing server or a missing key ends the run at once "
            "(tau2_gym.llm.client.ServerCheckError) instead of failing every episode."
        },
    )

    what: ClassVar[str] = "rollout"

    def __post_init__(self) -> None:
        # the parser of the run: given, it reads raw-text actions and server replies alike; None, text is read with
        # 'auto' and replies are taken as sent (upstream)
        if self.parse_replies is None:
            self.parse_replies = self.parser is not None
        self.parser = "auto" if self.parser is None else self.parser
        super().__post_init__()
        if self.num_trials < 1:
            raise ValueError(f"num_trials={self.num_trials} must be >= 1")
        if self.concurrency < 1:
            raise ValueError(f"concurrency={self.concurrency} must be >= 1")
        if self.max_retries < 0:
            raise ValueError(f"max_retries={self.max_retries} must be >= 0")
        if self.num_tasks is not None and self.num_tasks < 1:
            raise ValueError(f"num_tasks={self.num_tasks} must be >= 1")
