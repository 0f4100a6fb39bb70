"""The tau2 reward: replay hash x assertions (reference §4). CONTRACT STUB -- implemented by the scoring issue.

    evaluate_simulation(domain, task, messages, termination_reason, *, solo=False, judge=None,
                        strict=True) -> dict

returns a ``reward_info`` dict with exactly upstream's fields and values (``reward``, ``db_check``,
``env_assertions``, ``action_checks``, ``nl_assertions``, ``communicate_checks``, ``reward_basis``,
``reward_breakdown``, ``info``), JSON-ready (enums as values).
"""

from __future__ import annotations

from typing import Any, Optional

from tau2_gym.domain import LoadedDomain
from tau2_gym.messages import AnyMessage
from tau2_gym.tasks import Task


def evaluate_simulation(domain: LoadedDomain, task: Task, messages: list[AnyMessage], termination_reason: str, *,
                        solo: bool = False, judge: Optional[Any] = None, strict: bool = True) -> dict[str, Any]:
    raise NotImplementedError("scoring is being implemented")
