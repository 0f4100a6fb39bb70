"""Does the env's reward, and nothing else, make a policy better at tasks it was not trained on?

    # CPU, a tiny model built in code, 3 seeds (docs/learning.md has the numbers and the plot)
    python examples/learning_proof.py
    # a real model on a GPU: same steps, vLLM generation, a domain's own train/test splits, an LLM customer
    python examples/learning_proof.py --model Qwen/Qwen3-1.7B --use-vllm --domain airline \\
        --user openai:gpt-4.1-mini --seeds 1
    # the same on generated tasks (`tau2-gym generate --domain airline --n 1000 --out DIR`): train on its train
    # split, measure on its held_out split
    python examples/learning_proof.py --model Qwen/Qwen3-1.7B --use-vllm --domain airline --train-tasks DIR ...

Steps, per seed: (1) tasks -- on mock, :mod:`tau2_gym.generation` writes a verified train set and a held-out set
sharing no argument value (other domains: their ``train`` / ``test`` splits, or with ``--train-tasks DIR`` the
``train`` / ``held_out`` splits of a generated set); (2) a policy -- a
tiny Qwen2 built in code with a tokenizer fitted to the domain's texts (``--model``: a real one); (3) a short
SFT on the oracle agent's train episodes (``tau2-gym rollout`` + ``export_dataset``), short enough to leave the
policy weak; (4) from that one checkpoint, two GRPO runs with the same settings through
``tau2_gym.training.trl`` (rollout function + tau2 reward): the *real* arm trains on the env's reward, the
*control* arm on the same rewards shuffled within each group (same reward statistics, no information about
which completion earned it). Success (reward 1) is measured by sampling at the training temperature, K
episodes per task, on train and held-out tasks after SFT and after each arm; held-out success is also
measured every ``--eval-every`` GRPO steps for the plot. Seeds are aggregated as mean and 95% t-interval.

The last line printed is::

    held-out success: after SFT X.XX, after GRPO Y.YY (control Z.ZZ), train A.AA -> B.BB, N episodes, S seeds

``--profile-band``: train on the band as well. After SFT the policy is profiled on the train tasks (``--profile-k``
sampled episodes per task, :func:`tau2_gym.runner.profile.make_profile`: pass rates, Wilson intervals, the Qwen3-8B
run's buckets), and a third GRPO arm, *band*, trains with the env's reward on the tasks of the kept buckets only
(``build_dataset(profile=..., keep=...)``; ``--band-keep``, default hard, medium, easy), the same number of steps
and episodes as the real arm on all tasks. The closing lines compare the two per training episode::

    band vs all: held-out after GRPO X.XX (all Y.YY), gain per 1000 training episodes +a.aa (all +b.bb), ...

``--mutation flip`` (negated reward) / ``zero`` (all rewards 0, so all advantages 0) break the real arm on
purpose; ``tests/training/test_learning.py`` runs a flipped arm beside the real one (``run_seed(extra_arms=...)``) and
checks that its assertion fails for it.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import re
import statistics
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    g = p.add_argument_group("tasks")
    g.add_argument("--domain", default="mock", help="mock: generated tasks; other domains: their train/test splits")
    g.add_argument(
        "--train-tasks",
        default=None,
        metavar="DIR",
        help="a generated set (`tau2-gym generate --domain D --out DIR`): train on its train split, measure on its "
        "held_out split",
    )
    g.add_argument("--n-train-tasks", type=int, default=96, help="generated train tasks (mock without --train-tasks)")
    g.add_argument("--n-test-tasks", type=int, default=16, help="generated held-out tasks (mock)")
    g.add_argument("--task-seed", type=int, default=0, help="seed of the generated task set (mock)")
    g.add_argument("--intents", nargs="+", default=["complete", "reopen"], help="generated intents (mock)")
    g.add_argument("--id-digits", type=int, default=2, help="digits of generated task/user ids (mock)")
    g.add_argument("--style", default="terse", help="the customer's first message: terse or natural (mock)")
    g.add_argument("--user", default="oracle", help="customer: oracle, openai:<model>[@url], hf:<model>")
    g = p.add_argument_group("policy")
    g.add_argument("--model", default=None, help="a model path or hub name (default: a tiny model built in code)")
    g.add_argument("--hidden-size", type=int, default=128, help="tiny model width")
    g.add_argument("--layers", type=int, default=2, help="tiny model depth")
    g.add_argument("--use-vllm", action="store_true", help="GRPO generation through TRL's vLLM backend (GPU)")
    g = p.add_argument_group("training")
    g.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (model init, SFT order, sampling)")
    g.add_argument("--sft-steps", type=int, default=300)
    g.add_argument("--sft-learning-rate", type=float, default=3e-3)
    g.add_argument("--sft-batch-size", type=int, default=8)
    g.add_argument(
        "--sft-stop-loss",
        type=float,
        default=0.03,
        help="end SFT early once the mean loss of the last 5 steps is below this (a weak policy, whatever the seed)",
    )
    g.add_argument("--grpo-steps", type=int, default=96)
    g.add_argument("--grpo-learning-rate", type=float, default=2e-4)
    g.add_argument("--num-generations", type=int, default=8)
    g.add_argument("--batch-size", type=int, default=32, help="episodes per GRPO step")
    g.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of GRPO and evaluation")
    g.add_argument("--max-new-tokens", type=int, default=64, help="tokens per policy turn")
    g.add_argument("--max-completion-length", type=int, default=160, help="tokens per episode")
    g.add_argument("--control", choices=("shuffle", "zero"), default="shuffle", help="the control arm's reward")
    g.add_argument("--mutation", choices=("none", "flip", "zero"), default="none", help="break the real arm")
    g.add_argument("--no-control", action="store_true", help="skip the control arm (e.g. for a band-vs-all run)")
    g = p.add_argument_group("the band")
    g.add_argument(
        "--profile-band",
        action="store_true",
        help="profile the SFT policy on the train tasks and add a GRPO arm trained on the band only",
    )
    g.add_argument("--profile-k", type=int, default=8, help="sampled episodes per task of the profile")
    g.add_argument("--band-keep", default="hard,medium,easy", help="the buckets the band arm trains on")
    g = p.add_argument_group("measurement")
    g.add_argument("--eval-k", type=int, default=4, help="sampled episodes per task per evaluation")
    g.add_argument("--eval-splits", nargs="+", default=["train", "test"], help="splits measured before/after")
    g.add_argument("--eval-every", type=int, default=16, help="GRPO steps between held-out evaluations (0: off)")
    g.add_argument("--output-dir", default=None, help="default: a temporary folder")
    g.add_argument("--plot", default=None, help="PNG of held-out success vs GRPO step (default: OUTPUT_DIR/...)")
    g.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    return p.parse_args(argv)


def cpu(args: argparse.Namespace) -> bool:
    return args.model is None


# ------------------------------------------------------------------------------------------------ tasks


def prepare_tasks(args: argparse.Namespace, out: str) -> dict[str, Any]:
    """The data folder (None: the domain's own data) and the train / held-out task ids."""
    import tau2_gym  # noqa: F401 - registers the envs
    from tau2_gym.core.domain import load_domain
    from tau2_gym.generation import generate

    if args.train_tasks:
        return generated_tasks(args.domain, args.train_tasks)
    if args.domain != "mock":
        loaded = load_domain(args.domain)
        return {"data_dir": None, "train": list(loaded.splits()["train"]), "test": list(loaded.splits()["test"])}
    n = args.n_train_tasks + args.n_test_tasks
    made = generate(
        "mock",
        n=n,
        seed=args.task_seed,
        held_out=args.n_test_tasks / n,
        intents=tuple(args.intents),
        options={"id_digits": args.id_digits, "style": args.style, "n_train": args.n_train_tasks},
        out=os.path.join(out, "tasks"),
    )
    return {"data_dir": made.folder, "train": made.ids("train"), "test": made.ids("held_out")}


def generated_tasks(domain: str, folder: str) -> dict[str, Any]:
    """A generated set's train split to train on and its held_out split to measure on."""
    from tau2_gym.core.domain import get_domain_spec, load_domain
    from tau2_gym.generation import read_manifest

    if read_manifest(folder, get_domain_spec(domain).data_folder) is None:
        raise SystemExit(f"error: --train-tasks {folder!r} holds no generated {domain} set (tau2-gym generate)")
    splits = load_domain(domain, folder).splits()
    if not splits.get("held_out"):
        raise SystemExit(f"error: --train-tasks {folder!r} has no held_out tasks; generate it with --held-out > 0")
    return {"data_dir": folder, "train": list(splits["train"]), "test": list(splits["held_out"])}


# ------------------------------------------------------------------------------------------------ policy


#: The tiny policy's chat template: the tiny ChatML one of :mod:`tau2_gym.training.hf.tiny` without the system
#: turn (the domain policy and the tool schemas). A model this size cannot use them -- it learns the tools and
#: the answer format from SFT -- and they are ~90% of an episode's tokens, which is where CPU time goes. A real
#: model renders everything with its own template (``--model``).
def tiny_template() -> str:
    from tau2_gym.training.hf.tiny import CHATML_TOOLS_TEMPLATE

    head = CHATML_TOOLS_TEMPLATE.index("{% for m in rest %}")
    return (
        "{% set rest = messages %}"
        "{% if messages and messages[0].role == 'system' %}{% set rest = messages[1:] %}{% endif %}"
        + CHATML_TOOLS_TEMPLATE[head:]
    )


def load_policy(args: argparse.Namespace, seed: int) -> tuple[Any, Any, Optional[str]]:
    """(model, tokenizer, chat template override); SFT data, evaluation and GRPO all render with that template.

    The tiny tokenizer is fitted to the shipped mock data (policy, tool schemas, the 10 hand-written tasks),
    with digits blanked: ids are one token per digit, the same tokens in train and held-out.
    """
    import torch

    if cpu(args):
        from tau2_gym.training.hf.tiny import domain_corpus, tiny_model, tiny_tokenizer

        torch.set_num_threads(args.threads)
        texts = [re.sub(r"[0-9]", " ", t) for t in domain_corpus("mock")]  # no merges of digits
        tokenizer = tiny_tokenizer(chat_template=tiny_template(), corpus=texts)
        return tiny_model(tokenizer, seed=seed, hidden_size=args.hidden_size, num_layers=args.layers), tokenizer, None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    template = None
    try:  # a prefix-preserving training template + a response parser (as examples/trl_grpo.py)
        from trl.chat_template_utils import add_response_schema, get_training_chat_template

        template = get_training_chat_template(tokenizer)
        if getattr(tokenizer, "response_template", None) is None:
            add_response_schema(tokenizer)
    except (ImportError, ValueError) as exc:
        print(f"note: {exc}")
    return model, tokenizer, template


# ------------------------------------------------------------------------------------------------ SFT


def sft_dataset(args: argparse.Namespace, tasks: dict[str, Any], tokenizer: Any, template: Any, out: str) -> Any:
    """Token rows of the oracle agent's train episodes (``tau2-gym rollout`` + ``export_dataset``)."""
    from tau2_gym.cli import main as cli
    from tau2_gym.training.export import METADATA_COLUMNS, export_dataset

    path = os.path.join(out, "oracle.json")
    if not os.path.exists(path):
        argv = ["rollout", "--domain", args.domain, "--task-split-name", "train", "--agent", "oracle"]
        argv += ["--user", args.user, "--output", path, "--no-progress"]
        if tasks["data_dir"]:
            argv += ["--data-dir", tasks["data_dir"]]
        if cli(argv) != 0:
            raise SystemExit("the oracle rollout failed")
    ds = export_dataset(
        [path],
        os.path.join(out, "sft-data"),
        format="tokens",
        tokenizer=tokenizer,
        chat_template=template,
        split="train",
        min_reward=1.0,
        domain=args.domain,
        data_dir=tasks["data_dir"],
    )
    return ds.remove_columns(list(METADATA_COLUMNS))


def sft(model: Any, tokenizer: Any, dataset: Any, args: argparse.Namespace, seed: int, out: str) -> list[float]:
    from trl import SFTConfig, SFTTrainer

    cfg = SFTConfig(
        output_dir=os.path.join(out, "sft"),
        max_steps=args.sft_steps,
        learning_rate=args.sft_learning_rate,
        per_device_train_batch_size=min(args.sft_batch_size, len(dataset)),
        max_length=None,  # token rows: TRL applies their assistant_masks to the loss
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=cpu(args),
        bf16=not cpu(args),
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=seed,
        lr_scheduler_type="constant",
    )
    from transformers import TrainerCallback

    class StopAtLoss(TrainerCallback):
        def __init__(self) -> None:
            self.recent: list[float] = []

        def on_log(self, targs: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:  # noqa: ARG002 - TrainerCallback's signature
            if args.sft_stop_loss is None or not logs or "loss" not in logs:
                return
            self.recent = (self.recent + [float(logs["loss"])])[-5:]
            if len(self.recent) == 5 and mean(self.recent) < args.sft_stop_loss:
                control.should_training_stop = True

    trainer = SFTTrainer(
        model=model, args=cfg, train_dataset=dataset, processing_class=tokenizer, callbacks=[StopAtLoss()]
    )
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


# ------------------------------------------------------------------------------------------------ evaluation


class Evaluator:
    """Success rates of a policy through the env: K sampled episodes per task at the training temperature."""

    def __init__(self, args: argparse.Namespace, tasks: dict[str, Any], tokenizer: Any, template: Any) -> None:
        self.args, self.tasks, self.tokenizer, self.template = args, tasks, tokenizer, template
        self._envs: list[Any] = []

    def envs(self, n: int) -> list[Any]:
        import gymnasium as gym

        import tau2_gym  # noqa: F401 - registers the envs

        while len(self._envs) < n:
            kw = {"data_dir": self.tasks["data_dir"]} if self.tasks["data_dir"] else {}
            env_id = f"tau2/{self.args.domain}-v0"
            self._envs.append(
                gym.make(
                    env_id, obs_format="messages", user=self.args.user, task_split=None, disable_env_checker=True, **kw
                )
            )
        return self._envs[:n]

    def success(self, model: Any, split: str, seed: int, k: Optional[int] = None) -> dict[str, float]:
        """Per task: the fraction of K sampled episodes with reward 1 (torch's RNG seeded from ``seed``)."""
        return {tid: sum(v) / len(v) for tid, v in self.samples(model, split, seed, k).items()}

    def samples(self, model: Any, split: str, seed: int, k: Optional[int] = None) -> dict[str, list[float]]:
        """Per task: the successes (1.0 / 0.0) of K sampled episodes (torch's RNG seeded from ``seed``)."""
        import torch

        from tau2_gym.training.hf import hf_runner

        k = k or self.args.eval_k
        ids = [t for t in self.tasks[split] for _ in range(k)]
        was_training = model.training
        model.eval()
        runner = hf_runner(
            model,
            self.tokenizer,
            max_new_tokens=self.args.max_new_tokens,
            max_completion_tokens=self.args.max_completion_length,
            chat_template=self.template,
            do_sample=True,
            temperature=self.args.temperature,
            top_k=0,
            top_p=1.0,
        )
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            trajectories = runner.run(self.envs(len(ids)), [{"task_id": t} for t in ids], seeds=[seed] * len(ids))
        finally:
            torch.random.set_rng_state(state)
            model.train(was_training)
        self.last = trajectories
        per_task: dict[str, list[float]] = {}
        for t in trajectories:
            per_task.setdefault(t.task_id, []).append(1.0 if t.reward >= 1.0 - 1e-9 else 0.0)
        return per_task


def profile_band(
    args: argparse.Namespace, tasks: dict[str, Any], ev: Evaluator, model: Any, seed: int, out: str
) -> tuple[str, list[str]]:
    """Profile the policy on the train tasks (``--profile-k`` sampled episodes each) with the profiler's own
    statistics and buckets; write the profile; return its path and the band's task ids."""
    from tau2_gym.core.domain import load_domain
    from tau2_gym.runner.profile import make_profile

    samples = ev.samples(model, "train", 20_000 + seed, k=args.profile_k)
    dom = load_domain(args.domain, tasks["data_dir"])
    pool = list(dom.tasks(None, "train"))
    outcomes = {tid: (int(sum(v)), len(v), 0) for tid, v in samples.items()}
    keep = [k for k in args.band_keep.split(",") if k]
    prof = make_profile(
        dom,
        pool,
        outcomes,
        k=args.profile_k,
        keep=keep,
        policy={"implementation": "learning_proof_sft", "llm": args.model or f"tiny (seed {seed})"},
        customer={"implementation": args.user},
        seed=20_000 + seed,
        split="train",
        data_dir=tasks["data_dir"],
    )
    path = os.path.join(out, f"seed{seed}-profile.json")
    prof.save(path)
    print(f"seed {seed}: profile of the SFT policy, tasks per bucket {prof.counts()} (k={args.profile_k})", flush=True)
    if not prof.band(keep):
        raise SystemExit(f"the band {keep} is empty after SFT ({prof.counts()}): keep other buckets (--band-keep)")
    return path, prof.band(keep)


def mean(xs: Sequence[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


# ------------------------------------------------------------------------------------------------ GRPO


def group_shuffled(reward_func: Callable[..., list], num_generations: int, seed: int) -> Callable[..., list]:
    """The control's reward: ``reward_func``'s rewards permuted within each group (the episodes of one task in a
    call), so each group keeps its rewards' mean and spread but not which completion earned which."""
    rng = random.Random(seed)

    def shuffled(*args: Any, task_id: Sequence[str] = (), **kwargs: Any) -> list:
        rewards = list(reward_func(*args, task_id=task_id, **kwargs))
        groups: dict[str, list[int]] = {}
        for i, tid in enumerate(task_id or [str(j // num_generations) for j in range(len(rewards))]):
            groups.setdefault(tid, []).append(i)
        out = list(rewards)
        for idx in groups.values():
            perm = list(idx)
            rng.shuffle(perm)
            for i, j in zip(idx, perm):
                out[i] = rewards[j]
        return out

    shuffled.__name__ = "tau2_reward"  # the same metric names in TRL's logs as the real arm
    return shuffled


def mutated(reward_func: Callable[..., list], how: str) -> Callable[..., list]:
    """The real reward broken on purpose (``flip``: negated; ``zero``: 0 everywhere, so no advantage)."""

    def broken(*args: Any, **kwargs: Any) -> list:
        rewards = reward_func(*args, **kwargs)
        return [None if r is None else (-r if how == "flip" else 0.0) for r in rewards]

    broken.__name__ = "tau2_reward"
    return broken


def grpo(
    model: Any,
    tokenizer: Any,
    template: Any,
    args: argparse.Namespace,
    tasks: dict[str, Any],
    reward_func: Callable[..., list],
    seed: int,
    out: str,
    on_step: Optional[Callable[[int, Any], None]] = None,
    band: Optional[tuple[str, list[str]]] = None,
) -> Any:
    """GRPO through tau2_gym.training.trl; ``band`` = (profile path, kept buckets): train on that band only."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from tau2_gym.training.trl import build_dataset, make_rollout_func

    env_kwargs: dict[str, Any] = {"user": args.user}
    if tasks["data_dir"]:
        env_kwargs["data_dir"] = tasks["data_dir"]
    profile, keep = band if band is not None else (None, None)
    dataset = build_dataset(args.domain, split="train", data_dir=tasks["data_dir"], profile=profile, keep=keep)
    rollout = make_rollout_func(
        env_kwargs=env_kwargs,
        max_new_tokens=args.max_new_tokens,
        chat_template=template,
        seed=seed,
        split="train",
        profile=profile,
        keep=keep,
    )
    cfg = GRPOConfig(
        output_dir=out,
        max_steps=args.grpo_steps,
        learning_rate=args.grpo_learning_rate,
        lr_scheduler_type="constant",
        num_generations=args.num_generations,
        per_device_train_batch_size=args.batch_size,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        top_k=0,
        top_p=1.0,
        beta=0.0,
        use_vllm=args.use_vllm,
        use_cpu=cpu(args),
        bf16=not cpu(args),
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
        activation_checkpointing=not cpu(args),
    )

    class Probe(TrainerCallback):
        def on_step_end(self, targs: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:  # noqa: ARG002 - TrainerCallback's signature
            if on_step is not None:
                on_step(state.global_step, model)

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_func],
        args=cfg,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
        callbacks=[Probe()],
    )
    trainer.train()
    return trainer


# ------------------------------------------------------------------------------------------------ one seed


def run_seed(
    args: argparse.Namespace, seed: int, tasks: dict[str, Any], out: str, extra_arms: Sequence[str] = ()
) -> dict[str, Any]:
    """SFT once, then the real and the control GRPO arm from the same checkpoint; what each measured.
    ``extra_arms``: mutations (``flip``, ``zero``) run as further arms from the same checkpoint (the test's
    mutation check, without a second SFT)."""
    from tau2_gym.training.trl import tau2_reward

    start = time.perf_counter()
    model, tokenizer, template = load_policy(args, seed)
    ev = Evaluator(args, tasks, tokenizer, template)
    data = sft_dataset(args, tasks, tokenizer, template, out)
    report: dict[str, Any] = {"seed": seed, "sft_rows": len(data)}
    report["sft_losses"] = sft(model, tokenizer, data, args, seed, os.path.join(out, f"seed{seed}"))
    eval_seed = 10_000 + seed  # the same sampling noise for every evaluation of this seed
    report["after_sft"] = {s: mean(ev.success(model, s, eval_seed).values()) for s in args.eval_splits}
    checkpoint = copy.deepcopy(model.state_dict())
    real = tau2_reward if args.mutation == "none" else mutated(tau2_reward, args.mutation)
    control = (
        group_shuffled(tau2_reward, args.num_generations, seed)
        if args.control == "shuffle"
        else mutated(tau2_reward, "zero")
    )
    arms = [("real", real)] + ([] if args.no_control else [("control", control)])
    arms += [(m, mutated(tau2_reward, m)) for m in extra_arms]
    band: Optional[tuple[str, list[str]]] = None
    if args.profile_band:
        path, band_ids = profile_band(args, tasks, ev, model, seed, out)
        band = (path, [k for k in args.band_keep.split(",") if k])
        report["band_profile"] = {"path": path, "tasks": len(band_ids), "of": len(tasks["train"])}
        arms.append(("band", real))
    for arm, reward_func in arms:
        model.load_state_dict(checkpoint)
        curve = [(0, report["after_sft"]["test"])]

        def on_step(step: int, m: Any, curve: list = curve) -> None:
            if args.eval_every and step % args.eval_every == 0 and step < args.grpo_steps:
                curve.append((step, mean(ev.success(m, "test", eval_seed).values())))

        trainer = grpo(
            model,
            tokenizer,
            template,
            args,
            tasks,
            reward_func,
            seed,
            os.path.join(out, f"seed{seed}-{arm}"),
            on_step,
            band=band if arm == "band" else None,
        )
        after = {s: mean(ev.success(trainer.model, s, eval_seed).values()) for s in args.eval_splits}
        curve.append((args.grpo_steps, after["test"]))
        logs = [h for h in trainer.state.log_history if "rewards/tau2_reward/mean" in h]
        report[arm] = {
            "after": after,
            "curve": curve,
            "batch_reward": [h["rewards/tau2_reward/mean"] for h in logs],
            # GRPO groups whose rewards were all equal: no advantage, no gradient (what the band is meant to cut)
            "zero_std": [h["frac_reward_zero_std"] for h in logs if "frac_reward_zero_std" in h],
            "masked": dict(trainer.rollout_func.masked),
            "episodes": args.grpo_steps * args.batch_size,
            "band": trainer.rollout_func.band or None,
        }
    report["seconds"] = time.perf_counter() - start
    return report


# ------------------------------------------------------------------------------------------------ summary


def interval(xs: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval over seeds; 0 for one seed)."""
    xs = list(xs)
    m = mean(xs)
    if len(xs) < 2:
        return m, 0.0
    return m, T975.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / math.sqrt(len(xs))


ARMS = (("real", "tab:blue", "GRPO, env reward, all tasks"), ("control", "tab:gray", "control"))
BAND_ARM = ("band", "tab:green", "GRPO, env reward, the band")


def arms_of(reports: Sequence[dict[str, Any]]) -> list[str]:
    return [a for a, _, _ in (*ARMS, BAND_ARM) if a in reports[0]]


def summarize(reports: Sequence[dict[str, Any]], args: argparse.Namespace, tasks: dict[str, Any]) -> dict[str, Any]:
    def col(f: Callable[[dict], float]) -> tuple[float, float]:
        return interval([f(r) for r in reports])

    s: dict[str, Any] = {
        "after_sft_test": col(lambda r: r["after_sft"]["test"]),
        "after_sft_train": col(lambda r: r["after_sft"]["train"]),
    }
    arms = arms_of(reports)
    for arm in arms:
        s[f"{arm}_test"] = col(lambda r, a=arm: r[a]["after"]["test"])
        s[f"{arm}_train"] = col(lambda r, a=arm: r[a]["after"]["train"])
        # paired per seed: each arm against its own seed's after-SFT policy (the seeds differ most in where SFT left
        # them)
        s[f"gain_{arm}"] = col(lambda r, a=arm: r[a]["after"]["test"] - r["after_sft"]["test"])
        s[f"train_gain_{arm}"] = col(lambda r, a=arm: r[a]["after"]["train"] - r["after_sft"]["train"])
        # held-out success averaged over the curve's points after step 0: the area under the learning curve, per
        # training episode alike for arms of equal length
        s[f"curve_{arm}"] = col(lambda r, a=arm: mean([y for x, y in r[a]["curve"] if x > 0]))
        if all(r[arm].get("zero_std") for r in reports):
            s[f"zero_std_{arm}"] = col(lambda r, a=arm: mean(r[a]["zero_std"]))
    if "control" in arms:
        s["real_minus_control"] = col(lambda r: r["real"]["after"]["test"] - r["control"]["after"]["test"])
    if "band" in arms:
        s["band_minus_real"] = col(lambda r: r["band"]["after"]["test"] - r["real"]["after"]["test"])
        s["band_tasks"] = col(lambda r: r["band_profile"]["tasks"])
        s["training_episodes"] = args.grpo_steps * args.batch_size
    n_eval = (1 + len(arms)) * (len(tasks["train"]) + len(tasks["test"])) * args.eval_k  # after SFT, after each arm
    curve_points = sum(len(r[a]["curve"]) - 2 for r in reports for a in arms)
    profile_episodes = len(tasks["train"]) * args.profile_k if "band" in arms else 0
    s["episodes"] = len(reports) * (n_eval + profile_episodes) + curve_points * len(tasks["test"]) * args.eval_k
    s["seeds"] = len(reports)
    return s


def table(reports: Sequence[dict[str, Any]]) -> str:
    arms = arms_of(reports)
    head = "| seed | train after SFT | held-out after SFT |"
    for arm in arms:
        head += f" held-out {arm} | train {arm} |"
    lines = [head + " seconds |", "|---" * (4 + 2 * len(arms)) + "|"]
    for r in reports:
        row = f"| {r['seed']} | {r['after_sft']['train']:.2f} | {r['after_sft']['test']:.2f} |"
        for arm in arms:
            row += f" {r[arm]['after']['test']:.2f} | {r[arm]['after']['train']:.2f} |"
        lines.append(row + f" {r['seconds']:.0f} |")
    return "\n".join(lines)


def final_line(s: dict[str, Any]) -> str:
    control = f" (control {s['control_test'][0]:.2f})" if "control_test" in s else ""
    return (
        f"held-out success: after SFT {s['after_sft_test'][0]:.2f}, after GRPO {s['real_test'][0]:.2f}{control}, "
        f"train {s['after_sft_train'][0]:.2f} -> {s['real_train'][0]:.2f}, {s['episodes']} episodes, {s['seeds']} seeds"
    )


def band_line(s: dict[str, Any]) -> str:
    """Band vs all tasks, per training episode (both arms train on the same number of episodes)."""
    per = 1000 / s["training_episodes"]
    zero = ""
    if "zero_std_band" in s and "zero_std_real" in s:
        zero = f"; groups without reward spread {s['zero_std_band'][0]:.0%} (all {s['zero_std_real'][0]:.0%})"
    return (
        f"band vs all: held-out after GRPO {s['band_test'][0]:.2f} (all {s['real_test'][0]:.2f}), over the curve "
        f"{s['curve_band'][0]:.2f} (all {s['curve_real'][0]:.2f}), train {s['band_train'][0]:.2f} (all "
        f"{s['real_train'][0]:.2f}); held-out gain per 1000 training episodes {s['gain_band'][0] * per:+.2f} (all "
        f"{s['gain_real'][0] * per:+.2f}){zero}; band {s['band_tasks'][0]:.0f} tasks, {s['training_episodes']} "
        "training episodes per arm"
    )


def plot(path: str, reports: Sequence[dict[str, Any]]) -> bool:
    """Held-out success vs GRPO step, per arm: mean over seeds and a min-max band."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for arm, color, label in (*ARMS, BAND_ARM):
        if arm not in reports[0]:
            continue
        steps = [s for s, _ in reports[0][arm]["curve"]]
        ys = [[dict(r[arm]["curve"])[s] for r in reports] for s in steps]
        ax.plot(steps, [mean(y) for y in ys], marker="o", color=color, label=f"{label} (mean)")
        ax.fill_between(steps, [min(y) for y in ys], [max(y) for y in ys], color=color, alpha=0.2)
    ax.set(xlabel="GRPO step", ylabel="held-out success (sampled)", ylim=(-0.02, 1.02))
    ax.set_title(f"held-out tasks, {len(reports)} seeds (shaded: min-max)", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def baseline_line(args: argparse.Namespace, tasks: dict[str, Any]) -> str:
    """What doing nothing earns on the same tasks (tau2_gym.episodes.baseline): read the success rates beside it."""
    from tau2_gym.core.domain import load_domain
    from tau2_gym.episodes.baseline import do_nothing_baseline

    dom = load_domain(args.domain, tasks["data_dir"])
    means = {
        split: do_nothing_baseline(dom, [dom.task(str(i)) for i in tasks[split]]).mean for split in ("train", "test")
    }
    return f"baseline: do-nothing train {means['train']:.2f}, held-out {means['test']:.2f}"


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = parse_args(argv)
    start = time.perf_counter()
    out = args.output_dir or tempfile.mkdtemp(prefix="tau2-learning-")
    os.makedirs(out, exist_ok=True)
    tasks = prepare_tasks(args, out)
    print(f"tasks: {len(tasks['train'])} train, {len(tasks['test'])} held-out ({tasks['data_dir'] or args.domain})")
    print(baseline_line(args, tasks), flush=True)
    reports = []
    for seed in range(args.seeds):
        r = run_seed(args, seed, tasks, out)
        reports.append(r)
        others = "; ".join(f"{a} {r[a]['after']['test']:.2f}" for a in arms_of(reports) if a != "real")
        print(
            f"seed {seed}: after SFT train {r['after_sft']['train']:.2f} held-out {r['after_sft']['test']:.2f}; "
            f"GRPO held-out {r['real']['after']['test']:.2f} ({others}); {r['seconds']:.0f}s",
            flush=True,
        )
    summary = summarize(reports, args, tasks)
    summary["wall_seconds"] = time.perf_counter() - start
    print(table(reports))
    for key, value in summary.items():
        if isinstance(value, tuple):
            print(f"{key}: {value[0]:.2f} +- {value[1]:.2f}")
    png = args.plot or os.path.join(out, "learning.png")
    if plot(png, reports):
        print(f"plot: {png}")
    with open(os.path.join(out, "learning.json"), "w", encoding="utf-8") as fh:
        json.dump({"args": vars(args), "summary": summary, "reports": reports}, fh, indent=1)
    print(f"wall time {summary['wall_seconds']:.0f}s; results {os.path.join(out, 'learning.json')}")
    if "band_test" in summary:
        print(band_line(summary))
    print(final_line(summary))
    return {"summary": summary, "reports": reports, "output_dir": out}


if __name__ == "__main__":
    main()
