"""GRPO on a tau2 domain split with TRL's GRPOTrainer and tau2-gym's rollout function.

    # a real run (one GPU; add --use-vllm to generate with vLLM in colocate mode)
    python examples/trl_grpo.py --model Qwen/Qwen3-1.7B --domain airline --split train
    # several GPUs, vLLM server mode (start `trl vllm-serve --model ...` on another GPU first)
    accelerate launch examples/trl_grpo.py --use-vllm --vllm-mode server
    # CPU smoke test: a tiny random model and tokenizer built in code, 2 steps on the mock domain
    python examples/trl_grpo.py --tiny

Every dataset row names one task; GRPOTrainer repeats it ``--num-generations`` times and the rollout
function plays one whole tau2 episode per copy (batched generation across episodes), returning the
token-exact multi-turn trajectory with an env mask so only the policy's own tokens are trained on. The
reward is tau2's (upstream's evaluation of the finished episode). The customer defaults to the offline
talking customer (answers from the task, so asking before acting pays and refusing does not: fine for smoke
tests and warm-up); for faithful tau2 training use an LLM customer, e.g. ``--user openai:gpt-4.1`` (needs
OPENAI_API_KEY) or ``--user hf:Qwen/Qwen2.5-7B-Instruct``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--tiny", action="store_true", help="tiny random model on CPU, 2 steps on mock (overrides the rest)")
    p.add_argument("--model", default="Qwen/Qwen3-1.7B", help="policy: hub id or local path")
    p.add_argument("--domain", default="airline")
    p.add_argument("--split", default="train", help="task split (airline/retail/telecom: train, test, base)")
    p.add_argument("--task-set", default=None, help="task set of the domain (default: its main one)")
    p.add_argument(
        "--user",
        default="talking",
        help="customer: talking (offline, answers from the task), oracle (offline, stops at the first question), "
        "openai:<model>[@url], hf:<model>",
    )
    p.add_argument("--max-env-steps", type=int, default=100, help="tau2 orchestrator step limit per episode")
    p.add_argument("--output-dir", default="runs/tau2-grpo")
    p.add_argument("--max-steps", type=int, default=500)
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--num-generations", type=int, default=8, help="episodes per task (GRPO group size)")
    p.add_argument("--per-device-batch-size", type=int, default=8, help="episodes per device per step")
    p.add_argument("--gradient-accumulation-steps", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=8192, help="token budget of a whole episode")
    p.add_argument("--max-new-tokens", type=int, default=1024, help="token limit of one agent turn")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.0, help="KL coefficient")
    p.add_argument("--thinking", action="store_true", help="Qwen3: let the model think (enable_thinking=True)")
    p.add_argument("--use-vllm", action="store_true", help="generate with vLLM (pip install trl[vllm])")
    p.add_argument("--vllm-mode", default="colocate", choices=["colocate", "server"])
    p.add_argument("--no-gradient-checkpointing", action="store_true")
    p.add_argument("--cpu", action="store_true", help="train on CPU in float32 (slow; for checking a setup)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report-to", default="none", help="none, wandb, tensorboard, ...")
    return p.parse_args(argv)


def load_policy(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(model, tokenizer, chat_template override) for the run."""
    if args.tiny:
        from tau2_gym.training.hf.tiny import tiny_model_and_tokenizer

        model, tokenizer = tiny_model_and_tokenizer(domain=args.domain)
        return model, tokenizer, None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32 if args.cpu else torch.bfloat16)
    chat_template = None
    try:  # a prefix-preserving training template (Qwen3's own drops past <think> blocks) + a response parser
        from trl.chat_template_utils import add_response_schema, get_training_chat_template

        chat_template = get_training_chat_template(tokenizer)
        if getattr(tokenizer, "response_template", None) is None:
            add_response_schema(tokenizer)
    except (ImportError, ValueError) as exc:  # unknown template: the Hermes/JSON parsers still apply
        print(f"note: {exc}")
    return model, tokenizer, chat_template


def main(argv: list[str] | None = None) -> Any:
    args = parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.tiny:
        import torch

        torch.set_num_threads(1)  # a 32-wide model gains nothing from threads
        args.domain, args.split, args.max_steps, args.learning_rate = "mock", "base", 2, 1e-3
        args.num_generations, args.per_device_batch_size, args.gradient_accumulation_steps = 2, 4, 1
        args.max_completion_length, args.max_new_tokens, args.no_gradient_checkpointing = 256, 48, True
        args.output_dir = tempfile.mkdtemp(prefix="tau2-grpo-tiny-")
        args.cpu = True

    from trl import GRPOConfig, GRPOTrainer

    from tau2_gym.training.trl import build_dataset, make_rollout_func, tau2_reward

    model, tokenizer, chat_template = load_policy(args)
    dataset = build_dataset(args.domain, split=args.split, task_set=args.task_set)
    template_kwargs = {} if args.tiny else {"enable_thinking": args.thinking}
    rollout = make_rollout_func(
        env_kwargs={"user": args.user, "max_steps": args.max_env_steps, "task_set": args.task_set},
        max_new_tokens=args.max_new_tokens,
        chat_template=chat_template,
        chat_template_kwargs=template_kwargs,
        seed=args.seed,
        split=args.split,
    )
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.per_device_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        beta=args.beta,
        use_vllm=args.use_vllm,
        vllm_mode=args.vllm_mode,
        activation_checkpointing=not args.no_gradient_checkpointing,
        bf16=not args.cpu,
        use_cpu=args.cpu,
        logging_steps=1,
        save_strategy="no" if args.tiny else "steps",
        save_steps=100,
        report_to=[] if args.report_to == "none" else [args.report_to],
        seed=args.seed,
        dataloader_num_workers=0,
        disable_tqdm=args.tiny,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[tau2_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    start = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - start
    steps = [h for h in trainer.state.log_history if "rewards/tau2_reward/mean" in h]
    for h in steps:
        print(
            json.dumps(
                {
                    k: round(h[k], 4)
                    for k in ("step", "rewards/tau2_reward/mean", "loss", "step_time", "completions/mean_length")
                    if k in h
                }
            )
        )
    print(f"{trainer.state.global_step} GRPO steps in {elapsed:.1f}s; last episodes:")
    for traj in rollout.last_trajectories:
        print("  ", traj.summary())
    if not args.tiny:
        trainer.save_model(args.output_dir)
    return trainer


if __name__ == "__main__":
    main()
