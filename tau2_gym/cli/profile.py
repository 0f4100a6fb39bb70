"""``tau2-gym profile``: each task's pass rate over k episodes of a policy, bucketed by difficulty, and the band to
train on.

    tau2-gym profile --domain airline --split train --agent llm_agent --agent-llm my-model \\
        --agent-base-url http://localhost:8000/v1 --user user_simulator -k 16 --keep hard,medium,easy --out band/
    tau2-gym profile --domain airline --split train --agent noisy_oracle:spread --user oracle -k 16   # offline
    tau2-gym profile select PROFILE --keep medium,hard --out DIR     # a band of an existing profile as data
    tau2-gym profile show PROFILE                                    # print a profile again

A profile is a rollout with ``num_trials`` = k (every ``tau2-gym rollout`` flag applies: endpoints, the reply cache,
``--ray``, the server check; the same command resumes an interrupted profile from its log) plus the statistics of
:mod:`tau2_gym.runner.profile`. This module parses and prints.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from tau2_gym.cli import rollout
from tau2_gym.scoring.metrics import DEFAULT_BUCKETS, DEFAULT_KEEP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    rollout.add_arguments(
        parser,
        num_trials=16,
        split=None,
        split_help="task split (default: train when the task set has one, else all its tasks; 'none' = all)",
    )
    g = parser.add_argument_group("profile")
    g.add_argument(
        "--buckets",
        default=DEFAULT_BUCKETS.spec(),
        help="pass-rate buckets, each NAME=UPPER_EDGE (a rate or fraction; edges increase, the last is 1): bucket i "
        "holds the rates above the previous edge up to its own (default: %(default)s, at k=16 the Qwen3-8B GRPO "
        "run's 0 | 1-4 | 5-8 | 9-12 | 13-16 passes)",
    )
    g.add_argument(
        "--keep",
        default=None,
        help=f"the band to train on, comma-separated bucket names (default: {','.join(DEFAULT_KEEP)}); recorded in "
        "the profile, written with --out",
    )
    g.add_argument("--out", default=None, metavar="DIR", help="write the kept band as a tau2 data folder here")
    g.add_argument(
        "--profile-file", default=None, metavar="PATH", help="the profile JSON (default: <output stem>.profile.json)"
    )
    g.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="the histogram as a PNG (default: <output stem>.profile.png when matplotlib is installed; extra "
        "tau2-gym[plot])",
    )
    g.add_argument("--no-plot", action="store_true", help="no PNG")
    g.add_argument("--show-tasks", action="store_true", help="print every task's line, hardest first")
    g.add_argument(
        "--dry-run", action="store_true", help="print the episodes and LLM requests the profile will cost, run nothing"
    )
    sub = parser.add_subparsers(dest="profile_command", metavar="{select,show}")
    s = sub.add_parser(
        "select",
        help="write a band of an existing profile as a tau2 data folder",
        description="Write the tasks of some buckets of a profile as an ordinary tau2 data folder (data_dir=), "
        "the profile in its provenance.json.",
    )
    s.add_argument("profile_path", metavar="PROFILE", help="a profile JSON written by tau2-gym profile")
    s.add_argument(
        "--keep", dest="select_keep", default=None, metavar="BUCKETS", help="bucket names (default: the profile's band)"
    )
    s.add_argument("--out", dest="select_out", required=True, metavar="DIR", help="the data folder to write")
    s.add_argument(
        "--data-dir",
        dest="select_data_dir",
        default=None,
        metavar="DIR",
        help="the data the profile was made on, when it has moved (default: as the profile records)",
    )
    sh = sub.add_parser("show", help="print a profile", description="Print a profile's tables (and its PNG).")
    sh.add_argument("profile_path", metavar="PROFILE", help="a profile JSON written by tau2-gym profile")
    sh.add_argument(
        "--keep", dest="select_keep", default=None, metavar="BUCKETS", help="mark this band instead of the profile's"
    )
    sh.add_argument("--show-tasks", dest="select_tasks", action="store_true", help="every task's line")
    sh.add_argument("--plot", dest="select_plot", default=None, metavar="PNG", help="write the histogram PNG")


def _err(text: str) -> int:
    print(f"error: {text}", file=sys.stderr)
    return 2


def _has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "profile_command", None)
    if command == "select":
        return run_select(args)
    if command == "show":
        return run_show(args)
    return run_profile(args)


def _print_profile(prof: Any, keep: Sequence[str], show_tasks: bool) -> None:
    from tau2_gym.runner.profile import band_histogram, bucket_table, profile_summary, task_table

    print(profile_summary(prof))
    print()
    print(bucket_table(prof, keep))
    print()
    print(band_histogram(prof))
    if show_tasks:
        print()
        print(task_table(prof))


def run_show(args: argparse.Namespace) -> int:
    from tau2_gym.episodes.band import ProfileError, load_profile
    from tau2_gym.runner.profile import plot_profile

    try:
        prof = load_profile(args.profile_path)
        keep = prof.check_keep(args.select_keep)
    except ProfileError as exc:
        return _err(str(exc))
    if args.select_plot and not _has_matplotlib():
        return _err("--plot needs matplotlib: pip install 'tau2-gym[plot]'")
    _print_profile(prof, keep, args.select_tasks)
    if args.select_plot:
        print(f"plot: {plot_profile(prof, args.select_plot, keep)}")
    return 0


def run_select(args: argparse.Namespace) -> int:
    from tau2_gym.data import DataError
    from tau2_gym.episodes.band import load_profile
    from tau2_gym.runner.profile import write_band

    try:
        prof = load_profile(args.profile_path)
        keep = prof.check_keep(args.select_keep)
        folder = write_band(prof, args.select_out, keep, data_dir=args.select_data_dir)
    except (ValueError, DataError) as exc:  # ProfileError is a ValueError
        return _err(str(exc))
    n = len(prof.band(keep))
    print(f"band {','.join(keep)}: {n} of {len(prof.tasks)} tasks of {prof.identity.describe()}")
    print(f"wrote {folder} (pass it as data_dir= / --data-dir; the profile is in its provenance.json)")
    return 0


def _auto_split(args: argparse.Namespace) -> Optional[str]:
    """``--split`` not given: the task set's ``train`` split when it has one (profiles are for training), else all
    of its tasks; ``none``: all."""
    if args.task_split_name is not None:
        return None if str(args.task_split_name).lower() == "none" else args.task_split_name
    from tau2_gym.core.domain import load_domain

    domain = load_domain(args.domain, args.data_dir, args.data_version, options=rollout.retrieval_options(args))
    return "train" if "train" in domain.splits(args.task_set_name) else None


def default_output(args: argparse.Namespace, split: Optional[str]) -> Path:
    """A path made from the settings (no clock in it): the same command finds its log again and resumes."""

    def tag(s: str) -> str:
        return str(s).replace("/", "_").replace(":", "_").replace(",", "_")

    agent_llm = args.agent_llm if args.agent in rollout.LLM_AGENTS else "none"
    user_llm = args.user_llm if args.user in rollout.LLM_USERS else "none"
    parts = [args.domain, split or "all"]
    if args.data_dir:
        parts.append(Path(args.data_dir).resolve().name)
    parts += [args.agent, agent_llm, args.user, user_llm, f"k{args.num_trials}", f"seed{args.seed}"]
    return Path("tau2_profiles") / ("_".join(tag(p) for p in parts) + ".json")


def run_profile(args: argparse.Namespace) -> int:
    from tau2_gym.data import DataError
    from tau2_gym.llm.client import ServerCheckError
    from tau2_gym.players.agents.scripted import is_scripted
    from tau2_gym.runner.profile import plot_profile, profile_costs, profile_from_report, profile_path, write_band
    from tau2_gym.scoring.metrics import PassRateBuckets

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.ERROR), format="%(levelname)s %(name)s: %(message)s"
    )
    if args.num_trials < 1:
        return _err(f"-k {args.num_trials}: k (episodes per task) must be >= 1")
    if args.agent in rollout.UNSUPPORTED_AGENTS:
        return _err(f"--agent {args.agent}: {rollout.UNSUPPORTED_AGENTS[args.agent]}")
    try:
        edges = PassRateBuckets.parse(args.buckets)
        keep = edges.check_names(args.keep.split(","), "--keep") if args.keep is not None else edges.default_keep()
    except ValueError as exc:
        return _err(f"--buckets/--keep: {exc}")
    if args.plot and not _has_matplotlib():
        return _err("--plot needs matplotlib: pip install 'tau2-gym[plot]'")
    solo = args.agent == "llm_agent_solo" or args.solo
    try:
        split = _auto_split(args)
        output = Path(args.output) if args.output else default_output(args, split)
        if not output.suffix:
            output = output.with_suffix(".json")
        config = rollout.rollout_config(args, output, split, solo)
        if args.dry_run:
            if args.agent not in rollout.LLM_AGENTS and not is_scripted(args.agent):
                return _err(f"unknown agent {args.agent!r}")
            costs = profile_costs(
                config, agent_llm=args.agent in rollout.LLM_AGENTS, user_llm=args.user in rollout.LLM_USERS
            )
            print(f"profile (dry run): {args.domain} {split or 'all tasks'}, agent {args.agent}, user {args.user}")
            for line in costs.lines():
                print(line)
            print(f"results: {output}; profile: {args.profile_file or profile_path(output)}")
            return 0
        agent_settings, user_settings = rollout.player_settings(args)
        notes: list[str] = []
        policy = rollout.build_agent(agent_settings, notes)
        user = rollout.build_user(user_settings, solo, notes)
    except (ValueError, ImportError, DataError) as exc:
        return _err(str(exc))
    for note in notes:
        print(note, file=sys.stderr)
    print(
        f"profile: {args.domain} {split or 'all tasks'}, agent {args.agent}, user "
        f"{args.user if not solo else 'dummy_user'}, k={args.num_trials}, output {output}",
        file=sys.stderr,
    )
    for line in rollout.start_lines(args, policy, user):
        print(line, file=sys.stderr)
    try:
        report = rollout.run_episodes(args, config, (agent_settings, user_settings, policy, user), solo)
    except ImportError as exc:
        if getattr(args, "ray", None) is None:
            raise
        return _err(f"--ray: {exc}")
    except ServerCheckError as exc:
        print(rollout.server_error_line(exc), file=sys.stderr)
        return 2
    except (ValueError, DataError) as exc:
        return _err(str(exc))
    except KeyboardInterrupt:
        return rollout.interrupted(output)
    finally:
        rollout.close_players(policy, user)
    prof = profile_from_report(report, config, buckets=edges, keep=keep)
    path = Path(args.profile_file) if args.profile_file else profile_path(output)
    prof.save(path)
    prof.path = str(path)
    _print_profile(prof, keep, args.show_tasks)
    print()
    print(f"profile: {path}  (episodes: {report.output}; {report.resumed} resumed from the log, {report.ran} run now)")
    if not args.no_plot:
        if args.plot or _has_matplotlib():
            print(f"plot: {plot_profile(prof, args.plot or path.with_suffix('.png'), keep)}")
        else:
            print("plot: none (pip install 'tau2-gym[plot]' for the PNG)")
    print(report.failure_line())
    if not report.ok(args.max_infra_error_rate):
        print(
            f"error: {100 * report.infra_error_share:.1f}% of the episodes failed (--max-infra-error-rate "
            f"{args.max_infra_error_rate:g}): the profile is incomplete; the same command re-runs the failed ones",
            file=sys.stderr,
        )
        return 1
    if args.out:
        try:
            folder = write_band(prof, args.out, keep)
        except (ValueError, DataError) as exc:
            return _err(str(exc))
        print(f"band {','.join(keep)}: {len(prof.band(keep))} tasks written to {folder} (data_dir= / --data-dir)")
    return 0
