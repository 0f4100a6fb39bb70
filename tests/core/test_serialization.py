"""Tool content serialisation: every example of reference §3.3."""

from datetime import date, datetime

import pytest

from tau2_gym.core.tools import AsModel, UnsupportedResult, to_content


@pytest.mark.parametrize(
    "value, content",
    [
        ("Transfer successful", "Transfer successful"),
        ("4.0", "4.0"),
        (5, '"5"'),
        (True, '"True"'),
        (None, "null"),
        ((1, 2), '["1", "2"]'),
        ({"a": 1, "b": [1, 2.0, False]}, '{"a": "1", "b": ["1", "2.0", "False"]}'),
        ({"é": "ü"}, '{"\\u00e9": "\\u00fc"}'),
        ({"b": 1, "a": 2}, '{"b": "1", "a": "2"}'),  # unsorted
        (AsModel({"n": 1, "f": 2.5, "d": None}), '{"n": 1, "f": 2.5, "d": null}'),  # model: numbers stay numbers
        ({"m": AsModel({"n": 1}), "k": 3}, '{"m": {"n": 1}, "k": "3"}'),  # model nested in a plain dict
        (AsModel({"when": datetime(2025, 1, 15, 10, 30)}), '{"when": "2025-01-15 10:30:00"}'),  # model path: str()
        ({"when": datetime(2025, 1, 15, 10, 30)}, '{"when": "2025-01-15T10:30:00"}'),  # plain path: isoformat
        ([date(2025, 2, 25)], '["2025-02-25"]'),
    ],
)
def test_content_matches_upstream_rules(value, content):
    assert to_content(value) == content


def test_unsupported_type_raises_like_upstream():
    with pytest.raises(UnsupportedResult, match="Unsupported type"):
        to_content({1, 2})
