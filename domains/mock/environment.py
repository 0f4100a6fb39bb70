"""The mock domain's spec: files, toolkits, policy and task set."""

from tau2_gym.data import DataSource
from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.domains.mock.data_model import MockDB
from tau2_gym.domains.mock.tools import MockTools
from tau2_gym.domains.mock.user_data_model import MockUserDB
from tau2_gym.domains.mock.user_tools import MockUserTools
from tau2_gym.core.tools import ProseSource


def policy(source: DataSource, solo: bool) -> str:
    return read_text(source.domain_dir("mock") / ("policy_solo.md" if solo else "policy.md"))


DOMAIN = DomainSpec(
    name="mock",
    data_folder="mock",
    agent_toolkit=MockTools,
    db=DBFile("db.json", DBSchema(MockDB, tables=("tasks", "users"))),
    user_toolkit=MockUserTools,
    user_db=DBFile("user_db.json", DBSchema(MockUserDB, tables=("notifications",)), required=False),
    policy=policy,
    task_sets={"mock": TaskSetSpec("tasks.json", default_split=None)},
    default_task_set="mock",
    solo_supported=True,
    agent_prose=ProseSource("domains/mock/tools.py", ("domains/mock/data_model.py",)),
    user_prose=ProseSource("domains/mock/user_tools.py", ("domains/mock/user_data_model.py",)),
    description="A tiny task tracker that exercises every engine feature.",
)
