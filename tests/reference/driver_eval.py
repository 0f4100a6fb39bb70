"""Reference driver: scores simulations with *upstream* tau2-bench's ``evaluate_simulation``.

Runs under TAU2_REFERENCE_PYTHON. Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout.
Job kinds:

- eval:  {"domain", "task", "messages", "termination", "solo", "strict", "evaluation_type"}
         -> {"reward_info": <model_dump(mode="json")>} or {"error": "<Type>: <message>"}
- bench: {"domain", "sims": [{"task", "messages", "termination", "solo"}], "repeat"}
         -> {"seconds": [per simulation, best of `repeat`]}
- results_roundtrip: {"results", "save_to", "rescored_to"} -> upstream saves the results file (HEAD format),
         then re-scores it as ``tau2 evaluate-trajs`` does (strict_replay=False) and saves that too

The NL judge's LLM call is replaced by :func:`stub_judge_reply` (defined before any upstream import so
our tests can import the very same function): a deterministic verdict derived from the two prompt texts,
whose justification carries a digest of the prompts -- so equal justifications also prove equal prompts.
"""

import ast
import hashlib
import json
import os
import sys
import time
import traceback


def stub_judge_reply(system: str, user: str) -> str:
    """A deterministic judge: some assertions met, some not, sometimes an empty result list."""
    digest = hashlib.sha256((system + "\x00" + user).encode("utf-8")).hexdigest()
    marker = "expectedOutcomes:"
    tail = user[user.rindex(marker) + len(marker) :].strip() if marker in user else "[]"
    try:
        outcomes = ast.literal_eval(tail)
    except (ValueError, SyntaxError):
        outcomes = []
    if int(digest[:8], 16) % 11 == 0:
        return json.dumps({"results": []})
    results = []
    for o in outcomes:
        h = int(hashlib.sha256((digest + o).encode("utf-8")).hexdigest()[:8], 16)
        results.append(
            {
                "expectedOutcome": o,
                "reasoning": f"stub verdict, prompt digest {digest[:16]}",
                "metExpectation": h % 4 != 0,
            }
        )
    return json.dumps({"results": results})


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LOGURU_LEVEL", "ERROR")

    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="CRITICAL")

    import tau2.evaluator.evaluator_nl_assertions as nl_mod
    from tau2.data_model.message import AssistantMessage
    from tau2.data_model.simulation import SimulationRun
    from tau2.data_model.tasks import Task
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    def fake_generate(model, messages, **kwargs):
        return AssistantMessage(role="assistant", content=stub_judge_reply(messages[0].content, messages[1].content))

    nl_mod.generate = fake_generate

    def simulation(job, task_id):
        return SimulationRun(
            id="sim",
            task_id=task_id,
            start_time="2026-01-01T00:00:00",
            end_time="2026-01-01T00:00:01",
            duration=1.0,
            termination_reason=job["termination"],
            messages=job["messages"],
        )

    def job_eval(job):
        task = Task.model_validate(job["task"])
        sim = simulation(job, task.id)
        try:
            ri = evaluate_simulation(
                simulation=sim,
                task=task,
                evaluation_type=EvaluationType(job.get("evaluation_type", "all")),
                solo_mode=job.get("solo", False),
                domain=job["domain"],
                strict_replay=job.get("strict", True),
            )
        except Exception as exc:  # upstream raising is a result to compare
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"reward_info": ri.model_dump(mode="json")}

    def job_bench(job):
        out = []
        for s in job["sims"]:
            task = Task.model_validate(s["task"])
            sim = simulation(s, task.id)
            best = float("inf")
            for _ in range(job.get("repeat", 1)):
                t0 = time.perf_counter()
                evaluate_simulation(
                    simulation=sim,
                    task=task,
                    evaluation_type=EvaluationType.ALL,
                    solo_mode=s.get("solo", False),
                    domain=job["domain"],
                )
                best = min(best, time.perf_counter() - t0)
            out.append(best)
        return {"seconds": out}

    def job_results_roundtrip(job):
        from pathlib import Path

        from tau2.data_model.simulation import Results
        from tau2.scripts.evaluate_trajectories import compute_simulation_rewards

        results = Results.model_validate(job["results"])
        results.save(Path(job["save_to"]))
        rescored = compute_simulation_rewards(Results.load(Path(job["save_to"])))
        rescored.save(Path(job["rescored_to"]))
        return {"simulations": len(rescored.simulations)}

    kinds = {"eval": job_eval, "bench": job_bench, "results_roundtrip": job_results_roundtrip}
    jobs = json.loads(sys.stdin.read())["jobs"]
    results = []
    for job in jobs:
        try:
            results.append({"ok": kinds[job.get("kind", "eval")](job)})
        except Exception:
            results.append({"failed": traceback.format_exc()})
    sys.stdout.write(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
