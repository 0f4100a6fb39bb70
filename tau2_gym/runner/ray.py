"""Rollouts on a Ray cluster: the collector of :mod:`tau2_gym.runner.collect` in a pool of Ray actors (extra ``ray``).

    from tau2_gym.runner.ray import collect_ray
    from functools import partial
    from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy, OpenAIAgentConfig

    report = collect_ray(None, partial(OpenAIAgentPolicy, OpenAIAgentConfig(model="m", base_url=URL)),
                         "oracle", domain="airline", num_trials=8, concurrency=64, output="runs/airline.json",
                         num_actors=16, address="auto")

The driver (this process) runs the collect core of :mod:`tau2_gym.runner.collect` -- the same selection,
resume, log, progress and results file as :func:`~tau2_gym.runner.collect.collect` -- and hands the episodes out
one at a time to the actors; every actor hosts one collector (one loaded domain, one
policy and user, ``concurrency`` episodes in flight as Ray async calls). A finished episode's record comes
back to the driver, which is the only writer of the output: the same ``<stem>.jsonl`` log (header line with the
run signature, one tau2 ``SimulationRun`` per line, fsync'd in groups before it counts as done) and the same
results file as :func:`~tau2_gym.runner.collect.collect`, so either collector resumes the other's run and ``tau2-gym
eval`` reads both.

An actor that dies (killed, its node lost, out of memory) takes only its unfinished episodes with it: the
driver puts them back at the head of the queue and starts a replacement actor (up to
``max_actor_restarts`` in all; after that the survivors carry on, and with none left the run stops with what
finished saved). A record is written only once per (task, trial, seed): a re-run episode cannot appear twice.

``collect_ray`` blocks; inside a running event loop (a notebook) use ``await acollect_ray(...)``. Policies and
users go to the actors by pickle. Scripted ones (``"oracle"``, :class:`OracleUser`) pickle as they
are; an LLM client holds locks and sockets, so pass a zero-argument factory instead (a class, a
``functools.partial``): each actor builds its own client (and its own ``max_concurrency`` limit).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
from dataclasses import fields, replace
from typing import Any, Callable, Optional, Sequence, Union

from tau2_gym.core.tasks import Task
from tau2_gym.llm.cache import cache_info, sum_stats
from tau2_gym.runner.checks import adopt_identities, llm_clients
from tau2_gym.runner.collect import Collection, RolloutConfig, RolloutReport, Unit, prepare_run, run_collection
from tau2_gym.runner.episode_runner import EpisodeRunner
from tau2_gym.runner.log import record_key
from tau2_gym.runner.players import build_player
from tau2_gym.scoring.judges import JudgeSpec, make_judge

logger = logging.getLogger("tau2_gym")

__all__ = ["collect_ray", "acollect_ray", "ActorPool", "EpisodeActor", "RAY_MISSING"]

RAY_MISSING = "Ray is not installed; rollouts on Ray need the extra: pip install 'tau2-gym[ray]'"


def import_ray() -> Any:
    """``ray``, or an ImportError that names the extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f"{RAY_MISSING} ({exc})") from None
    return ray


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if close is not None:
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - closing a client must not hide the run's outcome
            logger.warning("closing %s failed: %s", type(obj).__name__, exc)


class EpisodeActor:
    """One episode runner in a Ray actor: the domain is loaded once here, episodes arrive one call each.

    Ray runs up to ``max_concurrency`` calls of this async actor at once, so LLM-bound episodes overlap inside
    the actor exactly as in :func:`~tau2_gym.runner.collect.acollect`.
    """

    def __init__(
        self,
        config: RolloutConfig,
        tasks: Sequence[Task],
        policy: Any,
        user: Any,
        judge: JudgeSpec,
        servers: Sequence[dict] = (),
    ) -> None:
        self.agent = build_player(policy, "policy")
        self.user = build_player(user, "user", config.solo)
        judge = make_judge(judge)  # (a judge comes back as it is)
        adopt_identities(list(servers), self.agent, self.user, judge)  # the served model the driver's check learned
        self.tasks = {t.id: t for t in tasks}
        self.runner = EpisodeRunner(config, list(tasks), self.agent, self.user, judge)

    def info(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname()}

    async def run(self, task_id: str, trial: int, seed: int) -> dict:
        """The episode's SimulationRun record (``EpisodeRunner.run_episode``: retries inside, never raises)."""
        return await self.runner.run_episode(self.tasks[task_id], trial, seed)

    def cache_stats(self) -> dict:
        """This actor's user/judge reply-cache counts (the driver sums them over the actors)."""
        return cache_info(self.user, self.runner.judge)


# ------------------------------------------------------------------------------------------ the driver


class ActorPool:
    """The actors and the episodes each has in flight (object ref -> (actor slot, item))."""

    def __init__(self, ray: Any, make: Callable[[], Any], num_actors: int, per_actor: int, restarts: int) -> None:
        self.ray, self.make, self.per_actor, self.restarts_left = ray, make, per_actor, restarts
        self.actors: dict[int, Any] = {}
        self.load: dict[int, int] = {}
        self.inflight: dict[Any, tuple[int, tuple]] = {}
        self.next_slot = 0
        self.deaths = 0
        self.requeued = 0  # episodes taken back from dead actors
        for _ in range(num_actors):
            self.start()

    def start(self) -> None:
        slot = self.next_slot
        self.next_slot += 1
        self.actors[slot] = self.make()
        self.load[slot] = 0

    def submit(self, queue: collections.deque) -> list:
        """Fill every actor up to ``per_actor`` episodes in flight, least loaded first; the new refs."""
        refs = []
        while queue:
            free = [s for s in self.actors if self.load[s] < self.per_actor]
            if not free:
                break
            slot = min(free, key=lambda s: self.load[s])
            item = queue.popleft()
            ref = self.actors[slot].run.remote(*item)
            self.inflight[ref] = (slot, item)
            self.load[slot] += 1
            refs.append(ref)
        return refs

    def done(self, ref: Any) -> tuple:
        slot, item = self.inflight.pop(ref)
        self.load[slot] -= 1
        return item

    def died(self, ref: Any, error: BaseException) -> list[tuple]:
        """The actor behind ``ref`` is gone: drop it, start a replacement if allowed, return its items."""
        slot, _ = self.inflight[ref]
        lost = [(r, item) for r, (s, item) in self.inflight.items() if s == slot]
        for r, _ in lost:
            del self.inflight[r]
        actor = self.actors.pop(slot, None)
        if actor is not None:
            try:
                self.ray.kill(actor)  # dead already, or unreachable: then it must not keep working
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.load.pop(slot, None)
        self.deaths += 1
        self.requeued += len(lost)
        logger.warning(
            "Ray actor %d died (%s: %s); re-queueing its %d unfinished episode(s)",
            slot,
            type(error).__name__,
            str(error).splitlines()[0] if str(error) else "",
            len(lost),
        )
        if self.restarts_left > 0:
            self.restarts_left -= 1
            self.start()
        elif not self.actors:
            raise RuntimeError(
                f"every Ray actor died and the restart budget is spent; last error: {type(error).__name__}: {error}"
            ) from error
        return [item for _, item in lost]

    def cache_stats(self, timeout: float = 30.0) -> list[dict]:
        """Every live actor's cache counts (an actor that does not answer in time is left out)."""
        out = []
        for actor in self.actors.values():
            try:
                out.append(self.ray.get(actor.cache_stats.remote(), timeout=timeout))
            except Exception as exc:  # noqa: BLE001 - counts are a report, not the run's outcome
                logger.warning("a Ray actor's cache counts are unavailable: %s: %s", type(exc).__name__, exc)
        return out

    def kill_all(self) -> None:
        for actor in self.actors.values():
            try:
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors.clear()


async def _stream(ray: Any, pool: ActorPool, queue: collections.deque, deliver: Callable[[dict], None]) -> None:
    """Hand out ``queue`` and deliver the records as they come back, until nothing is queued or in flight.

    Every call's result is awaited as an asyncio future (Ray resolves it by callback), so a completion costs the
    same with 10 or 10,000 episodes in flight -- no ``ray.wait`` scan over all of them.
    """
    arrived: asyncio.Queue = asyncio.Queue()

    # an actor that is gone (RayActorError; also its ActorUnavailableError: treated as gone, and killed to make
    # sure) loses its episodes in flight only
    gone = ray.exceptions.RayActorError

    async def watch(ref: Any) -> None:
        try:
            arrived.put_nowait((ref, await ref, None))
        except Exception as exc:  # noqa: BLE001 - sorted out by the loop below (the loop must hear of every call)
            arrived.put_nowait((ref, None, exc))

    watchers: set = set()

    def hand_out() -> None:
        for ref in pool.submit(queue):
            task = asyncio.ensure_future(watch(ref))
            watchers.add(task)
            task.add_done_callback(watchers.discard)

    written: set = set()  # a record is delivered once per (task, trial, seed)
    hand_out()
    try:
        while pool.inflight:
            got = [await arrived.get()]
            while not arrived.empty():  # all that arrived meanwhile: one group commit
                got.append(arrived.get_nowait())
            for ref, run, exc in got:
                if ref not in pool.inflight:
                    continue  # its actor died and its item is queued again: this late result is not used
                if isinstance(exc, gone):  # the first of this actor's refs to fail re-queues all its items
                    queue.extendleft(reversed(pool.died(ref, exc)))
                    continue
                if exc is not None:  # the actor is fine but the call raised: a bug, not an episode's failure
                    raise RuntimeError(
                        f"episode {pool.inflight[ref][1]} failed on its Ray actor: {type(exc).__name__}: {exc}"
                    ) from exc
                pool.done(ref)
                key = record_key(run)
                if key in written:  # cannot happen (one call per unfinished item); never write twice
                    logger.error("episode %s came back twice; the second record is dropped", key)
                    continue
                written.add(key)
                deliver(run)
            hand_out()
    finally:
        for task in list(watchers):
            task.cancel()


def _check_picklable(ray: Any, obj: Any, name: str) -> None:
    """Fail before any actor starts if ``obj`` cannot travel to one, saying what to pass instead."""
    try:
        ray.cloudpickle.dumps(obj)
    except Exception as exc:  # noqa: BLE001 - any pickling failure gets the same advice
        raise TypeError(
            f"the {name} ({type(obj).__name__}) cannot be sent to Ray actors ({type(exc).__name__}: "
            f"{exc}); pass a zero-argument factory instead, e.g. functools.partial("
            f"{type(obj).__name__}, config), so that each actor builds its own"
        ) from None


async def acollect_ray(
    tasks: Optional[Sequence[Union[Task, str]]],
    policy: Any,
    user: Any = None,
    *,
    config: Optional[RolloutConfig] = None,
    num_actors: int = 2,
    address: Optional[str] = None,
    actor_options: Optional[dict] = None,
    max_actor_restarts: Optional[int] = None,
    init_kwargs: Optional[dict] = None,
    on_pool: Optional[Callable[[Any], None]] = None,
    **settings: Any,
) -> RolloutReport:
    """:func:`~tau2_gym.runner.collect.collect` with the episodes run by ``num_actors`` Ray actors.

    Args:
        tasks, policy, user, config, settings: as :func:`~tau2_gym.runner.collect.collect`; ``policy``/``user`` may
            also be zero-argument factories (needed for LLM clients, which do not pickle). ``concurrency`` is
            the number of episodes in flight *per actor*.
        num_actors: actors to start (each loads the domain once).
        address: None = the Ray runtime this process is connected to, else a new local one (shut down at the
            end); ``"auto"`` or ``"ray://host:10001"`` = connect to that cluster (``ray.init(address=...)``)
            unless this process is connected already.
        actor_options: ``.options(...)`` of each actor (default ``num_cpus=1``), e.g. ``{"resources":
            {"cpu_node": 1}}`` or a ``runtime_env`` that installs tau2-gym / sets ``TAU2_DATA_DIR`` on the nodes.
        max_actor_restarts: replacements started for dead actors over the run (default: ``num_actors``).
        init_kwargs: extra ``ray.init`` arguments when this call starts or connects the runtime.
        on_pool: called with the actor pool once it is up (tests use it to kill an actor mid-run).

    Returns the :class:`~tau2_gym.runner.collect.RolloutReport`, as ``collect``.
    """
    ray = import_ray()
    cfg = config if config is not None else RolloutConfig()
    if settings:
        cfg = RolloutConfig(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, **settings})
    if num_actors < 1:
        raise ValueError(f"num_actors={num_actors} must be >= 1")
    # the driver's own players describe the run (signature, results info) and check its servers; the actors
    # build theirs
    info_policy, info_user, judge, selected = await prepare_run(cfg, tasks, policy, user)
    servers = [
        {"base_url": c.base_url, "model": c.config.model, "served_model": c.served_model}
        for c in llm_clients(info_policy, info_user, judge)
        if c.identified
    ]
    collection = Collection(cfg, selected, EpisodeRunner(cfg, selected, info_policy, info_user, judge))
    started_ray = False
    pool: Optional[ActorPool] = None
    actor_caches: list[dict] = []
    interrupted = True

    async def execute(units: list[Unit], deliver: Callable[[dict], None]) -> None:
        nonlocal started_ray, pool
        if not units:
            return
        if not ray.is_initialized():
            ray.init(
                address=None if address in (None, "local") else address,
                include_dashboard=False,
                log_to_driver=True,
                **(init_kwargs or {}),
            )
            started_ray = True
        elif address not in (None, "local"):
            logger.warning("this process is already connected to Ray; address=%r is not used", address)
        options = {"num_cpus": 1, **(actor_options or {})}
        cpus = ray.cluster_resources().get("CPU", 0.0)
        if min(num_actors, len(units)) * float(options.get("num_cpus") or 0) > cpus:
            logger.warning(
                "%d actor(s) x num_cpus=%s exceed the cluster's %s CPUs: the rest wait until CPUs "
                "free up (or join); for LLM-bound actors pass actor_options={'num_cpus': 0.25}",
                min(num_actors, len(units)),
                options.get("num_cpus"),
                cpus,
            )
        for obj, name in ((policy, "policy"), (user, "user simulator"), (cfg.judge, "judge")):
            _check_picklable(ray, obj, name)
        actor_cfg = replace(cfg, output=None, progress=False)
        tasks_ref = ray.put(selected)
        remote = ray.remote(EpisodeActor).options(max_concurrency=max(1, cfg.concurrency), **options)
        restarts = num_actors if max_actor_restarts is None else max_actor_restarts
        pool = ActorPool(
            ray,
            lambda: remote.remote(actor_cfg, tasks_ref, policy, user, cfg.judge, servers),
            min(num_actors, len(units)),
            max(1, cfg.concurrency),
            restarts,
        )
        if on_pool is not None:
            on_pool(pool)
        await _stream(ray, pool, collections.deque((t.id, trial, seed) for t, trial, seed in units), deliver)

    try:
        interrupted = await run_collection(collection, execute)
    finally:
        if pool is not None:
            if not interrupted:
                actor_caches = pool.cache_stats()
            pool.kill_all()
        if started_ray:
            ray.shutdown()
        for obj in (info_policy, info_user):
            _close(obj)
        extra = {}
        if actor_caches:  # the actors asked the LLMs, not the driver's own (idle) players: their counts summed
            for name in ("user_cache", "judge_cache"):
                summed = sum_stats([c.get(name) for c in actor_caches])
                if summed is not None:
                    extra[name] = summed
        report = collection.report(interrupted, extra)
    return report


def collect_ray(
    tasks: Optional[Sequence[Union[Task, str]]],
    policy: Any,
    user: Any = None,
    *,
    config: Optional[RolloutConfig] = None,
    **settings: Any,
) -> RolloutReport:
    """:func:`acollect_ray` from synchronous code (inside a running event loop, e.g. a notebook, ``await
    acollect_ray(...)``). Ctrl-C stops the run after saving what finished (run again to resume)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("collect_ray() cannot run inside a running event loop; use `await acollect_ray(...)` there")
    return asyncio.run(acollect_ray(tasks, policy, user, config=config, **settings))
