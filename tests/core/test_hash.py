"""The DB hash is byte-identical to upstream's (reference §3.6) and the copy-on-write view never leaks."""

import hashlib
import json

from tau2_gym.core.db import BaseData, DBState, dump_hash, dumps_sorted


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
