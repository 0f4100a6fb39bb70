"""Replay (``tau2_gym.replay``, ``tau2-gym replay``): recorded trajectories driven through fresh envs.

Trajectories come from the env itself (oracle and perturbed scripted agents, oracle user) and from
``tau2-gym rollout`` (offline, and against the local OpenAI stub); a stored file is then edited in one place
and the replay must name exactly that message.
"""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys

import gymnasium as gym
import pytest
from datautil import REPO

import tau2_gym
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.players.agents.scripted import (
    HallucinatingAgent,
    MalformedAgent,
    OracleAgent,
    SkipLastActionAgent,
    StallingAgent,
    WrongArgumentsAgent,
    call_message,
)
from tau2_gym.players.users.playback import PlaybackUser
from tau2_gym.results.replay import ReplayInputError, compare_trajectories, replay


class ExtraCallAgent(OracleAgent):
    """Perturbation: calls its first gold tool twice more (once with text beside it), then goes on."""

    name = "extra_call"

    def plan(self, task):
        plan = super().plan(task)
        calls = [m for m in plan if m.get("tool_calls")]
        if calls:
            fn = calls[0]["tool_calls"][0]["function"]
            extra = call_message(fn["name"], json.loads(fn["arguments"]), "call_extra")
            mixed = dict(call_message(fn["name"], json.loads(fn["arguments"]), "call_mixed"), content="Checking.")
            plan[1:1] = [extra, mixed]
        return plan


class BadJsonAgent(OracleAgent):
    """Perturbation: its second action is a call whose arguments are not JSON (the episode ends agent_error)."""

    name = "bad_json"

    def plan(self, task):
        bad = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_bad", "type": "function", "function": {"name": "x", "arguments": "{not json"}}],
        }
        return super().plan(task)[:1] + [bad]


class EmptyArgsAgent(OracleAgent):
    """Perturbation: every gold call loses its arguments (missing-argument errors), then it wraps up."""

    name = "empty_args"

    def plan(self, task):
        return [
            call_message(m["tool_calls"][0]["function"]["name"], {}, f"e{i}") if m.get("tool_calls") else m
            for i, m in enumerate(super().plan(task))
        ]


class RepeatAgent(OracleAgent):
    """Perturbation: repeats its first gold call forever (the episode ends on max_steps)."""

    name = "repeat"

    def plan(self, task):
        first = next((m for m in super().plan(task) if m.get("tool_calls")), None)
        return [first] * 1000 if first else []


AGENTS = (
    OracleAgent,
    WrongArgumentsAgent,
    SkipLastActionAgent,
    ExtraCallAgent,
    HallucinatingAgent,
    StallingAgent,
    RepeatAgent,
    MalformedAgent,
    BadJsonAgent,
    EmptyArgsAgent,
)


def play(env, agent, task_id, seed=None):
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    agent.reset(info["task"], info)
    done = bool(info.get("episode_over"))
    if done:
        env.step(None)
    while not done:
        obs, _, term, trunc, info = env.step(agent.act(obs, info))
        done = term or trunc
    return env.unwrapped.simulation_run()


def env_results(domain, n_tasks, agents=AGENTS, **kwargs):
    env = Tau2Env(domain, user="oracle", **kwargs)
    runs = [play(env, cls(), t.id, seed=i) for cls in agents for i, t in enumerate(env.tasks[:n_tasks])]
    return env.results(runs)


@pytest.fixture(scope="module")
def airline_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "airline.json"
    res = env_results("airline", 3, agents=(OracleAgent, WrongArgumentsAgent), max_steps=40)
    path.write_text(json.dumps(res))
    return path


def assert_all_identical(report, results):
    sims = results["simulations"]
    assert len(report.simulations) == len(sims) > 0
    for out, sim in zip(report.simulations, sims):
        assert out.status == "identical", (out.task_id, out.error, out.difference)
        assert out.first_divergence is None and out.difference is None and out.error is None
        assert out.new_termination == out.recorded_termination == sim["termination_reason"]
        assert out.recorded_messages == out.new_messages == len(sim["messages"])
        stored = sim["reward_info"]["reward"] if sim["reward_info"] else None
        assert out.stored_reward == stored and out.new_reward == stored, out.task_id
    assert report.identical == len(sims) and report.diverged == report.errors == report.reward_changed == 0


# ------------------------------------------------------------------------------------ env-generated trajectories


@pytest.mark.parametrize("domain", ["mock", "airline", "retail", "telecom", "banking_knowledge"])
def test_oracle_and_perturbed_trajectories_replay_identically(domain):
    res = env_results(domain, 3, max_steps=30, judge="pass")
    endings = {s["termination_reason"] for s in res["simulations"]}
    assert {"user_stop", "too_many_errors", "agent_error"} <= endings
    # telecom's first tasks have no agent-side gold call to repeat, and the oracle user hangs up on anything else
    assert "max_steps" in endings or domain == "telecom"
    errors = sum(m["role"] == "tool" and m["error"] for s in res["simulations"] for m in s["messages"])
    assert errors > 10  # wrong arguments, hallucinated tools, missing arguments were all really answered as errors
    if domain == "telecom":  # the customer's own tool calls are in the record and are recomputed on replay
        assert any(m["role"] == "tool" and m["requestor"] == "user" for s in res["simulations"] for m in s["messages"])
    report = replay(res, judge="pass")
    assert_all_identical(report, res)
    assert report.files[0]["max_steps"] == 30 and report.files[0]["domain"] == domain


@pytest.mark.parametrize("domain", ["mock", "telecom"])
def test_solo_trajectories_replay_identically(domain):
    res = env_results(domain, 3, agents=(OracleAgent, WrongArgumentsAgent, HallucinatingAgent), solo=True)
    assert {s["termination_reason"] for s in res["simulations"]} >= {"agent_stop", "too_many_errors"}
    report = replay(res)
    assert report.files[0]["solo"] is True
    assert_all_identical(report, res)


def test_an_agent_that_may_stop_and_an_outer_step_limit_replay_identically():
    env = gym.make("tau2/airline-v0", user="oracle", agent_can_stop=True)
    runs = [play(env, OracleAgent(), t) for t in ("0", "1")]
    done = call_message("done", {}, "d")  # the oracle closes with text; one more run ends with `done`
    agent = OracleAgent()
    obs, info = env.reset(options={"task_id": "2"})
    agent.reset(info["task"], info)
    env.step(agent.act(obs, info))
    assert env.step(done)[2]
    runs.append(env.unwrapped.simulation_run())
    limited = gym.make("tau2/airline-v0", user="oracle", max_episode_steps=3)  # TimeLimit: ends as max_steps
    runs.append(play(limited, StallingAgent(), "3"))
    res = env.unwrapped.results(runs)
    assert [s["termination_reason"] for s in res["simulations"]][2:] == ["agent_stop", "max_steps"]
    assert_all_identical(replay(res), res)


def test_a_recorded_user_error_is_reproduced_where_the_user_turns_end():
    res = env_results("mock", 2, agents=(OracleAgent,))
    sim = res["simulations"][0]
    last_user = max(i for i, m in enumerate(sim["messages"]) if m["role"] == "user")
    sim["messages"] = sim["messages"][:last_user]
    sim["termination_reason"] = "user_error"
    out = replay(res).simulations
    assert [o.status for o in out] == ["identical", "identical"]
    assert out[0].new_termination == "user_error" and out[0].new_reward == 0.0  # an unscored ending


# ------------------------------------------------------------------------------------ divergences


def test_one_edited_tool_result_diverges_at_exactly_that_message(airline_file, tmp_path):
    res = json.loads(airline_file.read_text())
    sims = res["simulations"]
    k = 1
    tools = [i for i, m in enumerate(sims[k]["messages"]) if m["role"] == "tool"]
    edited = tools[len(tools) // 2]
    sims[k]["messages"][edited]["content"] = sims[k]["messages"][edited]["content"].replace("1", "2", 1) + " "
    path = tmp_path / "edited.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(res, fh)
    report = replay(path)
    statuses = [s.status for s in report.simulations]
    assert statuses == ["identical"] * k + ["diverged"] + ["identical"] * (len(sims) - k - 1)
    out = report.simulations[k]
    assert out.first_divergence == edited and out.file == str(path) and out.index == k
    assert out.difference.startswith(f"message {edited}: tool content: recorded ")
    assert out.new_reward == out.stored_reward  # only the record was edited; the replayed episode is the same


def test_other_edits_are_named_at_their_message(airline_file):
    base = json.loads(airline_file.read_text())
    k = next(k for k, s in enumerate(base["simulations"]) if any(m["role"] == "tool" for m in s["messages"]))
    sim0 = base["simulations"][k]["messages"]
    call_at = next(i for i, m in enumerate(sim0) if m["role"] == "assistant" and m["tool_calls"])

    def edited(fn):
        res = copy.deepcopy(base)
        fn(res["simulations"][k])
        return replay(res).simulations[k]

    def flag(sim):
        sim["messages"][call_at + 1]["error"] = True

    out = edited(flag)
    assert (out.status, out.first_divergence) == ("diverged", call_at + 1) and "error flag" in out.difference

    def argument(sim):  # the replay calls what the record says, so the result after it differs
        args = sim["messages"][call_at]["tool_calls"][0]["arguments"]
        key = next(iter(args))
        args[key] = str(args[key]) + "_nope"

    out = edited(argument)
    assert (out.status, out.first_divergence) == ("diverged", call_at + 1)

    def truncated(sim):
        del sim["messages"][-2:]

    n = len(sim0)
    out = edited(truncated)
    assert (out.status, out.first_divergence, out.new_termination) == ("diverged", n - 2, None)
    assert "still running" in out.difference or "replay" in out.difference

    def ending(sim):
        sim["termination_reason"] = "too_many_errors"

    out = edited(ending)
    assert (out.status, out.first_divergence) == ("diverged", n)
    assert out.difference == "termination: recorded too_many_errors, replay user_stop"


def test_compare_trajectories_treats_empty_call_lists_as_none_and_ignores_ids():
    from tau2_gym.core.messages import AssistantMessage, ToolCall, ToolMessage

    a = [AssistantMessage("hi", tool_calls=[]), ToolMessage("1", "ok")]
    b = [AssistantMessage("hi"), ToolMessage("2", "ok")]
    assert compare_trajectories(a, b, "user_stop", "user_stop") == (None, None)
    c = [AssistantMessage(None, [ToolCall("f", {"x": 1})])]
    d = [AssistantMessage(None, [ToolCall("f", {"x": 2})])]
    assert compare_trajectories(c, d, "x", "x")[0] == 0


def test_unreplayable_simulations_are_errors_and_the_others_still_run(airline_file):
    res = json.loads(airline_file.read_text())
    sims = res["simulations"]
    sims[0]["task_id"] = "no_such_task"
    sims[1]["messages"][3] = {"role": "robot", "content": "?"}
    sims[2]["termination_reason"] = "infrastructure_error"
    sims[3] = ["not", "an", "object"]
    sims[4]["messages"][1]["content"] = None  # a user message with neither text nor calls
    report = replay(res)
    out = report.simulations
    assert [o.status for o in out] == ["error"] * 5 + ["identical"]
    assert "unknown task 'no_such_task'" in out[0].error
    assert "message 3 cannot be read" in out[1].error and "robot" in out[1].error
    assert "infrastructure_error" in out[2].error and "outside the environment" in out[2].error
    assert "not an object" in out[3].error
    assert "message 1 (user) is empty" in out[4].error
    assert report.errors == 5 and report.identical == 1 and report.reward_changed == 0


def test_the_data_version_the_file_records_is_used():
    from datautil import LEGACY

    res = env_results("airline", 2, agents=(OracleAgent,), data_version=LEGACY)
    report = replay(res)
    assert report.files[0]["data_version"] == LEGACY
    assert_all_identical(report, res)


def test_playback_user_says_the_record_then_fails():
    from tau2_gym.core.messages import ToolCall, UserMessage
    from tau2_gym.players.users.base import UserSimulatorError, UserTurnRequest

    recorded = UserMessage(None, [ToolCall("toggle", {"on": True}, id="u1", requestor="user")])
    user = PlaybackUser([UserMessage("hello"), recorded])
    req = UserTurnRequest("e", "", [], None, task=None, turn=1)  # type: ignore[arg-type]
    got = user.generate(req)
    assert got is not recorded and got == recorded
    assert got.tool_calls[0].arguments is not recorded.tool_calls[0].arguments
    req.turn = 2
    with pytest.raises(UserSimulatorError, match="no user turn 3"):
        user.generate(req)


# ------------------------------------------------------------------------------------ rollout files and the CLI


def test_a_tau2_gym_rollout_file_replays_identically(tmp_path, capsys):
    from tau2_gym.cli import main

    out = tmp_path / "rollout.json"
    assert (
        main(
            [
                "rollout",
                "--domain",
                "telecom",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--num-tasks",
                "3",
                "--num-trials",
                "2",
                "--output",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    report_path = tmp_path / "report.json"
    assert main(["replay", str(out), "--output", str(report_path), "--no-progress"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("replayed 6 simulation(s): 6 identical, 0 diverged, 0 error(s); 0 reward(s) changed")
    report = json.loads(report_path.read_text())
    assert report["summary"]["identical"] == 6 and report["files"][0]["max_steps"] == 200
    assert [s["status"] for s in report["simulations"]] == ["identical"] * 6
    rolled = json.loads(out.read_text())["simulations"]
    assert [s["new_reward"] for s in report["simulations"]] == [s["reward_info"]["reward"] for s in rolled]


def test_a_rollout_against_openai_stub_endpoints_replays_identically(tmp_path):
    pytest.importorskip("openai")
    from openai_stub import OpenAIStub

    from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
    from tau2_gym.players.users.openai_user import OpenAIUserConfig, OpenAIUserSimulator
    from tau2_gym.runner.collect import collect

    fast = dict(api_key_env=None, timeout=5.0, max_retries=1, backoff_base=0.01, backoff_max=0.02)

    def agent_reply(body, n):
        last = body["messages"][-1]
        if last["role"] == "tool":
            return "Your booking is confirmed."
        if n % 3 == 0:
            return {
                "tool_calls": [
                    {"id": f"c{n}", "name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}},
                    {"id": f"d{n}", "name": "get_reservation_details", "arguments": {"reservation_id": "NO_SUCH"}},
                ]
            }
        return {"tool_calls": [{"id": f"c{n}", "name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}]}

    def user_reply(body, n):
        texts = sum(1 for m in body["messages"][1:] if m["role"] == "user")
        return "Hi, I want to check my booking." if texts <= 1 else "Thanks. ###STOP###"

    with OpenAIStub(agent_reply) as agent_srv, OpenAIStub(user_reply) as user_srv:
        policy = OpenAIAgentPolicy(OpenAIAgentConfig(model="agent-m", base_url=agent_srv.base_url, **fast))
        user = OpenAIUserSimulator(OpenAIUserConfig(model="user-m", base_url=user_srv.base_url, **fast))
        out = tmp_path / "llm.json"
        collect(
            ["0", "1", "2"],
            policy,
            user,
            domain="airline",
            num_trials=2,
            concurrency=3,
            output=str(out),
            progress=False,
        )
    res = json.loads(out.read_text())
    assert {s["termination_reason"] for s in res["simulations"]} == {"user_stop"}
    assert any(m["role"] == "tool" and m["error"] for s in res["simulations"] for m in s["messages"])
    assert_all_identical(replay(out), res)


def test_progress_bar_with_and_without_tqdm(airline_file, capsys, monkeypatch):
    pytest.importorskip("tqdm")
    assert replay(airline_file, progress=True).identical == 6
    assert "replay" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    assert replay([airline_file], progress=True).identical == 6
    assert "] 6/6" in capsys.readouterr().err


def run_cli(*argv):
    return subprocess.run(
        [sys.executable, "-m", "tau2_gym.cli", *argv], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_cli_input_errors_are_one_line_and_write_nothing(tmp_path, airline_file):
    from tau2_gym.cli import main

    report = tmp_path / "report.json"
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    partial = tmp_path / "partial.json"
    partial.write_text(airline_file.read_text()[:5000])
    not_results = tmp_path / "list.json"
    not_results.write_text("[1, 2]")
    no_domain = tmp_path / "nodomain.json"
    no_domain.write_text(json.dumps({"info": {}, "simulations": []}))
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"info": {"environment_info": {"domain_name": "nope"}}, "simulations": []}))
    cases = [
        ([str(tmp_path / "missing.json")], "no such file"),
        ([str(bad_json)], "is not readable JSON"),
        ([str(airline_file), str(partial)], "is not readable JSON"),
        ([str(not_results)], "holds a JSON list"),
        ([str(no_domain)], "missing info.environment_info.domain_name"),
        ([str(unknown)], "unknown domain 'nope'"),
        ([str(tmp_path)], "is a folder"),
    ]
    for paths, message in cases:
        code, err = _run_captured(main, ["replay", *paths, "--output", str(report), "--no-progress"])
        assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1, (message, err)
        assert not report.exists()
    proc = run_cli("replay", str(partial), "--output", str(report))  # in a real process: no traceback
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "is not readable JSON" in proc.stderr
    assert main(["replay", str(airline_file)]) == 2  # no --output
    assert main(["replay", str(airline_file), "--output", str(airline_file)]) == 2  # would overwrite the input
    assert main(["replay", str(airline_file), "--output", str(tmp_path)]) == 2  # a folder
    assert main(["replay", str(airline_file), "--output", str(report), "--max-steps", "0"]) == 2
    assert main(["replay", str(airline_file), "--output", str(report), "--data-version", "9.9"]) == 2
    assert not report.exists()


def _run_captured(main, argv):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        code = main(argv)
    return code, buf.getvalue()


def test_cli_exits_non_zero_and_counts_unreplayable_simulations(tmp_path, airline_file, capsys):
    from tau2_gym.cli import main

    res = json.loads(airline_file.read_text())
    res["simulations"][0]["task_id"] = "no_such_task"
    res["simulations"][1]["termination_reason"] = "infrastructure_error"
    tool_at = next(i for i, m in enumerate(res["simulations"][2]["messages"]) if m["role"] == "tool")
    res["simulations"][2]["messages"][tool_at]["content"] = "edited"
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(res))
    report_path = tmp_path / "out" / "report.json"
    assert main(["replay", str(path), "-o", str(report_path), "--no-progress", "--max-steps", "40"]) == 1
    captured = capsys.readouterr()
    assert "3 identical, 1 diverged, 2 error(s)" in captured.out
    assert "error: 2 simulation(s) could not be replayed" in captured.err
    report = json.loads(report_path.read_text())
    assert [s["status"] for s in report["simulations"]] == ["error", "error", "diverged"] + ["identical"] * 3
    assert report["simulations"][2]["first_divergence"] == tool_at
    assert report["summary"]["errors"] == 2 and report["files"][0]["max_steps"] == 40
    assert not list(report_path.parent.glob(".*.tmp"))


def test_tau2_gym_replay_is_the_function_and_import_stays_light():
    assert tau2_gym.replay is replay
    with pytest.raises(ReplayInputError, match="cannot replay a int"):
        replay([3])
    code = (
        "import sys, tau2_gym; print('tau2_gym.results.replay' in sys.modules, 'tau2_gym.envs.tau2_env' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.stdout.split()[0] == "False", proc.stderr


def test_a_record_in_the_envs_own_openai_format_replays_identically():
    env = Tau2Env("airline", user="oracle")
    runs = []
    for task_id, cls in (("1", OracleAgent), ("4", WrongArgumentsAgent)):
        agent = cls()
        obs, info = env.reset(options={"task_id": task_id})
        agent.reset(info["task"], info)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            done = term or trunc
        run = env.simulation_run()
        assert obs[0]["role"] == "system" and any("tool_call_id" in m for m in obs)
        run["messages"] = obs  # what the agent observed: OpenAI chat messages, system prompt first
        runs.append(run)
    res = env.results(runs)
    report = replay(res)
    assert [s.status for s in report.simulations] == ["identical", "identical"], report.simulations[0].difference
    obs = res["simulations"][1]["messages"]
    tool_at = next(i for i, m in enumerate(obs) if m["role"] == "tool")
    obs[tool_at]["content"] = "edited"
    out = replay(res).simulations[1]
    assert (out.status, out.first_divergence) == ("diverged", tool_at)  # indices are the file's (system included)


def test_hostile_simulation_records_are_errors_or_replay_never_a_crash(airline_file):
    base = json.loads(airline_file.read_text())
    good = next(s for s in base["simulations"] if any(m["role"] == "tool" for m in s["messages"]))
    call_at = next(i for i, m in enumerate(good["messages"]) if m.get("tool_calls"))

    def variant(**edits):
        sim = copy.deepcopy(good)
        for key, value in edits.items():
            if callable(value):
                value(sim)
            else:
                sim[key] = value
        return sim

    def set_calls(value):
        return lambda sim: sim["messages"][call_at].__setitem__("tool_calls", value)

    cases = [
        (variant(seed=-5), "identical", None),
        (variant(seed="abc"), "identical", None),
        (variant(seed=True), "identical", None),
        (variant(reward_info="garbage"), "identical", None),
        (variant(task_id={"x": 1}), "error", "unknown task"),
        (variant(messages="nope"), "error", "not a list"),
        (variant(messages=None), "diverged", None),  # the replay has the greeting the record lacks
        (variant(termination_reason=None), "error", "no termination_reason"),
        (variant(termination_reason=["user_stop"]), "error", "no termination_reason"),
        (variant(x=set_calls("x")), "error", f"message {call_at} cannot be read"),
        (variant(x=set_calls([{"name": "f", "arguments": [1]}])), "error", "arguments must be an object"),
        (variant(x=set_calls([{"arguments": {}}])), "error", "needs at least a 'name'"),
        (variant(x=set_calls([{"name": "f", "arguments": {"a": {"b": [[[[[]]]]]}}}])), "diverged", None),
        (None, "error", "not an object"),
    ]
    res = dict(base, simulations=[c[0] for c in cases])
    report = replay(res)
    for (_sim, status, message), out in zip(cases, report.simulations):
        assert out.status == status, (status, message, out.error, out.difference)
        if message is not None:
            assert message in out.error
    assert report.simulations[3].reward_changed and report.simulations[3].stored_reward is None
    assert report.simulations[6].first_divergence == 0 and report.simulations[6].new_termination == "user_error"


def test_domain_options_a_file_records_are_warned_about_and_can_be_given(tmp_path, capsys):
    from tau2_gym.cli import main
    from tau2_gym.players.agents.scripted import ScriptedPolicy
    from tau2_gym.runner.collect import collect

    class Searcher(OracleAgent):
        name = "searcher"

        def plan(self, task):
            return [call_message("KB_search", {"query": "credit card fees"}, "s0")] + super().plan(task)

    out = tmp_path / "bk.json"
    collect(
        None,
        ScriptedPolicy(Searcher),
        "oracle",
        domain="banking_knowledge",
        num_tasks=2,
        output=str(out),
        progress=False,
        domain_options={"retrieval_config": "grep_only"},
        judge="pass",
    )
    plain = replay(out, judge="pass")  # the default retrieval has KB_search, grep_only has not
    assert plain.diverged == 2 and "retrieval_config='grep_only'" in plain.files[0]["warnings"][0]
    assert "Error: Tool 'KB_search' not found." in plain.simulations[0].difference
    given = replay(out, judge="pass", domain_options={"retrieval_config": "grep_only"})
    assert given.identical == 2 and given.files[0]["warnings"] == []
    report = tmp_path / "r.json"
    assert main(["replay", str(out), "-o", str(report), "--judge", "pass", "--no-progress"]) == 0
    assert "warning: " in capsys.readouterr().err
    assert (
        main(
            [
                "replay",
                str(out),
                "-o",
                str(report),
                "--judge",
                "pass",
                "--no-progress",
                "--domain-options",
                '{"retrieval_config": "grep_only"}',
            ]
        )
        == 0
    )
    assert "2 identical" in capsys.readouterr().out
    assert main(["replay", str(out), "-o", str(report), "--domain-options", "{bad"]) == 2
    assert main(["replay", str(out), "-o", str(report), "--domain-options", '{"retrieval_config": "nope"}']) == 2
    assert "Unknown retrieval variant" in capsys.readouterr().err
