"""``tau2-gym export``: results files -> an SFT dataset on disk (``tau2_gym.training.export``)."""

from __future__ import annotations

import argparse
import sys

from tau2_gym.cli import one_line
from tau2_gym.training.export import ExportError, export_dataset


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", help="tau2 results files (.json or .json.gz)")
    p.add_argument("--output", required=True, help="folder for the datasets.Dataset (save_to_disk)")
    p.add_argument(
        "--format",
        default="messages",
        choices=["messages", "tokens"],
        help="messages: TRL's conversational format; tokens: input_ids + assistant_masks rendered as "
        "the GRPO rollout renders them (needs --tokenizer)",
    )
    p.add_argument("--tokenizer", default=None, help="tokenizer for --format tokens (a local path)")
    p.add_argument(
        "--sample-mode",
        default="auto",
        choices=["auto", "sequence", "per_turn"],
        help="--format tokens: one row per episode (sequence), one per policy turn (per_turn: for templates that "
        "drop earlier turns' reasoning, e.g. Qwen3's), or auto (default: per turn exactly when the template needs it)",
    )
    p.add_argument("--chat-template", default=None, help="a file with a chat template overriding the tokenizer's")
    p.add_argument("--min-reward", type=float, default=None, help="keep simulations with at least this reward")
    p.add_argument(
        "--split",
        default="train",
        help="keep tasks of this split ('none' = all); a selection with test-split tasks is refused",
    )
    p.add_argument(
        "--allow-test-split",
        action="store_true",
        help="allow tasks of the held-out test split in the training data (off by default)",
    )
    p.add_argument("--domain", default=None, help="keep only this domain")
    p.add_argument("--data-version", default=None, help="data version whose prompt and tools are exported")
    p.add_argument(
        "--data-dir",
        default=None,
        help="the data folder the runs were made on, when it is not the default data (e.g. a generated set)",
    )


def run(args: argparse.Namespace) -> int:

    split = None if args.split in ("none", "") else args.split
    try:
        template = None
        if args.chat_template is not None:
            with open(args.chat_template, encoding="utf-8") as f:
                template = f.read()
        ds = export_dataset(
            args.results,
            args.output,
            format=args.format,
            tokenizer=args.tokenizer,
            chat_template=template,
            sample_mode=args.sample_mode,
            split=split,
            min_reward=args.min_reward,
            domain=args.domain,
            data_version=args.data_version,
            data_dir=args.data_dir,
            allow_test_split=args.allow_test_split,
        )
    except (ExportError, OSError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    splits = ", ".join(sorted(set(ds["split"])))
    modes = sorted(set(ds["sample_mode"])) if "sample_mode" in ds.column_names else []
    per_turn = " (one row per policy turn)" if "per_turn" in modes else ""
    print(f"exported {len(ds)} conversations{per_turn} (split: {splits}) to {args.output}")
    return 0
