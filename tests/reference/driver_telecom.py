"""Reference driver for the telecom domain: runs *upstream* tau2-bench under TAU2_REFERENCE_PYTHON.

Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout. Never imported by tau2_gym.

Every job starts from a pristine process state, as a fresh upstream process would have it:
- the class-level ``TelecomUserTools.default_vpn_details`` is replaced by a new default object (upstream's
  ``break_vpn`` degrades the shared one, which would leak into later jobs -- pitfall 6);
- ``uuid.uuid4`` yields a deterministic sequence (refuel on a customer without a Draft bill creates a bill
  with a random id); the test process patches ours with the same sequence.

Job kinds:
- schemas: {"domain", "solo"} -> agent/user schemas and policy (driver_env's job)
- task_plan: {"task_ids"} -> per id, the init actions, gold calls and assertions of upstream's own task
- episode: {"domain", "solo"?, "init", "calls", "assertions"} -> per init action / call / assertion: result
  and both DB hashes
- task_episode: {"task_id"} -> upstream's own plan of the task (init actions, gold calls, assertions) and the
  episode result of that plan
"""

import json
import os
import sys
import traceback
import uuid

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LOGURU_LEVEL", "ERROR")

from loguru import logger

logger.remove()
logger.add(sys.stderr, level="ERROR")

from driver_env import job_schemas
from tau2.data_model.message import ToolCall
from tau2.data_model.tasks import EnvAssertion, EnvFunctionCall
from tau2.domains.telecom import user_tools as up_user_tools
from tau2.domains.telecom.user_data_model import PerformanceLevel, VpnDetails
from tau2.environment.environment import Environment
from tau2.registry import registry

_counter = [0]


def _fake_uuid4():
    _counter[0] += 1
    return uuid.UUID(int=_counter[0] * 0x1234567)


uuid.uuid4 = _fake_uuid4


def pristine():
    """Undo process-level leaks so each job sees a fresh upstream process."""
    up_user_tools.TelecomUserTools.default_vpn_details = VpnDetails(
        server_address="192.168.1.1", protocol="OpenVPN", server_performance=PerformanceLevel.EXCELLENT
    )
    _counter[0] = 0


def make_env(domain, solo=False):
    return registry.get_env_constructor(domain)(solo_mode=solo)


def value_repr(value):
    """Tool-message text of a helper's return value (tuples/None included)."""
    try:
        return Environment.to_json_str(value)
    except Exception as exc:
        return f"<unserialisable {type(exc).__name__}>"


_TASKS = {}


def _tasks():
    if not _TASKS:
        from tau2.domains.telecom.environment import get_tasks

        for t in get_tasks(None):
            _TASKS[t.id] = t
    return _TASKS


def job_task_plan(job):
    out = {}
    tasks = _tasks()
    for tid in job["task_ids"]:
        t = tasks[tid]
        st = t.initial_state
        ev = t.evaluation_criteria
        out[tid] = {
            "init": [a.model_dump(mode="json") for a in (st.initialization_actions or [])],
            "calls": [
                {"id": a.action_id, "name": a.name, "arguments": a.arguments, "requestor": a.requestor}
                for a in (ev.actions or [])
            ],
            "assertions": [a.model_dump(mode="json") for a in (ev.env_assertions or [])],
        }
    return out


def _exc(exc):
    return f"{type(exc).__name__}: {exc}"


def job_episode(job):
    pristine()
    env = make_env(job.get("domain", "telecom"), job.get("solo", False))
    out = {"start": [env.get_db_hash(), env.get_user_db_hash()], "init": [], "calls": [], "assertions": []}
    for a in job.get("init") or []:
        rec = {}
        try:
            rec["value"] = value_repr(env.run_env_function_call(EnvFunctionCall.model_validate(a)))
        except Exception as exc:
            rec["exception"] = _exc(exc)
        rec["hashes"] = [env.get_db_hash(), env.get_user_db_hash()]
        out["init"].append(rec)
    for c in job.get("calls") or []:
        tc = ToolCall(
            id=c.get("id", ""),
            name=c["name"],
            arguments=c.get("arguments", {}),
            requestor=c.get("requestor", "assistant"),
        )
        rec = {}
        try:
            tm = env.get_response(tc)
            rec["content"] = tm.content
            rec["error"] = tm.error
        except Exception as exc:
            rec["exception"] = _exc(exc)
        try:
            env.sync_tools()
        except Exception as exc:
            rec["sync_exception"] = _exc(exc)
        rec["hashes"] = [env.get_db_hash(), env.get_user_db_hash()]
        out["calls"].append(rec)
    for a in job.get("assertions") or []:
        rec = {}
        try:
            value = env.run_env_function_call(EnvAssertion.model_validate(a))
            rec["value"] = value if isinstance(value, bool) else f"<{type(value).__name__}>"
        except Exception as exc:
            rec["exception"] = _exc(exc)
        out["assertions"].append(rec)
    return out


def job_task_episode(job):
    plan = job_task_plan({"task_ids": [job["task_id"]]})[job["task_id"]]
    result = job_episode({"domain": job.get("domain", "telecom"), **plan})
    return {"plan": plan, "result": result}


JOBS = {"schemas": job_schemas, "task_plan": job_task_plan, "episode": job_episode, "task_episode": job_task_episode}


def main():
    req = json.load(sys.stdin)
    results = []
    for job in req["jobs"]:
        try:
            results.append({"ok": JOBS[job["kind"]](job)})
        except Exception:
            results.append({"failed": traceback.format_exc()})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
