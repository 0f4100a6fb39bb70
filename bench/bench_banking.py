"""banking_knowledge benchmark: reset, retrieval calls, a discoverable-tool call, scoring, memory per live episode.

    python bench/bench_banking.py     # add TAU2_REFERENCE_PYTHON=... to measure upstream in the same run

Ours: ``load_domain("banking_knowledge")`` (bm25_grep; documents, BM25 index and DB built once per process),
then ``initial_environment`` per episode. Upstream: ``get_environment(retrieval_variant="bm25_grep", task=...,
read_log_allowlist=...)`` + ``set_state`` -- what its runner does per episode (it re-reads the 698 documents and
rebuilds the pipelines each time) -- in a subprocess under the reference python. Scoring: the gold trajectory of
task_073 (11 calls) through ``evaluate_simulation`` on both sides. Memory: ``tracemalloc`` growth per live
episode after one write.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fmt_bytes, fmt_time, median_time, print_table, ratio, run_upstream

from tau2_gym import load_domain
from tau2_gym.core.messages import AssistantMessage, ToolCall, UserMessage, messages_to_dicts
from tau2_gym.scoring.evaluation import evaluate_simulation
from tau2_gym.scoring.rebuild import initial_environment

TASK = "task_073"
N_LIVE = 200
N_LIVE_UPSTREAM = 4
QUERY = "fee refund checking account ATM fees"
PATTERN = "ATM fee|rebate"
UNLOCK = ("unlock_discoverable_agent_tool", {"agent_tool_name": "get_bank_account_transactions_9173"})
READ = (
    "call_discoverable_agent_tool",
    {
        "agent_tool_name": "get_bank_account_transactions_9173",
        "arguments": json.dumps({"account_id": "chk_kj93a7b2e1_3"}),
    },
)


def gold_messages(dom, task) -> list:
    env = initial_environment(dom, task)
    msgs = [AssistantMessage(content="Hi! How can I help you today?"), UserMessage(content="Hi")]
    for i, a in enumerate(task.evaluation_criteria.actions):
        tc = ToolCall(a.name, dict(a.arguments), id=f"c{i}", requestor=a.requestor)
        cls = AssistantMessage if a.requestor == "assistant" else UserMessage
        msgs.append(cls(content=None, tool_calls=[tc]))
        msgs.append(env.get_response(tc))
    msgs.append(UserMessage(content="###STOP###"))
    return msgs


def ours() -> tuple[dict, list]:
    dom = load_domain("banking_knowledge")
    task = dom.task(TASK)
    out = {"reset": median_time(lambda: initial_environment(dom, task), repeat=500)}
    env = initial_environment(dom, task)
    kb, grep = ToolCall("KB_search", {"query": QUERY}, id="1"), ToolCall("grep", {"pattern": PATTERN}, id="1")
    out["kb"] = median_time(lambda: env.get_response(kb), repeat=100)
    out["grep"] = median_time(lambda: env.get_response(grep), repeat=50)
    env.get_response(ToolCall(*UNLOCK, id="1"))
    read = ToolCall(*READ, id="1")
    out["read"] = median_time(lambda: env.get_response(read), repeat=500)
    msgs = gold_messages(dom, task)
    out["score"] = median_time(lambda: evaluate_simulation(dom, task, msgs, "user_stop"), repeat=50)
    out["hash"] = median_time(env.get_db_hash, repeat=100)
    write = ToolCall(
        "log_verification",
        {
            "name": "A",
            "user_id": "u",
            "address": "a",
            "email": "e",
            "phone_number": "p",
            "date_of_birth": "d",
            "time_verified": "t",
        },
        id="1",
    )
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    live = []
    for _ in range(N_LIVE):
        e = initial_environment(dom, task)
        e.get_response(write)
        live.append(e)
    out["mem"] = (tracemalloc.get_traced_memory()[0] - base) / N_LIVE
    tracemalloc.stop()
    return out, msgs


UPSTREAM = """
from tau2.domains.banking_knowledge.environment import get_environment, get_tasks
from tau2.runner.build import _derive_read_log_allowlist
from tau2.data_model.message import ToolCall
from tau2.data_model.simulation import SimulationRun
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
TASK, QUERY, PATTERN, UNLOCK, READ, N = {TASK!r}, {QUERY!r}, {PATTERN!r}, {UNLOCK!r}, {READ!r}, {N}
MESSAGES = json.loads({messages!r})
task = next(t for t in get_tasks() if t.id == TASK)
allow = _derive_read_log_allowlist(task)
def make():
    env = get_environment(retrieval_variant="bm25_grep", task=task, read_log_allowlist=allow)
    st = task.initial_state
    env.set_state(st.initialization_data if st else None, st.initialization_actions if st else None,
                  (st.message_history or []) if st else [])
    return env
out = {{"reset": median_time(make, repeat=5)}}
env = make()
kb = ToolCall(id="1", name="KB_search", arguments={{"query": QUERY}})
grep = ToolCall(id="1", name="grep", arguments={{"pattern": PATTERN}})
out["kb"] = median_time(lambda: env.get_response(kb), repeat=50)
out["grep"] = median_time(lambda: env.get_response(grep), repeat=20)
env.get_response(ToolCall(id="1", name=UNLOCK[0], arguments=UNLOCK[1]))
read = ToolCall(id="1", name=READ[0], arguments=READ[1])
out["read"] = median_time(lambda: env.get_response(read), repeat=100)
sim = SimulationRun(id="s", task_id=TASK, start_time="2026-01-01T00:00:00", end_time="2026-01-01T00:00:01",
                    duration=1.0, termination_reason="user_stop", messages=MESSAGES)
kw = {{"retrieval_variant": "bm25_grep", "read_log_allowlist": allow}}
out["score"] = median_time(lambda: evaluate_simulation(simulation=sim, task=task, evaluation_type=EvaluationType.ALL,
                                                       solo_mode=False, domain="banking_knowledge", env_kwargs=kw),
                           repeat=3, warmup=1)
out["hash"] = median_time(env.get_db_hash, repeat=20)
write = ToolCall(id="1", name="log_verification", arguments={{"name": "A", "user_id": "u", "address": "a",
    "email": "e", "phone_number": "p", "date_of_birth": "d", "time_verified": "t"}})
make()
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
live = []
for _ in range(N):
    e = make(); e.get_response(write); live.append(e)
out["mem"] = (tracemalloc.get_traced_memory()[0] - base) / N
tracemalloc.stop()
print(json.dumps(out))
"""

ROWS = [
    ("reset", "reset (environment + task's initial state)"),
    ("kb", "KB_search (BM25 over 698 documents)"),
    ("grep", "grep (regex over 698 documents)"),
    ("read", "call_discoverable_agent_tool (a read)"),
    ("hash", "DB hash"),
    ("score", f"score the gold trajectory of {TASK}"),
]


def main() -> None:
    o, msgs = ours()
    code = UPSTREAM.format(
        TASK=TASK,
        QUERY=QUERY,
        PATTERN=PATTERN,
        UNLOCK=UNLOCK,
        READ=READ,
        N=N_LIVE_UPSTREAM,
        messages=json.dumps(messages_to_dicts(msgs)),
    )
    u = run_upstream(code) or {}
    rows = [(label, fmt_time(o[k]), fmt_time(u.get(k)), ratio(u.get(k), o[k])) for k, label in ROWS]
    share = f"{100 * o['mem'] / u['mem']:.2f}% of upstream" if u.get("mem") else "-"
    rows.append(("memory per live episode (after a write)", fmt_bytes(o["mem"]), fmt_bytes(u.get("mem")), share))
    print_table("banking_knowledge domain (bm25_grep)", rows)


if __name__ == "__main__":
    main()
