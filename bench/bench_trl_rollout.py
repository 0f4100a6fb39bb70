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
per agent step. ``--calls`` is the number of rollout calls (episodes per slot; 16 as the rollout bench).
``--compare DIR`` measures another checkout in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ACTION, lockstep_ceiling, print_table  # noqa: E402 - after sys.path gets the helpers' folder


def _user(url: str, n: int):
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    return OpenAIUserSimulator(model="stub", base_url=url, max_concurrency=n, cache="off", max_retries=0)


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


def child(n: int, url: str, calls: int) -> dict:
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
    user = _user(url, n)
    rollout = make_rollout_func(env_kwargs={"user": user, "max_steps": 400}, max_new_tokens=64)
    from tau2_gym.core.domain import load_domain
    from tau2_gym.training.export import training_split

    ids, _ = training_split(load_domain("airline"), "train")
    prompts = [task_prompt("airline", ids[i % len(ids)]) for i in range(n)]
    c0, t0 = time.process_time(), time.perf_counter()
    episodes = steps = 0
    for call in range(calls):
        trainer.state.global_step = call
        out = rollout(prompts, trainer)
        episodes += len(out["prompt_ids"])
        steps += sum(len(t.turns) for t in rollout.last_trajectories)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    vec = next(iter(rollout._vectors.values()))
    reasons = sorted({t.termination_reason for t in rollout.last_trajectories})
    return {
        "wall": wall,
        "cpu": cpu,
        "episodes": episodes,
        "steps": steps,
        "requests": vec.unwrapped.user_requests,
        "reasons": reasons,
    }


def _spawn(args: list[str], tree: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, cwd=tree, timeout=7200
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{args} in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--latency", type=float, nargs="*", default=[0.2, 1.0], help="seconds; one, or one per size")
    parser.add_argument("--turns", type=int, default=6, help="customer turns before the stub says ###STOP###")
    parser.add_argument("--calls", type=int, default=16, help="rollout calls (episodes per slot)")
    parser.add_argument("--ceiling-rounds", type=int, default=20, help="rounds of the stub-ceiling client")
    parser.add_argument("--compare", default=None, help="another checkout's root, measured in the same run")
    parser.add_argument("--child", type=int, default=None)
    parser.add_argument("--ceiling", type=int, default=None)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.url, args.calls)))
        return
    if args.ceiling is not None:
        print(json.dumps(lockstep_ceiling(args.ceiling, args.url, args.ceiling_rounds, _user)))
        return
    latencies = args.latency if len(args.latency) == len(args.sizes) else [args.latency[0]] * len(args.sizes)

    from openai_stub import AsyncOpenAIStub

    latency = {"s": 0.0}

    def reply(body: dict, k: int) -> dict:
        said = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return {
            "delay": latency["s"],
            "then": "###STOP###" if said >= args.turns else f"Yes, and one more thing ({said}).",
        }

    trees = [("this checkout", ROOT)] + ([("--compare", Path(args.compare).resolve())] if args.compare else [])
    rows = []
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    with AsyncOpenAIStub(reply) as server:
        for n, lat in zip(args.sizes, latencies):
            latency["s"] = lat
            limit = n / lat
            cmd = ["--ceiling", str(n), "--url", server.base_url, "--ceiling-rounds", str(args.ceiling_rounds)]
            ceil = _spawn(cmd, ROOT)
            top = ceil["requests"] / ceil["wall"]
            rows.append(
                (
                    f"N={n}, {lat * 1000:.0f} ms: stub ceiling, raw lockstep client (% of limit {limit:,.0f}/s)",
                    f"{top:,.0f}/s ({top / limit:.1%})",
                    "-",
                    "-",
                )
            )
            for label, tree in trees:
                try:
                    r = _spawn(["--child", str(n), "--url", server.base_url, "--calls", str(args.calls)], tree)
                except RuntimeError as exc:  # the other rows still print
                    rows.append((f"N={n} {label}: failed", str(exc).strip().splitlines()[-1][:80], "-", "-"))
                    continue
                rate = r["requests"] / r["wall"]
                rows.append(
                    (
                        f"N={n} {label}: customer requests/s (% of limit; % of stub ceiling)",
                        f"{rate:,.0f} ({rate / limit:.1%}; {rate / top:.1%})",
                        "-",
                        "-",
                    )
                )
                rows.append(
                    (
                        f"N={n} {label}: CPU per episode / per agent step",
                        f"{r['cpu'] / r['episodes'] * 1e3:,.2f} ms / {r['cpu'] / max(1, r['steps']) * 1e6:,.0f} µs",
                        "-",
                        "-",
                    )
                )
                rows.append(
                    (
                        f"N={n} {label}: episodes/s (endings)",
                        f"{r['episodes'] / r['wall']:,.1f} ({r['episodes']} in {r['wall']:.1f} s; {r['reasons']})",
                        "-",
                        "-",
                    )
                )
                print(f"N={n} {label} done (load average {os.getloadavg()[0]:.2f})", flush=True)
    print_table("TRL rollout_func with an LLM customer (stub policy; limit = N / latency)", rows)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
