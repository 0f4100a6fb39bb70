"""Progress displays: of a rollout (episodes done, mean reward, errors) and of the commands that walk results
files (eval, replay). tqdm when installed, else a line on stderr; nothing when disabled."""

from __future__ import annotations

import sys
import time
from typing import Iterator

from tau2_gym.core.termination import TerminationReason


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


class EpisodeProgress:
    """tqdm bar (or a status line every few seconds): episodes done, mean reward, errors."""

    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, initial, enabled
        self.rewards: list[float] = []
        self.failed = 0
        self.bar = None
        self._last = 0.0
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, initial=initial, desc="episodes", unit="ep", dynamic_ncols=True)
            except ImportError:
                self.bar = None

    def add(self, run: dict) -> None:
        self.done += 1
        if run.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR:
            self.failed += 1
        elif run.get("reward_info"):
            self.rewards.append(float(run["reward_info"]["reward"]))
        if not self.enabled:
            return
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else float("nan")
        if self.bar is not None:
            self.bar.set_postfix(reward=f"{mean:.3f}", errors=self.failed, refresh=False)
            self.bar.update(1)
        elif time.monotonic() - self._last > 2.0 or self.done == self.total:
            self._last = time.monotonic()
            print(f"episodes {self.done}/{self.total}  mean reward {mean:.3f}  errors {self.failed}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
