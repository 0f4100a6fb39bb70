"""Playing one episode of a rollout: the agent and the customer are awaited, the episode is driven, scored and
recorded by the one episode driver (:mod:`tau2_gym.episodes.driver`) -- with upstream's retry policy: an episode
whose run raised is run again, then recorded as ``infrastructure_error``."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import traceback
import uuid
from datetime import datetime
from typing import Any, Optional, Sequence

from tau2_gym.core.domain import load_domain
from tau2_gym.core.records import as_dict
from tau2_gym.core.results_file import results_info
from tau2_gym.core.settings import DROP
from tau2_gym.core.tasks import Task
from tau2_gym.core.termination import TerminationReason
from tau2_gym.core.turns import AgentTurnRequest, UserTurnRequest
from tau2_gym.episodes.baseline import do_nothing_baseline
from tau2_gym.episodes.driver import HALF_DUPLEX, EpisodeSetup
from tau2_gym.llm.cache import cache_info
from tau2_gym.players import offline
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.users.base import UserSimulator
from tau2_gym.runner.checks import retryable
from tau2_gym.runner.config import RolloutConfig
from tau2_gym.scoring.judges import Judge

logger = logging.getLogger("tau2_gym")

__all__ = ["EpisodeRunner", "git_commit"]


def git_commit() -> str:
    """``git rev-parse HEAD`` of the working directory, as upstream records ``info.git_commit``; else "unknown"."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    head = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    return head or "unknown"


class EpisodeRunner:
    """Runs the episodes of one rollout: one loaded domain, one episode setup, one agent and one customer."""

    def __init__(
        self,
        config: RolloutConfig,
        tasks: Sequence[Task],
        agent: AgentPolicy,
        user: Optional[UserSimulator],
        judge: Judge,
    ) -> None:
        self.config = config
        self.domain = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
        self.tasks = list(tasks)
        self.agent = agent
        self.user = user
        self.judge = judge
        self.setup = EpisodeSetup(self.domain, config, judge)
        self.agent_can_stop = config.agent_may_stop
        self.tools = list(self.setup.tools)
        self.agent_inline = offline(agent)
        self.user_inline = user is not None and offline(user)
        self._git_commit: Optional[str] = None

    # --------------------------------------------------------------- one episode

    async def _agent_turn(self, request: AgentTurnRequest) -> Any:
        if self.agent_inline:
            return self.agent.generate(request)
        return await self.agent.agenerate(request)

    async def _user_turn(self, request: UserTurnRequest) -> Any:
        user = self.user
        assert user is not None  # run_once asks for a user turn only with a simulator
        if self.user_inline:
            return user.generate(request)
        return await user.agenerate(request)

    async def run_once(self, task: Task, trial: int, seed: int) -> dict:
        """One attempt: the episode to its end, then its reward. Exceptions escape (the caller retries)."""
        episode = self.setup.start(task, seed=seed)
        try:
            while not episode.done:
                request = episode.user_request()
                if request is not None:
                    if self.user is None:
                        raise RuntimeError(f"task {task.id!r} needs a user simulator but none was given")
                    episode.submit_user(await self._user_turn(request))
                else:
                    request = episode.agent_request({"domain": self.config.domain, "trial": trial})
                    episode.act(await self._agent_turn(request))
        finally:
            done = getattr(self.agent, "episode_done", None)
            if done is not None:
                done(episode.episode_id)
        return as_dict(episode.finish(trial=trial, catch_evaluation_errors=False).record)

    async def run_episode(self, task: Task, trial: int, seed: int) -> dict:
        """The episode with upstream's retry policy; never raises (except cancellation)."""
        cfg = self.config
        attempts = cfg.max_retries + 1
        last: Optional[BaseException] = None
        tb = ""
        for attempt in range(attempts):
            try:
                return await self.run_once(task, trial, seed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                last, tb = exc, traceback.format_exc()
                if not retryable(exc):  # e.g. HTTP 404 or 401: another try would fail the same way
                    attempts = attempt + 1
                    break
                if attempt + 1 < attempts:
                    logger.warning(
                        "task %s trial %d failed (attempt %d/%d): %s: %s",
                        task.id,
                        trial,
                        attempt + 1,
                        attempts,
                        type(exc).__name__,
                        exc,
                    )
                    await asyncio.sleep(cfg.retry_delay)
        logger.error(
            "task %s trial %d failed after %d attempts: %s: %s", task.id, trial, attempts, type(last).__name__, last
        )
        now = datetime.now().isoformat()
        return {
            "id": str(uuid.uuid4()),
            "task_id": task.id,
            "timestamp": now,
            "start_time": now,
            "end_time": now,
            "duration": 0.0,
            "termination_reason": TerminationReason.INFRASTRUCTURE_ERROR.value,
            "agent_cost": None,
            "user_cost": None,
            "agent_usage": None,
            "user_usage": None,
            "mode": HALF_DUPLEX,
            "policy": self.domain.policy(cfg.solo, task),
            "reward_info": None,
            "messages": [],
            "trial": trial,
            "seed": seed,
            "skipped": False,
            "info": {
                "error": str(last),
                "error_type": type(last).__name__,
                "error_traceback": tb,
                "failed_after_attempts": attempts,
                "data_version": self.domain.data_version_record(),
            },
        }

    # --------------------------------------------------------------- the results file

    def signature(self) -> dict[str, Any]:
        """Settings that change episodes, logged in the header so that a resume with others is flagged."""
        cfg = self.config
        parser = cfg.parser
        agent = self.agent.info() if hasattr(self.agent, "info") else {}
        user = self.user.info() if self.user is not None and hasattr(self.user, "info") else {}
        return {
            "task_set": cfg.task_set,
            "data_version": self.domain.source.version.name,
            "data": self.domain.source.name,
            "seed": cfg.seed,
            "max_steps": cfg.max_steps,
            "max_errors": cfg.max_errors,
            "solo": cfg.solo,
            "agent_can_stop": self.agent_can_stop,
            "enforce_protocol": cfg.enforce_protocol,
            # the run's parser as given (None: none given -- raw text read with 'auto', replies taken as sent)
            "parser": None if not cfg.parse_replies else parser if isinstance(parser, str) else type(parser).__name__,
            # a setting added later: recorded when not its default, so logs written before it resume unflagged
            **({"reasoning_history": cfg.reasoning_history} if cfg.reasoning_history != DROP else {}),
            "agent": [agent.get("implementation"), agent.get("llm")],
            "user": [user.get("implementation"), user.get("llm")],
            **({"domain_options": cfg.domain_options} if cfg.domain_options else {}),
            "reward_integrity": cfg.integrity.name,  # rewards (and banking's tool listing) depend on it
        }

    def results_info(self) -> dict[str, Any]:
        cfg = self.config
        agent_info = (
            dict(self.agent.info())
            if hasattr(self.agent, "info")
            else {"implementation": type(self.agent).__name__, "llm": None, "llm_args": None}
        )
        if cfg.solo and agent_info.get("implementation") != "llm_agent_solo":
            # upstream's evaluate-trajs reads a file as solo only from this name (with dummy_user); our agent's
            # own name is kept beside it
            if agent_info.get("implementation") != "llm_agent":
                agent_info["tau2_gym_agent"] = agent_info.get("implementation")
            agent_info["implementation"] = "llm_agent_solo"
        if self._git_commit is None:
            self._git_commit = git_commit()
        info = results_info(
            self.domain,
            cfg,
            user=self.user,
            agent_info=agent_info,
            num_trials=cfg.num_trials,
            seed=cfg.seed,
            git_commit=self._git_commit,
        )
        info.update(cache_info(self.user, self.judge))  # tau2_gym.llm.cache: whether the caches were on, where, counts
        info.update(self.baseline_info())
        return info

    def baseline_info(self) -> dict[str, Any]:
        """The do-nothing baseline of the run's tasks (:mod:`tau2_gym.episodes.baseline`), to read a score beside;
        not for solo runs (there is no customer to say goodbye to)."""
        if self.config.solo:
            return {}
        base = do_nothing_baseline(self.domain, self.tasks, judge=self.config.judge)
        return {
            "do_nothing_baseline": {
                "reward": round(base.mean, 4),
                "tasks": len(base.rewards),
                "passes": list(base.passes),
                "reward_mode": base.reward_mode,
            }
        }

    def results(self, runs: list[dict]) -> dict[str, Any]:
        return {
            "timestamp": datetime.now().isoformat(),
            "info": self.results_info(),
            "tasks": [t.model_dump(mode="json") for t in self.tasks],
            "simulations": runs,
            "simulation_index": None,
        }  # upstream fills it only in its "dir" storage format
