"""Training rewards from the tau2 reward: reward modes, shaping wrappers and the infrastructure-failure test.

Why a separate place: upstream's reward (``reward_info["reward"]``) is what the benchmark reports and must stay
exact; what a learner is trained on may differ (stricter, denser, shaped). Every mode and wrapper here derives
its number from the *same* upstream record -- nothing is re-scored, so an NL judge is never asked twice -- and
the raw reward is always kept in ``info["tau2_reward"]``.

Modes (``Tau2EnvConfig.reward_mode``):

* ``"default"``: upstream's reward: the product of the components named by the task's ``reward_basis``.
* ``"strict"``: every component counts, whatever the basis: upstream's ``ALL_IGNORE_BASIS`` evaluation type
  (DB x env assertions x every gold action x every communicate item), times the NL factor when the task's basis
  names NL assertions (so strict is never above default). A skipped read-only gold action or a missing
  communicated fact gives 0 even where upstream gives 1.
* ``"partial"``: a weighted mean of per-component scores in [0, 1] (:data:`PARTIAL_WEIGHTS`): ``DB`` = the DB
  match (0/1; when the basis names DB), ``ENV_ASSERTION`` = fraction of env assertions met, ``ACTION`` =
  fraction of gold actions matched, ``COMMUNICATE`` = fraction of communicate items found, ``NL_ASSERTION`` =
  fraction of NL assertions met (when the basis names them; the no-judge factor when skipped). A component
  enters only when the task has something for it to check. Episodes that upstream does not score
  (``max_steps``, ``agent_error``, ...) get 0.0, as upstream.

Wrappers: :class:`TurnDiscount` (final reward x ``gamma ** (turns - 1)``) and :class:`InvalidFormatPenalty`
(``-penalty`` per malformed action or schema-invalid call, on the step it happens).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, SupportsFloat

import gymnasium as gym

from tau2_gym.core.actions import ActionError, to_assistant_message
from tau2_gym.core.termination import INFRASTRUCTURE

REWARD_MODES = ("default", "strict", "partial")

__all__ = [
    "REWARD_MODES",
    "PARTIAL_WEIGHTS",
    "mode_reward",
    "strict_reward",
    "partial_reward",
    "partial_components",
    "apply_reward_mode",
    "infrastructure_failure",
    "TurnDiscount",
    "InvalidFormatPenalty",
    "format_errors",
]


#: Weights of the partial-credit mode, by upstream component name (the mean runs over the components present).
PARTIAL_WEIGHTS: dict[str, float] = {
    "DB": 1.0,
    "ENV_ASSERTION": 1.0,
    "ACTION": 1.0,
    "COMMUNICATE": 1.0,
    "NL_ASSERTION": 1.0,
}

#: Endings caused by the machinery around the policy (the user simulator, the serving stack), not by the policy.
_NL = "NL_ASSERTION"


def _get(record: Any, key: str, default: Any = None) -> Any:
    try:
        value = record[key]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def _scored(reward_info: Any) -> bool:
    """Whether upstream scored the components (False: premature ending, no criteria, or no record)."""
    return reward_info is not None and _get(reward_info, "reward_basis") is not None


def _nl_factor(reward_info: Any) -> Optional[float]:
    """The NL component as upstream's default counted it (None when the basis does not name NL assertions)."""
    if _NL not in _get(reward_info, "reward_basis", ()):
        return None
    breakdown = _get(reward_info, "reward_breakdown", {})
    return float(breakdown[_NL]) if _NL in breakdown else None


def strict_reward(reward_info: Any) -> float:
    """Upstream's ``ALL_IGNORE_BASIS`` product from the components of a default (``ALL``) record."""
    if reward_info is None:
        return 0.0
    if not _scored(reward_info):
        return float(_get(reward_info, "reward", 0.0))  # premature: 0; no evaluation criteria: 1 (both modes)
    db = _get(reward_info, "db_check")
    factors = [float(db["db_reward"])] if db else []
    factors.append(float(all(c["met"] for c in _get(reward_info, "env_assertions", ()))))
    factors.append(float(all(c["action_match"] for c in _get(reward_info, "action_checks", ()))))
    factors.append(float(all(c["met"] for c in _get(reward_info, "communicate_checks", ()))))
    nl = _nl_factor(reward_info)
    if nl is not None:
        factors.append(nl)
    reward = 1.0
    for f in factors:
        reward *= f
    return reward


def _fraction(checks: Any, key: str) -> Optional[float]:
    checks = list(checks or ())
    return sum(1.0 for c in checks if c[key]) / len(checks) if checks else None


def partial_components(reward_info: Any) -> dict[str, float]:
    """Per-component scores in [0, 1] of a scored record (the components the task has something to check)."""
    if not _scored(reward_info):
        return {}
    out: dict[str, float] = {}
    db = _get(reward_info, "db_check")
    if db and "DB" in _get(reward_info, "reward_basis", ()):
        out["DB"] = float(db["db_reward"])
    for name, key, field in (
        ("ENV_ASSERTION", "env_assertions", "met"),
        ("ACTION", "action_checks", "action_match"),
        ("COMMUNICATE", "communicate_checks", "met"),
    ):
        score = _fraction(_get(reward_info, key), field)
        if score is not None:
            out[name] = score
    if _NL in _get(reward_info, "reward_basis", ()):
        score = _fraction(_get(reward_info, "nl_assertions"), "met")
        out[_NL] = score if score is not None else (_nl_factor(reward_info) or 0.0)
    return out


def partial_reward(reward_info: Any, weights: Optional[Mapping[str, float]] = None) -> float:
    """``sum(w_c * s_c) / sum(w_c)`` over :func:`partial_components` (weights: :data:`PARTIAL_WEIGHTS`)."""
    if reward_info is None:
        return 0.0
    if not _scored(reward_info):
        return float(_get(reward_info, "reward", 0.0))
    weights = PARTIAL_WEIGHTS if weights is None else weights
    parts = {c: s for c, s in partial_components(reward_info).items() if weights.get(c, 0.0) > 0}
    total = sum(weights[c] for c in parts)
    if total == 0:
        return float(_get(reward_info, "reward", 0.0))
    return sum(weights[c] * s for c, s in parts.items()) / total


def mode_reward(mode: str, reward_info: Any, reward: float) -> float:
    """The training reward of ``mode`` for an episode whose upstream reward is ``reward``."""
    if mode == "default":
        return float(reward)
    if mode == "strict":
        return strict_reward(reward_info)
    if mode == "partial":
        return partial_reward(reward_info)
    raise ValueError(f"reward_mode={mode!r}; choose one of {REWARD_MODES}")


def apply_reward_mode(mode: str, info: dict, reward_info: Any, reward: float) -> float:
    """Record the raw reward in ``info["tau2_reward"]`` (and the mode) and return the mode's reward.

    No record (evaluation failed or disabled) means no component to build on: every mode gives the raw 0.0.
    """
    info["tau2_reward"] = float(reward)
    info["reward_mode"] = mode
    if reward_info is None:
        return float(reward)
    return mode_reward(mode, reward_info, reward)


def infrastructure_failure(
    termination_reason: Optional[str], info: Optional[Mapping[str, Any]] = None
) -> Optional[str]:
    """Why an episode carries no signal about the policy (None: it does).

    ``user_error`` (the user simulator failed or broke the protocol), ``infrastructure_error`` (the run itself
    failed) and ``evaluation_error`` (scoring failed, e.g. the NL judge raised; the episode was left unjudged).
    A malformed action (``agent_error``), a step limit or a wrong answer are the policy's and stay signals.
    """
    if termination_reason in INFRASTRUCTURE:
        return str(termination_reason)
    if info and info.get("evaluation_error"):
        return "evaluation_error"
    return None


# ------------------------------------------------------------------------------------------- wrappers


class TurnDiscount(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Multiplies the final reward by ``gamma ** (turns - 1)``: the same outcome in fewer agent turns is worth
    more (``turns`` = ``step`` calls of the episode). ``info["turn_discount"]`` is the factor applied;
    ``info["tau2_reward"]`` stays the raw reward."""

    def __init__(self, env: gym.Env, gamma: float = 0.98) -> None:
        super().__init__(env)
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma={gamma!r} must be in (0, 1]")
        gym.utils.RecordConstructorArgs.__init__(self, gamma=gamma)
        self.gamma = float(gamma)
        self.turns = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.turns = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        if terminated or truncated:
            factor = self.gamma ** (self.turns - 1)
            info = dict(info, turn_discount=factor)
            reward = float(reward) * factor
        return obs, reward, terminated, truncated, info


def format_errors(action: Any, tools: Any, parser: Any = "auto", tokenizer: Any = None) -> int:
    """Malformed pieces of one action: 1 for an action the env cannot read (it ends as ``agent_error``), else
    the number of calls the tool schemas reject (unknown tool, missing required or undeclared argument)."""

    try:
        msg = to_assistant_message(action, parser=parser, tokenizer=tokenizer)
    except ActionError:
        return 1
    if not msg.has_text_content() and not msg.tool_calls:
        return 1
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    bad = 0
    for call in msg.tool_calls or ():
        params = schemas.get(call.name)
        if params is None:
            bad += 1
            continue
        args = call.arguments if isinstance(call.arguments, dict) else {}
        declared = "properties" in params or params.get("additionalProperties") is False  # tau2 tools take no **kwargs
        missing = set(params.get("required") or ()) - set(args)
        unknown = set(args) - set(params.get("properties") or ()) if declared else set()
        bad += bool(missing or unknown)
    return bad


class InvalidFormatPenalty(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Subtracts ``penalty`` per malformed action or schema-invalid call (:func:`format_errors`) from the reward
    of the step it happens on. ``info["format_errors"]`` counts them over the episode; the inner env still
    handles the action as always (an unreadable one ends the episode as ``agent_error``)."""

    def __init__(self, env: gym.Env, penalty: float = 0.1) -> None:
        super().__init__(env)
        if penalty < 0:
            raise ValueError(f"penalty={penalty!r} must be >= 0")
        gym.utils.RecordConstructorArgs.__init__(self, penalty=penalty)
        self.penalty = float(penalty)
        self.count = 0
        self._tools: list = []
        self._over = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self.count = 0
        self._tools = list(info.get("tools") or getattr(self.env.unwrapped, "tools", ()))
        self._over = bool(info.get("episode_over"))  # the next step's action is not used
        return obs, dict(info, format_errors=0)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        cfg = getattr(self.env.unwrapped, "config", None)
        n = (
            0
            if self._over
            else format_errors(action, self._tools, getattr(cfg, "parser", "auto"), getattr(cfg, "tokenizer", None))
        )
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._over = bool(terminated or truncated)
        self.count += n
        return obs, float(reward) - self.penalty * n, terminated, truncated, dict(info, format_errors=self.count)
