"""The retail domain's spec: DB file and layout, policy, task set, toolkit and prose sources."""

from tau2_gym.data import DataSource
from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.domains.retail.data_model import RetailDB
from tau2_gym.domains.retail.tools import RetailTools
from tau2_gym.core.tools import ProseSource

SOLO_ERROR = "Retail domain does not support solo mode"


def policy(source: DataSource, solo: bool) -> str:
    """The agent policy (there is no solo variant; the engine refuses solo before asking)."""
    if solo:
        raise ValueError(SOLO_ERROR)
    return read_text(source.domain_dir("retail") / "policy.md")


DOMAIN = DomainSpec(
    name="retail",
    data_folder="retail",
    agent_toolkit=RetailTools,
    # The three id-keyed collections are copied per record on first write; the rest is never touched.
    db=DBFile("db.json", DBSchema(RetailDB, tables=("products", "users", "orders"))),
    policy=policy,
    task_sets={"retail": TaskSetSpec("tasks.json", default_split="base")},
    default_task_set="retail",
    solo_supported=False,
    solo_error=SOLO_ERROR,
    agent_prose=ProseSource("domains/retail/tools.py", ("domains/retail/data_model.py",)),
    description="Online shop: look up users, orders and products; cancel, modify, return or exchange orders.",
)
