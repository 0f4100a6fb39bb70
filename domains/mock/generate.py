"""Generated mock-domain tasks: many small customer requests to train on, with a held-out set to test on.

The mock domain ships 10 hand-written tasks -- too few to tell learning from memorising. This module makes
as many as needed, seeded and deterministic, in upstream's task format, and writes them as a tau2 data
folder, so they load wherever a task file does: ``gym.make("tau2/mock-v0", data_dir=folder,
task_split="train")``, a mixture component's ``data_dir``, ``tau2-gym rollout --data-dir folder``,
``build_dataset("mock", data_dir=folder)``. No second loader: the folder is read like any tau2 data.

Each task: one customer (a fresh user with a drawn name, owning 1-3 tasks with drawn titles, added through
``initial_state.initialization_data`` on top of the domain's DB) asks for one thing (an *intent*):

* ``complete``: mark one of their pending tasks completed -> ``update_task_status(task_id, "completed")``;
* ``reopen``: set one of their completed tasks back to pending -> ``update_task_status(task_id, "pending")``;
* ``create``: add a task with a given title -> ``create_task(user_id, title)``.

The customer's first message names the task (or the title) and the user id, and ends with a one-line
summary of the same shape for every task (``Task id: task_42. New status: completed.``), so the right call is
the intent's tool with arguments copied from what the customer said -- a pattern a small model can learn.
Gold actions, the customer's (structured) instructions, env assertions and ``reward_basis``
``["DB", "ENV_ASSERTION"]`` make the reward upstream's.

Splits ``train`` and ``test`` share no identifying value: user ids, task ids, names and titles are drawn
from disjoint pools (only the status enum and tool names are common -- there are two statuses). ``base``
lists every task (mock's usual split name, so ``tau2/mock-v0``'s default still loads).

The folder records that it is generated: every task's ``description.notes`` says so (with the seed), and
``generated.json`` beside the task file holds the generator, its settings and the verification result.
Verification needs the env (a layer above the domains), so the caller passes it in (``verify=``):
tasks whose oracle episode does not score 1.0, or whose do-nothing episode does not score 0.0, stop the
write with an error.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from tau2_gym.core.domain import load_domain
from tau2_gym.core.tasks import Task

GENERATOR = "tau2_gym.domains.mock.generate"
GENERATOR_VERSION = 1
INTENTS = ("complete", "reopen", "create")
SPLITS = ("train", "test")
STYLES = ("natural", "terse")

FIRST_NAMES = (
    "Ada", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kira", "Luca",
    "Maya", "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Victor", "Wen", "Yusuf",
)  # fmt: skip
LAST_NAMES = (
    "Abbott", "Berg", "Costa", "Diaz", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen", "Kowalski",
    "Larsen", "Moreau", "Novak", "Okafor", "Petrov", "Quint", "Rossi", "Silva", "Tanaka", "Umar", "Varga",
)  # fmt: skip
TITLE_VERBS = (
    "Review", "Draft", "Update", "Plan", "Prepare", "Schedule", "Finalize", "Check", "Organize", "Submit",
    "Clean up", "Book",
)  # fmt: skip
TITLE_NOUNS = (
    "budget", "report", "slides", "roadmap", "invoice", "newsletter", "onboarding", "release notes",
    "team offsite", "backlog", "contract", "survey", "launch plan", "inventory", "dentist visit", "demo",
)  # fmt: skip

# (reason for call, task instructions) per intent; {task_id} {title} {user_id} {name} are filled in
PHRASES: dict[str, tuple[tuple[str, str], ...]] = {
    "complete": (
        ("You finished your task {task_id} ('{title}') and want it marked as completed.",
         "Ask the agent to mark task {task_id} as completed."),
        ("Your task {task_id} ('{title}') is done; you want its status set to completed.",
         "Ask for task {task_id} to be set to completed."),
        ("You want task {task_id} ('{title}') closed as completed.",
         "Request that task {task_id} be marked completed."),
    ),
    "reopen": (
        ("Your task {task_id} ('{title}') was marked completed by mistake; you want it back to pending.",
         "Ask the agent to set task {task_id} back to pending."),
        ("You need to reopen task {task_id} ('{title}'): its status should be pending again.",
         "Ask for task {task_id} to be set to pending."),
        ("Task {task_id} ('{title}') is not finished after all; you want it pending.",
         "Request that task {task_id} be marked pending."),
    ),
    "create": (
        ("You want a new task called '{title}' in your list.",
         "Ask the agent to create a task titled '{title}' for {user_id}."),
        ("You need to track '{title}' as a new task.",
         "Ask for a new task named '{title}' for user {user_id}."),
        ("You want to add the task '{title}' for yourself.",
         "Request a new task called '{title}' for {user_id}."),
    ),
}  # fmt: skip
PERSONAS = (
    "Brief and to the point.",
    "Friendly and a little chatty.",
    "Polite, writes in full sentences.",
    "In a hurry; short messages.",
)


@dataclass
class GeneratedTasks:
    """Tasks (upstream's JSON form, validated), their splits and a record of how they were made."""

    tasks: list[dict]
    splits: dict[str, list[str]]
    settings: dict = field(default_factory=dict)

    def ids(self, split: str) -> list[str]:
        return list(self.splits[split])

    def by_id(self) -> dict[str, dict]:
        return {t["id"]: t for t in self.tasks}


def _pools(rng: random.Random, base_db: dict, id_digits: int) -> dict[str, dict[str, list]]:
    """Disjoint value pools per split: ``id_digits``-digit ids (none already in the DB), names, titles."""
    used_tasks, used_users = set(base_db["tasks"]), set(base_db["users"])
    numbers = range(10 ** (id_digits - 1), 10**id_digits)
    task_nums = [n for n in numbers if f"task_{n}" not in used_tasks]
    user_nums = [n for n in numbers if f"user_{n}" not in used_users]
    names = [f"{a} {b}" for a in FIRST_NAMES for b in LAST_NAMES]
    titles = [f"{v} {n}" for v in TITLE_VERBS for n in TITLE_NOUNS]
    out: dict[str, dict[str, list]] = {s: {} for s in SPLITS}
    for key, values in (("task", task_nums), ("user", user_nums), ("name", names), ("title", titles)):
        values = list(values)
        rng.shuffle(values)
        half = len(values) // 2
        out["train"][key], out["test"][key] = values[:half], values[half:]
    return out


def _one_task(
    rng: random.Random,
    pool: dict[str, list],
    intent: str,
    index: int,
    split: str,
    seed: int,
    id_prefix: str,
    style: str = "natural",
) -> dict:
    """One task of ``intent``, its values drawn from ``pool`` (distinct within the task; tasks of a split may
    share values, each task's DB is its own)."""
    user_id = f"user_{rng.choice(pool['user'])}"
    name = rng.choice(pool["name"])
    n_owned = rng.randint(1, 3)
    owned = [f"task_{n}" for n in rng.sample(pool["task"], n_owned)]
    titles = rng.sample(pool["title"], n_owned)
    target = rng.randrange(n_owned)
    statuses = [rng.choice(("pending", "completed")) for _ in range(n_owned)]
    if intent == "complete":
        statuses[target] = "pending"
    elif intent == "reopen":
        statuses[target] = "completed"
    tasks = {
        tid: {"task_id": tid, "title": title, "description": None, "status": status}
        for tid, title, status in zip(owned, titles, statuses)
    }
    agent_data = {"tasks": tasks, "users": {user_id: {"user_id": user_id, "name": name, "tasks": list(owned)}}}
    values = {"user_id": user_id, "name": name, "task_id": owned[target], "title": titles[target]}
    if intent == "create":
        values["title"] = rng.choice([t for t in pool["title"] if t not in titles])
        action = {"name": "create_task", "arguments": {"user_id": user_id, "title": values["title"]}}
        assertion = {
            "func_name": "assert_number_of_tasks",
            "arguments": {"user_id": user_id, "expected_number": n_owned + 1},
        }
        ticket = f"User {user_id} ({name}) wants a new task titled '{values['title']}'."
    else:
        status = "completed" if intent == "complete" else "pending"
        action = {"name": "update_task_status", "arguments": {"task_id": values["task_id"], "status": status}}
        assertion = {
            "func_name": "assert_task_status",
            "arguments": {"task_id": values["task_id"], "expected_status": status},
        }
        ticket = f"User {user_id} ({name}) wants task {values['task_id']} set to {status}."
    reason, todo = rng.choice(PHRASES[intent])
    task_id = f"{id_prefix}{split}_{index:03d}_{intent}"
    return {
        "id": task_id,
        "description": {
            "purpose": f"Generated {intent} request: {action['name']} with arguments taken from the customer",
            "notes": f"generated by {GENERATOR} v{GENERATOR_VERSION} (seed {seed}, split {split})",
        },
        "user_scenario": {
            "persona": rng.choice(PERSONAS),
            "instructions": {
                "domain": "mock",
                "reason_for_call": reason.format(**values) if style == "natural" else _summary(intent, values),
                "known_info": f"{_who(intent, values)}\n{_summary(intent, values)}" if style == "natural" else None,
                "task_instructions": todo.format(**values) + " Once the agent confirms, end the conversation.",
            },
        },
        "ticket": ticket,
        "initial_state": {"initialization_data": {"agent_data": agent_data}},
        "evaluation_criteria": {
            "actions": [{"action_id": f"{intent}_1", **action, "info": f"the customer's {intent} request"}],
            "env_assertions": [{"env_type": "assistant", **assertion}],
            "reward_basis": ["DB", "ENV_ASSERTION"],
        },
    }


def _who(intent: str, values: dict) -> str:
    """Who the customer is: the user id only where the call needs it (``create``), so the task id is the only
    number an update request mentions."""
    if intent == "create":
        return f"You are {values['name']}, user id {values['user_id']}."
    return f"You are {values['name']}."


def _summary(intent: str, values: dict) -> str:
    """The request's one-line summary the customer's first message ends with (same shape for every intent)."""
    if intent == "create":
        return f"New task for {values['user_id']}, title: {values['title']}."
    status = "completed" if intent == "complete" else "pending"
    return f"Task id: {values['task_id']}. New status: {status}."


def generate_tasks(
    *,
    seed: int = 0,
    n_train: int = 24,
    n_test: int = 12,
    intents: Sequence[str] = INTENTS,
    id_prefix: str = "gen_",
    id_digits: int = 3,
    style: str = "natural",
    base_db: Optional[dict] = None,
    data_dir: Optional[str] = None,
) -> GeneratedTasks:
    """``n_train`` + ``n_test`` tasks, intents cycled in order, every value drawn with ``random.Random(seed)``.

    Task and user ids have ``id_digits`` digits (the numbers split in two random halves, one per split: every
    digit occurs in both, no id does). Short ids make the copy a small model has to learn short.

    ``base_db`` (default: the mock domain's DB of ``data_dir``'s data) only decides which ids are taken.
    The same arguments give the same tasks, byte for byte.
    """
    unknown = [i for i in intents if i not in INTENTS]
    if unknown or not intents:
        raise ValueError(f"intents {list(intents)!r}: choose from {INTENTS}")
    if n_train < 0 or n_test < 0:
        raise ValueError("n_train and n_test must be >= 0")
    if base_db is None:
        base_db = load_domain("mock", data_dir).base_db.data
    rng = random.Random(seed)
    if style not in STYLES:
        raise ValueError(f"style={style!r}: choose one of {STYLES}")
    if id_digits not in (2, 3, 4):
        raise ValueError(f"id_digits={id_digits!r}: choose 2, 3 or 4")
    pools = _pools(rng, base_db, id_digits)
    tasks: list[dict] = []
    splits: dict[str, list[str]] = {"train": [], "test": []}
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            task = _one_task(rng, pools[split], intents[i % len(intents)], i, split, seed, id_prefix, style)
            Task.model_validate(task)  # upstream's format, checked as the loader will
            tasks.append(task)
            splits[split].append(task["id"])
    splits = {"base": [t["id"] for t in tasks], **splits}
    settings = {
        "seed": seed,
        "n_train": n_train,
        "n_test": n_test,
        "intents": list(intents),
        "id_prefix": id_prefix,
        "id_digits": id_digits,
        "style": style,
    }
    return GeneratedTasks(tasks=tasks, splits=splits, settings=settings)


def argument_values(task: dict) -> set[str]:
    """The identifying values a task uses (its user, its tasks, names, titles): what the splits must not share."""
    out: set[str] = set()
    data = task["initial_state"]["initialization_data"]["agent_data"]
    for tid, t in data["tasks"].items():
        out |= {tid, t["title"]}
    for uid, u in data["users"].items():
        out |= {uid, u["name"]}
    for a in task["evaluation_criteria"]["actions"]:
        out |= {str(v) for k, v in a["arguments"].items() if k != "status"}
    return out


#: ``verify(data_dir, task_ids) -> {task_id: (oracle reward, do-nothing reward)}``
Verifier = Callable[[str, list[str]], dict[str, tuple[float, float]]]


def episode_verifier(make_env: Callable[[str], Any], make_agent: Callable[[str], Any]) -> Verifier:
    """A :data:`Verifier` that plays each task twice through a Gymnasium env: the ``"oracle"`` agent and the
    do-nothing ``"give_up"`` agent (scripted agents with ``reset(task, info)`` / ``act(obs, info)``).

    The env comes from the caller (``make_env(data_dir)``, e.g. ``gym.make("tau2/mock-v0", data_dir=d,
    task_split=None)`` with the customer to verify against), because the domains sit below the env layer.
    """

    def verify(data_dir: str, task_ids: list[str]) -> dict[str, tuple[float, float]]:
        env = make_env(data_dir)
        out: dict[str, tuple[float, float]] = {}
        try:
            for tid in task_ids:
                rewards = []
                for name in ("oracle", "give_up"):
                    agent = make_agent(name)
                    obs, info = env.reset(seed=0, options={"task_id": tid})
                    agent.reset(info["task"], info)
                    reward, over = 0.0, bool(info.get("episode_over"))
                    for _ in range(100):
                        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
                        if terminated or truncated:
                            over = True
                            break
                    rewards.append(float(reward) if over else float("nan"))
                out[tid] = (rewards[0], rewards[1])
        finally:
            env.close()
        return out

    return verify


_DOMAIN_FILES = ("db.json", "user_db.json", "policy.md", "policy_solo.md")


def write_task_set(
    folder: str | os.PathLike[str],
    generated: GeneratedTasks,
    verify: Optional[Verifier],
    *,
    data_dir: Optional[str] = None,
) -> str:
    """Write ``generated`` as a tau2 data folder at ``folder`` (a checkout-shaped ``data/tau2/domains/mock``
    with the domain's DB and policy copied from ``data_dir``'s data, and ``src`` linked to the same upstream
    sources, so tool descriptions are upstream's); returns the path to pass as ``data_dir``.

    ``verify`` runs episodes on the written folder; any task that the oracle does not solve (reward 1.0) or
    that the do-nothing agent solves (reward != 0.0) raises ``ValueError``. ``verify=None`` writes an
    unverified set and says so in ``generated.json``.
    """
    source = load_domain("mock", data_dir).source
    root = Path(folder)
    dom = root / "data" / "tau2" / "domains" / "mock"
    if dom.exists():
        shutil.rmtree(dom)
    dom.mkdir(parents=True)
    for name in _DOMAIN_FILES:
        src_file = source.domain_dir("mock") / name
        if src_file.is_file():
            shutil.copyfile(src_file, dom / name)
    _link(root / "data" / "tau2" / "user_simulator", source.user_simulator_dir)
    if source.src is not None:
        _link(root / "src" / "tau2", source.src)
    (dom / "tasks.json").write_text(json.dumps(generated.tasks, indent=1) + "\n", encoding="utf-8")
    (dom / "split_tasks.json").write_text(json.dumps(generated.splits, indent=1) + "\n", encoding="utf-8")
    manifest = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "settings": generated.settings,
        "splits": {k: len(v) for k, v in generated.splits.items()},
        "base_data": source.record(),
        "verified": None,
    }
    if verify is not None:
        ids = [t["id"] for t in generated.tasks]
        results = verify(str(root), ids)
        bad = {i: results.get(i) for i in ids if results.get(i) != (1.0, 0.0)}
        if bad:
            raise ValueError(f"generated tasks failed verification (oracle, do-nothing rewards): {bad}")
        manifest["verified"] = {"tasks": len(ids), "oracle_reward": 1.0, "do_nothing_reward": 0.0}
    (dom / "generated.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return str(root)


def read_manifest(data_dir: str | os.PathLike[str]) -> Optional[dict]:
    """The ``generated.json`` record of a generated data folder (None for ordinary data)."""
    for cand in (Path(data_dir) / "data" / "tau2", Path(data_dir) / "tau2", Path(data_dir)):
        path = cand / "domains" / "mock" / "generated.json"
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def _link(link: Path, target: Path) -> None:
    if not target.exists():
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.is_symlink() and Path(os.readlink(link)) == target:
            return
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        else:
            link.unlink()
    link.symlink_to(target, target_is_directory=True)
