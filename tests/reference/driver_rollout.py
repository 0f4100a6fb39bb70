"""Reference driver: *upstream* tau2-bench reads a results file written by ``tau2_gym.runner.collect`` and re-scores it.

Runs under TAU2_REFERENCE_PYTHON. Reads {"jobs": [...]} on stdin, writes {"results": [...]} on stdout.
Job: {"path": results file} -> {"simulations": [{"task_id", "trial", "seed", "termination_reason", "reward",
"db_match"}] (upstream's evaluate_simulation, evaluation type ALL, strict replay; infrastructure errors
are listed with reward None), "metrics": {"avg_reward", "pass_hat_ks", "infra_error_count"}} -- upstream's
own metrics over the file.
"""

import json
import os
import sys
import traceback


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LOGURU_LEVEL", "ERROR")
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="CRITICAL")

    from pathlib import Path

    from tau2.data_model.simulation import Results
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from tau2.metrics.agent_metrics import compute_metrics

    def run(job):
        results = Results.load(Path(job["path"]))
        tasks = {t.id: t for t in results.tasks}
        domain = results.info.environment_info.domain_name
        solo = results.info.agent_info.implementation == "llm_agent_solo"
        out = []
        for sim in results.simulations:
            reason = getattr(sim.termination_reason, "value", sim.termination_reason)
            row = {
                "task_id": sim.task_id,
                "trial": sim.trial,
                "seed": sim.seed,
                "termination_reason": reason,
                "reward": None,
                "db_match": None,
            }
            if reason != "infrastructure_error":
                ri = evaluate_simulation(
                    simulation=sim,
                    task=tasks[sim.task_id],
                    evaluation_type=EvaluationType.ALL,
                    solo_mode=solo,
                    domain=domain,
                )
                row["reward"] = ri.reward
                row["db_match"] = ri.db_check.db_match if ri.db_check is not None else None
            out.append(row)
        metrics = compute_metrics(results)
        return {
            "simulations": out,
            "metrics": {
                "avg_reward": metrics.avg_reward,
                "pass_hat_ks": {str(k): v for k, v in metrics.pass_hat_ks.items()},
                "infra_error_count": metrics.infra_error_count,
            },
        }

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
