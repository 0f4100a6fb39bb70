"""SFT on good trajectories, then GRPO on the env's reward: the recipe every tau2 RL run uses, end to end.

    # CPU, a tiny model built in code, a few minutes: shows the policy learning on our reward
    python examples/sft_then_grpo.py --tiny
    # the real recipe on a GPU (vLLM generation for GRPO)
    python examples/sft_then_grpo.py --model Qwen/Qwen3-1.7B --domain airline --split train --use-vllm

Steps: (1) collect trajectories with the scripted oracle agent and a flawed one (``give_up``) through
``tau2-gym rollout``; (2) export them as ``tokens`` rows (``--min-reward 1`` keeps the good ones; the
rendering is the GRPO rollout's, so SFT trains on the contexts GRPO will see); (3) SFT with TRL's
``SFTTrainer`` (loss on the agent's tokens only); (4) GRPO with TRL's ``GRPOTrainer`` and tau2-gym's
rollout function, reward = the tau2 reward. The policy is evaluated through the env (greedy decoding) on
the same tasks before SFT, after SFT and after GRPO. ``--tiny`` uses the mock domain's ``base`` split (the
mock domain has no train/test split; it is the only domain whose prompts are short enough for CPU).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any, Optional, Sequence

TINY_TASKS = ("create_task_1", "update_task_1", "impossible_task_1")


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--tiny", action="store_true", help="tiny model on CPU, mock domain (overrides the rest)")
    p.add_argument("--model", default="Qwen/Qwen3-1.7B")
    p.add_argument("--domain", default="airline")
    p.add_argument("--split", default="train")
    p.add_argument("--task-ids", nargs="*", default=None, help="tasks of the split to use (default: all)")
    p.add_argument("--user", default="oracle", help="customer: oracle, openai:<model>[@url], hf:<model>")
    p.add_argument("--sft-steps", type=int, default=200)
    p.add_argument("--sft-learning-rate", type=float, default=1e-5)
    p.add_argument("--grpo-steps", type=int, default=100)
    p.add_argument("--grpo-learning-rate", type=float, default=1e-6)
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=8, help="episodes per GRPO step (sequences per SFT step)")
    p.add_argument("--max-new-tokens", type=int, default=1024)
    p.add_argument("--max-completion-length", type=int, default=8192)
    p.add_argument("--use-vllm", action="store_true")
    p.add_argument("--output-dir", default=None, help="default: a temporary folder")
    p.add_argument("--plot", default=None, help="PNG of reward per step (default: OUTPUT_DIR/reward.png)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def tiny_settings(args: argparse.Namespace) -> argparse.Namespace:
    args.domain, args.split, args.user = "mock", "base", "oracle"
    args.task_ids = args.task_ids or list(TINY_TASKS)
    args.sft_steps, args.sft_learning_rate = 150, 5e-3
    args.grpo_steps, args.grpo_learning_rate = 6, 1e-4
    args.num_generations, args.batch_size = 4, 8
    args.max_new_tokens, args.max_completion_length = 80, 320
    return args


def load_policy(args: argparse.Namespace) -> tuple[Any, Any, Optional[str]]:
    """(model, tokenizer, chat template override). The export, the evaluation and the GRPO rollout all
    render with the same template, so SFT and GRPO see the same token contexts."""
    if args.tiny:
        import torch

        from tau2_gym.training.hf.tiny import domain_corpus, tiny_model, tiny_tokenizer

        torch.set_num_threads(1)  # a tiny model gains nothing from threads
        tokenizer = tiny_tokenizer(corpus=domain_corpus(args.domain))
        return tiny_model(tokenizer, seed=args.seed, hidden_size=64, num_layers=2), tokenizer, None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    chat_template = None
    try:  # a prefix-preserving training template (as examples/trl_grpo.py) + a response parser
        from trl.chat_template_utils import add_response_schema, get_training_chat_template

        chat_template = get_training_chat_template(tokenizer)
        if getattr(tokenizer, "response_template", None) is None:
            add_response_schema(tokenizer)
    except (ImportError, ValueError) as exc:
        print(f"note: {exc}")
    return model, tokenizer, chat_template


def collect(args: argparse.Namespace, out: str) -> list[str]:
    """Results files of the oracle agent and a flawed agent on the tasks (``tau2-gym rollout``)."""
    from tau2_gym.cli import main as cli

    paths = []
    for agent in ("oracle", "give_up"):
        path = os.path.join(out, f"{agent}.json")
        argv = [
            "rollout",
            "--domain",
            args.domain,
            "--task-split-name",
            args.split,
            "--agent",
            agent,
            "--user",
            args.user,
            "--output",
            path,
            "--no-progress",
        ]
        if args.task_ids:
            argv += ["--task-ids", *args.task_ids]
        if cli(argv) != 0:
            raise SystemExit(f"rollout of {agent} failed")
        paths.append(path)
    return paths


def evaluate(
    model: Any, tokenizer: Any, args: argparse.Namespace, tasks: Sequence[str], chat_template: Optional[str] = None
) -> list[float]:
    """Rewards of greedy episodes of the policy through the env, one per task."""
    import gymnasium as gym

    import tau2_gym  # noqa: F401 - registers the envs
    from tau2_gym.training.hf import hf_runner

    was_training = model.training
    model.eval()
    runner = hf_runner(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        max_completion_tokens=args.max_completion_length,
        chat_template=chat_template,
        do_sample=False,
    )
    envs = [
        gym.make(f"tau2/{args.domain}-v0", obs_format="messages", user=args.user, disable_env_checker=True)
        for _ in tasks
    ]
    trajectories = runner.run(envs, [{"task_id": t} for t in tasks], seeds=[args.seed] * len(tasks))
    model.train(was_training)
    return [float(t.reward) for t in trajectories]


def sft(model: Any, tokenizer: Any, dataset: Any, args: argparse.Namespace, out: str) -> list[float]:
    from trl import SFTConfig, SFTTrainer

    cfg = SFTConfig(
        output_dir=os.path.join(out, "sft"),
        max_steps=args.sft_steps,
        learning_rate=args.sft_learning_rate,
        per_device_train_batch_size=min(args.batch_size, len(dataset)),
        max_length=None,  # tokens rows: TRL applies their assistant_masks to the loss
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=args.tiny,
        bf16=not args.tiny,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=args.seed,
        lr_scheduler_type="constant",
    )
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def grpo(
    model: Any,
    tokenizer: Any,
    args: argparse.Namespace,
    tasks: Sequence[str],
    out: str,
    chat_template: Optional[str] = None,
) -> Any:
    from trl import GRPOConfig, GRPOTrainer

    from tau2_gym.training.trl import build_dataset, make_rollout_func, tau2_reward

    dataset = build_dataset(args.domain, split=args.split, task_ids=tasks)
    rollout = make_rollout_func(
        env_kwargs={"user": args.user},
        max_new_tokens=args.max_new_tokens,
        chat_template=chat_template,
        seed=args.seed,
        split=args.split,
    )
    cfg = GRPOConfig(
        output_dir=os.path.join(out, "grpo"),
        max_steps=args.grpo_steps,
        learning_rate=args.grpo_learning_rate,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.batch_size,
        max_completion_length=args.max_completion_length,
        temperature=1.0,
        beta=0.0,
        use_vllm=args.use_vllm,
        use_cpu=args.tiny,
        bf16=not args.tiny,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=args.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
        activation_checkpointing=not args.tiny,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[tau2_reward],
        args=cfg,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trainer.train()
    return trainer


def plot(path: str, sft_losses: list[float], grpo_rewards: list[float], marks: dict[str, float]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    a.plot(range(1, len(sft_losses) + 1), sft_losses)
    a.set(title="SFT", xlabel="step", ylabel="loss (agent tokens)")
    b.plot(range(1, len(grpo_rewards) + 1), grpo_rewards, marker="o", label="GRPO batch reward")
    for (name, value), style in zip(marks.items(), (":", "--", "-")):
        b.axhline(value, linestyle=style, color="gray", label=f"eval {name}")
    b.set(title="GRPO", xlabel="step", ylabel="tau2 reward", ylim=(-0.05, 1.05))
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole pipeline; returns what it measured (also used by tests/test_learning.py)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from tau2_gym.training.export import METADATA_COLUMNS, export_dataset

    out = args.output_dir or tempfile.mkdtemp(prefix="tau2-sft-grpo-")
    os.makedirs(out, exist_ok=True)
    model, tokenizer, template = load_policy(args)
    paths = collect(args, out)
    dataset = export_dataset(
        paths,
        os.path.join(out, "sft-data"),
        format="tokens",
        tokenizer=tokenizer,
        chat_template=template,
        split=args.split,
        min_reward=1.0,
        domain=args.domain,
    )
    tasks = list(args.task_ids or dict.fromkeys(dataset["task_id"]))
    report: dict[str, Any] = {"sft_rows": len(dataset), "tasks": tasks, "output_dir": out}
    report["before_sft"] = evaluate(model, tokenizer, args, tasks, template)
    report["sft_losses"] = sft(model, tokenizer, dataset.remove_columns(list(METADATA_COLUMNS)), args, out)
    report["after_sft"] = evaluate(model, tokenizer, args, tasks, template)
    if args.grpo_steps > 0:
        trainer = grpo(model, tokenizer, args, tasks, out, template)
        logs = [h for h in trainer.state.log_history if "rewards/tau2_reward/mean" in h]
        report["grpo_rewards"] = [h["rewards/tau2_reward/mean"] for h in logs]
        report["grpo_reward_std"] = [h.get("rewards/tau2_reward/std", 0.0) for h in logs]
        report["grpo_grad_norm"] = [h.get("grad_norm", 0.0) for h in logs]
        # infrastructure failures (user_error, ...) masked out of the gradient, by reason
        report["grpo_masked"] = dict(trainer.rollout_func.masked)
        report["after_grpo"] = evaluate(trainer.model, tokenizer, args, tasks, template)
    return report


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.tiny:
        tiny_settings(args)
    start = time.perf_counter()
    report = run(args)
    for key in ("grpo_rewards", "grpo_reward_std", "grpo_grad_norm", "grpo_masked"):
        if key in report:
            value = report[key]
            print(f"{key}: {value if isinstance(value, dict) else [round(x, 4) for x in value]}")
    marks = {"before SFT": mean(report["before_sft"]), "after SFT": mean(report["after_sft"])}
    if "after_grpo" in report:
        marks["after GRPO"] = mean(report["after_grpo"])
    png = args.plot or os.path.join(report["output_dir"], "reward.png")
    if plot(png, report["sft_losses"], report.get("grpo_rewards", []), marks):
        print(f"plot: {png}")
    print(
        f"{report['sft_rows']} SFT rows (oracle episodes with reward 1; the give_up ones filtered out), "
        f"{time.perf_counter() - start:.0f}s"
    )
    print(
        f"reward before SFT {marks['before SFT']:.2f}, after SFT {marks['after SFT']:.2f}, after GRPO "
        f"{marks.get('after GRPO', float('nan')):.2f} ({len(report['tasks'])} episodes each)"
    )
    return report


if __name__ == "__main__":
    main()
