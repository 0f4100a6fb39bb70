"""The per-step cost of splitting reasoning from content: what every agent action pays so that a thinking model's
thoughts never reach the customer, COMMUNICATE or the judge.

Measures ``to_assistant_message`` (the one place an action becomes a message) on replies without reasoning, with a
``<think>`` block of 2 KiB or 16 KiB before text or a Hermes tool call, and with an OpenAI message that carries its
reasoning in ``reasoning_content``; ``split_reasoning`` alone; and a mock ``env.step`` with and without a 2 KiB
thought (the customer is the scripted oracle; the step includes its turn). The table's "upstream" column is the
same call without the reasoning, so "ratio" is how much longer the reply with reasoning takes to read.

python bench/bench_reasoning.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym
from _common import fmt_time, median_time, print_table

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.core.actions import to_assistant_message
from tau2_gym.core.parsing import split_reasoning

CALL = '<tool_call>{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}</tool_call>'
TEXT = "Your reservation has been updated; the refund of 5244 dollars goes to the original payment method."


def thought(n_bytes: int) -> str:
    sentence = "The user wants to change the flight; I must check the fare rules and the payment method first. "
    return (sentence * (n_bytes // len(sentence) + 1))[:n_bytes]


def slower(base: float, other: float) -> str:
    return f"{other / base:.2f}x the time" if base else "-"


def main() -> None:
    rows = []
    for label, body in (("text", TEXT), ("tool call", CALL)):
        base = median_time(lambda b=body: to_assistant_message(b), repeat=5000)
        for size in (2048, 16384):
            text = f"<think>{thought(size)}</think>{body}"
            t = median_time(lambda s=text: to_assistant_message(s), repeat=5000)
            rows.append(
                (
                    f"to_assistant_message: {size // 1024} KiB <think> + {label}",
                    fmt_time(t),
                    fmt_time(base),
                    slower(base, t),
                )
            )
    field = {"role": "assistant", "content": TEXT, "reasoning_content": thought(2048)}
    plain = {"role": "assistant", "content": TEXT}
    base = median_time(lambda: to_assistant_message(plain), repeat=5000)
    t = median_time(lambda: to_assistant_message(field), repeat=5000)
    rows.append(
        ("to_assistant_message: reasoning_content field (2 KiB) + text", fmt_time(t), fmt_time(base), slower(base, t))
    )
    no_tag = median_time(lambda: split_reasoning(TEXT), repeat=20000)
    tagged_text = f"<think>{thought(2048)}</think>{TEXT}"
    tagged = median_time(lambda: split_reasoning(tagged_text), repeat=20000)
    rows.append(("split_reasoning alone: 2 KiB <think> + text (vs no tag)", fmt_time(tagged), fmt_time(no_tag), "-"))

    env = gym.make("tau2/mock-v0", disable_env_checker=True)

    def step(text: str):
        def run():
            env.reset(options={"task_id": "create_task_1"})
            env.step(text)

        return run

    base = median_time(step(TEXT), repeat=300)
    t = median_time(step(f"<think>{thought(2048)}</think>{TEXT}"), repeat=300)
    rows.append(
        ("mock reset + step (oracle customer), 2 KiB <think> + text", fmt_time(t), fmt_time(base), slower(base, t))
    )
    print_table("reasoning split (column 'upstream' = the same call without reasoning)", rows)
    print(f"\nper-step cost of a 2 KiB thought in env.step: {fmt_time(t - base)} (median difference)")


if __name__ == "__main__":
    main()
