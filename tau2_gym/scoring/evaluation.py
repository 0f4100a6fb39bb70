"""The tau2 reward: replayed DB state x env assertions x actions x communicated info x NL judge (reference §4).

:func:`evaluate_simulation` returns the ``reward_info`` record exactly as upstream tau2-bench HEAD writes it
into a results file (same keys, same values, same notes), as a JSON-ready dict.

Where the time goes upstream (three environments built from the full DB files per evaluation), we build
one: the predicted environment is a copy-on-write view over the shared base DB, the gold environment of
a task is built once and cached, and DB equality is decided from the records either side changed
(:meth:`~tau2_gym.core.db.DBState.same_as`) instead of hashing both databases.

Scores are never silently wrong: anything that makes upstream's evaluator raise (a strict replay
mismatch, an env assertion that errors, a domain without solo mode) and any failure of the NL judge
raises :class:`EvaluationError` naming the task. Without a judge, NL assertions are never passed silently:
the factor counts as 0.0 unless the user chose ``judge="pass"``, and ``reward_info["info"]["nl"]`` says so
(``skipped``, ``counted_as``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable, Optional

from tau2_gym.core.db import DBState, Table, same_json
from tau2_gym.core.db_diff import environment_diff
from tau2_gym.core.domain import LoadedDomain
from tau2_gym.core.environment import Environment, pair_tool_calls
from tau2_gym.core.messages import AnyMessage, AssistantMessage, ToolCall, UserMessage
from tau2_gym.core.tasks import Action, RewardType, Task
from tau2_gym.core.termination import SCORED, TerminationReason
from tau2_gym.scoring import integrity as _integrity
from tau2_gym.scoring.integrity import RewardIntegrity, resolve_integrity
from tau2_gym.scoring.rebuild import gold_environment, predicted_environment

if TYPE_CHECKING:  # judges builds on this module
    from tau2_gym.scoring.judges import Judge

KNOWN_TERMINATIONS = frozenset(r.value for r in TerminationReason)

_DB = RewardType.DB.value
_EA = RewardType.ENV_ASSERTION.value
_ACTION = RewardType.ACTION.value
_COMM = RewardType.COMMUNICATE.value
_NL = RewardType.NL_ASSERTION.value
_ENV_BASES = frozenset({_DB, _EA})

NO_JUDGE_CHOICES = ("pass", "fail", "exclude")


def nl_skipped_note(counts_as: str) -> str:
    factor = "1.0 (judge='pass')" if counts_as == "pass" else "0.0"
    return f"NL assertions not evaluated: no judge configured; the NL_ASSERTION factor counts as {factor}"


class EvaluationType(str, Enum):
    """Which components are scored (upstream's names and values; ``ALL`` is what runs and re-scoring use)."""

    ENV = "env"
    COMMUNICATE = "communicate"
    ACTION = "action"
    ALL = "all"
    NL_ASSERTIONS = "nl_assertions"
    ALL_WITH_NL_ASSERTIONS = "all_with_nl_assertions"
    ALL_IGNORE_BASIS = "all_ignore_basis"
    ALL_WITH_NL_ASSERTIONS_IGNORE_BASIS = "all_with_nl_assertions_ignore_basis"


class EvaluationError(RuntimeError):
    """One simulation could not be scored; the message names the task and the cause."""


# ------------------------------------------------------------------------------------ record shape


def _reward_info(
    reward: float,
    *,
    db_check: Optional[dict] = None,
    env_assertions: Optional[list] = None,
    action_checks: Optional[list] = None,
    nl_assertions: Optional[list] = None,
    communicate_checks: Optional[list] = None,
    reward_basis: Any = (_DB,),
    reward_breakdown: Optional[dict] = None,
    info: Optional[dict] = None,
) -> dict[str, Any]:
    """A reward_info dict with upstream's field order and defaults (``reward_basis`` defaults to [DB])."""
    return {
        "reward": reward,
        "db_check": db_check,
        "env_assertions": env_assertions,
        "action_checks": action_checks,
        "nl_assertions": nl_assertions,
        "communicate_checks": communicate_checks,
        "reward_basis": None if reward_basis is None else list(reward_basis),
        "reward_breakdown": reward_breakdown,
        "info": info,
    }


def premature_reward_info(termination_reason: str) -> dict[str, Any]:
    """The record of a simulation that did not end by agent_stop / user_stop (reward 0, nothing replayed)."""
    return _reward_info(
        0.0,
        reward_basis=None,
        info={"note": f"Simulation terminated prematurely. Termination reason: {termination_reason}"},
    )


# ------------------------------------------------------------------------------ per-task cache


class _TaskPlan:
    """What scoring needs from a task that does not depend on the trajectory: built once per task."""

    __slots__ = (
        "task",
        "gold",
        "action_dumps",
        "assertion_dumps",
        "tool_types",
        "basis",
        "basis_set",
        "writes",
        "needed",
    )

    def __init__(self, domain: LoadedDomain, task: Task) -> None:
        self.task = task  # keeps id(task) from being reused while cached
        self.gold: dict[bool, Any] = {}
        crit = task.evaluation_criteria
        self.basis = [getattr(b, "value", b) for b in crit.reward_basis] if crit is not None else []
        self.basis_set = frozenset(self.basis)
        actions = crit.actions if crit is not None else None
        self.action_dumps = [a.model_dump(mode="json") for a in actions] if actions else []
        assertions = crit.env_assertions if crit is not None else None
        self.assertion_dumps = [a.model_dump(mode="json") for a in assertions] if assertions else []
        self.tool_types = [_tool_type(domain, a.name) for a in actions] if actions else []
        self.writes: Any = _UNSET
        self.needed: Any = _UNSET

    def needed_arguments(self, domain: LoadedDomain) -> list[Optional[frozenset]]:
        """Per gold action, the arguments a call must send under ``action_requires_gold_arguments`` (None: the
        action names its ``compare_args``, which upstream already compares)."""
        needed = self.needed
        if needed is _UNSET:
            crit = self.task.evaluation_criteria
            needed = [
                None
                if a.compare_args is not None
                else _integrity.needed_arguments(
                    a.arguments, _integrity.tool_defaults(_toolkit_of(domain, a.name), a.name)
                )
                for a in ((crit.actions or []) if crit is not None else [])
            ]
            self.needed = needed
        return needed

    def gold_writes(self, env: Environment) -> Optional[list[tuple[str, Any, Any]]]:
        """(requestor, name, arguments) of the calls that can change the gold state after its start: the
        history's mutating calls (replayed by ``set_state``), then the gold actions of known mutating tools
        (the others fail or only read). None when the history cannot be paired (no shortcut then)."""
        writes: Optional[list[tuple[str, Any, Any]]] = self.writes
        if writes is _UNSET:
            has, mutating = env._has_tool, env._is_mutating_tool
            try:
                writes = [
                    (c.requestor, c.name, c.arguments)
                    for c, _ in pair_tool_calls(self.task.history)
                    if has(c.name) and mutating(c.name)
                ]
            except (ValueError, TypeError):
                writes = None
            crit = self.task.evaluation_criteria
            if writes is not None and crit is not None and crit.actions:
                writes += [(a.requestor, a.name, a.arguments) for a in crit.actions if has(a.name) and mutating(a.name)]
            self.writes = writes
        return writes

    def gold_env(self, domain: LoadedDomain, strict: bool) -> Any:
        env = self.gold.get(strict)
        if env is None:
            env = gold_environment(domain, self.task, strict=strict)
            self.gold[strict] = env
        return env


_UNSET: Any = object()
_NONE: frozenset = frozenset()


def _identical(a: Any, b: Any) -> bool:
    """Same types, same order, same values all the way down: no deterministic tool can tell ``a`` from
    ``b``. Stricter than JSON equality (key order, int vs float, list vs tuple, -0.0 all count); types
    other than JSON's are never called identical (the caller then compares states)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        if len(a) != len(b):
            return False
        for (k, v), (k2, v2) in zip(a.items(), b.items()):
            if not (type(k) is type(k2) and k == k2 and _identical(v, v2)):
                return False
        return True
    if t is list or t is tuple:
        return len(a) == len(b) and all(_identical(v, w) for v, w in zip(a, b))
    if t is str or t is int or t is bool:
        return a == b
    if t is float:
        return repr(a) == repr(b)
    return False


def _same_writes(live: list[ToolCall], gold: list[tuple[str, Any, Any]]) -> bool:
    if len(live) != len(gold):
        return False
    for call, (requestor, name, arguments) in zip(live, gold):
        if not (
            _identical(call.requestor, requestor)
            and _identical(call.name, name)
            and _identical(call.arguments, arguments)
        ):
            return False
    return True


_plans: OrderedDict[tuple[int, int], _TaskPlan] = OrderedDict()
_plans_lock = threading.Lock()
_PLAN_CACHE_SIZE = 8192


def _plan(domain: LoadedDomain, task: Task) -> _TaskPlan:
    key = (id(domain), id(task))
    plan = _plans.get(key)
    if plan is not None and plan.task is task:
        return plan
    plan = _TaskPlan(domain, task)
    with _plans_lock:
        _plans[key] = plan
        while len(_plans) > _PLAN_CACHE_SIZE:
            _plans.popitem(last=False)
    return plan


def clear_cache() -> None:
    """Forget cached gold states (only needed if a Task object is mutated after being scored)."""
    with _plans_lock:
        _plans.clear()


def _toolkit_of(domain: LoadedDomain, name: str) -> Any:
    """The toolkit class that runs tool ``name`` (user tools first, as :func:`_tool_type`), or None."""
    user, agent = domain.user_toolkit, domain.agent_toolkit
    if domain.has_user_tools and user is not None and name in user._tool_funcs:
        return user
    return agent if name in agent._tool_funcs else None


def _tool_type(domain: LoadedDomain, name: str) -> Optional[str]:
    """Upstream's tool-type map: agent tools, overridden by user tools when the environment has them."""
    user, agent = domain.user_toolkit, domain.agent_toolkit
    if domain.has_user_tools and user is not None and name in user._tool_funcs:
        return user.tool_type(name).value
    if name in agent._tool_funcs:
        return agent.tool_type(name).value
    return None


# ------------------------------------------------------------------------------------ components


def _db_of(kit: Any) -> Any:
    return None if kit is None else kit.db


def _same_state(a: DBState, b: DBState) -> bool:
    """``DBState.same_as`` with a faster record comparison: only records either side changed are looked at,
    and they are compared structurally (exactly as their serialised texts would compare)."""
    for name in a.field_names():
        x, y = a.get_field(name), b.get_field(name)
        if isinstance(x, Table):
            keys = set(x.changed_keys())
            keys.update(y.changed_keys())
            for k in keys:
                inx, iny = k in x, k in y
                if inx != iny:
                    return False
                if inx and not same_json(x[k], y[k]):
                    return False
        elif x is not y and not same_json(x, y):
            return False
    return True


def _same_db(a: Any, b: Any) -> bool:
    """Hash equality of two DBs (None = no DB), decided without hashing when both are states of one base."""
    if a is None or b is None:
        return a is None and b is None
    if a is b:
        return True
    if type(a) is DBState and type(b) is DBState and a.base is b.base:
        return _same_state(a, b)
    same = getattr(a, "same_as", None)
    if same is not None and type(a) is type(b):
        return bool(same(b))
    return a.hash() == b.hash()


def _env_component(
    domain: LoadedDomain,
    task: Task,
    plan: _TaskPlan,
    messages: list[AnyMessage],
    solo: bool,
    strict: bool,
    hashes: bool,
    live_env: Optional[Environment] = None,
    diff: bool = True,
) -> dict[str, Any]:
    crit = task.evaluation_criteria
    assert crit is not None
    if crit.actions is None and crit.env_assertions is None:
        return _reward_info(
            1.0, db_check={"db_match": True, "db_reward": 1.0}, info={"note": "No expected actions or env assertions"}
        )
    writes = None
    if live_env is not None and live_env.domain is domain and live_env.solo_mode == solo and not crit.env_assertions:
        writes = live_env.replayed_writes(messages)
    if writes is not None and live_env is not None:  # (writes come only from a live env)
        predicted = live_env  # provably the state the replay would rebuild; assertions (which may change
        # a state) always get a replayed one
    else:
        predicted = predicted_environment(domain, task, messages, solo=solo, strict=strict)
    gold = plan.gold_env(domain, strict)
    gold_writes = None
    if writes is not None and not (solo and predicted.user_tools is not None):  # solo reroutes user tools
        gold_writes = plan.gold_writes(predicted)
    if writes is not None and gold_writes is not None and _same_writes(writes, gold_writes):
        db_match = True  # the same writes from the same start: the same state (deterministic tools)
    else:  # DB equality is decided before the env assertions run (they may sync and so change the state)
        db_match = _same_db(_db_of(gold.tools), _db_of(predicted.tools)) and _same_db(
            _db_of(gold.user_tools), _db_of(predicted.user_tools)
        )
    info = None
    if not db_match and diff:  # say *what* differs, before the assertions run (they may sync and so change a state)
        info = environment_diff(gold, predicted)
    if hashes:
        info = info or {}
        info["hashes"] = {
            "gold_agent": gold.get_db_hash(),
            "gold_user": gold.get_user_db_hash(),
            "predicted_agent": predicted.get_db_hash(),
            "predicted_user": predicted.get_user_db_hash(),
        }
    db_reward = 1.0 if db_match else 0.0
    checks = []
    ea_reward = 1.0
    for assertion, dump in zip(crit.env_assertions or (), plan.assertion_dumps):
        met = predicted.run_env_assertion(assertion, raise_assertion_error=False)
        checks.append({"env_assertion": dump, "met": met, "reward": 1.0 if met else 0.0})
        if not met:
            ea_reward = 0.0
    reward = 1.0
    breakdown: dict[str, float] = {}
    if _DB in plan.basis_set:
        breakdown[_DB] = db_reward
        reward *= db_reward
    if _EA in plan.basis_set:
        breakdown[_EA] = ea_reward
        reward *= ea_reward
    return _reward_info(
        reward,
        db_check={"db_match": db_match, "db_reward": db_reward},
        env_assertions=checks,
        reward_basis=plan.basis,
        reward_breakdown=breakdown,
        info=info,
    )


def _tool_calls(messages: Iterable[AnyMessage]) -> list:
    calls: list = []
    for m in messages:
        if isinstance(m, (AssistantMessage, UserMessage)) and m.tool_calls is not None:
            calls.extend(m.tool_calls)
    return calls


def _calls_by_name(calls: list) -> Optional[dict[str, list]]:
    """The calls grouped by name, in order (None when a name is not a plain ``str``: then all are tried)."""
    by_name: dict[str, list] = {}
    for c in calls:
        name = c.name
        if type(name) is not str:
            return None
        group = by_name.get(name)
        if group is None:
            by_name[name] = [c]
        else:
            group.append(c)
    return by_name


def _matches_any(action: Action, calls: Iterable[ToolCall], needed: frozenset = frozenset()) -> bool:
    """``any(action.matches(c) for c in calls)``, without building two dicts per call in the usual case
    (no ``compare_args``: every argument the call sent must equal the gold one). ``needed``: gold arguments a
    matching call must also send (reward integrity, #568; only for actions without ``compare_args``)."""
    if action.compare_args is not None:
        return any(action.matches(c) for c in calls)
    name, gold = action.name, action.arguments
    for c in calls:
        args = c.arguments
        if type(args) is not dict or type(gold) is not dict:
            if not needed and action.matches(c):
                return True
            continue
        if c.name != name or (needed and not needed <= args.keys()):
            continue
        for k, v in args.items():  # dict equality of {k: args[k]} and {k: gold[k]} over the call's keys
            if k not in gold:
                break
            w = gold[k]
            if v is not w and not v == w:
                break
        else:
            return True
    return False


def _action_component(
    domain: LoadedDomain,
    task: Task,
    plan: _TaskPlan,
    messages: list[AnyMessage],
    solo: bool,
    integrity: RewardIntegrity = _integrity.UPSTREAM,
) -> dict[str, Any]:
    crit = task.evaluation_criteria
    assert crit is not None
    actions = crit.actions
    if not actions:
        return _reward_info(1.0, info={"note": "No actions to evaluate"}, reward_breakdown={_ACTION: 1.0})
    calls = _tool_calls(messages)
    # upstream reads tool types off an environment built in the run's mode; when that fails (solo in a
    # domain without solo mode) it reports no types
    tool_types = plan.tool_types if (not solo or domain.spec.solo_supported) else [None] * len(actions)
    by_name = _calls_by_name(calls)
    needed = plan.needed_arguments(domain) if integrity.action_requires_gold_arguments else None
    checks = []
    all_met = True
    for i, (action, dump, tool_type) in enumerate(zip(actions, plan.action_dumps, tool_types)):
        # Action.matches is False for another name, so only the calls of the action's name are tried
        candidates = calls if by_name is None or type(action.name) is not str else by_name.get(action.name, ())
        keys = needed[i] if needed is not None else None  # #568 (hardened): a call omitting one is not this action
        found = _matches_any(action, candidates, keys or _NONE)
        all_met = all_met and found
        checks.append(
            {"action": dump, "action_match": found, "action_reward": 1.0 if found else 0.0, "tool_type": tool_type}
        )
    reward = 1.0 if all_met else 0.0
    return _reward_info(reward, action_checks=checks, reward_breakdown={_ACTION: reward})


def _communicate_component(
    task: Task, messages: list[AnyMessage], integrity: RewardIntegrity = _integrity.UPSTREAM
) -> dict[str, Any]:
    crit = task.evaluation_criteria
    assert crit is not None
    wanted = crit.communicate_info
    if not wanted:
        return _reward_info(1.0, info={"note": "No communicate_info to evaluate"}, reward_breakdown={_COMM: 1.0})
    texts = [
        m.content for m in messages if isinstance(m, AssistantMessage) and m.content is not None and m.content.strip()
    ]
    lowered = [t.lower().replace(",", "") for t in texts]
    recitals = integrity.communicate_rejects_recital
    checks = []
    all_met = True
    for info_str in wanted:
        needle = info_str.lower()
        if recitals:  # a message stating a host of numbers does not communicate one of them
            hit = _integrity.communicated_in(needle, lowered, texts)
        else:
            hit = next((i for i, t in enumerate(lowered) if needle in t), None)
        if hit is None:
            all_met = False
            checks.append(
                {"info": info_str, "met": False, "justification": f"Information '{info_str}' not communicated."}
            )
        else:
            checks.append(
                {
                    "info": info_str,
                    "met": True,
                    "justification": f"Information '{info_str}' communicated in the message:\n '{texts[hit]}'",
                }
            )
    reward = 1.0 if all_met else 0.0
    return _reward_info(reward, communicate_checks=checks, reward_breakdown={_COMM: reward})


def _nl_component(
    domain: LoadedDomain,
    task: Task,
    messages: list[AnyMessage],
    judge: Optional[Judge],
    integrity: RewardIntegrity = _integrity.UPSTREAM,
) -> dict[str, Any]:
    crit = task.evaluation_criteria
    assert crit is not None
    assertions = crit.nl_assertions
    if not assertions:
        return _reward_info(
            1.0, nl_assertions=[], info={"note": "No nl_assertions to evaluate"}, reward_breakdown={_NL: 1.0}
        )
    if judge is None or getattr(judge, "skip", False):
        counts_as = getattr(judge, "counts_as", "fail")
        reward = 1.0 if counts_as == "pass" else 0.0
        return _reward_info(
            reward,
            info={"note": nl_skipped_note(counts_as), "skipped": True, "counted_as": counts_as},
            reward_breakdown={_NL: reward},
        )
    if integrity.nl_judge_sees_tool_calls:
        messages = _integrity.judge_view(messages)
    try:
        checks = judge.assess(messages, list(assertions), source=domain.source)
    except EvaluationError:
        raise
    except Exception as exc:
        raise EvaluationError(
            f"NL judge {getattr(judge, 'name', type(judge).__name__)!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    problem = _integrity.verdict_problem(checks, list(assertions)) if integrity.nl_verdict_per_assertion else None
    if problem is not None:  # #554: a reply that does not judge every assertion fails the component
        checks = _integrity.covering_checks(checks, list(assertions), problem)
        info = {"note": f"reward integrity: {problem}; the NL_ASSERTION factor is 0.0", "integrity": problem}
        return _reward_info(0.0, nl_assertions=checks, info=info, reward_breakdown={_NL: 0.0})
    reward = 1.0 if all(c["met"] for c in checks) else 0.0
    return _reward_info(reward, nl_assertions=checks, reward_breakdown={_NL: reward})


# ------------------------------------------------------------------------------------ entry point


def evaluate_simulation(
    domain: LoadedDomain,
    task: Task,
    messages: list[AnyMessage],
    termination_reason: Any,
    *,
    solo: bool = False,
    judge: Optional[Judge] = None,
    strict: bool = True,
    evaluation_type: EvaluationType | str = EvaluationType.ALL,
    hashes: bool = False,
    live_env: Optional[Environment] = None,
    diagnostics: Optional[dict[str, Any]] = None,
    integrity: Any = None,
) -> dict[str, Any]:
    """Score one simulation exactly as upstream's ``evaluate_simulation`` (HEAD) does.

    ``messages`` is the stored trajectory (task history included); ``solo`` is the mode it ran in;
    ``judge`` grades NL assertions (None = skip them, noted in ``info``); ``strict=False`` is upstream's
    lenient re-grading replay. ``hashes=True`` adds the four DB hashes to ``info["env"]`` (diagnostics;
    it costs full serialisations). ``live_env`` is the environment the episode ran in, if at hand: when it
    provably equals what replaying ``messages`` rebuilds (:meth:`Environment.replays_to`), the replay is
    skipped -- same result. ``diagnostics``, if given, receives what this package adds beside upstream's record
    (``db_diff`` / ``db_diff_truncated``: the field-level difference of a failed DB check); the returned
    reward_info is upstream's, exactly. ``integrity`` (:func:`~tau2_gym.scoring.integrity.resolve_integrity`: None
    or ``"upstream"`` = upstream-exact, ``"hardened"``, flags) closes upstream's known reward holes; what it changed
    is noted in the components' ``info``. Raises :class:`EvaluationError` when upstream would raise or the judge
    fails.
    """
    integrity = resolve_integrity(integrity)
    reason = getattr(termination_reason, "value", termination_reason)
    if reason not in KNOWN_TERMINATIONS:
        raise EvaluationError(
            f"task {task.id!r}: unknown termination_reason {reason!r}; expected one of {sorted(KNOWN_TERMINATIONS)}"
        )
    if reason not in SCORED:
        return premature_reward_info(reason)
    crit = task.evaluation_criteria
    if crit is None:
        return _reward_info(1.0, reward_basis=None, info={"note": "No evaluation criteria"})
    try:
        etype = EvaluationType(evaluation_type)
    except ValueError:
        raise EvaluationError(
            f"unknown evaluation type {evaluation_type!r}; expected one of {[e.value for e in EvaluationType]}"
        ) from None
    try:
        return _without_diagnostics(
            _evaluate(
                domain, task, messages, etype, solo, judge, strict, hashes, live_env, integrity, diagnostics is not None
            ),
            diagnostics,
        )
    except EvaluationError as exc:
        if str(exc).startswith("task "):
            raise
        raise type(exc)(f"task {task.id!r}: {exc}") from exc  # keeps JudgeError etc. recognisable
    except Exception as exc:
        raise EvaluationError(f"task {task.id!r}: {type(exc).__name__}: {exc}") from exc


DIAGNOSTIC_KEYS = ("db_diff", "db_diff_truncated")


def _without_diagnostics(reward_info: dict[str, Any], diagnostics: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Upstream's reward_info: our own diagnostics (the field-level DB diff) move to ``diagnostics``."""
    info = reward_info.get("info")
    if not isinstance(info, dict) or not any(k in info for k in DIAGNOSTIC_KEYS):
        return reward_info
    info = dict(info)
    moved = {k: info.pop(k) for k in DIAGNOSTIC_KEYS if k in info}
    if diagnostics is not None:
        diagnostics.update(moved)
    return {**reward_info, "info": info or None}


def _evaluate(
    domain: LoadedDomain,
    task: Task,
    messages: list[AnyMessage],
    etype: EvaluationType,
    solo: bool,
    judge: Optional[Judge],
    strict: bool,
    hashes: bool,
    live_env: Optional[Environment] = None,
    integrity: RewardIntegrity = _integrity.UPSTREAM,
    diff: bool = True,
) -> dict[str, Any]:
    plan = _plan(domain, task)
    if etype is EvaluationType.ENV:
        return _env_component(domain, task, plan, messages, solo, strict, hashes, live_env, diff)
    if etype is EvaluationType.NL_ASSERTIONS:
        return _nl_component(domain, task, messages, judge, integrity)
    if etype is EvaluationType.COMMUNICATE:
        return _communicate_component(task, messages, integrity)
    if etype is EvaluationType.ACTION:
        return _action_component(domain, task, plan, messages, solo, integrity)

    ignore_basis = etype in _IGNORE_BASIS
    # upstream does not forward strict_replay in the ignore-basis branch: its replay is always strict
    strict = True if ignore_basis else strict
    env = _env_component(domain, task, plan, messages, solo, strict, hashes, live_env, diff)
    action = _action_component(domain, task, plan, messages, solo, integrity)
    comm = _communicate_component(task, messages, integrity)
    basis = plan.basis_set
    run_nl = _runs_nl(etype, basis, domain.source.semantics.nl_under_all)
    nl = _nl_component(domain, task, messages, judge, integrity) if run_nl else None

    reward = 1.0
    breakdown: dict[str, float] = {}

    def include(component: dict[str, Any]) -> None:
        nonlocal reward
        if component["reward_breakdown"] is not None:
            breakdown.update(component["reward_breakdown"])
        reward *= component["reward"]

    if ignore_basis:
        for component in (env, action, comm, nl):
            if component is not None:
                include(component)
        reward_basis = [_DB, _EA, _ACTION, _COMM] + ([_NL] if nl is not None else [])
    else:
        evaluated = {_DB, _EA, _ACTION, _COMM} | ({_NL} if nl is not None else set())
        missing = basis - evaluated
        if missing:
            raise EvaluationError(
                f"Task reward_basis includes {sorted(missing)} but these were not evaluated. "
                f"evaluation_type={etype.value}"
            )
        if basis & _ENV_BASES:
            include(env)
        if _ACTION in basis:
            include(action)
        if _NL in basis and nl is not None:  # (never None here: a missing basis raised above)
            include(nl)
        if _COMM in basis:
            include(comm)
        reward_basis = plan.basis
    info = {
        "env": env["info"],
        "nl": nl["info"] if nl is not None else None,
        "communicate": comm["info"],
        "action": action["info"],
    }
    if env["info"] and "db_diff" in env["info"]:  # one place for the diff, whatever the evaluation type
        env_info = info["env"] = dict(env["info"])
        for key in ("db_diff", "db_diff_truncated"):
            if key in env_info:
                info[key] = env_info.pop(key)
        info["env"] = env_info or None
    return _reward_info(
        reward,
        db_check=env["db_check"],
        env_assertions=env["env_assertions"],
        action_checks=action["action_checks"],
        nl_assertions=nl["nl_assertions"] if nl is not None else None,
        communicate_checks=comm["communicate_checks"],
        reward_basis=reward_basis,
        reward_breakdown=breakdown,
        info=info,
    )


_IGNORE_BASIS = (EvaluationType.ALL_IGNORE_BASIS, EvaluationType.ALL_WITH_NL_ASSERTIONS_IGNORE_BASIS)
_WITH_NL = (
    EvaluationType.ALL_WITH_NL_ASSERTIONS,
    EvaluationType.ALL_WITH_NL_ASSERTIONS_IGNORE_BASIS,
    EvaluationType.NL_ASSERTIONS,
)


def _runs_nl(etype: EvaluationType, basis: frozenset, nl_under_all: bool) -> bool:
    """Whether this evaluation type judges NL assertions (``all``: when the basis names them, upstream 1.0)."""
    if etype in _WITH_NL:
        return True
    return etype is EvaluationType.ALL and nl_under_all and _NL in basis


def needs_nl_judge(
    domain: LoadedDomain, task: Task, evaluation_type: EvaluationType | str = EvaluationType.ALL
) -> bool:
    """Whether scoring ``task`` asks a judge (its NL assertions are judged and there are some)."""
    crit = task.evaluation_criteria
    if crit is None or not crit.nl_assertions:
        return False
    basis = frozenset(getattr(b, "value", b) for b in crit.reward_basis)
    return _runs_nl(EvaluationType(evaluation_type), basis, domain.source.semantics.nl_under_all)


def is_success(reward_info: Optional[dict[str, Any]]) -> bool:
    """tau2's success test: reward within 1e-6 of 1."""
    return reward_info is not None and abs(float(reward_info["reward"]) - 1.0) <= 1e-6


__all__ = [
    "evaluate_simulation",
    "EvaluationType",
    "EvaluationError",
    "premature_reward_info",
    "is_success",
    "clear_cache",
    "needs_nl_judge",
    "nl_skipped_note",
    "NO_JUDGE_CHOICES",
]
