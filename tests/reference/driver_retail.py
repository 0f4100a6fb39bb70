"""Reference driver (retail): upstream tool calls with DB hashes, cheaper than driver_env's ``calls``.

Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout; run under TAU2_REFERENCE_PYTHON only.
Upstream's retail hash re-serialises the whole 2.8 MB DB (~60-90 ms), so hashing after every call of
~1200 calls dominates a run. Here the hash is recomputed after every call of a *mutating* tool (write
tools, failing ones included: they may leave partial changes) and carried over after read/generic/unknown
tools, which upstream's code never lets change the DB. Each result says which hashes were computed.

Job kinds:
- calls: {"calls": [ToolCall...]} on a fresh environment ->
  {"initial_hash", "calls": [{content, error, agent_hash, hash_computed}]}
- schemas: {} -> {"agent": [openai schema...], "user": None}
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
from tau2.domains.retail.data_model import RetailDB
from tau2.domains.retail.environment import get_environment
from tau2.domains.retail.utils import RETAIL_DB_PATH
from tau2.utils import load_file

_initial_hash = None
_raw_db = None


def fresh_environment():
    """``get_environment()`` with the file parsed once per process (validation still builds a new DB)."""
    global _raw_db
    if _raw_db is None:
        _raw_db = load_file(RETAIL_DB_PATH)
    return get_environment(db=RetailDB.model_validate(_raw_db))


def job_calls(job):
    global _initial_hash
    env = fresh_environment()
    if _initial_hash is None:  # every job starts from the same db.json
        _initial_hash = env.get_db_hash()
    current = _initial_hash
    out = []
    for c in job["calls"]:
        tc = ToolCall(
            id=c.get("id", ""),
            name=c["name"],
            arguments=c.get("arguments", {}),
            requestor=c.get("requestor", "assistant"),
        )
        msg = env.get_response(tc)
        mutating = env.tools.has_tool(tc.name) and env.tools.tool_mutates_state(tc.name)
        if mutating:
            current = env.get_db_hash()
        out.append({"content": msg.content, "error": msg.error, "agent_hash": current, "hash_computed": mutating})
    return {"initial_hash": _initial_hash, "calls": out}


def job_schemas(job):
    env = get_environment()
    return {"agent": [t.openai_schema for t in env.get_tools()], "user": None}


JOBS = {"calls": job_calls, "schemas": job_schemas}


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
