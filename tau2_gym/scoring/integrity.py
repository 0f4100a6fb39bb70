"""Reward integrity: opt-in switches that close upstream's known reward holes. The default is upstream-exact.

Why: a learner finds every way to earn reward without doing the task. The exploit panel
(:mod:`tau2_gym.players.agents.exploits`, audited by :mod:`tau2_gym.episodes.audit`) measures what each hole pays;
this switch closes the holes that can be closed without changing what the benchmark measures. Each flag is one
hole, named after upstream's tracker:

* ``nl_verdict_per_assertion`` (sierra-research/tau2-bench#554): upstream passes the NL component when the judge's
  reply carries *no* verdict (``all([])``), and awards every assertion when it carries fewer verdicts than
  assertions. Hardened: the reply must carry exactly one verdict per assertion, else the NL component fails.
* ``nl_judge_sees_tool_calls`` (#553): upstream renders a tool-calling turn into the judge prompt as
  ``assistant: None``, so the judge cannot see what the agent did and must take its word. Hardened: the calls are
  rendered (``assistant: [tool call] name({...})``).
* ``action_requires_gold_arguments`` (#568): upstream's ACTION check compares only the arguments the agent sent, so
  a call that leaves out a gold argument -- any, required ones too -- matches. Hardened: a gold argument the call
  omits fails the check, unless its gold value is the tool's own default (the call is then the same call).
* ``reference_free_tools`` (#574): banking_knowledge logs a read-only discoverable tool's call only when the task's
  gold actions call it, and ``list_discoverable_agent_tools`` lists that log: calling reads and listing reveals
  the reference solution. Hardened: tools show the agent nothing derived from the reference (the listing shows
  every discoverable tool the agent called); what is logged for scoring is unchanged.
* ``communicate_rejects_recital``: COMMUNICATE is a substring search over the agent's messages, so reciting every
  number read passes it without knowing which one answers. Hardened: an item found only in messages that state
  more than :data:`RECITAL_LIMIT` distinct numbers does not count.

Presets: ``"upstream"`` (every flag off: the benchmark's reward, for reporting) and ``"hardened"`` (every flag on:
for training). The switch itself (:class:`RewardIntegrity`, defined in :mod:`tau2_gym.core.integrity` so that the
episode settings can validate and carry it) is recorded in results provenance (``info.reward_integrity``).

>>> resolve_integrity("hardened").name
'hardened'
>>> resolve_integrity("nl_verdict_per_assertion").name
'nl_verdict_per_assertion'
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Iterable, Mapping, Optional

from tau2_gym.core.integrity import (
    HARDENED,
    INTEGRITY_PRESETS,
    RECITAL_LIMIT,
    UPSTREAM,
    RewardIntegrity,
    integrity_help,
    integrity_record,
    resolve_integrity,
)
from tau2_gym.core.messages import dumps_arguments

__all__ = [
    "HARDENED",
    "INTEGRITY_PRESETS",
    "RECITAL_LIMIT",
    "UPSTREAM",
    "RewardIntegrity",
    "communicated_in",
    "covering_checks",
    "integrity_help",
    "integrity_record",
    "is_recital",
    "judge_view",
    "needed_arguments",
    "resolve_integrity",
    "tool_defaults",
    "verdict_problem",
]

# ------------------------------------------------------------------------------------ #554: one verdict each


def _norm(text: Any) -> str:
    return " ".join(str(text).lower().split()).strip(" .'\"")


def verdict_problem(checks: list[dict[str, Any]], assertions: list[str]) -> Optional[str]:
    """Why a judge's checks do not carry exactly one verdict per assertion (None: they do).

    A verdict names its assertion by text; judges paraphrase, so only the count is required of verdicts whose text
    is not an assertion's, while two verdicts naming the same assertion are one verdict too many."""
    if len(checks) != len(assertions):
        return f"the judge gave {len(checks)} verdict(s) for {len(assertions)} NL assertion(s)"
    if len(checks) < 2:
        return None  # one verdict for one assertion
    wanted = {_norm(a) for a in assertions}
    named = [_norm(c.get("nl_assertion")) for c in checks]
    seen: set[str] = set()
    for text in named:
        if text in wanted:
            if text in seen:
                return f"the judge gave two verdicts for the NL assertion {text!r}"
            seen.add(text)
    return None


def covering_checks(checks: list[dict[str, Any]], assertions: list[str], problem: str) -> list[dict[str, Any]]:
    """One check per assertion when the judge's reply did not cover them: the verdict that names an assertion (the
    only one), else a failed check saying so -- so the partial reward counts the uncovered assertions as failed."""
    by_text: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        by_text.setdefault(_norm(c.get("nl_assertion")), []).append(c)
    out = []
    for a in assertions:
        hits = by_text.get(_norm(a), [])
        if len(hits) == 1:
            out.append(hits[0])
        else:
            out.append(
                {"nl_assertion": a, "met": False, "justification": f"reward integrity (#554): {problem}; not judged"}
            )
    return out


# ------------------------------------------------------------------------------------ #553: calls in the prompt


def _render_call(call: Any) -> str:
    try:
        text = dumps_arguments(call.arguments)  # as the agent sent them (OpenAI's JSON text)
    except (TypeError, ValueError):
        text = str(call.arguments)
    return f"[tool call] {call.name}({text})"


class _Turn:
    """A tool-calling turn as the hardened judge reads it: its text followed by its calls; any other attribute is
    the stored message's."""

    __slots__ = ("_of", "content")

    def __init__(self, of: Any, content: str) -> None:
        self._of = of
        self.content = content

    def __getattr__(self, name: str) -> Any:
        return getattr(self._of, name)


def judge_view(messages: Iterable[Any]) -> list[Any]:
    """The trajectory as the hardened judge reads it (``role: content`` lines): a turn with tool calls carries them
    in its content, after its text, so the judge sees what the agent did instead of ``None``. Other turns are
    passed as they are; the stored trajectory is never changed."""
    out = []
    for m in messages:
        calls = getattr(m, "tool_calls", None)
        if not calls:
            out.append(m)
            continue
        parts = [m.content] if isinstance(m.content, str) and m.content.strip() else []
        parts.extend(_render_call(c) for c in calls)
        out.append(_Turn(m, "\n".join(parts)))
    return out


# ------------------------------------------------------------------------------------ #568: omitted arguments

_NO_DEFAULT: Any = object()


def tool_defaults(toolkit: Any, name: str) -> dict[str, Any]:
    """The declared defaults of tool ``name``'s parameters ({} when the toolkit lacks it)."""
    func = None if toolkit is None else toolkit._tool_funcs.get(name)
    if func is None:
        return {}
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def needed_arguments(gold: Any, defaults: Mapping[str, Any]) -> frozenset:
    """The gold arguments a call must send: all of them but those whose gold value is the tool's default."""
    if type(gold) is not dict:
        return frozenset()
    return frozenset(k for k, v in gold.items() if defaults.get(k, _NO_DEFAULT) != v)


# ------------------------------------------------------------------------------------ COMMUNICATE recital

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def communicated_in(needle: str, lowered: list[str], texts: list[str]) -> Optional[int]:
    """The index of the first agent message that holds ``needle`` and is not a recital (None: none does); only
    the messages that hold it are checked for being recitals."""
    for i, text in enumerate(lowered):
        if needle in text and not is_recital(texts[i]):
            return i
    return None


def is_recital(text: str) -> bool:
    """Whether an agent message states more than :data:`RECITAL_LIMIT` distinct numbers (commas dropped first, as
    COMMUNICATE reads messages)."""
    return len(set(_NUMBER.findall(text.replace(",", "")))) > RECITAL_LIMIT
