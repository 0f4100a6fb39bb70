"""Differential tests of banking_knowledge against upstream tau2-bench v1.0.1 run as a subprocess.

Compared, with 0 mismatches allowed: tool schemas and policies of every offline retrieval configuration
(and golden_retrieval's policy of every task); for every task the initial DB hashes, each gold action's tool
message and both DB hashes after it (live-env semantics) and the evaluator's gold-environment hashes; probe
calls (errors, wrong types, int/float spellings, locked and unknown tools, customer tools before they are
given); KB_search and grep outputs for queries drawn from every task; and reward_info of gold and perturbed
trajectories (the scoring issue's perturbation catalogue) for every task. Upstream environments are built as
its runner builds them: the retrieval variant, the task and the task's read allowlist.

Needs TAU2_REFERENCE_PYTHON (upstream v1.0.1 with rank-bm25). The counts are printed (``-s``).
"""

from __future__ import annotations

import json
import re

import pytest
from reference.driver_eval import stub_judge_reply
from refutil import ok, run_reference, upstream_shaped
from test_evaluation_cases import build_cases

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall, messages_to_dicts
from tau2_gym.domains.banking_knowledge.retrieval import GOLDEN_PLACEHOLDER, OFFLINE
from tau2_gym.domains.banking_knowledge.search import strip_timing
from tau2_gym.scoring.evaluation import EvaluationError, evaluate_simulation
from tau2_gym.scoring.judges import CallableJudge
from tau2_gym.scoring.rebuild import gold_environment, initial_environment

# slow: the retrieval index and every task (and upstream's, with a reference)
pytestmark = [pytest.mark.slow, pytest.mark.reference]

CONFIG = "bm25_grep"
JUDGE = CallableJudge(stub_judge_reply, name="stub")  # task_102's NL assertions: the same stub on both sides


def dom(config: str = CONFIG):
    return load_domain("banking_knowledge", options={"retrieval_config": config})


def tjson(task) -> dict:
    return task.model_dump(mode="json")


def hashes(env) -> list:
    return [env.get_db_hash(), env.get_user_db_hash()]


def our_calls(d, task, calls: list[dict]) -> dict:
    env = initial_environment(d, task)
    out = {"init": hashes(env), "calls": []}
    for c in calls:
        tm = env.get_response(
            ToolCall(c["name"], c.get("arguments", {}), id=c.get("id", "c"), requestor=c.get("requestor", "assistant"))
        )
        out["calls"].append({"content": tm.content, "error": tm.error, "hashes": hashes(env)})
    return out


def gold_calls(task) -> list[dict]:
    return [
        {"name": a.name, "arguments": a.arguments, "requestor": a.requestor, "id": f"g{i}"}
        for i, a in enumerate(task.evaluation_criteria.actions or [])
    ]


def test_schemas_and_policies_equal_upstream():
    tasks = list(dom().tasks())
    jobs, ours = [], []
    for cfg in OFFLINE:
        d = dom(cfg)
        golden = cfg == "golden_retrieval"
        jobs.append({"kind": "schemas", "config": cfg, "tasks": [tjson(t) for t in tasks] if golden else []})
        ours.append(
            {
                "agent": list(d.agent_tool_schemas()),
                "user": d.user_tool_schemas(),
                "policy": d.policy(),
                "task_policies": {t.id: d.policy(task=t) for t in tasks} if golden else {},
            }
        )
    results = run_reference("driver_banking", jobs)
    compared = 0
    for cfg, mine, res in zip(OFFLINE, ours, results):
        theirs = ok(res)
        assert mine["agent"] == theirs["agent"], cfg
        assert mine["user"] == theirs["user"], cfg
        if cfg == "golden_retrieval":  # the run's policy is upstream's Info placeholder; each task has its own
            assert mine["policy"] == GOLDEN_PLACEHOLDER
        else:
            assert mine["policy"] == theirs["policy"], cfg
        assert mine["task_policies"] == theirs["task_policies"], cfg
        compared += 3 + len(theirs["task_policies"])
    print(f"\nschemas/policies: {compared} compared over {len(OFFLINE)} configs, 0 mismatches")


def test_gold_actions_outputs_and_hashes_equal_upstream():
    d = dom()
    tasks = list(d.tasks())
    jobs, ours = [], []
    for t in tasks:
        jobs.append({"kind": "calls", "config": CONFIG, "task": tjson(t), "calls": gold_calls(t)})
        ours.append(our_calls(d, t, gold_calls(t)))
        jobs.append({"kind": "gold", "config": CONFIG, "task": tjson(t)})
        g = initial_environment(d, t)
        gold_hashes = [hashes(g)]
        for a in t.evaluation_criteria.actions or []:
            try:
                g.make_tool_call(a.name, a.requestor, **a.arguments)
            except Exception:  # noqa: BLE001 - the evaluator ignores failing gold actions
                pass
            gold_hashes.append(hashes(g))
        assert gold_hashes[-1] == hashes(gold_environment(d, t))
        ours.append(gold_hashes)
    results = run_reference("driver_banking", jobs)
    mismatches, n_calls = [], 0
    for job, mine, res in zip(jobs, ours, results):
        theirs = ok(res)
        if job["kind"] == "calls":
            n_calls += len(theirs["calls"])
        if mine != theirs:
            mismatches.append((job["kind"], job["task"]["id"], _first_diff(mine, theirs)))
    print(
        f"\ngold actions: {len(tasks)} tasks, {n_calls} calls (outputs + 2 hashes each) and evaluator gold "
        f"hashes, {len(mismatches)} mismatches"
    )
    assert not mismatches, mismatches[:3]


def _first_diff(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return (k, _first_diff(a.get(k), b.get(k)))
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return (i, _first_diff(x, y))
        return ("len", len(a), len(b))
    return (a, b)


def _probes() -> list[tuple[str, list[dict]]]:
    """(task, calls): error paths, type confusions and gateway rules, in sequences that change state."""

    def call(_tool, requestor="assistant", **arguments):
        return {"name": _tool, "arguments": arguments, "requestor": requestor}

    def unlock(tool):
        return call("unlock_discoverable_agent_tool", agent_tool_name=tool)

    def run(tool, args, raw=False):
        return call("call_discoverable_agent_tool", agent_tool_name=tool, arguments=args if raw else json.dumps(args))

    generic = [
        call("get_user_information_by_id", user_id="76ad9cc60e"),
        call("get_user_information_by_id", user_id='x"y'),
        call("get_user_information_by_name", customer_name="wei chen"),
        call("get_user_information_by_email", email="wei.chen.boston@gmail.com"),
        call("get_current_time"),
        call("transfer_to_human_agents", summary="s", reason="nope"),
        call("transfer_to_human_agents", summary="s"),
        call("change_user_email", user_id="nobody", new_email="a@b.c"),
        call("change_user_email", user_id="76ad9cc60e", new_email="new@example.com"),
        call(
            "log_verification",
            name="Wei Chen",
            user_id="76ad9cc60e",
            address="a",
            email="e",
            phone_number="p",
            date_of_birth="d",
            time_verified="2025-11-14 03:40:00 EST",
        ),
        call(
            "log_verification",
            name="Wei Chen",
            user_id="76ad9cc60e",
            address="a",
            email="e",
            phone_number="p",
            date_of_birth="d",
            time_verified="2025-11-14 03:40:00 EST",
        ),
        call("log_verification", name="Wei Chen"),
        call("list_discoverable_agent_tools"),
        run("update_transaction_rewards_3847", {"transaction_id": "t", "new_rewards_earned": "1"}),
        unlock("not_a_tool_9999"),
        unlock("update_transaction_rewards_3847"),
        run("update_transaction_rewards_3847", {"transaction_id": "missing", "new_rewards_earned": "5 points"}),
        run("update_transaction_rewards_3847", "{bad json", raw=True),
        run("update_transaction_rewards_3847", "[1, 2]", raw=True),
        run("update_transaction_rewards_3847", {"transaction_id": "x"}),
        run("update_transaction_rewards_3847", {"transaction_id": "x", "new_rewards_earned": "1", "extra": 1}),
        call("update_transaction_rewards_3847", transaction_id="missing", new_rewards_earned="2"),
        call("list_discoverable_agent_tools"),
        unlock("submit_credit_limit_increase_request_7392"),
        run(
            "submit_credit_limit_increase_request_7392",
            {"credit_card_account_id": "nope", "user_id": "76ad9cc60e", "requested_increase_amount": 2500},
        ),
        run(
            "submit_credit_limit_increase_request_7392",
            {"credit_card_account_id": "nope", "user_id": "76ad9cc60e", "requested_increase_amount": 25.5},
        ),
        run(
            "submit_credit_limit_increase_request_7392",
            {"credit_card_account_id": "nope", "user_id": "76ad9cc60e", "requested_increase_amount": "lots"},
        ),
        unlock("open_bank_account_4821"),
        run("open_bank_account_4821", {"user_id": "76ad9cc60e", "account_type": "savings", "account_class": "X"}),
        run("open_bank_account_4821", {"user_id": "76ad9cc60e", "account_type": "checking", "account_class": "Blue"}),
        run("open_bank_account_4821", {"user_id": "76ad9cc60e", "account_type": "checking", "account_class": "Blue"}),
        run("open_bank_account_4821", {"user_id": "76ad9cc60e", "account_type": "bogus", "account_class": "Blue"}),
        unlock("activate_debit_card_8291"),
        run(
            "activate_debit_card_8291",
            {"card_id": "x", "last_4_digits": "1234", "expiration_date": "01/30", "cvv": "123", "pin": 1357},
        ),
        run(
            "activate_debit_card_8291",
            {"card_id": "x", "last_4_digits": "1234", "expiration_date": "01/30", "cvv": "123", "pin": "1234"},
        ),
        run(
            "activate_debit_card_8291",
            {"card_id": "x", "last_4_digits": "1234", "expiration_date": "01/30", "cvv": "123", "pin": "1357"},
        ),
        unlock("file_debit_card_transaction_dispute_6281"),
        run("file_debit_card_transaction_dispute_6281", {"transaction_id": "t"}),
        run(
            "file_debit_card_transaction_dispute_6281",
            dict(
                transaction_id="t1",
                account_id="a",
                card_id="c",
                user_id="u",
                dispute_category="unauthorized_transaction",
                transaction_date="11/01/2025",
                discovery_date="11/02/2025",
                disputed_amount="600",
                transaction_type="pin_purchase",
                card_in_possession=True,
                pin_compromised="no",
                contacted_merchant=False,
                police_report_filed=False,
                written_statement_provided=True,
                provisional_credit_eligible=True,
                customer_max_liability_amount=50,
                card_action="keep_active",
            ),
        ),
        run(
            "file_debit_card_transaction_dispute_6281",
            dict(
                transaction_id="t1",
                account_id="a",
                card_id="c",
                user_id="u",
                dispute_category="unauthorized_transaction",
                transaction_date="11/01/2025",
                discovery_date="11/02/2025",
                disputed_amount=600,
                transaction_type="pin_purchase",
                card_in_possession=True,
                pin_compromised="yes_shared",
                contacted_merchant=False,
                police_report_filed=False,
                written_statement_provided=True,
                provisional_credit_eligible=True,
                customer_max_liability_amount=50,
                card_action="keep_active",
            ),
        ),
        unlock("get_atm_deposit_images_8473"),
        run("get_atm_deposit_images_8473", {"transaction_id": "btxn_834027370c20"}),
        run("get_atm_deposit_images_8473", {"transaction_id": "nope"}),
        call("give_discoverable_user_tool", discoverable_tool_name="nope"),
        call("give_discoverable_user_tool", discoverable_tool_name="VALID_CREDIT_CARD_TYPES"),
        call(
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=json.dumps({"credit_card_account_id": "cc_76ad9cc60e_gold"}),
        ),
        call(
            "give_discoverable_user_tool",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=json.dumps({"bogus": 1}),
        ),
        call(
            "give_discoverable_user_tool",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=json.dumps({"credit_card_account_id": "cc_76ad9cc60e_gold"}),
        ),
        call(
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=json.dumps({"credit_card_account_id": "cc_76ad9cc60e_gold"}),
        ),
        call(
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="get_card_last_4_digits",
            arguments="{}",
        ),
        call(
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=json.dumps({"credit_card_account_id": "x", "more": 2}),
        ),
        call("list_discoverable_user_tools", requestor="user"),
        call("give_discoverable_user_tool", discoverable_tool_name="deposit_check_3847"),
        call(
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="deposit_check_3847",
            arguments=json.dumps({"account_id": "01", "check_amount": 100}),
        ),
        call(
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="deposit_check_3847",
            arguments=json.dumps({"account_id": "01", "check_amount": 100.0}),
        ),
        call(
            "apply_for_credit_card",
            requestor="user",
            card_type="Gold Rewards Card",
            customer_name="Wei Chen",
            annual_income=125000,
        ),
        call(
            "apply_for_credit_card",
            requestor="user",
            card_type="Gold Rewards Card",
            customer_name="Wei Chen",
            annual_income=125000.0,
        ),
        call("apply_for_credit_card", requestor="user", card_type="Mystery Card", customer_name="X", annual_income=1),
        call("submit_referral", requestor="user", user_id="76ad9cc60e", account_type="Gold Rewards Card"),
        call("submit_referral", requestor="user", user_id="76ad9cc60e", account_type="Gold Rewards Card"),
        call("request_human_agent_transfer", requestor="user"),
        call("request_human_agent_transfer", requestor="user"),
        call(
            "submit_transaction",
            requestor="user",
            user_id="76ad9cc60e",
            credit_card_type="Silver Rewards Card",
            merchant_name="M",
            amount=127.43,
            category="Travel",
        ),
        call(
            "submit_transaction",
            requestor="user",
            user_id="76ad9cc60e",
            credit_card_type="Nope",
            merchant_name="M",
            amount=1,
            category="Travel",
        ),
        call("KB_search", query=""),
        call("grep", pattern="("),
        call("not_a_tool"),
    ]
    return [("task_010", generic), ("task_073", generic[:20]), ("task_058", generic[30:])]


def test_probe_calls_equal_upstream():
    d = dom()
    jobs, ours = [], []
    for tid, calls in _probes():
        t = d.task(tid)
        jobs.append({"kind": "calls", "config": CONFIG, "task": tjson(t), "calls": calls})
        ours.append(our_calls(d, t, calls))
    results = run_reference("driver_banking", jobs)
    mismatches, n = [], 0
    for job, mine, res in zip(jobs, ours, results):
        theirs = ok(res)
        for i, (m, th) in enumerate(zip(mine["calls"], theirs["calls"])):
            n += 1
            if job["calls"][i]["name"] == "KB_search":
                m, th = dict(m, content=strip_timing(m["content"])), dict(th, content=strip_timing(th["content"]))
            if m != th:
                mismatches.append((job["task"]["id"], i, job["calls"][i], m, th))
        assert mine["init"] == theirs["init"]
    print(f"\nprobe calls: {n} compared, {len(mismatches)} mismatches")
    assert not mismatches, mismatches[:3]


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")


def _queries(tasks) -> tuple[list[str], list[str]]:
    """Per task: a query from the scenario, one from each of two required document ids; grep patterns from
    the scenario's words, a regex, a case variant and an invalid regex."""
    queries, patterns = (
        ["", "   ", "credit card annual fee", "transfer to human agent"],
        ["", "fee|charge", "credit.*card", "(", "[a-"],
    )
    for t in tasks:
        words = _WORD.findall(str(t.user_scenario.instructions))
        queries.append(" ".join(words[:12]))
        for ref in (t.required_documents or [])[:2]:
            queries.append(ref.replace("doc_", "").replace("_", " "))
        if len(words) > 20:
            patterns.append(words[20])
            patterns.append(words[20].upper() + "|" + words[-1])
    return queries, patterns


def test_retrieval_results_equal_upstream():
    tasks = list(dom().tasks())
    queries, patterns = _queries(tasks)
    jobs, ours = [], []
    # the three search configurations, and upstream's retrieval_kwargs (top_k, grep_top_k, case_sensitive)
    variants = [(cfg, None) for cfg in ("bm25", "bm25_grep", "grep_only")]
    variants.append(("bm25_grep", {"top_k": 3, "grep_top_k": 2, "case_sensitive": True}))
    for cfg, kwargs in variants:
        d = load_domain(
            "banking_knowledge", options={"retrieval_config": cfg, **({"retrieval_kwargs": kwargs} if kwargs else {})}
        )
        kit = d.make_environment().tools
        jobs.append({"kind": "retrieval", "config": cfg, "kwargs": kwargs, "queries": queries, "patterns": patterns})
        ours.append(
            {
                "kb": [kit.KB_search(q) if kit.has_tool("KB_search") else None for q in queries],
                "grep": [kit.grep(p) if kit.has_tool("grep") else None for p in patterns],
            }
        )
    results = run_reference("driver_banking", jobs)
    n = mismatches = 0
    for _job, mine, res in zip(jobs, ours, results):
        theirs = ok(res)
        for a, b in zip(mine["kb"], theirs["kb"]):
            n += a is not None
            mismatches += (a is None) != (b is None) or (a is not None and strip_timing(a) != strip_timing(b))
        for a, b in zip(mine["grep"], theirs["grep"]):
            n += a is not None
            mismatches += a != b
    print(
        f"\nretrieval: {len(queries)} queries and {len(patterns)} patterns x {len(variants)} configurations, "
        f"{n} results compared, {mismatches} mismatches"
    )
    assert mismatches == 0


def test_rewards_of_gold_and_perturbed_trajectories_equal_upstream():
    d = dom()
    tasks = list(d.tasks())
    cases = build_cases(d, tasks, seed=11, per_task=4)
    jobs, ours, labels = [], [], []
    for case in cases:
        for strict in (True, False) if case.name.startswith("tampered") else (True,):
            jobs.append(
                {
                    "kind": "eval",
                    "config": CONFIG,
                    "task": tjson(case.task),
                    "messages": messages_to_dicts(case.messages),
                    "termination": case.termination,
                    "strict": strict,
                }
            )
            try:
                ours.append(
                    {
                        "reward_info": evaluate_simulation(
                            d, case.task, case.messages, case.termination, judge=JUDGE, strict=strict
                        )
                    }
                )
            except EvaluationError as exc:
                ours.append({"error": str(exc)})
            labels.append((case.task.id, case.name, strict))
    results = run_reference("driver_banking", jobs, timeout=3600)
    mismatches, ones = [], 0
    for label, mine, res in zip(labels, ours, results):
        theirs = ok(res)
        if "error" in theirs or "error" in mine:
            if ("error" in theirs) != ("error" in mine):
                mismatches.append((label, mine, theirs))
            continue
        ones += theirs["reward_info"]["reward"] == 1.0
        mine_info = upstream_shaped(mine["reward_info"])
        if mine_info != theirs["reward_info"]:
            mismatches.append((label, _first_diff(mine_info, theirs["reward_info"])))
    print(
        f"\nrewards: {len(jobs)} simulations of {len(tasks)} tasks ({ones} with reward 1), {len(mismatches)} mismatches"
    )
    assert not mismatches, mismatches[:3]
