"""``tau2-gym serve``: an OpenEnv server for a tau2 env id (the work is in :mod:`tau2_gym.frameworks.openenv`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

TOKEN_ENV = "TAU2_GYM_SERVE_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "env_id",
        nargs="?",
        default=None,
        help="registered env id, e.g. tau2/airline-v0, tau2/telecom-solo-v0, tau2/retail-user-v0 "
        "(default: tau2/<--domain>-v0)",
    )
    g = parser.add_argument_group("env")
    g.add_argument("--domain", default="airline", help="domain when no env id is given (default: airline)")
    g.add_argument("--split", default=None, help="task split episodes are drawn from (default: base; 'none' = all)")
    g.add_argument("--user", default=None, help="user simulator: oracle (default) or a spec string / module:Class")
    g.add_argument("--judge", default=None, help="NL-assertion judge: fail (default), pass, exclude or openai:MODEL")
    g.add_argument("--reward-mode", default=None, help="default, strict or partial")
    g.add_argument(
        "--data-version", default=None, help="data version (default: TAU2_DATA_VERSION or tau2-bench==1.0.1)"
    )
    g.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other gym.make argument (VALUE read as JSON when it parses, else as text); repeatable",
    )
    g = parser.add_argument_group("server")
    g.add_argument("--host", default=None, help="interface to bind (default: 127.0.0.1; another only when given)")
    g.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 = any free port)")
    g.add_argument(
        "--token",
        default=None,
        help=f"require 'Authorization: Bearer TOKEN' (default: the {TOKEN_ENV} variable, else no token)",
    )
    g.add_argument(
        "--max-sessions", type=int, default=1024, help="concurrent WebSocket sessions per worker (default: 1024)"
    )
    g.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes on the one port (default: 1); one per core for hundreds of sessions behind fast "
        "LLMs (docs/performance.md gives a process's steps/s)",
    )
    g.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        help="seconds without a message before a session is closed (default: 600; 0 = never)",
    )
    g.add_argument(
        "--max-message-bytes",
        type=int,
        default=1 << 20,
        help="largest WebSocket message or HTTP body accepted (default: 1 MiB)",
    )
    g.add_argument(
        "--expose-gold",
        action="store_true",
        help="OpenEnv's Task API serves the tasks' gold actions and assertions too (default: never)",
    )
    g.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")
    g.add_argument(
        "--loop",
        default="auto",
        help="event loop: auto (default; uvloop when installed, as the openenv extra installs it, else asyncio), "
        "asyncio or uvloop",
    )
    g = parser.add_argument_group("OpenEnv package (write and exit; nothing is served)")
    g.add_argument(
        "--write-manifest",
        metavar="FILE",
        default=None,
        help="write the env's openenv.yaml, its validation block measured from the env (oracle, do-nothing floor, "
        "tools, task counts, judge), to FILE ('-': stdout)",
    )
    g.add_argument(
        "--write-space",
        metavar="DIR",
        default=None,
        help="write the package `openenv validate DIR` and `openenv push DIR` take: openenv.yaml, a Dockerfile that "
        "runs this serve command, a Space README, the runtime probe and the oracle script, tau2-gym's source",
    )


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if args.split is not None:
        kwargs["task_split"] = None if args.split.lower() == "none" else args.split
    for flag, name in (("user", "user"), ("judge", "judge"), ("reward_mode", "reward_mode")):
        if getattr(args, flag) is not None:
            kwargs[name] = getattr(args, flag)
    if args.data_version is not None:
        kwargs["data_version"] = args.data_version
    for item in args.env_arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env-arg {item!r}: expected KEY=VALUE")
        kwargs[key.strip().replace("-", "_")] = _value(value)
    return kwargs


def run(args: argparse.Namespace) -> int:
    try:
        from tau2_gym.frameworks.openenv import DEFAULT_HOST, Tau2Server, is_loopback
    except ModuleNotFoundError as exc:
        print(
            f"error: tau2-gym serve needs the openenv extra ({exc}): pip install 'tau2-gym[openenv]'", file=sys.stderr
        )
        return 1
    env_id = args.env_id or f"tau2/{args.domain}-v0"
    if args.write_manifest or args.write_space:
        return _write(args, env_id)
    host = args.host or DEFAULT_HOST
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    try:
        kwargs = env_kwargs(args)
        server = Tau2Server(
            env_id,
            kwargs,
            host=host,
            port=args.port,
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout or None,
            max_message_bytes=args.max_message_bytes,
            token=token,
            expose_gold=args.expose_gold,
            log_level=args.log_level,
            loop=args.loop,
        )
    except (ValueError, TypeError, IndexError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not is_loopback(host) and token is None:
        print(
            f"warning: serving on {host} without a token: anyone who reaches the port can run episodes", file=sys.stderr
        )
    print(
        f"serving {env_id} at {server.url} (OpenEnv: WebSocket {server.url.replace('http', 'ws', 1)}/ws; "
        f"max {args.max_sessions} sessions; {server.loop} loop{'; bearer token required' if token else ''})",
        flush=True,
    )
    server.run(workers=args.workers)
    return 0


def _write(args: argparse.Namespace, env_id: str) -> int:
    """``--write-manifest`` / ``--write-space``: measure the env's facts once, write, exit."""
    from tau2_gym.frameworks.openenv.manifest import manifest_yaml, measure_facts, write_package

    try:
        facts = measure_facts(env_id, env_kwargs(args))
        if args.write_space:
            write_package(args.write_space, env_id, facts=facts)
            print(f"wrote the OpenEnv package of {env_id} to {args.write_space} (openenv validate / openenv push)")
        if args.write_manifest == "-":
            sys.stdout.write(manifest_yaml(facts))
        elif args.write_manifest:
            with open(args.write_manifest, "w") as fh:
                fh.write(manifest_yaml(facts))
            print(f"wrote the OpenEnv manifest of {env_id} to {args.write_manifest}")
    except (ValueError, TypeError, IndexError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
