"""Collect many tau2 episodes concurrently (asyncio), crash-safe and resumable -- ``tau2 run`` for RL pipelines.

    from tau2_gym.runner.collect import collect
    from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    report = collect(None, OpenAIAgentPolicy(model="my-model", base_url="http://localhost:8000/v1"),
                     OpenAIUserSimulator(model="gpt-4.1"), domain="airline", num_trials=4, concurrency=64,
                     output="runs/airline.json")

Episodes are the (task, trial) pairs of the selection, trial-major like upstream; trial ``t`` gets upstream's
seed ``seeds[t]`` (``random.seed(seed)`` then one ``randint(0, 1_000_000)`` per trial), forwarded to the agent
and the user. Each episode is played by the one episode driver (:mod:`tau2_gym.episodes.driver`), awaiting the policy
and the user simulator; up to ``concurrency`` run at once.

One collect core serves this single-process runner and the Ray runner (:mod:`tau2_gym.runner.ray`): a
:class:`Collection` selects the episodes, resumes from the log (refusing a log of other settings), writes the
finished episodes in groups, shows progress and builds the report; a runner contributes only how the episodes
are executed (:func:`run_collection`).

Durability: every finished episode is appended to ``<output stem>.jsonl`` as one tau2 ``SimulationRun`` JSON
line and fsync'd (group commit: one fsync for the lines that finished meanwhile) before it counts as done.
At the end -- and on Ctrl-C or an exception -- the tau2 results file ``output`` is (re)written atomically from
the log. Restarted with the same ``output``, the run skips every episode already in the log (key: task id,
trial, seed), so a crash, Ctrl-C or SIGKILL loses at most the episodes in flight and never duplicates one; a
torn last line (killed mid-write) is cut off. Like upstream, an episode whose run raised (LLM endpoint down,
retries spent, evaluation failure) is retried ``max_retries`` times after ``retry_delay`` seconds, then
recorded as ``infrastructure_error`` with the error under ``info`` -- and re-run by the next resume.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional, Sequence, Union

from tau2_gym.core.domain import load_domain
from tau2_gym.core.results_file import write_json_atomic
from tau2_gym.core.tasks import Task
from tau2_gym.core.termination import TerminationReason
from tau2_gym.episodes.selection import select_tasks
from tau2_gym.runner.checks import check_servers, failure_line, infra_error_share
from tau2_gym.runner.config import RolloutConfig, trial_seeds
from tau2_gym.runner.episode_runner import EpisodeRunner
from tau2_gym.runner.log import EpisodeLog, log_path, open_log, output_paths, read_log, record_key
from tau2_gym.runner.players import build_player
from tau2_gym.runner.progress import EpisodeProgress
from tau2_gym.scoring.judges import make_judge
from tau2_gym.scoring.metrics import empty_agent_replies, nl_unjudged

logger = logging.getLogger("tau2_gym")

__all__ = [
    "RolloutConfig",
    "RolloutReport",
    "Collection",
    "collect",
    "acollect",
    "run_collection",
    "prepare_run",
    "close_loop_clients",
    "trial_seeds",
    "log_path",
    "read_log",
]

#: one episode to run: (task, trial, seed)
Unit = tuple[Task, int, int]
#: how a runner executes the episodes: ``execute(units, deliver)`` calls ``deliver(record)`` for each finished one
Executor = Callable[[list[Unit], Callable[[dict], None]], Awaitable[None]]


@dataclass(repr=False)
class RolloutReport:
    """What a rollout produced: one SimulationRun dict per episode of the selection (trial-major order)."""

    simulations: list[dict]
    results: dict  # the tau2 results-file dict
    output: Optional[Path]
    log: Optional[Path]
    ran: int  # episodes run by this call
    resumed: int  # episodes found in the log and skipped
    failed: int  # episodes recorded as infrastructure_error
    interrupted: bool = False

    def __repr__(self) -> str:  # short: asyncio.run formats the main task's result when it restores SIGINT
        return (
            f"RolloutReport({len(self.simulations)} episodes, ran={self.ran}, resumed={self.resumed}, "
            f"failed={self.failed}, mean_reward={self.mean_reward}, output={str(self.output)!r})"
        )

    @property
    def data_version(self) -> Optional[dict]:
        """The data version that ran and scored the episodes (``results["info"]["data_version"]``)."""
        return self.results.get("info", {}).get("data_version")

    @property
    def nl_unjudged(self) -> int:
        """Episodes whose NL assertions had no judge (scored by the no-judge choice; see ``reward_info.info.nl``)."""
        return sum(1 for s in self.simulations if nl_unjudged(s.get("reward_info")))

    @property
    def empty_agent_replies(self) -> dict[str, int]:
        """Episodes that ended on an agent reply with neither text nor a tool call, by kind (``empty``,
        ``reasoning_only``): :func:`tau2_gym.scoring.metrics.empty_agent_replies`."""
        return empty_agent_replies(self.simulations)

    @property
    def rewards(self) -> list[float]:
        return [
            float(s["reward_info"]["reward"])
            for s in self.simulations
            if s.get("reward_info") and s.get("termination_reason") != TerminationReason.INFRASTRUCTURE_ERROR
        ]

    @property
    def mean_reward(self) -> Optional[float]:
        r = self.rewards
        return sum(r) / len(r) if r else None

    @property
    def baseline(self) -> Optional[dict]:
        """The do-nothing baseline of the selection (``results["info"]["do_nothing_baseline"]``): its mean reward,
        task count and the tasks it passes."""
        return self.results.get("info", {}).get("do_nothing_baseline")

    @property
    def infra_error_share(self) -> float:
        """The share of the selection's episodes that ended as ``infrastructure_error``."""
        return infra_error_share(self.simulations)

    def failure_line(self) -> str:
        """``failed: N of M episodes (...)``: how many failed and the most frequent reasons."""
        return failure_line(self.simulations)

    def ok(self, max_infra_error_rate: float = 0.0) -> bool:
        """Whether the run counts as a success: not interrupted, and at most this share of its episodes failed
        (0.0, the default: none)."""
        return not self.interrupted and self.infra_error_share <= max_infra_error_rate


def select_for_run(cfg: RolloutConfig, tasks: Optional[Sequence[Union[Task, str]]] = None) -> tuple[Any, list[Task]]:
    """The run's judge and its tasks (:func:`~tau2_gym.episodes.selection.select_tasks`: ``tasks`` -- Task objects or
    ids -- or the config's task set/split/ids, the first ``num_tasks``, the no-judge choice applied)."""
    judge = make_judge(cfg.judge)
    domain = load_domain(cfg.domain, cfg.data_dir, cfg.data_version, options=cfg.domain_options)
    where = f"rollout of {cfg.domain!r}"
    selected = select_tasks(domain, cfg, tasks, num_tasks=cfg.num_tasks, judge=judge, where=where)
    return judge, list(selected)


def ids_in_split_order(config: RolloutConfig) -> list[str]:
    """``config.task_ids`` as ``tau2 run`` takes them: they filter the split, in the split's order; an id outside
    the split is refused."""
    domain = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
    pool = [t.id for t in select_tasks(domain, dataclasses.replace(config, task_ids=None, num_tasks=None))]
    missing = [i for i in config.task_ids or () if i not in set(pool)]
    if missing:
        raise ValueError(f"--task-ids {missing} are not in split {config.task_split!r} of {config.domain!r}")
    wanted = set(config.task_ids or ())
    return [i for i in pool if i in wanted]


class Collection:
    """One rollout's bookkeeping, whatever executes its episodes: the selected (task, trial, seed) units, what the
    log already holds (a resume skips it), the log itself, progress, and the report at the end.

    ``runner`` describes the run (its signature in the log header, the results file's info block).

    With a log, finished episodes live there only: the report reads them back. Held as objects through a long run,
    they would sit in every full garbage collection, whose pauses stall all episodes in flight.
    """

    def __init__(self, config: RolloutConfig, tasks: Sequence[Task], runner: EpisodeRunner) -> None:
        self.config = config
        self.runner = runner
        self.seeds = trial_seeds(config.seed, config.num_trials)
        units = [(task, trial, self.seeds[trial]) for trial in range(config.num_trials) for task in tasks]
        self.order: dict[tuple[str, Optional[int], Optional[int]], int] = {
            (t.id, trial, seed): k for k, (t, trial, seed) in enumerate(units)
        }
        self.out_path, self.log_path = output_paths(config)
        self.records: dict[tuple, dict] = {}  # the finished episodes of a run without a log
        self.log: Optional[EpisodeLog] = None
        logged: dict[tuple, dict] = {}
        if self.log_path is not None:
            self.log, logged = open_log(config, self.log_path, runner.signature())
        failed = TerminationReason.INFRASTRUCTURE_ERROR
        done = {k for k, r in logged.items() if r.get("termination_reason") != failed}
        self.todo: list[Unit] = [(t, trial, seed) for t, trial, seed in units if (t.id, trial, seed) not in done]
        self.resumed = len(units) - len(self.todo)
        self.ran = self.failed = 0
        self.progress = EpisodeProgress(len(units), self.resumed, config.progress)

    def write(self, batch: list[dict]) -> None:
        """Append finished episodes to the log (one fsync for the group); only then do they count as done."""
        if self.log is not None:
            self.log.write(batch)

    def count(self, batch: list[dict]) -> None:
        for run in batch:
            if self.log is None:
                self.records[record_key(run)] = run
            self.ran += 1
            self.failed += run.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR
            self.progress.add(run)

    def report(self, interrupted: bool, extra_info: Optional[dict] = None) -> RolloutReport:
        """Close the log and progress, write the results file from what the log holds, and say what ran."""
        records = self.records
        if self.log is not None:
            self.log.close()
            _, records = read_log(self.log.path)
        self.progress.close()
        runs = sorted((r for k, r in records.items() if k in self.order), key=lambda r: self.order[record_key(r)])
        results = self.runner.results(runs)
        results["info"].update(extra_info or {})
        if self.out_path is not None:
            write_json_atomic(self.out_path, results)
        return RolloutReport(
            simulations=runs,
            results=results,
            output=self.out_path,
            log=self.log_path,
            ran=self.ran,
            resumed=self.resumed,
            failed=self.failed,
            interrupted=interrupted,
        )


async def run_collection(collection: Collection, execute: Executor) -> bool:
    """Run ``collection.todo`` with ``execute``, committing the episodes as they finish: whatever finished
    meanwhile is written as one group on a writer thread (the event loop keeps serving requests while the disk
    syncs). Episodes that finished are written even when the run is interrupted. Returns whether it was."""
    arrived: list[dict] = []
    wake = asyncio.Event()

    def deliver(run: dict) -> None:
        arrived.append(run)
        wake.set()

    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tau2-rollout-log")
    writing: Optional[tuple[Any, list[dict]]] = None  # (the write's future, its batch) not yet counted
    producer = asyncio.ensure_future(execute(collection.todo, deliver))
    producer.add_done_callback(lambda _: wake.set())
    interrupted = False
    try:
        while arrived or not producer.done():
            if not arrived:
                await wake.wait()
                wake.clear()
                continue
            batch = arrived[:]
            del arrived[:]
            future = writer.submit(collection.write, batch)
            writing = (future, batch)
            await asyncio.wrap_future(future)
            writing = None
            collection.count(batch)
        producer.result()
    except BaseException:
        interrupted = True
        producer.cancel()
        await asyncio.gather(producer, return_exceptions=True)
        raise
    finally:
        writer.shutdown(wait=True)
        leftovers = ([writing] if writing is not None else []) + ([(None, arrived)] if arrived else [])
        for future, batch in leftovers:  # finished while interrupted: durable before we leave
            try:
                if future is None:
                    collection.write(batch)
                else:
                    future.result()
                collection.count(batch)
            except Exception as exc:  # noqa: BLE001 - reported; the interruption is what propagates
                logger.error("%d finished episode(s) could not be logged: %s", len(batch), exc)
    return interrupted


def local_executor(runner: EpisodeRunner, concurrency: int) -> Executor:
    """Episodes as asyncio tasks of this process, up to ``concurrency`` at once."""

    async def execute(units: list[Unit], deliver: Callable[[dict], None]) -> None:
        queue = list(reversed(units))

        async def worker() -> None:
            while queue:
                task, trial, seed = queue.pop()
                deliver(await runner.run_episode(task, trial, seed))
                await asyncio.sleep(0)  # scripted episodes never yield by themselves: let the writer in

        await asyncio.gather(*(worker() for _ in range(min(concurrency, max(1, len(units))))))

    return execute


async def prepare_run(
    cfg: RolloutConfig, tasks: Optional[Sequence[Union[Task, str]]], policy: Any, user: Any
) -> tuple[Any, Any, Any, list[Task]]:
    """What every runner does before its first episode: build the players, the judge and the task selection,
    then check the LLM servers (``cfg.check_servers``). Returns ``(policy, user, judge, tasks)``."""
    policy = build_player(policy, "policy")
    user = build_player(user, "user", cfg.solo)
    judge, selected = select_for_run(cfg, tasks)
    if cfg.check_servers:
        try:
            await check_servers(policy, user, judge)
        except BaseException:
            await close_loop_clients(policy, user, judge)
            raise
    return policy, user, judge, selected


async def acollect(
    tasks: Optional[Sequence[Union[Task, str]]],
    policy: Any,
    user: Any = None,
    *,
    config: Optional[RolloutConfig] = None,
    **settings: Any,
) -> RolloutReport:
    """Async :func:`collect` (for callers already inside an event loop)."""
    cfg = config if config is not None else RolloutConfig(**settings)
    if settings and config is not None:
        base = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
        if "parser" in settings and "parse_replies" not in settings:
            base.pop("parse_replies")  # resolved from the parser given now, as RolloutConfig(parser=...) does
        cfg = RolloutConfig(**{**base, **settings})
    policy, user, judge, selected = await prepare_run(cfg, tasks, policy, user)
    runner = EpisodeRunner(cfg, selected, policy, user, judge)
    collection = Collection(cfg, selected, runner)
    interrupted = True
    try:
        interrupted = await run_collection(collection, local_executor(runner, cfg.concurrency))
    finally:
        await close_loop_clients(policy, user)
        report = collection.report(interrupted)
    return report


async def close_loop_clients(*objs: Any) -> None:
    """Close the HTTP clients players (policy, user, judge) opened on this event loop (they cannot outlive it)."""
    for obj in objs:
        aclose = getattr(obj, "aclose", None)
        if aclose is not None and inspect.iscoroutinefunction(aclose):
            try:
                await aclose()
            except Exception as exc:  # noqa: BLE001 - closing never fails a run
                logger.debug("closing %s's client: %s", type(obj).__name__, exc)


def collect(
    tasks: Optional[Sequence[Union[Task, str]]],
    policy: Any,
    user: Any = None,
    *,
    config: Optional[RolloutConfig] = None,
    **settings: Any,
) -> RolloutReport:
    """Run every (task, trial) episode of the selection concurrently and return/write the results.

    Args:
        tasks: Task objects or task ids; None = the config's selection (task set, split, ids, num_tasks).
        policy: an :class:`~tau2_gym.players.agents.base.AgentPolicy` (e.g. ``OpenAIAgentPolicy``), or the name of a
            scripted agent (``"oracle"``, ``"give_up"``, ...).
        user: a user simulator (``OpenAIUserSimulator``, ``OracleUser``, ...) or a spec string; None = the
            oracle user (ignored in solo mode).
        config: the :class:`RolloutConfig` (default: its defaults).
        **settings: fields of :class:`RolloutConfig` as keywords, over ``config`` (``num_trials``,
            ``concurrency``, ``output``, ``domain``, ``seed``, ``max_steps``, ...).

    Returns a :class:`RolloutReport`. Ctrl-C stops the run after saving what finished (re-run to resume).
    Inside a running event loop (e.g. a notebook) use ``await acollect(...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("collect() cannot run inside a running event loop; use `await acollect(...)` there")
    return asyncio.run(acollect(tasks, policy, user, config=config, **settings))
