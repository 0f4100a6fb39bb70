"""The examples in docstrings run and print what they show (doctest), as Gymnasium's env docstrings do."""

from __future__ import annotations

import doctest
import importlib

import pytest

import tau2_gym  # noqa: F401 - registers the env ids the examples make

MODULES = ["tau2_gym.core.settings", "tau2_gym.envs.config", "tau2_gym.envs.tau2_env"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
