"""Corrupt caches heal, corrupt custom folders give one clear error, killed fetches leave nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_data_versions import INITIAL, V1, _leftovers, _source

pytestmark = pytest.mark.slow  # fetches into fresh caches in subprocesses

DB = "data/tau2/domains/mock/db.json"


def _env(cache: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TAU2_DATA_DIR", "TAU2_DATA_VERSION")}
    env.update(TAU2_GYM_CACHE=str(cache), TAU2_GYM_SOURCE=str(_source()), **extra)
    return env


HASH = (
    "from tau2_gym.core.domain import load_domain; e = load_domain('mock').make_environment(); "
    "print(e.get_db_hash(), e.get_user_db_hash())"
)


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    proc = _run(_env(cache), "-m", "tau2_gym.cli", "data", "fetch")
    assert proc.returncode == 0, proc.stderr
    return cache


def _fresh_cache(filled: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache, symlinks=True)
    return cache


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "delete", "policy_deleted"])
def test_a_damaged_cache_is_repaired_on_use_with_the_verified_hashes(filled, tmp_path, damage):
    cache = _fresh_cache(filled, tmp_path)
    folder = cache / V1.cache_name
    db = folder / DB
    if damage == "truncate":
        db.write_bytes(db.read_bytes()[:100])
    elif damage == "empty":
        db.write_bytes(b"")
    elif damage == "garbage":
        db.write_bytes(os.urandom(db.stat().st_size))
    elif damage == "delete":
        db.unlink()
    else:
        (folder / "data/tau2/domains/mock/policy.md").unlink()
    proc = _run(_env(cache), "-c", HASH)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "repaired the data cache" in proc.stderr
    assert tuple(proc.stdout.split()) == INITIAL["mock"]
    assert _leftovers(cache) == []


def test_data_fetch_repairs_instead_of_saying_ready_over_a_corrupt_cache(filled, tmp_path):
    cache = _fresh_cache(filled, tmp_path)
    (cache / V1.cache_name / "data/tau2/domains/mock/tasks.json").write_text("[{")
    proc = _run(_env(cache), "-m", "tau2_gym.cli", "data", "fetch")
    assert proc.returncode == 0 and "repaired the data cache" in proc.stderr, proc.stderr
    check = _run(_env(cache), "-m", "tau2_gym.cli", "data", "verify")
    assert check.returncode == 0 and "all" in check.stdout, check.stdout + check.stderr


def test_stale_fill_folders_of_killed_fetches_are_removed_by_the_next_fetch(filled, tmp_path):
    cache = _fresh_cache(filled, tmp_path)
    (cache / f".{V1.cache_name}-abc123" / "x").mkdir(parents=True)
    (cache / f".{V1.cache_name}-abc123" / "x" / "big").write_bytes(b"0" * 1000)
    (cache / V1.cache_name / ".complete").unlink()  # an unfinished cache: the next use fills it under the lock
    proc = _run(_env(cache), "-m", "tau2_gym.cli", "data", "fetch")
    assert proc.returncode == 0, proc.stderr
    assert _leftovers(cache) == []


def test_read_only_cache_is_one_error_naming_tau2_gym_cache(tmp_path):
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o500)
    try:
        if os.access(cache, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        proc = _run(_env(cache), "-m", "tau2_gym.cli", "data", "fetch")
    finally:
        cache.chmod(0o700)
    assert proc.returncode == 1 and "TAU2_GYM_CACHE" in proc.stderr and "Traceback" not in proc.stderr


def test_read_only_cache_file_in_place_of_the_folder(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    proc = _run(_env(blocker), "-m", "tau2_gym.cli", "data", "fetch")
    assert proc.returncode == 1 and "TAU2_GYM_CACHE" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _custom(tmp_path: Path) -> Path:
    src = _source()
    top = tmp_path / "checkout"
    shutil.copytree(src / "data" / "tau2" / "domains" / "mock", top / "data" / "tau2" / "domains" / "mock")
    shutil.copytree(src / "data" / "tau2" / "user_simulator", top / "data" / "tau2" / "user_simulator")
    shutil.copytree(src / "src" / "tau2", top / "src" / "tau2")
    return top


@pytest.mark.parametrize(
    "damage",
    ["db_garbage", "db_schema", "db_deleted", "tools_garbage", "policy_deleted", "tasks_truncated", "split_garbage"],
)
def test_a_damaged_custom_folder_is_one_error_naming_the_file_and_the_fix(tmp_path, damage):
    top = _custom(tmp_path)
    mock = top / "data" / "tau2" / "domains" / "mock"
    if damage == "db_garbage":
        (mock / "db.json").write_bytes(b"\x00\xff garbage")
        named = "db.json"
    elif damage == "db_schema":
        (mock / "db.json").write_text(json.dumps({"tasks": [1, 2, 3]}))
        named = "db.json"
    elif damage == "db_deleted":
        (mock / "db.json").unlink()
        named = "db.json"
    elif damage == "tools_garbage":
        (top / "src" / "tau2" / "domains" / "mock" / "tools.py").write_text("def broken(((\n")
        named = "src/tau2"
    elif damage == "tasks_truncated":
        text = (mock / "tasks.json").read_text()
        (mock / "tasks.json").write_text(text[: len(text) // 2])
        named = "tasks.json"
    elif damage == "split_garbage":
        (mock / "split_tasks.json").write_text("not json at all")
        named = "split_tasks.json"
    else:
        (mock / "policy.md").unlink()
        named = "policy.md"
    code = (
        "from tau2_gym.core.domain import load_domain\nfrom tau2_gym.data import DataError\n"
        "try:\n    d = load_domain('mock'); d.make_environment(); list(d.tasks()); d.splits()\n"
        "except DataError as exc:\n    print(exc)\n    assert exc.path and exc.problem and exc.fix, vars(exc)\n"
    )
    proc = _run(_env(tmp_path / "cache", TAU2_DATA_DIR=str(top / "data")), "-c", code)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stdout.strip()
    assert len(line.splitlines()) == 1 and named in line and "tau2-gym data verify" in line, line


@pytest.mark.parametrize("shape", ["empty", "file", "loop"])
def test_tau2_data_dir_at_an_empty_folder_a_file_or_a_symlink_loop_is_one_error(tmp_path, shape):
    target = tmp_path / "d"
    if shape == "empty":
        target.mkdir()
    elif shape == "file":
        target.write_text("x")
    else:
        os.symlink(tmp_path / "e", target)
        os.symlink(target, tmp_path / "e")
    proc = _run(_env(tmp_path / "cache", TAU2_DATA_DIR=str(target)), "-m", "tau2_gym.cli", "data", "path")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: data folder") and str(target) in proc.stderr


def test_a_data_error_from_any_command_is_one_line_and_the_traceback_needs_tau2_gym_debug(tmp_path):
    top = _custom(tmp_path)
    (top / "data" / "tau2" / "domains" / "mock" / "db.json").write_text("{")
    env = _env(tmp_path / "cache", TAU2_DATA_DIR=str(top / "data"))
    code = (
        "import sys\nfrom tau2_gym.cli import main\nfrom tau2_gym.core.domain import load_domain\n"
        "import tau2_gym.cli.data as d\nd.run = lambda args: load_domain('mock') and 0\n"
        "sys.exit(main(['data', 'path']))"
    )
    proc = _run(env, "-c", code)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: domain 'mock'") and "db.json" in proc.stderr
    debug = _run(dict(env, TAU2_GYM_DEBUG="1"), "-c", code)
    assert debug.returncode == 1 and "Traceback" in debug.stderr
