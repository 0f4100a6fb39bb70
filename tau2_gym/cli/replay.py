"""``tau2-gym replay``: replay results files through fresh envs and report where trajectories diverge.

Each simulation's recorded assistant messages drive a fresh env while the recorded user turns are played back
(:func:`tau2_gym.replay`); the JSON report (``--output``) lists per simulation ``identical`` / ``diverged`` (the
first differing message and what differs) / ``error`` (could not be replayed), with the stored and the new
reward, and a summary. Exit status: 0 when every simulation was replayed (identical or not), 1 when some could
not be (the count is printed), 2 for bad input or options (one ``error:`` line, nothing written).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Optional

from tau2_gym.cli import one_line
from tau2_gym.core.results_file import write_json_atomic
from tau2_gym.results.replay import ReplayInputError, replay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="RESULTS.json", help="results files (.json or .json.gz)")
    parser.add_argument("-o", "--output", help="the JSON report to write (written atomically)")
    parser.add_argument("--data-dir", help="a tau2 data folder of your own (default: the version each file records)")
    parser.add_argument("--data-version", default=None, help="data version to replay on (default: each file's)")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="step limit of the replay (default: each file's info.max_steps, else 100)",
    )
    parser.add_argument(
        "--judge",
        default="fail",
        help="NL-assertion judge for the new rewards: fail (default) | pass | openai:MODEL | hf:MODEL",
    )
    parser.add_argument(
        "--domain-options",
        default=None,
        metavar="JSON",
        help='the domain\'s own settings as a JSON object (e.g. \'{"retrieval_config": "bm25"}\')',
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the env's warnings")


def _fail(message: str) -> int:
    print(f"error: {one_line(message)}", file=sys.stderr)
    return 2


def _output_problem(out: Path, inputs: list[Path]) -> Optional[str]:
    """Why the report cannot be written to ``out`` (checked before any replay), or None."""
    if out.is_dir():
        return f"--output {str(out)!r} is a folder; give the report's file name"
    if out.exists() and any(p.exists() and p.resolve() == out.resolve() for p in inputs):
        return f"--output {str(out)!r} would overwrite an input; choose another path"
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"--output {str(out)!r}: {str(parent)!r} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        return f"--output {str(out)!r}: {str(parent)!r} is not writable"
    return None


def run(args: argparse.Namespace) -> int:

    if not args.paths:
        return _fail("give at least one results file")
    if not args.output:
        return _fail("--output REPORT.json is required")
    if args.max_steps is not None and args.max_steps < 1:
        return _fail(f"--max-steps {args.max_steps} must be >= 1")
    out = Path(args.output)
    problem = _output_problem(out, [Path(p) for p in args.paths])
    if problem is not None:
        return _fail(problem)
    options = None
    if args.domain_options is not None:
        import json

        try:
            options = json.loads(args.domain_options)
        except ValueError as exc:
            return _fail(f"--domain-options is not valid JSON: {exc}")
        if not isinstance(options, dict):
            return _fail("--domain-options must be a JSON object")
    if not args.verbose:
        logging.getLogger("tau2_gym").setLevel(logging.ERROR)
    try:
        report = replay(
            args.paths,
            data_dir=args.data_dir,
            data_version=args.data_version,
            max_steps=args.max_steps,
            judge=args.judge,
            progress=not args.no_progress and sys.stderr.isatty(),
            domain_options=options,
        )
    except ReplayInputError as exc:
        return _fail(str(exc))
    except ValueError as exc:  # a bad --judge spec, an unknown data version
        return _fail(str(exc))
    try:
        write_json_atomic(out, report.to_dict())
    except (OSError, ValueError) as exc:
        return _fail(f"cannot write {str(out)!r}: {exc}")
    for f in report.files:
        for warning in f["warnings"]:
            print(f"warning: {f['path']}: {warning}", file=sys.stderr)
    print(f"{report.summary_line()} -> {out}")
    for sim in report.simulations:
        if sim.status != "identical" and args.verbose:
            where = f"{sim.file}#{sim.index}" if sim.file else f"#{sim.index}"
            print(f"  {sim.status}: {where} task {sim.task_id}: {sim.error or sim.difference}")
    if report.errors:
        print(f"error: {report.errors} simulation(s) could not be replayed (see 'error' in {out})", file=sys.stderr)
        return 1
    return 0
