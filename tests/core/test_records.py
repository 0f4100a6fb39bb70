"""Records: a deferred record reads, compares, pickles and copies as the plain record it builds."""

from __future__ import annotations

import copy
import pickle

from tau2_gym.core.records import Record


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
