"""The one episode driver (tau2_gym.episodes.driver) and the env's two-phase step built on it: driving an episode in
phases -- the action in, the customer's turns answered from outside, the transition out -- gives exactly what
``step`` gives, so the vector env and the runner batch or await customer turns with public calls only."""

from __future__ import annotations

import ast
from pathlib import Path

import gymnasium as gym
import pytest

import tau2_gym
from tau2_gym.core.domain import load_domain
from tau2_gym.core.settings import EpisodeSettings
from tau2_gym.episodes.driver import AGENT, DONE, USER, EpisodeSetup, agent_tools
from tau2_gym.players.agents.scripted import make_agent
from tau2_gym.players.users.scripted import OracleUser

PACKAGE = Path(tau2_gym.__file__).parent


def _strip(value):
    """Drop what differs between two runs of one episode: ids, timestamps, durations."""
    if isinstance(value, dict):
        return {
            k: _strip(v) for k, v in value.items() if k not in ("id", "timestamp", "start_time", "end_time", "duration")
        }
    if isinstance(value, (list, tuple)):
        return [_strip(v) for v in value]
    return value


def _transition(result):
    obs, reward, term, trunc, info = result
    info = {k: (dict(v) if hasattr(v, "keys") else v) for k, v in info.items()}
    return _strip([obs, reward, term, trunc, info])


@pytest.mark.parametrize("agent_name", ["oracle", "wrong_arguments", "malformed"])
def test_two_phase_steps_equal_step(agent_name):
    one = gym.make("tau2/mock-v0", judge="pass").unwrapped
    two = gym.make("tau2/mock-v0", judge="pass").unwrapped
    user = OracleUser()
    for task in one.tasks[:4]:
        obs1, info1 = one.reset(seed=7, options={"task_id": task.id})
        two.begin_reset(seed=7, options={"task_id": task.id})
        while (request := two.pending_user_turn()) is not None:
            two.answer_user(user.generate(request))
        obs2, info2 = two.end_reset()
        assert _strip([obs1, info1["task_id"], info1["step_count"]]) == _strip(
            [obs2, info2["task_id"], info2["step_count"]]
        )
        a1, a2 = make_agent(agent_name), make_agent(agent_name)
        a1.reset(info1["task"], info1)
        a2.reset(info2["task"], info2)
        for _ in range(30):
            first = one.step(a1.act(obs1, info1))
            two.begin_step(a2.act(obs2, info2))
            while (request := two.pending_user_turn()) is not None:
                two.answer_user(user.generate(request))
            second = two.end_step()
            assert _transition(first) == _transition(second)
            obs1, _, term, trunc, info1 = first
            obs2, _, _, _, info2 = second
            if term or trunc:
                break
        assert term or trunc


def test_an_episode_is_driven_by_act_user_request_and_answer():
    domain = load_domain("mock")
    setup = EpisodeSetup(domain, EpisodeSettings(domain="mock", evaluate=True))
    task = domain.tasks()[0]
    episode = setup.start(task, seed=3)
    user = OracleUser()
    agent = make_agent("oracle")
    assert episode.status == USER  # the greeting is delivered; the customer speaks first
    agent.reset(task, {"tools": list(setup.tools), "solo": False, "domain": "mock"})
    turns = 0
    while not episode.done:
        request = episode.user_request()
        if request is not None:
            episode.submit_user(user.generate(request))
            continue
        assert episode.status == AGENT
        episode.act(agent.act(episode.agent_messages(), {}))
        turns += 1
    assert episode.status == DONE and turns > 0
    outcome = episode.finish()
    run = outcome.record.data
    assert outcome.reward == 1.0 and run["termination_reason"] == "user_stop"
    assert run["reward_info"] == outcome.reward_info and run["mode"] == "half_duplex"
    assert run["messages"][0]["role"] == "assistant"  # the greeting


def test_an_unreadable_action_ends_the_episode_as_agent_error_without_raising():
    domain = load_domain("mock")
    episode = EpisodeSetup(domain).start(domain.tasks()[0], seed=0)
    episode.submit_user(OracleUser().generate(episode.user_request()))
    episode.act({"tool_calls": [{"function": {"name": "get_users", "arguments": "{not json"}}]})
    assert episode.done and episode.termination_reason == "agent_error"


def test_a_server_reply_with_call_markup_becomes_calls_only_with_a_reply_parser():
    domain = load_domain("mock")
    reply = {
        "role": "assistant",
        "content": '<tool_call>{"name": "get_users", "arguments": {}}</tool_call>',
        "raw_data": {"id": "x"},
    }
    for parse_replies, calls in ((False, 0), (True, 1)):
        settings = EpisodeSettings(domain="mock", parser="hermes", parse_replies=parse_replies)
        episode = EpisodeSetup(domain, settings).start(domain.tasks()[0], seed=0)
        episode.submit_user(OracleUser().generate(episode.user_request()))
        episode.act(dict(reply))
        assistant = [m for m in episode.trajectory if m.role == "assistant"][-1]
        assert len(assistant.tool_calls or ()) == calls


def test_the_agent_tool_list_is_a_private_copy_with_done_when_the_agent_may_stop():
    domain = load_domain("mock")
    tools = agent_tools(domain, solo=False, agent_can_stop=True)
    assert tools[-1]["function"]["name"] == "done"
    tools[0]["function"]["name"] = "changed"
    assert agent_tools(domain, solo=False, agent_can_stop=False)[0]["function"]["name"] != "changed"


def _constructions(name: str) -> list[str]:
    """Where the package constructs ``name`` (a call of that name, as ``X(`` or ``module.X(``)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if called == name:
                    out.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return out


def test_the_turn_loop_is_constructed_in_one_place():
    # an Episode is the turn loop; EpisodeSetup.start is the only place one is built
    assert _constructions("TurnLoop") == []
    assert [site.split(":")[0] for site in _constructions("Episode")] == ["episodes/driver.py"]


def test_no_speed_trick_patches_the_envs_or_the_interpreter():
    """No method overwriting on env instances, no collector switching, no private CPython shortcuts."""
    banned = ("gc.disable", "gc.enable", "c_make_encoder", "scan_once", "sys._getframe")
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for word in banned:
            assert word not in text, (path, word)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr in (
                        "_run_user",
                        "observation",
                        "_observation",
                        "step",
                        "reset",
                    ):
                        raise AssertionError(f"{path}:{node.lineno} assigns a method of an object")
