"""Who speaks in an episode: agent policies (``players.agents``) and customer simulators (``players.users``)."""

from typing import Any

from tau2_gym.players.users.scripted import OracleUser, ScriptedUser

__all__ = ["offline"]


def offline(player: Any) -> bool:
    """Whether a player answers without blocking (scripted agents and customers: no model, no network), so a caller
    runs it inline rather than in a thread or an awaited request."""
    return bool(getattr(player, "offline", False)) or isinstance(player, (OracleUser, ScriptedUser))
