"""Shared helpers for the benchmarks: timing, memory, running a snippet under upstream, printing tables."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Any, Callable, Optional


def median_time(fn: Callable[[], Any], repeat: int = 200, warmup: int = 5) -> float:
    """Median wall time of one call, in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux ``/proc``): how a bench adds a vector env's
    worker processes to its own CPU time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_pids(vec: Any) -> list[int]:
    """The pids of a vector env's worker processes (none when its sub-envs live in its own process)."""
    shards = getattr(vec.unwrapped, "_shards", None)
    return [] if shards is None else [p.pid for p in shards.procs]


def reference_python() -> Optional[str]:
    py = os.environ.get("TAU2_REFERENCE_PYTHON")
    return py if py and os.path.exists(py) else None


def run_upstream(code: str, timeout: float = 1800) -> Optional[dict]:
    """Run a snippet under the upstream reference python; it must print one JSON object last."""
    py = reference_python()
    if py is None:
        return None
    prelude = textwrap.dedent("""
        import os, sys, json, time, statistics, tracemalloc
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        from loguru import logger
        logger.remove()
        def median_time(fn, repeat=20, warmup=2):
            for _ in range(warmup): fn()
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
            return statistics.median(ts)
    """)
    proc = subprocess.run([py, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        print(f"[upstream run failed]\n{proc.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_time(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1024
    return f"{n}"


def print_table(title: str, rows: list[tuple[str, str, str, str]]) -> None:
    """rows: (figure, ours, upstream, ratio)."""
    header = ("figure", "ours", "upstream", "ratio")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(4)]
    print(f"\n{title}")
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def ratio(upstream: Optional[float], ours: Optional[float], suffix: str = "x faster") -> str:
    if upstream is None or ours is None or ours == 0:
        return "-"
    return f"{upstream / ours:,.0f}{suffix}" if upstream / ours >= 10 else f"{upstream / ours:.1f}{suffix}"


def record_oracle(
    domain: str, data_dir: Any = None, task_ids: Optional[list[str]] = None, n: Optional[int] = None
) -> list[dict]:
    """Oracle episodes -> per task: the agent's actions (upstream gym strings) and the user's replies, so that
    a bench can replay the same conversation in our env and in upstream's. Needs ``tests/`` on sys.path."""
    import gymnasium as gym
    from gymutil import RecordingUser

    from tau2_gym.players.agents.scripted import OracleAgent
    from tau2_gym.players.users.scripted import OracleUser

    env = gym.make(f"tau2/{domain}-v0", data_dir=data_dir, user=RecordingUser(OracleUser()))
    ids = task_ids if task_ids is not None else [t.id for t in env.unwrapped.tasks[:n]]
    out = []
    for task_id in ids:
        env.unwrapped.user.reset_records()  # one episode's replies per task
        agent = OracleAgent()
        obs, info = env.reset(options={"task_id": task_id})
        agent.reset(info["task"], info)
        actions = []
        while True:
            a = agent.act(obs, info)
            if a.get("tool_calls"):
                fn = a["tool_calls"][0]["function"]
                actions.append(json.dumps({"name": fn["name"], "arguments": json.loads(fn["arguments"])}))
            else:
                actions.append(a["content"])
            obs, r, term, trunc, info = env.step(a)
            if term or trunc:
                break
        out.append({"task_id": task_id, "agent": actions, "user": list(env.unwrapped.user.script), "reward": r})
    return out


# ------------------------------------------------------------------ LLM stub servers


ACTION = "Could you tell me more about that?"


def _request_body(url: str, make_user: Callable[[str, int], Any]) -> bytes:
    """A customer request of the bench's size: the airline user prompt and a conversation halfway through."""
    import gymnasium as gym

    import tau2_gym  # noqa: F401 - registers the ids

    sim = make_user(url, 1)
    seen: list = []

    class Recording:
        def generate(self, request):
            seen.append(request)
            from tau2_gym.core.messages import UserMessage

            return UserMessage(content="Yes, and one more thing.")

    env = gym.make("tau2/airline-v0", user=Recording())
    env.reset(seed=0)
    for _ in range(3):
        env.step(ACTION)
    return json.dumps(sim.request_kwargs(seen[-1])).encode()


def lockstep_ceiling(n: int, url: str, rounds: int, make_user: Callable[[str, int], Any]) -> dict:
    """A stub server's own ceiling for a lockstep client: ``rounds`` rounds of ``n`` requests of a customer's size
    (``make_user(url, n)``: the simulator whose request body is sent) on kept-alive sockets, from a raw asyncio
    client (no env, no HTTP library). ``{"wall", "cpu", "requests"}``."""
    body = _request_body(url, make_user)
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: stub\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    request = head.encode() + body

    async def run() -> dict:
        conns = [await asyncio.open_connection(host, int(port)) for _ in range(n)]

        async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(request)
            got = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(x.split(b":", 1)[1]) for x in got.split(b"\r\n") if x.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)

        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(rounds):
            await asyncio.gather(*(one(r, w) for r, w in conns))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        for _, w in conns:
            w.close()
        return {"wall": wall, "cpu": cpu, "requests": n * rounds}

    return asyncio.run(run())


# ------------------------------------------------------------------ lockstep clients against a stub LLM customer


def stub_user(url: str, n: int) -> Any:
    """The LLM customer of the lockstep benches: ``OpenAIUserSimulator`` against the stub, every request in flight."""
    try:  # a checkout from before the layered layout (tried first: an editable install may resolve both)
        from tau2_gym.users.openai_user import OpenAIUserSimulator
    except ImportError:
        from tau2_gym.players.users.openai_user import OpenAIUserSimulator
    return OpenAIUserSimulator(model="stub", base_url=url, max_concurrency=n, cache="off", max_retries=0)


def add_lockstep_arguments(parser: Any) -> None:
    """The options every lockstep bench takes (sizes, latencies, the stub's script, --compare) and its child modes."""
    parser.add_argument("--sizes", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--latency", type=float, nargs="*", default=[0.2, 1.0], help="seconds; one, or one per size")
    parser.add_argument("--turns", type=int, default=6, help="customer turns before the stub says ###STOP###")
    parser.add_argument("--ceiling-rounds", type=int, default=20, help="rounds of the stub-ceiling client")
    parser.add_argument("--compare", default=None, help="another checkout's root, measured in the same run")
    parser.add_argument("--child", type=int, default=None)
    parser.add_argument("--ceiling", type=int, default=None)
    parser.add_argument("--url", default=None)


def in_tree(tree: Any, **env: str) -> dict[str, Any]:
    """``subprocess`` keywords for a child that imports ``tree``'s package (None: this checkout's), with ``env``
    added to the environment. The child runs in ``tree`` too: ``python -m`` and a script's folder put the working
    directory ahead of PYTHONPATH."""
    if tree is None:
        return {"env": {**os.environ, **env}}
    return {"env": {**os.environ, **env, "PYTHONPATH": str(tree)}, "cwd": tree}


def spawn_json(script: str, args: list[str], tree: Any) -> dict:
    """Run ``script`` with ``args`` in a child process importing ``tree``'s package; its last stdout line as JSON."""
    proc = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=7200, **in_tree(tree)
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{args} in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def lockstep_against_stub(
    script: str, args: Any, child_args: list[str], describe: Callable[[str, dict], list[tuple]]
) -> list[tuple]:
    """Per size: the stub's lockstep ceiling, then ``script --child N`` for this checkout (and ``--compare``'s), each
    as customer requests/s against the limit (N / latency) and the ceiling, plus ``describe(prefix, result)``'s
    rows. The stub answers after the size's latency and stops the conversation after ``args.turns`` turns."""
    from pathlib import Path

    from openai_stub import AsyncOpenAIStub

    root = Path(script).resolve().parents[1]
    latencies = args.latency if len(args.latency) == len(args.sizes) else [args.latency[0]] * len(args.sizes)
    latency = {"s": 0.0}

    def reply(body: dict, k: int) -> dict:
        said = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        then = "###STOP###" if said >= args.turns else f"Yes, and one more thing ({said})."
        return {"delay": latency["s"], "then": then}

    trees = [("this checkout", root)] + ([("--compare", Path(args.compare).resolve())] if args.compare else [])
    rows: list[tuple] = []
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    with AsyncOpenAIStub(reply) as server:
        for n, lat in zip(args.sizes, latencies):
            latency["s"] = lat
            limit = n / lat
            url = ["--url", server.base_url]
            ceil = spawn_json(script, ["--ceiling", str(n), *url, "--ceiling-rounds", str(args.ceiling_rounds)], root)
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
                    r = spawn_json(script, ["--child", str(n), *url, *child_args], tree)
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
                rows += describe(f"N={n} {label}", r)
                print(f"N={n} {label} done (load average {os.getloadavg()[0]:.2f})", flush=True)
    return rows
