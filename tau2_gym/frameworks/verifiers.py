"""tau2 as a verifiers environment (extra ``tau2-gym[verifiers]``; verifiers 0.4's ``verifiers.v1`` stack).

A verifiers environment is a taskset (the tasks), a harness (the program that plays one task against the model,
every model call going through verifiers' interception endpoint, which records the turns for training) and an
``Env`` composing them. Here:

* :class:`Tau2Taskset` yields one :class:`Tau2Task` per tau2 task of a domain's split;
* :class:`Tau2Harness` plays the task *in-process* through the one episode driver, as ``tau2-gym rollout`` does
  (:class:`~tau2_gym.runner.episode_runner.EpisodeRunner`): the model's turns are the agent's (an
  :class:`~tau2_gym.players.agents.openai_agent.OpenAIAgentPolicy` pointed at the interception endpoint), the
  customer and the tools step inside, and the tau2 reward lands on the trace's state;
* the env is verifiers' ``SingleAgentEnv`` (the taskset's default harness is this module's).

Conventions mapped onto verifiers': the trace's stop condition is the tau2 termination reason, except upstream's
step limit (``max_steps``), which is verifiers' truncation (``max_turns``: ``trace.is_truncated``); a turn refused
by verifiers' own limits ends the episode the same way. An episode the infrastructure broke -- the run raised (the
customer's or the judge's LLM failed, scoring failed) or the customer's simulator failed (``user_error``) -- raises
:class:`verifiers.v1.EnvError`: the trace is not ``ok``, verifiers retries it (``--env.retries``) and trainers
leave it out.

By name: verifiers resolves an environment name to an installed top-level package exporting its classes via
``__all__``; this distribution ships one, :mod:`tau2_gym_env`, so ``vf-eval tau2-gym-env`` (or ``tau2_gym_env``) finds
this environment in a fresh process. It exports :class:`Tau2Taskset`, :class:`Tau2Harness` (the taskset's default
program) and :class:`Tau2Env`, whose config (:class:`Tau2EnvConfig`) gives the agent a local subprocess runtime --
verifiers' own default is a Prime sandbox, which needs a Prime account, and the in-process harness runs no program
in it anyway. :func:`load_environment` builds the same env from Python.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import fields, replace
from typing import Any, Optional

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.envs.single_agent import SingleAgentEnv, SingleAgentEnvConfig
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig

from tau2_gym.core.domain import load_domain
from tau2_gym.core.records import as_dict
from tau2_gym.core.termination import INFRASTRUCTURE, TerminationReason
from tau2_gym.players.agents.openai_agent import OpenAIAgentConfig, OpenAIAgentPolicy
from tau2_gym.runner.collect import select_for_run
from tau2_gym.runner.config import RolloutConfig, trial_seeds
from tau2_gym.runner.episode_runner import EpisodeRunner
from tau2_gym.runner.players import build_player
from tau2_gym.scoring.rewards import apply_reward_mode

__all__ = [
    "TASKSET_ID",
    "Tau2Env",
    "Tau2EnvConfig",
    "Tau2Harness",
    "Tau2HarnessConfig",
    "Tau2Task",
    "Tau2TaskData",
    "Tau2TaskState",
    "Tau2Taskset",
    "Tau2TasksetConfig",
    "load_environment",
]

#: the environment's name: the installed package :mod:`tau2_gym_env` (``vf-eval tau2-gym-env``)
TASKSET_ID = "tau2-gym-env"
_ROLLOUT_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(RolloutConfig)}
#: the verifiers stop condition of upstream's step-limit truncation
TRUNCATED = "max_turns"


class Tau2TasksetConfig(vf.TasksetConfig):
    """Which tau2 episodes the taskset holds and how they run (``--env.taskset.*``)."""

    id: str = TASKSET_ID
    domain: str = "airline"
    split: Optional[str] = Field("base", description="task split (None: the whole task set)")
    task_set: Optional[str] = None
    task_ids: Optional[list[str]] = None
    data_version: Optional[str] = None
    user: str = Field("oracle", description="customer: oracle, a scripted user, or a tau2-gym user spec string")
    judge: Optional[str] = Field(None, description="NL-assertion judge: fail (default), pass, exclude, openai:MODEL")
    reward_mode: str = "default"
    solo: bool = False
    max_steps: int = Field(_ROLLOUT_DEFAULTS["max_steps"], description="upstream's step limit (truncation)")
    max_errors: int = _ROLLOUT_DEFAULTS["max_errors"]
    seed: int = Field(_ROLLOUT_DEFAULTS["seed"], description="run seed; an episode's seed is its trial-0 seed")


class Tau2TaskData(vf.TaskData):
    """One tau2 task, with the run settings its harness needs (they travel with the task on the wire)."""

    tau2_task_id: str
    domain: str
    task_set: Optional[str] = None
    data_version: Optional[str] = None
    user: str = "oracle"
    judge: Optional[str] = None
    reward_mode: str = "default"
    solo: bool = False
    max_steps: int = _ROLLOUT_DEFAULTS["max_steps"]
    max_errors: int = _ROLLOUT_DEFAULTS["max_errors"]
    seed: int = _ROLLOUT_DEFAULTS["seed"]


class Tau2TaskState(vf.State):
    """What the episode left on the trace: the reward, its breakdown, the ending and the tau2 record."""

    reward: float = 0.0
    tau2_reward: Optional[float] = None
    termination_reason: Optional[str] = None
    reward_info: Optional[dict[str, Any]] = None
    simulation_run: Optional[dict[str, Any]] = None


class Tau2Task(vf.Task[Tau2TaskData, Tau2TaskState]):
    """A tau2 task: scored by the reward its episode recorded (upstream's, through the reward mode)."""

    @property
    def key(self) -> str:
        return f"{self.data.domain}:{self.data.tau2_task_id}"

    @vf.reward
    async def tau2(self, trace: vf.Trace) -> float:
        return float(trace.state.reward)

    @vf.metric
    async def tau2_components(self, trace: vf.Trace) -> dict[str, float]:
        """Upstream's per-component rewards (DB, ENV_ASSERTION, ACTION, COMMUNICATE, NL_ASSERTION)."""
        breakdown = (trace.state.reward_info or {}).get("reward_breakdown") or {}
        return {f"tau2_{k.lower()}": float(v) for k, v in breakdown.items() if isinstance(v, (int, float))}


class Tau2Taskset(vf.Taskset[Tau2Task, Tau2TasksetConfig]):
    """The tasks of a domain's split (or ``task_ids``), in the split's order."""

    def load(self) -> list[Tau2Task]:
        cfg = self.config
        domain = load_domain(cfg.domain, None, cfg.data_version)
        if cfg.task_ids is not None:
            by_id = {t.id: t for t in domain.tasks(cfg.task_set, None)}
            missing = [i for i in cfg.task_ids if i not in by_id]
            if missing:
                raise ValueError(f"task ids {missing} are not in the {cfg.domain!r} task set")
            pool = [by_id[i] for i in cfg.task_ids]
        else:
            pool = list(domain.tasks(cfg.task_set, cfg.split))
        settings: dict[str, Any] = {
            "domain": cfg.domain,
            "task_set": cfg.task_set,
            "data_version": cfg.data_version,
            "user": cfg.user,
            "judge": cfg.judge,
            "reward_mode": cfg.reward_mode,
            "solo": cfg.solo,
            "max_steps": cfg.max_steps,
            "max_errors": cfg.max_errors,
            "seed": cfg.seed,
        }
        return [
            Tau2Task(
                # the prompt only names the task: the customer opens the conversation inside the episode, and the
                # customer's instructions stay hidden from the agent, as in tau2
                Tau2TaskData(
                    id=t.id,
                    name=f"{cfg.domain} {t.id}",
                    prompt=f"tau2 {cfg.domain} task {t.id}",
                    tau2_task_id=t.id,
                    **settings,
                ),
                cfg.task,
            )
            for t in pool
        ]


class Tau2HarnessConfig(vf.HarnessConfig):
    """The harness's own knobs (``--env.agent.harness.*``)."""

    request_timeout: float = 600.0
    request_retries: int = 2


class _Players:
    """The customer and the judge of one setting, shared by the episodes that use it (reply caches, clients) on one
    event loop (an LLM customer's HTTP client belongs to the loop it was first used on). Held per loop in a weak
    mapping: a finished loop takes its players with it."""

    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, tuple[Any, Any, Any]]] = (
        weakref.WeakKeyDictionary()
    )

    @classmethod
    def get(cls, data: Tau2TaskData) -> tuple[RolloutConfig, Any, Any]:
        players = cls._by_loop.setdefault(asyncio.get_running_loop(), {})
        key = (data.domain, data.task_set, data.data_version, data.user, data.judge, data.solo)
        hit = players.get(key)
        if hit is None:
            config = RolloutConfig(
                domain=data.domain,
                task_set=data.task_set,
                data_version=data.data_version,
                judge=data.judge,
                solo=data.solo,
                progress=False,
                check_servers=False,
            )
            judge, _ = select_for_run(config, [data.tau2_task_id])
            user = build_player(data.user, "user", solo=data.solo)
            hit = players[key] = (config, user, judge)
        return hit


def _reward_mode(reward_mode: str, run: dict) -> tuple[float, Optional[float]]:
    """(the training reward, upstream's reward) of a finished run, through the env's reward mode."""
    reward_info = run.get("reward_info")
    raw = None if reward_info is None else float(reward_info.get("reward") or 0.0)
    info: dict[str, Any] = {}
    reward = apply_reward_mode(reward_mode, info, reward_info, raw or 0.0)
    return float(reward), raw


class Tau2Harness(vf.Harness[Tau2HarnessConfig]):
    """Plays one tau2 episode in-process; every model call goes through verifiers' interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: vf.Trace,
        runtime: Any,  # noqa: ARG002 - verifiers' Harness.launch signature
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],  # noqa: ARG002 - verifiers' Harness.launch signature
        data: vf.TaskData,
        tool_interception_url: Optional[str] = None,  # noqa: ARG002 - verifiers' Harness.launch signature
    ) -> ProgramResult:
        if not isinstance(data, Tau2TaskData):
            data = Tau2TaskData.model_validate(data.model_dump())
        base, user, judge = _Players.get(data)
        config = replace(
            base, max_steps=data.max_steps, max_errors=data.max_errors, seed=data.seed, task_ids=[data.tau2_task_id]
        )
        sampling = ctx.sampling
        policy = OpenAIAgentPolicy(
            OpenAIAgentConfig(
                model=ctx.model,
                base_url=endpoint,
                api_key=secret,
                api_key_env=None,
                temperature=getattr(sampling, "temperature", None),
                top_p=getattr(sampling, "top_p", None),
                max_tokens=getattr(sampling, "max_tokens", None),
                timeout=self.config.request_timeout,
                max_retries=self.config.request_retries,
                cache=None,
            )
        )
        domain = load_domain(data.domain, None, data.data_version)
        task = domain.task(data.tau2_task_id)
        runner = EpisodeRunner(config, [task], policy, user, judge)
        try:
            run = await runner.run_once(task, trial=0, seed=trial_seeds(data.seed, 1)[0])
        except Exception as exc:
            if trace.stop_condition is not None:  # verifiers refused the turn (its limits, a @stop): a truncation
                trace.state.termination_reason = TerminationReason.MAX_STEPS.value
                return ProgramResult(exit_code=0, stdout="", stderr="")
            raise vf.EnvError(
                f"tau2 episode of task {data.tau2_task_id!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            await policy.aclose()
        reason = run.get("termination_reason")
        if reason in INFRASTRUCTURE:  # masked (an EnvError), not scored
            error = (run.get("info") or {}).get("error")
            raise vf.EnvError(f"tau2 episode of task {data.tau2_task_id!r} ended as {reason}: {error}")
        reward, raw = _reward_mode(data.reward_mode, run)
        state = trace.state
        state.reward = reward
        state.tau2_reward = raw
        state.termination_reason = reason
        state.reward_info = as_dict(run.get("reward_info"))
        state.simulation_run = as_dict(run)
        trace.stop(TRUNCATED if reason == TerminationReason.MAX_STEPS else str(reason))
        return ProgramResult(exit_code=0, stdout="", stderr="")


class Tau2EnvConfig(SingleAgentEnvConfig):
    """:class:`Tau2Env`'s config: verifiers' single-agent config whose agent runs in a local subprocess runtime by
    default (``--env.agent.runtime.*`` still chooses another)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())


class Tau2Env(SingleAgentEnv, vf.Env[Tau2EnvConfig]):
    """verifiers' single-agent env over :class:`Tau2Taskset`, configured by :class:`Tau2EnvConfig`: what
    ``vf-eval tau2-gym-env`` runs."""


def load_environment(
    domain: str = "airline",
    split: Optional[str] = "base",
    user: str = "oracle",
    judge: Optional[str] = None,
    reward_mode: str = "default",
    data_version: Optional[str] = None,
    task_ids: Optional[list[str]] = None,
    solo: bool = False,
    max_steps: Optional[int] = None,
    max_errors: Optional[int] = None,
    seed: Optional[int] = None,
    **env_config: Any,
) -> vf.Env:
    """The verifiers environment of a tau2 domain: :class:`Tau2Env` over :class:`Tau2Taskset`, played by
    :class:`Tau2Harness`. ``env_config``: further :class:`Tau2EnvConfig` fields (e.g. ``retries``,
    ``agent={"max_turns": 50}``); the agent's runtime defaults to a local subprocess runtime, which the in-process
    harness never runs a program in."""
    from verifiers.v1.utils.loaders import load_environment as vf_load_environment

    taskset: dict[str, Any] = {
        "id": TASKSET_ID,
        "domain": domain,
        "split": split,
        "user": user,
        "judge": judge,
        "reward_mode": reward_mode,
        "data_version": data_version,
        "task_ids": task_ids,
        "solo": solo,
    }
    for name, value in (("max_steps", max_steps), ("max_errors", max_errors), ("seed", seed)):
        if value is not None:
            taskset[name] = value
    config = Tau2EnvConfig.model_validate({**env_config, "taskset": Tau2TasksetConfig(**taskset)})
    return vf_load_environment(config)
