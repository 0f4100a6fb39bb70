"""One ``describe()`` for every settings dataclass: a line per field with its value and its help text."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["describe"]


def describe(obj: Any) -> str:
    """``name = value  # help`` for each field of the dataclass ``obj`` (the help is the field's
    ``metadata["help"]``). A field named ``api_key`` shows ``'***'`` when set: printed settings end up in logs."""
    lines = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        shown = "'***'" if f.name == "api_key" and value else repr(value)
        lines.append(f"{f.name} = {shown}  # {f.metadata.get('help', '')}")
    return "\n".join(lines)
