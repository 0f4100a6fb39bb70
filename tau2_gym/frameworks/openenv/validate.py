"""``openenv validate`` of a tau2-gym OpenEnv package against its served env, on this host.

OpenEnv 0.10's validation (``openenv.validation.run_validation``) builds the package's image with Docker and
runs OpenEnv's graders on the running container. Here a *local-process provider* stands in for Docker: it runs
the ``tau2-gym serve`` command of the package's ``Dockerfile`` (its ``CMD``) on a free local port with this
Python's tau2-gym -- no image is built, no isolation or resource limit is enforced, and the report says so
(provider ``local-process``). OpenEnv's own pipeline does the rest: the manifest's schema and policy bounds
(``static.manifest``), the runtime probe of ``validation/runtime.json`` over one WebSocket session, and the
runtime graders (``reward_well_formed``, ``observation_schema``, ``state_contract``), with OpenEnv's severity
policy.

OpenEnv 0.10 reserves but does not implement four checks that the manifest's validation block is about; they are
measured here against the same served env, under OpenEnv's check ids and policy:

* ``runtime.tool_declaration_accuracy``: the reset observation's tools are the declared tools;
* ``runtime.task_declaration_accuracy``: the Task API's splits and counts are the declared ones;
* ``semantic.oracle_max``: the oracle (every pool task played with its gold actions) scores at least
  ``max - oracle_tolerance`` on average;
* ``semantic.floor_gap``: the do-nothing policy's mean reward stays ``floor_margin`` below the maximum.

    python -m tau2_gym.frameworks.openenv.validate DIR [--level static|runtime|semantic] [--json] [--output FILE]
    python -m tau2_gym.frameworks.openenv.validate --play oracle|do-nothing --url URL --manifest openenv.yaml

Exit codes as ``openenv validate``: 0 pass or warn, 1 fail, 2 not a package, 3 internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import yaml
from openenv.validation import (
    CheckResult,
    CheckStatus,
    Lane,
    Level,
    ProviderCapability,
    SignatureError,
    UnsupportedPackageError,
    Verdict,
    apply_policy,
    load_policy,
    run_validation,
    write_report,
)
from openenv.validation.manifest import NormalizedManifest
from openenv.validation.providers import ExecResult, ProviderError, StartupError
from openenv.validation.runner import source_digest

from tau2_gym.envs.base import EpisodeEnv
from tau2_gym.episodes.baseline import DO_NOTHING_AGENT
from tau2_gym.frameworks.openenv.client import Tau2Client
from tau2_gym.players.agents.scripted import OracleAgent, make_agent

__all__ = [
    "LocalProcessProvider",
    "ServedPackage",
    "dockerfile_cmd",
    "measured_checks",
    "play",
    "served_env",
    "validate",
]

LEVELS = {"static": Level.STATIC, "runtime": Level.RUNTIME, "semantic": Level.SEMANTIC}
POLICIES = {"oracle": OracleAgent, "do-nothing": lambda: make_agent(DO_NOTHING_AGENT)}
MEASURED_RUNTIME = ("runtime.tool_declaration_accuracy", "runtime.task_declaration_accuracy")
MEASURED_SEMANTIC = ("semantic.oracle_max", "semantic.floor_gap")


# ---------------------------------------------------------------------------------------------- the served package


def dockerfile_cmd(package: Path) -> list[str]:
    """The package's ``tau2-gym serve`` command: the Dockerfile's last ``CMD``, in exec (JSON) form."""
    path = Path(package) / "Dockerfile"
    cmd: Optional[list] = None
    for line in path.read_text().splitlines():
        if line.strip().upper().startswith("CMD "):
            try:
                cmd = json.loads(line.strip()[4:])
            except ValueError:
                cmd = None
    if not (isinstance(cmd, list) and cmd[:2] == ["tau2-gym", "serve"] and all(isinstance(a, str) for a in cmd)):
        raise ValueError(f'{path}: its CMD is not a `tau2-gym serve` command in exec form (["tau2-gym", "serve", ...])')
    return cmd


def _serve_args(cmd: list[str]) -> list[str]:
    """``cmd``'s serve arguments without its ``--host`` / ``--port`` (the local run picks its own)."""
    out, skip = [], False
    for arg in cmd[2:]:
        if skip:
            skip = False
        elif arg in ("--host", "--port"):
            skip = True
        elif not arg.startswith(("--host=", "--port=")):
            out.append(arg)
    return out


class ServedPackage:
    """The package's serve command running on 127.0.0.1 (a free port) in a child process, for as long as the
    ``with`` block lasts."""

    def __init__(self, serve_args: list[str], timeout: float = 120.0) -> None:
        self.serve_args = serve_args
        self.timeout = timeout
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""
        self.output: list[str] = []

    def __enter__(self) -> ServedPackage:
        argv = [sys.executable, "-m", "tau2_gym.cli", "serve", *self.serve_args, "--host", "127.0.0.1", "--port", "0"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + self.timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            match = re.search(r"serving \S+ at (http://127\.0\.0\.1:\d+)", line)
            if match:
                self.url = match.group(1)
                return self
        self.__exit__()
        raise StartupError("the serve command did not start: " + "".join(self.output)[-2000:])

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class _RunningServer:
    """OpenEnv's ``RunningSubject`` for a :class:`ServedPackage` (the validator owns the process: ``stop`` leaves it
    running until the measured checks are done)."""

    def __init__(self, served: ServedPackage) -> None:
        self.served = served
        self.base_url = served.url

    def inspect(self) -> dict:
        return {
            "provider": LocalProcessProvider.name,
            "note": "no image built: the Dockerfile's CMD runs on this host, without isolation or resource limits",
            "argv": ["tau2-gym", "serve", *self.served.serve_args],
            "pid": None if self.served.proc is None else self.served.proc.pid,
        }

    def logs(self, max_bytes: int = 65536) -> str:
        return "".join(self.served.output)[-max_bytes:]

    def exec(self, argv: list[str], timeout_s: float) -> ExecResult:  # noqa: ARG002 - OpenEnv's running-server interface
        raise ProviderError("the local-process provider has no sandbox to exec in")

    def stop(self) -> None:
        pass


class LocalProcessProvider:
    """OpenEnv's ``ValidationProvider`` backed by a :class:`ServedPackage` instead of a container."""

    name = "local-process"
    capabilities = frozenset({ProviderCapability.IMAGE_BUILD})
    supported_network_modes = frozenset({"public"})

    def __init__(self, served: ServedPackage) -> None:
        self.served = served

    def build(self, root: Path, execution: Any) -> str:  # noqa: ARG002 - OpenEnv's ValidationProvider interface
        return "sha256:" + source_digest(Path(root))  # the package's content, as the image's would be

    def start(self, spec: Any) -> _RunningServer:  # noqa: ARG002 - OpenEnv's ValidationProvider interface
        return _RunningServer(self.served)


# ---------------------------------------------------------------------------------------------- playing policies


def served_env(package_manifest: Path | str) -> tuple[str, dict[str, Any]]:
    """The env id and ``gym.make`` arguments a package serves (its manifest's ``tau2_gym`` block)."""
    raw = yaml.safe_load(Path(package_manifest).read_text())
    block = raw.get("tau2_gym") if isinstance(raw, dict) else None
    if not (isinstance(block, dict) and isinstance(block.get("env_id"), str)):
        raise ValueError(
            f"{package_manifest}: no tau2_gym block naming the served env (tau2-gym serve --write-manifest)"
        )
    return block["env_id"], dict(block.get("env_kwargs") or {})


async def play(
    url: str,
    policy: str,
    env_id: str,
    env_kwargs: Optional[dict[str, Any]] = None,
    token: Optional[str] = None,
    sessions: int = 4,
) -> dict[str, float]:
    """``policy`` (``oracle`` or ``do-nothing``) on every task of the served pool (the Task API's first split),
    seed 0, over ``sessions`` concurrent WebSocket sessions: the reward per task. The env is made here too, to
    read the tasks' gold (the oracle's plan), with the offline customer -- never asked anything: the episodes run
    on the server."""
    offline: dict[str, Any] = {**(env_kwargs or {}), "user": "oracle"}
    env = gym.make(env_id, **offline).unwrapped
    if not isinstance(env, EpisodeEnv):
        raise ValueError(f"{env_id} is not a tau2-gym env: its tasks' gold cannot be read")
    info = {"solo": bool(env.config.solo), "domain": env.config.domain}
    probe = Tau2Client(url, token=token)
    async with probe:
        pool = (await probe.list_splits())[0]["name"]
        ids = [t["id"] for t in await probe.list_tasks(pool)]
    queue = iter(ids)
    rewards: dict[str, float] = {}

    async def worker() -> None:
        async with Tau2Client(url, token=token) as client:
            for task_id in queue:
                agent = POLICIES[policy]()
                agent.reset(env.task_by_id(task_id), info)
                result = await client.reset(task_id=task_id, seed=0)
                while not result.done:
                    result = await client.step(agent.act(result.observation.messages, info))
                rewards[task_id] = float(result.reward or 0.0)

    await asyncio.gather(*(worker() for _ in range(min(sessions, len(ids)))))
    return {i: rewards[i] for i in ids}


# ---------------------------------------------------------------------------------------------- measured checks


def _result(check_id: str, problems: list[str], measured: dict, started: float, fix: str) -> CheckResult:
    return CheckResult(
        check_id=check_id,
        status=CheckStatus.FAIL if problems else CheckStatus.PASS,
        measured=measured,
        evidence=problems or ["measured against the served env: the declaration holds"],
        remediation=fix if problems else None,
        duration_s=time.monotonic() - started,
    )


async def _measure(
    url: str, manifest: NormalizedManifest, env: tuple[str, dict[str, Any]], level: Level
) -> list[CheckResult]:
    caps, reward = manifest.capabilities, manifest.reward
    fix = "regenerate the manifest: tau2-gym serve ... --write-manifest openenv.yaml (or --write-space)"
    out = []
    started = time.monotonic()
    client = Tau2Client(url)
    async with client:
        tools = sorted(t["function"]["name"] for t in (await client.reset(task_index=0, seed=0)).observation.tools)
        splits = [s["name"] for s in await client.list_splits()]
        counts = {s: await client.num_tasks(s) for s in splits}
    declared = sorted(caps.declared_tools)
    problems = [] if tools == declared else [f"declared {declared}, the reset observation offers {tools}"]
    out.append(_result(MEASURED_RUNTIME[0], problems, {"tools": tools}, started, fix))
    started = time.monotonic()
    problems = [] if counts == caps.declared_task_count else [f"declared {caps.declared_task_count}, served {counts}"]
    out.append(_result(MEASURED_RUNTIME[1], problems, {"task_count": counts}, started, fix))
    if level < Level.SEMANTIC:
        return out
    high = reward.range[1]
    started = time.monotonic()
    oracle = await play(url, "oracle", *env)
    mean = sum(oracle.values()) / len(oracle)
    below = sorted(i for i, r in oracle.items() if r < high)
    problems = (
        []
        if mean >= high - reward.oracle_tolerance - 1e-9
        else [f"oracle mean {mean:.4f} < max {high} - oracle_tolerance {reward.oracle_tolerance}"]
    )
    measured = {
        "oracle_reward": mean,
        "tasks": len(oracle),
        "below_max": below[:20],
        "declared": reward.oracle_tolerance,
    }
    out.append(_result(MEASURED_SEMANTIC[0], problems, measured, started, fix))
    started = time.monotonic()
    floor = await play(url, "do-nothing", *env)
    mean = sum(floor.values()) / len(floor)
    problems = (
        []
        if high - mean >= reward.floor_margin - 1e-9
        else [f"max {high} - do-nothing mean {mean:.4f} < floor_margin {reward.floor_margin}"]
    )
    measured = {"floor_reward": mean, "tasks": len(floor), "declared": reward.floor_margin}
    out.append(_result(MEASURED_SEMANTIC[1], problems, measured, started, fix))
    return out


def measured_checks(
    url: str, manifest: NormalizedManifest, env: tuple[str, dict[str, Any]], level: Level
) -> list[CheckResult]:
    """The four checks OpenEnv 0.10 reserves without a grader, measured against the env served at ``url``
    (``env``: its id and ``gym.make`` arguments); the semantic two only at ``level`` semantic."""
    return asyncio.run(_measure(url, manifest, env, level))


def validate(package: Path | str, level: str = "semantic") -> Any:
    """OpenEnv's validation of ``package`` up to ``level``, its env served on this host, with the measured checks:
    OpenEnv's report (``ValidationReportV2`` at the runtime and semantic levels)."""
    package, max_level = Path(package), LEVELS[level]
    if max_level < Level.RUNTIME:
        return run_validation(package, max_level=max_level)
    serve_args = _serve_args(dockerfile_cmd(package))
    env = served_env(package / "openenv.yaml")
    with ServedPackage(serve_args) as served:
        report = run_validation(package, max_level=max_level, provider=LocalProcessProvider(served))
        started = {r.check_id: r.status for r in report.results}.get("runtime.startup")
        if report.manifest is None or started is not CheckStatus.PASS:
            return report
        ours = measured_checks(served.url, report.manifest, env, max_level)
    ids = {r.check_id for r in ours}
    results = [r for r in report.results if r.check_id not in ids] + ours
    verdict = apply_policy(results, load_policy(report.policy_version), Lane.LOCAL)
    return report.model_copy(update={"results": results, "verdict": verdict})


def render(report: Any) -> str:
    lines = [f"Validation report for {report.target} (policy {report.policy_version})"]
    for r in report.results:
        lines.append(f"  {r.status.value.upper():5s} {r.check_id}")
        if r.status is not CheckStatus.PASS:
            lines += [f"          {e}" for e in r.evidence]
            if r.remediation:
                lines.append(f"          remediation: {r.remediation}")
    lines.append(f"Verdict: {report.verdict.value.upper()}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tau2_gym.frameworks.openenv.validate", description=__doc__)
    parser.add_argument("package", nargs="?", help="the package folder (tau2-gym serve ... --write-space DIR)")
    parser.add_argument("--level", choices=list(LEVELS), default="semantic")
    parser.add_argument("--json", action="store_true", help="print OpenEnv's JSON report")
    parser.add_argument("--output", default=None, help="also write the JSON report to this file")
    parser.add_argument("--play", choices=list(POLICIES), help="play a policy on the pool of the server at --url")
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=None, help="bearer token of the server at --url")
    parser.add_argument("--manifest", default="openenv.yaml", help="with --play: the served env's openenv.yaml")
    args = parser.parse_args(argv)
    if args.play:
        rewards = asyncio.run(play(args.url, args.play, *served_env(args.manifest), token=args.token))
        print(json.dumps({"policy": args.play, "mean": sum(rewards.values()) / len(rewards), "rewards": rewards}))
        return 0
    if not args.package:
        parser.error("give the package folder, or --play with --url")
    try:
        report = validate(args.package, args.level)
    except (SignatureError, UnsupportedPackageError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    payload = write_report(report, Path(args.output) if args.output else None)
    print(payload if args.json else render(report))
    return 1 if report.verdict is Verdict.FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
