"""``tau2/telecom-v0`` and ``tau2/telecom-solo-v0``: tau2's telecom technical-support domain."""

from __future__ import annotations

from tau2_gym.envs.tau2_env import Tau2Env


class TelecomEnv(Tau2Env):
    """tau2's telecom domain: technical support where the *customer* operates the phone.

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

    domain_name = "telecom"
