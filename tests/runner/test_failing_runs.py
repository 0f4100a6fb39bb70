"""Runs that cannot mislead: a run that cannot work ends at once with one `error:` line and a non-zero status; a
run with failed episodes exits non-zero and keeps what finished; the reply cache never answers with another
server's replies and says at start that it is on."""

from __future__ import annotations

import json
import socket
import time

import gymnasium as gym
import pytest
from openai_stub import OpenAIStub

import tau2_gym  # noqa: F401 - registers the env ids
from tau2_gym.cli import main

FAST = ["--request-retries", "1", "--retry-delay", "0", "--no-progress"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def rollout(argv: list[str], capsys) -> tuple[int, str, str, float]:
    start = time.monotonic()
    code = main(["rollout", *argv])
    took = time.monotonic() - start
    out, err = capsys.readouterr()
    return code, out, err, took


def agent_run(base_url: str, out_path, extra=()) -> list[str]:
    return [
        "--domain",
        "mock",
        "--agent",
        "llm_agent",
        "--agent-llm",
        "m",
        "--agent-base-url",
        base_url,
        "--user",
        "oracle",
        "--task-ids",
        "create_task_1",
        "update_task_1",
        "--output",
        str(out_path),
        *FAST,
        *extra,
    ]


def assert_fails_fast(code: int, err: str, took: float, *needles: str) -> None:
    assert code != 0
    lines = error_lines(err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert took < 10, took


def test_a_wrong_port_ends_the_run_at_once(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err, took = rollout(agent_run(f"http://127.0.0.1:{free_port()}/v1", out), capsys)
    assert_fails_fast(code, err, took, "agent server", "connection error", "--agent-base-url")
    assert not out.exists() and not out.with_suffix(".jsonl").exists()


def test_a_base_url_without_v1_is_an_http_404_named_with_its_fix(tmp_path, capsys):
    with OpenAIStub(["Goodbye."]) as srv:
        code, _, err, took = rollout(agent_run(srv.base_url[: -len("/v1")], tmp_path / "r.json"), capsys)
    assert_fails_fast(code, err, took, "HTTP 404", "/v1")
    assert srv.requests == []  # no episode ever sent a request


def test_a_server_that_fails_every_request_ends_the_run_at_once(tmp_path, capsys):
    with OpenAIStub([{"status": 500}], probe_reply={"status": 500}) as srv:
        code, _, err, took = rollout(agent_run(srv.base_url, tmp_path / "r.json"), capsys)
    assert_fails_fast(code, err, took, "HTTP 500")
    assert len(srv.probes) == 1 and srv.requests == []


def test_a_missing_key_for_the_default_endpoint_is_said_before_any_request(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    argv = ["--domain", "mock", "--agent", "llm_agent", "--user", "oracle", "--output", str(tmp_path / "r.json")]
    code, _, err, took = rollout([*argv, *FAST], capsys)
    assert_fails_fast(code, err, took, "no API key", "OPENAI_API_KEY")
    assert took < 5


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--agent", "orcale", "--user", "oracle"], "unknown agent 'orcale'; choose one of: llm_agent"),
        (["--agent", "oracle", "--user", "orcale"], "unknown user 'orcale'; choose one of: user_simulator"),
        (["--domain", "airlines", "--agent", "oracle", "--user", "oracle"], "unknown domain 'airlines'"),
        (["--domain", "mock", "--agent", "oracle", "--user", "oracle", "--task-split-name", "tst"], "tst"),
        (["--domain", "mock", "--agent", "oracle", "--user", "oracle", "--task-ids", "999"], "999"),
    ],
)
def test_a_misspelled_name_is_one_line_naming_the_valid_ones(argv, needle, tmp_path, capsys):
    code, _, err, took = rollout([*argv, "--output", str(tmp_path / "r.json"), "--no-progress"], capsys)
    assert_fails_fast(code, err, took, needle)
    assert not (tmp_path / "r.json").exists()


def test_a_misspelled_reset_option_names_the_valid_ones():
    env = gym.make("tau2/mock-v0")
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['taskid'\]; valid options are: task_id"):
        env.reset(options={"taskid": "5"})
    env.reset(options={"task_id": env.unwrapped.tasks[0].id})  # the right spelling still works


def test_one_failed_episode_makes_the_exit_status_non_zero_and_every_finished_episode_is_written(tmp_path, capsys):
    # the first episode's agent request gets an HTTP 400 (not retried: the episode fails at once), the second
    # episode's agent says goodbye and the oracle customer ends it
    with OpenAIStub(lambda body, n: {"status": 400} if n == 0 else "Goodbye.") as srv:
        out = tmp_path / "r.json"
        code, stdout, err, _ = rollout(agent_run(srv.base_url, out, ["--max-concurrency", "1"]), capsys)
    assert code == 1
    assert len(srv.requests) == 2  # one per episode: the 400 was neither retried nor re-run
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("failed: 1 of 2 episodes (infrastructure_error: 1x PolicyError:") and "HTTP 400" in last
    assert len(error_lines(err)) == 1 and "--max-infra-error-rate" in error_lines(err)[0]
    sims = json.loads(out.read_text())["simulations"]
    assert sorted(s["termination_reason"] for s in sims) == ["infrastructure_error", "user_stop"]
    # a tolerated share exits 0 (the failed episode is re-run by the resume: the stub now says goodbye)
    with OpenAIStub(lambda body, n: {"status": 400}) as srv:
        code, stdout, _, _ = rollout(agent_run(srv.base_url, out, ["--max-infra-error-rate", "0.5"]), capsys)
    assert code == 0 and stdout.strip().splitlines()[-1].startswith("failed: 1 of 2 episodes")


def user_llm_run(base_url: str, out_path) -> list[str]:
    return [
        "--domain",
        "mock",
        "--agent",
        "oracle",
        "--user",
        "user_simulator",
        "--user-llm",
        "shared-name",
        "--user-base-url",
        base_url,
        "--task-ids",
        "create_task_1",
        "--output",
        str(out_path),
        *FAST,
    ]


def user_texts(path) -> list[str]:
    sims = json.loads(path.read_text())["simulations"]
    return [m.get("content") or "" for s in sims for m in s["messages"] if m["role"] == "user"]


def test_two_servers_serving_one_model_name_never_share_cached_replies(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TAU2_GYM_CACHE_DIR", str(tmp_path / "cache"))
    a_replies = ["Hi, this is server A speaking.", "###STOP###"]
    b_replies = ["Hi, this is server B speaking.", "###STOP###"]
    with OpenAIStub(a_replies, model="shared-name") as a, OpenAIStub(b_replies, model="shared-name") as b:
        code, stdout, err, _ = rollout(user_llm_run(a.base_url, tmp_path / "a.json"), capsys)
        assert code == 0, err
        assert any(t.startswith("user cache: on, ") and str(tmp_path / "cache") in t for t in err.splitlines()[:4])
        assert "--no-user-cache" in err
        assert any("server A" in t for t in user_texts(tmp_path / "a.json"))

        code, stdout, err, _ = rollout(user_llm_run(b.base_url, tmp_path / "b.json"), capsys)
        assert code == 0, err
        texts = user_texts(tmp_path / "b.json")
        assert any("server B" in t for t in texts) and not any("server A" in t for t in texts)
        assert "user cache: 0 hits" in stdout
        assert len(b.requests) == len(a.requests)  # B answered every request itself

        # the same server again: now its replies come from the cache, so the key is what keeps A and B apart
        code, stdout, err, _ = rollout(user_llm_run(a.base_url, tmp_path / "a2.json"), capsys)
        assert code == 0 and f"user cache: {len(a_replies)} hits" in stdout
        assert user_texts(tmp_path / "a2.json") == user_texts(tmp_path / "a.json")


def test_no_user_cache_says_so_at_start(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TAU2_GYM_CACHE_DIR", str(tmp_path / "cache"))
    with OpenAIStub(["Hello.", "###STOP###"], model="shared-name") as a:
        code, _, err, _ = rollout([*user_llm_run(a.base_url, tmp_path / "a.json"), "--no-user-cache"], capsys)
    assert code == 0 and "user cache: off" in err.splitlines()[:4]


def test_cache_stats_and_clear(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TAU2_GYM_CACHE_DIR", str(tmp_path / "cache"))
    with OpenAIStub(["Hello.", "###STOP###"], model="shared-name") as a:
        assert rollout(user_llm_run(a.base_url, tmp_path / "a.json"), capsys)[0] == 0
        assert main(["cache", "stats"]) == 0
        out = capsys.readouterr().out
        assert "2 entries" in out and "shared-name" in out
        assert main(["cache", "clear"]) == 0
        assert "cleared 2 entries" in capsys.readouterr().out
        assert main(["cache", "stats"]) == 0 and "0 entries" in capsys.readouterr().out
        _, stdout, _, _ = rollout(user_llm_run(a.base_url, tmp_path / "b.json"), capsys)
    assert "user cache: 0 hits" in stdout


def test_eval_says_on_the_console_why_a_simulation_was_not_scored(tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["--domain", "mock", "--agent", "oracle", "--user", "oracle", "--task-ids", "create_task_1"]
    assert rollout([*argv, "update_task_1", "--output", str(out), "--no-progress"], capsys)[0] == 0
    raw = json.loads(out.read_text())
    raw["simulations"][1]["task_id"] = "999"
    out.write_text(json.dumps(raw))
    code = main(["eval", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("not scored:")]
    assert len(lines) == 1 and "task 999" in lines[0] and "is not among the file's tasks" in lines[0]
    assert "output file" not in err  # no output file was asked for: no note about its fields
    assert main(["eval", str(out), "--no-progress", "-o", str(tmp_path / "o.json")]) == 1
    assert "in the output file" in capsys.readouterr().err


def test_a_server_that_now_reports_another_model_gets_no_cached_replies(tmp_path, capsys, monkeypatch):
    # the same URL and requested name, but the server now serves (and reports) other weights: its check says so,
    # and the entries the old model answered are misses
    monkeypatch.setenv("TAU2_GYM_CACHE_DIR", str(tmp_path / "cache"))
    with OpenAIStub(["Hi, the old model here.", "###STOP###"], model="ckpt-100") as srv:
        assert rollout(user_llm_run(srv.base_url, tmp_path / "a.json"), capsys)[0] == 0
        srv.model, srv.replies, srv.requests = "ckpt-200", ["Hi, the new model here.", "###STOP###"], []
        code, stdout, _, _ = rollout(user_llm_run(srv.base_url, tmp_path / "b.json"), capsys)
        assert code == 0 and "user cache: 0 hits" in stdout
        texts = user_texts(tmp_path / "b.json")
        assert any("new model" in t for t in texts) and not any("old model" in t for t in texts)
        # and the new model's entries serve the next run
        _, stdout, _, _ = rollout(user_llm_run(srv.base_url, tmp_path / "c.json"), capsys)
    assert "user cache: 2 hits" in stdout
