"""``tau2-gym`` command line. Each subcommand lives in ``tau2_gym/cli/<name>.py`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports happen inside ``run``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, NoReturn, Optional, Union

COMMANDS = {
    "demo": "Run the built-in demo on the default data (no API key needed).",
    "data": "Fetch or locate the official tau2 data.",
    "eval": "Re-score tau2 results files with tau2-gym's evaluator.",
    "rollout": "Collect episodes with an agent and a user simulator behind OpenAI-compatible endpoints.",
    "profile": "Profile a policy's per-task pass rates over k episodes and select the band of tasks to train on.",
    "export": "Export results files as an SFT dataset (TRL's conversational format).",
    "replay": "Replay results files through fresh envs and report where trajectories diverge.",
    "report": "Build one self-contained HTML report of one or more results files.",
    "audit": "What each exploit of the panel earns (upstream-exact and hardened reward), beside doing nothing.",
    "cache": "Show or clear the LLM reply cache (user simulator and judge replies).",
    "serve": "Serve a tau2 env id as an OpenEnv server (HTTP + WebSocket sessions; extra tau2-gym[openenv]).",
    "generate": "Generate verified tasks to train on (never touching the test split), written as a data folder.",
}


class _Parser(argparse.ArgumentParser):
    """argparse with one ``error:`` line (and where the help is) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tau2-gym", description="Gymnasium environments for tau2-bench.")
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
    return signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # noqa: ARG005 - a signal handler's signature


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2

    previous = _exit_on_sigterm()
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # `tau2-gym demo | head`: the reader left; stop quietly
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure is one line; the traceback with TAU2_GYM_DEBUG
        if os.environ.get("TAU2_GYM_DEBUG"):
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def one_line(exc: Union[BaseException, str]) -> str:
    """An exception as one line: our own errors (data, arguments) say what is wrong and the fix; anything else
    also names its type and how to see the traceback."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("For further information visit")]  # pydantic's link
    text = " ".join(" ".join(lines).split()) or type(exc).__name__
    if isinstance(exc, (str, ValueError, OSError, LookupError)) or type(exc).__module__.startswith("tau2_gym"):
        return text
    return f"{type(exc).__name__}: {text} (TAU2_GYM_DEBUG=1 shows the traceback)"


def _quiet_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
