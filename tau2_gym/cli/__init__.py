"""``tau2-gym`` command line. Each subcommand lives in ``tau2_gym/cli/<name>.py`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports happen inside ``run``."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, Optional

from tau2_gym.data import DataError

COMMANDS = {
    "demo": "Run the built-in demo on the default data (no API key needed).",
    "data": "Fetch or locate the official tau2 data.",
    "eval": "Re-score tau2 results files with tau2-gym's evaluator.",
    "rollout": "Collect episodes with an agent and a user simulator behind OpenAI-compatible endpoints.",
    "export": "Export results files as an SFT dataset (TRL's conversational format).",
    "replay": "Replay results files through fresh envs and report where trajectories diverge.",
    "report": "Build one self-contained HTML report of one or more results files.",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tau2-gym", description="Gymnasium environments for tau2-bench.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        try:
            module = importlib.import_module(f"tau2_gym.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tau2_gym.cli.{name}":
                continue  # command not built yet
            raise
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _exit_on_sigterm() -> Any:
    """SIGTERM exits through Python (SystemExit), so ``finally`` blocks -- the atomic writers' clean-up of their
    temporary files -- run as on Ctrl-C. Returns the previous handler (None off the main thread)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2

    previous = _exit_on_sigterm()
    try:
        return int(args._run(args) or 0)
    except DataError as exc:  # one line (file, problem, fix); the traceback only with TAU2_GYM_DEBUG
        import os

        if os.environ.get("TAU2_GYM_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)
