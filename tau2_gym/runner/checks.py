"""What a rollout checks before its first episode, and how its failures are counted at the end.

A run that cannot work -- a misspelled player, a server on the wrong port, a base URL without ``/v1``, a
missing key -- should end in seconds with one line that names the problem, not after every episode has been
tried and retried; and a run whose episodes failed must not look like a good one to a script or CI.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from tau2_gym.core.termination import TerminationReason
from tau2_gym.llm.client import ChatClient, LLMError

__all__ = [
    "llm_clients",
    "check_servers",
    "adopt_identities",
    "retryable",
    "failure_counts",
    "failure_line",
    "infra_error_share",
]


def llm_clients(*players: Any) -> list[ChatClient]:
    """The distinct LLM clients behind players (a policy, a customer, a judge): each has a ``client``."""
    out: list[ChatClient] = []
    for player in players:
        client = getattr(player, "client", None)
        if isinstance(client, ChatClient) and all(client is not c for c in out):
            out.append(client)
    return out


async def check_servers(*players: Any) -> list[dict[str, Any]]:
    """One small request to each player's server (:meth:`ChatClient.acheck`); the first failure raises
    :class:`~tau2_gym.llm.client.ServerCheckError`. Returns what each server said it is, for the run's log."""
    return [{"who": c.who, **(await c.acheck())} for c in llm_clients(*players)]


def adopt_identities(known: list[dict[str, Any]], *players: Any) -> None:
    """Give players built elsewhere (Ray actors) the server identities the run's check learned."""
    for client in llm_clients(*players):
        client.adopt_identity(known)


def retryable(exc: BaseException) -> bool:
    """Whether another try of an episode could end differently: not when an LLM call in its cause chain failed
    with an error that repeats (HTTP 404, 401, 400 ...)."""
    cur: BaseException | None = exc
    for _ in range(32):  # a cause chain can loop; a real one is a few links long
        if cur is None:
            break
        if isinstance(cur, LLMError):
            return cur.retryable
        cur = cur.__cause__ or cur.__context__
    return True


def _reason(run: dict) -> str:
    info = run.get("info") or {}
    kind = info.get("error_type") or "error"
    text = str(info.get("error") or "").splitlines()[0] if info.get("error") else ""
    return f"{kind}: {text[:160]}" if text else kind


def failure_counts(simulations: Iterable[dict]) -> Counter:
    """Infrastructure-failed episodes by their first error line."""
    return Counter(
        _reason(r) for r in simulations if r.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR
    )


def infra_error_share(simulations: list[dict]) -> float:
    """The share of episodes that ended as ``infrastructure_error`` (0.0 for no episodes)."""
    if not simulations:
        return 0.0
    return sum(r.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR for r in simulations) / len(
        simulations
    )


def failure_line(simulations: list[dict]) -> str:
    """The summary's last line: how many episodes failed, and why (the most frequent reasons first)."""
    counts = failure_counts(simulations)
    failed = sum(counts.values())
    if not failed:
        return f"failed: 0 of {len(simulations)} episodes"
    reasons = "; ".join(f"{n}x {reason}" for reason, n in counts.most_common(3))
    more = f"; {len(counts) - 3} other reason(s)" if len(counts) > 3 else ""
    ending = TerminationReason.INFRASTRUCTURE_ERROR
    return f"failed: {failed} of {len(simulations)} episodes ({ending}: {reasons}{more})"
