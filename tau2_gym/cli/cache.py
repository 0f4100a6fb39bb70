"""``tau2-gym cache stats|clear [--path FILE]``: what the LLM reply cache holds, and emptying it."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from tau2_gym.llm.cache import clear, file_stats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("stats", "clear"), help="stats: entries per model; clear: delete them")
    parser.add_argument(
        "--path",
        default=None,
        help="a cache file (default: $TAU2_GYM_CACHE_DIR/llm-cache.sqlite, else ~/.cache/tau2-gym/llm-cache.sqlite)",
    )


def _when(ts: object) -> str:
    if not isinstance(ts, (int, float)):
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def run(args: argparse.Namespace) -> int:
    if args.action == "clear":
        removed = clear(args.path)
        print(f"cleared {removed} entr{'y' if removed == 1 else 'ies'} from {file_stats(args.path)['path']}")
        return 0
    stats = file_stats(args.path)
    if not stats["exists"]:
        print(f"cache: {stats['path']} (empty: no file yet)")
        return 0
    if stats.get("error"):
        print(f"error: cache {stats['path']} cannot be read ({stats['error']})", file=sys.stderr)
        return 1
    print(f"cache: {stats['path']}, {stats['entries']} entries, {stats['bytes'] / 1e6:.1f} MB")
    print(f"  oldest {_when(stats['oldest'])}, newest {_when(stats['newest'])}")
    for model, n in sorted(stats["models"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:>8}  {model}")
    print("a reply is reused only for the same server, model, seed and request at temperature 0 (or a fixed seed)")
    return 0
