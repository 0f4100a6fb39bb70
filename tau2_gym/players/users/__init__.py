"""User simulators: one small interface (:mod:`tau2_gym.players.users.base`), several implementations."""

import importlib
from typing import Any

from tau2_gym.players.users.base import UserSimulator, UserSimulatorError, UserTurnRequest
from tau2_gym.players.users.scripted import OracleUser
from tau2_gym.players.users.talking import TalkingUser

__all__ = ["OFFLINE_USERS", "UserSimulator", "UserSimulatorError", "UserTurnRequest", "resolve_user", "user_from_spec"]

#: the offline customers by name (no model, no network): the spec strings :func:`resolve_user` builds them from
OFFLINE_USERS = {"oracle": OracleUser, "oracle_user": OracleUser, "talking": TalkingUser, "talking_user": TalkingUser}


def user_from_spec(spec: str) -> UserSimulator:
    """A model-backed simulator from a short string (optional dependencies are imported only here).

    ``openai:<model>`` or ``openai:<model>@<base_url>`` ->
    :class:`~tau2_gym.players.users.openai_user.OpenAIUserSimulator`
    (key from ``$OPENAI_API_KEY``); ``hf:<model name or path>`` ->
    :class:`~tau2_gym.players.users.hf_user.HFUserSimulator`.
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


def resolve_user(spec: Any) -> Any:
    """A user simulator from a spec: an object with ``generate(request)``, ``"oracle"``, ``"talking"`` (the offline
    customer that holds a conversation, :class:`~tau2_gym.players.users.talking.TalkingUser`), ``"package.module:Attr"``
    (a class is instantiated without arguments), or a spec string the model-backed simulators understand."""
    if spec is None:
        spec = "oracle"
    if not isinstance(spec, str):
        if callable(getattr(spec, "generate", None)):
            return spec
        raise TypeError(f"user={spec!r} is not a user simulator (it needs a generate(request) method)")
    if spec in OFFLINE_USERS:
        return OFFLINE_USERS[spec]()
    if ":" in spec and "." in spec.split(":", 1)[0]:  # "package.module:Attr"
        module, _, attr = spec.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        return obj() if isinstance(obj, type) else obj
    try:  # model-backed simulators: "openai:<model>", "hf:<model>"
        return user_from_spec(spec)
    except ValueError as exc:
        raise ValueError(
            f"{exc} (the env also accepts a UserSimulator instance, 'oracle', 'talking' or 'package.module:Class')"
        ) from None
