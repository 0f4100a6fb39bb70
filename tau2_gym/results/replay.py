"""Replay recorded trajectories through fresh environments: is a stored run reproducible, and where does it
stop being so?

:func:`replay` takes results files (``tau2 run``, ``tau2-gym rollout``, an env's ``save_results``) and, for each
simulation, builds a fresh :class:`~tau2_gym.envs.tau2_env.Tau2Env` for its domain on the data, starts the
recorded task (the task embedded in the file, else the data's task of that id), and drives it with the recorded
assistant messages as actions while a :class:`~tau2_gym.players.users.playback.PlaybackUser` says the recorded user
turns. Everything else is recomputed: tool results (the user's own tool calls run through the env's user tools),
error flags, the termination and the reward. The new trajectory is then compared with the record message by
message -- role, content, tool calls (name, arguments, requestor), tool results (content, error flag,
requestor) -- and by termination reason. Ids and timestamps are not compared. A record in the env's own
observation format (OpenAI chat messages, system prompt first) is read too; it has no error flags to compare,
and its indices count the system prompt.

How a record's ending is reproduced: ``user_stop``, ``agent_stop``, ``too_many_errors`` and the env's own
``max_steps`` happen by themselves; a ``user_error`` is the playback user failing where the record's user turns
end; an ``agent_error`` is the agent's action being refused where the record's agent turns end (its last
message, when the record kept one, stored as the refused action, as the env does for unreadable markup); a
``max_steps`` cut short by an outer step limit and a ``timeout`` end the replay at the same agent turn.
Endings from outside the env (``infrastructure_error``, ...) cannot be replayed and are reported as errors.

Settings come from the file: the domain (``info.environment_info.domain_name``), solo mode (a ``dummy_user`` or an
``llm_agent_solo`` agent), ``info.max_steps`` / ``info.max_errors``, the data version it records; the agent may
stop (``done``) in runs that ended ``agent_stop``. ``max_steps=``, ``data_dir=``, ``data_version=``,
``domain_options=`` and ``env_kwargs=`` (e.g. ``enforce_protocol=True``) override them; domain settings a file
records in its run info (a retrieval configuration) that differ from the replay's are named in
``report.files[i]["warnings"]``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

from tau2_gym.core.domain import domain_names, load_domain
from tau2_gym.core.messages import (
    AnyMessage,
    AssistantMessage,
    ParticipantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    from_openai,
    message_from_dict,
)
from tau2_gym.core.results_file import ResultsFileError, read_json_any
from tau2_gym.core.tasks import Task
from tau2_gym.core.termination import TerminationReason
from tau2_gym.data.versions import VERSIONS, get_version
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.players.users.playback import PlaybackUser
from tau2_gym.results.rescore import rescoring_integrity
from tau2_gym.runner.progress import progress as _progress
from tau2_gym.scoring.judges import Judge, JudgeSpec, make_judge

__all__ = ["replay", "ReplayReport", "SimulationReplay", "ReplayInputError", "compare_trajectories"]

IDENTICAL, DIVERGED, ERROR = "identical", "diverged", "error"
#: endings the env itself produces; any other recorded ending happened outside it
REPLAYABLE_ENDINGS = frozenset(
    {
        TerminationReason.USER_STOP,
        TerminationReason.AGENT_STOP,
        TerminationReason.MAX_STEPS,
        TerminationReason.TOO_MANY_ERRORS,
        TerminationReason.AGENT_ERROR,
        TerminationReason.USER_ERROR,
        TerminationReason.TIMEOUT,
    }
)
_RECORDED_AGENT_ERROR = "replay: the record ends with an agent_error here (its action could not be used)"
_RECORDED_USER_ERROR = "replay: the record ends with a user_error here (the user simulator failed)"


class ReplayInputError(ValueError):
    """A results input cannot be replayed at all (missing, not JSON, not a results file); names the input."""


@dataclass
class SimulationReplay:
    """The outcome of replaying one recorded simulation."""

    file: Optional[str]
    index: int  # position among the file's simulations
    simulation_id: Optional[str]
    task_id: Optional[str]
    trial: Optional[int]
    status: str  # identical | diverged | error
    first_divergence: Optional[int] = None  # index of the first differing message (len of the shorter if one ends)
    difference: Optional[str] = None  # what differs there, briefly
    error: Optional[str] = None  # why it could not be replayed
    recorded_termination: Optional[str] = None
    new_termination: Optional[str] = None  # None: the replay had not ended when the record did
    stored_reward: Optional[float] = None
    new_reward: Optional[float] = None
    recorded_messages: int = 0
    new_messages: int = 0
    evaluation_error: Optional[str] = None

    @property
    def reward_changed(self) -> bool:
        if self.status == ERROR:
            return False
        if self.stored_reward is None or self.new_reward is None:
            return self.stored_reward != self.new_reward
        return abs(self.stored_reward - self.new_reward) > 1e-9

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["reward_changed"] = self.reward_changed
        return out


@dataclass
class ReplayReport:
    """Per-simulation outcomes of :func:`replay`, with the counts."""

    simulations: list[SimulationReplay] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    duration: float = 0.0

    def _count(self, status: str) -> int:
        return sum(1 for s in self.simulations if s.status == status)

    @property
    def identical(self) -> int:
        return self._count(IDENTICAL)

    @property
    def diverged(self) -> int:
        return self._count(DIVERGED)

    @property
    def errors(self) -> int:
        return self._count(ERROR)

    @property
    def reward_changed(self) -> int:
        return sum(1 for s in self.simulations if s.reward_changed)

    def summary(self) -> dict[str, Any]:
        n = len(self.simulations)
        return {
            "simulations": n,
            "identical": self.identical,
            "diverged": self.diverged,
            "errors": self.errors,
            "reward_changed": self.reward_changed,
            "duration_s": round(self.duration, 3),
            "simulations_per_s": round(n / self.duration, 1) if self.duration > 0 else None,
        }

    def summary_line(self) -> str:
        s = self.summary()
        return (
            f"replayed {s['simulations']} simulation(s): {s['identical']} identical, {s['diverged']} diverged, "
            f"{s['errors']} error(s); {s['reward_changed']} reward(s) changed ({self.duration:.2f} s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "files": self.files, "simulations": [s.to_dict() for s in self.simulations]}


# ------------------------------------------------------------------------------------ comparison


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Unreplayable(ValueError):
    """Why a simulation cannot be replayed (shown as is, without the exception's type)."""


def _calls(msg: ParticipantMessage) -> Optional[list[ToolCall]]:
    return msg.tool_calls or None  # an empty call list means no calls (as the env reads it)


def _message_difference(rec: AnyMessage, new: AnyMessage) -> Optional[str]:
    """What differs between two messages (None: nothing compared differs)."""
    if rec.role != new.role:
        return f"role: recorded {rec.role!r}, replay {new.role!r}"
    if rec.content != new.content:
        return f"{rec.role} content: recorded {_short(rec.content)}, replay {_short(new.content)}"
    if isinstance(rec, ToolMessage) and isinstance(new, ToolMessage):
        if rec.error is not None and rec.error != new.error:
            return f"tool error flag: recorded {rec.error}, replay {new.error}"
        if rec.requestor != new.requestor:
            return f"tool result requestor: recorded {rec.requestor!r}, replay {new.requestor!r}"
        return None
    if isinstance(rec, ParticipantMessage) and isinstance(new, ParticipantMessage):
        a, b = _calls(rec), _calls(new)
        if (a is None) != (b is None) or (a is not None and b is not None and len(a) != len(b)):
            return f"{rec.role} tool calls: recorded {len(a or ())}, replay {len(b or ())}"
        for i, (x, y) in enumerate(zip(a or (), b or ())):
            if x.name != y.name:
                return f"tool call {i} name: recorded {x.name!r}, replay {y.name!r}"
            if x.arguments != y.arguments:
                return (
                    f"tool call {i} ({x.name}) arguments: recorded {_short(x.arguments)}, replay {_short(y.arguments)}"
                )
            if x.requestor != y.requestor:
                return f"tool call {i} ({x.name}) requestor: recorded {x.requestor!r}, replay {y.requestor!r}"
    return None


def _describe(msg: AnyMessage) -> str:
    if isinstance(msg, ParticipantMessage) and msg.tool_calls:
        return f"{msg.role} calling {', '.join(tc.name for tc in msg.tool_calls)}"
    return f"{msg.role} {_short(msg.content, 50)}"


def compare_trajectories(
    recorded: Sequence[AnyMessage],
    new: Sequence[AnyMessage],
    recorded_termination: Optional[str],
    new_termination: Optional[str],
    offset: int = 0,
) -> tuple[Optional[int], Optional[str]]:
    """``(index of the first differing message, what differs)``; ``(None, None)`` when identical.

    A trajectory that is a strict prefix of the other diverges at the shorter one's length; equal messages with
    another ending diverge at the end (``len(recorded)``). ``offset`` is added to the indices reported (messages
    of the record left out of the comparison before ``recorded[0]``).
    """
    for i, (a, b) in enumerate(zip(recorded, new)):
        diff = _message_difference(a, b)
        if diff is not None:
            return i + offset, f"message {i + offset}: {diff}"
    n = min(len(recorded), len(new))
    at = n + offset
    if len(recorded) > n:
        state = f"ended ({new_termination})" if new_termination else "waits for the agent's next turn (still running)"
        return at, (
            f"message {at}: the replay {state} where the record goes on with "
            f"{len(recorded) - n} more message(s), first {_describe(recorded[n])}"
        )
    if len(new) > n:
        return at, (
            f"message {at}: the record ended ({recorded_termination}) where the replay goes on with "
            f"{len(new) - n} more message(s), first {_describe(new[n])}"
        )
    if recorded_termination != new_termination:
        return at, f"termination: recorded {recorded_termination}, replay {new_termination or 'still running'}"
    return None, None


# ------------------------------------------------------------------------------------ inputs


def _load_inputs(results: Any) -> list[tuple[Optional[str], dict]]:
    """``[(label, raw results dict)]`` from a path, a list of paths / dicts, or a dict."""
    items: Iterable[Any] = [results] if isinstance(results, (str, os.PathLike, dict)) else results
    out: list[tuple[Optional[str], dict]] = []
    for item in items:
        if isinstance(item, dict):
            label, raw = None, item
        elif isinstance(item, (str, os.PathLike)):
            label = str(item)
            path = Path(item)
            if path.is_dir():
                raise ReplayInputError(f"{label!r} is a folder; pass a results JSON file")
            try:
                raw = read_json_any(path)
            except ResultsFileError as exc:
                raise ReplayInputError(str(exc)) from None
        else:
            raise ReplayInputError(f"cannot replay a {type(item).__name__}: pass a results file path or a results dict")
        where = repr(label) if label is not None else "the results dict"
        if not isinstance(raw, dict):
            raise ReplayInputError(
                f"{where} is not a tau2 results file: it holds a JSON {type(raw).__name__}, not an object"
            )
        info = raw.get("info")
        env_info = info.get("environment_info") if isinstance(info, dict) else None
        if not isinstance(env_info, dict) or not isinstance(env_info.get("domain_name"), str):
            raise ReplayInputError(f"{where} is not a tau2 results file: missing info.environment_info.domain_name")
        if not isinstance(raw.get("simulations"), list):
            raise ReplayInputError(f"{where} is not a tau2 results file: 'simulations' is missing or not a list")
        if raw.get("tasks") is not None and not isinstance(raw.get("tasks"), list):
            raise ReplayInputError(f"{where} is not a tau2 results file: 'tasks' is not a list")
        out.append((label, raw))
    return out


@dataclass
class _FileSettings:
    domain: str
    solo: bool
    max_steps: int
    max_errors: int
    data_version: Optional[str]
    reward_integrity: str = "upstream"  # how the file's episodes were played and scored (info.reward_integrity)


def _settings(
    raw: dict, max_steps: Optional[int], data_dir: Optional[str], data_version: Optional[str]
) -> _FileSettings:

    info = raw["info"]
    agent = info.get("agent_info") if isinstance(info.get("agent_info"), dict) else {}
    user = info.get("user_info") if isinstance(info.get("user_info"), dict) else {}
    solo = user.get("implementation") == "dummy_user" or agent.get("implementation") == "llm_agent_solo"
    recorded_steps = info.get("max_steps")
    recorded_errors = info.get("max_errors")
    if data_version is None and data_dir is None:
        rec = info.get("data_version")
        name = rec.get("version") if isinstance(rec, dict) else None
        data_version = name if name in VERSIONS else None
    return _FileSettings(
        domain=info["environment_info"]["domain_name"],
        solo=solo,
        max_steps=int(max_steps)
        if max_steps is not None
        else (recorded_steps if type(recorded_steps) is int and recorded_steps >= 1 else 100),
        max_errors=recorded_errors if type(recorded_errors) is int and recorded_errors >= 1 else 10,
        data_version=data_version,
        reward_integrity=_recorded_integrity(info),
    )


def _recorded_integrity(info: dict) -> str:
    """The reward-integrity setting of a file's stored rewards (a re-scoring's, else the run's) with the run's own
    ``reference_free_tools`` (what its tools showed the agent); upstream where the file records none or one this
    version cannot read."""
    played = info.get("reward_integrity")
    rescored = info.get("rescored")
    rescored = rescored if isinstance(rescored, dict) else {}
    try:
        return rescoring_integrity(rescored.get("reward_integrity", played), played).name
    except ValueError:
        return "upstream"


def _setting_warnings(raw: dict, dom: Any) -> list[str]:
    """Where the file's run info records a domain setting (what the domain writes into results info, e.g. its
    retrieval configuration) other than the replay's: the replay may diverge for that reason alone."""
    ours = dom.spec.extra.get("results_info") or {}
    info = raw["info"]
    return [
        f"the file records {key}={info[key]!r}, the replay runs {key}={value!r} (pass domain_options=...)"
        for key, value in ours.items()
        if key in info and info[key] != value
    ]


# ------------------------------------------------------------------------------------ driving one simulation


class _Envs:
    """One env per distinct setting (built on first use), each with its own playback user."""

    def __init__(self, data_dir: Optional[str], judge: Judge, env_kwargs: dict) -> None:
        self.data_dir = data_dir
        self.judge = judge
        self.env_kwargs = env_kwargs
        self._envs: dict[tuple, Any] = {}

    def get(self, s: _FileSettings, agent_can_stop: bool) -> Any:
        key = (s.domain, s.solo, agent_can_stop, s.max_steps, s.max_errors, s.data_version, s.reward_integrity)
        env = self._envs.get(key)
        if env is None:
            import warnings

            kwargs: dict[str, Any] = dict(
                user=PlaybackUser(),
                solo=s.solo,
                agent_can_stop=agent_can_stop,
                max_steps=s.max_steps,
                max_errors=s.max_errors,
                data_dir=self.data_dir,
                data_version=s.data_version,
                judge=self.judge,
                parser="none",
                fill_tool_call_ids=False,
                task_split=None,
                reward_integrity=s.reward_integrity,
            )
            kwargs.update(self.env_kwargs)
            with warnings.catch_warnings():  # the pool's no-judge warning: replay runs only the recorded tasks
                warnings.simplefilter("ignore")
                env = Tau2Env(s.domain, **kwargs)
            self._envs[key] = env
        return env

    def close(self) -> None:
        for env in self._envs.values():
            env.close()


class _Tasks:
    """A file's embedded tasks (validated on first use), falling back to the data's task of the same id."""

    def __init__(self, raw_tasks: Optional[list]) -> None:
        self.raw: dict[str, Any] = {}
        for rt in raw_tasks or ():
            if isinstance(rt, dict) and rt.get("id") is not None:
                self.raw.setdefault(str(rt["id"]), rt)
        self._parsed: dict[str, Any] = {}

    def get(self, task_id: str, env: Any) -> Any:

        if task_id in self._parsed:
            return self._parsed[task_id]
        if task_id in self.raw:
            try:
                task: Any = Task.model_validate(self.raw[task_id])
            except Exception as exc:  # noqa: BLE001 - a broken task fails only its simulations
                task = _Unreplayable(f"task {task_id!r} in the file does not validate: {_clip(str(exc))}")
        else:
            try:
                task = env.task_by_id(task_id)
            except ValueError:
                task = _Unreplayable(
                    f"unknown task {task_id!r}: neither among the file's tasks nor in the {env.config.domain!r} data"
                )
        self._parsed[task_id] = task
        return task


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _stored_reward(sim: dict) -> Optional[float]:
    ri = sim.get("reward_info")
    return _number(ri.get("reward")) if isinstance(ri, dict) else None


def _replay_one(
    sim: Any, index: int, label: Optional[str], settings: _FileSettings, envs: _Envs, tasks: _Tasks
) -> SimulationReplay:
    if not isinstance(sim, dict):
        return SimulationReplay(
            label, index, None, None, None, ERROR, error=f"the simulation is a JSON {type(sim).__name__}, not an object"
        )
    task_id = sim.get("task_id")
    trial = sim.get("trial") if isinstance(sim.get("trial"), int) else None
    out = SimulationReplay(
        label,
        index,
        None if sim.get("id") is None else str(sim.get("id")),
        None if task_id is None else str(task_id),
        trial,
        ERROR,
        recorded_termination=sim.get("termination_reason"),
        stored_reward=_stored_reward(sim),
    )
    try:
        _drive(sim, out, settings, envs, tasks)
    except _Unreplayable as exc:
        out.status, out.error = ERROR, str(exc)
        out.first_divergence = out.difference = None
    except Exception as exc:  # noqa: BLE001 - one broken record never stops the others
        out.status, out.error = ERROR, f"{type(exc).__name__}: {_clip(str(exc), 300)}"
        out.first_divergence = out.difference = None
    return out


def _drive(sim: dict, out: SimulationReplay, settings: _FileSettings, envs: _Envs, tasks: _Tasks) -> None:

    ending = out.recorded_termination
    if out.task_id is None:
        raise _Unreplayable("the simulation has no task_id")
    if not isinstance(ending, str):
        raise _Unreplayable(f"the simulation has no termination_reason (got {_short(ending)})")
    if ending not in REPLAYABLE_ENDINGS:
        raise _Unreplayable(f"termination {ending!r} happened outside the environment; it cannot be replayed")
    raw_messages = sim.get("messages")
    if raw_messages is None:
        raw_messages = []
    if not isinstance(raw_messages, list):
        raise _Unreplayable(f"'messages' is a JSON {type(raw_messages).__name__}, not a list")
    # the env's own observation format (OpenAI messages, system prompt first) is read too; indices stay the file's
    skip = 1 if raw_messages and isinstance(raw_messages[0], dict) and raw_messages[0].get("role") == "system" else 0
    recorded: list[AnyMessage] = []
    for i, m in enumerate(raw_messages[skip:], skip):
        try:
            recorded.append(_read_message(m))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _Unreplayable(f"message {i} cannot be read: {_clip(str(exc))}") from None
        msg = recorded[-1]
        if isinstance(msg, ParticipantMessage) and not (msg.has_text_content() or msg.is_tool_call()):
            raise _Unreplayable(f"message {i} ({msg.role}) is empty: neither text nor tool calls")
    out.recorded_messages = len(raw_messages)

    env = envs.get(settings, agent_can_stop=settings.solo or ending == TerminationReason.AGENT_STOP)
    task = tasks.get(out.task_id, env)
    if isinstance(task, Exception):
        raise task
    opening = len(task.history) if task.history else (0 if settings.solo else 1)
    played = recorded[opening:]
    agent_turns = [m for m in played if isinstance(m, AssistantMessage)]
    user_turns = [m for m in played if isinstance(m, UserMessage)]
    if any(isinstance(m, SystemMessage) for m in played):
        raise _Unreplayable("the trajectory holds a system message after its opening; tau2 trajectories have none")
    if env.user is not None:  # solo: no user
        env.user.load(user_turns, _RECORDED_USER_ERROR if ending == TerminationReason.USER_ERROR else None)
    elif user_turns:
        raise _Unreplayable("a solo-mode record (no user) holds user messages")
    # the agent's last message of an agent_error record is the action the env refused (kept for the record)
    refused = (
        agent_turns.pop()
        if ending == TerminationReason.AGENT_ERROR and recorded and agent_turns and recorded[-1] is agent_turns[-1]
        else None
    )

    seed = sim.get("seed")
    if not (type(seed) is int and 0 <= seed < 2**63):  # only seeds the env's RNG; the recorded task is given
        seed = None
    _, info = env.reset(seed=seed, options={"task": task})
    reward: Optional[float] = None
    final_info: dict = info
    done = False
    if info.get("episode_over"):  # ended during reset: the next step returns the terminal transition
        _, reward, _, _, final_info = env.step(None)
        done = True
    for action in agent_turns:
        if done:
            break  # the remaining recorded messages show up as the divergence
        _, reward, terminated, truncated, final_info = env.step(action)
        done = terminated or truncated
    if not done:
        if ending == TerminationReason.AGENT_ERROR:
            env.episode.abort_agent(_RECORDED_AGENT_ERROR, _copy_agent(refused) if refused is not None else None)
            done = True
        elif ending in (TerminationReason.MAX_STEPS, TerminationReason.TIMEOUT):
            env.episode.truncate(ending)  # an outer step limit / the clock ended the recorded run at this turn
            done = True
        if done:
            _, reward, _, _, final_info = env.step(None)
        # else: the record ends where the replay waits for the agent (compared as "still running")
    loop = env.loop
    new = loop.messages()
    out.new_messages = len(new)
    out.new_termination = loop.termination_reason if loop.done else None
    if loop.done:
        out.new_reward = None if final_info.get("reward_info") is None else float(reward or 0.0)
        out.evaluation_error = final_info.get("evaluation_error")
    index, difference = compare_trajectories(recorded, new, ending, out.new_termination, offset=skip)
    out.status = IDENTICAL if index is None else DIVERGED
    out.first_divergence, out.difference = index, difference


def _read_message(m: Any) -> AnyMessage:
    """A tau2 message dict, or an OpenAI chat message (``tool_call_id``, ``function`` calls), as a message."""
    if isinstance(m, dict) and (
        ("tool_call_id" in m and "id" not in m)
        or any(
            isinstance(c, dict) and isinstance(c.get("function"), dict)
            for c in (m.get("tool_calls") or ())
            if isinstance(m.get("tool_calls"), list)
        )
    ):
        msg = from_openai(m)
        if isinstance(msg, ToolMessage):
            msg.error = None  # ty: ignore[invalid-assignment] - the OpenAI format has no error flag: not compared
        return msg
    return message_from_dict(m)


def _copy_agent(msg: AssistantMessage) -> AssistantMessage:
    calls = (
        None if msg.tool_calls is None else [ToolCall(tc.name, dict(tc.arguments), id=tc.id) for tc in msg.tool_calls]
    )
    return AssistantMessage(
        content=msg.content, tool_calls=calls, cost=msg.cost, usage=msg.usage, raw_data=msg.raw_data
    )


# ------------------------------------------------------------------------------------ entry point


def replay(
    results: Union[str, os.PathLike, dict, Sequence[Union[str, os.PathLike, dict]]],
    *,
    data_dir: Optional[str] = None,
    data_version: Optional[str] = None,
    max_steps: Optional[int] = None,
    judge: JudgeSpec = "fail",
    progress: bool = False,
    domain_options: Optional[dict] = None,
    env_kwargs: Optional[dict] = None,
) -> ReplayReport:
    """Replay every simulation of ``results`` through a fresh env; report which are reproduced exactly.

    Args:
        results: a results file path (``.json`` / ``.json.gz``), a list of paths, or loaded results dicts.
        data_dir, data_version: the data to replay on (default: the version each file records, else the default).
        max_steps: the step limit (default: each file's ``info.max_steps``, else 100).
        judge: NL-assertion judge for the new rewards (``"fail"``: none, those assertions fail; ``"pass"``;
            ``"openai:MODEL"``, ...; a Judge object).
        progress: show a progress bar (tqdm when installed) on stderr.
        domain_options: the domain's own settings (``load_domain(options=...)``, e.g. a retrieval configuration);
            a file whose run info records other values of them gets a warning in ``report.files``.
        env_kwargs: further :class:`~tau2_gym.envs.config.Tau2EnvConfig` fields (``enforce_protocol``, ...).

    Returns:
        a :class:`ReplayReport` (``report.simulations[i].status`` is ``identical``, ``diverged`` -- with
        ``first_divergence`` and ``difference`` -- or ``error``; ``stored_reward`` / ``new_reward``).

    Raises:
        ReplayInputError: an input is missing, not JSON, or not a results file (checked before any replay).
    """

    inputs = _load_inputs(results)
    start = time.perf_counter()
    env_kwargs = dict(env_kwargs or {})
    if domain_options is not None:
        env_kwargs["domain_options"] = dict(domain_options)
    envs = _Envs(None if data_dir is None else str(data_dir), make_judge(judge), env_kwargs)
    report = ReplayReport()
    work: list[tuple[Any, int, Optional[str], _FileSettings, _Tasks]] = []
    if data_version is not None:
        get_version(data_version)  # an unknown name fails here, once (ValueError)

    for label, raw in inputs:
        settings = _settings(raw, max_steps, data_dir, data_version)
        if settings.domain not in domain_names():
            where = repr(label) if label is not None else "the results dict"
            raise ReplayInputError(
                f"{where}: unknown domain {settings.domain!r}; registered: {', '.join(domain_names())}"
            )
        # the data is there (else one DataError), and the domain's options are valid
        dom = load_domain(settings.domain, data_dir, settings.data_version, options=env_kwargs.get("domain_options"))
        tasks = _Tasks(raw.get("tasks"))
        report.files.append(
            {
                "path": label,
                "domain": settings.domain,
                "simulations": len(raw["simulations"]),
                "solo": settings.solo,
                "max_steps": settings.max_steps,
                "data_version": settings.data_version,
                "warnings": _setting_warnings(raw, dom),
            }
        )
        work.extend((sim, i, label, settings, tasks) for i, sim in enumerate(raw["simulations"]))
    try:
        for sim, i, label, settings, tasks in _progress(work, "replay", progress):
            report.simulations.append(_replay_one(sim, i, label, settings, envs, tasks))
    finally:
        envs.close()
    report.duration = time.perf_counter() - start
    return report
