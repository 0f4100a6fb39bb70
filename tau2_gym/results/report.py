"""One self-contained HTML report of one or more results files (``tau2-gym report``).

Why HTML and not a table in the terminal: someone debugging an agent needs to look at thousands of runs at
once and then at one conversation. The summary (per-domain metrics, pass^k with confidence intervals, the
task x trial grid, component failures, tasks that flipped between runs) is rendered here, in Python, so it
reads without JavaScript; each simulation's details (conversation, checks, DB diff) are embedded as one small
``<script type="application/json">`` block and rendered only when clicked, so a 10,000-simulation report
opens as fast as its summary (``compress=True``: gzip chunks of 64 simulations instead, several times smaller
for long conversations, unpacked by the browser on first use). The file loads nothing from the network (inline
CSS/JS/SVG, and a
Content-Security-Policy that only allows the report's own script by hash).

Metrics are ``tau2-gym eval``'s (:class:`tau2_gym.scoring.metrics.Tally`): infrastructure errors and
unscored simulations are left out of average reward and pass^k, a pass is a reward of 1.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import math
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, field_validator

from tau2_gym.core.domain import get_domain_spec, load_domain
from tau2_gym.core.integrity import resolve_integrity
from tau2_gym.core.messages import TRANSFER
from tau2_gym.core.prompts import STOP_FUNCTION_NAME
from tau2_gym.core.results_file import ResultsFileError, read_json_any
from tau2_gym.core.termination import TerminationReason
from tau2_gym.data import DataError
from tau2_gym.episodes.audit import audit
from tau2_gym.episodes.baseline import DO_NOTHING, do_nothing_baseline
from tau2_gym.players.agents.exploits import EXPLOITS
from tau2_gym.scoring.metrics import (
    BOOTSTRAP_SAMPLES,
    BOOTSTRAP_SEED,
    CI_LEVEL,
    COMPONENTS,
    RunSummary,
    SimStats,
    Tally,
    summarize,
)

__all__ = [
    "ReportError",
    "Run",
    "load_run",
    "summarise",
    "flips",
    "build_report",
    "write_report",
]

COMPONENT_NAMES = {
    "DB": "DB",
    "ENV_ASSERTION": "env assertions",
    "ACTION": "actions",
    "COMMUNICATE": "communicate",
    "NL_ASSERTION": "NL assertions",
}
CHUNK = 64  # simulations per compressed details block (build_report(compress=True))


class ReportError(ValueError):
    """An input that cannot be reported on (missing, not JSON, not a results file, unknown domain)."""


# ------------------------------------------------------------------------------------ input models


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _RewardInfo(_Model):
    reward: float
    db_check: Optional[dict] = None
    env_assertions: Optional[list[dict]] = None
    action_checks: Optional[list[dict]] = None
    nl_assertions: Optional[list[dict]] = None
    communicate_checks: Optional[list[dict]] = None
    reward_basis: Optional[list[str]] = None
    reward_breakdown: Optional[dict[str, Any]] = None
    info: Optional[dict] = None


class _Sim(_Model):
    """What the report reads of a simulation; everything else is ignored (messages are read defensively)."""

    id: Optional[str] = None
    task_id: str
    trial: Optional[int] = None
    seed: Optional[int] = None
    termination_reason: Optional[str] = None
    duration: Optional[float] = None
    agent_cost: Optional[float] = None
    user_cost: Optional[float] = None
    agent_usage: Optional[dict] = None
    user_usage: Optional[dict] = None
    reward_info: Optional[_RewardInfo] = None
    messages: list[dict] = []
    info: Optional[dict] = None

    @field_validator("task_id", mode="before")
    @classmethod
    def _id_as_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("messages", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


# ------------------------------------------------------------------------------------ one simulation


def _text(value: Any) -> Optional[str]:
    """Message content as text (OpenAI content parts joined; anything else as JSON)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        return "".join(str(p.get("text") or "") for p in value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _call(tc: Any) -> tuple[str, Any]:
    """(name, arguments) of a tool call in tau2's or OpenAI's form; arguments stay JSON values (the page
    pretty-prints them), or the raw text when an OpenAI-style argument string is not JSON."""
    if not isinstance(tc, dict):
        return "?", _text(tc) or ""
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
    name = fn.get("name")
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return str(name), args


def _check_text(kind: str, check: dict) -> str:
    if kind == "ACTION":
        a = check.get("action")
        a = a if isinstance(a, dict) else {}
        args = json.dumps(a.get("arguments"), ensure_ascii=False, sort_keys=True, default=str)
        who = a.get("requestor")
        return f"{a.get('name')}({args})" + (f" by {who}" if who and who != "assistant" else "")
    if kind == "ENV_ASSERTION":
        a = check.get("env_assertion")
        a = a if isinstance(a, dict) else {}
        text = f"{a.get('env_type', '')}.{a.get('func_name')}({json.dumps(a.get('arguments'), default=str)})"
        return (
            text
            + (f" == {a.get('assert_value')}" if a.get("assert_value") is not True else "")
            + (f": {a['message']}" if a.get("message") else "")
        )
    if kind == "COMMUNICATE":
        return f"says {check.get('info')!r}" + (f" ({check['justification']})" if check.get("justification") else "")
    if kind == "NL_ASSERTION":
        return str(check.get("nl_assertion")) + (f" ({check['justification']})" if check.get("justification") else "")
    return str(check)


def _checks(ri: _RewardInfo) -> list[tuple[str, bool, str]]:
    """Every check of a reward_info as (component, met, description)."""
    out: list[tuple[str, bool, str]] = []
    if ri.db_check is not None:
        out.append(("DB", bool(ri.db_check.get("db_match")), "agent and user DBs match the gold ones"))
    for kind, items, key in (
        ("ENV_ASSERTION", ri.env_assertions, "met"),
        ("ACTION", ri.action_checks, "action_match"),
        ("COMMUNICATE", ri.communicate_checks, "met"),
        ("NL_ASSERTION", ri.nl_assertions, "met"),
    ):
        for c in items or ():
            if isinstance(c, dict):
                out.append((kind, bool(c.get(key)), _check_text(kind, c)))
    return out


def _analyse(
    index: int, sim: _Sim, agent_tools: frozenset[str], user_tools: frozenset[str], transfer_token: str
) -> tuple[SimStats, list, list]:
    """The simulation's stats, its messages in the compact form of the details view, and its checks."""
    term = sim.termination_reason or "unknown"
    ri = sim.reward_info
    st = SimStats(
        index=index,
        task_id=sim.task_id,
        trial=sim.trial,
        reward=None if ri is None else ri.reward,
        termination=term,
        infra=term == TerminationReason.INFRASTRUCTURE_ERROR,
    )
    compact = []
    for m in sim.messages:
        role = str(m.get("role"))
        content = _text(m.get("content"))
        calls = []
        for tc in m.get("tool_calls") or ():
            name, args = _call(tc)
            requestor = tc.get("requestor") if isinstance(tc, dict) else None
            known = user_tools if (requestor or role) == "user" else agent_tools
            bad = name not in known
            st.tool_calls += 1
            if bad:
                st.hallucinated.append(name)
            if name.startswith("transfer_to_"):
                st.transfer = True
            calls.append([name, args, bad])
        error = bool(m.get("error")) if role == "tool" else False
        if error:
            st.tool_errors += 1
        if role == "user" and content and transfer_token in content:
            st.transfer = True
        compact.append([role, content, calls or None, error, m.get("requestor")])
    checks = _checks(ri) if ri is not None else []
    if ri is not None:
        st.basis = frozenset(ri.reward_basis or ())
        st.failed = {kind for kind, met, _ in checks if not met}
    return st, compact, checks


def _detail(run: Run, sim: _Sim, st: SimStats, compact: list, checks: list) -> dict[str, Any]:
    ri = sim.reward_info
    info = sim.info or {}
    diff = info.get("db_diff")
    cost = _usage_text(sim)
    error = info.get("error") or info.get("evaluation_error")
    return {
        "run": run.label,
        "task": sim.task_id,
        "trial": sim.trial,
        "seed": sim.seed,
        "id": sim.id,
        "reward": st.reward,
        "term": st.termination,
        "dur": sim.duration,
        "cost": cost,
        "error": None if error is None else str(error),
        "breakdown": ri.reward_breakdown if ri is not None else None,
        "basis": ri.reward_basis if ri is not None else None,
        "checks": [list(c) for c in checks],
        "diff": diff if isinstance(diff, list) else None,
        "diff_more": info.get("db_diff_truncated") if isinstance(info.get("db_diff_truncated"), int) else 0,
        "m": compact,
    }


def _usage_text(sim: _Sim) -> Optional[str]:
    parts = []
    for who, usage, cost in (("agent", sim.agent_usage, sim.agent_cost), ("user", sim.user_usage, sim.user_cost)):
        bits = []
        if isinstance(usage, dict):
            bits.append(
                f"{_int(usage.get('prompt_tokens'))} prompt + {_int(usage.get('completion_tokens'))} completion tokens"
            )
        if cost is not None:
            bits.append(f"${cost:.4f}")
        if bits:
            parts.append(f"{who}: " + ", ".join(bits))
    return "; ".join(parts) or None


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


# ------------------------------------------------------------------------------------ one file


@dataclass
class Run:
    """One results file, read for the report."""

    path: Path
    label: str
    domain: str
    agent: str
    user: str
    num_trials: int
    task_ids: list[str]  # tasks with simulations: in the file's task order, then ids only simulations name
    sims: list[_Sim]
    stats: list[SimStats]
    details: list[dict]
    skipped: list[str]  # why each unparseable simulation was skipped
    data_version: str = ""  # info.data_version.name, when the file records it
    timestamp: str = ""
    baseline: Optional[float] = None  # the do-nothing baseline of its tasks (info.do_nothing_baseline, else computed)
    # what each exploit of the panel earns on its tasks, under the file's reward integrity: name -> (mean, passes)
    exploits: dict[str, tuple[float, int]] = field(default_factory=dict)
    integrity: str = "upstream"  # info.reward_integrity's name (upstream when the file records none)
    first_index: int = 0  # global index of its first simulation in a report (set by build_report)
    number: int = 0  # its position among the report's runs

    def tally(self) -> Tally:
        t = Tally(domain=self.domain, num_trials=self.num_trials)
        for sim in self.sims:
            t.add(
                sim.task_id, sim.termination_reason, None if sim.reward_info is None else sim.reward_info.model_dump()
            )
        return t


def _who(info: Any) -> str:
    if not isinstance(info, dict):
        return "?"
    impl, llm = info.get("implementation"), info.get("llm")
    return f"{impl}" + (f" ({llm})" if llm else "")


def _domain_tools(name: str) -> tuple[frozenset[str], frozenset[str], str]:
    """Agent tool names (with the solo stop tool), user tool names, and the user's transfer token."""
    try:
        spec = get_domain_spec(name)
    except KeyError as exc:
        raise ReportError(str(exc.args[0]) if exc.args else f"unknown domain {name!r}") from None
    except (ImportError, AttributeError, TypeError) as exc:
        raise ReportError(f"domain {name!r} cannot be loaded: {exc}") from exc
    agent = frozenset(spec.agent_toolkit.tool_names) | spec.agent_toolkit.discoverable_names | {STOP_FUNCTION_NAME}
    user = frozenset()
    if spec.user_toolkit is not None:
        user = frozenset(spec.user_toolkit.tool_names) | spec.user_toolkit.discoverable_names
    return agent, user, TRANSFER


def load_run(path: Union[str, os.PathLike], raw: Any = None, label: Optional[str] = None) -> Run:
    """Read one results file (``.json`` / ``.json.gz``; ``raw``: its parsed JSON, if already read); unparseable
    simulations are skipped and counted, anything else wrong with the file raises :class:`ReportError`."""

    path = Path(path)
    if raw is None:
        if path.is_dir():
            raise ReportError(f"{str(path)!r} is a folder; pass a results JSON file")
        try:
            raw = read_json_any(path)
        except ResultsFileError as exc:
            raise ReportError(str(exc)) from None
    if not isinstance(raw, dict):
        raise ReportError(f"{str(path)!r}: a results file holds a JSON object, not {type(raw).__name__}")
    info = raw.get("info")
    info = info if isinstance(info, dict) else {}
    env = info.get("environment_info")
    env = env if isinstance(env, dict) else {}
    domain = env.get("domain_name")
    if not isinstance(domain, str):
        raise ReportError(f"{str(path)!r} is not a tau2 results file: missing field info.environment_info.domain_name")
    sims_raw = raw.get("simulations")
    if not isinstance(sims_raw, list):
        raise ReportError(f"{str(path)!r} is not a tau2 results file: 'simulations' must be a list")
    agent_tools, user_tools, transfer = _domain_tools(domain)
    task_ids: list[str] = []
    for t in raw.get("tasks") or ():
        if isinstance(t, dict) and isinstance(t.get("id"), (str, int)):
            task_ids.append(str(t["id"]))
    num_trials = info.get("num_trials")
    num_trials = num_trials if isinstance(num_trials, int) else 0
    dv = info.get("data_version")
    run = Run(
        path=path,
        label=label or path.name,
        domain=domain,
        agent=_who(info.get("agent_info")),
        user=_who(info.get("user_info")),
        num_trials=num_trials,
        task_ids=task_ids,
        sims=[],
        stats=[],
        details=[],
        skipped=[],
        data_version=str(dv.get("name") or "") if isinstance(dv, dict) else "",
        timestamp=str(raw.get("timestamp") or "")[:19],
    )
    seen = set(task_ids)
    for i, s in enumerate(sims_raw):
        try:
            sim = _Sim.model_validate(s)
            st, compact, checks = _analyse(len(run.sims), sim, agent_tools, user_tools, transfer)
            detail = _detail(run, sim, st, compact, checks)
        except Exception as exc:  # noqa: BLE001 - one bad simulation must not hide the rest
            run.skipped.append(f"simulation #{i}: {_first_line(exc)}")
            continue
        run.sims.append(sim)
        run.stats.append(st)
        run.details.append(detail)
        if sim.task_id not in seen:
            seen.add(sim.task_id)
            run.task_ids.append(sim.task_id)
    simulated = {s.task_id for s in run.sims}
    run.task_ids = [t for t in run.task_ids if t in simulated]  # the grid's rows: tasks that were run
    recorded = info.get("do_nothing_baseline")
    if isinstance(recorded, dict) and isinstance(recorded.get("reward"), (int, float)):
        run.baseline = float(recorded["reward"])
    else:
        run.baseline = _computed_baseline(domain, run.data_version, run.task_ids)
    rescored = info.get("rescored")
    rescored = rescored if isinstance(rescored, dict) else {}
    try:  # the setting the stored rewards carry: a re-scoring's, else the run's
        run.integrity = resolve_integrity(rescored.get("reward_integrity", info.get("reward_integrity"))).name
    except (ValueError, TypeError):
        run.integrity = "upstream"  # an unreadable record: the file is scored as upstream scores it
    run.exploits = _computed_exploits(domain, run.data_version, run.task_ids, run.integrity)
    return run


def _computed_exploits(
    domain: str, data_version: str, task_ids: Sequence[str], integrity: str
) -> dict[str, tuple[float, int]]:
    """The exploit audit of a file's tasks (stand-in judge, default reward mode), do-nothing left out (it is the
    baseline row); {} when the data or a task is not available here."""
    try:
        dom = load_domain(domain, data_version=data_version or None)
        tasks = [dom.task(t) for t in task_ids]
    except (ValueError, KeyError, OSError, DataError):
        return {}
    if not tasks:
        return {}
    names = [n for n in EXPLOITS if n != DO_NOTHING]
    rows = audit(dom, tasks, exploits=names, integrities=(integrity,))
    return {r.exploit: (r.mean, len(r.passes)) for r in rows}


def _computed_baseline(domain: str, data_version: str, task_ids: Sequence[str]) -> Optional[float]:
    """The do-nothing baseline of a file's tasks on the data it names (None when that data or a task is not
    available here: the report then shows no baseline rather than a wrong one)."""
    try:
        dom = load_domain(domain, data_version=data_version or None)
        tasks = [dom.task(t) for t in task_ids]
    except (ValueError, KeyError, OSError, DataError):
        return None
    return do_nothing_baseline(dom, tasks).mean if tasks else None


def _first_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            e = errors()[0]
            loc = ".".join(str(x) for x in e.get("loc", ()))
            return f"{loc}: {e.get('msg')}" if loc else str(e.get("msg"))
        except Exception:  # noqa: BLE001 - a best-effort shortening of the message; the full one is used
            pass
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# ------------------------------------------------------------------------------------ metrics


def summarise(run: Run, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> RunSummary:
    """The summary of one run (:func:`tau2_gym.scoring.metrics.summarize` over its simulations and their stats)."""
    sims = [s.model_dump(exclude={"messages"}) for s in run.sims]
    summary = summarize(sims, run.num_trials, run.stats, run.baseline, samples, seed)
    summary.skipped = len(run.skipped)
    return summary


@dataclass
class Flip:
    task_id: str
    outcomes: list[Optional[tuple[int, int]]]  # per run: (passes, scored trials) or None (task absent)
    direction: str  # "better" | "worse" | "changed" (relative to the first run that has the task)


def _outcome(passes: int, n: int) -> str:
    return "pass" if passes == n else ("fail" if passes == 0 else "mixed")


def flips(runs: Sequence[Run]) -> list[Flip]:
    """Tasks whose outcome (all trials pass / none pass / mixed) differs between runs of one domain."""
    per_run: list[dict[str, tuple[int, int]]] = []
    for run in runs:
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for st in run.stats:
            if st.reward is None or st.infra:
                continue
            c = counts[st.task_id]
            c[0] += st.passed
            c[1] += 1
        per_run.append({k: (v[0], v[1]) for k, v in counts.items()})
    order: dict[str, None] = {}
    for run in runs:
        order.update(dict.fromkeys(run.task_ids))
    out = []
    for tid in order:
        outcomes = [r.get(tid) for r in per_run]
        present = [o for o in outcomes if o is not None]
        if len(present) < 2 or len({_outcome(*o) for o in present}) < 2:
            continue
        first = present[0][0] / present[0][1]
        rates = [p / n for p, n in present[1:]]
        direction = (
            "better" if all(r >= first for r in rates) else "worse" if all(r <= first for r in rates) else "changed"
        )
        out.append(Flip(tid, outcomes, direction))
    return out


# ------------------------------------------------------------------------------------ HTML


_SURROGATE = re.compile("[\ud800-\udfff]")


def _e(value: Any) -> str:
    """Text for HTML (lone surrogates, which UTF-8 cannot hold, become U+FFFD)."""
    return _SURROGATE.sub("\ufffd", html.escape("" if value is None else str(value), quote=True))


def _f(x: Optional[float], digits: int = 4) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _json_text(data: Any) -> str:
    """Compact JSON, non-ASCII kept, lone surrogates (valid JSON, not encodable as UTF-8) as escapes."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _script_json(data: Any) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' survives (so neither '</script>' nor '<!--')."""
    return (
        _json_text(data)
        .replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _detail_json(detail: dict, dump: Any) -> str:
    """A simulation's details as JSON; nesting too deep to encode leaves the facts and a note, not a crash."""
    try:
        return dump(detail)
    except (RecursionError, ValueError) as exc:
        keep = {k: v for k, v in detail.items() if k not in ("m", "checks", "diff", "breakdown")}
        keep.update(
            m=[],
            checks=[],
            diff=None,
            breakdown=None,
            error=f"details not shown: {type(exc).__name__} while encoding them ({exc})"[:300],
        )
        return dump(keep)


def _asset(name: str) -> str:
    return (resources.files("tau2_gym.results") / "report_assets" / name).read_text(encoding="utf-8")


def _cell(metric: str, run: int, text: str, cls: str = "num", title: str = "", note: str = "") -> str:
    t = f' title="{_e(title)}"' if title else ""
    n = f' <span class="ci">{_e(note)}</span>' if note else ""
    return f'<td class="{cls}" data-metric="{_e(metric)}" data-run="{run}"{t}>{_e(text)}{n}</td>'


def _pass_svg(runs: Sequence[Run], summaries: Sequence[RunSummary]) -> str:
    """A small pass^k plot with the intervals as whiskers (one colour per run)."""
    ks = sorted({k for s in summaries for k in s.pass_hat})
    if not ks:
        return ""
    colours = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e")
    w, h, left, bottom, top = max(220, 70 * len(ks) + 60), 170, 40, 24, 10
    span = (w - left - 10) / max(1, len(ks))

    def y(v: float) -> float:
        return top + (1.0 - v) * (h - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="pass^k by k">']
    for v in (0.0, 0.5, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{w - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#d1d9e0"/>'
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>'
        )
    for j, k in enumerate(ks):
        parts.append(f'<text x="{left + span * (j + 0.5):.1f}" y="{h - 6}" text-anchor="middle">k={k}</text>')
    n = len(summaries)
    for i, s in enumerate(summaries):
        colour = colours[i % len(colours)]
        for j, k in enumerate(ks):
            if k not in s.pass_hat:
                continue
            v, lo, hi = s.pass_hat[k]
            x = left + span * j + span * (i + 1) / (n + 1)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y(hi):.1f}" y2="{y(lo):.1f}" stroke="{colour}"/>'
                f'<circle cx="{x:.1f}" cy="{y(v):.1f}" r="3.5" fill="{colour}">'
                f"<title>{_e(runs[i].label)}: pass^{k} = {v:.4f} [{lo:.4f}, {hi:.4f}]</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _domain_section(
    domain: str, runs: Sequence[Run], summaries: Sequence[RunSummary], samples: int, seed: int
) -> list[str]:
    out = [f'<section class="domain" data-domain="{_e(domain)}"><h2>{_e(domain)}</h2>']
    heads = "".join(f'<th class="num" title="{_e(r.path)}">{_e(r.label)}</th>' for r in runs)

    def row(name: str, metric: str, values: Iterable[str], title: str = "", notes: Iterable[str] = ()) -> str:
        values, notes = list(values), list(notes) or [""] * len(runs)
        cells = "".join(_cell(metric, r.number, v, note=n) for r, v, n in zip(runs, values, notes))
        t = f' title="{_e(title)}"' if title else ""
        return f"<tr><th{t}>{_e(name)}</th>{cells}</tr>"

    rows = [
        row("simulations", "simulations", [str(s.simulations) for s in summaries]),
        row(
            "scored",
            "scored",
            [str(s.scored) for s in summaries],
            "simulations with a reward, infrastructure errors excluded",
        ),
        row("average reward", "avg_reward", [_f(s.average) for s in summaries]),
        row(
            "do-nothing baseline",
            "baseline",
            [_f(s.baseline) for s in summaries],
            "reward of a policy that takes no action and says goodbye, on the same tasks (offline customer)",
        ),
    ]
    for name, exploit in EXPLOITS.items():
        if name == DO_NOTHING or not any(name in r.exploits for r in runs):
            continue
        values = [f"{r.exploits[name][0]:.4f}" if name in r.exploits else "n/a" for r in runs]
        notes = [f"{r.exploits[name][1]} pass ({r.integrity})" if name in r.exploits else "" for r in runs]
        title = f"exploit audit: {exploit.exploits} ({exploit.upstream}); offline, stand-in judge"
        rows.append(row(f"exploit: {name}", f"exploit:{name}", values, title, notes))
    ks = sorted({k for s in summaries for k in s.pass_hat})
    for k in ks:
        vals = []
        for s in summaries:
            v = s.pass_hat.get(k)
            vals.append("n/a" if v is None else f"{v[0]:.4f}")
        cis = []
        for s in summaries:
            v = s.pass_hat.get(k)
            cis.append("" if v is None or samples <= 0 else f"[{_f(v[1])}, {_f(v[2])}]")
        rows.append(row(f"pass^{k}", f"pass^{k}", vals, f"with its {int(CI_LEVEL * 100)}% bootstrap interval", cis))
    rows += [
        row("skipped (unparseable)", "skipped", [str(s.skipped) for s in summaries]),
        row("infrastructure errors", "infra", [str(s.infra) for s in summaries], "left out of the metrics"),
        row("not scored", "unscored", [str(s.unscored) for s in summaries], "no reward_info; left out of the metrics"),
        row(
            "NL assertions not judged",
            "nl_unjudged",
            [str(s.nl_unjudged) for s in summaries],
            "scored without an NL judge: their NL factor is the no-judge choice (reward_info.info.nl)",
        ),
        row("tool calls", "tool_calls", [str(s.tool_calls) for s in summaries]),
        row("tool errors", "tool_errors", [str(s.tool_errors) for s in summaries], "tool results flagged as errors"),
        row("simulations with tool errors", "sims_with_tool_errors", [str(s.sims_with_tool_errors) for s in summaries]),
        row(
            "hallucinated tool calls",
            "hallucinated",
            [str(s.hallucinated_calls) for s in summaries],
            "calls to names that are not tools of the domain",
        ),
        row(
            "transfers",
            "transfers",
            [str(s.transfers) for s in summaries],
            "simulations with a transfer_to_* tool call or the user's transfer token",
        ),
    ]
    for who in ("agent", "user"):
        rows.append(
            row(
                f"{who} tokens (prompt + completion)",
                f"{who}_tokens",
                ["n/a" if (t := s.tokens[who]) is None else f"{t[0]:,} + {t[1]:,}" for s in summaries],
            )
        )
        rows.append(
            row(
                f"{who} cost (USD)",
                f"{who}_cost",
                ["n/a" if s.cost[who] is None else f"{s.cost[who]:.4f}" for s in summaries],
            )
        )
    out.append('<div class="cols"><div>')
    out.append(
        f'<h3>Summary</h3><table class="summary"><thead><tr><th></th>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    intervals = (
        f"Intervals: {int(CI_LEVEL * 100)}% percentile bootstrap over tasks ({samples} resamples, seed {seed})"
        if samples > 0
        else "No intervals (--bootstrap-samples 0)"
    )
    out.append(
        f'<p class="note">pass^k as tau2 computes it (per task C(c,k)/C(n,k), averaged over tasks). '
        f"{intervals}; a pass is a reward of 1. Infrastructure errors and unscored simulations are left "
        f"out, as in <code>tau2-gym eval</code>.</p>"
    )
    for s, r in zip(summaries, runs):
        if s.hallucinated_names:
            names = ", ".join(f"{n} ({c})" for n, c in s.hallucinated_names.most_common(8))
            out.append(f'<p class="note">{_e(r.label)}: hallucinated tools: {_e(names)}</p>')
    out.append("</div><div>")
    out.append(_pass_svg(runs, summaries))
    reasons = sorted({t for s in summaries for t in s.terminations})
    trows = "".join(
        f"<tr><th>{_e(t)}</th>"
        + "".join(_cell(f"term:{t}", r.number, str(s.terminations.get(t, 0))) for r, s in zip(runs, summaries))
        + "</tr>"
        for t in reasons
    )
    out.append(
        f'<h3>Termination reasons</h3><table class="terminations"><thead><tr><th></th>{heads}</tr></thead>'
        f"<tbody>{trows}</tbody></table>"
    )
    crows = []
    for c in COMPONENTS:
        cells = "".join(
            _cell(
                f"comp:{c}",
                r.number,
                f"{s.components[c][0]}",
                "num",
                f"{s.components[c][1]} more failed it outside their reward basis",
            )
            + _cell(f"comp_out:{c}", r.number, f"{s.components[c][1]}", "num ci")
            for r, s in zip(runs, summaries)
        )
        crows.append(f"<tr><th>{_e(COMPONENT_NAMES[c])}</th>{cells}</tr>")
    sub = "".join('<th class="num">in basis</th><th class="num ci">outside</th>' for _ in runs)
    cheads = "".join(f'<th colspan="2" class="num">{_e(r.label)}</th>' for r in runs)
    out.append(
        f'<h3>Component failures</h3><table class="components"><thead><tr><th rowspan="2">component</th>'
        f"{cheads}</tr><tr>{sub}</tr></thead><tbody>{''.join(crows)}</tbody></table>"
        '<p class="note">Simulations with at least one failed check of the component: in its reward basis '
        "(the failure cost reward) and outside it (computed, not counted in the reward).</p>"
    )
    out.append("</div></div>")
    if len(runs) > 1:
        out.extend(_flip_table(runs))
    out.append('<div class="cols">' + "".join(f"<div>{_grid(r)}</div>" for r in runs) + "</div></section>")
    return out


def _flip_table(runs: Sequence[Run]) -> list[str]:
    fl = flips(runs)
    better = sum(1 for f in fl if f.direction == "better")
    worse = sum(1 for f in fl if f.direction == "worse")
    out = [
        f'<h3>Tasks that flipped between runs</h3><p class="flip-count" data-flipped="{len(fl)}" '
        f'data-better="{better}" data-worse="{worse}">{len(fl)} task(s) changed outcome (all trials pass / '
        f"none pass / mixed): {better} better, {worse} worse, {len(fl) - better - worse} mixed changes "
        f"(relative to {_e(runs[0].label)}).</p>"
    ]
    if not fl:
        return out
    heads = "".join(f'<th class="num">{_e(r.label)}</th>' for r in runs)
    rows = []
    for f in fl:
        cells = "".join(f'<td class="num">{"–" if o is None else f"{o[0]}/{o[1]}"}</td>' for o in f.outcomes)
        cls = {"better": "flip-up", "worse": "flip-down"}.get(f.direction, "")
        rows.append(
            f'<tr class="flip" data-task="{_e(f.task_id)}"><th>{_e(f.task_id)}</th>{cells}'
            f'<td class="{cls}">{_e(f.direction)}</td></tr>'
        )
    out.append(
        f'<table class="flips"><thead><tr><th>task</th>{heads}<th>change</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table><p class="note">Cells: passed / scored trials.</p>'
    )
    return out


_CELL_MARK = {"p": "✓", "f": "✗", "h": "~", "n": "?", "x": "!"}


def _grid(run: Run) -> str:
    trials = sorted({s.trial for s in run.stats if s.trial is not None})
    has_none = any(s.trial is None for s in run.stats)
    cols: list[Optional[int]] = list(trials) + ([None] if has_none else [])
    by: dict[tuple[str, Optional[int]], list[SimStats]] = defaultdict(list)
    for s in run.stats:
        by[(s.task_id, s.trial)].append(s)
    head = "".join(f'<th class="num">{"–" if c is None else c}</th>' for c in cols)
    rows = []
    for tid in run.task_ids:
        cells = []
        for c in cols:
            links = "".join(
                f'<a class="c {s.cell}" href="#s{run.first_index + s.index}" title="task {_e(tid)} · trial '
                f'{"–" if c is None else c} · reward {_f(s.reward, 2)} · {_e(s.termination)}">'
                f"{_CELL_MARK[s.cell]}</a>"
                for s in by.get((tid, c), ())
            )
            cells.append(f"<td>{links}</td>")
        rows.append(f'<tr><th class="t">{_e(tid)}</th>{"".join(cells)}</tr>')
    legend = " ".join(
        f'<a class="c {k}">{_CELL_MARK[k]}</a> {name}'
        for k, name in (
            ("p", "pass"),
            ("f", "fail"),
            ("h", "partial"),
            ("n", "not scored"),
            ("x", "infrastructure error"),
        )
    )
    return (
        f'<h3>Task × trial: {_e(run.label)}</h3><p class="note legend">{legend}. Click a cell for the '
        f'simulation.</p><div class="grid" data-run="{run.number}"><table><thead><tr><th class="t">task'
        f"</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def build_report(
    runs: Sequence[Run],
    *,
    title: Optional[str] = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
    compress: bool = False,
) -> str:
    """The report's HTML for runs read by :func:`load_run` (in order: the first is the baseline of flips).

    ``compress``: the details go in gzip-compressed chunks of :data:`CHUNK` simulations (base64), unpacked by
    the page with the browser's ``DecompressionStream`` when one is opened -- several times smaller for long
    conversations, at the price of needing a 2023+ browser; default: one plain JSON block per simulation."""
    first = 0
    for n, r in enumerate(runs):
        r.first_index = first
        r.number = n
        first += len(r.sims)
    summaries = [summarise(r, samples, seed) for r in runs]
    script = _asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    title = title or "tau2-gym report: " + ", ".join(r.label for r in runs)
    total = sum(len(r.sims) for r in runs)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">{total} simulation(s) in {len(runs)} run(s). Built by tau2-gym; no network needed.</p>',
        '<noscript><p class="warn">Per-simulation details need JavaScript; the summary does not.</p></noscript>',
    ]
    rrows = []
    for n, (r, s) in enumerate(zip(runs, summaries)):
        skipped = ""
        if r.skipped:
            more = f" (first: {r.skipped[0]})"
            skipped = f'<span class="warn">{len(r.skipped)} unparseable simulation(s) skipped{_e(more)}</span>'
        rrows.append(
            f'<tr><td>{n + 1}</td><td title="{_e(r.path)}">{_e(r.label)}</td><td>{_e(r.domain)}</td>'
            f"<td>{_e(r.data_version)}</td><td>{_e(r.timestamp)}</td>"
            f'<td>{_e(r.agent)}</td><td>{_e(r.user)}</td><td class="num">{r.num_trials}</td>'
            f'<td class="num">{s.simulations}</td><td data-run="{n}" class="skipped">{skipped}</td></tr>'
        )
    out.append(
        '<h2>Runs</h2><table class="runs"><thead><tr><th>#</th><th>file</th><th>domain</th><th>data</th>'
        "<th>written</th><th>agent</th>"
        '<th>user</th><th class="num">trials</th><th class="num">simulations</th><th>notes</th></tr></thead>'
        f"<tbody>{''.join(rrows)}</tbody></table>"
    )
    by_domain: dict[str, list[int]] = {}
    for i, r in enumerate(runs):
        by_domain.setdefault(r.domain, []).append(i)
    for domain, ids in by_domain.items():
        out.extend(_domain_section(domain, [runs[i] for i in ids], [summaries[i] for i in ids], samples, seed))
    out.append('<aside id="detail" aria-live="polite"></aside>')
    if compress:
        details = [d for r in runs for d in r.details]
        out.append(f'<script type="application/json" id="chunks">{_script_json({"size": CHUNK})}</script>')
        for k in range(0, len(details), CHUNK):
            text = "[" + ",".join(_detail_json(d, _json_text) for d in details[k : k + CHUNK]) + "]"
            data = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
            out.append(
                f'<script type="application/octet-stream" data-encoding="gzip+base64" id="c{k // CHUNK}">'
                f"{base64.b64encode(data).decode('ascii')}</script>"
            )
    else:
        for r in runs:
            out.extend(
                f'<script type="application/json" id="s{r.first_index + j}">{_detail_json(d, _script_json)}</script>'
                for j, d in enumerate(r.details)
            )
    out.append(f"<script>{script}</script></body></html>")
    return "\n".join(out)


@dataclass
class ReportResult:
    output: Path
    simulations: int
    skipped: int
    bytes: int
    runs: list[Run]


def write_report(
    paths: Sequence[Union[str, os.PathLike]],
    output: Union[str, os.PathLike],
    *,
    title: Optional[str] = None,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
    compress: bool = False,
) -> ReportResult:
    """Read every input (any unreadable one raises :class:`ReportError` before anything is written), then write
    the report atomically."""
    if not paths:
        raise ReportError("give at least one results file")
    out = Path(output)
    for p in paths:
        if out.exists() and Path(p).exists() and out.resolve() == Path(p).resolve():
            raise ReportError(f"--output would overwrite the input {str(p)!r}; choose another path")
    if out.is_dir():
        raise ReportError(f"--output {str(out)!r} is a folder; name the HTML file to write")
    labels = _labels([Path(p) for p in paths])
    runs = [load_run(p, label=label) for p, label in zip(paths, labels)]
    text = build_report(runs, title=title, samples=samples, seed=seed, compress=compress)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ReportResult(
        output=out,
        simulations=sum(len(r.sims) for r in runs),
        skipped=sum(len(r.skipped) for r in runs),
        bytes=len(text.encode("utf-8")),
        runs=runs,
    )


def _labels(paths: Sequence[Path]) -> list[str]:
    """File names, or longer paths where two inputs share a name."""
    names = [p.name for p in paths]
    counts = Counter(names)
    return [str(p) if counts[n] > 1 else n for p, n in zip(paths, names)]
