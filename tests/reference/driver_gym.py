"""Reference driver: runs whole episodes through *upstream* tau2-bench's ``Orchestrator`` with scripted sides.

Runs under TAU2_REFERENCE_PYTHON. Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout.
Never imported by tau2_gym (tests import :func:`stub_judge_reply` and :func:`canonical_view` from it; both
are defined before any upstream import).

Job: {"domain", "task" (raw task dict), "solo", "max_steps", "max_errors", "agent_can_stop",
      "enforce_protocol", "agent_script": [message dicts], "user_script": [message dicts]}

The agent is upstream's ``LLMAgent`` (or ``LLMSoloAgent`` in solo mode; with ``agent_can_stop`` an LLMAgent
that stops like upstream's gym agent) and the user upstream's ``UserSimulator`` (``DummyUser`` in solo) --
only the LLM call (``generate``) is replaced by the scripts, so prompts, role flipping, re-tagging, stop
rules and the orchestrator itself are upstream's. A script entry ``{"raise": "..."}`` makes that LLM call
fail. The NL judge's LLM is :func:`stub_judge_reply`.

Result: {"termination_reason", "messages" (canonical), "reward_info" | "evaluation_error", "exception"?,
         "agent_views"/"user_views" (sha256 of each canonical view sent to the LLM), "agent_system",
         "user_system", "agent_tools", "user_tools", "agent_final_view", "user_final_view"}
"""

import hashlib
import json
import os
import sys
import traceback


def stub_judge_reply(system: str, user: str) -> str:
    """Deterministic NL judge: every expected outcome is met (both sides use this very function)."""
    marker = "expectedOutcomes:"
    tail = user[user.rindex(marker) + len(marker) :].strip() if marker in user else "[]"
    import ast

    try:
        outcomes = ast.literal_eval(tail)
    except (ValueError, SyntaxError):
        outcomes = []
    return json.dumps(
        {"results": [{"expectedOutcome": o, "reasoning": "stub", "metExpectation": True} for o in outcomes]}
    )


def _canon_call(c: dict) -> dict:
    fn = c.get("function") if isinstance(c.get("function"), dict) else c
    args = fn.get("arguments")
    if isinstance(args, str):
        args = json.loads(args) if args.strip() else {}
    return {"id": c.get("id") or "", "name": fn.get("name"), "arguments": args or {}}


def canonical_view(messages: list) -> list:
    """OpenAI-format messages reduced to what both sides must agree on."""
    out = []
    for m in messages:
        d = {"role": m["role"], "content": m.get("content")}
        if m.get("tool_calls"):
            d["tool_calls"] = [_canon_call(c) for c in m["tool_calls"]]
        if m["role"] == "tool":
            d["tool_call_id"] = m.get("tool_call_id")
        out.append(d)
    return out


def view_hash(messages: list) -> str:
    return hashlib.sha256(json.dumps(canonical_view(messages), sort_keys=True).encode()).hexdigest()


def canonical_message(m: dict) -> dict:
    """A stored trajectory message (tau2 JSON) reduced to role/content/calls/tool fields."""
    d = {"role": m["role"], "content": m.get("content")}
    if m["role"] in ("assistant", "user"):
        calls = m.get("tool_calls")
        d["tool_calls"] = (
            None
            if calls is None
            else [
                {
                    "id": c.get("id", ""),
                    "name": c["name"],
                    "arguments": c.get("arguments", {}),
                    "requestor": c.get("requestor", "assistant"),
                }
                for c in calls
            ]
        )
    if m["role"] == "tool":
        d.update({"id": m.get("id"), "requestor": m.get("requestor"), "error": bool(m.get("error"))})
    return d


class ScriptExhausted(RuntimeError):
    pass


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LOGURU_LEVEL", "ERROR")
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="CRITICAL")

    import tau2.agent.llm_agent as agent_mod
    import tau2.evaluator.evaluator_nl_assertions as nl_mod
    import tau2.user.user_simulator as user_mod
    from tau2.agent.llm_agent import LLMAgent, LLMSoloAgent
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.data_model.tasks import Task
    from tau2.environment.tool import as_tool
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from tau2.gym.gym_agent import GymAgent
    from tau2.gym.gym_agent import done as gym_done
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.registry import registry
    from tau2.user.user_simulator import DummyUser, UserSimulator
    from tau2.utils.llm_utils import to_litellm_messages

    nl_mod.generate = lambda model, messages, **kw: AssistantMessage(
        role="assistant", content=stub_judge_reply(messages[0].content, messages[1].content)
    )

    class Side:
        def __init__(self, name, script):
            self.name, self.script, self.i = name, script, 0
            self.views, self.system, self.tools, self.final = [], None, None, None

        def __call__(self, model=None, messages=None, tools=None, **kw):
            lit = to_litellm_messages(messages)
            if self.system is None:
                self.system = lit[0]["content"] if lit and lit[0]["role"] == "system" else None
                self.tools = [t.openai_schema for t in tools] if tools else None
            self.views.append(view_hash(lit))
            self.final = canonical_view(lit)
            if self.i >= len(self.script):
                raise ScriptExhausted(f"{self.name} script exhausted after {self.i} messages")
            d = self.script[self.i]
            self.i += 1
            if "raise" in d:
                raise ValueError(d["raise"])
            calls = d.get("tool_calls")
            return AssistantMessage(
                role="assistant",
                content=d.get("content"),
                cost=d.get("cost"),
                tool_calls=[
                    ToolCall(id=c.get("id", ""), name=c["name"], arguments=c.get("arguments", {})) for c in calls
                ]
                if calls
                else None,
            )

    class StoppingAgent(LLMAgent):
        """upstream's LLMAgent that stops like upstream's gym agent (``done`` call or ###STOP### text)."""

        @classmethod
        def is_stop(cls, message):
            return GymAgent.is_stop(message)

        def generate_next_message(self, message, state):
            msg, state = super().generate_next_message(message, state)
            if msg.tool_calls and any(tc.name == "done" for tc in msg.tool_calls):
                msg.content, msg.tool_calls = GymAgent.STOP_TOKEN, None
            return msg, state

    def run(job):
        domain, solo = job["domain"], bool(job.get("solo", False))
        env = registry.get_env_constructor(domain)(solo_mode=solo)
        task = Task.model_validate(job["task"])
        agent_side, user_side = Side("agent", job["agent_script"]), Side("user", job["user_script"])
        agent_mod.generate = agent_side
        user_mod.generate = user_side
        if solo:
            tools = env.get_tools()
            try:
                tools = tools + (env.get_user_tools() or [])
            except Exception:
                pass
            agent = LLMSoloAgent(tools=tools, domain_policy=env.get_policy(), llm="scripted", llm_args={}, task=task)
            user = DummyUser()
        else:
            if job.get("agent_can_stop"):
                agent = StoppingAgent(
                    tools=env.get_tools() + [as_tool(gym_done)],
                    domain_policy=env.get_policy(),
                    llm="scripted",
                    llm_args={},
                )
            else:
                agent = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="scripted", llm_args={})
            try:
                user_tools = env.get_user_tools(include=task.user_tools) or None
            except Exception:
                user_tools = None
            user = UserSimulator(llm="scripted", instructions=str(task.user_scenario), tools=user_tools, llm_args={})
        orch = Orchestrator(
            domain=domain,
            agent=agent,
            user=user,
            environment=env,
            task=task,
            max_steps=job.get("max_steps", 100),
            max_errors=job.get("max_errors", 10),
            solo_mode=solo,
            validate_communication=bool(job.get("enforce_protocol", False)),
        )
        out = {"agent_views": agent_side.views, "user_views": user_side.views}
        try:
            sim = orch.run()
        except Exception as exc:
            out["exception"] = f"{type(exc).__name__}: {exc}"
            sim = None
        out.update(
            {
                "agent_system": agent_side.system,
                "user_system": user_side.system,
                "agent_tools": agent_side.tools,
                "user_tools": user_side.tools,
                "agent_final_view": agent_side.final,
                "user_final_view": user_side.final,
            }
        )
        if sim is None:
            return out
        out["termination_reason"] = (
            sim.termination_reason.value if hasattr(sim.termination_reason, "value") else sim.termination_reason
        )
        out["messages"] = [canonical_message(m.model_dump(mode="json")) for m in sim.messages]
        out["timestamps_sorted"] = [m.timestamp for m in sim.messages] == sorted(m.timestamp for m in sim.messages)
        try:
            ri = evaluate_simulation(
                simulation=sim, task=task, evaluation_type=EvaluationType.ALL, solo_mode=solo, domain=domain
            )
            out["reward_info"] = ri.model_dump(mode="json")
        except Exception as exc:
            out["evaluation_error"] = f"{type(exc).__name__}: {exc}"
        return out

    jobs = json.load(sys.stdin)["jobs"]
    results = []
    for job in jobs:
        try:
            results.append({"ok": run(job)})
        except Exception:
            results.append({"failed": traceback.format_exc()})
    sys.stdout.write(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
