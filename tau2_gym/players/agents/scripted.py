"""Scripted agents for tests, demos and baselines: an oracle that replays the task's gold actions, and
deliberately flawed variants that fail in one known way each.

An agent is anything with ``reset(task, info)`` and ``act(observation, info) -> action``; the actions are
the OpenAI-format assistant messages the env accepts. The oracle's plan is fixed at reset (it does not read
tool results), which makes its messages a deterministic script -- the differential tests replay the same
script through upstream's orchestrator.

Oracle plan (normal mode): each assistant-side gold action as one tool call, in gold order; each run of
consecutive user-side gold actions as one text asking the user to perform them (``name(k=v)`` form, which
:class:`~tau2_gym.players.users.scripted.OracleUser` acts on); finally one text carrying every ``communicate_info``
string. Solo mode: every gold action as a tool call (user-side ones go to the user's toolkit), then ``done``.

Agents of a known pass rate, for checking a profiler or a training pipeline end to end without a model:
``noisy_oracle:P`` plays the oracle, except that with probability ``P`` (drawn per task and episode seed, so a run
is reproducible) it plays ``skip_last_action``; a task's pass rate is then exactly
``(1 - P) * oracle_passes + P * skip_last_action_passes`` (each 0 or 1 for the task). ``noisy_oracle:spread`` gives
each task its own ``P``, uniform in [0, 1) from a hash of the task id (:func:`spread_probability`), so the tasks
of a set spread over every difficulty bucket.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Callable, Optional, Sequence, Union

from tau2_gym.core.domain import get_domain_spec
from tau2_gym.core.tasks import Action, Task
from tau2_gym.core.turns import AgentTurnRequest
from tau2_gym.players.agents.base import AgentPolicy

CLOSING = "Your request has been taken care of. Is there anything else I can help you with?"


def call_message(name: str, arguments: dict, call_id: str) -> dict[str, Any]:
    """An OpenAI assistant message with one tool call."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def text_message(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def func_format(action: Action) -> str:
    return f"{action.name}({', '.join(f'{k}={json.dumps(v)}' for k, v in action.arguments.items())})"


def gold_actions(task: Task) -> list[Action]:
    ec = task.evaluation_criteria
    return list(ec.actions or []) if ec is not None else []


def closing_text(task: Task) -> str:
    """The final message: every communicate_info string (COMMUNICATE is a substring check), then a wrap-up."""
    ec = task.evaluation_criteria
    infos = [s for s in (ec.communicate_info or [])] if ec is not None else []
    if infos:
        return "Here is a summary: " + "; ".join(infos) + ". " + CLOSING
    return CLOSING


class ScriptedAgent:
    """Base: a precomputed list of actions, then ``fallback()`` forever."""

    name = "scripted"

    def __init__(self) -> None:
        self.solo = False
        self.domain: Optional[str] = None
        self.task: Optional[Task] = None
        self._plan: list[Any] = []
        self._i = 0

    def reset(self, task: Task, info: Optional[dict] = None) -> None:
        self.task = task
        self.solo = bool((info or {}).get("solo", False))
        self.domain = (info or {}).get("domain")
        self._plan = self.plan(task)
        self._i = 0

    def mutates(self, name: str) -> bool:
        """Whether tool ``name`` of the episode's domain changes the DB (unknown domain: assume it does)."""
        if self.domain is None:
            return True

        spec = get_domain_spec(self.domain)
        for kit in (spec.agent_toolkit, spec.user_toolkit):
            if kit is not None and name in kit.tool_names:
                return kit.mutates_state(name)
        return True

    def plan(self, task: Task) -> list[Any]:  # noqa: ARG002 - the scripted agents' interface (subclasses read it)
        return []

    def fallback(self) -> Any:
        return call_message("done", {}, "call_done") if self.solo else text_message(CLOSING)

    def act(self, observation: Any = None, info: Optional[dict] = None) -> Any:  # noqa: ARG002 - the scripted agents' interface (subclasses read it)
        if self._i < len(self._plan):
            self._i += 1
            return self._plan[self._i - 1]
        return self.fallback()


class OracleAgent(ScriptedAgent):
    """Performs the gold actions in order (asking the user for user-side ones), then communicates."""

    name = "oracle"

    def steps(self, task: Task) -> list[tuple[str, Any]]:
        """(kind, payload) steps: ("call", Action), ("ask", [Action...]), ("say", text) / ("done", None)."""
        out: list[tuple[str, Any]] = []
        actions = gold_actions(task)
        i = 0
        while i < len(actions):
            a = actions[i]
            if a.requestor == "assistant" or self.solo:
                out.append(("call", a))
                i += 1
                continue
            run = []
            while i < len(actions) and actions[i].requestor == "user":
                run.append(actions[i])
                i += 1
            out.append(("ask", run))
        out.append(("done", None) if self.solo else ("say", closing_text(task)))
        return out

    def render(self, steps: list[tuple[str, Any]]) -> list[Any]:
        plan, n = [], 0
        for kind, payload in steps:
            if kind == "call":
                plan.append(call_message(payload.name, payload.arguments, f"call_{n}"))
                n += 1
            elif kind == "ask":
                plan.append(
                    text_message(
                        "Please do the following on your device, one at a time: "
                        + "; ".join(func_format(a) for a in payload)
                        + "."
                    )
                )
            elif kind == "say":
                plan.append(text_message(payload))
            else:
                plan.append(call_message("done", {}, f"call_{n}"))
                n += 1
        return plan

    def plan(self, task: Task) -> list[Any]:
        return self.render(self.steps(task))


def _last_call(agent: OracleAgent, steps: list[tuple[str, Any]]) -> Optional[int]:
    """Index of the last agent call that writes (else of the last call at all)."""
    calls = [i for i, (kind, _) in enumerate(steps) if kind == "call"]
    writes = [i for i in calls if agent.mutates(steps[i][1].name)]
    return (writes or calls or [None])[-1]


class SkipLastActionAgent(OracleAgent):
    """Flaw: forgets the last writing gold action of its own (the DB then differs from the gold DB)."""

    name = "skip_last_action"

    def steps(self, task: Task) -> list[tuple[str, Any]]:
        steps = super().steps(task)
        i = _last_call(self, steps)
        if i is not None:
            del steps[i]
        return steps


class WrongArgumentsAgent(OracleAgent):
    """Flaw: its last writing gold action gets a corrupted string argument."""

    name = "wrong_arguments"

    def steps(self, task: Task) -> list[tuple[str, Any]]:
        steps = super().steps(task)
        i = _last_call(self, steps)
        if i is not None:
            kind, action = steps[i]
            if kind == "call":
                args = dict(action.arguments)
                for k, v in args.items():
                    if isinstance(v, str):
                        args[k] = v + "_x"
                        break
                else:
                    args["unexpected_argument"] = 1
                steps[i] = ("call", action.model_copy(update={"arguments": args}))
        return steps


class ComplyingAgent(OracleAgent):
    """Flaw: does what the customer asks although the policy forbids it -- the gold reads, then ``writes`` (the
    forbidden write actions, ``{"name", "arguments"}``), then the closing summary.

    The check of a refused task: the task is only worth training on if this agent scores 0 (the write the
    customer asks for must cost the reward). Built with the writes, so it is not in :data:`ALL_AGENTS`.
    """

    name = "complying"

    def __init__(self, writes: Sequence[Union[dict, Action]] = ()) -> None:
        super().__init__()
        self.writes = [
            w if isinstance(w, Action) else Action.model_validate({"action_id": f"forbidden_{i}", **w})
            for i, w in enumerate(writes)
        ]

    def steps(self, task: Task) -> list[tuple[str, Any]]:
        steps = super().steps(task)
        final = steps.pop()  # the closing summary (or ``done`` in solo mode)
        reads = [(kind, a) for kind, a in steps if kind != "call" or not self.mutates(a.name)]
        return reads + [("call", a) for a in self.writes] + [final]


class GiveUpAgent(ScriptedAgent):
    """Flaw: does nothing and wraps up at once."""

    name = "give_up"


class HallucinatingAgent(ScriptedAgent):
    """Flaw: keeps calling a tool that does not exist (every call is an error: ends as too_many_errors)."""

    name = "hallucinating"

    def fallback(self) -> Any:
        self._i += 1
        return call_message("lookup_everything", {"query": "all"}, f"call_{self._i}")


class StallingAgent(ScriptedAgent):
    """Flaw: repeats a harmless lookup forever (ends on max_steps).

    The lookup is the first tool whose parameters are all optional, else the first read-only gold action.
    """

    name = "stalling"

    def reset(self, task: Task, info: Optional[dict] = None) -> None:
        super().reset(task, info)
        self._call: Optional[tuple[str, dict]] = None
        for schema in (info or {}).get("tools", []):
            fn = schema["function"]
            if fn["name"] != "done" and not fn.get("parameters", {}).get("required"):
                self._call = (fn["name"], {})
                break
        if self._call is None:
            actions = [a for a in gold_actions(task) if a.requestor == "assistant"]
            if actions:
                self._call = (actions[0].name, dict(actions[0].arguments))

    def fallback(self) -> Any:
        self._i += 1
        if self._call is None:
            return text_message("Let me check that for you.")
        return call_message(self._call[0], self._call[1], f"call_{self._i}")


class MalformedAgent(ScriptedAgent):
    """Flaw: emits raw text with broken tool-call markup (the episode ends as agent_error)."""

    name = "malformed"

    def fallback(self) -> Any:
        return '<tool_call>{"name": "get_user_details", "arguments": {"user_id": </tool_call>'


def _unit(text: str) -> float:
    """A number in [0, 1) from a hash of ``text``: the same in every process and run."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2**64


def spread_probability(task_id: str) -> float:
    """``noisy_oracle:spread``'s drop probability of a task: uniform in [0, 1) over task ids."""
    return _unit(f"noisy_oracle:spread:{task_id}")


class NoisyOracleAgent(OracleAgent):
    """An oracle of known pass rate: with probability ``p`` an episode drops the last writing gold action of its own
    (as :class:`SkipLastActionAgent`), else it plays the oracle. The draw is seeded by the task id and the episode
    seed (``info["seed"]``; the trial seed in a rollout), so the same (task, trial) always draws the same.

    ``p``: a probability, or ``"spread"``: each task's own, :func:`spread_probability`.
    """

    name = "noisy_oracle"

    def __init__(self, p: Union[float, str] = 0.5) -> None:
        super().__init__()
        if p != "spread":
            try:
                p = float(p)
            except (TypeError, ValueError):
                raise ValueError(f"noisy_oracle: p={p!r} is neither a probability nor 'spread'") from None
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"noisy_oracle: p={p} must lie in [0, 1]")
        self.p = p
        self.name = f"noisy_oracle:{p}"
        self.seed: Optional[int] = None
        self.dropped = False

    def drop_probability(self, task: Task) -> float:
        """The chance that an episode of ``task`` drops its action."""
        return spread_probability(task.id) if self.p == "spread" else float(self.p)

    def reset(self, task: Task, info: Optional[dict] = None) -> None:
        self.seed = (info or {}).get("seed")
        super().reset(task, info)

    def steps(self, task: Task) -> list[tuple[str, Any]]:
        steps = super().steps(task)
        draw = random.Random(f"noisy_oracle|{task.id}|{self.seed}").random()
        self.dropped = draw < self.drop_probability(task)
        if self.dropped:
            i = _last_call(self, steps)
            if i is not None:
                del steps[i]
        return steps


FLAWED_AGENTS = (
    SkipLastActionAgent,
    WrongArgumentsAgent,
    GiveUpAgent,
    HallucinatingAgent,
    StallingAgent,
    MalformedAgent,
)
ALL_AGENTS = (OracleAgent,) + FLAWED_AGENTS


#: scripted agents that take an argument, ``name:ARG`` (e.g. ``noisy_oracle:0.3``, ``noisy_oracle:spread``)
PARAMETRIC_AGENTS = (NoisyOracleAgent,)


def agent_names() -> list[str]:
    """Every scripted agent's spec form: plain names, and ``name:ARG`` for the ones that take an argument."""
    return [c.name for c in ALL_AGENTS] + [f"{c.name}:ARG" for c in PARAMETRIC_AGENTS]


def is_scripted(spec: str) -> bool:
    """Whether ``spec`` names a scripted agent (the argument of a ``name:ARG`` form is not checked here)."""
    name = str(spec).partition(":")[0]
    return any(c.name == spec for c in ALL_AGENTS) or any(c.name == name for c in PARAMETRIC_AGENTS)


def make_agent(name: str) -> ScriptedAgent:
    """A scripted agent by spec: ``oracle``, a flawed agent's name, or ``noisy_oracle[:P|:spread]``."""
    for cls in ALL_AGENTS:
        if cls.name == name:
            return cls()
    base, sep, arg = str(name).partition(":")
    for pcls in PARAMETRIC_AGENTS:
        if pcls.name == base:
            return pcls(arg) if sep else pcls()
    raise ValueError(f"unknown scripted agent {name!r}; choose one of {agent_names()}")


class ScriptedPolicy(AgentPolicy):
    """The scripted agents of :mod:`tau2_gym.players.agents.scripted` (oracle and flawed ones) as a policy: one agent
    object per
    episode id, reset at its first turn with the task (offline, deterministic; no API key)."""

    offline = True

    def __init__(self, agent: Union[str, Callable[[], Any]] = "oracle") -> None:
        if isinstance(agent, str):
            agent = make_agent(agent).name  # an unknown name fails here, once; `noisy_oracle` -> `noisy_oracle:0.5`
        self.factory: Callable[[], Any] = (lambda: make_agent(agent)) if isinstance(agent, str) else agent
        self.name = agent if isinstance(agent, str) else getattr(agent, "name", getattr(agent, "__name__", "custom"))
        self.implementation = f"scripted_{self.name}"
        self._agents: dict[str, Any] = {}

    def generate(self, request: AgentTurnRequest) -> Any:
        agent = self._agents.get(request.episode_id)
        if agent is None:
            agent = self.factory()
            agent.reset(
                request.task,
                {
                    "solo": request.solo,
                    "domain": request.extra.get("domain"),
                    "tools": request.tools,
                    "seed": request.seed,
                    "trial": request.extra.get("trial"),
                },
            )
            self._agents[request.episode_id] = agent
        return agent.act(request.messages, {"tools": request.tools})

    def episode_done(self, episode_id: str) -> None:
        self._agents.pop(episode_id, None)
