"""Differential: a results file whose agent messages carry reasoning (``raw_data.reasoning_content``) loads in
upstream tau2-bench's own tools, which re-score it as we do -- a number said only in a thought earns nothing there
either -- and write it back with the reasoning kept."""

from __future__ import annotations

import json
import os

import pytest
from refutil import ok, run_reference

from tau2_gym.core.messages import AssistantMessage
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import CLOSING, OracleAgent, ScriptedPolicy
from tau2_gym.runner.collect import collect

pytestmark = pytest.mark.reference

THOUGHT = "Checking the policy before I act."


class ThinkingOracle(AgentPolicy):
    """The oracle, thinking before every turn; its closing summary (the task's communicate info) only thought."""

    offline = True

    def __init__(self) -> None:
        self.inner = ScriptedPolicy(OracleAgent)

    def generate(self, request):
        action = self.inner.generate(request)
        if isinstance(action, AssistantMessage):
            action = {"role": "assistant", "content": action.content, "tool_calls": action.tool_calls}
        action = dict(action)
        text = action.get("content")
        if isinstance(text, str) and text.startswith("Here is a summary"):
            action["content"] = f"<think>{text}</think>{CLOSING}"
        else:
            action["reasoning_content"] = THOUGHT
        return action

    def episode_done(self, episode_id):
        self.inner.episode_done(episode_id)


def test_upstream_loads_rescores_and_keeps_a_results_file_with_reasoning(tmp_path):
    out = tmp_path / "run.json"
    report = collect(
        ["11", "0", "1", "4"],
        ThinkingOracle(),
        domain="airline",
        data_dir=os.environ.get("TAU2_UPSTREAM_DATA_DIR"),
        concurrency=1,
        output=str(out),
        progress=False,
    )
    ours = {r["task_id"]: r for r in report.simulations}
    assert ours["11"]["reward_info"]["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 0.0}
    with_reasoning = [
        m for r in ours.values() for m in r["messages"] if (m.get("raw_data") or {}).get("reasoning_content")
    ]
    assert with_reasoning and all("<think>" not in (m["content"] or "") for m in with_reasoning)

    up = ok(run_reference("driver_rollout", [{"path": str(out)}])[0])
    assert len(up["simulations"]) == len(ours) == 4
    for row in up["simulations"]:
        assert row["reward"] == ours[row["task_id"]]["reward_info"]["reward"], row
    assert {row["task_id"]: row["reward"] for row in up["simulations"]}["11"] == 0.0

    saved, rescored = tmp_path / "upstream_saved.json", tmp_path / "upstream_rescored.json"
    job = {"kind": "results_roundtrip", "results": json.loads(out.read_text()), "save_to": str(saved)}
    ok(run_reference("driver_eval", [{**job, "rescored_to": str(rescored)}])[0])
    for path in (saved, rescored):
        sims = {s["task_id"]: s for s in json.loads(path.read_text())["simulations"]}
        for task_id, run in ours.items():
            kept = [(m.get("raw_data") or {}).get("reasoning_content") for m in sims[task_id]["messages"]]
            assert kept == [(m.get("raw_data") or {}).get("reasoning_content") for m in run["messages"]]
    rescored_11 = next(s for s in json.loads(rescored.read_text())["simulations"] if s["task_id"] == "11")
    assert rescored_11["reward_info"]["reward"] == 0.0
