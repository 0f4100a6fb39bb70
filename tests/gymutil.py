"""Test helpers for the Gymnasium envs: run an episode with a scripted agent while recording both sides' scripts
and views, so the very same episode can be replayed through upstream's orchestrator (tests/reference/driver_gym.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from tau2_gym.core.actions import ActionError, to_assistant_message
from tau2_gym.players.users.base import UserSimulator, UserTurnRequest


class RecordingUser(UserSimulator):
    """Wraps a simulator; records every request's view and every reply (as a script entry)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.views: list[list[dict]] = []
        self.systems: list[str] = []
        self.tools: list[Optional[list]] = []
        self.script: list[dict] = []

    def generate(self, request: UserTurnRequest):
        self.views.append(request.openai_messages())
        self.systems.append(request.system_prompt)
        self.tools.append(request.tools)
        try:
            msg = self.inner.generate(request)
        except Exception as exc:
            self.script.append({"raise": f"{type(exc).__name__}: {exc}"})
            raise
        self.script.append(
            {
                "content": msg.content,
                "tool_calls": None
                if msg.tool_calls is None
                else [{"id": tc.id, "name": tc.name, "arguments": tc.arguments} for tc in msg.tool_calls],
            }
        )
        return msg

    def reset_records(self) -> None:
        self.views, self.systems, self.tools, self.script = [], [], [], []


@dataclass
class Episode:
    task_id: str
    agent_script: list[dict] = field(default_factory=list)
    agent_views: list[list[dict]] = field(default_factory=list)
    user_script: list[dict] = field(default_factory=list)
    user_views: list[list[dict]] = field(default_factory=list)
    user_systems: list[str] = field(default_factory=list)
    user_tools: list = field(default_factory=list)
    reset_info: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    steps: int = 0
    observations: list = field(default_factory=list)


def script_entry(action: Any, env: Any) -> dict:
    """The action as upstream's LLM would have returned it (or a failing call for unreadable actions)."""
    cfg = env.unwrapped.config
    try:
        msg = to_assistant_message(
            action,
            parser=cfg.parser,
            tokenizer=cfg.tokenizer,
            fill_ids=cfg.fill_tool_call_ids,
            first_id=env.unwrapped.episode.calls,
        )
    except ActionError as exc:
        return {"raise": exc.reason}
    return {
        "content": msg.content,
        "tool_calls": None
        if msg.tool_calls is None
        else [{"id": tc.id, "name": tc.name, "arguments": tc.arguments} for tc in msg.tool_calls],
    }


def run_episode(
    env: Any, agent: Any, options: Optional[dict] = None, seed: Optional[int] = None, max_env_steps: int = 1000
) -> Episode:
    """Drive one episode; the env's user must be a RecordingUser (or the env solo)."""
    user = env.unwrapped.user
    if isinstance(user, RecordingUser):
        user.reset_records()
    obs, info = env.reset(seed=seed, options=options)
    ep = Episode(task_id=info["task_id"], reset_info=info)
    agent.reset(info["task"], info)
    over = bool(info.get("episode_over"))
    while True:
        if not over:
            ep.agent_views.append(obs)
        action = agent.act(obs, info)
        if not over:
            ep.agent_script.append(script_entry(action, env))
        obs, reward, term, trunc, info = env.step(action)
        ep.observations.append(obs)
        ep.steps += 1
        if term or trunc:
            ep.reward, ep.terminated, ep.truncated, ep.info = reward, term, trunc, info
            break
        if ep.steps >= max_env_steps:
            raise AssertionError("episode did not end")
    if isinstance(user, RecordingUser):
        ep.user_script, ep.user_views = list(user.script), list(user.views)
        ep.user_systems, ep.user_tools = list(user.systems), list(user.tools)
    return ep


def canonical_trajectory(sim_run: dict) -> list[dict]:
    from reference.driver_gym import canonical_message

    return [canonical_message(m) for m in sim_run["messages"]]


def raw_task(env: Any, task_id: str) -> dict:
    """The task's dict as stored in the task file (what upstream validates itself)."""
    dom = env.unwrapped.domain
    with open(dom.task_file(env.unwrapped.config.task_set), encoding="utf-8") as fh:
        for t in json.load(fh):
            if str(t["id"]) == task_id:
                return t
    raise KeyError(task_id)
