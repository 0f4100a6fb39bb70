"""Many tau2 episodes in one process: a Gymnasium ``VectorEnv`` whose user turns are answered in batches.

``gym.make_vec("tau2/airline-v0", num_envs=N)`` returns :class:`Tau2VectorEnv`. Each sub-environment is a
shallow copy of one freshly built :class:`~tau2_gym.envs.tau2_env.Tau2Env` (sharing the loaded domain, the task
pool, the tool schemas, the spaces and the user simulator), so an episode costs only its turn loop and its
copy-on-write database view: 10,000 live airline episodes fit in one process.

A vector step runs in three phases:

1. every sub-env takes its action (``Tau2Env.begin_step``; tool calls execute at once);
2. the pending customer turns of all episodes (``Tau2Env.pending_user_turn``) are answered together -- one
   ``user.generate_batch(requests)`` per round (a local HF model batches them, a scripted user answers inline),
   rounds repeating while customers make tool calls;
3. each sub-env's transition is collected (``Tau2Env.end_step``: observation, the tau2 reward at the end, info).

Resets run the same three phases (``begin_reset`` / ``end_reset``), sharing the batches with the steps.

A simulator that ``answers_concurrently`` (one behind a server: ``OpenAIUserSimulator``) is asked the way a rollout
asks it: each sub-env's step is a coroutine on the vector env's own event loop that runs the same three phases for
its episode and awaits ``user.agenerate`` -- the async client, its connection pool and concurrency gate, its
retries -- so every request of the step is in flight together and each episode finishes its step as soon as its
reply is in, while the others still wait for theirs.

Trajectories, rewards and RNG streams are those of N separate ``Tau2Env`` s under Gymnasium's
``SyncVectorEnv`` with the same seeds (the tests pin that). Autoreset follows Gymnasium's documented modes
(``autoreset_mode=`` ``"NextStep"`` (default), ``"SameStep"``, ``"Disabled"``), passed as a keyword:
``gym.make_vec(id, n, autoreset_mode="SameStep")``. Gymnasium's ``make_vec`` refuses ``vector_kwargs`` for a
custom vector env (its own error, before this class runs); ``vector_kwargs={"autoreset_mode": ...}`` is for
``vectorization_mode="sync"`` / ``"async"``, where Gymnasium's vectorizer takes it.

Differences from ``SyncVectorEnv`` worth knowing:

* observations are a *list* of per-env message lists (fresh objects each step: no ``copy`` needed);
* infos follow Gymnasium's layout (one array per key plus a ``_key`` mask, nested dicts batched recursively),
  except that the episode records ``reward_info`` and ``simulation_run`` stay whole -- an object array of
  per-env dicts -- because their nested fields are ``None`` in some episodes and dicts in others;
* ``reset(options=[...])`` also accepts one options dict per sub-env (e.g. a task id each).

``processes=K`` puts the sub-envs in K worker processes (:mod:`tau2_gym.envs.shards`), each a vector env of its
block with its own customer client, stepped together: more than one core for one lockstep step. The Gymnasium
surface is the same, and so are the episodes (the tests pin it); sub-env objects then live in the workers, so
``envs[i]``, :meth:`~Tau2VectorEnv.clone_slot` and :meth:`~Tau2VectorEnv.set_slot` are refused and
:meth:`~Tau2VectorEnv.copy_slot` works within one worker's block (``call``/``get_attr``/``set_attr`` reach every
sub-env). A concurrent customer's ``max_concurrency`` is the total: each worker gets its share (at least one).

Gymnasium's own ``SyncVectorEnv`` / ``AsyncVectorEnv`` batch every nested info dict field by field, which
fails when one episode ends prematurely (``reward_info["db_check"]`` is ``None``) and another is scored
(a dict) in the same step. Wrap the single envs with :class:`KeepRecordsWhole` there::

    gym.make_vec("tau2/airline-v0", 8, vectorization_mode="sync", wrappers=[KeepRecordsWhole])
    gym.make_vec("tau2/airline-v0", 8, vectorization_mode="async", wrappers=[KeepRecordsWhole],
                 vector_kwargs={"shared_memory": False})  # chat observations cannot live in shared memory
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, Callable, Optional, Sequence, SupportsFloat, Union

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.spaces import Space, Tuple
from gymnasium.vector.vector_env import AutoresetMode, VectorEnv

from tau2_gym.core.records import Record
from tau2_gym.core.results_file import write_json_atomic
from tau2_gym.core.turns import UserSimulatorError
from tau2_gym.envs import entry_point
from tau2_gym.envs.shards import Advance, ShardSet, split_sizes
from tau2_gym.llm.loop import LoopThread

logger = logging.getLogger("tau2_gym")

__all__ = ["Tau2VectorEnv", "SharedTuple", "KeepRecordsWhole"]

#: info keys whose (dict) values are kept whole in an object array instead of being batched field by field
WHOLE_RECORD_KEYS = frozenset({"reward_info", "simulation_run"})
_SCALARS = (int, float, bool)
_SCALAR_SET = frozenset(_SCALARS)


def autoreset_mode_of(value: Union[str, AutoresetMode]) -> AutoresetMode:
    """Gymnasium's :class:`~gymnasium.vector.AutoresetMode` from the enum, its value (``"SameStep"``) or its
    name in any case (``"same_step"``); every mode is supported. Anything else is a ValueError naming them."""
    if isinstance(value, AutoresetMode):
        return value
    if isinstance(value, str):
        key = value.strip().replace("-", "_").replace("_", "").lower()
        for mode in AutoresetMode:
            if key in (mode.value.lower(), mode.name.replace("_", "").lower()):
                return mode
    raise ValueError(
        f"autoreset_mode={value!r} is not one of Gymnasium's AutoresetMode values: "
        f"{', '.join(repr(m.value) for m in AutoresetMode)} (or gymnasium.vector.AutoresetMode."
        f"{'/'.join(m.name for m in AutoresetMode)}). With gym.make_vec's default mode pass it as a "
        "keyword, gym.make_vec(id, n, autoreset_mode=...): Gymnasium forwards no vector_kwargs to a "
        "custom vector env; vector_kwargs={'autoreset_mode': ...} is for vectorization_mode='sync'/'async'"
    )


class SharedTuple(Tuple):
    """``Tuple`` of N references to ONE sub-space (Gymnasium's ``batch_space`` deep-copies it N times).

    The tau2 spaces carry every tool schema; N deep copies would multiply that memory by N. Samples
    are drawn from the one shared RNG, so they still differ per element.
    """

    def __init__(self, space: Space, n: int, seed: Optional[int] = None) -> None:
        super().__init__((space,) * n)
        if seed is not None:
            self.seed(seed)

    def seed(self, seed: Union[int, Sequence[int], None] = None) -> tuple[int, ...]:
        space = self.spaces[0] if self.spaces else None
        if space is None:
            return ()
        if isinstance(seed, Sequence):  # one RNG for all: the first seed
            seed = seed[0] if seed else None
        return (space.seed(seed),) * len(self.spaces)

    def __repr__(self) -> str:
        return f"SharedTuple({self.spaces[0] if self.spaces else None!r}, n={len(self.spaces)})"


class KeepRecordsWhole(gym.Wrapper):
    """Wraps plain-dict info records (:data:`WHOLE_RECORD_KEYS`) as :class:`~tau2_gym.core.records.Record`.

    ``Tau2Env`` already emits records; this is for envs built with older code or custom wrappers that
    replace them with dicts, so Gymnasium's vector info merge never recurses into them."""

    @staticmethod
    def _wrap(info: dict) -> dict:
        for key in WHOLE_RECORD_KEYS:
            if isinstance(info.get(key), dict):
                info[key] = Record(info[key])
        return info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        return obs, self._wrap(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, term, trunc, info = self.env.step(action)
        return obs, reward, term, trunc, self._wrap(info)


def _env_class(domain: str) -> Callable[..., Any]:

    return load_env_creator(entry_point(domain))


class Tau2VectorEnv(VectorEnv):
    """``num_envs`` tau2 episodes in one process, user turns answered in batches.

    Args:
        num_envs: number of sub-environments.
        domain: the tau2 domain (the registered ids pass it).
        autoreset_mode: ``"NextStep"`` (Gymnasium's default), ``"SameStep"`` or ``"Disabled"`` (an
            :class:`~gymnasium.vector.AutoresetMode` or its value).
        copy_observations: give every observation private message dicts. Default False: a step's observation
            is a new list, but the message dicts in it are shared with the episode's earlier observations
            (treat them as read-only) -- copying the whole history on every step made long episodes O(T^2).
        processes: worker processes holding the sub-envs (default 1: all in this one; see the module docstring).
        **kwargs: the single env's arguments (:class:`~tau2_gym.envs.config.Tau2EnvConfig` fields,
            ``config=``, ``render_mode=``), e.g. ``user=``, ``task_split=``, ``max_steps=``.

    ``envs`` are the sub-envs (``Tau2Env`` instances driven by this object -- don't step them yourself).
    ``user_batches`` / ``user_requests`` count the rounds of customer turns (for a concurrent simulator, one per
    step or reset: its requests are all in flight together) and the customer requests made so far.
    :meth:`clone_slot` and :meth:`copy_slot` branch a sub-env's live episode (out to a standalone env, or into other
    sub-envs).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["ansi", "human"]}

    def __init__(
        self,
        num_envs: int = 1,
        domain: Optional[str] = None,
        *,
        autoreset_mode: Union[str, AutoresetMode] = AutoresetMode.NEXT_STEP,
        copy_observations: bool = False,
        max_episode_steps: Optional[int] = None,
        processes: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if int(num_envs) < 1:
            raise ValueError(f"num_envs={num_envs!r} must be >= 1")
        whole = isinstance(processes, (int, np.integer)) and not isinstance(processes, bool)
        if not whole or not 1 <= processes <= num_envs:
            raise ValueError(f"processes={processes!r} must be an int from 1 to num_envs={num_envs}")
        if max_episode_steps is not None:
            raise ValueError(
                "max_episode_steps (a TimeLimit) is not used by tau2 envs; pass max_steps=N "
                "(upstream's orchestrator step limit) instead"
            )
        config = kwargs.get("config")
        domain = domain or (config.domain if config is not None else None)
        if domain is None:
            raise ValueError("Tau2VectorEnv needs domain=... (gym.make_vec('tau2/<domain>-v0') passes it)")
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.domain_name = domain
        self.num_envs = int(num_envs)
        cls = _env_class(domain)
        template = cls(domain=domain, **kwargs) if config is None else cls(**kwargs)
        user_spec = config.user if config is not None else kwargs.get("user", "oracle")
        self._owns_user = user_spec is None or isinstance(user_spec, str)  # we built it, so we close it
        template.copy_observations = copy_observations
        self._shards: Optional[ShardSet] = None
        self.envs: Any
        if processes > 1:
            self.envs = _InWorkers(self.num_envs, int(processes))
            self._shards = ShardSet(
                type(self), self.num_envs, int(processes), domain, kwargs, copy_observations, template, _share_gate
            )
        else:
            self.envs = [template.sibling() for _ in range(self.num_envs)]  # fresh RNGs, as N made envs
        self.template = template
        self.user = template.user
        self.tools = template.tools
        self.metadata = dict(type(template).metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = template.render_mode
        self.single_observation_space = template.observation_space
        self.single_action_space = template.action_space
        self.observation_space = SharedTuple(self.single_observation_space, self.num_envs)
        self.action_space = SharedTuple(self.single_action_space, self.num_envs)

        # per-env step results; the arrays handed out are built from them once per step. No observations until
        # the first reset (reset(), reset_slots() or set_slot()): step() refuses to run before it. A sub-env whose
        # flags are set ended at its last step: the next step() resets it (NextStep) or refuses (Disabled).
        self._obs: Optional[list[Any]] = None
        self._rewards: list[float] = [0.0] * self.num_envs
        self._terminations: list[bool] = [False] * self.num_envs
        self._truncations: list[bool] = [False] * self.num_envs
        self.user_batches = 0
        self.user_requests = 0
        self._loop: Optional[LoopThread] = None  # where sub-envs await a concurrent simulator (made on first use)
        gate = getattr(getattr(self.user, "config", None), "max_concurrency", None)
        concurrent = getattr(self.user, "answers_concurrently", False)
        if concurrent and isinstance(gate, int) and gate < self.num_envs and self._shards is None:
            logger.warning(
                "%d sub-envs but the user simulator sends at most max_concurrency=%d requests at once: the other "
                "customers wait their turn (build it with max_concurrency=%d for every episode's request in flight)",
                self.num_envs,
                gate,
                self.num_envs,
            )

    # ------------------------------------------------------------------ properties

    @property  # as SyncVectorEnv's (VectorEnv declares one int)
    def np_random_seed(self) -> tuple[Optional[int], ...]:  # ty: ignore[incompatible-property-override] - one per env
        return self.get_attr("np_random_seed")

    @property  # as SyncVectorEnv's (VectorEnv declares one Generator)
    def np_random(self) -> tuple[np.random.Generator, ...]:  # ty: ignore[incompatible-property-override] - one per env
        return self.get_attr("np_random")

    @property
    def config(self) -> Any:
        return self.template.config

    def __repr__(self) -> str:
        workers = "" if self._shards is None else f", processes={len(self._shards.sizes)}"
        return f"Tau2VectorEnv({self.domain_name!r}, num_envs={self.num_envs}{workers})"

    # ------------------------------------------------------------------ phases

    def _answer_users(self, slots: Sequence[Any]) -> None:
        """Phase 2: answer every pending customer turn of ``slots``, one batch per round."""
        pending = [s for s in slots if s.pending_user_turn() is not None]
        while pending:
            requests = [s.pending_user_turn() for s in pending]
            replies = self._generate(requests)
            for slot, reply in zip(pending, replies):
                if isinstance(reply, BaseException) and not isinstance(reply, UserSimulatorError):
                    logger.warning(
                        "user simulator %s raised %s: %s", type(self.user).__name__, type(reply).__name__, reply
                    )
                slot.answer_user(reply)
            pending = [s for s in pending if s.pending_user_turn() is not None]

    def _generate(self, requests: list) -> list:
        self.user_batches += 1
        self.user_requests += len(requests)
        user = self.user
        batch = getattr(user, "generate_batch", None)
        try:
            if batch is not None:
                replies = list(batch(requests))
            else:
                replies = []
                for req in requests:
                    try:
                        replies.append(user.generate(req))
                    except Exception as exc:  # noqa: BLE001 - one failing episode must not sink the batch
                        replies.append(exc)
        except Exception as exc:  # noqa: BLE001 - a failing batch ends those episodes as user_error
            logger.warning(
                "user simulator %s failed on a batch of %d: %s: %s",
                type(user).__name__,
                len(requests),
                type(exc).__name__,
                exc,
            )
            return [exc] * len(requests)
        if len(replies) != len(requests):
            exc = UserSimulatorError(
                f"{type(user).__name__}.generate_batch returned {len(replies)} replies for {len(requests)} requests"
            )
            return [exc] * len(requests)
        return replies

    def _advance(self, round_: Advance) -> tuple[dict[int, tuple], dict[int, tuple]]:
        """Reset and step the sub-envs ``round_`` names; all their customer turns (the resets' opening lines
        included) are answered in shared batches.

        Returns ``(results, resets)``: ``{i: (obs, reward, terminated, truncated, info)}`` and ``{i: (obs, info)}``.
        """
        if self._shards is not None:
            results, resets, batches, requests = self._shards.advance(round_)
            self.user_batches += batches
            self.user_requests += requests
            return results, resets
        if getattr(self.user, "answers_concurrently", False):
            if self._loop is None:
                self._loop = LoopThread("tau2-vector-env")
            return self._loop.run(self._aadvance(round_))
        step_idx, reset_idx = round_.step_idx, round_.reset_idx
        envs = self.envs
        failed: dict[int, Exception] = {}  # a caller's error (a bad reset option): raised once the others moved on
        for k, i in enumerate(reset_idx):  # phase 1
            try:
                envs[i].begin_reset(**round_.reset_kwargs(k))
            except Exception as exc:  # noqa: BLE001 - raised below, as the awaited path does
                failed[i] = exc
        for i, action in zip(step_idx, round_.actions):
            try:
                envs[i].begin_step(action, unreadable=round_.unreadable)
            except Exception as exc:  # noqa: BLE001 - raised below
                failed[i] = exc
        self._answer_users([envs[i] for i in (*reset_idx, *step_idx) if i not in failed])  # phase 2
        results = {i: envs[i].end_step() for i in step_idx if i not in failed}  # phase 3
        resets = {i: envs[i].end_reset() for i in reset_idx if i not in failed}
        if failed:
            raise next(iter(failed.values()))
        return results, resets

    async def _aadvance(self, round_: Advance) -> tuple[dict[int, tuple], dict[int, tuple]]:
        """:meth:`_advance` for a simulator that :attr:`answers_concurrently`: each sub-env's reset or step is a
        coroutine that awaits its customer (``user.agenerate``), as a rollout's episode does, so one episode's work
        runs while the others' requests are in flight. The same transitions as the three phases."""
        step_idx, reset_idx = round_.step_idx, round_.reset_idx
        envs = self.envs
        results: dict[int, tuple] = {}
        resets: dict[int, tuple] = {}

        async def reset(k: int, i: int) -> None:
            env = envs[i]
            env.begin_reset(**round_.reset_kwargs(k))
            await self._converse(env)
            resets[i] = env.end_reset()

        async def step(i: int, action: Any) -> None:
            env = envs[i]
            env.begin_step(action, unreadable=round_.unreadable)
            await self._converse(env)
            results[i] = env.end_step()

        jobs = [reset(k, i) for k, i in enumerate(reset_idx)] + [step(i, a) for i, a in zip(step_idx, round_.actions)]
        if jobs:
            self.user_batches += 1
        failed = [x for x in await asyncio.gather(*jobs, return_exceptions=True) if x is not None]
        if failed:  # a caller's error (e.g. a bad reset option): raised once every other episode has moved on
            raise failed[0]
        # in index order, as the phases give them
        return {i: results[i] for i in step_idx}, {i: resets[i] for i in reset_idx}

    async def _converse(self, env: Any) -> None:
        """Answer ``env``'s customer turns until it waits for the agent (or its episode is over)."""
        request = env.pending_user_turn()
        while request is not None:
            self.user_requests += 1
            try:
                reply: Any = await self.user.agenerate(request)
            except Exception as exc:  # noqa: BLE001 - the episode ends as user_error, the others go on
                if not isinstance(exc, UserSimulatorError):
                    logger.warning("user simulator %s raised %s: %s", type(self.user).__name__, type(exc).__name__, exc)
                reply = exc
            env.answer_user(reply)
            request = env.pending_user_turn()

    # ------------------------------------------------------------------ Gymnasium API

    def reset(
        self,
        *,
        seed: Union[int, Sequence[Optional[int]], None] = None,
        options: Union[dict, Sequence[Optional[dict]], None] = None,
    ) -> tuple[list, dict[str, Any]]:
        """Reset all sub-envs (or those in ``options["reset_mask"]``); seeds as ``SyncVectorEnv``:
        an int gives ``seed + i`` to sub-env i, a list one seed each. ``options`` may be one dict for all or a
        list with one dict (or None) per sub-env."""
        n = self.num_envs
        if seed is None:
            seeds: list[Optional[int]] = [None] * n
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise ValueError(f"seed list has {len(seeds)} entries; num_envs={n}")
        mask = None
        if isinstance(options, dict) and "reset_mask" in options:
            options = dict(options)
            mask = options.pop("reset_mask")
            if not isinstance(mask, np.ndarray) or mask.shape != (n,) or mask.dtype != np.bool_:
                raise TypeError(f"options['reset_mask'] must be a numpy bool array of shape ({n},); got {mask!r}")
            if not mask.any():
                raise ValueError("options['reset_mask'] must select at least one sub-env")
        if options is None or isinstance(options, dict):
            per_env: list[Optional[dict]] = [options] * n
        else:
            per_env = list(options)
            if len(per_env) != n:
                raise ValueError(f"options list has {len(per_env)} entries; num_envs={n}")
        indices = [i for i in range(n) if mask is None or mask[i]]
        _, done = self._advance(
            Advance(reset_idx=indices, seeds=[seeds[i] for i in indices], options=[per_env[i] for i in indices])
        )
        obs = self._record_resets(done)
        return list(obs), self._batch_infos([(i, done[i][1]) for i in indices])

    def step(self, actions: Sequence[Any]) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One action per sub-env (a sequence of length ``num_envs``); see the module docstring for the phases."""
        n = self.num_envs
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        unreadable = None
        if not isinstance(actions, (list, tuple, np.ndarray)) or len(actions) != n:
            # Malformed as a batch: every sub-env ends as agent_error, as the single env does for an unreadable
            # action. An object no env can read (an int, None, bytes) goes to each sub-env as it is, so the
            # transition is exactly the single env's; text, a dict or a list of the wrong length could be
            # one env's action, so the episodes end with the batch's own reason instead of being broadcast.
            if isinstance(actions, (str, dict, list, tuple, np.ndarray)) or hasattr(actions, "tool_calls"):
                size = f" of length {len(actions)}" if isinstance(actions, (list, tuple, np.ndarray)) else ""
                unreadable = (
                    f"vector step() takes one action per sub-env (a sequence of {n}); got "
                    f"{type(actions).__name__}{size}"
                )
            actions = [actions] * n
        mode = self.autoreset_mode
        to_reset: list[int] = []
        to_step: list[int] = []
        was_done = [term or trunc for term, trunc in zip(self._terminations, self._truncations)]
        for i in range(n):
            if mode is AutoresetMode.NEXT_STEP and was_done[i]:
                to_reset.append(i)
            else:
                if mode is AutoresetMode.DISABLED and was_done[i]:
                    raise RuntimeError(
                        f"sub-env {i} ended; with autoreset_mode=Disabled reset it first "
                        "(reset(options={'reset_mask': mask}))"
                    )
                to_step.append(i)
        per_env_info: list[Optional[dict]] = [None] * n
        results, resets = self._advance(
            Advance(to_step, [actions[i] for i in to_step], to_reset, unreadable=unreadable)
        )
        self._record_resets(resets)
        obs = self._record_steps(results)
        for i, (_, info) in resets.items():
            per_env_info[i] = info
        for i, result in results.items():
            per_env_info[i] = result[4]
        if mode is AutoresetMode.SAME_STEP:
            ended = [i for i in results if self._terminations[i] or self._truncations[i]]
            if ended:
                finals = {i: (obs[i], per_env_info[i]) for i in ended}
                _, fresh = self._advance(Advance(reset_idx=ended))
                for i in ended:  # the ended flags stay set: the caller sees them with the fresh observation
                    final_obs, final_info = finals[i]
                    obs[i], info = fresh[i]
                    per_env_info[i] = {"final_obs": final_obs, "final_info": final_info, **info}
        infos = self._batch_infos([(i, info) for i, info in enumerate(per_env_info) if info is not None])
        terms, truncs = self._terminations, self._truncations
        return (
            list(obs),
            np.fromiter(self._rewards, np.float64, n),
            np.fromiter(terms, np.bool_, n),
            np.fromiter(truncs, np.bool_, n),
            infos,
        )

    # ------------------------------------------------------------------ infos

    def _batch_infos(self, entries: Sequence[tuple[int, dict]]) -> dict[str, Any]:
        """Gymnasium's vector-info layout (an array per key + a ``_key`` mask; dicts batched recursively), built
        column by column (one numpy operation per key rather than per key and env).

        ``entries`` are ``(env index, info)`` in index order; the first env holding a key fixes its layout, as in
        Gymnasium. Unlike Gymnasium it never fails on mixed types: values under :data:`WHOLE_RECORD_KEYS` stay
        whole (object arrays); a non-dict met under a dict layout only sets the outer mask; a dict met under an
        array layout, or a non-number under a numeric one, turns the column into an object array.
        """
        n = self.num_envs
        if not entries:
            return {}
        # Envs grouped by their key tuple (a step mixes running and ending episodes: a few distinct key sets),
        # so each column is gathered by list comprehensions rather than a Python loop per key and env.
        groups: dict[tuple[str, ...], list[int]] = {}  # key tuple -> positions in entries
        for pos, (_, info) in enumerate(entries):
            key_tuple = tuple(info)
            group = groups.get(key_tuple)
            if group is None:
                groups[key_tuple] = [pos]
            else:
                group.append(pos)
        key_sets = [(frozenset(kt), ps) for kt, ps in groups.items()]
        # keys held by the same groups of envs share one index list, index array and mask
        layouts: dict[tuple[int, ...], tuple[Sequence[int], np.ndarray, np.ndarray]] = {}
        out: dict[str, Any] = {}
        for key in dict.fromkeys(k for kt in groups for k in kt):  # first appearance in env order, as Gymnasium
            holders = tuple(g for g, (ks, _) in enumerate(key_sets) if key in ks)
            layout = layouts.get(holders)
            if layout is None:
                if len(holders) == len(key_sets):
                    positions: Sequence[int] = range(len(entries))
                elif len(holders) == 1:
                    positions = key_sets[holders[0]][1]
                else:
                    positions = sorted(p for g in holders for p in key_sets[g][1])
                layout = layouts[holders] = (positions, *_index([entries[p][0] for p in positions], n))
            positions, index, mask = layout
            values = [entries[p][1][key] for p in positions]
            first = values[0]
            if isinstance(first, dict) and key not in WHOLE_RECORD_KEYS and key != "final_obs":
                out[key] = self._batch_infos(
                    [(entries[p][0], v) for p, v in zip(positions, values) if isinstance(v, dict)]
                )
            else:
                out[key] = _column(first, index, values, n)
            out[f"_{key}"] = mask.copy()  # every key gets its own mask array
        return out

    # ------------------------------------------------------------------ the rest of the VectorEnv API

    def render(self) -> tuple[Any, ...]:
        if self._shards is not None:
            return tuple(self._shards.gather("render"))
        return tuple(slot.render() for slot in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call (or read) ``name`` on every sub-env."""
        if self._shards is not None:
            return tuple(self._shards.gather("call", name, args, kwargs))
        out = []
        for slot in self.envs:
            attr = getattr(slot, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        if self._shards is not None:
            return tuple(self._shards.gather("get_attr", name))
        return tuple(getattr(slot, name) for slot in self.envs)

    def set_attr(self, name: str, values: Any) -> None:
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs {self.num_envs} values; got {len(values)}")
        if self._shards is not None:
            self._shards.set_attr(name, list(values))
            return
        for slot, value in zip(self.envs, values):
            setattr(slot, name, value)

    # ------------------------------------------------------------------ branching

    def clone_slot(self, index: int, episode_id: Optional[str] = None) -> Any:
        """A standalone :class:`~tau2_gym.envs.tau2_env.Tau2Env` continuing sub-env ``index``'s live episode
        (:meth:`Tau2Env.clone <tau2_gym.envs.tau2_env.Tau2Env.clone>`: its own messages, DB overlays and RNG;
        the domain, tasks and user simulator shared). Step it like any env; this vector env is unchanged.

        Call it between vector steps: then every sub-env is at its agent's turn (or its episode is over)."""
        self._in_this_process("clone_slot")
        return self.envs[self._slot_index(index)].clone(episode_id=episode_id)

    def copy_slot(self, src: int, dst: Union[int, Sequence[int]]) -> None:
        """Branch inside the vector env: sub-env(s) ``dst`` become clones of sub-env ``src``'s episode, with its
        last observation, reward and done flags, so the next :meth:`step` continues each copy with its own
        action -- their user turns answered in one batch with everyone else's (best-of-n with an LLM user).

        A copy also takes ``src``'s RNG state: reset it with a seed of its own if later episodes should differ."""
        src = self._slot_index(src)
        targets = [dst] if isinstance(dst, (int, np.integer)) else list(dst)
        targets = [j for j in map(self._slot_index, targets) if j != src]
        if self._shards is not None:
            self._shards.copy_slot(src, targets)
        else:
            source = self.envs[src]
            for j in targets:
                self.envs[j] = source.clone()
        if self._obs is not None:  # before any reset there is nothing to copy
            obs = self._obs[src]
            row = (self._rewards[src], self._terminations[src], self._truncations[src], None)
            self._record_steps({j: (list(obs) if isinstance(obs, list) else obs, *row) for j in targets})

    def set_slot(self, index: int, env: Any) -> None:
        """Sub-env ``index`` continues a clone of ``env``'s live episode (``env``: a standalone tau2 env, bare or
        wrapped; its wrappers are not carried over -- a ``TimeLimit``'s limit is, the env applies it itself).
        Its user turns are then answered in this vector env's batches, so ``env`` must use this vector env's
        user simulator object (``user=vec.user``). With :meth:`step_slots`, this is how a search runs its branches
        with batched user turns (:func:`tau2_gym.training.search.search_turn` with ``vector=``)."""
        self._in_this_process("set_slot")
        i = self._slot_index(index)
        base = env.unwrapped
        if base.user is not self.user:
            raise ValueError(
                "set_slot needs an env answered by this vector env's user simulator: build it with "
                "user=vec.user (the vector env batches every sub-env's user turns with its own)"
            )
        twin = base.clone()
        twin.copy_observations = self.template.copy_observations
        self.envs[i] = twin
        obs = twin.observation() if twin.episode is not None else None
        if twin._final is None:  # live, or never reset
            self._record_resets({i: (obs, None)})
        else:  # ended: the next step() resets it, as after its own final step
            self._record_steps({i: (obs, *twin._final[1:])})

    def reset_slots(
        self,
        indices: Sequence[int],
        seeds: Optional[Sequence[Optional[int]]] = None,
        options: Optional[Sequence[Optional[dict]]] = None,
    ) -> dict[int, tuple]:
        """Reset only sub-envs ``indices`` (``seeds``, ``options``: one each, or None), their customers' opening
        turns answered together; the others wait where they are. Returns ``{i: (obs, info)}`` with each sub-env's
        own (unbatched) info; :meth:`step_slots` then steps them."""
        idx = self._slot_indices("reset_slots", indices)
        for name, values in (("seeds", seeds), ("options", options)):
            if values is not None and len(values) != len(idx):
                raise ValueError(f"reset_slots: {len(idx)} indices but {len(values)} {name}")
        _, resets = self._advance(
            Advance(
                reset_idx=idx,
                seeds=None if seeds is None else list(seeds),
                options=None if options is None else list(options),
            )
        )
        self._record_resets(resets)
        return resets

    def step_slots(self, indices: Sequence[int], actions: Sequence[Any]) -> dict[int, tuple]:
        """Step only sub-envs ``indices`` with ``actions`` (the others wait where they are), their user turns
        answered together, one batch per round. Returns ``{i: (obs, reward, terminated, truncated, info)}`` with
        each sub-env's own (unbatched) info. No autoreset here: an ended sub-env repeats its final transition
        (with a warning, as a single env does) until it is reset; the next :meth:`step` resets it (NextStep)."""
        idx = self._slot_indices("step_slots", indices)
        if len(idx) != len(actions):
            raise ValueError(f"step_slots: {len(idx)} indices but {len(actions)} actions")
        if self._obs is None:
            raise RuntimeError("call reset() or reset_slots() before step_slots()")
        results, _ = self._advance(Advance(idx, list(actions)))
        self._record_steps(results)
        return results

    def _record_resets(self, resets: dict[int, tuple]) -> list[Any]:
        """The one place a reset sub-env's bookkeeping is kept (``reset``, ``reset_slots``, a NextStep autoreset):
        its observation, a zero reward, no ended flags. Returns the observation list."""
        observations = self._observations()
        for i, (obs, _) in resets.items():
            observations[i] = obs
            self._rewards[i] = 0.0
            self._terminations[i] = self._truncations[i] = False
        return observations

    def _record_steps(self, results: dict[int, tuple]) -> list[Any]:
        """The one place a stepped sub-env's bookkeeping is kept (``step``, ``step_slots``): its observation,
        reward and flags; an ended one is reset by the next :meth:`step` (NextStep). Returns the observation list."""
        observations = self._observations()
        for i, (obs, reward, term, trunc, _) in results.items():
            observations[i] = obs
            self._rewards[i] = reward
            self._terminations[i] = term
            self._truncations[i] = trunc
        return observations

    def _observations(self) -> list[Any]:
        """The sub-envs' latest observations, made on the first record (:meth:`set_slot` may come before a reset)."""
        if self._obs is None:
            self._obs = [None] * self.num_envs
        return self._obs

    def _slot_indices(self, what: str, indices: Sequence[int]) -> list[int]:
        idx = [self._slot_index(i) for i in indices]
        if len(set(idx)) != len(idx):
            raise ValueError(f"{what}: indices repeat: {list(indices)}")
        return idx

    def _slot_index(self, index: Any) -> int:
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"a sub-env index must be an int; got {type(index).__name__}")
        i = int(index)
        if not -self.num_envs <= i < self.num_envs:
            raise IndexError(f"sub-env index {i} out of range for num_envs={self.num_envs}")
        return i % self.num_envs

    def _in_this_process(self, what: str) -> None:
        if self._shards is not None:
            raise ValueError(
                f"{what} needs the sub-env objects in this process; this vector env keeps them in "
                f"{len(self._shards.sizes)} worker processes (build it with processes=1)"
            )

    def simulation_runs(self) -> list[Optional[dict]]:
        """Each sub-env's last finished episode as a tau2 SimulationRun dict (None if none finished yet)."""
        if self._shards is not None:
            return self._shards.gather("simulation_runs")
        return [slot.simulation_run() for slot in self.envs]

    def results(self, simulation_runs: Optional[Sequence[Any]] = None) -> dict[str, Any]:
        """A tau2 results-file dict, as :meth:`Tau2Env.results <tau2_gym.envs.tau2_env.Tau2Env.results>`.

        ``simulation_runs``: the episodes to hold (e.g. the ``infos["simulation_run"]`` entries of finished
        episodes; ``None`` entries are skipped); default: each sub-env's last finished episode.
        """
        runs = self.simulation_runs() if simulation_runs is None else list(simulation_runs)
        return self.template.results([r for r in runs if r is not None])

    def save_results(self, path: Any, simulation_runs: Optional[Sequence[Any]] = None) -> None:
        """Write :meth:`results` as a ``tau2 run``-style results file (``.json`` or ``.json.gz``), the single
        env's format."""
        from pathlib import Path

        write_json_atomic(Path(path), self.results(simulation_runs))

    def close_extras(self, **kwargs: Any) -> None:  # noqa: ARG002 - Gymnasium's VectorEnv.close_extras signature
        if self._shards is not None:
            self._shards.close()
        else:
            for slot in self.envs:
                slot.close()
        if self._loop is not None:
            self._loop.close()  # the simulator's client on that loop is closed inside it
            self._loop = None
        if self._owns_user and hasattr(self.user, "close"):
            try:
                self.user.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


class _InWorkers:
    """``envs`` of a vector env whose sub-envs live in worker processes: their number, not the objects."""

    def __init__(self, n: int, processes: int) -> None:
        self.n = n
        self.processes = processes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(
            f"the sub-envs live in {self.processes} worker processes: reach them with call/get_attr/set_attr "
            "(or build the vector env with processes=1)"
        )


def _share_gate(kwargs: dict, k: int, parts: int) -> None:
    """Worker ``k`` of ``parts`` gets its share of a concurrent customer's ``max_concurrency`` gate (at least one
    request), so the workers together keep the caller's limit."""
    config = kwargs.get("config")
    user = kwargs.get("user") if config is None else config.user
    share = getattr(user, "with_max_concurrency", None)
    gate = getattr(getattr(user, "config", None), "max_concurrency", None)
    if share is None or not isinstance(gate, int):
        return
    own = share(max(1, split_sizes(gate, parts)[k]))
    if config is None:
        kwargs["user"] = own
    else:
        kwargs["config"] = dataclasses.replace(config, user=own)


def _index(idx: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Env indices as an index array (numpy indexes with it as with the list, without converting the list
    again for every key), and the ``_key`` mask they set."""
    index = np.fromiter(idx, dtype=np.intp, count=len(idx))
    mask = np.zeros(n, dtype=np.bool_)
    mask[index] = True
    return index, mask


def _fits(value: Any) -> bool:
    return type(value) in _SCALARS or isinstance(value, np.number)


def _column(first: Any, idx: np.ndarray, values: list[Any], n: int) -> np.ndarray:
    """One info key as an array of length ``n`` (Gymnasium's dtype rule: the first value's type)."""
    kind = type(first)
    if kind in _SCALARS or isinstance(first, np.number):
        types = set(map(type, values))
        if types <= _SCALAR_SET or all(_fits(v) for v in values):
            array = np.zeros(n, dtype=kind)
            array[idx] = values
            return array
    elif isinstance(first, np.ndarray) and all(isinstance(v, np.ndarray) and v.shape == first.shape for v in values):
        array = np.zeros((n, *first.shape), dtype=first.dtype)
        array[idx] = values
        return array
    column = np.fromiter(values, dtype=object, count=len(values))  # never broadcasts list values
    if len(values) == n and idx[-1] == n - 1:  # every env, in order
        return column
    array = np.full(n, None, dtype=object)
    array[idx] = column
    return array
