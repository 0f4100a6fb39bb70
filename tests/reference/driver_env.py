"""Reference driver: runs *upstream* tau2-bench (under TAU2_REFERENCE_PYTHON) for environment-level jobs.

Reads {"jobs": [...]} as JSON on stdin, writes {"results": [...]} on stdout. Used only by differential
tests; never imported by tau2_gym. Job kinds:

- schemas: {"domain", "solo"} -> agent and user tool schemas
- calls:   {"domain", "solo", "task"?, "calls": [ToolCall...], "sync_each", "assertions"?}
           -> per call {content, error, agent_hash, user_hash} (+ assertion results)
- gold:    {"domain", "task"} -> hashes after init + gold actions (evaluator semantics, no sync)
"""

import json
import os
import sys
import traceback

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LOGURU_LEVEL", "ERROR")

from loguru import logger

logger.remove()
logger.add(sys.stderr, level="ERROR")

from tau2.data_model.message import ToolCall
from tau2.data_model.tasks import EnvAssertion, Task
from tau2.registry import registry


def make_env(domain, solo=False):
    return registry.get_env_constructor(domain)(solo_mode=solo)


def init_env(env, task):
    if task is None:
        return
    t = Task.model_validate(task)
    st = t.initial_state
    if st is None:
        env.set_state(None, None, [])
        return
    env.set_state(st.initialization_data, st.initialization_actions, st.message_history or [])


def job_schemas(job):
    env = make_env(job["domain"], job.get("solo", False))
    out = {"agent": [t.openai_schema for t in env.get_tools()], "user": None}
    if env.user_tools is not None:
        out["user"] = [t.openai_schema for t in env.get_user_tools()]
    out["policy"] = env.get_policy()
    return out


def job_calls(job):
    env = make_env(job["domain"], job.get("solo", False))
    init_env(env, job.get("task"))
    out = {"init_agent_hash": env.get_db_hash(), "init_user_hash": env.get_user_db_hash(), "calls": []}
    for c in job["calls"]:
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
        except Exception as exc:  # escapes get_response upstream (e.g. unsupported result type)
            rec["exception"] = f"{type(exc).__name__}: {exc}"
        if job.get("sync_each", True):
            try:
                env.sync_tools()
            except Exception as exc:
                rec["sync_exception"] = f"{type(exc).__name__}: {exc}"
        rec["agent_hash"] = env.get_db_hash()
        rec["user_hash"] = env.get_user_db_hash()
        out["calls"].append(rec)
    results = []
    for a in job.get("assertions") or []:
        try:
            results.append({"met": env.run_env_assertion(EnvAssertion.model_validate(a), raise_assertion_error=False)})
        except Exception as exc:
            results.append({"exception": f"{type(exc).__name__}: {exc}"})
    out["assertions"] = results
    return out


def job_gold(job):
    env = make_env(job["domain"], False)
    init_env(env, job["task"])
    t = Task.model_validate(job["task"])
    outputs = []
    if t.evaluation_criteria is not None and t.evaluation_criteria.actions is not None:
        for a in t.evaluation_criteria.actions:
            try:
                resp = env.make_tool_call(a.name, requestor=a.requestor, **a.arguments)
                outputs.append(env.to_json_str(resp))
            except Exception as exc:
                outputs.append(f"Error: {exc}")
    return {"agent_hash": env.get_db_hash(), "user_hash": env.get_user_db_hash(), "outputs": outputs}


JOBS = {"schemas": job_schemas, "calls": job_calls, "gold": job_gold}


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
