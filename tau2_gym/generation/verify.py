"""Verification of a drafted task: the env that will score it plays it, with scripted players, before it is written.

Every episode goes through the one episode driver (:func:`tau2_gym.episodes.driver.play`) on the domain loaded from
the folder being written, with the env's default settings and NL assertions scored as failed (no LLM judge: a
task whose reward needs one cannot be verified offline and is rejected). A draft passes when

1. the oracle agent (the gold actions in order, then the ``communicate_info`` summary) with the oracle customer
   scores 1.0, and none of its tool calls -- the gold actions -- returned an error;
2. the same agent with the talking customer (:class:`~tau2_gym.players.users.talking.TalkingUser`, which holds a
   conversation from the task's text alone) scores 1.0;
3. when the task needs a write: the do-nothing agent scores 0.0;
4. on a refused variant: the complying agent (the gold reads, then the write the customer asks for) scores 0.0.

A failure is a rejection reason (:data:`REASONS`); the machinery counts them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from tau2_gym.core.domain import LoadedDomain
from tau2_gym.core.tasks import Task
from tau2_gym.episodes.baseline import DO_NOTHING_AGENT
from tau2_gym.episodes.driver import EpisodeSetup, play
from tau2_gym.players.agents.base import AgentPolicy
from tau2_gym.players.agents.scripted import ComplyingAgent, ScriptedPolicy
from tau2_gym.players.users.base import UserSimulator
from tau2_gym.players.users.scripted import OracleUser
from tau2_gym.players.users.talking import TalkingUser
from tau2_gym.scoring.evaluation import EvaluationError
from tau2_gym.scoring.judges import make_judge
from tau2_gym.scoring.metrics import is_pass

__all__ = ["CHECKS", "REASONS", "Rejection", "Verifier"]

#: the checks, in the order they run (a draft stops at its first failure)
CHECKS = {
    "gold_runs": "the gold actions run without a tool error",
    "oracle_with_oracle_customer": "oracle agent + oracle customer score 1.0",
    "oracle_with_talking_customer": "oracle agent + talking customer score 1.0",
    "do_nothing": "the do-nothing agent scores 0.0 (tasks that need a write)",
    "forbidden_writes": "gold reads + the forbidden writes score 0.0 (refused variants)",
}
#: rejection reason -> what it means (the machinery adds the draft-level ones: invalid, contaminated, duplicate)
REASONS = {
    "invalid_draft": "the draft breaks the contract (fields, intent, upstream task format)",
    "contamination": "it uses an entity of the benchmark's test split",
    "duplicate": "the same task (scenario, initial state, criteria) was already accepted",
    "needs_llm_judge": "its reward basis holds NL_ASSERTION: no offline verification",
    "gold_tool_error": "a gold action returned a tool error",
    "oracle_below_1": "oracle agent + oracle customer scored below 1.0",
    "talking_customer_below_1": "oracle agent + talking customer scored below 1.0",
    "do_nothing_above_0": "the do-nothing agent scored above 0.0 on a task that needs a write",
    "forbidden_writes_above_0": "doing what the customer asks scored above 0.0 on a refused variant",
    "evaluation_error": "the evaluator could not score an episode",
}

_ZERO = 1e-9


@dataclass(frozen=True)
class Rejection:
    reason: str
    detail: str


class Verifier:
    """Plays drafted tasks through the driver on one loaded domain (the folder being written)."""

    def __init__(self, domain: LoadedDomain) -> None:
        self.domain = domain
        self.setup = EpisodeSetup(domain, judge=make_judge("fail"))
        self.oracle_user = OracleUser()
        self.talking_user = TalkingUser()

    def _reward(self, task: Task, policy: AgentPolicy, user: UserSimulator) -> tuple[float, Any]:
        episode = play(self.setup, task, policy, user)
        info = episode.score()
        return float((info or {}).get("reward") or 0.0), episode

    def verify(self, task: Task, draft: dict) -> Optional[Rejection]:
        """None when ``task`` (validated from ``draft["task"]``) passes every check that applies to it."""
        crit = task.evaluation_criteria
        basis = {getattr(b, "value", b) for b in ((crit.reward_basis if crit is not None else None) or ())}
        if "NL_ASSERTION" in basis:
            return Rejection("needs_llm_judge", f"reward basis {sorted(basis)}")
        try:
            return self._verify(task, draft)
        except EvaluationError as exc:
            return Rejection("evaluation_error", str(exc)[:300])

    def _verify(self, task: Task, draft: dict) -> Optional[Rejection]:
        reward, episode = self._reward(task, ScriptedPolicy("oracle"), self.oracle_user)
        errors = [m for m in episode.messages() if getattr(m, "role", None) == "tool" and m.error]
        if errors:
            return Rejection("gold_tool_error", str(errors[0].content)[:300])
        if not is_pass(reward):
            return Rejection("oracle_below_1", f"reward {reward} ({episode.termination_reason})")
        reward, episode = self._reward(task, ScriptedPolicy("oracle"), self.talking_user)
        if not is_pass(reward):
            return Rejection("talking_customer_below_1", f"reward {reward} ({episode.termination_reason})")
        if draft.get("needs_write"):
            reward, _ = self._reward(task, ScriptedPolicy(DO_NOTHING_AGENT), self.oracle_user)
            if reward > _ZERO:
                return Rejection("do_nothing_above_0", f"reward {reward}")
        if draft.get("variant") == "refused":
            writes = list(draft.get("forbidden_actions") or ())
            reward, _ = self._reward(task, ScriptedPolicy(lambda: ComplyingAgent(writes)), self.oracle_user)
            if reward > _ZERO:
                return Rejection("forbidden_writes_above_0", f"reward {reward}")
        return None

    def record(self, accepted: list[dict]) -> dict[str, Any]:
        """What ``generated.json`` says about verification: how many accepted drafts each check applied to (every
        one of them passed it)."""
        applied = {
            "gold_runs": len(accepted),
            "oracle_with_oracle_customer": len(accepted),
            "oracle_with_talking_customer": len(accepted),
            "do_nothing": sum(1 for d in accepted if d.get("needs_write")),
            "forbidden_writes": sum(1 for d in accepted if d.get("variant") == "refused"),
        }
        return {
            "tasks": len(accepted),
            "checks": dict(CHECKS),
            "passed": applied,
            "judge": "none: NL assertions count as failed (tasks whose reward needs an LLM judge are rejected)",
            "settings": {
                "max_steps": self.setup.settings.max_steps,
                "max_errors": self.setup.settings.max_errors,
                "solo": self.setup.settings.solo,
                "strict_replay": self.setup.settings.strict_replay,
            },
        }
