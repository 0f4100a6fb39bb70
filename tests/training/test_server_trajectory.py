"""Captured server tokens become the HF PolicyRunner's record (``tau2_gym.training.tokens.server_trajectory``): prompt
ids,
completion ids, env_mask and logprobs equal to what the stub sent, the env/user tokens equal to the stub's own
rendering of those turns; a server whose template is not prefix-preserving is refused, never stitched wrongly."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub

from tau2_gym.cli import main
from tau2_gym.training.hf.policy import Trajectory
from tau2_gym.training.tokens import TokenTrajectoryError, server_trajectories, server_trajectory

ROLE = {"system": 1001, "user": 1002, "assistant": 1003, "tool": 1004}
END = 1000


def _args(text):
    try:
        return json.loads(text or "{}")
    except ValueError:  # a malformed call renders as sent
        return text


def _calls(calls):
    return json.dumps([[c["function"]["name"], _args(c["function"]["arguments"])] for c in calls or []], sort_keys=True)


def render(msg, *, drop_old_tool_calls=False):
    """A toy chat template: role marker, UTF-8 bytes of the content and of the calls, end marker."""
    calls = "" if drop_old_tool_calls or not msg.get("tool_calls") else _calls(msg["tool_calls"])
    return [ROLE[msg["role"]]] + list((msg.get("content") or "").encode()) + list(calls.encode()) + [END]


class RenderingStub(OpenAIStub):
    """vLLM-like: prompt_token_ids = the toy rendering of the request plus the generation prompt; completion ids =
    the reply's rendering after the generation prompt; logprobs made up per token. ``broken`` re-renders earlier
    assistant turns without their tool calls (a template that is not prefix-preserving)."""

    def __init__(self, replies, broken=False):
        super().__init__(replies)
        self.broken = broken
        self.sent: list[dict] = []
        self._body = threading.local()

    def _next(self, body):
        self._body.value = body
        return super()._next(body)

    def _completion(self, item):
        out = super()._completion(item)
        body = self._body.value
        msgs = body.get("messages") or []
        prompt = [t for m in msgs for t in render(m, drop_old_tool_calls=self.broken)] + [ROLE["assistant"]]
        message = out["choices"][0]["message"]
        ids = render({"role": "assistant", **message})[1:]  # after the generation prompt
        lps = [-(k % 7 + 1) / 8 for k in range(len(ids))]
        out["choices"][0]["token_ids"] = ids
        out["choices"][0]["logprobs"] = {
            "content": [{"token": f"token_id:{t}", "logprob": lp, "top_logprobs": []} for t, lp in zip(ids, lps)]
        }
        out["prompt_token_ids"] = prompt
        if msgs and msgs[0].get("content") != "tau2-gym token capture probe: reply with one word.":
            with self._lock:
                self.sent.append({"prompt": prompt, "ids": ids, "logprobs": lps, "messages": msgs})
        return out


def reply(body, n):
    if body["messages"][-1]["role"] == "tool":
        return "Your task 'Important Meeting' is created."
    return {
        "tool_calls": [
            {"id": "c0", "name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"}}
        ]
    }


def _rollout(tmp_path, broken=False, replies=reply):
    out = tmp_path / f"run{int(broken)}.json"
    with RenderingStub(replies, broken=broken) as srv:
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
                "vllm",
            ]
        )
        sent = list(srv.sent)
    assert code == 0
    (run,) = json.loads(out.read_text())["simulations"]
    return run, sent


def test_server_tokens_make_the_policy_runner_record(tmp_path):
    run, sent = _rollout(tmp_path)
    assert len(sent) >= 2  # a tool call, then text after its result
    traj = server_trajectory(run)
    assert isinstance(traj, Trajectory)  # the HF PolicyRunner's record: one trainer-side code path
    assert traj.prompt_ids == sent[0]["prompt"]
    assert traj.policy_token_ids() == [t for s in sent for t in s["ids"]]  # exactly the sampled tokens
    assert [lp for lp, m in zip(traj.logprobs, traj.env_mask) if m] == [lp for s in sent for lp in s["logprobs"]]
    assert all(lp == 0.0 for lp, m in zip(traj.logprobs, traj.env_mask) if not m)
    assert len(traj.completion_ids) == len(traj.env_mask) == len(traj.logprobs)
    # the whole sequence is the last request's prompt plus its reply; nothing follows the last reply
    assert traj.prompt_ids + traj.completion_ids == sent[-1]["prompt"] + sent[-1]["ids"]
    assert traj.env_mask[-1] == 1
    # each env segment is the stub's rendering of the turns the env/user added, plus the generation prompt
    for k in range(1, len(sent)):
        before, after = sent[k - 1]["messages"], sent[k]["messages"]
        new_turns = after[len(before) + 1 :]  # past the previous request's messages and the agent's reply
        expected = [t for m in new_turns for t in render(m)] + [ROLE["assistant"]]
        turn = traj.turns[k - 1]
        assert traj.completion_ids[turn.end : turn.end + turn.env_tokens] == expected
        assert traj.env_mask[turn.end : turn.end + turn.env_tokens] == [0] * len(expected)
    assert traj.termination_reason == run["termination_reason"]
    assert traj.reward == run["reward_info"]["reward"]


def test_a_template_that_rerenders_earlier_turns_is_refused(tmp_path):
    run, sent = _rollout(tmp_path, broken=True)
    with pytest.raises(TokenTrajectoryError, match="agent reply 1: the server's prompt does not extend"):
        server_trajectory(run)
    good, bad = server_trajectories([run])
    assert good == [] and bad[0][0] == "create_task_1"
    run["messages"] = [m for m in run["messages"] if m["role"] != "assistant"]
    with pytest.raises(TokenTrajectoryError, match="no agent reply carries captured tokens"):
        server_trajectory(run)


def test_the_malformed_reply_that_ended_an_episode_is_its_last_policy_turn(tmp_path):
    def malformed(body, n):  # after the tool result: a call cut off mid-JSON (the episode ends as agent_error)
        if body["messages"][-1]["role"] == "tool":
            return {"tool_calls": [{"id": "c1", "name": "get_users", "arguments": '{"user_id": '}]}
        return reply(body, n)

    run, sent = _rollout(tmp_path, replies=malformed)
    assert run["termination_reason"] == "agent_error" and len(sent) == 2
    traj = server_trajectory(run)
    assert traj.policy_token_ids() == sent[0]["ids"] + sent[1]["ids"]  # the malformed call's tokens, trained on
    assert traj.prompt_ids + traj.completion_ids == sent[1]["prompt"] + sent[1]["ids"]
    assert traj.reward == 0.0 and traj.termination_reason == "agent_error"


def test_a_template_that_rerenders_earlier_turns_gives_one_sample_per_reply_on_request(tmp_path):
    """``sample_mode="per_turn"`` (or ``"auto"``, which stitches only when the prompts allow it): each reply is one
    sample -- the server's own prompt ids, the reply's ids and logprobs -- all with the episode's reward."""
    run, sent = _rollout(tmp_path, broken=True)
    for mode in ("per_turn", "auto"):
        traj = server_trajectory(run, sample_mode=mode)
        assert traj.sample_mode == "per_turn" and traj.completion_ids == []
        samples = traj.training_samples()
        assert [s.prompt_ids for s in samples] == [s["prompt"] for s in sent]
        assert [s.completion_ids for s in samples] == [s["ids"] for s in sent]
        assert [s.logprobs for s in samples] == [s["logprobs"] for s in sent]
        assert traj.reward == run["reward_info"]["reward"] and [t.sample for t in traj.turns] == [0, 1]
    good, bad = server_trajectories([run], sample_mode="auto")
    assert len(good) == 1 and bad == []
    fine, _ = _rollout(tmp_path)  # prefix-preserving: "auto" stitches one sequence
    assert server_trajectory(fine, sample_mode="auto").sample_mode == "sequence"
    with pytest.raises(ValueError, match="sample_mode='both'; choose one of auto, sequence, per_turn"):
        server_trajectory(run, sample_mode="both")
