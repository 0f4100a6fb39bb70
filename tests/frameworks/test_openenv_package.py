"""The OpenEnv package of a served env: ``openenv.yaml`` measured from the env, the Space ``Dockerfile``, and
OpenEnv's validation of both.

* the committed ``openenv.yaml`` (the default env's) is what the env measures today: a stale block fails here;
* the validation block is the env's facts: the oracle's and the do-nothing policy's rewards, tools, task
  counts, the judge (an LLM judge gives ``llm_judged`` and its pin, without being called);
* the Dockerfile, checked statically (no docker engine here): base image, install line, port, a ``CMD`` that
  ``tau2-gym serve``'s own parser reads back to the manifest's env; OpenEnv's ``push`` finds the files it needs;
* ``openenv validate`` (OpenEnv's CLI) passes the package statically and a running server by URL; OpenEnv's
  pipeline at ``--level semantic`` passes against the package's env served on a local port (a subprocess);
* a block the env no longer satisfies fails that validation.

Skipped without the ``openenv`` extra (``pip install tau2-gym[openenv]``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import gymnasium as gym
import pytest
from datautil import REPO

pytest.importorskip(
    "openenv.validation", reason="needs the openenv extra (OpenEnv 0.10): pip install tau2-gym[openenv]"
)

import yaml  # comes with the openenv extra
from openenv.cli._cli_utils import validate_env_structure
from openenv.validation import CheckStatus, Lane, Level, Verdict, apply_policy, load_policy
from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser

from tau2_gym.cli import main as cli_main
from tau2_gym.cli.serve import add_arguments, env_kwargs
from tau2_gym.episodes.baseline import do_nothing_baseline
from tau2_gym.frameworks.openenv import Tau2Server
from tau2_gym.frameworks.openenv.manifest import manifest_yaml, measure_facts, write_package
from tau2_gym.frameworks.openenv.validate import measured_checks

pytestmark = pytest.mark.slow  # servers in subprocesses

ROOT = REPO
OUR_CHECKS = (
    "static.manifest",
    "runtime.startup",
    "runtime.reward_well_formed",
    "runtime.observation_schema",
    "runtime.state_contract",
    "runtime.tool_declaration_accuracy",
    "runtime.task_declaration_accuracy",
    "semantic.oracle_max",
    "semantic.floor_gap",
)


def parse(text: str, tmp_path: Path):
    """The manifest as OpenEnv's parser reads it."""
    folder = tmp_path / "parsed"
    folder.mkdir(exist_ok=True)
    (folder / "openenv.yaml").write_text(text)
    return OpenEnvYamlParser().parse(folder)


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("space") / "tau2-airline-v0"
    write_package(out, "tau2/airline-v0")
    return out


# ---------------------------------------------------------------------------------------------- the manifest


def test_the_committed_manifest_is_what_the_default_env_measures():
    committed = files("tau2_gym.frameworks.openenv").joinpath("openenv.yaml").read_text()
    assert committed == manifest_yaml(measure_facts("tau2/airline-v0")), (
        "the committed openenv.yaml no longer matches the env: regenerate it with "
        "`tau2-gym serve --write-manifest tau2_gym/frameworks/openenv/openenv.yaml`"
    )


def test_the_validation_block_is_the_envs_facts(tmp_path):
    facts = measure_facts("tau2/airline-v0")
    m = parse(manifest_yaml(facts), tmp_path)
    env = gym.make("tau2/airline-v0").unwrapped
    floor = do_nothing_baseline(env.domain, env.tasks).mean
    assert 0 < floor < 1 and 0 <= (1 - floor) - m.reward.floor_margin < 0.01  # the gap, rounded down
    assert set(facts.oracle) == {t.id for t in env.tasks} and set(facts.oracle.values()) == {1.0}
    assert m.reward.range == (0.0, 1.0) and m.reward.oracle_tolerance == 0.0
    assert m.capabilities.declared_tools == sorted(t["function"]["name"] for t in env.tools)
    assert m.capabilities.declared_task_count == {s: len(env.domain.tasks(None, s)) for s in env.domain.splits(None)}
    assert m.capabilities.task_api and not m.capabilities.llm_judged and m.judge is None
    assert m.task_distribution.dataset_version == "tau2-bench==1.0.1"
    # the oracle that cannot reach the maximum shows in the tolerance: retail's NL-judged tasks, judged 'fail'
    retail = measure_facts("tau2/retail-v0", {"judge": "fail"})
    below = [r for r in retail.oracle.values() if r < 1]
    assert (
        below
        and parse(manifest_yaml(retail), tmp_path).reward.oracle_tolerance > len(below) / len(retail.oracle) - 0.01
    )


def test_an_llm_judge_is_declared_and_pinned_without_being_called(tmp_path):
    """The judge's endpoint is a closed port: measuring the manifest never asks it (the oracle's NL assertions
    count as passed, the floor's as failed)."""
    spec = "openai:judge-model,base_url=http://127.0.0.1:9/v1,api_key_env=NO_SUCH_KEY"
    m = parse(manifest_yaml(measure_facts("tau2/retail-v0", {"judge": spec})), tmp_path)
    assert m.capabilities.llm_judged and m.judge.model == "judge-model"
    assert m.judge.params["base_url"] == "http://127.0.0.1:9/v1" and "tau2-bench==1.0.1" in m.judge.version
    assert m.reward.variance_tolerance == 0.0 and m.reward.oracle_tolerance == 0.0


def test_write_manifest_prints_the_yaml_and_refuses_envs_without_one_oracle(capsys):
    assert cli_main(["serve", "--domain", "mock", "--write-manifest", "-"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["tau2_gym"] == {"env_id": "tau2/mock-v0", "env_kwargs": {}}
    assert cli_main(["serve", "tau2/mock-user-v0", "--write-manifest", "-"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: tau2/mock-user-v0: a manifest is measured for the agent-side")


# ---------------------------------------------------------------------------------------------- the Space


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile)
    return [tuple(line.split(None, 1)) for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_the_space_dockerfile_installs_the_package_and_runs_its_serve_command(tmp_path):
    kwargs = {"task_split": "test", "judge": "pass", "max_steps": 60}
    out = tmp_path / "space"
    write_package(out, "tau2/retail-v0", kwargs)
    manifest = yaml.safe_load((out / "openenv.yaml").read_text())
    steps = _instructions((out / "Dockerfile").read_text())
    kinds = [k for k, _ in steps]
    base = dict(steps)["FROM"]
    version = re.fullmatch(r"python:3\.(\d+)-slim", base)
    requires = re.search(r'requires-python = ">=3\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert version and int(version.group(1)) >= int(requires.group(1)), base
    copies = dict(arg.split() for k, arg in steps if k == "COPY")
    assert copies["tau2-gym"] == "/opt/tau2-gym/src"
    for name in ("pyproject.toml", "setup.py", "tau2_gym/__init__.py", "domains"):
        assert (out / "tau2-gym" / name).exists(), name
    install = dict(steps)["RUN"]
    assert (
        'pip install "/opt/tau2-gym/src[openenv]"' in install
        and "tau2-gym data fetch --version tau2-bench==1.0.1" in install
    )
    assert "openenv = [" in (out / "tau2-gym" / "pyproject.toml").read_text()  # the extra the install line names
    assert dict(steps)["USER"] != "root" and dict(steps)["EXPOSE"] == str(manifest["port"]) == "8000"
    assert kinds.index("USER") > kinds.index("RUN") and kinds[-1] == "CMD"
    cmd = json.loads(dict(steps)["CMD"])
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert cmd[:2] == ["tau2-gym", "serve"]
    args = parser.parse_args(cmd[2:])  # every flag exists (argparse exits on an unknown one)
    assert (args.env_id, args.host, args.port) == ("tau2/retail-v0", "0.0.0.0", 8000)
    assert env_kwargs(args) == kwargs == manifest["tau2_gym"]["env_kwargs"]
    assert not args.write_manifest and not args.write_space and not args.token  # it serves; the token is a secret
    # what `openenv push` requires of the folder, by its own check; the playground stays off (an API server)
    assert validate_env_structure(out) == ["Recommended directory missing: outputs/"]
    assert ("ENV", "ENABLE_WEB_INTERFACE=false") in steps
    assert yaml.safe_load((out / "README.md").read_text().split("---")[1])["sdk"] == "docker"
    with pytest.raises(ValueError, match="not empty"):
        write_package(out, "tau2/retail-v0", kwargs)


# ---------------------------------------------------------------------------------------------- openenv validate


def _openenv(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openenv.cli", *argv], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # two runs of OpenEnv's CLI: ~10 s of imports each
def test_openenv_cli_validates_the_package_and_the_running_server(package):
    static = _openenv("validate", str(package), "--level", "static", "--json")
    assert static.returncode == 0, static.stdout + static.stderr
    assert json.loads(static.stdout)["verdict"] == "pass"
    with Tau2Server("tau2/airline-v0", port=0) as server:
        served = _openenv("validate", "--url", server.url, "--json")
    assert served.returncode == 0 and json.loads(served.stdout)["passed"], served.stdout


@pytest.mark.slow  # a served env in a subprocess, 100 episodes over the wire
def test_openenv_validate_semantic_passes_against_the_served_package(package):
    """OpenEnv's pipeline up to the semantic level, the package's Dockerfile CMD served on a local port: every
    check OpenEnv 0.10 grades, and the four it reserves, pass; what it does not implement is skipped (a WARN)."""
    run = subprocess.run(
        [sys.executable, "-m", "tau2_gym.frameworks.openenv.validate", str(package), "--level", "semantic", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(run.stdout)
    status = {r["check_id"]: r["status"] for r in report["results"]}
    assert {c: status.get(c) for c in OUR_CHECKS} == {c: "pass" for c in OUR_CHECKS}
    assert set(status.values()) <= {"pass", "skip"} and report["verdict"] == "warn"
    startup = next(r for r in report["results"] if r["check_id"] == "runtime.startup")
    assert startup["measured"]["provider"] == "local-process"
    oracle = next(r for r in report["results"] if r["check_id"] == "semantic.oracle_max")
    assert oracle["measured"]["oracle_reward"] == 1.0 and oracle["measured"]["tasks"] == 50


def test_a_validation_block_the_env_no_longer_satisfies_fails(tmp_path):
    """Declarations the served env contradicts -- a tool gone, a split's count, an oracle tolerance and a floor
    margin it does not meet -- fail their checks, and the verdict under OpenEnv's policy is FAIL."""
    facts = measure_facts("tau2/mock-v0")
    text = manifest_yaml(facts)
    stale = yaml.safe_load(text)
    caps, reward = stale["validation"]["capabilities"], stale["validation"]["reward"]
    caps["declared_tools"] = caps["declared_tools"][1:]
    caps["declared_task_count"]["base"] += 1
    reward["oracle_tolerance"], reward["floor_margin"] = 0.0, 0.95  # the mock oracle fails 2 of 10 tasks
    manifest = parse(yaml.safe_dump(stale), tmp_path)
    good = parse(text, tmp_path)
    with Tau2Server("tau2/mock-v0", port=0) as server:
        results = measured_checks(server.url, manifest, ("tau2/mock-v0", {}), Level.SEMANTIC)
        fresh = measured_checks(server.url, good, ("tau2/mock-v0", {}), Level.SEMANTIC)
    assert {r.check_id: r.status for r in results} == {
        "runtime.tool_declaration_accuracy": CheckStatus.FAIL,
        "runtime.task_declaration_accuracy": CheckStatus.FAIL,
        "semantic.oracle_max": CheckStatus.FAIL,
        "semantic.floor_gap": CheckStatus.FAIL,
    }
    assert apply_policy(results, load_policy("v2"), Lane.LOCAL) is Verdict.FAIL
    assert all(r.status is CheckStatus.PASS for r in fresh), [r.evidence for r in fresh]
