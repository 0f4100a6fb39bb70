"""``tau2-gym generate``: verified tasks to train on, written as a data folder (:mod:`tau2_gym.generation`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tau2_gym.cli import one_line

if TYPE_CHECKING:
    from tau2_gym.generation import GeneratedSet


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--domain", required=True, help="a domain with a task generator (e.g. airline, retail, mock)")
    p.add_argument("--n", type=_positive, required=True, help="verified tasks to write")
    p.add_argument("--seed", type=_integer, default=0, help="seed of the drafts (same seed, same tasks)")
    p.add_argument(
        "--out",
        required=True,
        help="folder to write (new, empty, or a generated set: this domain is added or replaced in it)",
    )
    p.add_argument("--intents", nargs="+", default=None, help="intent families to draft (default: all; 'a+b': both)")
    p.add_argument("--held-out", type=_fraction, default=0.1, help="fraction of tasks in the held_out split")
    p.add_argument("--data-dir", default=None, help="base data folder (default: the verified cache)")
    p.add_argument("--data-version", default=None, help="base data version (default: tau2-bench==1.0.1)")


def run(args: argparse.Namespace) -> int:
    from tau2_gym.generation import GenerationError, generate

    try:
        made = generate(
            args.domain,
            n=args.n,
            seed=args.seed,
            out=args.out,
            intents=args.intents,
            held_out=args.held_out,
            data_dir=args.data_dir,
            data_version=args.data_version,
        )
    except (GenerationError, LookupError, ValueError, OSError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    for line in summary(made):
        print(line)
    return 0


def summary(made: GeneratedSet) -> list[str]:
    """The lines ``tau2-gym generate`` prints about a written set."""
    m, t = made.manifest, made.timings
    d, v, c, div = m["drafts"], m["verification"]["passed"], m["contamination_check"], m["diversity"]
    rejected = ", ".join(f"{r} {k}" for r, k in sorted(m["rejections"].items(), key=lambda x: -x[1])) or "none"
    gold = div["gold_actions"]
    return [
        f"wrote {d['accepted']} verified {m['domain']} tasks (train {m['splits']['train']}, held_out "
        f"{m['splits']['held_out']}) to {made.folder}  [{m['generator']} v{m['generator_version']}, seed {m['seed']}]",
        f"drafts: {d['made']} made, {d['accepted']} accepted, {d['rejected']} rejected ({rejected})",
        "intents: " + ", ".join(f"{k} {n}" for k, n in m["intent_mix"].items()),
        f"verified: gold actions ran without tool errors and the oracle agent scored 1.0 with the oracle and the "
        f"talking customer on all {v['gold_runs']}; do-nothing scored 0.0 on the {v['do_nothing']} that need a write"
        + (
            f"; doing what the customer asks scored 0.0 on the {v['forbidden_writes']} refused ones"
            if v["forbidden_writes"]
            else ""
        ),
        (
            f"contamination: no task uses any of the {sum(c['entity_counts'].values())} entities of the test split "
            f"({c['test_tasks']} tasks: {', '.join(f'{n} {k}' for k, n in c['entity_counts'].items())}); "
            f"{sum(c['drafts_rejected'].values())} drafts rejected for using one"
            if c["test_split"]
            else f"contamination: {m['domain']}'s data has no test split (nothing to keep out)"
        ),
        f"diversity: gold actions mean {gold['mean']} (benchmark {gold['benchmark']['mean']}); "
        + (f"{div['distinct_users']} distinct customers; " if div["distinct_users"] else "")
        + f"{div['opening_templates']['distinct']} opening templates",
        f"time: {t['total']:.1f} s (drafting {t['drafting']:.1f} s, verification {t['verification']:.1f} s)",
        f'use it: gym.make("tau2/{m["domain"]}-v0", data_dir="{made.folder}", task_split="train")',
    ]
