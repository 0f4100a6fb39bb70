"""banking_knowledge without upstream: loading, tools and the discoverable-tool gateway, retrieval configurations,
grading rules (read allowlist, numeric normalisation, the shared DB), oracle runs, fuzzed actions.

The differential tests against upstream are in ``test_banking_knowledge_reference.py``.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import random
import re
import sys
from collections import Counter

import gymnasium as gym
import pytest

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.domains.banking_knowledge import retrieval as R
from tau2_gym.domains.banking_knowledge.environment import read_log_allowlist
from tau2_gym.domains.banking_knowledge.search import KnowledgeIndex, MissingDependency, strip_timing
from tau2_gym.players.agents.scripted import make_agent
from tau2_gym.scoring.evaluation import evaluate_simulation
from tau2_gym.scoring.rebuild import gold_environment, initial_environment

NAME = "banking_knowledge"


@pytest.fixture(scope="module")
def dom():
    return load_domain(NAME)


def call(env, name, requestor="assistant", **arguments):
    return env.get_response(ToolCall(name, arguments, id="t", requestor=requestor)).content


def run_tool(env, tool, **arguments):
    return call(env, "call_discoverable_agent_tool", agent_tool_name=tool, arguments=json.dumps(arguments))


# ------------------------------------------------------------------------------------------ loading


def test_domain_loads_tasks_from_the_task_folder_with_our_own_split(dom):
    tasks = dom.tasks()
    folder = dom.folder / "tasks"
    assert [t.id for t in tasks] == sorted(p.stem for p in folder.glob("task_*.json"))
    assert len(tasks) == 97
    by_file = json.loads((folder / "task_001.json").read_text())
    assert tasks[0].user_scenario.instructions == by_file["user_scenario"]["instructions"]
    splits = dom.splits()
    assert set(splits) == {"base", "train", "test"}
    assert set(splits["train"]) | set(splits["test"]) == set(splits["base"]) == {t.id for t in tasks}
    assert not set(splits["train"]) & set(splits["test"])
    assert len(splits["test"]) == round(0.2 * 97)
    assert dom.tasks(split="test") == tuple(t for t in tasks if t.id in set(splits["test"]))


def test_listed_tools_exclude_the_discoverable_ones_which_stay_callable(dom):
    agent = [s["function"]["name"] for s in dom.agent_tool_schemas()]
    assert agent[:2] == ["KB_search", "grep"]  # the configuration's search tools come first, as upstream's
    kit = dom.agent_toolkit
    assert len(kit.discoverable_names) == 44  # + 4 customer-side ones: upstream's 48
    assert not set(agent) & kit.discoverable_names
    assert {
        "unlock_discoverable_agent_tool",
        "call_discoverable_agent_tool",
        "list_discoverable_agent_tools",
        "give_discoverable_user_tool",
    } <= set(agent)
    user = [s["function"]["name"] for s in dom.user_tool_schemas()]
    assert user == [
        "apply_for_credit_card",
        "submit_referral",
        "call_discoverable_user_tool",
        "list_discoverable_user_tools",
        "request_human_agent_transfer",
        "submit_transaction",
    ]
    assert dom.user_toolkit.discoverable_names == {
        "submit_cash_back_dispute_0589",
        "get_referral_link",
        "get_card_last_4_digits",
        "deposit_check_3847",
    }
    env = dom.make_environment()
    assert "not found" in call(env, "get_atm_deposit_images_8473", transaction_id="nope")  # callable by name


def test_descriptions_are_upstreams_docstrings_read_from_the_sources(dom):
    src = (dom.source.src / "domains/banking_knowledge/tools.py").read_text()
    env = dom.make_environment()
    out = call(env, "unlock_discoverable_agent_tool", agent_tool_name="get_atm_deposit_images_8473")
    desc = out.splitlines()[1].removeprefix("Description: ")
    assert desc and desc in src  # upstream's sentence, not ours
    assert out.count("(required)") == 1 and "transaction_id: string (required)" in out
    kb = next(s for s in dom.agent_tool_schemas() if s["function"]["name"] == "KB_search")
    mixins = (dom.source.src / "domains/banking_knowledge/retrieval_mixins.py").read_text()
    assert kb["function"]["description"].split("\n")[0] in mixins


def test_agent_and_customer_share_one_db(dom):
    env = initial_environment(dom, dom.task("task_001"))
    assert env.tools.db is env.user_tools.db
    before = env.get_db_hash()
    out = call(env, "submit_referral", requestor="user", user_id="76ad9cc60e", account_type="Gold Rewards Card")
    assert "Referral request submitted successfully!" in out
    assert env.get_db_hash() == env.get_user_db_hash() != before
    assert "Gold Rewards Card" in call(env, "get_referrals_by_user", user_id="76ad9cc60e")


# ------------------------------------------------------------------------------------------ gateway


def test_discoverable_tools_must_be_unlocked_and_their_calls_are_logged(dom):
    env = initial_environment(dom, dom.task("task_001"))
    assert "has not been unlocked" in run_tool(
        env, "update_transaction_rewards_3847", transaction_id="x", new_rewards_earned="1"
    )
    assert "Unknown agent tool" in call(env, "unlock_discoverable_agent_tool", agent_tool_name="bogus_0000")
    h0 = env.get_db_hash()
    assert call(env, "unlock_discoverable_agent_tool", agent_tool_name="update_transaction_rewards_3847").startswith(
        "Tool unlocked: update_transaction_rewards_3847"
    )
    assert env.get_db_hash() == h0  # unlocking is in memory only
    assert "not found" in run_tool(env, "update_transaction_rewards_3847", transaction_id="x", new_rewards_earned="1")
    logged = env.tools.db.agent_discoverable_tools["data"]
    assert [r["tool_name"] for r in logged.values()] == ["update_transaction_rewards_3847"]  # writes: always
    listing = call(env, "list_discoverable_agent_tools")
    assert listing.startswith("Your called agent tools:\nFound 1 record(s)")


def test_reads_are_logged_only_when_the_tasks_gold_actions_call_them(dom):
    task = next(t for t in dom.tasks() if "get_bank_account_transactions_9173" in read_log_allowlist(t))
    other = dom.task("task_001")
    assert "get_bank_account_transactions_9173" not in read_log_allowlist(other)
    for t, logged in ((task, True), (other, False)):
        env = initial_environment(dom, t)
        call(env, "unlock_discoverable_agent_tool", agent_tool_name="get_bank_account_transactions_9173")
        h = env.get_db_hash()
        run_tool(env, "get_bank_account_transactions_9173", account_id="01")
        assert (env.get_db_hash() != h) is logged


def test_numbers_are_normalised_so_int_and_float_spellings_hash_alike(dom):
    hashes, outputs = [], []
    for amount in ("2500", "2500.0"):
        env = initial_environment(dom, dom.task("task_001"))
        card = next(iter(env.tools.db.credit_card_accounts["data"].values()))
        call(env, "unlock_discoverable_agent_tool", agent_tool_name="submit_credit_limit_increase_request_7392")
        args = (
            f'{{"credit_card_account_id": "{card["account_id"]}", "user_id": "{card["user_id"]}", '
            f'"requested_increase_amount": {amount}}}'
        )
        outputs.append(
            call(
                env,
                "call_discoverable_agent_tool",
                agent_tool_name="submit_credit_limit_increase_request_7392",
                arguments=args,
            )
        )
        hashes.append(env.get_db_hash())
    assert outputs[0] == outputs[1] and "Requested Increase: $2,500" in outputs[0]
    assert hashes[0] == hashes[1]


def test_customer_tools_work_only_after_the_agent_gives_them(dom):
    env = initial_environment(dom, dom.task("task_001"))
    args = json.dumps({"credit_card_account_id": "cc_76ad9cc60e_gold"})

    def user_run():
        return call(
            env,
            "call_discoverable_user_tool",
            requestor="user",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=args,
        )

    assert "has not been given to you" in user_run()
    assert (
        call(
            env,
            "give_discoverable_user_tool",
            discoverable_tool_name="get_card_last_4_digits",
            arguments=json.dumps({"nope": 1}),
        )
        == "Error: Unexpected parameter: nope"
    )
    given = call(env, "give_discoverable_user_tool", discoverable_tool_name="get_card_last_4_digits", arguments=args)
    assert given.startswith("Tool given to user: get_card_last_4_digits")
    out = user_run()
    assert re.search(r"Last 4 digits of card: \d{4}$", out), out
    calls = env.tools.db.user_discoverable_tool_calls["data"]
    assert [r["tool_name"] for r in calls.values()] == ["get_card_last_4_digits"]


# ------------------------------------------------------------------------------------------ retrieval


def test_every_offline_configuration_builds_its_tools_and_policy():
    expected_tools = {
        "bm25": ["KB_search"],
        "bm25_grep": ["KB_search", "grep"],
        "grep_only": ["grep"],
        "full_kb": [],
        "golden_retrieval": [],
        "no_knowledge": [],
    }
    assert set(R.OFFLINE) == set(expected_tools)
    sizes = {}
    for cfg, tools in expected_tools.items():
        d = load_domain(NAME, options={"retrieval_config": cfg})
        names = [s["function"]["name"] for s in d.agent_tool_schemas()]
        assert [n for n in names if n in ("KB_search", "grep")] == tools
        sizes[cfg] = len(d.policy())
    assert sizes["full_kb"] > 50 * sizes["bm25_grep"]  # every document inlined
    assert load_domain(NAME, options={"retrieval_config": "golden_retrieval"}).policy() == R.GOLDEN_PLACEHOLDER


def test_golden_retrieval_puts_the_tasks_documents_in_the_system_prompt():
    env = gym.make("tau2/banking_knowledge-v0", retrieval_config="golden_retrieval", judge="fail")
    obs, info = env.reset(options={"task_id": "task_001"})
    system = obs[0]["content"]
    docs = env.unwrapped.domain.spec.extra["retrieval"]
    assert docs.name == "golden_retrieval"
    index = env.unwrapped.domain.agent_toolkit._index
    for ref in info["task"].required_documents:
        assert f"## {index.titles[ref]}\n\n" in system
    obs2, _ = env.reset(options={"task_id": "task_004"})
    assert obs2[0]["content"] != system


@pytest.mark.parametrize(
    "name", ["alltools", "openai_embeddings", "bm25_reranker_grep", "terminal_use", "qwen_embeddings_grep"]
)
def test_configurations_that_need_a_service_raise_naming_it(name):
    with pytest.raises(ValueError, match=r"needs .*(embeddings|reranker|sandbox).*run offline"):
        load_domain(NAME, options={"retrieval_config": name})


def test_unknown_configuration_and_option_are_refused():
    with pytest.raises(ValueError, match="Unknown retrieval variant: 'bm26'"):
        load_domain(NAME, options={"retrieval_config": "bm26"})
    with pytest.raises(ValueError, match="unknown retrieval option"):
        load_domain(NAME, options={"retrieval_config": "bm25", "retrieval_kwargs": {"topk": 3}})
    with pytest.raises(ValueError, match="takes no options"):
        load_domain("mock", options={"retrieval_config": "bm25"})


def test_bm25_ranks_by_okapi_scores_computed_from_first_principles(dom):
    index: KnowledgeIndex = dom.agent_toolkit._index
    corpus = [index.contents[i].lower().split() for i in index.ids]
    n, avgdl = len(corpus), sum(map(len, corpus)) / len(corpus)
    query = "dispute provisional credit debit card".split()
    df = Counter(w for doc in corpus for w in set(doc))
    idf = {w: math.log(n - df[w] + 0.5) - math.log(df[w] + 0.5) for w in df}
    floor = 0.25 * sum(idf.values()) / len(idf)
    idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}
    expected = []
    for doc in corpus:
        tf = Counter(doc)
        expected.append(
            sum(idf.get(q, 0) * tf[q] * 2.5 / (tf[q] + 1.5 * (0.25 + 0.75 * len(doc) / avgdl)) for q in query)
        )
    top = sorted(range(n), key=lambda i: expected[i], reverse=True)[:10]
    got = index.bm25_search(" ".join(query).upper(), 10)  # case-folded like the index
    assert [d for d, _ in got] == [index.ids[i] for i in top]
    assert all(math.isclose(s, expected[i], rel_tol=1e-9) for (_, s), i in zip(got, top))


def test_kb_search_and_grep_texts(dom):
    env = dom.make_environment()
    out = call(env, "KB_search", query="annual fee")
    assert out.endswith("\n\n[Timing: retrieval=0ms, reranking=0ms, total=0ms]")  # deterministic by default
    assert call(env, "KB_search", query="annual fee") == out
    measured = load_domain(NAME, options={"retrieval_config": "bm25", "retrieval_kwargs": {"timing": "measured"}})
    timed = call(measured.make_environment(), "KB_search", query="annual fee")
    assert re.search(r"\n\n\[Timing: retrieval=\d+ms(, reranking=\d+ms)?, total=\d+ms\]$", timed)
    assert strip_timing(timed) == strip_timing(out)
    assert strip_timing(out).startswith("1. ") and strip_timing(out).count("\n   ID: doc_") == 10
    assert call(env, "KB_search", query="  ").startswith("No relevant documents found.\n\n[Timing:")
    assert call(env, "grep", pattern="zzqqxx") == "No matches found for pattern: zzqqxx"
    literal = call(env, "grep", pattern="(")  # not a regex: searched literally
    assert literal.startswith("1. ")
    counts = [float(m) for m in re.findall(r"   Score: ([\d.]+)\n", call(env, "grep", pattern="fee|charge"))]
    assert counts == sorted(counts, reverse=True) and len(counts) == 10
    assert call(env, "KB_search", query=5).startswith("Error: 'int' object has no attribute 'strip'")


def test_missing_rank_bm25_gives_the_install_hint(dom, monkeypatch):
    monkeypatch.setitem(sys.modules, "rank_bm25", None)
    fresh = KnowledgeIndex({})
    with pytest.raises(MissingDependency, match=r"tau2-gym\[knowledge\]"):
        fresh.bm25()


# ------------------------------------------------------------------------------------------ episodes


def _play(env, task_id):
    obs, info = env.reset(options={"task_id": task_id})
    agent = make_agent("oracle")
    agent.reset(info["task"], info)
    while True:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        if term or trunc:
            return reward, info


def test_oracle_agent_and_user_score_every_task_whose_criteria_the_gold_actions_meet():
    env = gym.make("tau2/banking_knowledge-v0", user="oracle", judge="pass")
    rewards = {t.id: _play(env, t.id)[0] for t in env.unwrapped.tasks}
    assert rewards == {t.id: 1.0 for t in env.unwrapped.tasks}
    # without a judge the one NL-assertion task (task_102) fails, as the judge choice says
    env2 = gym.make("tau2/banking_knowledge-v0", user="oracle", judge="fail")
    nl = [t.id for t in env2.unwrapped.tasks if "NL_ASSERTION" in [b.value for b in t.evaluation_criteria.reward_basis]]
    assert nl == ["task_102"]
    reward, info = _play(env2, "task_102")
    assert reward == 0.0 and info["reward_info"]["reward_breakdown"]["DB"] == 1.0


def test_results_record_the_retrieval_configuration(tmp_path):
    env = gym.make(
        "tau2/banking_knowledge-v0", retrieval_config="grep_only", retrieval_kwargs={"grep_top_k": 3}, judge="fail"
    )
    reward, info = _play(env, "task_010")
    assert reward == 1.0
    info_block = env.unwrapped.results_info()
    assert info_block["retrieval_config"] == "grep_only"
    assert info_block["retrieval_config_kwargs"] == {"grep_top_k": 3}
    assert env.unwrapped.domain.agent_toolkit._retrieval.grep_top_k == 3


def test_env_copies_and_pickles_keep_the_configuration():
    env = gym.make("tau2/banking_knowledge-v0", retrieval_config="bm25", judge="fail").unwrapped
    env.reset(options={"task_id": "task_010"})
    for other in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert other.domain.spec.extra["retrieval_config"] == "bm25"
        assert other.domain is env.domain


def test_perturbed_trajectory_loses_the_reward(dom):
    task = dom.task("task_073")
    env = initial_environment(dom, task)
    from tau2_gym.core.messages import AssistantMessage, UserMessage

    msgs = [AssistantMessage(content="Hi! How can I help you today?"), UserMessage(content="help")]
    for i, a in enumerate(task.evaluation_criteria.actions):
        args = dict(a.arguments)
        if i == len(task.evaluation_criteria.actions) - 1 and a.name == "call_discoverable_agent_tool":
            inner = json.loads(args["arguments"])
            inner["amount"] = inner["amount"] + 1
            args["arguments"] = json.dumps(inner)
        tc = ToolCall(a.name, args, id=f"c{i}", requestor=a.requestor)
        msgs.append(AssistantMessage(content=None, tool_calls=[tc]))
        msgs.append(env.get_response(tc))
    msgs.append(UserMessage(content="###STOP###"))
    ri = evaluate_simulation(dom, task, msgs, "user_stop")
    assert ri["reward"] == 0.0 and ri["db_check"]["db_match"] is False
    assert gold_environment(dom, task).get_db_hash() != env.get_db_hash()


def test_fuzzed_actions_never_raise_out_of_step(dom):
    rng = random.Random(0)
    names = sorted(dom.agent_toolkit.discoverable_names) + [s["function"]["name"] for s in dom.agent_tool_schemas()]
    values = [
        None,
        0,
        -1,
        2.5,
        10**30,
        "",
        "x",
        "1234",
        "2025-11-14",
        True,
        [],
        {},
        [1],
        {"a": None},
        "\ud800",
        "01",
        "cc_76ad9cc60e_gold",
        "76ad9cc60e",
        "{",
        '{"a":1}',
    ]
    env = gym.make("tau2/banking_knowledge-v0", user="oracle", judge="fail")
    env.reset(options={"task_id": "task_073"})
    steps = 0
    for _ in range(600):
        name = rng.choice(names)
        args = {
            rng.choice(
                ["user_id", "account_id", "card_id", "amount", "query", "pattern", "arguments", "agent_tool_name", "x"]
            ): rng.choice(values)
            for _ in range(rng.randint(0, 3))
        }
        if rng.random() < 0.5:
            inner = {
                k: rng.choice(values)
                for k in rng.sample(
                    ["card_id", "account_id", "user_id", "amount", "pin", "cvv", "new_limit", "limit_type"], 3
                )
            }
            action = {
                "name": "call_discoverable_agent_tool",
                "arguments": {
                    "agent_tool_name": name,
                    "arguments": json.dumps(inner) if rng.random() < 0.8 else rng.choice(values),
                },
            }
            if rng.random() < 0.3:
                env.step({"name": "unlock_discoverable_agent_tool", "arguments": {"agent_tool_name": name}})
        else:
            action = {"name": name, "arguments": args}
        obs, reward, term, trunc, info = env.step(action)
        steps += 1
        if term or trunc:
            json.dumps(info["simulation_run"].to_dict(), default=str)
            env.reset(options={"task_id": "task_073"})
    assert steps == 600
