"""The OpenEnv manifest (``openenv.yaml``) of a served env, and the package ``openenv validate`` and ``openenv push``
read -- the manifest's ``validation:`` block computed from the env's own facts, never typed in.

The facts (:func:`measure_facts`): the reward range [0, 1]; the oracle's mean reward over the served pool (the
task's gold actions, played by the one episode driver); the do-nothing baseline of the pool, the floor
(:mod:`tau2_gym.episodes.baseline`; a solo env: the do-nothing agent played by the env); the agent's tools; the task
count of every split of the served task set; the NL judge when one is configured (``llm_judged`` and its pin).
From them (:func:`manifest`):
``oracle_tolerance = 1 - oracle mean`` (rounded up to 0.01) and ``floor_margin = 1 - floor mean`` (rounded down),
so OpenEnv's semantic checks hold exactly when the env behaves as measured: ``oracle >= max - oracle_tolerance``
and ``max - floor >= floor_margin``. With an LLM judge the manifest is measured without calling it: the oracle's NL
assertions count as passed, the floor's as failed.

:func:`write_package` writes the directory both OpenEnv commands take: ``openenv.yaml``, a ``Dockerfile`` whose
``CMD`` is the ``tau2-gym serve`` command of the env, a Space ``README.md``, ``pyproject.toml``, ``client.py``, the
runtime probe (``validation/runtime.json``: a do-nothing episode, no gold in it), the oracle script and tau2-gym's
own source (the image installs it from there).
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import yaml

import tau2_gym
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.envs.user_env import UserEnv
from tau2_gym.episodes.baseline import DO_NOTHING_AGENT, do_nothing_baseline
from tau2_gym.frameworks.openenv.environment import LoadedEnv
from tau2_gym.players.agents.scripted import make_agent
from tau2_gym.scoring.judges import Judge

__all__ = [
    "CONTAINER_PORT",
    "EnvFacts",
    "manifest",
    "manifest_yaml",
    "measure_facts",
    "serve_argv",
    "write_package",
]

#: the port of the server inside the image (OpenEnv's and Hugging Face Spaces' convention)
CONTAINER_PORT = 8000
#: the image's Python (tau2-gym needs 3.10 or newer)
BASE_IMAGE = "python:3.11-slim"
#: the episode of the runtime probe: the do-nothing agent's messages (the customer ends the call after one)
PROBE_ACTIONS = 3
#: the env kwargs ``tau2-gym serve`` has a flag for (the others go through ``--env-arg KEY=JSON``)
_FLAGS = {
    "task_split": "--split",
    "user": "--user",
    "judge": "--judge",
    "reward_mode": "--reward-mode",
    "data_version": "--data-version",
}


@dataclass(frozen=True)
class EnvFacts:
    """What a served env is, measured: the inputs of its manifest's validation block."""

    env_id: str
    env_kwargs: dict[str, Any]
    name: str
    domain: str
    data_version: str
    pool_split: str
    task_counts: dict[str, int]
    tools: tuple[str, ...]
    oracle: dict[str, float] = field(repr=False)  # the oracle's reward per pool task
    floor: dict[str, float] = field(repr=False)  # the do-nothing reward per pool task
    judge: Optional[dict[str, Any]]  # the pin of an LLM judge (model, version, params), else None
    episode_timeout_s: float

    @property
    def oracle_mean(self) -> float:
        return sum(self.oracle.values()) / len(self.oracle)

    @property
    def floor_mean(self) -> float:
        return sum(self.floor.values()) / len(self.floor)


def _judge_pin(judge: Judge, data_version: str) -> Optional[dict[str, Any]]:
    """An LLM judge's pin: the model, tau2-gym's judge (prompt and parsing of ``data_version``) and the settings
    that decide its verdicts; None for the no-judge choices."""
    if getattr(judge, "skip", False):
        return None
    config = getattr(judge, "config", None)
    params: dict[str, Any] = {"kind": str(getattr(judge, "name", "judge")).partition(":")[0]}
    for key in ("base_url", "temperature", "seed", "top_p", "max_tokens", "dtype", "max_new_tokens"):
        value = getattr(config, key, None)
        if value is not None:
            params[key] = value
    return {
        "model": str(getattr(config, "model", None) or getattr(judge, "name", "judge")),
        "version": f"tau2-gym {tau2_gym.__version__} judge, {data_version}",
        "params": params,
    }


def _scripted_rewards(env: Any, agent: str) -> dict[str, float]:
    """A scripted agent's reward (``oracle``, ``give_up``, ...) on every task of the env's pool (seed 0), played by
    the env itself."""
    rewards: dict[str, float] = {}
    for task in env.tasks:
        obs, info = env.reset(seed=0, options={"task_id": task.id})
        player = make_agent(agent)
        player.reset(info["task"], info)
        terminated = truncated = False
        while not (terminated or truncated):  # an episode over at reset ends at the first step
            obs, reward, terminated, truncated, info = env.step(player.act(obs, info))
        rewards[task.id] = float(reward)
    return rewards


def measure_facts(env_id: str, env_kwargs: Optional[dict[str, Any]] = None) -> EnvFacts:
    """Load the env as ``tau2-gym serve`` would and measure its facts (the oracle and the floor are played with
    the offline oracle customer: an LLM customer or judge is never called)."""
    env_kwargs = dict(env_kwargs or {})
    loaded = LoadedEnv(env_id, env_kwargs)
    env = loaded.base
    if not isinstance(env, Tau2Env) or isinstance(env, UserEnv) or loaded.catalog is None:
        raise ValueError(
            f"{env_id}: a manifest is measured for the agent-side envs of one domain (tau2/<domain>-v0, "
            "tau2/<domain>-solo-v0); this env has no single oracle to measure"
        )
    cfg = env.config
    data_version = env.domain.source.version.name
    pin = _judge_pin(env.judge, data_version)
    offline: dict[str, Any] = dict(env_kwargs, user="oracle")
    if pin is not None:
        offline["judge"] = "pass"  # the oracle meets its NL assertions: no judge is asked to say so
    oracle = _scripted_rewards(gym.make(env_id, **offline).unwrapped, "oracle")
    if cfg.solo:  # the baseline module plays normal mode; a solo floor is the solo env's own (NL judged 'fail')
        solo: dict[str, Any] = (
            dict(env_kwargs, user="oracle", judge="fail") if pin is not None else dict(env_kwargs, user="oracle")
        )
        floor = _scripted_rewards(gym.make(env_id, **solo).unwrapped, DO_NOTHING_AGENT)
    else:
        floor = do_nothing_baseline(env.domain, env.tasks, reward_mode=cfg.reward_mode, judge=cfg.judge).rewards
    return EnvFacts(
        env_id=env_id,
        env_kwargs=env_kwargs,
        name=loaded.name,
        domain=cfg.domain,
        data_version=data_version,
        pool_split=loaded.catalog.pool_split,
        task_counts={split: len(tasks) for split, tasks in loaded.catalog.splits.items()},
        tools=tuple(sorted(t["function"]["name"] for t in env.tools)),
        oracle=oracle,
        floor=floor,
        judge=pin,
        episode_timeout_s=float(cfg.timeout) if cfg.timeout else 600.0,
    )


def _up(x: float) -> float:
    return max(0.0, math.ceil(round(x * 100, 6)) / 100)


def _down(x: float) -> float:
    return max(0.0, math.floor(round(x * 100, 6)) / 100)


def manifest(facts: EnvFacts) -> dict[str, Any]:
    """The ``openenv.yaml`` of the env (OpenEnv 0.10's schema 2: the validation block with its execution
    declaration)."""
    capabilities: dict[str, Any] = {
        "verifier": {"kind": "reward_channel"},
        "oracle": {"form": "script", "location": "validation/oracle.sh"},
        "task_api": True,
        "llm_judged": facts.judge is not None,
        "declared_tools": list(facts.tools),
        "declared_task_count": dict(facts.task_counts),
    }
    reward: dict[str, Any] = {
        "range": [0.0, 1.0],
        "oracle_tolerance": _up(1.0 - facts.oracle_mean),
        "floor_margin": _down(1.0 - facts.floor_mean),
    }
    validation: dict[str, Any] = {"reward": reward}
    if facts.judge is not None:
        # a re-scored trajectory asks the judge again; at temperature 0 and with its reply cache the verdict repeats
        reward["variance_tolerance"] = 0.0 if facts.judge["params"].get("temperature", 0) in (0, None) else 0.2
        validation["judge"] = facts.judge
    validation.update(
        resources={"cpu": 1.0, "memory_mb": 2048, "disk_mb": 1024, "episode_timeout_s": facts.episode_timeout_s},
        task_distribution={"dataset_version": facts.data_version},
        network={"mode": "public"},
        capabilities=capabilities,
        types={"tags": ["tau2", "tool-use", "customer-service", facts.domain]},
        execution={
            "kind": "openenv_ws",
            "probe_path": "validation/runtime.json",
            "dockerfile": "Dockerfile",
            "context": ".",
        },
    )
    return {
        "spec_version": 1,
        "name": facts.name,
        "version": tau2_gym.__version__,
        "description": (
            f"tau2-bench {facts.env_id} served by tau2-gym: you are the customer-service agent of the "
            f"{facts.domain} domain; a simulated customer and the domain's tools step inside the env; the reward is "
            f"upstream's tau2 reward. Tasks: split {facts.pool_split!r} of {facts.data_version}."
        ),
        "type": "space",
        "runtime": "fastapi",
        "port": CONTAINER_PORT,
        "tau2_gym": {"env_id": facts.env_id, "env_kwargs": dict(facts.env_kwargs)},
        "validation": validation,
    }


def manifest_yaml(facts: EnvFacts) -> str:
    header = (
        f"# The OpenEnv manifest of {facts.env_id}, written by `{' '.join(serve_argv(facts.env_id, facts.env_kwargs))}"
        " --write-manifest`:\n# its validation block is measured from the env (tau2_gym.frameworks.openenv.manifest).\n"
    )
    return header + yaml.safe_dump(manifest(facts), sort_keys=False, width=120)


def serve_argv(env_id: str, env_kwargs: dict[str, Any]) -> list[str]:
    """The ``tau2-gym serve`` command that serves ``env_id`` made with ``env_kwargs`` (its env flags)."""
    argv = ["tau2-gym", "serve", env_id]
    for key, value in env_kwargs.items():
        if key in _FLAGS and (isinstance(value, str) or (key == "task_split" and value is None)):
            argv += [_FLAGS[key], "none" if value is None else value]
            continue
        try:
            argv += ["--env-arg", f"{key}={json.dumps(value)}"]
        except TypeError:
            raise ValueError(
                f"env argument {key}={value!r} cannot be written as a `tau2-gym serve` flag (not JSON)"
            ) from None
    return argv


# ---------------------------------------------------------------------------------------------- the package


def _source_root() -> Path:
    """The tau2-gym source tree this process runs (the image installs the same source)."""
    root = Path(tau2_gym.__file__).resolve().parents[1]
    if not ((root / "pyproject.toml").is_file() and (root / "setup.py").is_file() and (root / "domains").is_dir()):
        raise ValueError(
            f"--write-space copies tau2-gym's source into the package; {root} is not a source tree "
            "(install tau2-gym from a clone: pip install -e '.[openenv]')"
        )
    return root


def dockerfile(argv: list[str], data_version: str) -> str:
    cmd = [*argv, "--host", "0.0.0.0", "--port", str(CONTAINER_PORT)]
    return f"""# The OpenEnv Space of {argv[2]}: `openenv push` uploads this folder, Hugging Face builds this image.
FROM {BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \\
    TAU2_GYM_CACHE=/opt/tau2-gym/data HOME=/tmp
# OpenEnv's web playground (`openenv push` turns it on unless --no-interface): this is an API server
ENV ENABLE_WEB_INTERFACE=false
COPY tau2-gym /opt/tau2-gym/src
COPY openenv.yaml /opt/tau2-gym/openenv.yaml
COPY validation /opt/tau2-gym/validation
# tau2-gym, then the benchmark's data, fetched and verified once at build time (read-only at run time)
RUN pip install "/opt/tau2-gym/src[openenv]" \\
    && tau2-gym data fetch --version {data_version} \\
    && chmod -R a+rX /opt/tau2-gym
USER 1000
EXPOSE {CONTAINER_PORT}
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{CONTAINER_PORT}/health')"
# the bearer token, when the Space has the secret TAU2_GYM_SERVE_TOKEN, is read from the environment
CMD {json.dumps(cmd)}
"""


def _readme(facts: EnvFacts) -> str:
    return f"""---
title: {facts.name}
sdk: docker
app_port: {CONTAINER_PORT}
pinned: false
tags:
  - openenv
  - tau2
---

# {facts.env_id} (tau2-gym, OpenEnv)

tau2-bench's {facts.domain} domain as an OpenEnv environment: you are the customer-service agent, a simulated
customer and the domain's tools step inside the env, and the reward at the end is upstream's tau2 reward.
Tasks: split `{facts.pool_split}` of {facts.data_version} ({facts.task_counts[facts.pool_split]} tasks; every
split is listed by OpenEnv's Task API at `/{facts.name}/splits`).

```python
from openenv import GenericEnvClient

with GenericEnvClient(base_url="https://<space-url>").sync() as env:
    result = env.reset(task_index=0)
    result = env.step({{"action": "Hello! How can I help you today?"}})
```

A step is `{{"action": A}}`: text for the customer, an assistant message with `tool_calls`, one call
`{{"name": ..., "arguments": {{...}}}}` or a list of calls. With the Space secret `TAU2_GYM_SERVE_TOKEN` set, every
request needs `Authorization: Bearer <token>` (OpenEnv's clients: `headers={{"Authorization": "Bearer ..."}}`).
"""


def write_package(
    directory: Path | str, env_id: str, env_kwargs: Optional[dict[str, Any]] = None, facts: Optional[EnvFacts] = None
) -> EnvFacts:
    """Write the OpenEnv package of ``env_id`` into ``directory`` (created; must be empty if it exists): what
    ``openenv validate DIR`` and ``openenv push DIR`` read. Returns the measured facts."""
    root = _source_root()
    facts = facts or measure_facts(env_id, env_kwargs)
    out = Path(directory)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: the package is written into a new or empty folder")
    argv = serve_argv(facts.env_id, facts.env_kwargs)
    (out / "validation").mkdir(parents=True, exist_ok=True)
    (out / "openenv.yaml").write_text(manifest_yaml(facts))
    (out / "Dockerfile").write_text(dockerfile(argv, facts.data_version))
    (out / "README.md").write_text(_readme(facts))
    (out / "pyproject.toml").write_text(
        f'[project]\nname = "{facts.name}"\nversion = "{tau2_gym.__version__}"\n'
        f'description = "tau2-bench {facts.env_id} as an OpenEnv environment (tau2-gym)"\n'
        'requires-python = ">=3.10"\ndependencies = ["tau2-gym[openenv]"]  # installed from ./tau2-gym by the image\n'
    )
    client = "from tau2_gym.frameworks.openenv import Tau2Action, Tau2Client, Tau2Observation, Tau2State\n"
    (out / "__init__.py").write_text(f'"""{facts.env_id} (tau2-gym) as an OpenEnv environment."""\n\n{client}')
    (out / "client.py").write_text(f'"""The client of {facts.env_id}: tau2-gym\'s OpenEnv client."""\n\n{client}')
    plan = {
        "plan_schema_version": "1",
        "reset": {"episode_id": "openenv-validation-0", "seed": 0, "options": {"task_index": 0}},
        "actions": [{"action": make_agent(DO_NOTHING_AGENT).act()} for _ in range(PROBE_ACTIONS)],
    }
    (out / "validation" / "runtime.json").write_text(json.dumps(plan, indent=2) + "\n")
    oracle = out / "validation" / "oracle.sh"
    oracle.write_text(
        "#!/bin/sh\n# The oracle of this package: every task of the served pool played with its gold actions (read "
        "from the task data\n# in the image, never from this folder) against the server at $1; prints the rewards "
        "as JSON.\n"
        'exec python -m tau2_gym.frameworks.openenv.validate --play oracle --url "${1:-http://127.0.0.1:8000}" '
        '--manifest "$(dirname "$0")/../openenv.yaml"\n'
    )
    oracle.chmod(0o755)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")
    source = out / "tau2-gym"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy2(root / name, source / name)
    for name in ("tau2_gym", "domains"):
        shutil.copytree(root / name, source / name, ignore=ignore)
    return facts
