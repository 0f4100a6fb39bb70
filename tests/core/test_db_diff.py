"""The field-level DB diff a failed DB check carries names exactly the fields that differ.

The oracle here is independent of the overlays the diff reads: both full database dumps (gold and predicted,
agent and user) are flattened to leaves and compared leaf by leaf; the diff's entries, expanded to leaves, must
give exactly that set, with the same values on each side.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_evaluation_cases import build_cases

from tau2_gym import load_domain
from tau2_gym.core.db import dumps_sorted
from tau2_gym.core.db_diff import MAX_ENTRIES, db_diff, environment_diff, format_diff
from tau2_gym.core.messages import AssistantMessage, ToolCall, UserMessage
from tau2_gym.scoring.evaluation import EvaluationError, evaluate_simulation
from tau2_gym.scoring.rebuild import gold_environment, predicted_environment

pytestmark = pytest.mark.slow  # every domain's perturbed trajectories

PERTURBED = ("drop_write", "change_arg", "duplicate_write", "foreign_write")


def _dump(db: Any) -> Any:
    if db is None:
        return None
    raw = db.dump() if hasattr(db, "dump") else db.model_dump()
    return json.loads(dumps_sorted(raw))


def _leaves(value: Any, path: str, out: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _leaves(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _leaves(v, f"{path}[{i}]", out)
    else:
        out[path] = json.dumps(value, sort_keys=True)


SIDES = (("agent", "tools"), ("user", "user_tools"))


def _flat(kit: Any) -> Any:
    """A toolkit's whole database as plain JSON data."""
    return _dump(kit.db if kit is not None else None)


_MISSING = object()


def _leaf_difference(gold: Any, predicted: Any, path: str = "", depth: int = 0) -> dict[str, tuple]:
    """Leaves (path -> JSON text each side) in which two full dumps differ. The top two levels (fields,
    records) are walked by key, skipping equal values, so only differing records are flattened."""
    if depth < 2 and isinstance(gold, dict) and isinstance(predicted, dict) and gold and predicted:
        out: dict[str, tuple] = {}
        for k in gold.keys() | predicted.keys():
            g, p = gold.get(k, _MISSING), predicted.get(k, _MISSING)
            if type(g) is type(p) and g == p:
                continue
            out.update(_leaf_difference(g, p, f"{path}.{k}" if path else str(k), depth + 1))
    else:
        lg: dict[str, str] = {}
        lp: dict[str, str] = {}
        if gold is not _MISSING:
            _leaves(gold, path, lg)
        if predicted is not _MISSING:
            _leaves(predicted, path, lp)
        out = {k: (lg.get(k), lp.get(k)) for k in lg.keys() | lp.keys() if lg.get(k) != lp.get(k)}
    return _structural(out) if depth == 0 else out


def _structural(diff: dict[str, tuple]) -> dict[str, tuple]:
    """Drop an empty container's leaf where the other side has fields below that path: ``{a: 1}`` -> ``{}``
    is the removal of ``a``, which the diff reports as such, not a change of the container."""

    def below(path: str) -> bool:
        return any(k.startswith(path + ".") or k.startswith(path + "[") for k in diff)

    return {k: v for k, v in diff.items() if not (None in v and set(v) & {"{}", "[]"} and below(k))}


def _expand(entries: list[dict], db: str) -> dict[str, tuple]:
    """The diff's entries as leaves: each entry's gold and predicted values flattened under its path."""
    got: dict[str, tuple] = {}
    for e in entries:
        if e["db"] != db:
            continue
        g: dict[str, str] = {}
        p: dict[str, str] = {}
        if e["kind"] != "only_predicted":
            _leaves(e["gold"], e["path"], g)
        if e["kind"] != "only_gold":
            _leaves(e["predicted"], e["path"], p)
        for k in g.keys() | p.keys():
            if g.get(k) != p.get(k):
                got[k] = (g.get(k), p.get(k))
    return _structural(got)


DOMAINS = ["mock", "airline", "retail", "telecom", "banking_knowledge"]


@pytest.mark.parametrize("name", DOMAINS)
def test_diff_names_exactly_the_changed_fields(name):
    try:
        domain = load_domain(name)
    except Exception as exc:  # noqa: BLE001 - any load failure skips: e.g. banking_knowledge without its optional extra
        pytest.skip(f"{name} does not load here: {exc}")
    tasks = [t for t in domain.tasks(split=None) if t.evaluation_criteria and t.evaluation_criteria.actions][:8]
    cases = [c for c in build_cases(domain, tasks, seed=5) if c.name in PERTURBED + ("gold",)]
    failed = seen_gold = 0
    gold_leaves: dict[str, dict] = {}
    for case in cases:
        try:
            extra: dict = {}
            info = evaluate_simulation(domain, case.task, case.messages, case.termination, diagnostics=extra)
        except EvaluationError:  # e.g. an env assertion about a record the trajectory never wrote (upstream too)
            continue
        check = info.get("db_check") or {}
        assert "db_diff" not in (info.get("info") or {})  # beside upstream's reward_info, never inside
        if check.get("db_match", True):
            assert "db_diff" not in extra, (case.name, case.task.id)
            seen_gold += case.name == "gold"
            continue
        failed += 1
        entries = extra["db_diff"]
        assert entries, (case.name, case.task.id)
        assert "db_diff_truncated" not in extra
        if case.task.id not in gold_leaves:
            gold = gold_environment(domain, case.task)
            gold_leaves[case.task.id] = {db: _flat(getattr(gold, attr)) for db, attr in SIDES}
        pred = predicted_environment(domain, case.task, case.messages, solo=case.solo)
        for db, attr in SIDES:
            expected = _leaf_difference(gold_leaves[case.task.id][db], _flat(getattr(pred, attr)))
            assert _expand(entries, db) == expected, (name, case.name, case.note, case.task.id, db)
        for e in entries:
            assert e["kind"] in ("changed", "only_gold", "only_predicted")
            assert format_diff([e])[0].startswith(e["db"] + " ")
    assert seen_gold, "no gold trajectory matched the gold DB"
    assert failed >= 3, f"only {failed} perturbed trajectories failed the DB check in {name}"


def test_changed_argument_points_at_the_field(mock_domain):
    """A wrong argument shows up at the record and field it wrote, the gold value against the agent's."""
    task = next(t for t in mock_domain.tasks(split=None) if t.id == "update_task_1")
    action = task.evaluation_criteria.actions[0]
    gold = gold_environment(mock_domain, task)
    wrong = "pending" if action.arguments["status"] != "pending" else "completed"
    messages = [
        AssistantMessage(content="Hi"),
        UserMessage(content="Please update my task."),
        AssistantMessage(
            tool_calls=[
                ToolCall(
                    id="c1", name=action.name, requestor="assistant", arguments=dict(action.arguments, status=wrong)
                )
            ]
        ),
    ]
    pred = predicted_environment(mock_domain, task, messages[:2], solo=False)
    messages.append(pred.get_response(messages[-1].tool_calls[0]))
    messages.append(UserMessage(content="Thanks ###STOP###"))
    extra: dict = {}
    info = evaluate_simulation(mock_domain, task, messages, "user_stop", diagnostics=extra)
    assert info["db_check"]["db_match"] is False
    tid = action.arguments["task_id"]
    assert extra["db_diff"] == [
        {
            "db": "agent",
            "path": f"tasks.{tid}.status",
            "kind": "changed",
            "gold": action.arguments["status"],
            "predicted": wrong,
        }
    ]
    assert gold.tools.db.tasks[tid]["status"] == action.arguments["status"]


def test_truncation_counts_what_it_left_out():
    base = {"t": {str(i): {"v": i} for i in range(MAX_ENTRIES + 7)}}
    other = {"t": {str(i): {"v": -i - 1} for i in range(MAX_ENTRIES + 7)}}

    class Plain:
        def __init__(self, data):
            self.data = data

        def dump(self):
            return self.data

    entries, left = db_diff(Plain(base), Plain(other))
    assert len(entries) == MAX_ENTRIES and left == 7
    assert entries[0]["path"].startswith("t.") and entries[0]["kind"] == "changed"
    kit = type("Kit", (), {})

    def env(data):
        e = type("Env", (), {})()
        e.tools = kit()
        e.tools.db = Plain(data)
        e.user_tools = None
        return e

    out = environment_diff(env(base), env(other), limit=5)
    assert len(out["db_diff"]) == 5 and out["db_diff_truncated"] == MAX_ENTRIES + 2
    assert format_diff(out["db_diff"], out["db_diff_truncated"])[-1] == f"... and {MAX_ENTRIES + 2} more differences"


def test_types_differ_as_the_hash_does():
    class Plain:
        def __init__(self, data):
            self.data = data

        def dump(self):
            return self.data

    entries, _ = db_diff(Plain({"a": 1, "b": [1, 2]}), Plain({"a": 1.0, "b": [1, 2, 3]}))
    assert [(e["path"], e["kind"]) for e in entries] == [("a", "changed"), ("b[2]", "only_predicted")]
