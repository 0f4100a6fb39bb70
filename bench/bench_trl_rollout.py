"""The TRL ``rollout_func`` (``make_rollout_func``) with an LLM customer behind a local stub server, the policy a stub.

    python bench/bench_trl_rollout.py [--sizes 256 1024] [--latency 0.2 1.0] [--calls 16] [--compare DIR]

One call of the rollout function is one GRPO step's generation: N prompts of one domain (airline's training split,
repeated) played in lockstep through a ``Tau2VectorEnv`` -- every policy turn generated for all episodes at once,
then every customer answered. The policy is a stub standing where TRL's vLLM backend stands
(``trainer.vllm_generation``): it answers every context at once with the same tokens (text to the customer, then
end of turn), so what is measured is the env side -- the vector env, the customer requests, the chat-template
bookkeeping of ``PolicyRunner`` -- with the tokenizer built in code (``tau2_gym.training.hf.tiny``, one token per
byte). The customer is ``OpenAIUserSimulator`` against tests' ``AsyncOpenAIStub`` (in this process; the rollout runs
in a child process), answering after the latency and saying ``###STOP###`` after ``--turns`` customer turns.

Printed per N: customer requests/s as a share of the limit (N / latency) and of the stub's own ceiling for a
lockstep client (measured in the same run, as in ``bench_vector_llm.py``), and the child's CPU time per episode and
per agent step (with ``--processes K``, the vector env's K worker processes included). ``--calls`` is the number of
rollout calls (episodes per slot; 16 as the rollout bench).
``--compare DIR`` measures another checkout in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402 - after sys.path gets the helpers' folder
    ACTION,
    add_lockstep_arguments,
    cpu_of,
    lockstep_against_stub,
    lockstep_ceiling,
    print_table,
    stub_user,
    worker_pids,
)


class StubPolicy:
    """TRL's ``VLLMGeneration.generate`` contract, answering every prompt with the same completion."""

    def __init__(self, completion: list[int]) -> None:
        self.completion = completion
        self.max_completion_length = 64
        self.calls = 0

    def generate(self, prompts, images, num_generations):
        self.calls += 1
        ids = self.completion[: self.max_completion_length]
        return prompts, [list(ids) for _ in prompts], [[[-0.5]] * len(ids) for _ in prompts], None


class _Accelerator:
    num_processes = 1
    device = "cpu"


def child(n: int, url: str, calls: int, processes: int) -> dict:
    from types import SimpleNamespace

    from tau2_gym.training.hf.tiny import tiny_tokenizer
    from tau2_gym.training.trl import make_rollout_func

    try:
        from tau2_gym.training.trl.dataset import task_prompt
    except ImportError:  # a checkout from before training.trl became a package
        from tau2_gym.training.trl import task_prompt

    tok = tiny_tokenizer()
    policy = StubPolicy(tok.encode(ACTION, add_special_tokens=False) + [tok.eos_token_id])
    trainer = SimpleNamespace(
        use_vllm=True,
        vllm_generation=policy,
        accelerator=_Accelerator(),
        eos_token_ids=[tok.eos_token_id],
        processing_class=tok,
        max_completion_length=1 << 20,
        args=SimpleNamespace(seed=0, max_completion_length=1 << 20),
        state=SimpleNamespace(global_step=0),
        chat_template_kwargs=None,
    )
    user = stub_user(url, n)
    extra = {} if processes == 1 else {"processes": processes}
    rollout = make_rollout_func(env_kwargs={"user": user, "max_steps": 400}, max_new_tokens=64, **extra)
    from tau2_gym.core.domain import load_domain
    from tau2_gym.training.export import training_split

    ids, _ = training_split(load_domain("airline"), "train")
    prompts = [task_prompt("airline", ids[i % len(ids)]) for i in range(n)]
    vec = rollout._vector("airline", n)  # built before the clock starts, with its workers
    workers = worker_pids(vec)
    c0, t0, w0 = time.process_time(), time.perf_counter(), sum(map(cpu_of, workers))
    episodes = steps = 0
    for call in range(calls):
        trainer.state.global_step = call
        out = rollout(prompts, trainer)
        episodes += len(out["prompt_ids"])
        steps += sum(len(t.turns) for t in rollout.last_trajectories)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0 + sum(map(cpu_of, workers)) - w0
    reasons = sorted({t.termination_reason for t in rollout.last_trajectories})
    return {
        "wall": wall,
        "cpu": cpu,
        "episodes": episodes,
        "steps": steps,
        "requests": vec.unwrapped.user_requests,
        "reasons": reasons,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    add_lockstep_arguments(parser)
    parser.add_argument("--calls", type=int, default=16, help="rollout calls (episodes per slot)")
    parser.add_argument("--processes", type=int, default=1, help="worker processes of the vector env (processes=K)")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.url, args.calls, args.processes)))
        return
    if args.ceiling is not None:
        print(json.dumps(lockstep_ceiling(args.ceiling, args.url, args.ceiling_rounds, stub_user)))
        return

    def describe(prefix: str, r: dict) -> list[tuple]:
        return [
            (
                f"{prefix}: CPU per episode / per agent step",
                f"{r['cpu'] / r['episodes'] * 1e3:,.2f} ms / {r['cpu'] / max(1, r['steps']) * 1e6:,.0f} µs",
                "-",
                "-",
            ),
            (
                f"{prefix}: episodes/s (endings)",
                f"{r['episodes'] / r['wall']:,.1f} ({r['episodes']} in {r['wall']:.1f} s; {r['reasons']})",
                "-",
                "-",
            ),
        ]

    child_args = ["--calls", str(args.calls)] + (["--processes", str(args.processes)] if args.processes > 1 else [])
    rows = lockstep_against_stub(__file__, args, child_args, describe)
    print_table("TRL rollout_func with an LLM customer (stub policy; limit = N / latency)", rows)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
