"""The telecom domain specs (``telecom`` and ``telecom-workflow``): files, policies, task sets and sync.

Both variants share tools, DBs and tasks; only the tech-support document in the policy differs. The agent
world (lines, bills) and the user's phone are coupled by :func:`sync_tools`, which the engine calls after
every successful tool call, env function / assertion and state rebuild.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.core.environment import Environment
from tau2_gym.core.tools import ProseSource
from tau2_gym.data import DataSource
from tau2_gym.domains.telecom.data_model import LineStatus, TelecomDB
from tau2_gym.domains.telecom.tools import TelecomTools
from tau2_gym.domains.telecom.user_data_model import TelecomUserDB
from tau2_gym.domains.telecom.user_tools import TelecomUserTools, new_payment_request

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DATA_FOLDER = "telecom"
_ACTIVE = LineStatus.ACTIVE.value


def read_toml(path: Path) -> Any:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


# ------------------------------------------------------------------------------------------ sync


def sync_tools(env: Environment) -> None:
    """Mirror the user's line into the phone's surroundings and settle payments (upstream's order).

    No-op until ``set_user_info`` gives the phone a number. Never runs a network search: a resumed line
    shows service only after the user does something that searches (e.g. a reboot).
    """
    user_tools = cast(TelecomUserTools, env.user_tools)  # the telecom toolkits (this hook is telecom's)
    tools = cast(TelecomTools, env.tools)
    s = user_tools.db.surroundings
    phone = s["phone_number"]
    if phone is None:
        return
    line = tools._get_line_by_phone(phone)  # raises "Line with phone number ... not found"
    s["line_active"] = line["status"] == _ACTIVE
    s["roaming_allowed"] = True if line["roaming_enabled"] else False
    plan = tools._get_plan_by_id(line["plan_id"])
    s["mobile_data_usage_exceeded"] = (
        True if line["data_used_gb"] >= plan["data_limit_gb"] + line["data_refueling_gb"] else False
    )

    request = s["payment_request"]
    if request is not None and request["paid"]:
        tools._set_bill_to_paid(request["bill_id"])
        s["payment_request"] = None
    if s["payment_request"] is None:
        customer = tools._customer_by_phone(phone)
        bills = tools._get_bills_awaiting_payment(customer)
        if bills:
            bill = bills[0]
            s["payment_request"] = new_payment_request(bill["bill_id"], bill["total_due"])


# ---------------------------------------------------------------------------------------- policy


def _policy(source: DataSource, main_file: str, tech_file: str) -> str:
    folder = source.domain_dir(DATA_FOLDER)
    return (
        "<main_policy>\n"
        + read_text(folder / main_file)
        + "\n</main_policy>\n"
        + "<tech_support_policy>\n"
        + read_text(folder / tech_file)
        + "\n</tech_support_policy>"
    )


def manual_policy(source: DataSource, solo: bool) -> str:
    """Main policy + the tech-support manual (the solo variant reuses the same manual)."""
    if solo:
        return _policy(source, "main_policy_solo.md", "tech_support_manual.md")
    return _policy(source, "main_policy.md", "tech_support_manual.md")


def workflow_policy(source: DataSource, solo: bool) -> str:
    """Main policy + the tech-support decision tree."""
    if solo:
        return _policy(source, "main_policy_solo.md", "tech_support_workflow_solo.md")
    return _policy(source, "main_policy.md", "tech_support_workflow.md")


# ----------------------------------------------------------------------------------------- specs

# Upstream registers telecom_full / telecom_small as the "full" / "small" splits of tasks.json. The full
# set shares tasks.json (parsed once per process); the small set reads tasks_small.json, which holds the
# same 20 tasks as the "small" split (checked by the tests) and spares the 14 MB parse.
ENV_DOC = """tau2's telecom domain: technical support where the *customer* operates the phone.

## Description
The customer's phone has no service, slow or no mobile data, or cannot send MMS. The agent owns the
account tools (lines, bills, roaming, data refuel); the customer owns 30 device tools (toggle airplane
mode, reboot, APN settings, ...) that the user simulator calls inside the env step -- the agent only sees
the customer's texts, so it must instruct them. Shared rules are :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s.

## Action Space
Text, or calls of the 13 agent tools (``get_customer_by_phone`` / ``_by_id`` / ``_by_name``,
``get_details_by_id``, ``get_bills_for_customer``, ``send_payment_request``, ``get_data_usage``,
``suspend_line``, ``resume_line``, ``enable_roaming``, ``disable_roaming``, ``refuel_data``,
``transfer_to_human_agents``). Solo (``tau2/telecom-solo-v0``): plus the 30 device tools and ``done``;
text is not allowed.

## Observation Space
OpenAI chat messages (system prompt with the main policy and the tech-support manual; solo: the solo
policy and the ticket) or a transcript.

## Rewards
0 until the end, then upstream's reward: ENV_ASSERTION (the device/account end state), plus ACTION for the
expected-failure tasks (a ``transfer_to_human_agents`` call is required).

## Starting State
A task from ``task_split`` ("base" 114, "train" 74, "test" 40, "small" 20, "full" 2285); initialization
actions break the device/account in the task's way.

## Episode End
As :class:`Tau2Env`; the solo agent ends with ``done`` (text ends the episode as ``agent_error``).

## Arguments
See :class:`~tau2_gym.envs.config.Tau2EnvConfig`.

## Version History
* v0: initial release.
"""

WORKFLOW_ENV_DOC = """tau2's telecom domain with the decision-tree ("workflow") tech-support policy.

## Description
Identical to :class:`~tau2_gym.envs.telecom.TelecomEnv` -- same DBs, tools, tasks and reward -- except that
the system prompt carries the step-by-step troubleshooting workflow instead of the tech-support manual.

## Action Space
As ``TelecomEnv``: text or calls of the 13 agent tools (solo: plus the 30 device tools and ``done``).

## Observation Space
OpenAI chat messages (system prompt with the main policy and the workflow) or a transcript.

## Rewards
0 until the end, then upstream's reward (ENV_ASSERTION, plus ACTION on expected-failure tasks).

## Starting State
A task from ``task_split`` ("base" 114, "train" 74, "test" 40, "small" 20, "full" 2285).

## Episode End
As :class:`~tau2_gym.envs.tau2_env.Tau2Env`.

## Arguments
See :class:`~tau2_gym.envs.config.Tau2EnvConfig`.

## Version History
* v0: initial release.
"""

_SHARED_TASK_SETS = {
    "telecom_full": TaskSetSpec("tasks.json", default_split="full"),
    "telecom_small": TaskSetSpec("tasks_small.json", default_split=None),
}

_COMMON: dict[str, Any] = dict(
    data_folder=DATA_FOLDER,
    agent_toolkit=TelecomTools,
    db=DBFile("db.toml", DBSchema(TelecomDB), reader=read_toml),
    user_toolkit=TelecomUserTools,
    user_db=DBFile("user_db.toml", DBSchema(TelecomUserDB), reader=read_toml),
    sync=sync_tools,
    solo_supported=True,
    agent_prose=ProseSource("domains/telecom/tools.py", ("domains/telecom/data_model.py",)),
    user_prose=ProseSource("domains/telecom/user_tools.py", ("domains/telecom/user_data_model.py",)),
)

DOMAIN = DomainSpec(
    name="telecom",
    policy=manual_policy,
    task_sets={"telecom": TaskSetSpec("tasks.json", default_split="base"), **_SHARED_TASK_SETS},
    default_task_set="telecom",
    description="Mobile-carrier tech support with a simulated phone the user operates (manual policy).",
    env_doc=ENV_DOC,
    **_COMMON,
)

WORKFLOW_DOMAIN = DomainSpec(
    name="telecom-workflow",
    policy=workflow_policy,
    task_sets={"telecom-workflow": TaskSetSpec("tasks.json", default_split="base"), **_SHARED_TASK_SETS},
    default_task_set="telecom-workflow",
    description="Telecom with the tech-support decision-tree (workflow) policy.",
    env_doc=WORKFLOW_ENV_DOC,
    **_COMMON,
)
