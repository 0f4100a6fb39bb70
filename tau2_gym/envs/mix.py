"""``tau2/mix-v0``: one env drawing each episode's task from several domains (and splits) by weight or curriculum.

    >>> env = gym.make("tau2/mix-v0", domains={"airline": 0.5, "retail": 0.3, "telecom": 0.2}, split="train")
    >>> obs, info = env.reset(seed=0)          # info["domain"], info["task_id"], info["mix_component"]
    >>> vec = gym.make_vec("tau2/mix-v0", num_envs=8, domains=["airline", "retail"])   # SyncVectorEnv

Published multi-domain recipes write this sampler by hand; here it is a :class:`Mixture` (components, weights,
an optional curriculum, per-component statistics) and a thin env that routes ``reset``/``step`` to one
per-component env, built on the first draw of its component (domain data is loaded once per process and
shared, see :func:`tau2_gym.load_domain`). :func:`domain_summary` turns final infos into per-domain metrics.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, SupportsFloat, Union, cast

import gymnasium as gym
import numpy as np

from tau2_gym.core.domain import domain_names
from tau2_gym.envs import entry_point
from tau2_gym.envs.base import EpisodeEnv, check_reset_options
from tau2_gym.envs.config import Tau2EnvConfig, UserEnvConfig
from tau2_gym.envs.spaces import AssistantActionSpace, MessagesSpace, TranscriptSpace
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.envs.user_env import UserEnv

SUCCESS = 1.0 - 1e-6  # a reward at least this is a success (tau2 rewards are 0 or 1 on shipped tasks)
CURRICULA = ("success",)


@dataclass(frozen=True)
class Component:
    """One source of tasks: a domain and a split (``key`` is ``"domain"`` or ``"domain:split"``)."""

    key: str
    domain: str
    split: Optional[str]


def _parse_key(key: str, split: Optional[str]) -> Component:
    domain, sep, own_split = str(key).partition(":")
    if not domain:
        raise ValueError(f"mixture component {key!r} has no domain")
    return Component(str(key), domain, own_split if sep else split)


class Mixture:
    """Which component each episode draws from: fixed weights, optionally reweighted by recent success.

    Args:
        domains: ``{"airline": 0.5, "retail": 0.3, "telecom:small": 0.2}`` (weights need not sum to 1), or a
            list of keys (equal weights). A key is a domain name, or ``domain:split`` for a split of its own.
        split: the split of keys without one (``"base"``, ``"train"``, ``"test"``, ...; None = every task).
        curriculum: None (fixed weights), ``"success"``, or a callable ``fn(base, history) -> weights`` taking
            the base weights and the recent rewards per key (dicts by key) and returning a weight per key.
        window: how many recent episodes per component the curriculum looks at.
        floor: the ``"success"`` rule's minimum multiplier (a mastered component keeps being drawn).

    The ``"success"`` rule: with ``s_c`` the success rate (reward >= 1) over component c's last ``window``
    finished episodes (0 before its first), the probability of c is proportional to
    ``base_c * (floor + 1 - s_c)``. Harder components are drawn more; before any episode finishes (or when all
    succeed equally) the draws follow the base weights; a component at 100% success keeps ``floor / (1 +
    floor)`` of its base share relative to one at 0%.

    One Mixture may be shared by several envs in one process (pass ``mixture=`` to each, e.g. through
    ``gym.make_vec``, whose default ``SyncVectorEnv`` shares it): they then draw from and update the same
    curriculum. An ``AsyncVectorEnv`` gives each process its own copy. Draws use the caller's RNG (the env's
    ``np_random``).
    """

    def __init__(
        self,
        domains: Union[Mapping[str, float], Sequence[str]],
        split: Optional[str] = "base",
        *,
        curriculum: Union[None, str, Callable[[dict, dict], Mapping[str, float]]] = None,
        window: int = 50,
        floor: float = 0.1,
    ) -> None:
        if isinstance(domains, str):
            domains = [domains]
        items = list(domains.items()) if isinstance(domains, Mapping) else [(k, 1.0) for k in domains]
        if not items:
            raise ValueError("a mixture needs at least one domain")
        keys = [str(k) for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate mixture components in {keys}")
        weights = np.array([float(w) for _, w in items], dtype=float)
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError(f"mixture weights must be finite, >= 0 and not all 0; got {dict(items)}")
        if isinstance(curriculum, str) and curriculum not in CURRICULA:
            raise ValueError(f"curriculum={curriculum!r}; choose one of {CURRICULA}, None or a callable")
        if curriculum is not None and not isinstance(curriculum, str) and not callable(curriculum):
            raise TypeError(f"curriculum={curriculum!r} is neither a rule name nor a callable")
        if int(window) < 1 or not floor >= 0:
            raise ValueError(f"window must be >= 1 and floor >= 0; got window={window!r}, floor={floor!r}")
        self.components = tuple(_parse_key(k, split) for k in keys)
        self.base = weights / weights.sum()
        self.curriculum = curriculum
        self.window = int(window)
        self.floor = float(floor)
        self.history: dict[str, deque] = {c.key: deque(maxlen=self.window) for c in self.components}
        self.episodes: dict[str, int] = {c.key: 0 for c in self.components}

    @property
    def keys(self) -> list[str]:
        return [c.key for c in self.components]

    def component(self, key: str) -> Component:
        for c in self.components:
            if c.key == key or (c.domain == key and sum(d.domain == key for d in self.components) == 1):
                return c
        raise KeyError(f"{key!r} is not a component of this mixture ({self.keys})")

    def probabilities(self) -> np.ndarray:
        """The current draw probability of each component (in :attr:`components` order)."""
        if self.curriculum is None:
            return self.base.copy()
        if isinstance(self.curriculum, str):  # "success", the one rule name (__init__ refuses others)
            rates = np.array([self.success_rate(c.key) or 0.0 for c in self.components])
            w = self.base * (self.floor + 1.0 - rates)
        else:
            base = dict(zip(self.keys, self.base.tolist()))
            out = self.curriculum(base, {k: list(v) for k, v in self.history.items()})
            w = np.array([float(out.get(k, 0.0)) for k in self.keys])
            if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise ValueError(f"the curriculum returned unusable weights {out!r}")
        if w.sum() <= 0:  # every component at full success with floor 0: fall back to the base weights
            return self.base.copy()
        return w / w.sum()

    def draw(self, rng: np.random.Generator) -> Component:
        """One component, with the current probabilities (one uniform draw from ``rng``)."""
        cdf = np.cumsum(self.probabilities())
        i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
        return self.components[min(i, len(self.components) - 1)]

    def record(self, key: str, reward: SupportsFloat) -> None:
        """A finished episode of component ``key`` (a domain name works when it is unambiguous)."""
        c = self.component(key)
        self.history[c.key].append(float(reward))
        self.episodes[c.key] += 1

    def success_rate(self, key: str) -> Optional[float]:
        """Success rate over the component's recent window (None before its first finished episode)."""
        h = self.history[self.component(key).key]
        return sum(1 for r in h if r >= SUCCESS) / len(h) if h else None

    def state(self) -> dict[str, dict[str, Any]]:
        """Per component: base weight, current probability, finished episodes, recent success rate."""
        p = self.probabilities()
        return {
            c.key: {
                "domain": c.domain,
                "split": c.split,
                "base_weight": float(b),
                "probability": float(q),
                "episodes": self.episodes[c.key],
                "recent_success": self.success_rate(c.key),
            }
            for c, b, q in zip(self.components, self.base, p)
        }


class _MixActionSpace(AssistantActionSpace):
    """Assistant turns for whichever domain is running: ``contains`` as every tau2 env (parsing only);
    ``sample`` draws a call of the *current* episode's tools (its env's action space)."""

    def __init__(self, env: MixEnv, parser: Any, tokenizer: Any) -> None:
        super().__init__((), parser=parser, tokenizer=tokenizer)
        self._env = env

    def sample(self, mask: Any = None, probability: Any = None) -> dict:
        active = self._env.active
        if active is None:
            return super().sample(mask, probability)
        space = active.action_space
        space.seed(int(self.np_random.integers(0, 2**31 - 1)))  # reproducible from this space's seed
        return space.sample(mask, probability)

    def __repr__(self) -> str:
        return f"MixActionSpace(components={self._env.mixture.keys})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _MixActionSpace) and other._env.mixture.keys == self._env.mixture.keys


class MixEnv(gym.Env):
    """tau2 episodes drawn from several domains: each ``reset`` picks a component by the :class:`Mixture`.

    ## Description
    Routes every ``reset``/``step`` to the env of the drawn component (``tau2/<domain>-v0``'s class, or the
    user env with ``role="user"``); the component envs are built lazily, once each, and share the process's
    loaded domain data. The episode itself is exactly that domain's episode (same observation, reward, info).

    ## Action Space
    As the running domain's env; ``action_space.sample()`` samples the current domain's tools.

    ## Observation Space
    :class:`~tau2_gym.envs.spaces.MessagesSpace` (or :class:`~tau2_gym.envs.spaces.TranscriptSpace` with
    ``obs_format="text"``), as every tau2 env.

    ## Rewards
    The component env's (upstream's tau2 reward at the end). Finished episodes are recorded in the mixture
    (``mixture.record``) with the task's reward (``info["tau2_reward"]`` when a ``reward_mode`` shaped the
    returned one), which the curriculum uses.

    ## Starting State
    ``reset(seed)`` seeds ``np_random``, which draws the component and then, handed to the component env, its
    task and episode seed: same seed, same sequence of components and tasks. ``options={"domain": key}`` forces a
    component; other options (``task_id``, ``task_index``) go to the component env.

    ## Episode End
    As the component env. ``info`` adds ``mix_component`` (the key) and ``split``; ``domain`` and ``task_id``
    are there as in every tau2 env.

    ## Arguments
    ``domains`` (dict of weights or list; default: every registered domain, equal weights), ``split`` ("base"),
    ``curriculum`` (None / "success" / callable), ``window``, ``floor``: see :class:`Mixture`; or ``mixture=``
    a ready (possibly shared) :class:`Mixture`. ``role``: "agent" (default) or "user" (the customer side,
    :class:`~tau2_gym.envs.user_env.UserEnv`). ``domain_kwargs={"telecom": {...}}``: per-component env
    arguments. ``profiles={"airline": "airline.profile.json", ...}`` with ``keep=("medium", "hard")``: those
    components draw only from the band of their difficulty profile (``tau2-gym profile`` of the component's split;
    :mod:`tau2_gym.episodes.band`), the others from their whole split. Every other keyword goes to every component
    env (``user``, ``judge``, ``max_steps``, ``obs_format``, ...; ``task_split`` is set from the component's split).

    ## Version History
    * v0: initial release.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(
        self,
        domains: Union[Mapping[str, float], Sequence[str], None] = None,
        split: Optional[str] = "base",
        *,
        curriculum: Any = None,
        window: int = 50,
        floor: float = 0.1,
        mixture: Optional[Mixture] = None,
        role: str = "agent",
        domain_kwargs: Optional[Mapping[str, Mapping[str, Any]]] = None,
        profiles: Optional[Mapping[str, Any]] = None,
        keep: Optional[Sequence[str]] = None,
        render_mode: Optional[str] = None,
        **env_kwargs: Any,
    ) -> None:
        super().__init__()
        if keep is not None and not profiles:
            raise TypeError("keep= selects buckets of difficulty profiles: pass profiles={component: profile} too")
        if profiles:  # each profiled component plays the band of its own profile
            merged = {k: dict(v) for k, v in (domain_kwargs or {}).items()}
            for key, prof in profiles.items():
                merged[key] = {**merged.get(key, {}), "profile": prof, **({"keep": keep} if keep is not None else {})}
            domain_kwargs = merged

        if mixture is None:
            mixture = Mixture(
                domains if domains is not None else domain_names(),
                split,
                curriculum=curriculum,
                window=window,
                floor=floor,
            )
        elif domains is not None or curriculum is not None:
            raise TypeError("pass either mixture= or domains=/curriculum=, not both")
        if role not in ("agent", "user"):
            raise ValueError(f"role={role!r}; choose 'agent' or 'user'")
        if "task_split" in env_kwargs or "domain" in env_kwargs:
            raise TypeError(
                "the mixture sets each component's domain and split: use domains= and split= (or 'domain:split' keys)"
            )

        known = set(domain_names())
        unknown = [c.key for c in mixture.components if c.domain not in known]
        if unknown:
            raise ValueError(f"unknown domain(s) in mixture components {unknown}; available: {sorted(known)}")
        extra = sorted(set(domain_kwargs or {}) - set(mixture.keys) - {c.domain for c in mixture.components})
        if extra:
            raise ValueError(f"domain_kwargs for {extra}, which are not mixture components ({mixture.keys})")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r}; choose one of {self.metadata['render_modes']}")

        config_class = UserEnvConfig if role == "user" else Tau2EnvConfig
        for c in mixture.components:  # bad arguments fail here, not at a component's first draw
            own = domain_kwargs or {}
            kw = {**env_kwargs, **dict(own.get(c.domain, {})), **dict(own.get(c.key, {}))}
            config_class.from_kwargs(domain=c.domain, task_split=c.split, **kw)
        self.mixture = mixture
        self.role = role
        self.render_mode = render_mode
        self.env_kwargs = dict(env_kwargs)
        self.domain_kwargs = {k: dict(v) for k, v in (domain_kwargs or {}).items()}
        self.envs: dict[str, EpisodeEnv] = {}
        self.active: Optional[EpisodeEnv] = None
        self.component: Optional[Component] = None
        self._recorded = False
        text = env_kwargs.get("obs_format", "messages") == "text"
        self.observation_space = TranscriptSpace() if text else MessagesSpace()
        self.action_space = _MixActionSpace(self, env_kwargs.get("parser", "auto"), env_kwargs.get("tokenizer"))

    def component_env(self, key: str) -> EpisodeEnv:
        """The (unwrapped) env of a component, built on first use."""
        c = self.mixture.component(key)
        env = self.envs.get(c.key)
        if env is None:
            kwargs: dict[str, Any] = {
                **self.env_kwargs,
                **self.domain_kwargs.get(c.domain, {}),
                **self.domain_kwargs.get(c.key, {}),
                "task_split": c.split,
            }
            if self.role == "user":
                env = UserEnv(c.domain, render_mode=self.render_mode, **kwargs)
            else:
                from gymnasium.envs.registration import load_env_creator

                cls = load_env_creator(entry_point(c.domain))
                env = cast(EpisodeEnv, cls(domain=c.domain, render_mode=self.render_mode, **kwargs))  # a Tau2Env
            self.envs[c.key] = env
        return env

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        options = dict(options or {})
        check_reset_options(options, ("domain", *Tau2Env.reset_options))
        forced = options.pop("domain", None)
        component = self.mixture.component(str(forced)) if forced is not None else self.mixture.draw(self.np_random)
        env = self.component_env(component.key)
        env.np_random = self.np_random  # the component draws its task (and episode seed) from this env's stream
        self.active, self.component = env, component
        self._recorded = False
        obs, info = env.reset(options=options or None)
        return obs, self._info(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        if self.active is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, terminated, truncated, info = self.active.step(action)
        if (terminated or truncated) and not self._recorded:  # once (a step after the end repeats it)
            assert self.component is not None
            self._recorded = True
            # the task's own reward (a reward_mode or penalty shapes `reward`; success is the task's)
            task_reward = info.get("tau2_reward", reward)
            self.mixture.record(self.component.key, reward if task_reward is None else task_reward)
        return obs, reward, terminated, truncated, self._info(info)

    def _info(self, info: dict) -> dict:
        assert self.component is not None
        info["mix_component"] = self.component.key
        info["split"] = self.component.split
        return info

    def render(self) -> Optional[str]:
        return None if self.active is None else self.active.render()

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.active = None


# ------------------------------------------------------------------------------------------ metrics


def episode_infos(infos: Any) -> list[dict]:
    """Final infos as a list of dicts: a list is kept as is; a vector env's batched info (dict of arrays with
    ``_key`` masks) is split into the entries of the episodes that ended (those with a ``termination_reason``)."""
    if isinstance(infos, Mapping):
        mask = infos.get("_termination_reason")
        if mask is None:
            return [dict(infos)] if "termination_reason" in infos else []
        out = []
        for i, ended in enumerate(np.asarray(mask)):
            if ended:
                out.append(
                    {
                        k: v[i]
                        for k, v in infos.items()
                        if not k.startswith("_") and bool(np.asarray(infos.get(f"_{k}", mask))[i])
                    }
                )
        return out
    return [i for i in infos if isinstance(i, Mapping) and "termination_reason" in i]


def _reward(info: Mapping) -> Optional[float]:
    ri = info.get("reward_info")
    if ri is None:
        return None
    value = ri.get("reward") if hasattr(ri, "get") else None
    return None if value is None else float(value)


def domain_summary(
    infos: Union[Iterable[Mapping], Mapping], rewards: Optional[Sequence[float]] = None, by: str = "domain"
) -> dict[str, dict[str, Any]]:
    """Per-domain metrics of finished episodes, plus ``"all"``.

    ``infos``: final step infos (any tau2 env's, the mixture's, a vector env's batched info -- see
    :func:`episode_infos` -- or SimulationRun dicts carrying a ``domain`` key). The reward is taken from
    ``reward_info["reward"]``, or from ``rewards`` (same order) when given; episodes not evaluated are counted
    but not averaged. Returns ``{domain: {"episodes", "scored", "mean_reward", "success_rate",
    "termination_reasons"}}`` (``mean_reward``/``success_rate`` None when nothing was scored); ``by="mix_component"``
    groups a mixture's episodes by component (``domain:split``) instead.

    The rollout's summary (:mod:`tau2_gym.cli.rollout`) covers one domain per run; this helper is how a
    mixed run (one results list per env, or the infos of a training loop) gets per-domain numbers.
    """
    items = episode_infos(infos)
    if rewards is not None and len(rewards) != len(items):
        raise ValueError(f"{len(rewards)} rewards for {len(items)} finished episodes")
    groups: dict[str, list[tuple[Optional[float], str]]] = {}
    for i, info in enumerate(items):
        r = float(rewards[i]) if rewards is not None else _reward(info)
        entry = (r, str(info.get("termination_reason")))
        groups.setdefault(str(info.get(by, info.get("domain"))), []).append(entry)
        groups.setdefault("all", []).append(entry)

    def stats(entries: list[tuple[Optional[float], str]]) -> dict[str, Any]:
        scored = [r for r, _ in entries if r is not None and not math.isnan(r)]
        reasons: dict[str, int] = {}
        for _, why in entries:
            reasons[why] = reasons.get(why, 0) + 1
        return {
            "episodes": len(entries),
            "scored": len(scored),
            "mean_reward": sum(scored) / len(scored) if scored else None,
            "success_rate": sum(1 for r in scored if r >= SUCCESS) / len(scored) if scored else None,
            "termination_reasons": dict(sorted(reasons.items())),
        }

    return {d: stats(e) for d, e in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))}
