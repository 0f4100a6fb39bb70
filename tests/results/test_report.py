"""``tau2-gym report``: a report built from real ``tau2-gym rollout`` files, read back in headless Chromium
(summary numbers equal the file's, computed here independently; a simulation's details open; hostile message
content stays text; no console errors; a screenshot is kept), plus pure-Python checks of the HTML: escaping,
tasks that flip between two runs, skipped simulations and bad inputs."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tau2_gym import load_domain
from tau2_gym.cli import main
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import ScriptedPolicy
from tau2_gym.results.report import build_report, load_run, summarise
from tau2_gym.runner.collect import collect

HOSTILE = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><!-- & "q" \u2028'

# Which scripted agent plays each (task, trial): passes, wrong arguments, hallucinated tools, a dropped write
# and a give-up, so every column of the summary has something to count.
MIX = ("oracle", "wrong_arguments", "oracle", "hallucinating", "skip_last_action", "give_up")


class MixedPolicy(AgentPolicy):
    """Scripted agents chosen per (task, trial): a deterministic run with passes and several kinds of failure."""

    offline = True
    implementation = "scripted_mixed"

    def __init__(self, mix=MIX) -> None:
        self.mix = mix
        self.policies = {n: ScriptedPolicy(n) for n in set(mix)}

    def _pick(self, request):
        return self.policies[self.mix[(int(request.task.id) + request.extra["trial"]) % len(self.mix)]]

    def generate(self, request):
        return self._pick(request).generate(request)

    def episode_done(self, episode_id):
        for p in self.policies.values():
            p.episode_done(episode_id)


def mixed_rollout(path: Path, num_tasks: int = 8, num_trials: int = 2, domain: str = "airline", **settings) -> Path:
    collect(
        None,
        MixedPolicy(),
        domain=domain,
        num_tasks=num_tasks,
        num_trials=num_trials,
        output=str(path),
        progress=False,
        **settings,
    )
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A: the mixed scripted agents (8 airline tasks x 2 trials). Run B: agent and user behind the local
    OpenAI stub (tasks 0-2, 2 trials; tokens recorded), the agent's text hostile HTML."""
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
    from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator

    d = tmp_path_factory.mktemp("report")
    a = mixed_rollout(d / "mixed.json")

    def agent_reply(body, n):
        if body["messages"][-1]["role"] == "tool":
            return "Done. " + HOSTILE
        call = {"id": f"call_{n}", "name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}
        if n % 3 == 0:  # some episodes hand over to a human
            call = {"id": f"call_{n}", "name": "transfer_to_human_agents", "arguments": {"summary": "help"}}
        return {"tool_calls": [call]}

    def user_reply(body, n):
        agent_texts = sum(1 for m in body["messages"][1:] if m["role"] == "user")
        return "Hi, I need help with my booking." if agent_texts <= 1 else "Thanks. ###STOP###"

    fast = dict(api_key_env=None, timeout=5.0, max_retries=1, backoff_base=0.01, backoff_max=0.02)
    with OpenAIStub(agent_reply) as agent_srv, OpenAIStub(user_reply) as user_srv:
        policy = OpenAIAgentPolicy(OpenAIAgentConfig(model="agent-m", base_url=agent_srv.base_url, **fast))
        user = OpenAIUserSimulator(OpenAIUserConfig(model="user-m", base_url=user_srv.base_url, **fast))
        b = d / "stub.json"
        collect(
            ["0", "1", "2"], policy, user, domain="airline", num_trials=2, concurrency=4, output=str(b), progress=False
        )
    return a, b


# ------------------------------------------------------------------------------------ independent figures


def expected(raw: dict) -> dict:
    """The summary figures of a results file, computed from its JSON alone (not through tau2_gym.results.report)."""
    tools = {
        t["function"]["name"] for t in load_domain(raw["info"]["environment_info"]["domain_name"]).agent_tool_schemas()
    }
    per_task = defaultdict(list)
    rewards = []
    terms = Counter()
    tool_errors = halluc = calls = transfers = 0
    tokens = [0, 0]
    with_usage = 0
    for s in raw["simulations"]:
        terms[s["termination_reason"]] += 1
        names = [c["name"] for m in s["messages"] for c in m.get("tool_calls") or ()]
        transfers += "transfer_to_human_agents" in names
        for m in s["messages"]:
            if m["role"] == "tool" and m.get("error"):
                tool_errors += 1
            for c in m.get("tool_calls") or ():
                calls += 1
                halluc += c["name"] not in tools
        if s.get("agent_usage"):
            with_usage += 1
            tokens[0] += s["agent_usage"]["prompt_tokens"]
            tokens[1] += s["agent_usage"]["completion_tokens"]
        if s["termination_reason"] == "infrastructure_error" or s["reward_info"] is None:
            continue
        r = s["reward_info"]["reward"]
        rewards.append(r)
        per_task[s["task_id"]].append(r)
    out = {
        "simulations": len(raw["simulations"]),
        "avg_reward": sum(rewards) / len(rewards),
        "terms": terms,
        "tool_errors": tool_errors,
        "hallucinated": halluc,
        "tool_calls": calls,
        "transfers": transfers,
        "agent_tokens": tokens if with_usage else None,
    }
    max_k = min(raw["info"]["num_trials"], min(len(v) for v in per_task.values()))
    for k in range(1, max_k + 1):
        vals = []
        for v in per_task.values():
            c = sum(1 for r in v if r == 1.0)
            vals.append(math.comb(c, k) / math.comb(len(v), k))
        out[f"pass^{k}"] = sum(vals) / len(vals)
    return out


def cell(page: str, metric: str, run: int = 0) -> str:
    """Text of a summary cell in the server-side HTML."""
    m = re.search(rf'data-metric="{re.escape(metric)}" data-run="{run}"[^>]*>([^<]*)', page)
    assert m, f"no cell {metric!r} for run {run}"
    return m.group(1).strip()


def json_blocks(page: str) -> dict[int, dict]:
    return {
        int(i): json.loads(body)
        for i, body in re.findall(r'<script type="application/json" id="s(\d+)">(.*?)</script>', page, re.S)
    }


# ------------------------------------------------------------------------------------ pure Python


def test_summary_numbers_are_the_files(runs, tmp_path):
    a, b = runs
    out = tmp_path / "r.html"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    page = out.read_text()
    for n, path in enumerate((a, b)):
        exp = expected(json.loads(path.read_text()))
        assert cell(page, "simulations", n) == str(exp["simulations"])
        assert cell(page, "avg_reward", n) == f"{exp['avg_reward']:.4f}"
        assert cell(page, "tool_errors", n) == str(exp["tool_errors"])
        assert cell(page, "tool_calls", n) == str(exp["tool_calls"])
        assert cell(page, "hallucinated", n) == str(exp["hallucinated"])
        assert cell(page, "transfers", n) == str(exp["transfers"])
        for reason, count in exp["terms"].items():
            assert cell(page, f"term:{reason}", n) == str(count)
        ks = [k for k in exp if k.startswith("pass^")]
        assert ks == [f"pass^{k}" for k in range(1, 3)]
        for k in ks:
            assert cell(page, k, n) == f"{exp[k]:.4f}"
        tok = exp["agent_tokens"]
        assert cell(page, "agent_tokens", n) == ("n/a" if tok is None else f"{tok[0]:,} + {tok[1]:,}")
    exp_a = expected(json.loads(a.read_text()))
    assert exp_a["hallucinated"] > 0 and exp_a["tool_errors"] > 0 and 0 < exp_a["avg_reward"] < 1  # a real mix
    exp_b = expected(json.loads(b.read_text()))
    assert exp_b["agent_tokens"][0] > 0 and exp_b["transfers"] > 0  # the stub reports usage; some hand over
    assert page.count("<script") == len(json_blocks(page)) + 1 == 16 + 6 + 1  # details: one block each; one script


def test_pass_hat_intervals_are_seeded_and_bracket_the_value(runs):
    run = load_run(runs[0])
    s1, s2 = summarise(run, 500, 7), summarise(run, 500, 7)
    assert s1.pass_hat == s2.pass_hat
    for _k, (v, lo, hi) in s1.pass_hat.items():
        assert 0.0 <= lo <= v <= hi <= 1.0 and lo < hi
    assert summarise(run, 0).pass_hat[1][1:] == (s1.pass_hat[1][0],) * 2  # no resampling: a point


def test_many_trials_show_a_selection_of_k():
    from tau2_gym.scoring.metrics import shown_ks

    assert shown_ks(range(1, 5)) == [1, 2, 3, 4] and shown_ks(range(1, 17)) == list(range(1, 17))
    assert shown_ks(range(1, 201)) == [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 200]


def test_component_failures_count_failed_checks_by_basis(runs):
    raw = json.loads(runs[0].read_text())
    s = summarise(load_run(runs[0]))
    in_basis = Counter()
    outside = Counter()
    for sim in raw["simulations"]:
        ri = sim["reward_info"]
        failed = set()
        if ri["db_check"] and not ri["db_check"]["db_match"]:
            failed.add("DB")
        if any(not c["action_match"] for c in ri["action_checks"] or ()):
            failed.add("ACTION")
        if any(not c["met"] for c in ri["communicate_checks"] or ()):
            failed.add("COMMUNICATE")
        for c in failed:
            (in_basis if c in ri["reward_basis"] else outside)[c] += 1
    for c in ("DB", "ACTION", "COMMUNICATE"):
        assert s.components[c] == (in_basis[c], outside[c])
    assert in_basis["DB"] > 0  # the dropped writes and wrong arguments fail the DB check


def test_hostile_content_is_escaped_everywhere(runs, tmp_path):
    raw = json.loads(runs[0].read_text())
    sim = raw["simulations"][0]
    sim["messages"][0]["content"] = HOSTILE
    sim["messages"].append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "x", "name": HOSTILE, "arguments": {HOSTILE: HOSTILE}}],
        }
    )
    sim.setdefault("info", {})["db_diff"] = [
        {
            "db": "agent",
            "path": f"users.{HOSTILE}",
            "kind": "changed",
            "gold": HOSTILE,
            "predicted": {"<b>": "</script>"},
        }
    ]
    raw["simulations"][1]["task_id"] = HOSTILE
    raw["simulations"][2]["messages"][0]["content"] = "lone \ud800 surrogate"  # valid JSON, not valid UTF-8
    raw["simulations"][2]["task_id"] = "\udfff"
    raw["simulations"][1]["termination_reason"] = HOSTILE
    raw["info"]["agent_info"]["implementation"] = HOSTILE
    path = tmp_path / "<b>run&amp;.json"
    path.write_text(json.dumps(raw))
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "<script>window.__pwned" not in page and "<img src=x" not in page and "<!--" not in page
    assert "<b>run" not in page and "&lt;b&gt;run&amp;amp;.json" in page
    assert page.count("<script") == len(raw["simulations"]) + 1
    assert page.count("</script>") == len(raw["simulations"]) + 1
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned" in page  # the task id, shown as text
    blocks = json_blocks(page)
    assert blocks[0]["m"][0][1] == HOSTILE  # the data survives the escaping intact
    assert blocks[0]["m"][-1][2][0] == [HOSTILE, {HOSTILE: HOSTILE}, True]  # name, arguments, hallucinated
    assert blocks[0]["diff"][0]["gold"] == HOSTILE
    assert blocks[2]["m"][0][1] == "lone \ud800 surrogate" and blocks[2]["task"] == "\udfff"
    assert "\ufffd" in page  # the task id in the grid


def test_arguments_nested_too_deep_to_encode_leave_a_note(runs, tmp_path):
    raw = json.loads(runs[0].read_text())
    deep: dict = {}
    node = deep
    for _ in range(700):  # parses; the details nest arguments a few levels deeper than the file, near the limit
        node["a"] = {}
        node = node["a"]
    raw["simulations"][0]["messages"].append(
        {"role": "assistant", "content": None, "tool_calls": [{"id": "d", "name": "x", "arguments": deep}]}
    )
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(raw))
    import sys

    run = load_run(path)
    assert not run.skipped
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # as if the nesting were deeper than this interpreter's limit
    try:
        page = build_report([run], samples=0)
    finally:
        sys.setrecursionlimit(limit)
    blocks = json_blocks(page)
    assert len(blocks) == len(raw["simulations"])
    assert blocks[0]["m"] == [] and "RecursionError" in blocks[0]["error"]
    assert blocks[1]["m"]  # the others are whole


def test_two_runs_side_by_side_name_the_tasks_that_flipped(runs, tmp_path):
    raw = json.loads(runs[0].read_text())
    base = tmp_path / "base.json"
    base.write_text(json.dumps(raw))
    passed = defaultdict(list)
    for s in raw["simulations"]:
        passed[s["task_id"]].append(s["reward_info"]["reward"] == 1.0)
    all_pass = [t for t, v in passed.items() if all(v)]
    not_all = [t for t, v in passed.items() if not all(v)]
    assert all_pass and not_all
    worse, better = all_pass[0], not_all[0]
    changed = copy.deepcopy(raw)
    for s in changed["simulations"]:
        if s["task_id"] == worse:
            s["reward_info"]["reward"] = 0.0
        if s["task_id"] == better:
            s["reward_info"]["reward"] = 1.0
    other = tmp_path / "other.json"
    other.write_text(json.dumps(changed))
    page = build_report([load_run(base), load_run(other)])
    rows = dict(re.findall(r'<tr class="flip" data-task="([^"]+)">.*?<td class="[^"]*">(\w+)</td></tr>', page))
    assert rows == {worse: "worse", better: "better"}
    assert 'data-flipped="2" data-better="1" data-worse="1"' in page
    assert "data-flipped" not in build_report([load_run(base)])  # one run: no flip table
    same = build_report([load_run(base), load_run(base, label="again")])
    assert 'data-flipped="0"' in same


def test_unparseable_simulations_are_skipped_and_counted(runs, tmp_path, capsys):
    raw = json.loads(runs[0].read_text())
    good = len(raw["simulations"])
    raw["simulations"] += [
        ["not", "an", "object"],
        {"messages": []},
        {"task_id": "1", "reward_info": {"reward": "x"}},
        {"task_id": "1", "messages": "nope"},
    ]
    path = tmp_path / "partly.json"
    path.write_text(json.dumps(raw))
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "4 simulation(s) could not be parsed and were skipped" in err and f"simulation #{good}:" in err
    page = out.read_text()
    assert cell(page, "simulations") == str(good) and cell(page, "skipped") == "4"
    assert "4 unparseable simulation(s) skipped" in page
    assert cell(page, "avg_reward") == f"{expected(json.loads(runs[0].read_text()))['avg_reward']:.4f}"


def test_compressed_details_unpack_to_the_plain_ones(runs, monkeypatch):
    import base64
    import gzip

    import tau2_gym.results.report as report

    monkeypatch.setattr(report, "CHUNK", 5)
    plain = json_blocks(build_report([load_run(runs[0]), load_run(runs[1])]))
    page = build_report([load_run(runs[0]), load_run(runs[1])], compress=True)
    assert json_blocks(page) == {}
    chunks = re.findall(r'data-encoding="gzip\+base64" id="c(\d+)">([^<]*)</script>', page)
    unpacked = [d for _, b64 in chunks for d in json.loads(gzip.decompress(base64.b64decode(b64)))]
    assert [int(k) for k, _ in chunks] == list(range(-(-len(plain) // 5)))
    assert unpacked == [plain[i] for i in range(len(plain))]


def test_openai_format_messages_are_read_like_tau2_ones(runs, tmp_path):
    raw = json.loads(runs[0].read_text())
    openai = copy.deepcopy(raw)
    for sim in openai["simulations"]:
        msgs = []
        for m in sim["messages"]:
            if m["role"] == "tool":
                msgs.append({"role": "tool", "tool_call_id": m["id"], "content": m["content"]})
            elif m.get("tool_calls"):
                msgs.append(
                    {
                        "role": m["role"],
                        "content": m["content"],
                        "tool_calls": [
                            {
                                "id": c["id"],
                                "type": "function",
                                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                            }
                            for c in m["tool_calls"]
                        ],
                    }
                )
            else:
                msgs.append({"role": m["role"], "content": [{"type": "text", "text": m["content"]}]})
        sim["messages"] = msgs
    path = tmp_path / "openai.json"
    path.write_text(json.dumps(openai))
    ours, theirs = summarise(load_run(runs[0])), summarise(load_run(path))
    assert (theirs.tool_calls, theirs.hallucinated_calls) == (ours.tool_calls, ours.hallucinated_calls) != (0, 0)
    a, b = load_run(runs[0]).details, load_run(path).details
    strip = lambda d: [[m[0], m[1], m[2]] for m in d["m"]]  # noqa: E731 - role, content, calls
    assert [strip(d) for d in a] == [strip(d) for d in b]


def test_simulations_scored_without_an_nl_judge_are_counted(tmp_path):
    path = mixed_rollout(tmp_path / "retail.json", num_tasks=6, num_trials=1, domain="retail", judge="fail")
    raw = json.loads(path.read_text())
    unjudged = sum(
        1
        for s in raw["simulations"]
        if ((s["reward_info"] or {}).get("info") or {}).get("nl") and s["reward_info"]["info"]["nl"].get("skipped")
    )
    assert unjudged > 0  # retail has NL-judged tasks; the rollout had no judge
    assert cell(build_report([load_run(path)]), "nl_unjudged") == str(unjudged)


def test_gzipped_results_files_report_the_same(runs, tmp_path):
    import gzip

    gz = tmp_path / "mixed.json.gz"
    gz.write_bytes(gzip.compress(runs[0].read_bytes()))
    assert summarise(load_run(gz)) == summarise(load_run(runs[0]))


def test_the_output_never_overwrites_an_input(runs, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(runs[0].read_text())
    assert main(["report", str(path), "-o", str(path)]) == 1
    assert "would overwrite the input" in capsys.readouterr().err
    assert path.read_text() == runs[0].read_text()


@pytest.mark.parametrize(
    "case", ["missing", "not_json", "partial", "unknown_domain", "list", "folder", "no_simulations"]
)
def test_bad_input_is_one_error_line_and_a_non_zero_exit(runs, tmp_path, capsys, case):
    text = runs[0].read_text()
    path = tmp_path / "in.json"
    if case == "not_json":
        path.write_text("hello")
    elif case == "partial":
        path.write_text(text[: len(text) // 2])
    elif case == "unknown_domain":
        raw = json.loads(text)
        raw["info"]["environment_info"]["domain_name"] = "nowhere"
        path.write_text(json.dumps(raw))
    elif case == "list":
        path.write_text("[]")
    elif case == "folder":
        path.mkdir()
    elif case == "no_simulations":
        raw = json.loads(text)
        del raw["simulations"]
        path.write_text(json.dumps(raw))
    out = tmp_path / "r.html"
    assert main(["report", str(runs[0]), str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0]
    assert {
        "missing": "no such file",
        "not_json": "not readable JSON",
        "partial": "not readable JSON",
        "unknown_domain": "unknown domain 'nowhere'",
        "list": "JSON object",
        "folder": "is a folder",
        "no_simulations": "'simulations' must be a list",
    }[case] in err[0]
    assert not out.exists()


# ------------------------------------------------------------------------------------ headless Chromium

CHROMIUM = os.environ.get("TAU2_GYM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TAU2_GYM_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def chromium(user_data_dir: Path):
    """A selenium driver of the Debian chromium package (skips when selenium, chromium or the driver is absent)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    for exe in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(exe) or shutil.which(exe)):
            pytest.skip(f"{exe} is not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + (f"--user-data-dir={user_data_dir}",):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def artifacts_dir(tmp_path: Path) -> Path:
    d = Path(os.environ.get("TAU2_GYM_ARTIFACTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_report_renders_in_headless_chromium(runs, tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    a, b = runs
    raw_b = json.loads(b.read_text())
    diffed = next((i for i, s in enumerate(raw_b["simulations"]) if (s.get("info") or {}).get("db_diff")), None)
    if diffed is None:  # a rollout without the evaluator's DB diff: the diff section still gets exercised
        diffed = 0
        raw_b["simulations"][0].setdefault("info", {})["db_diff"] = [
            {
                "db": "agent",
                "path": "reservations.ABC123.flights[1].date",
                "kind": "changed",
                "gold": "2024-05-16",
                "predicted": "2024-05-17",
            }
        ]
        b = tmp_path / "stub_diff.json"
        b.write_text(json.dumps(raw_b))
    out = tmp_path / "report.html"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    driver = chromium(Path(tempfile.mkdtemp(dir=tmp_path)))
    try:
        t0 = time.perf_counter()
        driver.get(out.as_uri())
        load = time.perf_counter() - t0
        assert driver.title.startswith("tau2-gym report")
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0  # self-contained
        for n, path in enumerate((a, b)):
            exp = expected(json.loads(path.read_text()))

            def shown(metric, n=n):
                return driver.find_element(By.CSS_SELECTOR, f'td[data-metric="{metric}"][data-run="{n}"]').text

            assert shown("simulations") == str(exp["simulations"])
            assert shown("avg_reward") == f"{exp['avg_reward']:.4f}"
            for k in (1, 2):
                assert shown(f"pass^{k}").split()[0] == f"{exp[f'pass^{k}']:.4f}"
                lo, hi = (float(x) for x in re.findall(r"[\d.]+", shown(f"pass^{k}").split(" ", 1)[1]))
                assert lo <= exp[f"pass^{k}"] <= hi
            assert shown("tool_errors") == str(exp["tool_errors"])
            assert shown("hallucinated") == str(exp["hallucinated"])
            for reason, count in exp["terms"].items():
                assert shown(f"term:{reason}") == str(count)
        cells = driver.find_elements(By.CSS_SELECTOR, ".grid a.c")
        assert len(cells) == 16 + 6
        detail = driver.find_element(By.ID, "detail")
        assert not detail.is_displayed()  # nothing rendered until a simulation is clicked

        # a simulation of run A whose agent hallucinated tools: its conversation opens
        raw_a = json.loads(a.read_text())
        pick = next(i for i, s in enumerate(raw_a["simulations"]) if s["termination_reason"] == "too_many_errors")
        sim = raw_a["simulations"][pick]
        link = driver.find_element(By.CSS_SELECTOR, f'.grid a.c[href="#s{pick}"]')
        assert f"task {sim['task_id']} · trial {sim['trial']}" in link.get_attribute("title")
        link.click()
        WebDriverWait(driver, 5).until(lambda d: d.find_element(By.ID, "detail").is_displayed())
        assert f"Task {sim['task_id']} · trial {sim['trial']}" in detail.text
        conv = detail.find_elements(By.CSS_SELECTOR, ".conversation .msg")
        assert len(conv) == len(sim["messages"])
        assert conv[1].find_element(By.CSS_SELECTOR, ".text").text == sim["messages"][1]["content"].strip()
        calls = detail.find_elements(By.CSS_SELECTOR, "details.call summary.bad")
        assert calls and "lookup_everything" in calls[0].text  # the hallucinated tool, flagged
        tool = detail.find_element(By.CSS_SELECTOR, ".msg.tool details")
        assert tool.get_attribute("open") is None
        tool.find_element(By.TAG_NAME, "summary").click()  # tool results are folded until opened
        assert tool.get_attribute("open") is not None and tool.find_element(By.TAG_NAME, "pre").is_displayed()
        assert "termination\ntoo_many_errors" in detail.text or "too_many_errors" in detail.text

        # a simulation of run B: hostile HTML shows as text, scripts in it never run; the DB diff is rendered
        g = len(raw_a["simulations"]) + diffed
        driver.execute_script("location.hash = arguments[0]", f"#s{g}")
        WebDriverWait(driver, 5).until(lambda d: "stub" in d.find_element(By.ID, "detail").text)
        texts = [e.text for e in detail.find_elements(By.CSS_SELECTOR, ".msg.assistant .text")]
        assert any(t.startswith("Done. </script><script>window.__pwned") for t in texts)
        assert driver.execute_script("return window.__pwned === undefined")
        rows = detail.find_elements(By.CSS_SELECTOR, "table.dbdiff tbody tr")
        diff = raw_b["simulations"][diffed]["info"]["db_diff"]
        assert len(rows) == len(diff) and diff[0]["path"] in rows[0].text
        usage = raw_b["simulations"][diffed]["agent_usage"]
        assert f"agent: {usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens" in detail.text
        path = artifacts_dir(tmp_path) / "report.png"
        assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
        print(f"screenshot: {path}")
        detail.find_element(By.CSS_SELECTOR, "a.close").click()
        WebDriverWait(driver, 5).until(lambda d: not d.find_element(By.ID, "detail").is_displayed())
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
        assert load < 10

        # --compress: the details of a simulation in a later chunk unpack in the page
        import tau2_gym.results.report as report

        monkeypatch.setattr(report, "CHUNK", 5)
        packed = tmp_path / "packed.html"
        assert main(["report", str(a), str(b), "-o", str(packed), "--compress"]) == 0
        g = len(raw_a["simulations"]) + 3
        driver.get(packed.as_uri() + f"#s{g}")
        WebDriverWait(driver, 5).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#detail .conversation .msg"))
        msgs = driver.find_elements(By.CSS_SELECTOR, "#detail .conversation .msg")
        assert len(msgs) == len(raw_b["simulations"][3]["messages"])
        assert (
            f"Task {raw_b['simulations'][3]['task_id']} · trial {raw_b['simulations'][3]['trial']}"
            in driver.find_element(By.ID, "detail").text
        )
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
    finally:
        driver.quit()
