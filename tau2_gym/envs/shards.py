"""Sub-envs in worker processes: how one :class:`~tau2_gym.envs.vector.Tau2VectorEnv` uses more than one core.

A vector env steps in lockstep: a step lasts about the LLM's latency plus the env-side work of every episode,
which one process does serially (tool calls, customer requests and replies, observations, infos). With
``processes=K`` the sub-envs are split into K contiguous blocks, each a ``Tau2VectorEnv`` of its own in a worker
process with its own user-simulator client; the parent keeps the Gymnasium surface (seeds, autoreset, the batched
infos) and routes each reset and step to the workers that hold its sub-envs, all at once.

What crosses the pipes: actions, seeds and options out; per sub-env the transition back. An observation is sent
as what it adds to the last one sent for its sub-env (an episode's history grows by appending; the sender checks
that the earlier part is unchanged, else sends it whole), so a step costs the pipe the new messages, not the whole
history. With ``copy_observations=True`` observations are sent whole: unpickled objects are the private copies that
option asks for. Within an episode, an info value that is the very object of the sub-env's previous info (the
task copy, the tool list, the policy) is sent as a marker and the parent hands out its own object of the previous
step again -- as the in-process env hands out the same objects. At a reset, the copies of what every sub-env shares
(a loaded task, the agent's tool list) are sent as recipes (``EpisodeEnv.handout_recipes``): the parent makes its
own copies the same way, with a sibling env per sub-env, so a tool list is handed out again while the caller has
not changed it, as in-process; every other value is sent.

Workers are started with ``spawn`` (safe beside threads, CUDA and the LLM clients' event loops), so a script that
builds such an env needs Python's usual ``if __name__ == "__main__":`` guard. A worker that dies makes the next
call raise a ``RuntimeError`` naming it; the env is then closed. Ctrl-C reaches the parent only.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Optional, Sequence

__all__ = ["ShardSet", "split_sizes"]


class _Same:
    """The marker of an info value that is the sub-env's previous one (pickled by name: a few bytes)."""

    def __reduce__(self) -> str:
        return "SAME"

    def __repr__(self) -> str:
        return "SAME"


SAME = _Same()
_ABSENT = object()


class _Recipe:
    """An info value the parent makes itself (``EpisodeEnv.make_handout``)."""

    __slots__ = ("recipe",)

    def __init__(self, recipe: tuple[str, str]) -> None:
        self.recipe = recipe

    def __reduce__(self) -> tuple:
        return (_Recipe, (self.recipe,))


@dataclass(frozen=True)
class Advance:
    """One round of a vector env: sub-envs ``reset_idx`` reset (``seeds`` and ``options``: one each, or None) and
    sub-envs ``step_idx`` stepped with ``actions``; ``unreadable``: why a malformed batch ends each stepped episode.
    The in-process rounds take it, and it is what a worker is sent for its block (indices local to the block)."""

    step_idx: Sequence[int] = ()
    actions: Sequence[Any] = ()
    reset_idx: Sequence[int] = ()
    seeds: Optional[Sequence[Optional[int]]] = None
    options: Optional[Sequence[Optional[dict]]] = None
    unreadable: Optional[str] = None

    def split(self, owner: Sequence[int], starts: Sequence[int]) -> dict[int, Advance]:
        """This round over worker blocks: ``{k: block k's round}`` for each block it touches, with indices local to
        the block (``owner[i]``: sub-env ``i``'s block; ``starts[k]``: block ``k``'s first sub-env)."""
        steps: dict[int, list[int]] = {}  # block -> positions in step_idx
        resets: dict[int, list[int]] = {}  # block -> positions in reset_idx
        for n, i in enumerate(self.step_idx):
            steps.setdefault(owner[i], []).append(n)
        for n, i in enumerate(self.reset_idx):
            resets.setdefault(owner[i], []).append(n)

        def pick(values: Optional[Sequence[Any]], positions: list[int]) -> Optional[list[Any]]:
            return None if values is None else [values[n] for n in positions]

        return {
            k: Advance(
                [self.step_idx[n] - starts[k] for n in steps.get(k, [])],
                [self.actions[n] for n in steps.get(k, [])],
                [self.reset_idx[n] - starts[k] for n in resets.get(k, [])],
                pick(self.seeds, resets.get(k, [])),
                pick(self.options, resets.get(k, [])),
                self.unreadable,
            )
            for k in sorted(steps.keys() | resets.keys())
        }

    def reset_kwargs(self, k: int) -> dict[str, Any]:
        """``begin_reset``'s arguments for the ``k``-th sub-env of ``reset_idx``."""
        return {
            "seed": None if self.seeds is None else self.seeds[k],
            "options": None if self.options is None else self.options[k],
        }


def split_sizes(n: int, k: int) -> list[int]:
    """``n`` sub-envs in ``k`` contiguous blocks whose sizes differ by at most one (the first ones larger)."""
    base, extra = divmod(n, k)
    return [base + (1 if j < extra else 0) for j in range(k)]


# ---------------------------------------------------------------------------------------------- the worker side


class _Worker:
    """A worker's vector env and the state of the observations it has sent (see the module docstring)."""

    def __init__(self, vec: Any, whole: bool) -> None:
        self.vec = vec
        self.whole = whole
        self.sent: list[Any] = [None] * vec.num_envs
        self.sent_info: list[Optional[dict]] = [None] * vec.num_envs

    def _encode(self, i: int, obs: Any) -> tuple[int, Any]:
        """``(k, tail)``: the observation is the last one sent with its first ``k`` entries kept and ``tail``
        appended; ``k = -1``: ``tail`` is the whole observation."""
        prev, self.sent[i] = self.sent[i], obs
        if not self.whole and type(obs) is list and type(prev) is list:
            k = len(prev)
            if len(obs) >= k and obs[:k] == prev:  # identical entries compare by identity, so this is cheap
                return k, obs[k:]
        return -1, obs

    def _encode_info(self, i: int, info: dict, fresh: bool) -> dict:
        """``info`` with :data:`SAME` for each value that is the object sent under its key at the previous step of
        the episode (a reset, ``fresh``, sends every value)."""
        prev, self.sent_info[i] = (None if fresh else self.sent_info[i]), info
        if prev is not None:
            return {key: SAME if prev.get(key, _ABSENT) is value else value for key, value in info.items()}
        recipes = self.vec.envs[i].handout_recipes(info) if fresh else {}
        return {key: _Recipe(recipes[key]) if key in recipes else value for key, value in info.items()}

    def advance(self, round_: Advance) -> tuple:
        vec = self.vec
        batches, requests = vec.user_batches, vec.user_requests
        results, resets = vec._advance(round_)
        encode, encode_info = self._encode, self._encode_info
        return (
            [
                (i, encode(i, obs), reward, term, trunc, encode_info(i, info, False))
                for i, (obs, reward, term, trunc, info) in results.items()
            ],
            [(i, encode(i, obs), encode_info(i, info, True)) for i, (obs, info) in resets.items()],
            vec.user_batches - batches,
            vec.user_requests - requests,
        )

    def call(self, name: str, args: tuple, kwargs: dict) -> tuple:
        return self.vec.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple:
        return self.vec.get_attr(name)

    def set_attr(self, name: str, values: list) -> None:
        self.vec.set_attr(name, values)

    def render(self) -> tuple:
        return self.vec.render()

    def simulation_runs(self) -> list:
        return self.vec.simulation_runs()

    def copy_slot(self, src: int, dst: list[int]) -> None:
        self.vec.copy_slot(src, dst)
        for j in dst:
            self.sent[j] = self.sent[src]
            self.sent_info[j] = self.sent_info[src]


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError carrying its type, text and traceback."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to travel gets the stand-in
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return RuntimeError(f"{type(exc).__name__}: {exc}\n{text}")


def _serve(conn: Connection, build: Any, size: int, domain: str, kwargs: dict, copy_observations: bool) -> None:
    """A worker process: build the block's vector env, then answer the parent's commands until ``close``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes the workers
    try:
        vec = build(size, domain, copy_observations=copy_observations, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the parent raises it
        conn.send(("error", _portable(exc)))
        return
    worker = _Worker(vec, whole=copy_observations)
    conn.send(("ok", None))
    try:
        while True:
            try:
                command, args = conn.recv()
            except EOFError:  # the parent is gone
                return
            if command == "close":
                break
            try:
                reply: tuple = ("ok", getattr(worker, command)(*args))
            except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
                reply = ("error", _portable(exc))
            conn.send(reply)
    finally:
        vec.close()
    conn.send(("ok", None))


# ---------------------------------------------------------------------------------------------- the parent side


class ShardSet:
    """The worker processes of one vector env, and the routing of sub-env indices to them.

    ``build(size, domain, copy_observations=..., **kwargs)`` makes a worker's in-process vector env (the class
    itself, sent by reference); ``template``: the parent's env of the same settings, whose siblings make the info
    copies sent as recipes; ``user_for(kwargs, k, K)`` (optional) gives worker ``k`` of ``K`` its user simulator
    (a concurrent one's gate split between the workers).
    """

    def __init__(
        self,
        build: Any,
        num_envs: int,
        processes: int,
        domain: str,
        kwargs: dict,
        copy_observations: bool,
        template: Any,
        user_for: Any = None,
    ) -> None:
        self.sizes = split_sizes(num_envs, processes)
        self.starts = [sum(self.sizes[:k]) for k in range(processes)]
        self.shard_of = [k for k, size in enumerate(self.sizes) for _ in range(size)]
        self.mirror: list[Any] = [None] * num_envs  # the parent's copy of each sub-env's last observation
        self.info_mirror: list[dict] = [{} for _ in range(num_envs)]  # ... and of its last info
        self.template = template
        self.copiers: list[Any] = [None] * num_envs  # a sibling of the template per sub-env, made on first use
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        self.closed = False
        ctx = multiprocessing.get_context("spawn")
        try:
            for k, size in enumerate(self.sizes):
                own = dict(kwargs)
                if user_for is not None:
                    user_for(own, k, processes)
                try:
                    pickle.dumps(own)  # said here, in words, rather than as the spawn's pickling error
                except Exception as exc:
                    raise TypeError(
                        f"processes={processes}: the env arguments must be sent to the worker processes, and "
                        f"pickling them failed ({type(exc).__name__}: {exc}); pass the user simulator as a spec "
                        "(user='openai:MODEL@URL') or an object that pickles"
                    ) from exc
                parent, child = ctx.Pipe()
                args = (child, build, size, domain, own, copy_observations)
                proc = ctx.Process(target=_serve, args=args, name=f"tau2-vector-{k}", daemon=True)
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
            for k in range(processes):
                self._reply(k, "start")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ transport

    def _reply(self, k: int, command: str) -> Any:
        """Worker ``k``'s answer; its error raised here; a dead worker a RuntimeError (and every worker closed)."""
        try:
            status, value = self.conns[k].recv()
        except (EOFError, OSError) as exc:
            proc = self.procs[k]
            proc.join(1)
            self.close()
            raise RuntimeError(
                f"vector-env worker {k} (pid {proc.pid}) exited with code {proc.exitcode} during {command}; "
                "the vector env is closed"
            ) from exc
        if status == "error":
            raise value
        return value

    def _ask(self, jobs: dict[int, tuple], command: str, on_reply: Any = None) -> dict[int, Any]:
        """Send ``command`` with ``jobs[k]`` to each worker k, then collect every reply as it arrives (handed to
        ``on_reply(k, reply)`` then, while the other workers still work); the first worker error is raised once all
        have answered and every other reply is handled, so the workers stay in step with the parent."""
        if self.closed:
            raise RuntimeError("the vector env is closed")
        for k, args in jobs.items():
            try:
                self.conns[k].send((command, args))
            except (BrokenPipeError, OSError):
                self._reply(k, command)  # raises the worker's exit
        out: dict[int, Any] = {}
        failure: Optional[BaseException] = None
        waiting: dict[Any, int] = {self.conns[k]: k for k in jobs}
        try:
            while waiting:
                for conn in wait(list(waiting)):
                    k = waiting.pop(conn)
                    try:
                        out[k] = self._reply(k, command)
                        if on_reply is not None:
                            on_reply(k, out[k])
                    except RuntimeError as exc:
                        if self.closed:
                            raise
                        failure = failure or exc
                    except Exception as exc:  # noqa: BLE001 - the worker's error, raised below
                        failure = failure or exc
        except BaseException:
            if waiting:  # interrupted (Ctrl-C) with replies outstanding: the pipes no longer match the commands
                self.close()
            raise
        if failure is not None:
            raise failure
        return out

    def gather(self, command: str, *args: Any) -> list[Any]:
        """``command`` on every worker, each answering with a list over its block: the lists joined, in sub-env
        order."""
        replies = self._ask({k: args for k in range(len(self.conns))}, command)
        return [x for k in range(len(self.conns)) for x in replies[k]]

    def locate(self, i: int) -> tuple[int, int]:
        """(worker, index in the worker) of sub-env ``i``."""
        k = self.shard_of[i]
        return k, i - self.starts[k]

    # ------------------------------------------------------------------ the vector env's calls

    def advance(self, round_: Advance) -> tuple[dict[int, tuple], dict[int, tuple], int, int]:
        """``Tau2VectorEnv._advance`` over the workers: ``(results, resets, batches, requests)``, the last two
        the rounds and customer requests the workers made."""
        jobs = {k: (part,) for k, part in round_.split(self.shard_of, self.starts).items()}
        results: dict[int, tuple] = {}
        resets: dict[int, tuple] = {}
        counts = [0, 0]

        def take(k: int, reply: tuple) -> None:
            # every worker that answered is decoded, even when another failed: its mirrors must follow what it sent
            stepped, reset, batches, requests = reply
            start = self.starts[k]
            for local, obs, reward, term, trunc, info in stepped:
                i = start + local
                results[i] = (self._decode(i, obs), reward, term, trunc, self._decode_info(i, info))
            for local, obs, info in reset:
                i = start + local
                resets[i] = (self._decode(i, obs), self._decode_info(i, info))
            counts[0] += batches
            counts[1] += requests

        self._ask(jobs, "advance", take)
        return (
            {i: results[i] for i in round_.step_idx},
            {i: resets[i] for i in round_.reset_idx},
            counts[0],
            counts[1],
        )

    def _decode(self, i: int, encoded: tuple[int, Any]) -> Any:
        k, tail = encoded
        whole = tail if k < 0 else self.mirror[i][:k] + tail
        self.mirror[i] = whole
        return list(whole) if type(whole) is list else whole  # the caller's list; the mirror stays the parent's

    def _decode_info(self, i: int, info: dict) -> dict:
        prev = self.info_mirror[i]
        info = {key: prev[key] if value is SAME else value for key, value in info.items()}
        for key, value in info.items():
            if type(value) is _Recipe:
                copier = self.copiers[i]
                if copier is None:
                    copier = self.copiers[i] = self.template.sibling()
                info[key] = copier.make_handout(value.recipe)
        self.info_mirror[i] = info
        return dict(info)  # the caller's dict; the values are the previous step's objects, as in-process

    def set_attr(self, name: str, values: list) -> None:
        """One value per sub-env, each worker given its block's."""
        bounds = enumerate(zip(self.starts, self.sizes))
        self._ask({k: (name, values[start : start + size]) for k, (start, size) in bounds}, "set_attr")

    def copy_slot(self, src: int, dst: Sequence[int]) -> None:
        k, local = self.locate(src)
        targets = []
        for j in dst:
            kj, lj = self.locate(j)
            if kj != k:
                raise ValueError(
                    f"copy_slot({src}, {j}): sub-envs {src} and {j} live in different worker processes "
                    f"({k} and {kj}); copy within one worker's block, or build the vector env with processes=1"
                )
            targets.append(lj)
        self._ask({k: (local, targets)}, "copy_slot")
        for j in dst:
            self.mirror[j] = self.mirror[src]
            self.info_mirror[j] = self.info_mirror[src]
            self.copiers[j] = None  # as a clone, its own tool copies from its next reset on

    def close(self) -> None:
        """Ask every worker to close its env, then end the processes (terminated if they do not exit)."""
        if self.closed:
            return
        self.closed = True
        for conn in self.conns:
            try:
                conn.send(("close", ()))
            except (BrokenPipeError, OSError):
                pass
        for conn, proc in zip(self.conns, self.procs):
            if proc.is_alive() and conn.poll(10):
                try:
                    conn.recv()
                except (EOFError, OSError):
                    pass
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            conn.close()
