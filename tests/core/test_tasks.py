"""Task files: both formats load, splits select in file order, malformed files fail clearly."""

import json

import pytest

from tau2_gym.core.messages import ToolCall
from tau2_gym.core.tasks import Action, Task, TaskFileError, load_splits, load_task_file, select_split


def test_26_3_mock_tasks_load_with_history_and_init(legacy_mock_domain):
    tasks = legacy_mock_domain.tasks(split=None)
    assert len(tasks) == 9
    hist = legacy_mock_domain.task("update_task_with_message_history").history
    assert hist and hist[0].role in ("user", "assistant")
    dumped = legacy_mock_domain.task("update_task_with_message_history").model_dump(mode="json")
    assert Task.model_validate(json.loads(json.dumps(dumped))).model_dump(mode="json") == dumped


def test_upstream_mock_tasks_load(upstream_mock_domain):
    ids = [t.id for t in upstream_mock_domain.tasks(split=None)]
    assert len(ids) == 10 and "update_task_with_user_tools" in ids


def test_malformed_task_file_names_the_task(tmp_path):
    bad = tmp_path / "tasks.json"
    bad.write_text(json.dumps([{"id": "ok", "user_scenario": {"instructions": "x"}}, {"id": "broken"}]))
    with pytest.raises(TaskFileError, match="'broken'"):
        load_task_file(bad)
    bad.write_text("{not json")
    with pytest.raises(TaskFileError, match="not valid JSON"):
        load_task_file(bad)
    with pytest.raises(TaskFileError, match="not found"):
        load_task_file(tmp_path / "missing.json")


def test_split_selection_keeps_file_order_and_rejects_unknown(tmp_path):
    f = tmp_path / "tasks.json"
    f.write_text(json.dumps([{"id": str(i), "user_scenario": {"instructions": "x"}} for i in range(4)]))
    (tmp_path / "split_tasks.json").write_text(json.dumps({"train": ["3", "1"], "base": ["0", "1", "2", "3"]}))
    tasks = load_task_file(f)
    assert [t.id for t in select_split(tasks, load_splits(f), "train", "x")] == ["1", "3"]
    with pytest.raises(TaskFileError, match="unknown task split 'nope'"):
        select_split(tasks, load_splits(f), "nope", "x")


def test_action_matching_rules():
    gold = Action(action_id="a", name="f", arguments={"x": 1, "y": 2})
    assert gold.matches(ToolCall("f", {"x": 1}))  # keys of the call only
    assert not gold.matches(ToolCall("f", {"x": 1, "z": 3}))  # extra call key fails
    assert Action(action_id="a", name="f", arguments={}, compare_args=[]).matches(ToolCall("f", {"q": 1}))
    assert not gold.matches(ToolCall("g", {"x": 1}))
