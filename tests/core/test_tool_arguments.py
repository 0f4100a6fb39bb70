"""How a tool receives its arguments: as sent, except that a pydantic model is taken as its JSON dump.

Upstream's model-typed parameters (``Passenger | dict``, ``APNSettings | dict``) accept a model from Python
callers. Every tool converts models on entry (:func:`plain_arguments`), whether it is called through the
environment, ``Toolkit.use_tool`` or directly; the caller's objects are never changed. Domain cases: airline
and telecom in test_airline.py / test_telecom.py, the environment path in test_environment.py.
"""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Optional

import pytest
from pydantic import BaseModel

from tau2_gym.core.tools import Toolkit, ToolType, plain_arguments, tool, toolkit_schemas


class Mode(str, Enum):
    A = "a"


class Inner(BaseModel):
    mode: Mode = Mode.A
    n: int = 1


class Outer(BaseModel):
    inner: Inner
    tags: list[str] = []


class Kit(Toolkit):
    @tool(ToolType.WRITE)
    def take(self, item: Outer | dict, extra: Optional[list] = None) -> dict:
        """Store an item.

        Args:
            item: The item.
            extra: More items.
        """
        self.seen = (item, extra)
        return {"item": item, "extra": extra}


def test_arguments_without_models_are_passed_as_the_very_objects_given():
    args = {"a": [1, {"b": (2, 3)}], "c": "x"}
    assert plain_arguments(args) is args
    item = {"k": [1]}
    kit = Kit()
    kit.take(item)
    assert kit.seen[0] is item


def test_models_anywhere_become_their_json_dumps_and_the_callers_objects_stay():
    model = Outer(inner=Inner(), tags=["t"])
    args = {"item": model, "extra": [Inner(n=2), ("x", Inner(n=3))]}
    before = {"item": model.model_copy(deep=True), "extra": list(args["extra"])}
    plain = plain_arguments(args)
    assert plain == {
        "item": {"inner": {"mode": "a", "n": 1}, "tags": ["t"]},
        "extra": [{"mode": "a", "n": 2}, ("x", {"mode": "a", "n": 3})],
    }
    assert args["item"] is model and args["item"] == before["item"] and args["extra"] == before["extra"]

    for run in (
        lambda k: k.take(model, extra=[Inner(n=2)]),
        lambda k: k.take(item=model, extra=[Inner(n=2)]),
        lambda k: k.use_tool("take", item=model, extra=[Inner(n=2)]),
    ):
        kit = Kit()
        out = run(kit)
        assert out == {"item": {"inner": {"mode": "a", "n": 1}, "tags": ["t"]}, "extra": [{"mode": "a", "n": 2}]}
    assert model == before["item"]


def test_a_tool_keeps_its_name_docstring_signature_and_marks():
    func = Kit._tool_funcs["take"]
    assert func.__name__ == "take" and func.__qualname__ == "Kit.take"
    assert func.__doc__.startswith("Store an item.")
    assert list(inspect.signature(func).parameters) == ["self", "item", "extra"]
    assert Kit.tool_names == ("take",) and Kit.mutates_state("take") and Kit.tool_type("take") is ToolType.WRITE
    schema = toolkit_schemas(Kit, None, None)[0]["function"]
    assert schema["name"] == "take" and list(schema["parameters"]["properties"]) == ["item", "extra"]


@pytest.mark.parametrize(
    "call, text",
    [
        (lambda k: k.take(), "Kit.take() missing 1 required positional argument: 'item'"),
        (lambda k: k.take({}, bogus=1), "Kit.take() got an unexpected keyword argument 'bogus'"),
        (lambda k: k.take({}, self=1), "Kit.take() got multiple values for argument 'self'"),
        (lambda k: k.take({}, [], 3), "Kit.take() takes from 2 to 3 positional arguments but 4 were given"),
    ],
)
def test_a_wrong_call_fails_with_the_tools_own_text(call, text):
    with pytest.raises(TypeError) as exc:
        call(Kit())
    assert str(exc.value) == text
