"""Property-based fuzzing of ``step`` (README "Guarantees"): for any action -- text, markup, OpenAI messages,
calls to real, user, dunder or misspelt tools, arguments nested deep, huge numbers, unicode and surrogates,
parallel calls -- ``step`` returns and the episode's record serialises.

The default profile runs >= 10,000 actions per domain; ``TAU2_FUZZ_EXAMPLES=N`` runs N examples (of 20
actions each) per domain instead.
"""

from __future__ import annotations

import json
import os

import gymnasium as gym
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402 - after the importorskip guard
from hypothesis import strategies as st  # noqa: E402 - after the importorskip guard

from tau2_gym import load_domain  # noqa: E402 - after the importorskip guard
from tau2_gym.core.results_file import json_default  # noqa: E402 - after the importorskip guard
from tau2_gym.players.users.scripted import ScriptedUser  # noqa: E402 - after the importorskip guard

pytestmark = pytest.mark.slow  # property-based fuzzing: hundreds of episodes per domain

ACTIONS_PER_EXAMPLE = 20
EXAMPLES = int(os.environ.get("TAU2_FUZZ_EXAMPLES", "510"))
DOMAINS = ["mock", "airline", "retail", "telecom", "banking_knowledge"]


class Recipe:
    """A value too big or too deep for Hypothesis to print, built only when the action is sent."""

    def __init__(self, kind: str, size: int) -> None:
        self.kind, self.size = kind, size

    def __repr__(self) -> str:
        return f"Recipe({self.kind!r}, {self.size})"

    def build(self) -> object:
        if self.kind == "int":
            return 10**self.size
        if self.kind == "deep_json":
            return '{"a":' * self.size + "1" + "}" * self.size
        if self.kind == "long_digits":
            return '{"x": ' + "7" * self.size + "}"
        value: object = 1
        for i in range(self.size):
            value = {"k": value} if i % 2 else [value]
        return value


class Markup:
    """A call sent as ``<tool_call>`` JSON text (serialised at send time: it may hold recipes)."""

    def __init__(self, call: dict) -> None:
        self.call = call

    def __repr__(self) -> str:
        return f"Markup({self.call!r})"


def build(value: object) -> object:
    """The action with its recipes built (the drawn structures around them are shallow)."""
    if isinstance(value, Recipe):
        return value.build()
    if isinstance(value, Markup):
        try:
            return f"<tool_call>{json.dumps(build(value.call), default=str)}</tool_call>"
        except (ValueError, RecursionError):
            return "<tool_call>{</tool_call>"
    if isinstance(value, dict):
        return {build(k): build(v) for k, v in value.items()}
    if isinstance(value, list):
        return [build(v) for v in value]
    return value


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.sampled_from(
        [Recipe("int", 5000), Recipe("int", 4301), 2**64, "9**9**9", "9**9**7", "' OR 1=1", "\x00", "\u202e"]
    ),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
deep_values = st.integers(min_value=90, max_value=6000).map(lambda n: Recipe("deep", n))


def _names(domain: str) -> list[str]:
    dom = load_domain(domain)
    names = list(dom.agent_toolkit.tool_names)
    if dom.user_toolkit is not None:
        names += list(dom.user_toolkit.tool_names)
    return names


def _arguments(tool_names: list[str]):
    keys = st.sampled_from(
        [
            "user_id",
            "reservation_id",
            "order_id",
            "expression",
            "passengers",
            "phone_number",
            "query",
            "agent_tool_name",
            "arguments",
            "pattern",
            "apn_settings",
            "item_ids",
            "self",
            "name",
            "tool_name",
            "requestor",
            "__class__",
        ]
    )
    as_dict = st.dictionaries(st.one_of(keys, st.text(max_size=6)), st.one_of(json_values, deep_values), max_size=4)
    as_text = st.one_of(
        st.text(max_size=40),
        st.sampled_from(
            [
                Recipe("deep_json", 3000),
                Recipe("long_digits", 4400),
                "[1, 2]",
                "null",
                '{"expression": "9**9**9"}',
                "{",
                "",
            ]
        ),
    )
    return st.one_of(as_dict, as_text, json_values, st.none())


def _call(tool_names: list[str]):
    name = st.one_of(
        st.sampled_from(tool_names),
        st.sampled_from(tool_names).map(lambda n: f" {n} "),
        st.sampled_from(
            [
                "__init__",
                "__class__",
                "__bool__",
                "db",
                "use_tool",
                "env_function",
                "",
                None,
                "done",
                "transfer_to_human_agents",
            ]
        ),
        st.text(max_size=12),
        st.integers(),
    )
    return st.fixed_dictionaries({"name": name, "arguments": _arguments(tool_names)}) | st.fixed_dictionaries(
        {
            "id": st.one_of(st.none(), st.text(max_size=5), json_values),
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": name, "arguments": _arguments(tool_names)}),
        }
    )


def _action(tool_names: list[str]):
    call = _call(tool_names)
    markup = st.builds(lambda c: Markup(c), call)
    return st.one_of(
        st.text(max_size=60),
        markup,
        call,
        st.lists(call, min_size=0, max_size=4),
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["assistant", "user", None, "tool"]),
                "content": st.one_of(st.none(), st.text(max_size=30), json_values),
                "tool_calls": st.one_of(st.none(), st.lists(call, max_size=3), json_values),
            }
        ),
        json_values,
        deep_values,
    )


@pytest.mark.parametrize("domain", DOMAINS)
def test_no_action_raises_out_of_step(domain):
    env = gym.make(f"tau2/{domain}-v0", user=ScriptedUser(["hello"], then="ok"))
    env.reset(seed=0)
    done = {"actions": 0, "episodes": 0}

    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(st.lists(_action(_names(domain)), min_size=ACTIONS_PER_EXAMPLE, max_size=ACTIONS_PER_EXAMPLE))
    def run(actions):
        for action in actions:
            obs, reward, term, trunc, info = env.step(build(action))  # must not raise
            done["actions"] += 1
            assert isinstance(obs, list) and isinstance(reward, float)
            if term or trunc:
                json.dumps(info["simulation_run"], default=json_default)
                done["episodes"] += 1
                env.reset()

    run()
    assert done["actions"] >= min(10_000, EXAMPLES * ACTIONS_PER_EXAMPLE)
    print(f"{domain}: {done['actions']} actions, {done['episodes']} episodes")
