"""Reference driver: upstream tau2-bench's own ``UserGymEnv`` (the policy plays the customer), stepped with scripts.

Runs under TAU2_REFERENCE_PYTHON. Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout.

Job: {"domain", "task_id", "max_steps", "agent_script": [message dicts], "user_actions": [action strings]}

The env is upstream's ``tau2.gym.gym_agent.UserGymEnv`` unchanged (its orchestrator thread, ``GymUser``,
``parse_action_string``, its reward); only its ``LLMAgent``'s LLM call (``generate``) is replaced by the agent
script, and the NL judge's by ``driver_gym.stub_judge_reply``. Both observation styles are recorded
(``all_messages_as_observation`` False and True: two envs fed the same script).

Result: {"observations" / "observations_all": [reset obs, then one per step], "rewards", "terminated",
         "truncated", "termination_reason", "messages" (canonical), "reward_info"}
"""

import json
import os
import sys
import traceback

from driver_gym import canonical_message, stub_judge_reply


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="CRITICAL")

    import tau2.agent.llm_agent as agent_mod
    import tau2.evaluator.evaluator_nl_assertions as nl_mod
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.gym.gym_agent import UserGymEnv

    nl_mod.generate = lambda model, messages, **kw: AssistantMessage(
        role="assistant", content=stub_judge_reply(messages[0].content, messages[1].content)
    )

    class Script:
        def __init__(self, script):
            self.script, self.i = script, 0

        def __call__(self, model=None, messages=None, tools=None, **kw):
            d = self.script[min(self.i, len(self.script) - 1)]
            self.i += 1
            calls = d.get("tool_calls")
            return AssistantMessage(
                role="assistant",
                content=d.get("content"),
                tool_calls=[
                    ToolCall(id=c.get("id", ""), name=c["name"], arguments=c.get("arguments", {})) for c in calls
                ]
                if calls
                else None,
            )

    def episode(job, all_messages):
        agent_mod.generate = Script(job["agent_script"])
        env = UserGymEnv(
            domain=job["domain"],
            task_id=job["task_id"],
            max_steps=job.get("max_steps", 100),
            all_messages_as_observation=all_messages,
        )
        obs, info = env.reset()
        out = {"observations": [obs], "rewards": []}
        for action in job["user_actions"]:
            obs, reward, term, trunc, info = env.step(action)
            out["observations"].append(obs)
            out["rewards"].append(reward)
            if term or trunc:
                out.update(terminated=term, truncated=trunc)
                break
        sim = json.loads(info["simulation_run"] or "{}")
        out["termination_reason"] = sim.get("termination_reason")
        out["messages"] = [canonical_message(m) for m in sim.get("messages") or []]
        out["reward_info"] = json.loads(info["reward_info"]) if info.get("reward_info") else None
        return out

    results = []
    for job in json.load(sys.stdin)["jobs"]:
        try:
            res = episode(job, False)
            res["observations_all"] = episode(job, True)["observations"]
            results.append({"ok": res})
        except Exception:
            results.append({"failed": traceback.format_exc()})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
