"""``tau2-gym report``: one self-contained HTML report of one or more results files (see
:mod:`tau2_gym.results.report`).

Every input must be readable (a missing file, bad JSON, a partial file or an unknown domain stops the command
with one error line and nothing is written); simulations that do not parse are skipped, counted and named.
"""

from __future__ import annotations

import argparse
import sys

from tau2_gym.cli import one_line
from tau2_gym.results.report import ReportError, write_report
from tau2_gym.scoring.metrics import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RESULTS.json",
        help="results files (.json or .json.gz), shown side by side in this order; the first is "
        "the baseline of the 'tasks that flipped' table",
    )
    parser.add_argument("-o", "--output", required=True, help="the HTML file to write (e.g. report.html)")
    parser.add_argument("--title", help="page title (default: the input file names)")
    parser.add_argument(
        "--bootstrap-samples",
        type=int,
        default=None,
        help="resamples of the bootstrap confidence intervals of pass^k (default 1000; 0: none)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the bootstrap (default 0)")
    parser.add_argument(
        "--compress",
        action="store_true",
        help="store the per-simulation details gzip-compressed (several times smaller for long "
        "conversations; needs a browser with DecompressionStream: Chrome 80+, Firefox 113+, "
        "Safari 16.4+)",
    )


def run(args: argparse.Namespace) -> int:

    samples = BOOTSTRAP_SAMPLES if args.bootstrap_samples is None else args.bootstrap_samples
    if samples < 0:
        print(f"error: --bootstrap-samples must be >= 0, not {samples}", file=sys.stderr)
        return 2
    try:
        result = write_report(
            args.paths,
            args.output,
            title=args.title,
            samples=samples,
            seed=BOOTSTRAP_SEED if args.seed is None else args.seed,
            compress=args.compress,
        )
    except ReportError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: cannot write {args.output!r}: {one_line(exc)}", file=sys.stderr)
        return 1
    for r in result.runs:
        if r.skipped:
            shown = "; ".join(r.skipped[:3]) + (" ..." if len(r.skipped) > 3 else "")
            print(
                f"warning: {r.path}: {len(r.skipped)} simulation(s) could not be parsed and were skipped: {shown}",
                file=sys.stderr,
            )
    print(
        f"wrote {result.output} ({result.simulations} simulation(s) from {len(result.runs)} file(s), "
        f"{result.skipped} skipped; {result.bytes / 1e6:.2f} MB)"
    )
    return 0
