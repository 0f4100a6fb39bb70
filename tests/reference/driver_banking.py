"""Reference driver: *upstream* tau2-bench's banking_knowledge domain (under TAU2_REFERENCE_PYTHON).

Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout; never imported by tau2_gym. Every
environment is built as upstream's runner builds it (``tau2.runner.build._build_env_kwargs``): the retrieval
variant, the task, and the task's read allowlist. Job kinds:

- schemas:   {"config", "tasks"?} -> agent/user schemas, the policy, and per task the task's policy
- calls:     {"config", "task", "calls"} -> initial hashes, then per call {content, error, hashes}
- gold:      {"config", "task"} -> hashes after init and after each gold action (evaluator: make_tool_call,
             errors swallowed, no sync)
- eval:      {"config", "task", "messages", "termination", "strict"} -> reward_info (or the error raised)
- retrieval: {"config", "queries", "patterns"} -> KB_search / grep outputs
"""

import json
import os
import sys
import traceback

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LOGURU_LEVEL", "ERROR")

from loguru import logger

logger.remove()
logger.add(sys.stderr, level="CRITICAL")

import tau2.evaluator.evaluator_nl_assertions as _nl
from driver_eval import stub_judge_reply
from tau2.data_model.message import (
    AssistantMessage,
    ToolCall,
)
from tau2.data_model.simulation import SimulationRun
from tau2.data_model.tasks import Task
from tau2.domains.banking_knowledge.environment import get_environment
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.runner.build import _derive_read_log_allowlist


def _fake_generate(model, messages, **kwargs):
    return AssistantMessage(role="assistant", content=stub_judge_reply(messages[0].content, messages[1].content))


_nl.generate = _fake_generate


def env_kwargs(config, task):
    kw = {"retrieval_variant": config}
    if task is not None:
        kw["task"] = task
        kw["read_log_allowlist"] = _derive_read_log_allowlist(task)
    return kw


def make(config, task=None):
    return get_environment(**env_kwargs(config, task))


def init(env, task):
    st = task.initial_state
    if st is None:
        env.set_state(None, None, [])
    else:
        env.set_state(st.initialization_data, st.initialization_actions, st.message_history or [])


def job_schemas(job):
    env = make(job["config"])
    out = {
        "agent": [t.openai_schema for t in env.get_tools()],
        "user": [t.openai_schema for t in env.get_user_tools()],
        "policy": env.get_policy(),
        "task_policies": {},
    }
    for t in job.get("tasks") or []:
        task = Task.model_validate(t)
        out["task_policies"][task.id] = make(job["config"], task).get_policy()
    return out


def job_calls(job):
    task = Task.model_validate(job["task"])
    env = make(job["config"], task)
    init(env, task)
    out = {"init": [env.get_db_hash(), env.get_user_db_hash()], "calls": []}
    for c in job["calls"]:
        tc = ToolCall(
            id=c.get("id", "c"),
            name=c["name"],
            arguments=c.get("arguments", {}),
            requestor=c.get("requestor", "assistant"),
        )
        rec = {}
        try:
            tm = env.get_response(tc)
            rec["content"], rec["error"] = tm.content, tm.error
        except Exception as exc:  # escapes get_response upstream
            rec["exception"] = f"{type(exc).__name__}: {exc}"
        rec["hashes"] = [env.get_db_hash(), env.get_user_db_hash()]
        out["calls"].append(rec)
    return out


def job_gold(job):
    task = Task.model_validate(job["task"])
    env = make(job["config"], task)
    init(env, task)
    out = [[env.get_db_hash(), env.get_user_db_hash()]]
    for a in task.evaluation_criteria.actions or []:
        try:
            env.make_tool_call(a.name, requestor=a.requestor, **a.arguments)
        except Exception:
            pass
        out.append([env.get_db_hash(), env.get_user_db_hash()])
    return out


def job_eval(job):
    task = Task.model_validate(job["task"])
    sim = SimulationRun(
        id="sim",
        task_id=task.id,
        start_time="2026-01-01T00:00:00",
        end_time="2026-01-01T00:00:01",
        duration=1.0,
        termination_reason=job["termination"],
        messages=job["messages"],
    )
    kw = {"retrieval_variant": job["config"], "read_log_allowlist": _derive_read_log_allowlist(task)}
    try:
        ri = evaluate_simulation(
            simulation=sim,
            task=task,
            evaluation_type=EvaluationType.ALL,
            solo_mode=False,
            domain="banking_knowledge",
            env_kwargs=kw,
            strict_replay=job.get("strict", True),
        )
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"reward_info": ri.model_dump(mode="json")}


def job_retrieval(job):
    env = get_environment(retrieval_variant=job["config"], retrieval_kwargs=job.get("kwargs") or None)
    tools = env.tools
    out = {"kb": [], "grep": []}
    for q in job.get("queries") or []:
        out["kb"].append(tools.KB_search(q) if hasattr(tools, "KB_search") else None)
    for p in job.get("patterns") or []:
        out["grep"].append(tools.grep(p) if hasattr(tools, "grep") else None)
    return out


KINDS = {"schemas": job_schemas, "calls": job_calls, "gold": job_gold, "eval": job_eval, "retrieval": job_retrieval}


def main():
    jobs = json.loads(sys.stdin.read())["jobs"]
    results = []
    for job in jobs:
        try:
            results.append({"ok": KINDS[job["kind"]](job)})
        except Exception:
            results.append({"failed": traceback.format_exc()})
    sys.stdout.write(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
