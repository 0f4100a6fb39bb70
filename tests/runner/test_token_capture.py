"""``rollout --capture-tokens``: token ids and logprobs a server returns are kept per agent reply, equal to
what it sent, and the requests ask for them (OpenAI ``logprobs``/``top_logprobs``; vLLM's extensions)."""

from __future__ import annotations

import itertools
import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.cli import main


class TokenStub(OpenAIStub):
    """Adds per-reply tokens: vLLM-style (token_ids, prompt_token_ids, "token_id:N" tokens) or OpenAI-style."""

    def __init__(self, replies, vllm: bool) -> None:
        super().__init__(replies)
        self.vllm = vllm
        self.sent: list[dict] = []
        self._ids = itertools.count(100)

    def _completion(self, item):
        out = super()._completion(item)
        with self._lock:
            ids = [next(self._ids) for _ in range(3)]
        lps = [-0.25 * (k + 1) for k in range(3)]
        toks = [f"token_id:{i}" if self.vllm else f"t{i}" for i in ids]
        out["choices"][0]["logprobs"] = {
            "content": [
                {"token": t, "logprob": lp, "bytes": None, "top_logprobs": [{"token": t, "logprob": lp, "bytes": None}]}
                for t, lp in zip(toks, lps)
            ]
        }
        sent = {"completion_token_ids": ids if self.vllm else None, "completion_logprobs": lps, "tokens": toks}
        if self.vllm:
            out["choices"][0]["token_ids"] = ids
            out["prompt_token_ids"] = [1, 2, len(self.sent)]
            sent["prompt_token_ids"] = [1, 2, len(self.sent)]
        with self._lock:
            self.sent.append(sent)
        return out


def _run(tmp_path, vllm: bool, *flags):
    out = tmp_path / "run.json"
    with TokenStub(["Hello, how can I help?"], vllm) as srv:
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--task-ids",
                "create_task_1",
                "--agent",
                "llm_agent",
                "--agent-llm",
                "stub-model",
                "--agent-base-url",
                srv.base_url,
                "--user",
                "oracle",
                "--max-steps",
                "6",
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
                *flags,
            ]
        )
        requests, sent = list(srv.requests), list(srv.sent)
    assert code == 0
    if "--capture-tokens" in flags:  # the probe before the run: one short request, said on stderr
        from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy

        probe, requests, sent = requests[0], requests[1:], sent[1:]
        assert probe["messages"] == [{"role": "user", "content": OpenAIAgentPolicy.PROBE_TEXT}]
        assert probe["max_tokens"] == 1 and probe["logprobs"] is True
    (run,) = json.loads(out.read_text())["simulations"]
    replies = [m for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data")]
    return requests, sent, replies


def test_vllm_token_ids_and_logprobs_are_kept_as_sent(tmp_path, capsys):
    requests, sent, replies = _run(tmp_path, True, "--capture-tokens", "vllm")
    assert requests and all(r["logprobs"] is True and r["top_logprobs"] == 1 for r in requests)
    assert all(r["return_token_ids"] is True and r["return_tokens_as_token_ids"] is True for r in requests)
    assert len(replies) == len(sent) >= 1
    for msg, s in zip(replies, sent):
        raw = msg["raw_data"]
        assert raw["completion_token_ids"] == s["completion_token_ids"]
        assert raw["completion_logprobs"] == s["completion_logprobs"]
        assert raw["prompt_token_ids"] == s["prompt_token_ids"]
        assert raw["completion_top_logprobs"][0][0]["logprob"] == s["completion_logprobs"][0]
    captured = capsys.readouterr()
    assert f"logprobs in {len(sent)} of {len(sent)} agent replies, token ids in {len(sent)}" in captured.out
    assert "token capture: the agent server returns logprobs, token_ids, prompt_token_ids" in captured.err


def test_openai_logprobs_without_ids_and_ids_from_token_strings(tmp_path, capsys):
    requests, sent, replies = _run(tmp_path, False, "--capture-tokens")
    assert "token capture: the agent server returns logprobs" in capsys.readouterr().err  # all 'openai' asks for
    assert all(r["logprobs"] is True and "return_token_ids" not in r for r in requests)
    for msg, s in zip(replies, sent):
        assert msg["raw_data"]["completion_logprobs"] == s["completion_logprobs"]
        assert msg["raw_data"]["completion_tokens"] == s["tokens"]
        assert msg["raw_data"]["completion_token_ids"] is None  # not sent, not guessed
    from tau2_gym.players.agents.openai_agent import token_record  # "token_id:N" spellings give the ids

    raw = {"choices": [{"logprobs": {"content": [{"token": "token_id:7", "logprob": -1.0}]}}]}
    assert token_record(raw)["completion_token_ids"] == [7]


def test_without_the_flag_no_logprobs_are_requested(tmp_path):
    requests, _, replies = _run(tmp_path, True)
    assert all("logprobs" not in r for r in requests)
    assert all("completion_logprobs" not in m["raw_data"] for m in replies)


def test_a_server_without_logprobs_is_reported_before_the_run(tmp_path, capsys):
    out = tmp_path / "plain.json"
    with OpenAIStub(["Hello, how can I help?"]) as srv:  # returns no logprobs, no ids
        code = main(
            [
                "rollout",
                "--domain",
                "mock",
                "--task-ids",
                "create_task_1",
                "--agent",
                "llm_agent",
                "--agent-llm",
                "stub-model",
                "--agent-base-url",
                srv.base_url,
                "--user",
                "oracle",
                "--max-steps",
                "4",
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
                "--capture-tokens",
                "vllm",
            ]
        )
    assert code == 0
    lines = capsys.readouterr().err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rollout: mock"))
    # said at the start, right after the run's first line, before any episode ran
    assert lines[start + 1].startswith(
        "token capture: WARNING the agent server returns no logprobs, token_ids, prompt_token_ids"
    )
