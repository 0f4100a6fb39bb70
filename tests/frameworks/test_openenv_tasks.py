"""OpenEnv's Task API on the tau2 server (``/{name}/splits``, ``/tasks``, ``/num_tasks``, ``/task``,
``/task_range``), through the client's Task API methods:

* every split of the served task set is listed, the env's own pool first, and a listed task is what ``reset``
  plays: ``reset(split=s, index=i)`` is ``get_task(s, i)``, ``reset(task_id=...)`` the same episode, and the pool
  split is ``env.tasks`` in order (``reset(task_index=i)``), filters included;
* a task is served without its gold (actions, assertions, information to communicate) unless the operator
  exposes it;
* wrong splits, indices and selector combinations get errors that say so.

Skipped without the ``openenv`` extra (``pip install tau2-gym[openenv]``).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip(
    "openenv.validation", reason="needs the openenv extra (OpenEnv 0.10): pip install tau2-gym[openenv]"
)

import httpx

from tau2_gym.frameworks.openenv import Tau2Client, Tau2Server

pytestmark = pytest.mark.slow  # servers in subprocesses

GOLD_KEYS = ("evaluation_criteria", "actions", "env_assertions", "nl_assertions", "communicate_info")


def _keys(value) -> set:
    """Every key of a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value) | set().union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value)) if value else set()
    return set()


def test_the_task_api_lists_what_reset_plays():
    with Tau2Server("tau2/airline-v0", port=0) as server, Tau2Client(server.url).sync() as client:
        env = server.app.loaded.base
        names = [s["name"] for s in client.list_splits()]
        assert names[0] == "base" and sorted(names) == sorted(env.domain.splits(None))
        for split in names:
            tasks = client.list_tasks(split)
            assert [t["id"] for t in tasks] == [t.id for t in env.domain.tasks(None, split)]
            assert client.num_tasks(split) == len(tasks)
            assert [(t["split"], t["index"], t["domain"]) for t in tasks] == [
                (split, i, "airline") for i in range(len(tasks))
            ]
            assert client.get_task_range(split, 2, 5) == tasks[2:5] and client.get_task_range(split) == tasks
            for i in (0, len(tasks) - 1):
                assert client.get_task(split, i) == tasks[i]
                by_place = client.reset(split=split, index=i, seed=3)
                assert by_place.observation.task_id == tasks[i]["id"]
                by_id = client.reset(task_id=tasks[i]["id"], seed=3)
                assert by_id.observation.messages == by_place.observation.messages
        pool = client.list_tasks("base")
        for i in (0, 7, len(pool) - 1):
            assert client.reset(task_index=i).observation.task_id == pool[i]["id"] == env.tasks[i].id
        with httpx.Client(base_url=server.url, timeout=10) as http:
            assert http.get("/list_environments").json() == ["tau2-airline-v0"]
            assert http.get("/metadata").json()["name"] == "tau2-airline-v0"


def test_a_task_is_served_without_its_gold_unless_the_operator_exposes_it():
    with Tau2Server("tau2/airline-v0", port=0) as server, Tau2Client(server.url).sync() as client:
        tasks = client.list_tasks("base")
        assert not (_keys(tasks) & set(GOLD_KEYS)), _keys(tasks) & set(GOLD_KEYS)
        gold = server.app.loaded.base.tasks[0]
        assert tasks[0]["user_scenario"] == gold.user_scenario.model_dump(mode="json", exclude_none=True)
        assert tasks[0]["reward_basis"] == [b.value for b in gold.evaluation_criteria.reward_basis]
    with Tau2Server("tau2/airline-v0", port=0, expose_gold=True) as server, Tau2Client(server.url).sync() as client:
        task = client.get_task("test", 0)
        gold = server.app.loaded.base.domain.tasks(None, "test")[0]
        assert task["evaluation_criteria"] == json.loads(gold.evaluation_criteria.model_dump_json(exclude_none=True))
        assert task["evaluation_criteria"]["actions"]


def test_the_pool_split_is_the_envs_pool_after_its_filters():
    """``exclude_do_nothing_passes`` leaves tasks out of the env's pool: the pool split lists what the env draws
    from, the same split name's other tasks are not in it, and ``task_index`` and ``index`` agree."""
    kwargs = {"exclude_do_nothing_passes": True}
    with Tau2Server("tau2/mock-v0", kwargs, port=0) as server, Tau2Client(server.url).sync() as client:
        env = server.app.loaded.base
        pool = client.list_tasks("base")
        assert [t["id"] for t in pool] == [t.id for t in env.tasks]
        assert len(pool) < len(env.domain.tasks(None, "base"))
        for i in range(len(pool)):
            assert client.reset(split="base", index=i).observation.task_id == pool[i]["id"]
            assert client.reset(task_index=i).observation.task_id == pool[i]["id"]


def test_wrong_splits_indices_and_selectors_get_errors_that_say_so():
    with Tau2Server("tau2/mock-v0", port=0) as server, Tau2Client(server.url).sync() as client:
        size = client.num_tasks("base")
        with pytest.raises(RuntimeError, match=r"404: unknown split 'nope'; splits: \['base'\]"):
            client.num_tasks("nope")
        with pytest.raises(RuntimeError, match="HTTP 400"):
            client.get_task("base", size)
        for kwargs, message in [
            ({"split": "base"}, "split and index go together"),
            ({"index": 0}, "split and index go together"),
            ({"split": "base", "index": size}, f"index {size} out of range: split 'base' has {size} tasks"),
            ({"split": "nope", "index": 0}, "unknown split 'nope'"),
            ({"task_id": "x", "split": "base", "index": 0}, "reset takes one of task_id, task_index or split"),
            ({"split": "base", "index": "0"}, "index must be an integer"),
        ]:
            with pytest.raises(RuntimeError, match=message):
                client.reset(**kwargs)
        assert client.reset(split="base", index=0).observation.task_id  # the session still serves
