"""One progress display for the commands that walk results files (eval, replay): tqdm when installed, else a
bar on stderr, nothing when disabled."""

from __future__ import annotations

import sys
import time
from typing import Iterator


def progress(items: list, desc: str, enabled: bool) -> Iterator:
    """Yield ``items``, showing how many are done."""
    if not enabled or not items:
        yield from items
        return
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        yield from tqdm(items, desc=desc, unit="sim", file=sys.stderr, leave=False)
        return
    n = len(items)
    last = 0.0
    for i, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        if now - last > 0.2 or i == n:
            last = now
            filled = int(30 * i / n)
            sys.stderr.write(f"\r{desc} [{'#' * filled}{'.' * (30 - filled)}] {i}/{n}")
            sys.stderr.flush()
    sys.stderr.write("\r" + " " * (len(desc) + 50) + "\r")
