"""tau2-gym's verifiers environment by name: ``vf-eval tau2-gym-env`` (extra ``tau2-gym[verifiers]``).

verifiers turns an environment name into an installed top-level package (``tau2-gym-env`` -> ``tau2_gym_env``) and
reads its ``__all__``: exactly one ``Taskset`` subclass (the tasks), and here one ``Harness`` subclass (the taskset's
default program) and one ``Env`` subclass (whose config runs the agent in a local subprocess runtime, so no Prime
account is needed). The classes live in :mod:`tau2_gym.frameworks.verifiers`.
"""

from tau2_gym.frameworks.verifiers import Tau2Env, Tau2Harness, Tau2Taskset

__all__ = ["Tau2Env", "Tau2Harness", "Tau2Taskset"]
