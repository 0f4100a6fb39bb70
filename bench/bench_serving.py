"""Rollout throughput against local OpenAI-compatible stub servers: ``tau2-gym rollout`` vs upstream ``tau2 run``.

Agent and user are LLMs behind two stub servers (127.0.0.1, one process each, asyncio with keep-alive:
``tests/openai_stub.py``'s AsyncOpenAIStub) that wait ``--latency`` seconds per request. The run is then
server-bound: with ``c`` episodes in flight, each a chain of sequential requests, no client can exceed
``c / latency`` requests/s -- the limit; we print requests/s and episodes/s as the servers saw them (from the
first request's arrival to the last reply, so process start-up and the results file are outside) and the
fraction of the limit. Per concurrency, in one run against the same servers, the same tasks and episodes:

- the stub alone, driven by a raw asyncio load generator (the ceiling the servers allow),
- ``tau2-gym rollout`` (CLI, no user cache), then again with a warm ``--user-cache`` (user requests -> 0),
- upstream ``tau2 run`` (``TAU2_REFERENCE_PYTHON``'s venv, data from ``TAU2_UPSTREAM_DATA_DIR``), pointed at
  the same servers the way upstream users do (``openai/`` model, ``api_base``/``api_key`` in the LLM args);
  skipped with a message when ``TAU2_REFERENCE_PYTHON`` is unset. Upstream runs ``--upstream-per-slot``
  episodes per slot (it is ~100x slower at 32+), and ours is measured again on exactly those episodes.

Episodes of a finite run end at different times, so slots idle while the last wave drains: about half an
episode per slot, i.e. ~1/(2 x episodes per slot) of the window, for any client. Hence 16 per slot by default;
the figures at 2 per slot (the upstream comparison) carry ~4x that drain for both sides.

    python bench/bench_serving.py [--latency 0.2] [--concurrency 1 32 256] [--min-episodes 10] [--no-warm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from openai_stub import AsyncOpenAIStub  # noqa: E402 - after sys.path gets the helpers' folder

# mock tasks both sides run cleanly: the env-assertion task raises in evaluation (both sides), the NL one
# needs a judge (upstream would call its default judge model)
EXCLUDED = ("create_task_1_with_env_assertions", "create_task_1_nl_eval")


def _stub_process(role: str, latency: float, stop_at: int, conn) -> None:
    def agent_reply(body, n):
        return {"delay": latency, "then": "Could you tell me more?"}

    def user_reply(body, n):
        stop = len(body["messages"]) >= stop_at
        return {"delay": latency, "then": "###STOP###" if stop else f"Please help me (turn {len(body['messages'])})."}

    with AsyncOpenAIStub(agent_reply if role == "agent" else user_reply) as srv:
        conn.send(srv.base_url)
        while True:
            msg = conn.recv()
            if msg == "stats":
                conn.send((srv.count, srv.first, srv.last, srv.peak, srv.busy))
            elif msg == "reset":
                srv.count, srv.first, srv.last, srv.peak, srv.busy = 0, 0.0, 0.0, 0, 0.0
                conn.send(True)
            else:
                return


class Servers:
    """The agent and the user stub, each in its own process (no shared GIL with the client or each other)."""

    def __init__(self, latency: float, stop_at: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conns, self.procs, self.urls = [], [], []
        for role in ("agent", "user"):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_stub_process, args=(role, latency, stop_at, child), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        self.urls = [c.recv() for c in self.conns]

    def reset(self) -> None:
        for c in self.conns:
            c.send("reset")
            c.recv()

    def stats(self) -> dict:
        got = []
        for c in self.conns:
            c.send("stats")
            got.append(c.recv())
        (na, fa, la, pa, ba), (nu, fu, lu, pu, bu) = got
        firsts = [f for f in (fa, fu) if f]
        window = (max(la, lu) - min(firsts)) if firsts else float("nan")
        return {"agent": na, "user": nu, "requests": na + nu, "window": window, "peak": pa + pu, "busy": ba + bu}

    def close(self) -> None:
        for c in self.conns:
            c.send("stop")
        for p in self.procs:
            p.join(5)


# ------------------------------------------------------------------------------------------ load generator


async def _raw_load(urls: list[str], concurrency: int, chain: int, body: bytes) -> None:
    """``concurrency`` keep-alive connections, each ``chain`` sequential requests alternating agent/user."""

    async def one(k: int) -> None:
        conns = []
        for url in urls:
            host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
            conns.append(await asyncio.open_connection(host, int(port)))
        req = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: stub\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        for i in range(chain):
            reader, writer = conns[(i + k) % len(conns)]
            writer.write(req)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
        for _, writer in conns:
            writer.close()

    await asyncio.gather(*(one(k) for k in range(concurrency)))


# ------------------------------------------------------------------------------------------ the two CLIs


def _llm_args(url: str) -> str:
    return json.dumps({"api_base": url, "api_key": "x", "temperature": 0.0})


def _common(urls: list[str], task_ids: list[str], concurrency: int, trials: int) -> list[str]:
    return [
        "--domain",
        "mock",
        "--task-ids",
        *task_ids,
        "--num-trials",
        str(trials),
        "--agent",
        "llm_agent",
        "--agent-llm",
        "openai/stub-model",
        "--agent-llm-args",
        _llm_args(urls[0]),
        "--user",
        "user_simulator",
        "--user-llm",
        "openai/stub-model",
        "--user-llm-args",
        _llm_args(urls[1]),
        "--max-concurrency",
        str(concurrency),
        "--log-level",
        "ERROR",
    ]


def _count_episodes(path: Path) -> int:
    if path.is_dir():  # upstream v1.0.1 writes <save_to>/results.json
        path = path / "results.json"
    data = json.loads(path.read_text())
    return sum(1 for s in data.get("simulations", []) if s.get("termination_reason") != "infrastructure_error")


def run_ours(urls, task_ids, concurrency, trials, out: Path, cache: str | None) -> int:
    cmd = [
        sys.executable,
        "-c",
        "import sys; from tau2_gym.cli import main; sys.exit(main())",
        "rollout",
        *_common(urls, task_ids, concurrency, trials),
        "--output",
        str(out),
        "--no-progress",
    ]
    cmd += ["--user-cache", cache] if cache else ["--no-user-cache"]  # the cache is on by default at temperature 0
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"tau2-gym rollout failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return _count_episodes(out)


def run_upstream(ref_python: str, data_dir: str, urls, task_ids, concurrency, trials, out: Path, timeout: float) -> int:
    """Episodes upstream finished; a run over ``timeout`` seconds is killed and counted as far as it got (its
    client has stalled for minutes on some requests at 32+: the bench must still end and say so)."""
    tau2 = Path(ref_python).parent / "tau2"
    cmd = [str(tau2), "run", *_common(urls, task_ids, concurrency, trials), "--save-to", str(out)]
    env = {**os.environ, "TAU2_DATA_DIR": data_dir}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=out.parent)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        try:
            n = _count_episodes(out)
        except (OSError, ValueError):
            n = 0
        print(f"upstream at c={concurrency}: killed after {timeout:.0f} s with {n} episodes done", flush=True)
        return n
    if proc.returncode != 0:
        sys.exit(f"tau2 run failed ({proc.returncode}):\n{err[-3000:]}")
    return _count_episodes(out)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per LLM request (default: 0.2)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32, 256])
    ap.add_argument(
        "--min-episodes",
        type=int,
        default=10,
        help="episodes per measurement: max(this, --per-slot x concurrency) (default: 10)",
    )
    ap.add_argument(
        "--per-slot",
        type=int,
        default=16,
        help="episodes per concurrency slot: the partly filled last wave weighs ~1/(2 x this) (default: 16)",
    )
    ap.add_argument(
        "--upstream-per-slot",
        type=int,
        default=2,
        help="episodes per slot for upstream, and for ours again on the same episodes (default: 2)",
    )
    ap.add_argument(
        "--upstream-timeout",
        type=float,
        default=600.0,
        help="seconds before an upstream run is killed and counted as far as it got (default: 600)",
    )
    ap.add_argument("--user-turns", type=int, default=3, help="user replies before the user stops (default: 3)")
    ap.add_argument("--no-upstream", action="store_true", help="skip upstream even when TAU2_REFERENCE_PYTHON is set")
    ap.add_argument("--no-warm", action="store_true", help="skip the two runs with a warm user cache")
    args = ap.parse_args()
    lat = args.latency
    ref_python = None if args.no_upstream else os.environ.get("TAU2_REFERENCE_PYTHON")
    data_dir = os.environ.get("TAU2_UPSTREAM_DATA_DIR") or os.environ.get("TAU2_DATA_DIR")
    if ref_python and not data_dir:
        sys.exit("TAU2_REFERENCE_PYTHON is set: also set TAU2_UPSTREAM_DATA_DIR to upstream's data/ folder")

    from tau2_gym import load_domain

    task_ids = [t.id for t in load_domain("mock").tasks(None, "base") if t.id not in EXCLUDED]
    servers = Servers(lat, stop_at=2 * args.user_turns + 1)
    print(
        f"latency {lat * 1000:.0f} ms per request; mock domain, {len(task_ids)} tasks; agent and user LLM stubs "
        f"(one process each); limit = concurrency / latency"
    )
    if not ref_python:
        print(
            "upstream: skipped (set TAU2_REFERENCE_PYTHON=/path/to/venv/bin/python and TAU2_UPSTREAM_DATA_DIR "
            "to measure tau2 run on the same servers)"
        )
    rows = []
    body = json.dumps({"model": "stub-model", "messages": [{"role": "user", "content": "x" * 2000}] * 6}).encode()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for conc in args.concurrency:
                trials = -(-max(args.min_episodes, args.per_slot * conc) // len(task_ids))
                episodes = trials * len(task_ids)
                row = {"c": conc, "limit": conc / lat, "episodes": episodes}

                def measure(name, fn):
                    servers.reset()
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    n = fn()
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                    st = servers.stats()
                    row[name] = {
                        "eps": n / st["window"],
                        "rps": st["requests"] / st["window"],
                        "server_ms": 1000 * st["busy"] / max(1, st["requests"]),
                        "cpu_ms": 1000 * cpu / max(1, st["requests"]),
                        "frac": st["requests"] / st["window"] / (conc / lat),
                        "user": st["user"],
                        "req_per_ep": st["requests"] / max(1, n),
                        "n": n,
                    }

                chain = max(8, round(episodes * 7 / conc))
                measure("stub", lambda: asyncio.run(_raw_load(servers.urls, conc, chain, body)) or 0)
                measure(
                    "ours", lambda: run_ours(servers.urls, task_ids, conc, trials, Path(tmp) / f"ours{conc}.json", None)
                )
                cache = os.path.join(tmp, f"cache{conc}")
                if not args.no_warm:
                    run_ours(servers.urls, task_ids, conc, trials, Path(tmp) / f"cold{conc}.json", cache)
                    measure(
                        "warm",
                        lambda: run_ours(servers.urls, task_ids, conc, trials, Path(tmp) / f"warm{conc}.json", cache),
                    )
                if ref_python:  # fewer episodes (upstream is ~100x slower at 32+); ours again on the same ones
                    up_trials = -(-max(args.min_episodes, args.upstream_per_slot * conc) // len(task_ids))
                    row["up_episodes"] = up_trials * len(task_ids)
                    measure(
                        "ours_same",
                        lambda: run_ours(servers.urls, task_ids, conc, up_trials, Path(tmp) / f"same{conc}.json", None),
                    )
                    measure(
                        "upstream",
                        lambda: run_upstream(
                            ref_python,
                            data_dir,
                            servers.urls,
                            task_ids,
                            conc,
                            up_trials,
                            Path(tmp) / f"up{conc}.json",
                            args.upstream_timeout,
                        ),
                    )
                rows.append(row)
                _print_row(row)
    finally:
        servers.close()
    print()
    _print_table(rows)


def _print_row(row: dict) -> None:
    parts = [
        f"c={row['c']}: {row['episodes']} episodes"
        + (f" ({row['up_episodes']} for upstream and ours_same)" if "up_episodes" in row else "")
    ]
    for name in ("stub", "ours", "warm", "ours_same", "upstream"):
        m = row.get(name)
        if m:
            parts.append(
                f"{name} {m['rps']:.1f} req/s ({100 * m['frac']:.1f}%)"
                + (
                    f", {m['eps']:.2f} eps/s, {m['req_per_ep']:.2f} req/ep, {m['user']} user req, "
                    f"{m['cpu_ms']:.2f} ms CPU/req (process incl. start-up)"
                    if name != "stub"
                    else ""
                )
                + f", server {m['server_ms']:.1f} ms/req"
            )
    print("; ".join(parts), flush=True)


def _print_table(rows: list[dict]) -> None:
    def cell(m, key, fmt):
        return format(m[key], fmt) if m else "-"

    def pct(m):
        return f"{100 * m['frac']:.1f}%" if m else "-"

    cols = [
        "concurrency",
        "limit req/s",
        "stub alone",
        "ours eps/s",
        "ours req/s",
        "ours % limit",
        "ours warm cache eps/s (user req)",
        "same episodes as upstream: ours % limit",
        "upstream eps/s",
        "upstream req/s",
        "upstream % limit",
        "CPU ms/req ours / upstream",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("-" * (len(c) + 1) + ":" for c in cols) + "|")
    for r in rows:
        o, u, w, s, o2 = r.get("ours"), r.get("upstream"), r.get("warm"), r.get("stub"), r.get("ours_same")
        cells = [
            str(r["c"]),
            f"{r['limit']:.1f}",
            pct(s),
            cell(o, "eps", ".2f"),
            cell(o, "rps", ".1f"),
            pct(o),
            f"{w['eps']:.2f} ({w['user']})" if w else "-",
            pct(o2),
            cell(u, "eps", ".2f"),
            cell(u, "rps", ".1f"),
            pct(u),
            f"{cell(o2, 'cpu_ms', '.2f')} / {cell(u, 'cpu_ms', '.2f')}",
        ]
        print("| " + " | ".join(c.rjust(len(h)) for c, h in zip(cells, cols)) + " |")


if __name__ == "__main__":
    main()
