"""Gymnasium environments of tau2-bench: ``tau2/<domain>-v0`` (and ``tau2/<domain>-solo-v0`` where upstream
allows solo mode). Importing this package is cheap; env classes load on ``gym.make``."""

from __future__ import annotations

import gymnasium as gym

from tau2_gym.core.domain import domain_names, get_domain_spec

VECTOR_ENTRY_POINT = "tau2_gym.envs.vector:Tau2VectorEnv"
NAMESPACE = "tau2"


def env_id(domain: str, solo: bool = False, version: int = 0) -> str:
    return f"{NAMESPACE}/{domain}{'-solo' if solo else ''}-v{version}"


def env_class_name(domain: str) -> str:
    """The name of ``domain``'s env class (:mod:`tau2_gym.envs.domain_envs`): ``telecom-workflow`` ->
    ``TelecomWorkflowEnv``."""
    return "".join(part.capitalize() for part in domain.replace("-", "_").split("_")) + "Env"


def entry_point(domain: str) -> str:
    """The Gymnasium entry point of ``domain``'s env class."""
    return f"tau2_gym.envs.domain_envs:{env_class_name(domain)}"


def register_envs() -> list[str]:
    """Register one id per available domain (+ a solo id where supported); already-registered ids are kept."""
    ids = []
    for name in domain_names():
        spec = get_domain_spec(name)
        entry = entry_point(name)
        base_kwargs = {"domain": name}  # also tells the vector entry point (shared by all ids) its domain
        variants = [False, True] if spec.solo_supported else [False]
        for solo in variants:
            eid = env_id(name, solo)
            ids.append(eid)
            if eid in gym.envs.registry:
                continue
            gym.register(
                id=eid,
                entry_point=entry,
                vector_entry_point=VECTOR_ENTRY_POINT,
                kwargs={**base_kwargs, **({"solo": True} if solo else {})},
            )
    register_role_envs()
    return ids


def user_env_id(domain: str, version: int = 0) -> str:
    return f"{NAMESPACE}/{domain}-user-v{version}"


def register_role_envs() -> list[str]:
    """``tau2/<domain>-user-v0`` (the policy plays the customer) and ``tau2/mix-v0`` (tasks drawn from several
    domains); no vector entry point: ``gym.make_vec`` runs them in a ``SyncVectorEnv``."""
    ids = [user_env_id(name) for name in domain_names()] + [f"{NAMESPACE}/mix-v0"]
    for name, eid in zip(domain_names(), ids):
        if eid not in gym.envs.registry:
            gym.register(id=eid, entry_point="tau2_gym.envs.user_env:UserEnv", kwargs={"domain": name})
    if ids[-1] not in gym.envs.registry:
        gym.register(id=ids[-1], entry_point="tau2_gym.envs.mix:MixEnv")
    return ids


__all__ = ["register_envs", "register_role_envs", "env_id", "env_class_name", "entry_point", "user_env_id"]
