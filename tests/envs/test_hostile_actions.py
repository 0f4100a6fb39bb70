"""Hostile actions and arguments (README "Guarantees"): nothing raises out of ``step``, tool names are matched
exactly, ``calculate`` is bounded, only declared env functions are reachable, pydantic models work as tool
arguments like the dicts an LLM sends."""

from __future__ import annotations

import json
import random
import time
import warnings

import gymnasium as gym
import pytest

from tau2_gym import load_domain
from tau2_gym.core import arithmetic
from tau2_gym.core.messages import ToolCall
from tau2_gym.core.results_file import json_default
from tau2_gym.core.tasks import EnvAssertion, EnvFunctionCall
from tau2_gym.players.users.scripted import ScriptedUser


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _mock_env():
    env = gym.make("tau2/mock-v0", user=ScriptedUser(["please help"], then="ok"))
    env.reset(options={"task_id": "create_task_1"})
    return env


HOSTILE = [
    ("dict nested 5,000 deep", {"name": "get_users", "arguments": _nested(5000)}, "nest deeper"),
    (
        "JSON string nested 5,000 deep",
        {"name": "get_users", "arguments": '{"a":' * 5000 + "1" + "}" * 5000},
        "cannot be read",
    ),
    ("JSON nested 150 deep", {"name": "get_users", "arguments": json.dumps(_nested(150))}, "nest deeper"),
    (
        "4,301-digit integer in a JSON string",
        {"name": "get_users", "arguments": '{"x": ' + "7" * 4301 + "}"},
        "cannot be read",
    ),
    ("5,000-digit Python integer", {"name": "get_users", "arguments": {"x": 10**5000}}, "not JSON-serialisable"),
    ("name None with deep arguments", {"name": None, "arguments": _nested(5000)}, "without a 'name'"),
    (
        "OpenAI call, name None, deep arguments",
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": None, "arguments": _nested(3000)}}],
        },
        "without a 'name'",
    ),
    ("deep call id", {"id": _nested(3000), "name": "get_users", "arguments": {}}, None),
    ("5,000-digit call id", {"id": 10**5000, "name": "get_users", "arguments": {}}, None),
    ("deep role", {"role": _nested(3000), "content": "hi"}, "only send assistant"),
    (
        "markup with deep JSON",
        '<tool_call>{"name": "get_users", "arguments": ' + "[" * 5000 + "]" * 5000 + "}</tool_call>",
        "malformed tool-call markup",
    ),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_action_ends_as_agent_error_or_error_result_never_raises(case):
    _, action, detail = case
    env = _mock_env()
    obs, reward, term, trunc, info = env.step(action)
    if detail is None:  # a well-formed call (its odd id is shown in bounded form)
        assert not term and obs[-1]["role"] == "tool"
        return
    assert (term, reward, info["termination_reason"]) == (True, 0.0, "agent_error")
    assert detail in info["error"] and len(info["error"]) < 2_000
    json.dumps(info["simulation_run"], default=json_default)  # the episode's record still serialises


def test_tau2_parser_survives_deep_and_huge_text():
    env = gym.make("tau2/mock-v0", parser="tau2", user=ScriptedUser(["hi"], then="ok"))
    env.reset(options={"task_id": "create_task_1"})
    for text in (
        "[" * 5000 + "]" * 5000,
        '{"name": "get_users", "arguments": {"x": ' + "7" * 5000 + "}}",
        "get_users(x=" + "[" * 3000 + "]" * 3000 + ")",
        "get_users(x=" + "-" * 100_000 + "1)",
    ):
        obs, reward, term, trunc, info = env.step(text)
        assert not term, info.get("error")  # upstream's parser reads none of these as a call: text to the customer
        assert obs[-2] == {"role": "assistant", "content": text}


def test_one_hostile_action_in_a_vector_env_loses_no_other_episode():
    envs = gym.make_vec("tau2/mock-v0", num_envs=4, user=ScriptedUser(["hi"], then="ok"))
    envs.reset(seed=0)
    actions = [{"name": "get_users", "arguments": {}}] * 4
    actions[1] = {"name": "get_users", "arguments": '{"a":' * 5000 + "1" + "}" * 5000}
    obs, rewards, term, trunc, infos = envs.step(actions)
    assert list(term) == [False, True, False, False]
    for _ in range(3):  # the others go on; the ended slot resets (next-step autoreset) and goes on too
        obs, rewards, term, trunc, infos = envs.step([{"name": "get_users", "arguments": {}}] * 4)
        assert not term.any()
    envs.close()


def test_tool_names_are_matched_exactly_as_upstream():
    env = _mock_env()
    for name in (" get_users ", "get_users\n", "\tget_users"):
        obs, reward, term, trunc, info = env.step({"name": name, "arguments": {}})
        assert not term
        assert obs[-1]["content"] == f"Error: Tool '{name}' not found."
    assert info["num_errors"] == 3
    obs, *_ = env.step('<tool_call>{"name": " get_users", "arguments": {}}</tool_call>')
    assert obs[-1]["content"] == "Error: Tool ' get_users' not found."


# ------------------------------------------------------------------------------------------ calculate


def _upstream_calculate(expression: str) -> str:
    """upstream's calculate body, for expressions known to finish quickly."""
    try:
        if not all(char in "0123456789+-*/(). " for char in expression):
            raise ValueError("Invalid characters in expression")
        return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))
    except Exception as exc:  # noqa: BLE001 - upstream's own calculate returns any failure as text
        return f"Error: {exc}"


def _ours(expression: str) -> str:
    try:
        return arithmetic.calculate(expression)
    except Exception as exc:  # noqa: BLE001 - upstream's own calculate returns any failure as text
        return f"Error: {exc}"


def test_calculate_equals_upstream_eval_on_random_expressions():
    rng = random.Random(7)
    chars = "0123456789+-*/(). "
    compared = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'int' object is not callable; perhaps you missed a comma?"
        for _ in range(20_000):
            expr = "".join(rng.choice(chars) for _ in range(rng.randint(1, 14)))
            mine = _ours(expr)
            if "too large to evaluate" in mine:
                continue  # upstream would run unbounded here: not compared
            assert mine == _upstream_calculate(expr), expr
            compared += 1
    assert compared > 19_000
    for expr in (
        "2**10",
        "2**99999-2**99999+1",
        "(1)(2)",
        "()",
        "1/0",
        "1//0",
        "0**-1",
        "10**300*10**10",
        "  7*3",
        "2.5*4",
        "-2**2",
        "1+" * 3000 + "1",
        "(" * 300 + "1" + ")" * 300,
        "9**9**5",
        ["1", "+", "2"],
        ["12"],
        [1],
        {"1": 2},
        5,
        None,
    ):
        assert _ours(expr) == _upstream_calculate(expr), expr


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_calculate_tool_is_bounded(domain):
    env = load_domain(domain).make_environment()
    for expr in ("9**9**7", "9**9**9", "9**9**9**9", "(2**(2**20))*(3**(2**20))", "*".join(["9**60000"] * 100)):
        start = time.perf_counter()
        msg = env.get_response(ToolCall("calculate", {"expression": expr}, id="c"))
        assert time.perf_counter() - start < 1.0, expr
        assert msg.error and msg.content.startswith("Error: expression too large to evaluate"), msg.content
    ok = env.get_response(ToolCall("calculate", {"expression": "(120 + 30) * 2 / 3"}, id="c"))
    assert (ok.error, ok.content) == (False, "100.0")


# ------------------------------------------------------------------------------------------ env functions


def test_only_declared_env_functions_are_reachable():
    airline = load_domain("airline").make_environment()
    for name in ("__bool__", "__class__", "__repr__", "real"):  # airline has no user tools: None's attributes
        with pytest.raises(AttributeError):
            airline.run_env_assertion(
                EnvAssertion(env_type="user", func_name=name, arguments={}, assert_value=False),
                raise_assertion_error=False,
            )
    for name in ("db", "use_tool", "env_function", "subset", "db_hash", "__init__", "_get_user", "tool_names"):
        with pytest.raises(AttributeError):
            airline.run_env_function_call(EnvFunctionCall(env_type="assistant", func_name=name, arguments={}))
    telecom = load_domain("telecom").make_environment()
    declared = type(telecom.user_tools).env_function_names
    assert "set_user_info" in declared or any(n.startswith("assert_") for n in declared)
    for name in ("db", "use_tool", "__class__", "has_tool"):
        with pytest.raises(AttributeError):
            telecom.run_env_function_call(EnvFunctionCall(env_type="user", func_name=name, arguments={}))


def test_every_env_function_the_tasks_name_is_declared():
    for name in ("mock", "telecom"):
        dom = load_domain(name)
        kits = {"assistant": dom.agent_toolkit, "user": dom.user_toolkit}
        calls = []
        for task in dom.tasks():
            if task.initial_state is not None and task.initial_state.initialization_actions:
                calls += task.initial_state.initialization_actions
            if task.evaluation_criteria is not None and task.evaluation_criteria.env_assertions:
                calls += task.evaluation_criteria.env_assertions
        assert calls
        assert all(c.func_name in kits[c.env_type].env_function_names for c in calls)


# ------------------------------------------------------------------------------------------ model arguments


def test_pydantic_models_as_tool_arguments_equal_their_dicts():
    from tau2_gym.domains.airline.data_model import Passenger
    from tau2_gym.domains.telecom.user_data_model import APNNames, APNSettings

    dom = load_domain("telecom")
    runs = []
    for settings in (APNSettings(apn_name=APNNames.BROKEN), {"apn_name": "broken"}):
        env = dom.make_environment()
        msg = env.get_response(ToolCall("set_apn_settings", {"apn_settings": settings}, id="c", requestor="user"))
        after = env.get_response(ToolCall("check_apn_settings", {}, id="d", requestor="user"))
        runs.append((msg.content, msg.error, after.content, env.user_tools.db_hash()))
    assert runs[0] == runs[1] and not runs[0][1]

    airline = load_domain("airline")
    env0 = airline.make_environment()
    reservation = next(iter(env0.tools.db.reservations.keys()))
    count = len(
        json.loads(
            env0.get_response(ToolCall("get_reservation_details", {"reservation_id": reservation}, id="r")).content
        )["passengers"]
    )
    people = [{"first_name": f"P{i}", "last_name": "Q", "dob": f"1990-01-0{i + 1}"} for i in range(count)]
    runs = []
    for passengers in (people, [Passenger(**p) for p in people]):
        env = airline.make_environment()
        msg = env.get_response(
            ToolCall("update_reservation_passengers", {"reservation_id": reservation, "passengers": passengers}, id="c")
        )
        runs.append((msg.content, msg.error, env.tools.db_hash()))
    assert runs[0] == runs[1] and not runs[0][1] and "first_name='" not in runs[0][0]
