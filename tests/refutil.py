"""Helpers for differential tests that drive upstream tau2-bench as a subprocess.

Set TAU2_REFERENCE_PYTHON to the python of a venv with upstream tau2 installed (see
../shared/tools/setup_reference.sh); without it these tests are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REFERENCE_DIR = Path(__file__).parent / "reference"


def reference_python() -> str:
    py = os.environ.get("TAU2_REFERENCE_PYTHON")
    if not py:
        pytest.skip("TAU2_REFERENCE_PYTHON is not set (differential test against upstream tau2-bench)")
    if not Path(py).exists():
        pytest.fail(f"TAU2_REFERENCE_PYTHON={py!r} does not exist")
    return py


def run_reference(driver: str, jobs: list[dict[str, Any]], timeout: float = 1800) -> list[dict[str, Any]]:
    """Run ``tests/reference/<driver>.py`` under the reference python; return one result per job.

    Each result is ``{"ok": ...}`` or ``{"failed": traceback}``.
    """
    py = reference_python()
    env = dict(os.environ)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    proc = subprocess.run(
        [py, str(REFERENCE_DIR / f"{driver}.py")],
        input=json.dumps({"jobs": jobs}),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(REFERENCE_DIR),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"reference driver {driver} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)["results"]


def ok(result: dict[str, Any]) -> Any:
    if "failed" in result:
        raise AssertionError("reference job failed:\n" + result["failed"])
    return result["ok"]


def upstream_shaped(reward_info: Any) -> Any:
    """Our reward_info, checked to carry none of this package's diagnostics (the field-level DB diff sits beside
    it, in the simulation's info): what is left is compared with upstream's as it is."""
    info = reward_info.get("info") if isinstance(reward_info, dict) else None
    assert not (isinstance(info, dict) and ("db_diff" in info or "db_diff_truncated" in info)), info
    return reward_info
