"""Best-of-n branching over live episodes: at every agent turn, try ``n`` sampled actions on clones of the
episode, play each branch on with the policy, and take the action whose branch scored best.

This is what :meth:`Tau2Env.clone() <tau2_gym.envs.tau2_env.Tau2Env.clone>` is for: a branch costs a copy of
the episode's own state (tens of microseconds), not a fresh environment and a replay of the conversation so far.
Uses: test-time search with a sampling policy, step-level credit assignment (the per-turn branch scores are in
the result), counterfactuals ("what if the agent had called X here").

A *policy* here is any callable ``policy(observation, info, rng) -> action`` that samples with the numpy
``rng`` it is given (that makes a search reproducible from its seed). :func:`oracle_policy` is a scripted one
that follows the task's gold plan and slips with probability ``epsilon``; :class:`HFTurnPolicy` samples a
Hugging Face causal LM.

Scores: a finished branch scores ``(reward, progress)`` -- upstream's tau2 reward first, then, to break ties
among the (mostly 0/1) rewards, the fraction of the reward record's checks that passed (DB match, env
assertions, gold actions, communicated info, NL assertions): a heuristic of this module, not a tau2 number.
A branch cut off by ``depth`` scores ``value(branch_env)``; the default, :func:`reward_if_stopped`, scores the
branch's trajectory so far the same way, as if the customer had hung up now (so a branch that is still on track
outranks one that already failed with less done).
Ties go to the lowest branch index, so the search is deterministic given the seed (and a deterministic user).

Branches run one by one, or (``vector=``) in the sub-envs of a :class:`~tau2_gym.envs.vector.Tau2VectorEnv`, in
lockstep, each round's user turns answered in one batch -- what an LLM customer needs to be fast.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from tau2_gym.core.records import as_dict
from tau2_gym.core.termination import TerminationReason
from tau2_gym.envs.clone import clone_env
from tau2_gym.envs.tau2_env import Tau2Env
from tau2_gym.players.agents.scripted import OracleAgent
from tau2_gym.scoring.evaluation import evaluate_simulation
from tau2_gym.training.hf.policy import PolicyRunner, hf_runner, to_action

__all__ = [
    "Policy",
    "TurnSearch",
    "SearchResult",
    "best_of_n",
    "search_turn",
    "branch_score",
    "reward_if_stopped",
    "oracle_policy",
    "HFTurnPolicy",
    "clone_env",
]

#: ``policy(observation, info, rng) -> action``
Policy = Callable[[Any, dict, np.random.Generator], Any]
Score = tuple[float, float]
UNKNOWN: Score = (0.0, 0.0)


@dataclass
class TurnSearch:
    """One agent turn of a search: the candidates tried, their branch scores, and the one taken."""

    turn: int
    candidates: list[Any]
    scores: list[Score]
    chosen: int
    branch_steps: int  # env steps taken inside the branches (candidates included)
    finished: int  # branches that reached the end of the episode

    @property
    def action(self) -> Any:
        return self.candidates[self.chosen]


@dataclass
class SearchResult:
    """A searched episode: its final step, the actions taken, and per-turn search records and costs."""

    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]  # the final step's info (termination_reason, reward_info, simulation_run, ...)
    actions: list[Any] = field(default_factory=list)
    turns: list[TurnSearch] = field(default_factory=list)
    branches: int = 0
    branch_steps: int = 0
    clone_seconds: float = 0.0  # time spent in clone() (branches and their snapshots)
    seconds: float = 0.0  # wall time of the whole search

    @property
    def simulation_run(self) -> Optional[dict[str, Any]]:
        """The searched episode's trajectory as a tau2 ``SimulationRun`` dict (saveable, re-scorable)."""
        run = self.info.get("simulation_run")
        return None if run is None else as_dict(run)

    @property
    def branches_per_second(self) -> float:
        return self.branches / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "termination_reason": self.info.get("termination_reason"),
            "turns": len(self.turns),
            "branches": self.branches,
            "branch_steps": self.branch_steps,
            "clone_seconds": round(self.clone_seconds, 6),
            "seconds": round(self.seconds, 6),
            "branches_per_second": round(self.branches_per_second, 1),
        }


def branch_score(reward: float, info: dict[str, Any]) -> Score:
    """``(reward, progress)`` of a finished branch (see the module docstring)."""
    record = info.get("reward_info")
    passed = total = 0
    if record is not None:
        db = record.get("db_check")
        if db is not None:
            total += 1
            passed += bool(db.get("db_match"))
        for key, flag in (
            ("env_assertions", "met"),
            ("action_checks", "action_match"),
            ("communicate_checks", "met"),
            ("nl_assertions", "met"),
        ):
            for check in record.get(key) or ():
                total += 1
                passed += bool(check.get(flag))
    return float(reward), (passed / total if total else 0.0)


def reward_if_stopped(env: Any) -> Score:
    """A value for a branch cut off by ``depth``: its score if the customer hung up now (the trajectory so far
    scored as a ``user_stop``). Costs one evaluation per cut-off branch."""

    base = env.unwrapped
    loop = base.loop
    if loop is None:
        return UNKNOWN
    try:
        record = evaluate_simulation(
            base.domain,
            loop.task,
            loop.messages(),
            TerminationReason.USER_STOP,
            solo=base.config.solo,
            judge=base.judge,
            strict=False,
            live_env=loop.env,
        )
    except Exception:  # noqa: BLE001 - a value estimate, never a crash mid-search
        return UNKNOWN
    return branch_score(float(record["reward"]), {"reward_info": record})


def search_turn(
    env: Any,
    observation: Any,
    info: dict[str, Any],
    policy: Policy,
    *,
    n: int = 4,
    depth: Optional[int] = None,
    seed: Any = 0,
    value: Optional[Callable[[Any], Score]] = reward_if_stopped,
    max_branch_turns: int = 200,
    timing: Optional[dict[str, float]] = None,
    vector: Any = None,
) -> TurnSearch:
    """Try ``n`` sampled actions at the current agent turn of ``env`` (which is left as it is).

    Branch ``j`` is a clone of ``env`` that takes candidate ``j`` (sampled by ``policy`` with the generator
    ``default_rng([*seed, j])``) and then plays on with the same policy and generator for up to ``depth``
    further agent turns (None: to the end, at most ``max_branch_turns``); a branch still running then is scored
    by ``value`` (module docstring). Returns the record of the turn; its ``action`` is the best candidate.

    ``vector``: a :class:`~tau2_gym.envs.vector.Tau2VectorEnv` with at least ``n`` sub-envs and ``env``'s user
    simulator (``user=vec.user``): the branches then run in its sub-envs ``0..n-1`` in lockstep, every round's
    user turns answered in one batch (an LLM user's requests go out together). Same draws, same branches:
    with a deterministic user the result equals the one-by-one search's. ``env``'s wrappers other than a
    ``TimeLimit`` (which the env applies itself) do not act on vector branches.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be >= 0 or None; got {depth}")
    seed_words = list(seed) if isinstance(seed, (list, tuple)) else [int(seed)]
    limit = max_branch_turns if depth is None else min(depth, max_branch_turns)
    rngs = [np.random.default_rng([*seed_words, j]) for j in range(n)]
    run = _branches_in_vector if vector is not None else _branches_one_by_one
    candidates, ends, steps = run(env, observation, info, policy, rngs, limit, timing, vector)
    scores: list[Score] = []
    finished = 0
    for reward, done, binfo, branch in ends:
        if done:
            finished += 1
            scores.append(branch_score(reward, binfo))
        else:
            scores.append(value(branch) if value is not None else UNKNOWN)  # None: all cut-off branches tie
        if vector is None:
            branch.close()
    chosen = max(range(n), key=lambda j: (scores[j], -j))
    return TurnSearch(
        turn=-1, candidates=candidates, scores=scores, chosen=chosen, branch_steps=steps, finished=finished
    )


def _timed_clone(make: Callable[[], Any], timing: Optional[dict[str, float]]) -> Any:
    t0 = time.perf_counter()
    out = make()
    if timing is not None:
        timing["clone"] = timing.get("clone", 0.0) + time.perf_counter() - t0
    return out


def _branches_one_by_one(
    env: Any,
    observation: Any,
    info: dict,
    policy: Policy,
    rngs: list,
    limit: int,
    timing: Optional[dict],
    vector: Any,  # noqa: ARG001 - the branch strategies share one signature
) -> tuple[list, list, int]:
    """Each branch cloned (with its wrappers) and played to its end or cut-off before the next one starts."""
    candidates, ends, steps = [], [], 0
    for rng in rngs:
        branch = _timed_clone(lambda: clone_env(env), timing)
        action = policy(observation, info, rng)
        candidates.append(action)
        obs, reward, term, trunc, binfo = branch.step(action)
        steps += 1
        turns = 0
        while not (term or trunc) and turns < limit:
            obs, reward, term, trunc, binfo = branch.step(policy(obs, binfo, rng))
            steps += 1
            turns += 1
        ends.append((reward, term or trunc, binfo, branch))
    return candidates, ends, steps


def _branches_in_vector(
    env: Any, observation: Any, info: dict, policy: Policy, rngs: list, limit: int, timing: Optional[dict], vector: Any
) -> tuple[list, list, int]:
    """All branches in sub-envs of ``vector``, stepped together (user turns batched per round)."""
    n = len(rngs)
    if vector.num_envs < n:
        raise ValueError(f"vector= has {vector.num_envs} sub-envs; the search needs n={n}")
    for j in range(n):
        _timed_clone(lambda j=j: vector.set_slot(j, env), timing)
    candidates = [policy(observation, info, rngs[j]) for j in range(n)]
    state = vector.step_slots(range(n), candidates)
    steps, turns = n, 0
    active = [j for j in range(n) if not (state[j][2] or state[j][3])]
    while active and turns < limit:
        state.update(vector.step_slots(active, [policy(state[j][0], state[j][4], rngs[j]) for j in active]))
        steps += len(active)
        turns += 1
        active = [j for j in active if not (state[j][2] or state[j][3])]
    ends = [(state[j][1], state[j][2] or state[j][3], state[j][4], vector.envs[j]) for j in range(n)]
    return candidates, ends, steps


def best_of_n(
    env: Any,
    policy: Policy,
    *,
    n: int = 4,
    depth: Optional[int] = None,
    seed: int = 0,
    options: Optional[dict] = None,
    value: Optional[Callable[[Any], Score]] = reward_if_stopped,
    max_turns: int = 200,
    vector: Any = None,
) -> SearchResult:
    """Play one episode of ``env`` (bare or wrapped, reset here with ``seed`` and ``options``) choosing every
    agent action by :func:`search_turn`: ``n`` branches per turn, rolled out ``depth`` agent turns (None: to
    the end). The chosen action is then taken in ``env`` itself, which ends holding the searched episode
    (``env.unwrapped.simulation_run()``). Deterministic from ``seed`` given a deterministic user simulator.
    ``vector``: run each turn's branches in a vector env's sub-envs, user turns batched (see :func:`search_turn`).
    """
    if not isinstance(env.unwrapped, Tau2Env):
        raise TypeError(f"best_of_n needs a tau2 env; got {type(env.unwrapped).__name__}")
    start = time.perf_counter()
    timing: dict[str, float] = {}
    obs, info = env.reset(seed=seed, options=options)
    result = SearchResult(reward=0.0, terminated=False, truncated=False, info=info)
    term = trunc = bool(info.get("episode_over"))
    if term or trunc:  # ended during reset: the next step returns the terminal transition (its action unused)
        obs, reward, term, trunc, info = env.step("")
        result.reward, result.terminated, result.truncated, result.info = reward, term, trunc, info
    turn = 0
    while not (term or trunc) and turn < max_turns:
        record = search_turn(
            env, obs, info, policy, n=n, depth=depth, seed=[seed, turn], value=value, timing=timing, vector=vector
        )
        record.turn = turn
        result.turns.append(record)
        result.branches += n
        result.branch_steps += record.branch_steps
        result.actions.append(record.action)
        obs, reward, term, trunc, info = env.step(record.action)
        result.reward, result.terminated, result.truncated, result.info = reward, term, trunc, info
        turn += 1
    result.clone_seconds = timing.get("clone", 0.0)
    result.seconds = time.perf_counter() - start
    return result


# ------------------------------------------------------------------------------------------ policies


def _same_turn(message: dict[str, Any], planned: dict[str, Any]) -> bool:
    """Whether an assistant message of the observation is the planned one (calls compared by name and
    decoded arguments: the env may have re-serialised them)."""
    calls, want = message.get("tool_calls") or [], planned.get("tool_calls") or []
    if len(calls) != len(want):
        return False
    if not want:
        return message.get("content") == planned.get("content")
    for a, b in zip(calls, want):
        fa, fb = a["function"], b["function"]
        if fa["name"] != fb["name"]:
            return False
        ra, rb = fa.get("arguments"), fb.get("arguments")
        if ra != rb and _decoded(ra) != _decoded(rb):  # equal texts need no parsing (the usual case)
            return False
    return True


def _decoded(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return raw


class oracle_policy:
    """A scripted policy for demos, tests and benches: the oracle agent's plan
    (:class:`~tau2_gym.players.agents.scripted.OracleAgent`:
    the gold actions, then the closing message) -- except that with probability ``epsilon`` it says ``slip``
    instead (the oracle customer then hangs up, and the episode usually fails).

    Stateless: the next planned step is read off the observation (how much of the plan it already holds), so
    it works on clones and branches as on the original. Needs ``obs_format="messages"``.
    """

    def __init__(self, epsilon: float = 0.0, slip: str = "One moment, please.") -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1]; got {epsilon}")
        self.epsilon = float(epsilon)
        self.slip = slip
        self._plans: dict[tuple, list[dict]] = {}

    def plan(self, info: dict[str, Any]) -> list[dict]:

        task = info["task"]
        key = (info.get("domain"), task.id, bool(info.get("solo")))
        plan = self._plans.get(key)
        if plan is None:
            agent = OracleAgent()
            agent.reset(task, {"solo": bool(info.get("solo")), "domain": info.get("domain")})
            plan = self._plans[key] = list(agent._plan) + [agent.fallback()]
        return plan

    def __call__(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> Any:
        if not isinstance(observation, list):
            raise TypeError("oracle_policy reads chat-message observations: make the env with obs_format='messages'")
        plan = self.plan(info)
        done = 0
        for message in observation:
            if message.get("role") == "assistant" and done < len(plan) - 1 and _same_turn(message, plan[done]):
                done += 1
        if self.epsilon and rng.random() < self.epsilon:
            return {"role": "assistant", "content": self.slip}
        return plan[done]


class HFTurnPolicy:
    """A Hugging Face causal LM as a search policy: one sampled assistant turn per call, rendered, generated and
    parsed as :class:`~tau2_gym.training.hf.policy.PolicyRunner` does (chat template with the env's tools; Hermes/Qwen,
    JSON or the tokenizer's own tool-call format). Sampling is seeded from the ``rng`` it is given
    (``torch.manual_seed``: torch's global generator), so a search with it is reproducible from its seed.
    ``generation``: :class:`~tau2_gym.training.hf.generation.HFGenerator` arguments (``temperature``, ``top_p``, ...);
    or pass any :class:`~tau2_gym.training.hf.generation.Generator` backend as ``generator=`` (``model`` is then
    unused).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 256,
        parser: Any = "auto",
        generator: Any = None,
        **generation: Any,
    ) -> None:

        if generator is not None:
            self.runner = PolicyRunner(generator, tokenizer, parser=parser, max_new_tokens=max_new_tokens)
        else:
            generation.setdefault("do_sample", True)
            self.runner = hf_runner(model, tokenizer, max_new_tokens=max_new_tokens, parser=parser, **generation)

    def __call__(self, observation: Any, info: dict[str, Any], rng: np.random.Generator) -> Any:
        import torch

        runner = self.runner
        tools = list(info.get("tools") or [])
        context = runner.renderer.prompt_ids(observation, tools)
        torch.manual_seed(int(rng.integers(0, 2**63 - 1)))
        with runner.generator.session():
            generation = runner.generator.generate([context], [runner.max_new_tokens])[0]
        tokens = list(generation.token_ids)
        if tokens and tokens[-1] in runner.generator.stop_ids:
            tokens = tokens[:-1]
        text = runner.tokenizer.decode(tokens, skip_special_tokens=False)
        return to_action(runner._parse(text, context, tools), text)
