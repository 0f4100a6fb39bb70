"""The difficulty profiler: each task's pass rate over k episodes of one policy and customer, bucketed.

    from tau2_gym.runner.profile import profile

    run = profile(None, "noisy_oracle:spread", "oracle", domain="airline", task_split="train", num_trials=16,
                  output="profiles/airline.json")
    run.profile.counts()      # {'unsolved': ..., 'hard': ..., 'medium': ..., 'easy': ..., 'mastered': ...}
    run.profile.band()        # the task ids of the default band (hard + medium + easy)

A profile *is* a rollout with ``num_trials=k`` (:mod:`tau2_gym.runner.collect`, or Ray: resume from the log, the
reply cache, the server checks all apply) plus per-task statistics: passes out of k, the Wilson interval, the bucket
(:class:`~tau2_gym.scoring.metrics.PassRateBuckets`), and the do-nothing baseline beside each task. The profile file
(:class:`~tau2_gym.episodes.band.Profile`) records the policy, the customer, k, the seeds, the data version and the
identity of the task selection, so that training on its band (``profile=``/``keep=`` wherever tasks are selected,
or :func:`write_band`'s data folder) refuses other tasks or data. :func:`profile_costs` says what a profile will cost
before it runs (``tau2-gym profile --dry-run``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from tau2_gym.core.domain import LoadedDomain, load_domain
from tau2_gym.core.task_folder import write_task_folder
from tau2_gym.core.tasks import Task
from tau2_gym.core.termination import TerminationReason
from tau2_gym.episodes.band import (
    BucketEdge,
    Profile,
    ProfileError,
    TaskPassRate,
    load_profile,
    task_set_identity,
)
from tau2_gym.episodes.selection import select_tasks
from tau2_gym.players.agents.scripted import OracleAgent
from tau2_gym.runner.collect import RolloutConfig, RolloutReport, collect
from tau2_gym.runner.config import trial_seeds
from tau2_gym.runner.log import log_path, read_log
from tau2_gym.scoring.evaluation import needs_nl_judge
from tau2_gym.scoring.metrics import DEFAULT_BUCKETS, PassRateBuckets, is_pass, wilson_interval

__all__ = [
    "ProfileCosts",
    "ProfileRun",
    "band_histogram",
    "bucket_table",
    "make_profile",
    "plot_profile",
    "profile",
    "profile_costs",
    "profile_from_report",
    "profile_path",
    "profile_summary",
    "task_table",
    "write_band",
]

#: settings of the run that change what a pass rate means, kept in the profile
_RECORDED_SETTINGS = (
    "task_set",
    "task_split",
    "task_ids",
    "num_tasks",
    "solo",
    "max_steps",
    "max_errors",
    "agent_can_stop",
    "enforce_protocol",
    "timeout",
    "parser",
    "judge",
    "domain_options",
)


def profile_path(output: Union[str, os.PathLike[str]]) -> Path:
    """``runs/x.json`` -> ``runs/x.profile.json``: the profile beside the results file of its episodes."""
    p = Path(output)
    name = p.name
    for suffix in (".gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return p.with_name(name + ".profile.json")


# ------------------------------------------------------------------------------------------ building a profile


def _pool(cfg: RolloutConfig, domain: LoadedDomain, tasks: Optional[Sequence[Union[Task, str]]]) -> list[Task]:
    """The profiled selection before the judge and do-nothing steps: what a band's consumer selects again."""
    return list(select_tasks(domain, cfg, tasks, num_tasks=cfg.num_tasks, where=f"profile of {cfg.domain!r}"))


def _split_of(cfg: RolloutConfig, tasks: Optional[Sequence[Union[Task, str]]]) -> Optional[str]:
    return cfg.task_split if tasks is None and cfg.task_ids is None else None


def make_profile(
    domain: LoadedDomain,
    pool: Sequence[Task],
    outcomes: Mapping[str, tuple[int, int, int]],
    *,
    k: int,
    buckets: Union[str, PassRateBuckets] = DEFAULT_BUCKETS,
    keep: Optional[Sequence[str]] = None,
    do_nothing_passes: Optional[Sequence[str]] = None,
    baseline: Optional[dict] = None,
    policy: Optional[dict] = None,
    customer: Optional[dict] = None,
    seed: Optional[int] = None,
    seeds: Optional[Sequence[int]] = None,
    settings: Optional[dict] = None,
    results: Optional[str] = None,
    task_set: Optional[str] = None,
    split: Optional[str] = None,
    data_dir: Optional[str] = None,
) -> Profile:
    """A profile from per-task outcomes ``{task_id: (passes, scored trials, failed episodes)}`` of the tasks of
    ``pool`` that were played (in pool order). The statistics every profile shares; :func:`profile_from_report`
    feeds it a rollout, ``examples/learning_proof.py`` its own sampled episodes."""
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    edges = PassRateBuckets.parse(buckets)
    keep_names = edges.check_names(keep, "keep") if keep is not None else edges.default_keep()
    passing = set(do_nothing_passes) if do_nothing_passes is not None else None
    lines = []
    for task in pool:
        if task.id not in outcomes:
            continue
        passes, trials, failed = outcomes[task.id]
        line = TaskPassRate(task_id=task.id, trials=trials, passes=passes, failed=failed)
        if trials:
            lo, hi = wilson_interval(passes, trials)
            line.pass_rate, line.wilson_low, line.wilson_high = passes / trials, lo, hi
            line.bucket = edges.bucket(passes, trials)
        if passing is not None:
            line.do_nothing_pass = task.id in passing
        lines.append(line)
    source = domain.source
    return Profile(
        created=datetime.now().isoformat(timespec="seconds"),
        identity=task_set_identity(domain, pool, task_set=task_set, split=split),
        data_version=domain.data_version_record(),
        data_dir=str(source.root) if source.custom else (str(Path(data_dir).resolve()) if data_dir else None),
        data_version_name=source.version.name,
        policy=dict(policy or {}),
        customer=dict(customer or {}),
        k=k,
        seed=seed,
        seeds=list(seeds or []),
        buckets=[BucketEdge(name=n, upper=str(e)) for n, e in zip(edges.names, edges.edges)],
        keep=list(keep_names),
        baseline=baseline,
        settings=dict(settings or {}),
        results=results,
        episodes=sum(t + f for _, t, f in outcomes.values()),
        failed=sum(f for _, _, f in outcomes.values()),
        tasks=lines,
    )


def profile_from_report(
    report: RolloutReport,
    config: RolloutConfig,
    *,
    tasks: Optional[Sequence[Union[Task, str]]] = None,
    buckets: Union[str, PassRateBuckets] = DEFAULT_BUCKETS,
    keep: Optional[Sequence[str]] = None,
) -> Profile:
    """The profile of a finished rollout of ``config`` (``num_trials`` is k); ``tasks`` as given to the rollout."""
    domain = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
    outcomes: dict[str, list[int]] = {}
    for run in report.simulations:
        entry = outcomes.setdefault(str(run["task_id"]), [0, 0, 0])
        if run.get("termination_reason") == TerminationReason.INFRASTRUCTURE_ERROR or run.get("reward_info") is None:
            entry[2] += 1
        else:
            entry[1] += 1
            entry[0] += is_pass(float(run["reward_info"]["reward"]))
    info = report.results.get("info", {})
    base = report.baseline
    customer = {k: v for k, v in (info.get("user_info") or {}).items() if k != "global_simulation_guidelines"}
    recorded = {k: v for k, v in config.to_dict().items() if k in _RECORDED_SETTINGS}
    return make_profile(
        domain,
        _pool(config, domain, tasks),
        {tid: (p, t, f) for tid, (p, t, f) in outcomes.items()},
        k=config.num_trials,
        buckets=buckets,
        keep=keep,
        do_nothing_passes=list(base["passes"]) if base else None,
        baseline=base,
        policy=info.get("agent_info"),
        customer=customer,
        seed=config.seed,
        seeds=trial_seeds(config.seed, config.num_trials),
        settings=recorded,
        results=str(report.output) if report.output else None,
        task_set=config.task_set,
        split=_split_of(config, tasks),
        data_dir=config.data_dir,
    )


@dataclass
class ProfileRun:
    """A profile and the rollout that measured it."""

    profile: Profile
    report: RolloutReport
    path: Optional[Path]  # where the profile was written

    def ok(self, max_infra_error_rate: float = 0.0) -> bool:
        return self.report.ok(max_infra_error_rate)


def profile(
    tasks: Optional[Sequence[Union[Task, str]]],
    policy: Any,
    user: Any = None,
    *,
    config: Optional[RolloutConfig] = None,
    buckets: Union[str, PassRateBuckets] = DEFAULT_BUCKETS,
    keep: Optional[Sequence[str]] = None,
    profile_output: Optional[Union[str, os.PathLike[str]]] = None,
    ray_actors: Optional[int] = None,
    ray_address: Optional[str] = None,
    **settings: Any,
) -> ProfileRun:
    """Profile ``policy`` (with customer ``user``) on a task selection: a rollout with ``num_trials`` = k, then the
    statistics (:func:`profile_from_report`).

    Args:
        tasks, policy, user, config, settings: as :func:`~tau2_gym.runner.collect.collect` (``num_trials`` is k;
            ``output`` makes the run resumable: the same call again skips what the log holds).
        buckets: the pass-rate buckets (default: the Qwen3-8B run's, :data:`~tau2_gym.scoring.metrics.DEFAULT_BUCKETS`).
        keep: the profile's default band (default: hard, medium, easy).
        profile_output: where to write the profile (default: beside ``output``, ``<stem>.profile.json``; none
            without an output).
        ray_actors, ray_address: run the episodes on that many Ray actors (:func:`~tau2_gym.runner.ray.collect_ray`).

    Bad buckets, an unknown ``keep`` bucket or k < 1 fail before any episode runs.
    """
    cfg = config if config is not None else RolloutConfig()
    if settings:
        cfg = RolloutConfig(**{**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, **settings})
    edges = PassRateBuckets.parse(buckets)
    if keep is not None:
        keep = edges.check_names(keep, "keep")
    if ray_actors:
        from tau2_gym.runner.ray import collect_ray

        report = collect_ray(tasks, policy, user, config=cfg, num_actors=ray_actors, address=ray_address)
    else:
        report = collect(tasks, policy, user, config=cfg)
    prof = profile_from_report(report, cfg, tasks=tasks, buckets=edges, keep=keep)
    path = Path(profile_output) if profile_output else (profile_path(cfg.output) if cfg.output else None)
    if path is not None and not report.interrupted:
        prof.save(path)
        prof.path = str(path)
    return ProfileRun(prof, report, path)


# ------------------------------------------------------------------------------------------ costs up front


def gold_path_requests(task: Task, solo: bool = False) -> tuple[int, int]:
    """(agent, customer) LLM requests of one episode that goes the gold path and nothing more: the oracle agent's
    messages, and a customer who opens, does each asked-for action and says goodbye. A floor: real agents ask for
    ids and confirmations, and fail on the way."""
    oracle = OracleAgent()
    oracle.solo = solo
    steps = oracle.steps(task)
    agent = len(steps)
    if solo:
        return agent, 0
    user = 2  # the opening message, the goodbye
    user += sum(len(payload) + 1 for kind, payload in steps if kind == "ask")  # each action, then a reply
    return agent, user


@dataclass
class ProfileCosts:
    """What a profile will cost, computed before it runs."""

    tasks: int
    k: int
    episodes: int  # tasks x k
    logged: int  # episodes already in the output's log (a resume skips them)
    agent_requests: int  # estimate: the gold path of each episode still to run (0 for a scripted agent)
    user_requests: int  # estimate, as above (0 for an offline customer)
    judge_requests: int  # one per episode of a task with NL assertions, with an LLM judge
    ceiling: int  # at most max_steps messages per episode: the most requests the episodes to run can make

    @property
    def to_run(self) -> int:
        return self.episodes - self.logged

    def lines(self) -> list[str]:
        return [
            f"episodes: {self.episodes} ({self.tasks} tasks x k={self.k}); {self.logged} already in the log, "
            f"{self.to_run} to run",
            f"LLM requests (estimate, the gold path of each episode: a floor): agent {self.agent_requests}, "
            f"customer {self.user_requests}, judge {self.judge_requests}",
            f"LLM requests (ceiling: max_steps per episode): {self.ceiling}",
        ]


def profile_costs(
    config: RolloutConfig,
    tasks: Optional[Sequence[Union[Task, str]]] = None,
    *,
    agent_llm: bool = True,
    user_llm: bool = True,
    judge_llm: Optional[bool] = None,
) -> ProfileCosts:
    """The episodes and LLM requests of a profile (or any rollout) of ``config``, before it runs.

    ``agent_llm`` / ``user_llm``: whether the agent / customer call an LLM (scripted ones do not);
    ``judge_llm``: whether NL assertions go to an LLM judge (default: when ``config.judge`` is ``openai:``/``hf:``).
    """
    from tau2_gym.runner.collect import select_for_run

    _, selected = select_for_run(config, tasks)
    domain = load_domain(config.domain, config.data_dir, config.data_version, options=config.domain_options)
    k = config.num_trials
    seeds = trial_seeds(config.seed, k)
    logged = 0
    if config.output:
        _, records = read_log(log_path(config.output))
        wanted = {(t.id, trial, seeds[trial]) for t in selected for trial in range(k)}
        logged = sum(
            1
            for key, r in records.items()
            if key in wanted and r.get("termination_reason") != TerminationReason.INFRASTRUCTURE_ERROR
        )
    todo = len(selected) * k - logged
    share = todo / (len(selected) * k) if selected else 0.0
    agent = user = judge = 0
    if judge_llm is None:
        spec = config.judge if isinstance(config.judge, str) else ""
        judge_llm = spec.lower().startswith(("openai:", "hf:")) or (
            config.judge is not None and not isinstance(config.judge, str)
        )
    for task in selected:
        a, u = gold_path_requests(task, config.solo)
        agent += a * k
        user += u * k
        if judge_llm and needs_nl_judge(domain, task):
            judge += k
    llm_sides = int(agent_llm) + int(user_llm and not config.solo)
    return ProfileCosts(
        tasks=len(selected),
        k=k,
        episodes=len(selected) * k,
        logged=logged,
        agent_requests=round(agent * share) if agent_llm else 0,
        user_requests=round(user * share) if user_llm and not config.solo else 0,
        judge_requests=round(judge * share),
        ceiling=(config.max_steps * todo if llm_sides else 0) + round(judge * share),
    )


# ------------------------------------------------------------------------------------------ what people read


def _who(info: Mapping[str, Any]) -> str:
    impl = info.get("implementation") or "?"
    return f"{impl} ({info['llm']})" if info.get("llm") else str(impl)


def profile_summary(prof: Profile) -> str:
    """Who was profiled on what: the lines above the table."""
    ident = prof.identity
    lines = [
        f"profile: {ident.describe()}",
        f"policy: {_who(prof.policy)}; customer: {_who(prof.customer)}; k={prof.k}, seed {prof.seed}",
        "buckets: " + prof.edges.describe(prof.k),
    ]
    if prof.baseline:
        lines.append(
            f"do-nothing baseline: {prof.baseline.get('reward', 0):.4f} ({len(prof.baseline.get('passes') or [])} of "
            f"{prof.baseline.get('tasks')} tasks pass with no action)"
        )
    if prof.failed:
        lines.append(f"failed episodes: {prof.failed} (infrastructure; not counted as trials)")
    return "\n".join(lines)


def bucket_table(prof: Profile, keep: Optional[Sequence[str]] = None) -> str:
    """One row per bucket: its pass counts at this k, tasks, share, do-nothing passes, and whether it is kept."""
    kept = set(prof.check_keep(keep))
    ranges = prof.edges.pass_ranges(prof.k)
    counts = prof.counts()
    total = sum(counts.values()) or 1
    dn: dict[str, int] = {}
    for t in prof.tasks:
        if t.bucket is not None and t.do_nothing_pass:
            dn[t.bucket] = dn.get(t.bucket, 0) + 1
    rows = [("bucket", f"passes/{prof.k}", "tasks", "share", "do-nothing passes", "kept")]
    for name in prof.edges.names:
        r = ranges[name]
        span = "-" if r is None else (str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}")
        rows.append(
            (
                name,
                span,
                str(counts[name]),
                f"{counts[name] / total:.0%}",
                str(dn.get(name, 0)),
                "yes" if name in kept else "",
            )
        )
    unscored = sum(1 for t in prof.tasks if t.bucket is None)
    band = sum(counts[n] for n in kept)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    out.append(f"band ({', '.join(n for n in prof.edges.names if n in kept)}): {band} of {total} tasks")
    if unscored:
        out.append(f"no scored episode: {unscored} task(s)")
    return "\n".join(out)


def band_histogram(prof: Profile, width: int = 40) -> str:
    """Tasks per pass count (0..k), one bar each, labelled with its bucket (tasks with fewer scored trials are
    counted by their rate, rounded to k)."""
    per = [0] * (prof.k + 1)
    for t in prof.tasks:
        if t.pass_rate is not None:
            per[round(t.pass_rate * prof.k)] += 1
    top = max(per) or 1
    digits = len(str(prof.k))
    names = prof.edges
    label = max(len(n) for n in names.names)
    lines = []
    for passes, n in enumerate(per):
        bar = "#" * (round(n / top * width) if n else 0)
        lines.append(f"{passes:>{digits}}/{prof.k} {names.bucket(passes, prof.k):<{label}} |{bar} {n}".rstrip())
    return "\n".join(lines)


def task_table(prof: Profile) -> str:
    """Every task: passes, rate, Wilson interval, bucket, do-nothing pass (hardest first)."""
    rows = [("task", "passes", "rate", "95% interval", "bucket", "do-nothing")]
    for t in sorted(prof.tasks, key=lambda t: (t.pass_rate if t.pass_rate is not None else -1.0, t.task_id)):
        if t.pass_rate is None:
            rows.append((t.task_id, f"0/{t.trials}", "-", "-", "-", ""))
            continue
        dn = "" if t.do_nothing_pass is None else ("pass" if t.do_nothing_pass else "fail")
        rows.append(
            (
                t.task_id,
                f"{t.passes}/{t.trials}",
                f"{t.pass_rate:.2f}",
                f"[{t.wilson_low:.2f}, {t.wilson_high:.2f}]",
                t.bucket or "-",
                dn,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


_COLOURS = ("#8c8c8c", "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#e377c2")


def plot_profile(prof: Profile, path: Union[str, os.PathLike[str]], keep: Optional[Sequence[str]] = None) -> Path:
    """A PNG of the histogram: tasks per pass count, coloured by bucket, the kept band marked. Needs matplotlib
    (``pip install 'tau2-gym[plot]'``; ImportError without it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kept = set(prof.check_keep(keep))
    per = [0] * (prof.k + 1)
    dn = [0] * (prof.k + 1)
    for t in prof.tasks:
        if t.pass_rate is not None:
            i = round(t.pass_rate * prof.k)
            per[i] += 1
            dn[i] += bool(t.do_nothing_pass)
    names = prof.edges
    colour = {n: _COLOURS[i % len(_COLOURS)] for i, n in enumerate(names.names)}
    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = list(range(prof.k + 1))
    buckets = [names.bucket(x, prof.k) for x in xs]
    from matplotlib.colors import to_rgba

    ax.bar(
        xs,
        per,
        color=[to_rgba(colour[b], 1.0 if b in kept else 0.35) for b in buckets],
        edgecolor="black",
        linewidth=0.4,
    )
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    handles = [
        Patch(
            facecolor=to_rgba(colour[n], 1.0 if n in kept else 0.35),
            edgecolor="black",
            label=n + (" (kept)" if n in kept else ""),
        )
        for n in names.names
    ]
    if any(dn):
        ax.bar(xs, dn, fill=False, hatch="//", edgecolor="black", linewidth=0.0)
        handles.append(Patch(fill=False, hatch="//", edgecolor="black", label="do-nothing passes"))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel=f"passes out of k={prof.k}", ylabel="tasks", ylim=(0, max(per) * 1.35 + 0.5))
    ident = prof.identity
    ax.set_title(f"{ident.domain} {ident.split or 'all'}: {_who(prof.policy)}, {len(prof.tasks)} tasks", fontsize=9)
    ax.legend(handles=handles, fontsize=7, loc="upper center", ncol=3)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# ------------------------------------------------------------------------------------------ the band as data


def profiled_domain(prof: Profile, data_dir: Optional[str] = None) -> tuple[LoadedDomain, list[Task]]:
    """The profile's domain on its data (or ``data_dir``) and its profiled selection, checked against the profile's
    identity."""
    folder = data_dir or prof.data_dir
    if folder is not None and not Path(folder).exists():
        raise ProfileError(
            f"the data folder {folder!r} of profile {prof.path or ''} does not exist; pass the data folder it was "
            "made on (data_dir= / --data-dir)"
        )
    domain = load_domain(
        prof.identity.domain, folder, prof.data_version_name, options=prof.settings.get("domain_options") or None
    )
    task_set = prof.identity.task_set
    whole = {t.id: t for t in domain.tasks(task_set, None)}
    missing = [i for i in prof.identity.task_ids if i not in whole]
    pool = [whole[i] for i in prof.identity.task_ids if i in whole]
    ident = task_set_identity(domain, pool, task_set=task_set, split=prof.identity.split)
    if missing:
        ident.task_ids = list(ident.task_ids) + ["(missing) " + m for m in missing]
    prof.check_identity(ident, f"the data at hand ({domain.source.describe()})")
    return domain, pool


def write_band(
    profile: Union[str, os.PathLike[str], Profile],
    out: Union[str, os.PathLike[str]],
    keep: Optional[Sequence[str]] = None,
    *,
    data_dir: Optional[str] = None,
) -> str:
    """Write the ``keep`` band of ``profile`` (default: its own band) as an ordinary tau2 data folder at ``out``, the
    profile in its ``provenance.json``; returns the folder to pass as ``data_dir``. The profile's data (or
    ``data_dir``) must still hold the profiled tasks unchanged."""
    prof = load_profile(profile)
    keep_names = prof.check_keep(keep)
    domain, pool = profiled_domain(prof, data_dir)
    wanted = set(prof.band(keep_names))
    tasks = [t for t in pool if t.id in wanted]
    if not tasks:
        raise ProfileError(f"the band {list(keep_names)} holds no task (tasks per bucket: {prof.counts()})")
    counts = prof.counts()
    provenance = {
        "made_by": "tau2_gym.runner.profile.write_band",
        "created": datetime.now().isoformat(timespec="seconds"),
        "band": {"keep": list(keep_names), "tasks_per_bucket": {n: counts[n] for n in keep_names}},
        "profile_file": prof.path,
        "profile": prof.model_dump(mode="json"),
    }
    return write_task_folder(out, domain, tasks, provenance, task_set=prof.identity.task_set)
