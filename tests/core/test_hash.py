"""The DB hash is byte-identical to upstream's (reference §3.6) and the copy-on-write view never leaks."""

import hashlib
import json
import pickle
from typing import Any, Dict

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from tau2_gym.core import db as db_module
from tau2_gym.core.db import BaseData, DBSchema, DBState, dump_hash, dumps_sorted, merge_update
from tau2_gym.core.domain import load_domain


def test_hash_vector_matches_reference_digest():
    value = {"b": 1, "a": [1.0, "é", None, True]}
    assert dumps_sorted(value) == '{"a": [1.0, "\\u00e9", null, true], "b": 1}'
    assert dump_hash(value) == "77fabcf9d4b41173a47f54fd3fe06d0ffb709d675892b53e212d3b07219f1ab5"


def test_mock_initial_hashes_equal_verified_values(mock_domain):
    env = mock_domain.make_environment()
    assert env.get_db_hash() == "107f83a70b7bf4f616e283b0b0b8451346fe7681173398d4498a1ec15c5fdfc6"


def test_upstream_mock_user_db_hash(upstream_mock_domain):
    env = upstream_mock_domain.make_environment()
    assert env.get_user_db_hash() == "4cf3d22eed6962ba202c8738421d8a2286d2b5a0cad1372922c928be09ccbfac"


def _state(data, tables):
    return DBState(BaseData(data, tables))


def test_cached_serialisation_equals_full_dump_after_changes():
    base = BaseData({"t": {"b": {"x": 1}, "a": {"x": 2.5, "l": [1, "é"]}}, "other": [1, 2]}, ("t",))
    st = base.new_state()
    st.t.mut("a")["x"] = 3
    st.t["c"] = {"x": None}
    st.other.append(3)
    expected = hashlib.sha256(json.dumps(st.dump(), sort_keys=True, default=str).encode()).hexdigest()
    assert st.hash() == expected
    assert base.hash_from_scratch() == dump_hash(
        {"t": {"b": {"x": 1}, "a": {"x": 2.5, "l": [1, "é"]}}, "other": [1, 2]}
    )


def test_copy_on_write_keeps_base_and_other_episodes_untouched():
    base = BaseData({"t": {"a": {"v": [1]}}}, ("t",))
    before = base.hash_from_scratch()
    one, two = base.new_state(), base.new_state()
    one.t.mut("a")["v"].append(2)
    assert two.t["a"] == {"v": [1]}
    assert base.hash_from_scratch() == before
    assert not one.same_as(two)
    two.t.mut("a")["v"].append(2)
    assert one.same_as(two) and one.hash() == two.hash()


def test_same_as_ignores_touched_but_unchanged_records():
    base = BaseData({"t": {"a": {"v": 1}, "b": {"v": 2}}}, ("t",))
    one, two = base.new_state(), base.new_state()
    one.t.mut("a")
    assert one.same_as(two)
    one.t.mut("a")["v"] = 1.0  # int vs float changes the hash
    assert not one.same_as(two)
    assert one.hash() != two.hash()


def test_table_iteration_keeps_upstream_dict_order():
    base = BaseData({"t": {"z": {}, "a": {}}}, ("t",))
    st = base.new_state()
    st.t["m"] = {}
    st.t["z"] = {"new": True}
    assert list(st.t.keys()) == ["z", "a", "m"]
    del st.t["a"]
    assert list(st.t) == ["z", "m"] and len(st.t) == 2 and "a" not in st.t


# ------------------------------------------------------------------ fields copied on first access


def test_an_untouched_field_is_the_bases_and_its_first_access_gives_the_episode_its_own_copy():
    base = BaseData({"t": {"a": {"v": 1}}, "nested": {"data": {"r": {"v": [1]}}, "notes": ""}}, ("t",))
    one, two = base.new_state(), base.new_state()
    assert one.get_field("nested") is base.data["nested"] and one.untouched()
    assert one.hash() == base.hash_from_scratch() and one.same_as(two)
    mine = one.nested  # first access: a copy, kept from here on
    assert mine == base.data["nested"] and mine is not base.data["nested"] and one.nested is mine
    assert not one.untouched()
    mine["data"]["r"]["v"].append(2)
    assert base.data["nested"]["data"]["r"]["v"] == [1] and two.nested["data"]["r"]["v"] == [1]
    assert one.hash() == dump_hash(one.dump()) != two.hash() and not one.same_as(two)
    snapshot = one.copy()
    assert snapshot.nested == mine and snapshot.nested is not mine
    fresh = base.new_state().copy()
    assert fresh.untouched() and fresh.get_field("nested") is base.data["nested"]
    again = pickle.loads(pickle.dumps(one))
    assert again.hash() == one.hash() and again.nested == mine
    assert pickle.loads(pickle.dumps(base.new_state())).untouched()


def test_a_field_named_like_a_state_method_is_copied_when_the_state_is_made():
    base = BaseData({"hash": {"x": 1}, "dump": [1]}, ())
    st = base.new_state()
    assert st.hash == {"x": 1} and st.dump == [1] and st.hash is not base.data["hash"]


# ------------------------------------------------------------------ tau2's update_db, once per update


class _Table(BaseModel):
    data: Dict[str, Dict[str, Any]] = {}
    notes: str = ""


class _DB(BaseModel):
    model_config = ConfigDict(extra="forbid")
    users: _Table = _Table()
    accounts: _Table = _Table()
    rows: Dict[str, Dict[str, Any]] = {}


def _full_path(state: DBState, update: dict) -> DBState:
    """What ``updated`` does on a state something has touched: merge into the dump, validate, a new base."""
    return state.base.schema.build(merge_update(state.dump(), update)).new_state()


def test_an_update_on_an_untouched_state_is_built_once_per_update_and_equals_the_full_path():
    schema = DBSchema(_DB, tables=("rows",))
    base = schema.build({"users": {"data": {"u1": {"n": 1}}}, "accounts": {"data": {"a1": {"b": 5}}}, "rows": {}})
    update = {"users": {"data": {"u2": {"n": 2}}}}
    one, two = base.new_state().updated(update), base.new_state().updated(update)
    assert one.base is two.base is not base  # validated once; the states compare record by record
    assert one.hash() == _full_path(base.new_state(), update).hash()
    assert one.users["data"] == {"u1": {"n": 1}, "u2": {"n": 2}}
    assert one.base.data["accounts"] is base.data["accounts"]  # what the update left alone is shared
    assert one.base.data["users"] is not base.data["users"]
    assert base.new_state().updated({"users": {"data": {"u2": {"n": 2.0}}}}).base is not one.base  # 2.0 is not 2
    one.users["data"]["u2"]["n"] = 3  # an episode's change stays its own
    assert two.users["data"]["u2"] == {"n": 2} and one.base.data["users"]["data"]["u2"] == {"n": 2}
    touched = base.new_state()
    touched.accounts["data"]["a1"]["b"] = 6
    after = touched.updated(update)  # the full path: the change is kept
    assert after.base is not one.base and after.accounts["data"]["a1"] == {"b": 6}
    assert after.hash() == _full_path(touched, update).hash()
    with pytest.raises(ValidationError):
        base.new_state().updated({"nobody": 1})
    assert len(base._updates) == 2  # a failed update is not kept


def test_the_bases_an_update_keeps_are_bounded(monkeypatch):
    monkeypatch.setattr(db_module, "MAX_UPDATES", 3)
    base = DBSchema(_DB).build({})
    bases = [base.with_update({"rows": {str(i): {}}}) for i in range(5)]
    assert len(base._updates) == 3
    assert base.with_update({"rows": {"4": {}}}) is bases[4] and base.with_update({"rows": {"0": {}}}) is not bases[0]


def test_every_banking_tasks_initialization_data_gives_the_full_paths_db():
    dom = load_domain("banking_knowledge")  # the domain whose tasks carry initialization data
    checked = 0
    for task in dom.tasks():
        init = task.initial_state.initialization_data if task.initial_state else None
        for side, data in (("tools", init and init.agent_data), ("user_tools", init and init.user_data)):
            if not data:
                continue
            state = getattr(dom.make_environment(), side).db
            assert state.updated(data).hash() == _full_path(state, data).hash(), (task.id, side)
            checked += 1
    assert checked >= 10
