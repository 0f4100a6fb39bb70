"""The env's fast paths give exactly what the plain code they shortcut gives.

Each hot-path shortcut (cached timestamp prefixes, the flat-dict JSON encoder, the scanner-direct argument
decoding, the collapsed tool dispatch, the unparsed replay check, deferred episode records, reused vector
infos) is compared here with the straightforward computation on inputs chosen to hit its edges.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import time
from datetime import datetime, timedelta

import gymnasium as gym
import numpy as np
import pytest

from tau2_gym import load_domain
from tau2_gym.core import messages as msgs
from tau2_gym.core.environment import Environment, _parsed, _same_content
from tau2_gym.core.actions import _loads
from tau2_gym.core.messages import ToolCall, dumps_arguments, now_iso
from tau2_gym.core.records import Record
from tau2_gym.core.orchestrator import Clock
from tau2_gym.players.users.scripted import ScriptedUser


@pytest.fixture
def fake_clock(monkeypatch):
    """``time.time_ns`` returning the readings pushed into the returned list (in order)."""
    readings: list[int] = []
    monkeypatch.setattr(time, "time_ns", lambda: readings.pop(0))
    monkeypatch.setattr(msgs, "_second", (None, "", 0))
    return readings


def _reference_iso(ns: int, timespec: str = "auto") -> str:
    sec, us = divmod(ns // 1000, 1_000_000)
    return (datetime.fromtimestamp(sec) + timedelta(microseconds=us)).isoformat(timespec=timespec)


@pytest.fixture(params=["UTC", "Europe/Berlin", "America/St_Johns"])
def local_zone(request):
    """Local time zones with and without DST (and a half-hour offset); restored afterwards."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is not available")
    old = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    yield request.param
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def _instants() -> list[int]:
    """Nanosecond readings: whole seconds (zero microseconds), sub-microsecond parts, both DST switches of 2024
    in Berlin (the repeated hour included), and a run inside one second."""
    base = [1_700_000_000_000_000_000, 1_700_000_000_000_000_999, 1_700_000_000_123_456_789]
    dst = []
    for switch in (1_711_846_800, 1_729_990_800):  # 2024-03-31 01:00 UTC, 2024-10-27 01:00 UTC
        for d in (-3601, -1, 0, 1, 1800, 3599, 3600, 3601):
            dst.append((switch + d) * 10**9 + 250_000_000)
    run = [1_700_000_005 * 10**9 + k * 37_000 for k in range(50)]
    return base + dst + run


def test_now_iso_is_datetime_now_isoformat(fake_clock, local_zone):
    for ns in _instants():
        fake_clock.append(ns)
        assert now_iso() == _reference_iso(ns), (local_zone, ns)


def test_now_iso_follows_the_real_clock():
    before = datetime.now().isoformat(timespec="microseconds")
    stamp = now_iso()
    after = datetime.now().isoformat(timespec="microseconds")
    assert before[:19] <= stamp[:19] <= after[:19]
    assert datetime.fromisoformat(stamp)


class _ReferenceClock:
    """The plain version of Clock: datetimes compared and bumped by 1 µs."""

    def __init__(self) -> None:
        self.last = None

    def at(self, when: datetime) -> str:
        if self.last is not None and when <= self.last:
            when = self.last + timedelta(microseconds=1)
        self.last = when
        return when.isoformat(timespec="microseconds")


def test_clock_stamps_are_strictly_increasing_local_times(fake_clock, local_zone):
    clock, ref = Clock(), _ReferenceClock()
    readings = _instants()
    readings += [readings[-1]] * 3 + [readings[-1] - 5_000] + [readings[-1] + 10**9 - 1]  # stalls, a step back
    # stamps bumped past the clock across a second boundary, then across a DST switch (2025-10-26 01:00 UTC);
    # later than every reading above, so the bumps start from these readings
    readings += [1_750_000_007 * 10**9 + 999_998_000] * 4 + [(1_761_440_400 - 1) * 10**9 + 999_999_000] * 3
    history_start = datetime.fromtimestamp(readings[0] // 10**9) - timedelta(seconds=3)
    for i in range(3):  # task history stamps come through at()
        assert clock.at(history_start + timedelta(seconds=i)) == ref.at(history_start + timedelta(seconds=i))
    for ns in readings:
        fake_clock.append(ns)
        sec, us = divmod(ns // 1000, 1_000_000)
        expected = ref.at(datetime.fromtimestamp(sec) + timedelta(microseconds=us))
        assert clock.now() == expected, (local_zone, ns)


FLAT_AND_NESTED = [
    {}, {"a": 1}, {"a": "é\u2028\"\\x\n"}, {"user_id": "mia_li_3668", "n": None, "ok": True, "f": 2.5},
    {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "neg0": -0.0, "big": 10**40, "tiny": 1e-300},
    {1: "int key", 2.5: "float key", None: "none key", False: "bool key"},
    {"a": [1, {"b": 2}]}, {"t": (1, 2)}, {"d": {"x": [None]}},
]


@pytest.mark.parametrize("args", FLAT_AND_NESTED, ids=range(len(FLAT_AND_NESTED)))
def test_dumps_arguments_is_json_dumps(args):
    assert dumps_arguments(args) == json.dumps(args)


class _Odd:
    pass


def _circular() -> dict:
    d: dict = {"a": 1}
    d["self"] = d
    return d


@pytest.mark.parametrize("bad", [{(1,): 1}, {"a": {1, 2}}, {"a": _Odd()}, _circular(), {"a": [_Odd()]}],
                         ids=["tuple key", "set value", "object value", "circular", "nested object"])
def test_dumps_arguments_fails_as_json_dumps(bad):
    with pytest.raises(Exception) as expected:
        json.dumps(bad)
    with pytest.raises(type(expected.value)) as got:
        dumps_arguments(bad)
    assert str(got.value) == str(expected.value)


TEXTS = ['{"a": 1}', '{"a":1,"b":[1,2.5,null,true]}', ' {"a": 1}', '{"a": 1} ', '{"a": 1}\n', '{"a": 1} x',
         '{"a": 1}{"b": 2}', '\ufeff{}', '{bad', '[1, 2]', '"s"', "NaN", "-Infinity", '{"a": 1, "a": 2}', "1", "",
         "   ", "nul", '{"a": "\\ud800"}', '{"a": "\\u00e9"}', "[" * 5000 + "]" * 5000]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_argument_decoding_is_json_loads(text):
    try:
        expected = ("ok", json.loads(text))
    except Exception as exc:  # noqa: BLE001
        expected = ("error", type(exc), str(exc))
    try:
        got = ("ok", _loads(text))
    except Exception as exc:  # noqa: BLE001
        got = ("error", type(exc), str(exc))
    assert repr(got) == repr(expected)


CONTENTS = [None, "", "plain text", '{"a": 1}', '{"a": 1, "b": [1, 2]}', "NaN", '{"x": NaN}', "[Infinity]",
            "BaNaNa", '"NaN"', 5]


@pytest.mark.parametrize("a", CONTENTS, ids=range(len(CONTENTS)))
@pytest.mark.parametrize("b", CONTENTS + ['{"b": [1, 2], "a": 1}', '{"a":1}'], ids=range(len(CONTENTS) + 2))
def test_replay_output_check_is_the_parsed_comparison(a, b):
    assert _same_content(a, b) == (not (_parsed(a) != _parsed(b)))


CALL_ARGS = [{}, {"name": 1}, {"self": 1}, {"tool_name": 1}, {"requestor": "user"}, {"kwargs": 1}, {5: 1},
             {"x": 1, 5: 1}, [1, 2], None]


@pytest.mark.parametrize("domain", ["mock", "airline", "telecom"])
@pytest.mark.parametrize("solo", [False, True])
def test_direct_tool_dispatch_answers_as_the_dispatch_chain(domain, solo):
    dom = load_domain(domain)
    if solo and not dom.spec.solo_supported:
        pytest.skip("no solo mode")
    fast = dom.make_environment(solo=solo)
    plain = dom.make_environment(solo=solo)
    plain._direct_dispatch = False  # as when a subclass overrides the chain: every call takes it
    assert fast._direct_dispatch
    names = list(fast.tools.tool_names)[:4] + (list(fast.user_tools.tool_names)[:2] if fast.user_tools else [])
    names += ["no_such_tool", "", ["unhashable"]]
    for name in names:
        for args in CALL_ARGS:
            for requestor in ("assistant", "user", "bogus"):
                call = ToolCall(name, args, id="x", requestor=requestor)  # type: ignore[arg-type]
                a, b = fast.get_response(call), plain.get_response(call)
                assert (a.content, a.error, a.requestor, a.id) == (b.content, b.error, b.requestor, b.id), \
                    (name, args, requestor)
    assert fast.get_db_hash() == plain.get_db_hash()
    assert fast.get_user_db_hash() == plain.get_user_db_hash()


def test_an_overridden_dispatch_chain_is_always_used():
    class Counting(Environment):
        def make_tool_call(self, tool_name, requestor="assistant", **kwargs):
            self.seen.append(tool_name)
            return super().make_tool_call(tool_name, requestor, **kwargs)

    dom = load_domain("mock")
    env = Counting(domain_name="mock", policy="", tools=dom.spec.agent_toolkit(dom.base_db.new_state()), domain=dom)
    env.seen = []
    assert not env._direct_dispatch
    assert not env.get_response(ToolCall("get_users", {}, id="1")).error
    assert env.seen == ["get_users"]


def test_tool_results_are_stamped_now_unless_the_caller_stamps_them():
    env = load_domain("mock").make_environment()
    before = now_iso()
    assert before <= env.get_response(ToolCall("get_users", {}, id="1")).timestamp <= now_iso()
    assert env.get_response(ToolCall("get_users", {}, id="1"), timestamp="").timestamp == ""


def test_a_deferred_record_reads_builds_and_pickles_like_a_plain_one():
    calls = []

    def build():
        calls.append(1)
        return {"a": 1, "b": [1, 2]}

    rec = Record.deferred(build)
    assert calls == []
    assert rec == Record({"a": 1, "b": [1, 2]}) and rec["a"] == 1 and list(rec) == ["a", "b"] and len(rec) == 2
    assert calls == [1]
    assert rec.to_dict() is rec.data
    for clone in (pickle.loads(pickle.dumps(rec)), copy.copy(rec), copy.deepcopy(rec)):
        assert type(clone) is Record and clone == rec and clone.data == rec.data
    assert calls == [1]
    plain = Record({"x": None})
    assert pickle.loads(pickle.dumps(plain)) == plain


def test_the_episode_record_is_the_simulation_run_of_the_finished_episode():
    env = gym.make("tau2/mock-v0", user=ScriptedUser(["please help"], then="bye ###STOP###")).unwrapped
    env.reset(seed=0, options={"task_id": "create_task_1"})
    env.step({"name": "get_users", "arguments": {}})
    _, _, term, _, info = env.step("all done")
    assert term
    record = info["simulation_run"]
    eager = env.loop.simulation_run(info["reward_info"].data, messages=env.loop.messages())
    assert list(record) == list(eager)
    assert record.data == eager


def _run_vector(autoreset_mode: str) -> list:
    vec = gym.make_vec("tau2/mock-v0", num_envs=3, autoreset_mode=autoreset_mode,
                       user=ScriptedUser(["hi", ToolCall("no_such_tool", {}, id="u1"), "go on"],
                                         then="bye ###STOP###"))  # the user's failing call counts an error
    out = []
    _, infos = vec.reset(seed=1)
    out.append(infos)
    for k in range(8):
        actions = [{"name": "get_users", "arguments": {}} if (k + i) % 3 == 0 else "checking" for i in range(3)]
        out.append(vec.step(actions)[4])
    vec.close()
    return out


@pytest.mark.parametrize("autoreset_mode", ["NextStep", "SameStep"])
def test_vector_infos_after_the_users_turn_are_fresh_infos(autoreset_mode, monkeypatch):
    from tau2_gym.envs.vector import Tau2VectorEnv

    def fresh(self, slot, info):
        return slot._info()

    reused = _run_vector(autoreset_mode)
    monkeypatch.setattr(Tau2VectorEnv, "_refreshed_info", fresh)
    rebuilt = _run_vector(autoreset_mode)

    def same(a, b):
        if isinstance(a, dict):
            return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, np.ndarray):
            return a.dtype == b.dtype and a.shape == b.shape and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, Record):
            return a.data.keys() == b.data.keys() and all(
                k in ("id", "timestamp", "start_time", "end_time", "duration", "messages") or a[k] == b[k] for k in a)
        return a == b or (a is None and b is None)

    assert len(reused) == len(rebuilt)
    for a, b in zip(reused, rebuilt):
        assert same(a, b)
