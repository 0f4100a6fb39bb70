"""Shared fixtures. Data is the default version (tau2-bench==1.0.1) unless a test pins the legacy one.

``TAU2_UPSTREAM_DATA_DIR`` may point at a tau2-bench checkout's ``data/`` folder (e.g. the reference checkout
of the differential tests); without it, tests that need upstream task files use the verified cache of the
default version, which is the same data.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from datautil import LEGACY

from tau2_gym import load_domain
from tau2_gym.data import TAU2_BENCH_1_0_1, DataError, ensure

# Tests live in one folder per layer (tests/<layer>/test_*.py); a test module may use another's helpers by name
# (``from test_evaluation_cases import build_cases``), so every layer folder is importable, as the flat layout was.
for _folder in sorted(p for p in Path(__file__).parent.iterdir() if p.is_dir() and any(p.glob("test_*.py"))):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

#: pytest's exit status when the suite cannot start (its usage-error code)
NO_DATA_EXIT = 4


def pytest_configure(config: pytest.Config) -> None:
    """Most tests play tasks of the default data: without it, and without a way to fetch it, the suite stops here
    with one message naming the ways out, instead of hundreds of failures."""
    if config.option.collectonly:
        return
    try:
        ensure(TAU2_BENCH_1_0_1)
    except DataError as exc:
        pytest.exit(f"the test suite needs the tau2 data {TAU2_BENCH_1_0_1.name}: {exc}", returncode=NO_DATA_EXIT)


@pytest.fixture(scope="session")
def mock_domain():
    return load_domain("mock")


@pytest.fixture(scope="session")
def legacy_mock_domain():
    return load_domain("mock", data_version=LEGACY)


@pytest.fixture(scope="session")
def upstream_data_dir() -> Path:
    value = os.environ.get("TAU2_UPSTREAM_DATA_DIR")
    if value:
        return Path(value)
    return ensure(TAU2_BENCH_1_0_1) / "data"


@pytest.fixture(scope="session")
def upstream_mock_domain(upstream_data_dir):
    return load_domain("mock", upstream_data_dir)


@pytest.fixture(autouse=True)
def _own_llm_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own default LLM reply cache (``cache="auto"``): tests never share cached replies
    (a stub's request counts stay what the test sent) and never touch ~/.cache."""
    monkeypatch.setenv("TAU2_GYM_CACHE_DIR", str(tmp_path_factory.mktemp("llm-cache")))
