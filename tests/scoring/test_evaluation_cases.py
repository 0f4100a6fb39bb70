"""Trajectories built from a task's gold actions at test time, and a catalogue of perturbations of them.

A trajectory is described as a list of steps (text turns and tool calls) and *executed* against a live
environment, so every recorded tool result is the one the environment produced -- exactly what a real
run stores -- and strict replay at evaluation succeeds unless a case tampers with a result on purpose.
Perturbations edit the step list (drop / change / duplicate / add calls, drop the communicated info,
end by a limit...) before execution. The other scoring tests and the reference driver reuse this module.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from tau2_gym.core.domain import LoadedDomain
from tau2_gym.core.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from tau2_gym.core.tasks import Task
from tau2_gym.scoring.rebuild import initial_environment

GREETING = "Hi! How can I help you today?"
UNKNOWN_TOOL = "nonexistent_tool_for_tests"


@dataclass
class Step:
    kind: str  # "call" | "text" | "mixed" (text + calls in one message) | "empty_calls"
    role: str = "assistant"
    name: str = ""
    arguments: dict = field(default_factory=dict)
    requestor: str = "assistant"
    text: Optional[str] = None
    tamper: bool = False  # record a wrong tool result (strict replay must fail)


@dataclass
class Case:
    name: str
    task: Task
    steps: list[Step]
    termination: str
    solo: bool = False
    note: str = ""
    messages: list = field(default_factory=list)


def _crit(task: Task):
    return task.evaluation_criteria


def gold_actions(task: Task) -> list:
    crit = _crit(task)
    return list(crit.actions or []) if crit is not None else []


def is_write(domain: LoadedDomain, name: str, requestor: str = "assistant") -> bool:
    for kit in (
        (domain.spec.user_toolkit, domain.spec.agent_toolkit)
        if requestor == "user"
        else (domain.spec.agent_toolkit, domain.spec.user_toolkit)
    ):
        if kit is not None and name in kit._tool_funcs:
            return kit.mutates_state(name)
    return False


def gold_steps(domain: LoadedDomain, task: Task, solo: bool = False) -> list[Step]:
    steps: list[Step] = []
    if not task.history and not solo:
        steps.append(Step("text", role="assistant", text=GREETING))
        steps.append(Step("text", role="user", text="Hello, I need some help with my account."))
    for a in gold_actions(task):
        role = "assistant" if solo else a.requestor
        steps.append(
            Step(
                "call",
                role=role,
                name=a.name,
                arguments=copy.deepcopy(a.arguments),
                requestor="assistant" if solo else a.requestor,
            )
        )
    info = (_crit(task).communicate_info if _crit(task) is not None else None) or []
    if info:
        steps.append(Step("text", role="assistant", text="To sum up: " + " ; ".join(info) + "."))
    elif not solo:
        steps.append(Step("text", role="assistant", text="All done. Anything else?"))
    return steps


def ending(solo: bool) -> Step:
    return (
        Step("text", role="assistant", text="###STOP###")
        if solo
        else Step("text", role="user", text="Thank you, that is all. ###STOP###")
    )


def execute(domain: LoadedDomain, task: Task, steps: list[Step], solo: bool = False) -> list:
    """Run the steps against a live environment (task init + history) and return the stored trajectory."""
    env = initial_environment(domain, task, solo=solo)
    msgs: list = [copy.copy(m) for m in task.history]
    n = 0
    for st in steps:
        cls = AssistantMessage if st.role == "assistant" else UserMessage
        if st.kind == "text":
            msgs.append(cls(content=st.text))
        elif st.kind == "empty_calls":
            msgs.append(cls(content=st.text, tool_calls=[]))
        else:
            n += 1
            call = ToolCall(name=st.name, arguments=copy.deepcopy(st.arguments), id=f"call_{n}", requestor=st.requestor)
            msgs.append(cls(content=st.text if st.kind == "mixed" else None, tool_calls=[call]))
            result = env.get_response(call)
            if st.tamper:
                result = ToolMessage(
                    id=result.id, content="tampered output", requestor=result.requestor, error=result.error
                )
            msgs.append(result)
        env.sync_tools()
    return msgs


# ------------------------------------------------------------------------------------ perturbations


def _write_indices(domain: LoadedDomain, steps: list[Step]) -> list[int]:
    return [i for i, s in enumerate(steps) if s.kind == "call" and is_write(domain, s.name, s.requestor)]


def _info_index(steps: list[Step]) -> Optional[int]:
    for i, s in enumerate(steps):
        if s.kind == "text" and s.text and s.text.startswith("To sum up: "):
            return i
    return None


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "unexpected_key": 1}
    return "changed"


def _foreign_write(domain: LoadedDomain, task: Task, others: list[Task], rng: random.Random) -> Optional[Step]:
    pool = [(t, a) for t in others if t.id != task.id for a in gold_actions(t) if is_write(domain, a.name, a.requestor)]
    if not pool:
        return None
    t, a = rng.choice(pool)
    return Step("call", role=a.requestor, name=a.name, arguments=copy.deepcopy(a.arguments), requestor=a.requestor)


Perturb = Callable[[LoadedDomain, Task, list[Step], list[Task], random.Random], Optional[tuple[list[Step], str]]]


def p_gold(d, t, steps, others, rng):
    return steps, ""


def p_drop_write(d, t, steps, others, rng):
    w = _write_indices(d, steps)
    if not w:
        return None
    i = rng.choice(w)
    return steps[:i] + steps[i + 1 :], f"dropped {steps[i].name}"


def p_change_arg(d, t, steps, others, rng):
    w = [i for i in _write_indices(d, steps) if steps[i].arguments]
    if not w:
        return None
    i = rng.choice(w)
    s = copy.deepcopy(steps[i])
    key = rng.choice(sorted(s.arguments))
    s.arguments[key] = _changed(s.arguments[key])
    return steps[:i] + [s] + steps[i + 1 :], f"{s.name}.{key} changed"


def p_duplicate_write(d, t, steps, others, rng):
    w = _write_indices(d, steps)
    if not w:
        return None
    i = rng.choice(w)
    return steps[: i + 1] + [copy.deepcopy(steps[i])] + steps[i + 1 :], f"duplicated {steps[i].name}"


def p_reorder_writes(d, t, steps, others, rng):
    w = _write_indices(d, steps)
    if len(w) < 2:
        return None
    out = list(steps)
    out[w[0]], out[w[-1]] = steps[w[-1]], steps[w[0]]
    return out, "first and last writes swapped"


def p_foreign_write(d, t, steps, others, rng):
    s = _foreign_write(d, t, others, rng)
    if s is None:
        return None
    at = rng.randint(0, len(steps))
    return steps[:at] + [s] + steps[at:], f"added {s.name} of another task"


def p_unknown_tool(d, t, steps, others, rng):
    at = rng.randint(0, len(steps))
    return steps[:at] + [Step("call", name=UNKNOWN_TOOL, arguments={"x": 1})] + steps[at:], "unknown tool"


def p_extra_arg(d, t, steps, others, rng):
    w = [i for i, s in enumerate(steps) if s.kind == "call"]
    if not w:
        return None
    i = rng.choice(w)
    s = copy.deepcopy(steps[i])
    s.arguments["unexpected_argument"] = "x"
    return steps[:i] + [s] + steps[i + 1 :], f"{s.name} got an extra argument"


def p_swap_requestor(d, t, steps, others, rng):
    w = [i for i, s in enumerate(steps) if s.kind == "call" and s.requestor == "assistant"]
    if not w:
        return None
    i = rng.choice(w)
    s = copy.deepcopy(steps[i])
    s.role, s.requestor = "user", "user"
    return steps[:i] + [s] + steps[i + 1 :], f"{s.name} sent by the user"


def p_omit_info(d, t, steps, others, rng):
    i = _info_index(steps)
    if i is None:
        return None
    return steps[:i] + steps[i + 1 :], "communicate info omitted"


def p_partial_info(d, t, steps, others, rng):
    i = _info_index(steps)
    info = _crit(t).communicate_info if _crit(t) is not None else None
    if i is None or not info or len(info) < 2:
        return None
    s = Step("text", role="assistant", text="To sum up: " + info[0] + ".")
    return steps[:i] + [s] + steps[i + 1 :], "only the first info"


def p_info_in_tool_call_message(d, t, steps, others, rng):
    i = _info_index(steps)
    w = [j for j, s in enumerate(steps) if s.kind == "call" and s.role == "assistant"]
    if i is None or not w:
        return None
    s = copy.deepcopy(steps[w[-1]])
    s.kind, s.text = "mixed", steps[i].text
    out = list(steps)
    out[w[-1]] = s
    del out[i]
    return out, "info sent with a tool call"


def p_info_with_commas(d, t, steps, others, rng):
    i = _info_index(steps)
    if i is None:
        return None
    info = _crit(t).communicate_info
    text = "Totals: " + " ; ".join(",".join(x) for x in info)  # commas are removed before matching
    return steps[:i] + [Step("empty_calls", role="assistant", text=text)] + steps[i + 1 :], "info split by commas"


def p_info_from_user(d, t, steps, others, rng):
    i = _info_index(steps)
    if i is None:
        return None
    s = copy.deepcopy(steps[i])
    s.role = "user"
    return steps[:i] + [s] + steps[i + 1 :], "the user said the info"


def p_tampered_write(d, t, steps, others, rng):
    w = _write_indices(d, steps)
    if not w:
        return None
    i = rng.choice(w)
    s = copy.deepcopy(steps[i])
    s.tamper = True
    return steps[:i] + [s] + steps[i + 1 :], f"{s.name} result tampered"


def p_tampered_read(d, t, steps, others, rng):
    w = [i for i, s in enumerate(steps) if s.kind == "call" and not is_write(d, s.name, s.requestor)]
    if not w:
        return None
    i = rng.choice(w)
    s = copy.deepcopy(steps[i])
    s.tamper = True
    return steps[:i] + [s] + steps[i + 1 :], f"read {s.name} result tampered (never compared)"


def p_only_reads(d, t, steps, others, rng):
    out = [s for s in steps if not (s.kind == "call" and is_write(d, s.name, s.requestor))]
    if len(out) == len(steps):
        return None
    return out, "every write dropped"


PERTURBATIONS: dict[str, Perturb] = {
    "gold": p_gold,
    "drop_write": p_drop_write,
    "change_arg": p_change_arg,
    "duplicate_write": p_duplicate_write,
    "reorder_writes": p_reorder_writes,
    "foreign_write": p_foreign_write,
    "unknown_tool": p_unknown_tool,
    "extra_arg": p_extra_arg,
    "swap_requestor": p_swap_requestor,
    "omit_info": p_omit_info,
    "partial_info": p_partial_info,
    "info_in_tool_call_message": p_info_in_tool_call_message,
    "info_with_commas": p_info_with_commas,
    "info_from_user": p_info_from_user,
    "tampered_write": p_tampered_write,
    "tampered_read": p_tampered_read,
    "only_reads": p_only_reads,
}
SOLO_PERTURBATIONS = ("gold", "drop_write", "change_arg", "duplicate_write", "unknown_tool", "omit_info")
TERMINATIONS = ("max_steps", "too_many_errors", "agent_error", "user_error")


def build_cases(
    domain: LoadedDomain,
    tasks: list[Task],
    seed: int = 0,
    per_task: Optional[int] = None,
    solo: Optional[bool] = None,
    limit_terminations: bool = True,
) -> list[Case]:
    """Every applicable perturbation of every task (``per_task`` = a random subset of them per task).

    Non-solo cases end by a user stop; solo cases (solo-capable domains, tasks with a ticket) by an agent
    stop; a few cases end by a limit or an error instead (premature-termination records).
    """
    rng = random.Random(seed)
    cases: list[Case] = []
    modes = [False] if solo is None else [solo]
    if solo is None and domain.spec.solo_supported:
        modes.append(True)
    for ti, task in enumerate(tasks):
        for mode in modes:
            if mode and (task.history or not task.ticket):
                continue
            steps = gold_steps(domain, task, solo=mode)
            names = list(SOLO_PERTURBATIONS if mode else PERTURBATIONS)
            if per_task is not None and len(names) > per_task:
                names = ["gold"] + rng.sample(names[1:], per_task - 1)
            for name in names:
                got = PERTURBATIONS[name](domain, task, steps, tasks, rng)
                if got is None:
                    continue
                new_steps, note = got
                term = "agent_stop" if mode else "user_stop"
                cases.append(Case(name, task, new_steps + [ending(mode)], term, solo=mode, note=note))
            if not mode and (not limit_terminations or ti % 5 == 0):
                reason = TERMINATIONS[ti % len(TERMINATIONS)]
                cases.append(Case(f"ends_{reason}", task, steps, reason, note=f"ended by {reason}"))
    for c in cases:
        c.messages = execute(domain, c.task, c.steps, solo=c.solo)
    return cases


# ------------------------------------------------------------------------------------ sanity of the builder


def test_gold_trajectory_replays_strictly_and_reaches_the_gold_state(mock_domain):
    from tau2_gym.scoring.rebuild import gold_environment, predicted_environment

    for task in mock_domain.tasks(split=None):
        msgs = execute(mock_domain, task, gold_steps(mock_domain, task) + [ending(False)])
        pred = predicted_environment(mock_domain, task, msgs, strict=True)
        if gold_actions(task):
            assert pred.get_db_hash() == gold_environment(mock_domain, task).get_db_hash(), task.id


def test_every_perturbation_applies_somewhere_on_mock(mock_domain):
    tasks = list(mock_domain.tasks(split=None))
    cases = build_cases(mock_domain, tasks, limit_terminations=False)
    seen = {c.name for c in cases}
    missing = set(PERTURBATIONS) - seen - {"partial_info", "reorder_writes"}  # mock: one info, one write per task
    assert not missing, missing
