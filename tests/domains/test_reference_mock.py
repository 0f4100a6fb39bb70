"""Differential test (mock): schemas, tool outputs after each gold action, and hashes equal upstream's."""

import pytest
from refutil import ok, run_reference

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.scoring.rebuild import initial_environment

pytestmark = pytest.mark.reference


def _task_json(task):
    return task.model_dump(mode="json")


def _calls_for(task):
    actions = (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
    return [{"id": a.action_id, "name": a.name, "arguments": a.arguments, "requestor": a.requestor} for a in actions]


def _ours(dom, task, calls, compare_user):
    env = initial_environment(dom, task)
    out = []
    for c in calls:
        msg = env.get_response(ToolCall(name=c["name"], arguments=c["arguments"], id=c["id"], requestor=c["requestor"]))
        env.sync_tools()
        out.append(
            {
                "content": msg.content,
                "error": msg.error,
                "agent_hash": env.get_db_hash(),
                "user_hash": env.get_user_db_hash() if compare_user else None,
            }
        )
    return out


@pytest.mark.parametrize("flavour", ["26.3", "upstream"])
def test_mock_gold_actions_match_upstream(flavour, request):
    if flavour == "upstream":
        dom = load_domain("mock", request.getfixturevalue("upstream_data_dir"))
    else:
        dom = load_domain("mock")
    compare_user = flavour == "upstream"  # 26.3 data has no user DB; upstream always builds one
    tasks = dom.tasks(split=None)
    extra = [  # perturbed calls on top of the first task's state
        {"id": "p1", "name": "create_task", "arguments": {"user_id": "nobody", "title": "t"}, "requestor": "assistant"},
        {
            "id": "p2",
            "name": "update_task_status",
            "arguments": {"task_id": "task_1", "status": "bogus"},
            "requestor": "assistant",
        },
        {
            "id": "p3",
            "name": "update_task_status",
            "arguments": {"task_id": "task_9", "status": "completed"},
            "requestor": "assistant",
        },
        {
            "id": "p4",
            "name": "create_task",
            "arguments": {"user_id": "user_1", "title": ["x"]},
            "requestor": "assistant",
        },
        {
            "id": "p5",
            "name": "create_task",
            "arguments": {"user_id": ["user_1"], "title": "x"},
            "requestor": "assistant",
        },
        {"id": "p6", "name": "get_users", "arguments": {"x": 1}, "requestor": "assistant"},
        {"id": "p7", "name": "transfer_to_human_agents", "arguments": {}, "requestor": "assistant"},
        {"id": "p8", "name": "unknown_tool", "arguments": {}, "requestor": "assistant"},
    ]
    if compare_user:
        extra += [
            {"id": "u1", "name": "check_notifications", "arguments": {}, "requestor": "user"},
            {
                "id": "u2",
                "name": "dismiss_notification",
                "arguments": {"notification_id": "notif_1"},
                "requestor": "user",
            },
            {"id": "u3", "name": "dismiss_notification", "arguments": {"notification_id": "nope"}, "requestor": "user"},
        ]
    jobs, ours = [], []
    for i, task in enumerate(tasks):
        calls = _calls_for(task) + (extra if i == 0 else [])
        jobs.append({"kind": "calls", "domain": "mock", "task": _task_json(task), "calls": calls, "sync_each": True})
        ours.append(_ours(dom, task, calls, compare_user))
    jobs.append({"kind": "schemas", "domain": "mock"})
    results = run_reference("driver_env", jobs)
    compared = 0
    for task, mine, res in zip(tasks, ours, results):
        theirs = ok(res)["calls"]
        assert len(theirs) == len(mine)
        for m, t in zip(mine, theirs):
            assert m["content"] == t["content"], task.id
            assert m["error"] == t["error"], task.id
            assert m["agent_hash"] == t["agent_hash"], task.id
            if compare_user:
                assert m["user_hash"] == t["user_hash"], task.id
            compared += 1
    schemas = ok(results[-1])
    assert list(dom.agent_tool_schemas()) == schemas["agent"]
    if compare_user:
        assert dom.user_tool_schemas() == schemas["user"]
    print(f"mock/{flavour}: {len(tasks)} tasks, {compared} tool calls compared, 0 mismatches")
