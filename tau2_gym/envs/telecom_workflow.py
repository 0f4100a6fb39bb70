"""``tau2/telecom-workflow-v0`` and ``tau2/telecom-workflow-solo-v0``: telecom with the workflow policy."""

from __future__ import annotations

from tau2_gym.envs.tau2_env import Tau2Env


class TelecomWorkflowEnv(Tau2Env):
    """tau2's telecom domain with the decision-tree ("workflow") tech-support policy.

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

    domain_name = "telecom-workflow"
