"""Warnings that point at the user's line.

A fixed ``stacklevel`` is wrong as soon as the call arrives through another path (``gym.make`` and its
wrappers, a vector env, the CLI), and the warning then names Gymnasium's code. :func:`warn` counts the frames
itself: the warning is attributed to the first caller outside tau2-gym, its domains and Gymnasium.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import warnings
from typing import Optional

_GYMNASIUM = importlib.util.find_spec("gymnasium")  # its folder, without importing it here
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../tau2_gym
_INTERNAL = tuple(
    os.path.join(p, "")
    for p in (
        _PACKAGE,
        os.path.join(os.path.dirname(_PACKAGE), "domains"),  # a source checkout: domains/ beside the package
        os.path.dirname(os.path.abspath(_GYMNASIUM.origin)) if _GYMNASIUM and _GYMNASIUM.origin else _PACKAGE,
    )
)


def caller_stacklevel(internal: tuple[str, ...] = _INTERNAL) -> int:
    """The ``stacklevel`` that makes a warning issued by the calling function name the first frame outside
    ``internal`` (tau2-gym, its domains, Gymnasium) and outside Python's import machinery."""
    here = inspect.currentframe()
    frame: Optional[object] = here.f_back.f_back if here is not None and here.f_back is not None else None
    level = 2  # frame: the caller of the function that calls this one
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(internal) and not filename.startswith("<frozen importlib"):
            return level
        frame = frame.f_back
        level += 1
    return 1


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the user's line (see the module docstring)."""
    warnings.warn(message, category, stacklevel=caller_stacklevel())
