"""The airline domain's spec: DB file and tables, toolkit, policy, task set, solo refusal."""

from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.core.tools import ProseSource
from tau2_gym.data import DataSource
from tau2_gym.domains.airline.data_model import FlightDB
from tau2_gym.domains.airline.tools import AirlineTools

SOLO_ERROR = "Airline domain does not support solo mode"


def policy(source: DataSource, solo: bool) -> str:
    """policy.md; solo mode never gets here (the engine refuses it with SOLO_ERROR first)."""
    if solo:
        raise ValueError(SOLO_ERROR)
    return read_text(source.domain_dir("airline") / "policy.md")


ENV_DOC = """tau2's airline domain: bookings, cancellations, changes and compensation under a strict policy.

## Description
The customer wants to book, cancel or change flights, add bags or passengers, or get compensation. The
agent reads and writes a DB of users, flights and reservations and must follow the airline policy (who
may cancel, fare-class rules, certificates, confirming before writing). Shared rules (turn loop, limits,
reward) are :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s.

## Action Space
Text, or calls of the 14 agent tools (``get_user_details``, ``get_reservation_details``,
``search_direct_flight``, ``search_onestop_flight``, ``book_reservation``, ``cancel_reservation``,
``update_reservation_flights`` / ``_baggages`` / ``_passengers``, ``send_certificate``, ``calculate``,
``list_all_airports``, ``get_flight_status``, ``transfer_to_human_agents``), in any form :class:`Tau2Env`
accepts. The customer has no tools.

## Observation Space
OpenAI chat messages (system prompt with the airline policy, greeting, conversation) or a transcript.

## Rewards
0 until the end, then upstream's reward: every task's basis is DB+COMMUNICATE -- the replayed DB must equal
the gold DB (7 tasks have no gold actions: any write fails them) and the listed numbers must appear in
the agent's messages.

## Starting State
A task from ``task_split`` ("base": 50 tasks; "train" 30 / "test" 20); the DB starts from the shared
initial state (no task-specific initialization).

## Episode End
As :class:`Tau2Env`. The standard agent cannot end the conversation (``agent_can_stop=True`` gives it
``done`` as in upstream's gym).

## Arguments
See :class:`~tau2_gym.envs.config.Tau2EnvConfig`. No solo variant: upstream refuses solo mode for airline.

## Version History
* v0: initial release.
"""

DOMAIN = DomainSpec(
    name="airline",
    data_folder="airline",
    agent_toolkit=AirlineTools,
    db=DBFile("db.json", DBSchema(FlightDB, tables=("flights", "users", "reservations"))),
    policy=policy,
    task_sets={"airline": TaskSetSpec("tasks.json", default_split="base")},
    default_task_set="airline",
    solo_supported=False,
    solo_error=SOLO_ERROR,
    agent_prose=ProseSource("domains/airline/tools.py", ("domains/airline/data_model.py",)),
    description="Airline customer service: search, book, change and cancel flights.",
    env_doc=ENV_DOC,
)
