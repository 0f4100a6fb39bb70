"""User simulators: one small interface (:mod:`tau2_gym.players.users.base`), several implementations."""

from tau2_gym.players.users.base import UserSimulator, UserSimulatorError, UserTurnRequest

__all__ = ["UserSimulator", "UserSimulatorError", "UserTurnRequest", "user_from_spec"]


def user_from_spec(spec: str) -> UserSimulator:
    """A model-backed simulator from a short string (optional dependencies are imported only here).

    ``openai:<model>`` or ``openai:<model>@<base_url>`` -> :class:`~tau2_gym.players.users.openai_user.OpenAIUserSimulator`
    (key from ``$OPENAI_API_KEY``); ``hf:<model name or path>`` -> :class:`~tau2_gym.players.users.hf_user.HFUserSimulator`.
    """
    kind, sep, rest = spec.partition(":")
    if sep and rest and kind == "openai":
        from tau2_gym.players.users.openai_user import OpenAIUserSimulator

        model, at, base_url = rest.partition("@")
        if at and not base_url.startswith(("http://", "https://")):
            model, base_url = rest, ""
        return OpenAIUserSimulator(model=model, base_url=base_url or None)
    if sep and rest and kind == "hf":
        from tau2_gym.players.users.hf_user import HFUserSimulator

        return HFUserSimulator(model_name_or_path=rest)
    raise ValueError(f"unknown user simulator spec {spec!r}; use 'openai:<model>[@<base_url>]' or 'hf:<model>'")
