"""Determinism across processes and hash seeds (README "Guarantees"): the same tasks, seed and actions give
the same trajectories, DB hashes and rewards in two fresh interpreters with different ``PYTHONHASHSEED``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # episodes in several processes

SCRIPT = r"""
import json, sys
from tau2_gym.runner.collect import collect

out = sys.argv[1]
for domain, ids in (("airline", ["0", "5", "8"]), ("retail", ["0", "3"]), ("telecom", None)):
    collect(None, "oracle", domain=domain, task_ids=ids, num_tasks=None if ids else 4, seed=3,
            output=f"{out}.{domain}.json", progress=False)
"""

VOLATILE = {"timestamp", "start_time", "end_time", "duration", "id", "info", "wall_time", "agent_cost", "user_cost"}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_same_trajectories_and_hashes_across_processes_and_hash_seeds(tmp_path):
    runs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        prefix = tmp_path / f"run{seed}"
        subprocess.run([sys.executable, "-c", SCRIPT, str(prefix)], env=env, check=True, timeout=300)
        runs.append(
            {
                d: json.loads((tmp_path / f"run{seed}.{d}.json").read_text())["simulations"]
                for d in ("airline", "retail", "telecom")
            }
        )
    a, b = runs
    for domain in a:
        assert len(a[domain]) == len(b[domain]) > 0
        assert _stable(a[domain]) == _stable(b[domain]), domain
        assert all(s["messages"] and s["reward_info"]["db_check"] is not None for s in a[domain])
