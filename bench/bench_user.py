"""User-simulator client overhead against a local OpenAI-compatible stub, and tool-call parsing speed.

    python bench/bench_user.py        # add TAU2_REFERENCE_PYTHON=... to measure upstream (LiteLLM) in the same run

The stub answers instantly (or after a fixed delay), so the figures are the client-side cost of one user
turn: building the request, HTTP, reading the reply into a message. Upstream is driven through its own
``UserSimulator.generate_next_message`` (LiteLLM) against the same stub server.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from _common import fmt_time, median_time, print_table, ratio, run_upstream  # noqa: E402 - after sys.path gets the helpers' folder
from openai_stub import OpenAIStub  # noqa: E402 - after sys.path gets the helpers' folder

from tau2_gym.core.parsing import parse_tool_calls  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.core.tasks import Task  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.players.users.base import UserTurnRequest  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.players.users.openai_user import OpenAIUserSimulator  # noqa: E402 - after sys.path gets the helpers' folder

N_CONCURRENT = 32
DELAY = 0.2
TASK = Task(id="b", user_scenario={"instructions": "Ask about your bill."})


def request(i: int = 0) -> UserTurnRequest:
    return UserTurnRequest(
        episode_id=f"e{i}",
        system_prompt="You are a customer.",
        messages=[{"role": "user", "content": "Hi! How can I help you today?"}],
        tools=None,
        task=TASK,
    )


def ours(base_url: str, slow_url: str) -> dict:
    sim = OpenAIUserSimulator(model="stub-model", base_url=base_url, api_key_env=None)
    turn = median_time(lambda: sim.generate(request()), repeat=200)
    slow = OpenAIUserSimulator(model="stub-model", base_url=slow_url, api_key_env=None, max_concurrency=N_CONCURRENT)
    reqs = [request(i) for i in range(N_CONCURRENT)]
    slow.generate_batch(reqs[:2])  # warm the pool
    t0 = time.perf_counter()
    slow.generate_batch(reqs)
    batch = time.perf_counter() - t0

    async def run():
        await asyncio.gather(*(slow.agenerate(r) for r in reqs))

    t0 = time.perf_counter()
    asyncio.run(run())
    agen = time.perf_counter() - t0
    text = 'Let me check. <tool_call>{"name": "toggle_airplane_mode", "arguments": {"on": false}}</tool_call>'
    parse = median_time(lambda: parse_tool_calls(text, "hermes"), repeat=20000)
    plain = median_time(lambda: parse_tool_calls("Hi, my phone has no signal.", "auto"), repeat=20000)
    return {"turn": turn, "batch": batch, "agen": agen, "parse": parse, "plain": plain}


def upstream(base_url: str) -> dict | None:
    code = f"""
    from tau2.user.user_simulator import UserSimulator
    from tau2.data_model.message import AssistantMessage
    sim = UserSimulator(llm="openai/stub-model", instructions="Ask about your bill.",
                        llm_args={{"temperature": 0.0, "api_base": "{base_url}", "api_key": "x"}})
    greet = AssistantMessage(role="assistant", content="Hi! How can I help you today?")
    def turn():
        sim.generate_next_message(greet, sim.get_init_state())
    print(json.dumps({{"turn": median_time(turn, repeat=50, warmup=3)}}))
    """
    return run_upstream(code)


def main() -> None:
    with (
        OpenAIStub(["I have a question about my bill."]) as fast,
        OpenAIStub(lambda body, i: {"delay": DELAY, "then": "ok"}) as slow,
    ):
        mine = ours(fast.base_url, slow.base_url)
        up = upstream(fast.base_url)
    u = up or {}
    print_table(
        "User simulator (OpenAI-compatible stub on localhost)",
        [
            (
                "one user turn, instant server",
                fmt_time(mine["turn"]),
                fmt_time(u.get("turn")),
                ratio(u.get("turn"), mine["turn"]),
            ),
            (
                f"{N_CONCURRENT} turns, {DELAY * 1e3:.0f} ms server delay, generate_batch",
                fmt_time(mine["batch"]),
                "-",
                "-",
            ),
            (
                f"{N_CONCURRENT} turns, {DELAY * 1e3:.0f} ms server delay, asyncio.gather(agenerate)",
                fmt_time(mine["agen"]),
                "-",
                "-",
            ),
            ("parse hermes text + 1 call", fmt_time(mine["parse"]), "-", "-"),
            ("parse plain text (auto)", fmt_time(mine["plain"]), "-", "-"),
        ],
    )


if __name__ == "__main__":
    main()
