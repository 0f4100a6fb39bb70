"""The reward-integrity switch: which of upstream's known reward holes are closed (default: none, upstream-exact).

The switch is data that every layer reads -- the episode settings validate and carry it, the turn loop builds
reference-free tools from it, results provenance records it -- so it is defined here; what each flag does to a
score lives in :mod:`tau2_gym.scoring.integrity` (the holes, their upstream issues and the hardened rules).

>>> resolve_integrity("hardened").name
'hardened'
>>> resolve_integrity("nl_verdict_per_assertion").name
'nl_verdict_per_assertion'
>>> resolve_integrity("hardened,-reference_free_tools").reference_free_tools
False
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any, Mapping, Union

from tau2_gym.core.config import describe

__all__ = [
    "HARDENED",
    "INTEGRITY_PRESETS",
    "RECITAL_LIMIT",
    "UPSTREAM",
    "RewardIntegrity",
    "integrity_help",
    "integrity_record",
    "resolve_integrity",
]

#: more distinct numbers than this in one agent message make it a recital (communicate_rejects_recital)
RECITAL_LIMIT = 30


@dataclass(frozen=True)
class RewardIntegrity:
    """Which of upstream's reward holes are closed (every flag off = upstream-exact). ``print(x.describe())``."""

    nl_verdict_per_assertion: bool = field(
        default=False,
        metadata={"help": "#554: the judge must give exactly one verdict per NL assertion, else the NL factor is 0."},
    )
    nl_judge_sees_tool_calls: bool = field(
        default=False,
        metadata={"help": "#553: tool calls are rendered into the judge prompt (upstream: 'assistant: None')."},
    )
    action_requires_gold_arguments: bool = field(
        default=False,
        metadata={"help": "#568: an ACTION check fails on a gold argument the call omits (unless it is the default)."},
    )
    reference_free_tools: bool = field(
        default=False,
        metadata={"help": "#574: tools reveal nothing derived from the reference solution (banking's tool listing)."},
    )
    communicate_rejects_recital: bool = field(
        default=False,
        metadata={"help": f"COMMUNICATE ignores messages stating more than {RECITAL_LIMIT} distinct numbers."},
    )

    @classmethod
    def flag_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @property
    def name(self) -> str:
        """``upstream``, ``hardened``, the flags that are on (``a,b``), or ``hardened,-c`` when most are on -- what
        :func:`resolve_integrity` reads back."""
        for preset, value in INTEGRITY_PRESETS.items():
            if value == self:
                return preset
        on = [n for n in self.flag_names() if getattr(self, n)]
        off = [n for n in self.flag_names() if not getattr(self, n)]
        return ",".join(["hardened", *(f"-{n}" for n in off)]) if len(on) > len(off) else ",".join(on)

    @property
    def upstream(self) -> bool:
        return not any(getattr(self, n) for n in self.flag_names())

    def to_dict(self) -> dict[str, Any]:
        """The provenance record: the name and every flag."""
        return {"name": self.name, **{n: getattr(self, n) for n in self.flag_names()}}

    def describe(self) -> str:
        return describe(self)


UPSTREAM = RewardIntegrity()
HARDENED = RewardIntegrity(**{n: True for n in RewardIntegrity.flag_names()})
INTEGRITY_PRESETS: dict[str, RewardIntegrity] = {"upstream": UPSTREAM, "hardened": HARDENED}


def integrity_help() -> str:
    """What ``--reward-integrity`` accepts."""
    lines = [
        "--reward-integrity upstream | hardened | FLAG[,FLAG...] | hardened,-FLAG  (default upstream: the "
        "benchmark's reward, exactly)"
    ]
    for f in fields(RewardIntegrity):
        lines.append(f"  {f.name}: {f.metadata['help']}")
    return "\n".join(lines)


def _unknown(value: Any) -> ValueError:
    return ValueError(
        f"unknown reward_integrity {value!r}; choose 'upstream', 'hardened', a RewardIntegrity, or flags from "
        f"{RewardIntegrity.flag_names()} (comma-separated, after a preset: '-flag' turns one off)"
    )


def resolve_integrity(value: Union[None, str, RewardIntegrity, Mapping[str, Any]] = None) -> RewardIntegrity:
    """The switch from ``None`` (upstream), a preset name, comma-separated flag names, a mapping of flags (a
    results file's ``info.reward_integrity``) or a :class:`RewardIntegrity`; anything else is one error naming the
    valid values."""
    if value is None:
        return UPSTREAM
    if isinstance(value, RewardIntegrity):
        return value
    if isinstance(value, str):
        return _from_text(value)
    if isinstance(value, Mapping):
        flags = {k: v for k, v in value.items() if k != "name"}
        if not flags and isinstance(value.get("name"), str):  # a record that names its setting only
            return resolve_integrity(value["name"])
        unknown = set(flags) - set(RewardIntegrity.flag_names())
        if unknown or not all(isinstance(v, bool) for v in flags.values()):
            raise _unknown(dict(value))
        return replace(UPSTREAM, **flags)
    raise _unknown(value)


@lru_cache(maxsize=64)
def _from_text(value: str) -> RewardIntegrity:
    """A setting from its text (scoring resolves the episode's setting per episode: parsed once per text)."""
    if value in INTEGRITY_PRESETS:
        return INTEGRITY_PRESETS[value]
    tokens = [t.strip() for t in value.split(",") if t.strip()]
    if not tokens:
        raise _unknown(value)
    preset = tokens[0] in INTEGRITY_PRESETS
    flags = dict(vars(INTEGRITY_PRESETS[tokens[0]])) if preset else {}
    for token in tokens[1:] if preset else tokens:
        name = token[1:] if token.startswith("-") else token
        if name not in RewardIntegrity.flag_names():
            raise _unknown(value)
        flags[name] = not token.startswith("-")
    return replace(UPSTREAM, **flags)


def integrity_record(value: Any) -> dict[str, Any]:
    """What results provenance records for a setting (``info.reward_integrity``): its name and every flag."""
    return resolve_integrity(value).to_dict()
