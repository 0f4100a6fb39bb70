"""Re-scoring tau2 results files (what ``tau2-gym eval`` runs): every simulation is graded again with this
package's evaluator against the chosen data version, in place, and tallied; what a file says about itself (the
data it records, stale embedded tasks, missing metadata) is reported beside the scores."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from tau2_gym.core.domain import load_domain
from tau2_gym.core.integrity import UPSTREAM, RewardIntegrity, resolve_integrity
from tau2_gym.core.messages import messages_to_dicts
from tau2_gym.core.results_file import (
    ScoringSimulation,
    fill_run_metadata,
    format_problems,
    is_openai_message,
    read_for_scoring,
    solo_mode,
)
from tau2_gym.core.tasks import Task
from tau2_gym.runner.progress import progress as _progress
from tau2_gym.scoring.evaluation import DIAGNOSTIC_KEYS, evaluate_simulation, needs_nl_judge
from tau2_gym.scoring.judges import Judge
from tau2_gym.scoring.metrics import EXCLUDED, Tally

__all__ = [
    "ERROR_KEY",
    "EXCLUDED_KEY",
    "FileCheck",
    "InputError",
    "plan_outputs",
    "rescore_file",
    "rescoring_integrity",
]

ERROR_KEY = "evaluation_error"
EXCLUDED_KEY = "evaluation_excluded"


class InputError(Exception):
    """A results file cannot be read or is not a tau2 results file."""


def _grading_view(task: Any) -> Any:
    """What of a task decides its grade (criteria and initial state, without message timestamps)."""
    crit = task.evaluation_criteria.model_dump(mode="json") if task.evaluation_criteria is not None else None
    st = task.initial_state
    init = None
    if st is not None:
        init = [
            st.initialization_data.model_dump(mode="json") if st.initialization_data is not None else None,
            [a.model_dump(mode="json") for a in st.initialization_actions or ()],
            [(m.role, m.content) for m in st.message_history or ()],
        ]
    return crit, init


@dataclass
class FileCheck:
    """What a file says about the data that produced it, against the data re-scoring it."""

    recorded: Optional[str]  # the data version the file records (None: it records none)
    stale_tasks: list[str] = field(default_factory=list)  # embedded tasks that grade differently from the data's
    fresh_missing: list[str] = field(default_factory=list)  # --fresh-tasks: ids the data does not have
    no_tasks: bool = False  # the file embeds no tasks: graded with the data's
    filled: list[str] = field(default_factory=list)  # run metadata the file lacked, filled with placeholders
    mode_note: Optional[str] = None  # how solo/normal mode was decided when the file does not record it
    openai_sims: int = 0  # simulations whose messages were in OpenAI chat form
    problems: list[tuple[str, str]] = field(default_factory=list)  # schema errors of tasks and simulations


def _stored_reward(reward_info: Any) -> Optional[float]:
    value = reward_info.get("reward") if isinstance(reward_info, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rescore_file(
    raw: Any,
    *,
    data_dir: Optional[str],
    judge: Judge,
    strict: Optional[bool],
    evaluation_type: str,
    progress: bool = False,
    label: str = "",
    data_version: Optional[str] = None,
    fresh_tasks: bool = False,
    check: Optional[FileCheck] = None,
    integrity: Any = None,
) -> Tally:
    """Re-score every simulation of a parsed results file in place; return its tally.

    Only what scoring needs is required (:func:`tau2_gym.core.results_file.read_for_scoring`); missing run metadata is
    filled in (``check.filled`` says what) and OpenAI-format messages are rewritten in tau2's form.
    ``strict=None`` takes the data version's ``evaluate-trajs`` default (non-strict for tau2-bench 1.0.1).
    ``check`` (if given) is filled with what the file says about itself (see :class:`FileCheck`).
    ``integrity``: the reward-integrity setting to score with (None: upstream-exact). ``reference_free_tools``
    describes how the episodes were played, not how they are scored: it is kept as the file records it
    (``info.reward_integrity``, the play's record, is left as it is; ``info.rescored.reward_integrity`` is the
    setting the new rewards carry).
    """
    if not isinstance(raw, dict):
        raise InputError(f"a results file holds a JSON object, not {type(raw).__name__}")
    if "simulations" not in raw and ("simulation_index" in raw or "format_version" in raw):
        raise InputError(
            "directory-format results (a simulations/ folder) are not supported; pass a single-file results JSON"
        )
    read = read_for_scoring(raw)  # SchemaError (a ResultsFileError) lists every problem at once
    domain_name = read.domain_name
    check = check if check is not None else FileCheck(recorded=None)
    check.problems = read.problems
    solo, check.mode_note = solo_mode(raw, read)
    try:
        domain = load_domain(domain_name, data_dir, data_version)
    except Exception as exc:
        raise InputError(f"domain {domain_name!r}: {exc}") from exc
    if strict is None:
        strict = domain.source.semantics.rescore_strict
    recorded = raw["info"].get("data_version")
    check.recorded = recorded.get("version") if isinstance(recorded, dict) else None

    try:
        current = {t.id: t for t in domain.tasks(None, None)}
    except Exception:  # noqa: BLE001 - the data's task file is not needed unless --fresh-tasks
        current = {}
    tasks: dict[str, Any] = dict(read.tasks or {})
    if read.tasks is None:  # no embedded tasks: the data's definitions are the only ones there are
        if not current:
            raise InputError(f"the file embeds no tasks and the data has no task definitions for {domain_name!r}")
        check.no_tasks = True
        tasks = dict(current)
    for tid, task in tasks.items():
        if isinstance(task, Task) and tid in current and _grading_view(task) != _grading_view(current[tid]):
            check.stale_tasks.append(tid)
    if fresh_tasks:
        if not current:
            raise InputError(f"--fresh-tasks: the data has no task definitions for {domain_name!r}")
        check.fresh_missing = [tid for tid in tasks if tid not in current]
        tasks = {tid: current.get(tid, task) for tid, task in tasks.items()}

    scoring = rescoring_integrity(integrity, raw["info"].get("reward_integrity"))
    num_trials = raw["info"].get("num_trials") if isinstance(raw["info"].get("num_trials"), int) else 0
    check.filled = fill_run_metadata(raw, solo)
    tally = Tally(domain=domain_name, num_trials=num_trials or 0)
    exclude = getattr(judge, "skip", False) and getattr(judge, "counts_as", None) == "exclude"
    sims = raw["simulations"]
    for index, sim in enumerate(_progress(sims, label or domain_name, progress)):
        parsed = read.simulations[index]
        if not isinstance(sim, dict):  # counted, and listed among the schema errors: never skipped silently
            tally.add("", None, None)
            continue
        task_id = str(sim.get("task_id"))
        info = sim.get("info") if isinstance(sim.get("info"), dict) else {}
        for key in (ERROR_KEY, EXCLUDED_KEY, *DIAGNOSTIC_KEYS):
            info.pop(key, None)
        old = _stored_reward(sim.get("reward_info"))
        try:
            if not isinstance(parsed, ScoringSimulation):
                raise ValueError("the simulation does not validate:\n" + format_problems(parsed, limit=5))
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(f"task {task_id!r} is not among the file's tasks")
            if not isinstance(task, Task):
                raise ValueError(f"task {task_id!r} does not validate:\n" + format_problems(task, limit=5))
            if sim.get("ticks") is not None or sim.get("mode", "half_duplex") == "full_duplex":
                raise ValueError("full-duplex (voice) simulations are not supported")
            messages = parsed.messages or []
            if any(is_openai_message(m) for m in sim.get("messages") or ()):
                sim["messages"] = messages_to_dicts(messages)  # the output is a tau2 results file
                check.openai_sims += 1
            if exclude and needs_nl_judge(domain, task, evaluation_type):
                sim["reward_info"] = None
                info[EXCLUDED_KEY] = "its reward needs an NL-assertion judge (--judge exclude)"
                sim["info"] = info
                tally.add(task_id, sim.get("termination_reason"), EXCLUDED)
                continue
            sim["reward_info"] = evaluate_simulation(
                domain,
                task,
                messages,
                parsed.termination_reason.value,
                solo=solo,
                judge=judge,
                strict=strict,
                evaluation_type=evaluation_type,
                diagnostics=info,
                integrity=scoring,
            )
        except Exception as exc:  # noqa: BLE001 - one bad simulation must not stop the file
            sim["reward_info"] = None
            info[ERROR_KEY] = f"{type(exc).__name__}: {exc}"
            tally.unscored.append((index, str(task_id), sim.get("trial"), info[ERROR_KEY]))
        if info or isinstance(sim.get("info"), dict):
            sim["info"] = info  # an upstream ``info: null`` without notes stays null
        tally.add(task_id, sim.get("termination_reason"), sim.get("reward_info"))
        tally.note(index, task_id, sim.get("trial"), old, sim.get("reward_info"), info)
    raw["info"]["rescored"] = {
        "by": "tau2-gym eval",
        "data_version": domain.data_version_record(),
        "strict_replay": strict,
        "fresh_tasks": fresh_tasks or check.no_tasks,
        "evaluation_type": evaluation_type,
        "judge": getattr(judge, "name", type(judge).__name__),
        "reward_integrity": scoring.to_dict(),
    }
    tally.data = domain.source
    return tally


def rescoring_integrity(requested: Any, recorded: Any) -> RewardIntegrity:
    """The setting a file is re-scored with: ``requested``'s scoring flags, and the file's own
    ``reference_free_tools`` (how its episodes were played; upstream when it records none or an unreadable one)."""
    wanted = resolve_integrity(requested)
    try:
        played = resolve_integrity(recorded) if isinstance(recorded, (dict, str)) else UPSTREAM
    except ValueError:
        played = UPSTREAM
    return replace(wanted, reference_free_tools=played.reference_free_tools)


def plan_outputs(inputs: list[Path], output: Optional[str]) -> Sequence[Optional[Path]]:
    """Where each input's re-scored copy goes (see the module docstring); errors before any work starts."""
    if output is None:
        return [None] * len(inputs)
    out = Path(output)
    as_dir = out.is_dir() or output.endswith(("/", "\\")) or len(inputs) > 1
    if len(inputs) > 1 and out.name.endswith((".json", ".json.gz", ".gz")):
        raise InputError(
            f"{len(inputs)} inputs: --output must be a folder (each output keeps its input's name), "
            f"not the file {output!r}"
        )
    targets = [out / p.name for p in inputs] if as_dir else [out]
    seen: dict[Path, Path] = {}
    for src, dst in zip(inputs, targets):
        if dst in seen:
            raise InputError(
                f"inputs {str(seen[dst])!r} and {str(src)!r} would both be written to {str(dst)!r}; "
                "give them different file names"
            )
        seen[dst] = src
        _check_writable(dst)
        if dst.exists() and src.exists() and dst.resolve() == src.resolve():
            raise InputError(f"--output would overwrite the input {str(src)!r}; choose another path")
    return targets


def _check_writable(dst: Path) -> None:
    """Refuse an output path that cannot be written, before any scoring starts."""
    parent = dst.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"--output {str(dst)!r}: {str(parent)!r} is a file, not a folder; choose another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (dst.exists() and not os.access(dst, os.W_OK)):
        raise InputError(f"--output {str(dst)!r}: {str(parent)!r} is not writable; choose another path")
