"""SFT export throughput on the airline task set: simulations per second, messages and tokens formats.

    python bench/bench_export.py [--trials 4] [--repeat 3]

The results file is the oracle agent + oracle user on every airline task (``--trials`` trials each), made
with ``tau2-gym rollout`` first (not timed). Timed (best of ``--repeat``): building the ``messages`` rows
(``export_rows``: read + validate the results file, system prompt, OpenAI messages), tokenizing them
(``tokenize_rows``: the chat template rendering the GRPO rollout uses, per episode, with the tiny byte-level
tokenizer of ``tau2_gym.training.hf.tiny``, BPE merges fitted to airline's texts), and the whole ``export_dataset``
call for each format (rows + ``datasets.Dataset`` + ``save_to_disk``). All 50 tasks are exported
(``split=None, allow_test_split=True``) so the figure covers the whole task set. Upstream has no export, so
the table has no upstream column figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=4, help="oracle trials per airline task in the results file")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per figure (best is reported)")
    args = p.parse_args(argv)

    from tau2_gym.cli import main as cli
    from tau2_gym.core.results_file import load_results
    from tau2_gym.training.export import export_dataset, export_rows, tokenize_rows
    from tau2_gym.training.hf.tiny import domain_corpus, tiny_tokenizer

    work = Path(tempfile.mkdtemp(prefix="tau2-bench-export-"))
    try:
        results = work / "airline.json"
        code = cli(
            [
                "rollout",
                "--domain",
                "airline",
                "--agent",
                "oracle",
                "--user",
                "oracle",
                "--task-split-name",
                "none",
                "--num-trials",
                str(args.trials),
                "--output",
                str(results),
                "--no-progress",
            ]
        )
        if code != 0:
            print("rollout failed", file=sys.stderr)
            return code
        n = len(load_results(results).simulations)
        t0 = time.perf_counter()
        tok = tiny_tokenizer(corpus=domain_corpus("airline"))
        t_tok_build = time.perf_counter() - t0
        kw = dict(split=None, allow_test_split=True)
        rows = export_rows([results], **kw)
        assert len(rows) == n, (len(rows), n)
        tokens = tokenize_rows(rows, tok)
        mean_len = sum(len(r["input_ids"]) for r in tokens) / len(tokens)

        t_rows = best(lambda: export_rows([results], **kw), args.repeat)
        t_tokens = best(lambda: tokenize_rows(rows, tok), args.repeat)

        def write(fmt: str) -> None:
            out = work / f"ds-{fmt}"
            shutil.rmtree(out, ignore_errors=True)
            export_dataset([results], out, format=fmt, tokenizer=tok if fmt == "tokens" else None, **kw)

        t_messages_ds = best(lambda: write("messages"), args.repeat)
        t_tokens_ds = best(lambda: write("tokens"), args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def rate(t: float) -> str:
        return f"{n / t:,.0f} sims/s ({t * 1e3 / n:.2f} ms/sim)"

    print(
        f"airline: {n} simulations (50 tasks x {args.trials} trials, oracle), {os.cpu_count()} CPUs; "
        f"tokens rows average {mean_len:,.0f} tokens; tiny tokenizer built in {t_tok_build:.1f} s (not timed)"
    )
    print_table(
        f"SFT export throughput (best of {args.repeat})",
        [
            ("messages rows (export_rows)", rate(t_rows), "-", "-"),
            ("tokens from rows (tokenize_rows)", rate(t_tokens), "-", "-"),
            ("messages dataset on disk (export_dataset)", rate(t_messages_ds), "-", "-"),
            ("tokens dataset on disk (export_dataset)", rate(t_tokens_ds), "-", "-"),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
