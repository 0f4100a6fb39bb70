"""Cloning an env around a live episode (the episode's own copy is :mod:`tau2_gym.episodes.branch`), for tree
search, best-of-n and counterfactuals.

The env's clone copies its RNGs and counters and wraps the copied episode; Gymnasium wrappers around it are copied
with their state.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

__all__ = ["clone_env", "copy_rng"]


def copy_rng(rng: Any) -> Any:
    """An independent numpy Generator in the same state (the same draws from here on)."""
    if rng is None:
        return None
    bits = type(rng.bit_generator)(0)  # a fixed seed is cheaper to build than an entropy-seeded one; replaced
    bits.state = rng.bit_generator.state
    return type(rng)(bits)


def clone_env(env: Any, episode_id: Optional[str] = None) -> Any:
    """:meth:`Tau2Env.clone` through a Gymnasium wrapper chain: the clone comes back wrapped like ``env``.

    ``gym.make`` returns wrappers (``OrderEnforcing``, ``PassiveEnvChecker``, a ``TimeLimit`` when
    ``max_episode_steps`` is given, any of your own): each is copied with its state -- the ``TimeLimit``'s
    elapsed-step count included -- around the cloned env. ``env`` may also be the bare env.
    """
    base = env.unwrapped
    if not callable(getattr(base, "clone", None)) or not hasattr(base, "episode"):
        raise TypeError(f"clone_env needs a tau2 env (or wrappers around one); got {type(base).__name__}")
    twin = base.clone(episode_id=episode_id)
    if env is base:
        return twin
    memo: dict[int, Any] = {
        id(base): twin,
        id(base.domain): base.domain,
        id(base.action_space): twin.action_space,
        id(base.observation_space): twin.observation_space,
    }
    for shared in (base.user, base.judge):  # a wrapper's saved env spec may hold them (clients, locks): shared
        if shared is not None and not isinstance(shared, str):
            memo[id(shared)] = shared
    return copy.deepcopy(env, memo)
