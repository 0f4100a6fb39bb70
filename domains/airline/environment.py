"""The airline domain's spec: DB file and tables, toolkit, policy, task set, solo refusal."""

from tau2_gym.data import DataSource
from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.domains.airline.data_model import FlightDB
from tau2_gym.domains.airline.tools import AirlineTools
from tau2_gym.core.tools import ProseSource

SOLO_ERROR = "Airline domain does not support solo mode"


def policy(source: DataSource, solo: bool) -> str:
    """policy.md; solo mode never gets here (the engine refuses it with SOLO_ERROR first)."""
    if solo:
        raise ValueError(SOLO_ERROR)
    return read_text(source.domain_dir("airline") / "policy.md")


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
)
