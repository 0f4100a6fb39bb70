"""``--capture-tokens sglang`` / ``auto``: SGLang's token options reach the request, the ids and logprobs it sends
per choice (``prompt_token_ids``, ``token_ids``, or ``meta_info.output_token_logprobs`` on servers without
``return_token_ids``) are kept as sent and stitch into the PolicyRunner's record; a server that sends no ids is
reported before the run; hostile token fields are refused with the reply named, never a crash."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("openai")

from test_server_trajectory import ROLE, RenderingStub, render, reply

from tau2_gym.cli import main
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, token_record
from tau2_gym.training.tokens import TokenTrajectoryError, server_trajectories, server_trajectory

SGLANG_FLAGS = {"return_token_ids", "return_prompt_token_ids", "return_meta_info"}


class SGLangStub(RenderingStub):
    """The toy template of ``RenderingStub`` in SGLang's reply shape: ids per choice, tokens spelled as text,
    ``matched_stop``. ``style``: ``"token_ids"`` (a server with ``return_token_ids``), ``"meta_info"`` (an older one:
    completion ids only in ``meta_info.output_token_logprobs`` triples, logprobs both there and in the OpenAI
    field) or ``"none"`` (a server that ignores every token-id option)."""

    def __init__(self, replies, style="token_ids"):
        super().__init__(replies)
        self.style = style

    def _completion(self, item):
        out = super()._completion(item)
        prompt = out.pop("prompt_token_ids")
        choice = out["choices"][0]
        ids = choice.pop("token_ids")
        lps = [e["logprob"] for e in choice["logprobs"]["content"]]
        choice["logprobs"] = {
            "content": [{"token": f"<{t}>", "logprob": lp, "bytes": [], "top_logprobs": []} for t, lp in zip(ids, lps)]
        }
        choice["matched_stop"] = END_ID
        if self.style == "token_ids":
            choice["prompt_token_ids"], choice["token_ids"] = prompt, ids
        elif self.style == "meta_info":
            choice["prompt_token_ids"] = prompt
            choice["meta_info"] = {
                "id": "stub",
                "prompt_tokens": len(prompt),
                "completion_tokens": len(ids),
                "output_token_logprobs": [[lp, t, f"<{t}>"] for t, lp in zip(ids, lps)],
            }
        return out


class VLLMStub(RenderingStub):
    """vLLM's reply shape (top-level prompt ids, ``stop_reason`` per choice)."""

    def _completion(self, item):
        out = super()._completion(item)
        out["choices"][0]["stop_reason"] = None
        return out


END_ID = 1000


def _rollout(tmp_path, stub, mode="sglang"):
    out = tmp_path / f"run-{mode}.json"
    with stub as srv:
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
                "8",
                "--max-retries",
                "0",
                "--no-progress",
                "--output",
                str(out),
                "--capture-tokens",
                mode,
            ]
        )
        requests, sent = list(srv.requests), list(srv.sent)
    assert code == 0
    (run,) = json.loads(out.read_text())["simulations"]
    return run, requests, sent


def _assert_stitched(run, sent):
    """The record equals what the stub sent; env segments are the stub's rendering of the env/user turns."""
    assert len(sent) >= 2  # a tool call, then text after its result
    traj = server_trajectory(run)
    assert traj.prompt_ids == sent[0]["prompt"]
    assert traj.policy_token_ids() == [t for s in sent for t in s["ids"]]
    assert [lp for lp, m in zip(traj.logprobs, traj.env_mask) if m] == [lp for s in sent for lp in s["logprobs"]]
    assert traj.prompt_ids + traj.completion_ids == sent[-1]["prompt"] + sent[-1]["ids"]
    for k in range(1, len(sent)):
        new_turns = sent[k]["messages"][len(sent[k - 1]["messages"]) + 1 :]
        expected = [t for m in new_turns for t in render(m)] + [ROLE["assistant"]]
        turn = traj.turns[k - 1]
        assert traj.completion_ids[turn.end : turn.end + turn.env_tokens] == expected
        assert traj.env_mask[turn.end : turn.end + turn.env_tokens] == [0] * len(expected)
    assert traj.reward == run["reward_info"]["reward"]


@pytest.mark.parametrize("style", ["token_ids", "meta_info"])
def test_sglang_ids_and_logprobs_are_kept_as_sent_and_stitch(tmp_path, capsys, style):
    run, requests, sent = _rollout(tmp_path, SGLangStub(reply, style=style))
    probe, turns = requests[0], requests[1:]
    assert probe["max_tokens"] == 1 and SGLANG_FLAGS <= set(probe)  # the probe asks what the run will ask
    for body in turns:
        assert body["logprobs"] is True and body["top_logprobs"] == 1
        assert all(body[f] is True for f in SGLANG_FLAGS) and "return_tokens_as_token_ids" not in body
    replies = [m["raw_data"] for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data")]
    assert len(replies) == len(sent)
    for raw, s in zip(replies, sent):
        assert raw["prompt_token_ids"] == s["prompt"] and raw["completion_token_ids"] == s["ids"]
        assert raw["completion_logprobs"] == s["logprobs"] and raw["token_source"] == "sglang"
    _assert_stitched(run, sent)
    assert (
        "token capture: the agent server returns logprobs, token_ids, prompt_token_ids (SGLang's fields)"
        in capsys.readouterr().err
    )


def test_an_sglang_server_without_ids_is_reported_at_start_and_refused_by_the_stitcher(tmp_path, capsys):
    run, _, sent = _rollout(tmp_path, SGLangStub(reply, style="none"))
    lines = capsys.readouterr().err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rollout: mock"))
    assert lines[start + 1].startswith(
        "token capture: WARNING the agent server returns no token_ids, "
        "prompt_token_ids (it does return logprobs) (SGLang's fields)"
    )
    raw = next(m["raw_data"] for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data"))
    assert raw["completion_logprobs"] == sent[0]["logprobs"]  # what it did send is kept
    assert raw["completion_token_ids"] is None and raw["prompt_token_ids"] is None  # not guessed from "<N>"
    with pytest.raises(
        TokenTrajectoryError,
        match="agent reply 0: the server sent no prompt token ids "
        r"\(it answered like sglang",
    ):
        server_trajectory(run)


@pytest.mark.parametrize("stub_class,family", [(SGLangStub, "sglang"), (VLLMStub, "vllm")])
def test_auto_asks_both_servers_options_and_names_the_one_that_answered(tmp_path, capsys, stub_class, family):
    run, requests, sent = _rollout(tmp_path, stub_class(reply), mode="auto")
    assert all(SGLANG_FLAGS <= set(b) and b["return_tokens_as_token_ids"] is True for b in requests)
    label = {"sglang": "SGLang's", "vllm": "vLLM's"}[family]
    assert f"returns logprobs, token_ids, prompt_token_ids ({label} fields)" in capsys.readouterr().err
    assert {
        m["raw_data"]["token_source"] for m in run["messages"] if m["role"] == "assistant" and m.get("raw_data")
    } == {family}
    _assert_stitched(run, sent)


def test_capture_modes_are_checked_at_construction():
    assert OpenAIAgentConfig(capture_tokens="sglang").capture_tokens == "sglang"
    with pytest.raises(ValueError, match="capture_tokens must be one of"):
        OpenAIAgentConfig(capture_tokens="sglang-native")


def _run_with(raw_data: dict) -> dict:
    return {
        "task_id": "t",
        "termination_reason": "user_stop",
        "reward_info": {"reward": 1.0},
        "messages": [{"role": "assistant", "content": "hi", "raw_data": raw_data}],
    }


GOOD = {
    "prompt_token_ids": [1, 2],
    "completion_token_ids": [3, 4],
    "completion_logprobs": [-0.5, -0.25],
    "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
}


@pytest.mark.parametrize(
    "change,match",
    [
        ({"completion_token_ids": [3, "4"]}, "the completion token ids are not a list of integers"),
        ({"completion_token_ids": [3, True]}, "the completion token ids are not a list of integers"),
        ({"prompt_token_ids": "1 2"}, "the prompt token ids are not a list of integers"),
        ({"prompt_token_ids": [1, 2.0]}, "the prompt token ids are not a list of integers"),
        ({"completion_logprobs": [-0.5]}, "1 logprobs for 2 tokens"),
        ({"completion_logprobs": None}, "0 logprobs for 2 tokens"),
        ({"completion_logprobs": [-0.5, math.nan]}, "a logprob is not a finite number"),
        ({"completion_logprobs": [-0.5, "x"]}, "a logprob is not a finite number"),
        ({"completion_logprobs": [-0.5, -math.inf]}, "a logprob is not a finite number"),
    ],
)
def test_hostile_token_fields_are_refused_with_the_reply_named(change, match):
    run = _run_with({**GOOD, **change})
    with pytest.raises(TokenTrajectoryError, match=f"task 't', agent reply 0: {match}"):
        server_trajectory(run)
    good, bad = server_trajectories([run])
    assert good == [] and bad[0][0] == "t"


def test_odd_choices_do_not_crash_the_stitcher_or_the_reader():
    traj = server_trajectory(_run_with({**GOOD, "choices": "garbage"}))
    assert traj.turns[0].text == "" and traj.policy_token_ids() == [3, 4]
    # meta_info triples of the wrong shape are not read as ids; a reply of garbage reads as nothing
    rec = token_record({"choices": [{"meta_info": {"output_token_logprobs": [[-0.1]]}}]})
    assert rec["completion_token_ids"] is None and rec["completion_logprobs"] is None
    rec = token_record({"choices": ["garbage"]})
    assert rec["completion_token_ids"] is None and rec["token_source"] is None
