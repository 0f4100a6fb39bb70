"""Generated mock-domain tasks: the mock domain's task generator (``draft_tasks``), on the shared machinery.

The mock domain ships 10 hand-written tasks -- too few to tell learning from memorising. This generator drafts as
many as needed, seeded and deterministic, in upstream's task format; :func:`tau2_gym.generation.generate` (or
``tau2-gym generate --domain mock``) verifies each one through the env and writes them as a tau2 data folder, so
they load wherever a task file does: ``gym.make("tau2/mock-v0", data_dir=folder, task_split="train")``, a
mixture component's ``data_dir``, ``tau2-gym rollout --data-dir folder``, ``build_dataset("mock",
data_dir=folder)``.

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

Splits ``train`` and ``held_out`` share no identifying value: user ids, task ids, names and titles are drawn
from disjoint pools, and each draft names its pool (``"split"``), which the machinery keeps (only the status
enum and tool names are common -- there are two statuses). Drafts alternate between the pools; the train stream
is drawn from ``random.Random(seed)`` alone, so the train tasks of a seed do not depend on the held-out count.
"""

from __future__ import annotations

import itertools
import random
from typing import Iterator, Optional, Sequence

GENERATOR = "tau2_gym.domains.mock.generate"
GENERATOR_VERSION = 2  # v2: on tau2_gym.generation; the second pool is "held_out", its own stream unless n_train
INTENTS = ("complete", "reopen", "create")
SPLITS = ("train", "held_out")
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


RULES = {
    "complete": ('mock policy 2: Task status can only be "pending" or "completed"',),
    "reopen": ('mock policy 2: Task status can only be "pending" or "completed"',),
    "create": ("mock policy 1: Each task must have a title", "mock policy 3: Only existing users can create tasks"),
}


def _pools(
    rng: random.Random, base_db: dict, id_digits: int, exclude: frozenset[str] = frozenset()
) -> dict[str, dict[str, list]]:
    """Disjoint value pools per split: ``id_digits``-digit ids (none already in the DB, none excluded), names,
    titles (none excluded)."""
    used_tasks, used_users = set(base_db["tasks"]) | exclude, set(base_db["users"]) | exclude
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
        out["train"][key], out["held_out"][key] = values[:half], values[half:]
    for pool in out.values():
        pool["name"] = [v for v in pool["name"] if v not in exclude]
        pool["title"] = [v for v in pool["title"] if v not in exclude]
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


def draft_tasks(
    db: dict,
    *,
    n: int,  # noqa: ARG001 - the drafter interface (draft_tasks)
    seed: int,
    exclude: frozenset[str] = frozenset(),
    intents: Optional[Sequence[str]] = None,
    id_prefix: str = "gen_",
    id_digits: int = 3,
    style: str = "natural",
    n_train: Optional[int] = None,
) -> Iterator[dict]:
    """Drafts for the machinery, without end (the machinery stops when it has what it needs of each pool); intents
    are cycled in order within each pool.

    Order: alternating ``train`` and ``held_out`` drafts, the train ones drawn from ``random.Random(seed)`` alone
    (so the train tasks of a seed do not depend on the held-out count); with ``n_train``, the first ``n_train``
    drafts are train, then held-out ones, all from one stream (generator v1's order: the tasks of
    ``docs/learning.md``'s runs).

    ``db`` (the mock DB) only decides which ids are taken; nothing in ``exclude`` is used. Task and user ids have
    ``id_digits`` digits (the numbers split in two random halves, one per pool: every digit occurs in both, no id
    does); short ids make the copy a small model has to learn short. ``style``: ``natural`` (a reason for the call
    and the facts) or ``terse`` (the one-line summary only).
    """
    intents = tuple(intents or INTENTS)
    unknown = [i for i in intents if i not in INTENTS]
    if unknown:
        raise ValueError(f"intents {list(intents)!r}: choose from {INTENTS}")
    if style not in STYLES:
        raise ValueError(f"style={style!r}: choose one of {STYLES}")
    if id_digits not in (2, 3, 4):
        raise ValueError(f"id_digits={id_digits!r}: choose 2, 3 or 4")
    rng = random.Random(seed)
    pools = _pools(rng, db, id_digits, frozenset(exclude))
    if n_train is None:
        streams = {"train": rng, "held_out": random.Random(f"{seed}:held_out")}
        order: Iterator[str] = itertools.cycle(SPLITS)
    else:
        streams = {"train": rng, "held_out": rng}
        order = (SPLITS[0] if i < n_train else SPLITS[1] for i in itertools.count())
    return _drafts(order, streams, pools, intents, seed, id_prefix, style)


def _drafts(
    order: Iterator[str],
    streams: dict[str, random.Random],
    pools: dict,
    intents: tuple[str, ...],
    seed: int,
    id_prefix: str,
    style: str,
) -> Iterator[dict]:
    counts = dict.fromkeys(SPLITS, 0)
    for split in order:
        i = counts[split]
        counts[split] += 1
        intent = intents[i % len(intents)]
        task = _one_task(streams[split], pools[split], intent, i, split, seed, id_prefix, style)
        data = task["initial_state"]["initialization_data"]["agent_data"]
        yield {
            "task": task,
            "intent": intent,
            "variant": "allowed",
            "forbidden_actions": [],
            "needs_write": True,
            "rules": list(RULES[intent]),
            "entities": {"users": sorted(data["users"]), "tasks": sorted(data["tasks"])},
            "split": split,
        }


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
