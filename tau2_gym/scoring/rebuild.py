"""Rebuilding environments from a task: the initial state, the gold state, the predicted state.

These are the three environments tau2's evaluator compares (reference §4.2): the *predicted* one
replays a stored trajectory on top of the task's initial state; the *gold* one runs the task's gold
actions -- never in solo mode, errors swallowed, and without any sync after a gold action.
"""

from __future__ import annotations

import logging
from typing import Optional

from tau2_gym.core.domain import LoadedDomain
from tau2_gym.core.environment import Environment
from tau2_gym.core.messages import AnyMessage
from tau2_gym.core.tasks import Task

logger = logging.getLogger("tau2_gym")


def initial_environment(
    domain: LoadedDomain,
    task: Task,
    solo: bool = False,
    history: Optional[list[AnyMessage]] = None,
    strict: bool = True,
) -> Environment:
    """Fresh environment with the task's init data and init actions, then ``history`` replayed.

    ``history`` defaults to the task's own message history (what the orchestrator starts from).
    """
    env = domain.make_environment(solo=solo, task=task)
    st = task.initial_state
    env.set_state(
        st.initialization_data if st is not None else None,
        st.initialization_actions if st is not None else None,
        task.history if history is None else history,
        strict=strict,
    )
    return env


def predicted_environment(
    domain: LoadedDomain, task: Task, trajectory: list[AnyMessage], solo: bool = False, strict: bool = True
) -> Environment:
    """The environment a stored trajectory produced (the trajectory includes the task's history)."""
    return initial_environment(domain, task, solo=solo, history=trajectory, strict=strict)


def gold_environment(domain: LoadedDomain, task: Task, strict: bool = True) -> Environment:
    """Initial state (never solo) plus the task's gold actions; exceptions are logged and ignored.

    ``strict`` applies to replaying the task's own message history, as upstream's evaluator passes it.
    """
    env = initial_environment(domain, task, solo=False, strict=strict)
    criteria = task.evaluation_criteria
    if criteria is not None and criteria.actions is not None:
        for action in criteria.actions:
            try:
                env.make_tool_call(action.name, action.requestor, **action.arguments)
            except Exception as exc:  # noqa: BLE001 - upstream ignores failing gold actions
                logger.debug("gold action %s failed: %s", action.name, exc)
    return env
