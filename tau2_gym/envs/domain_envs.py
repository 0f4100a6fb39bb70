"""One Gymnasium env class per registered domain (``AirlineEnv``, ``TelecomWorkflowEnv``, ...), made from the
domain's spec: the class docstring is the domain's env manual (``help(env.unwrapped)``), and the keyword
arguments the domain declares are folded into ``domain_options``. No domain is named here: a class exists for
every registered domain, looked up by name (``tau2_gym.envs.domain_envs:AirlineEnv``, what Gymnasium's entry points
and pickle ask for)."""

from __future__ import annotations

from functools import cache

from tau2_gym.core.domain import domain_names, get_domain_spec
from tau2_gym.envs import env_class_name
from tau2_gym.envs.tau2_env import Tau2Env

__all__ = ["domain_env_class"]


@cache
def domain_env_class(domain: str) -> type[Tau2Env]:
    """``domain``'s env class: :class:`~tau2_gym.envs.tau2_env.Tau2Env` fixed to that domain, documented by it."""
    spec = get_domain_spec(domain)
    name = env_class_name(domain)
    return type(
        name,
        (Tau2Env,),
        {
            "__doc__": spec.env_doc or Tau2Env.__doc__,
            "__module__": __name__,
            "__qualname__": name,
            "domain_name": domain,
            "domain_option_names": tuple(spec.env_options),
        },
    )


def __getattr__(name: str) -> type[Tau2Env]:
    for domain in domain_names():
        if env_class_name(domain) == name:
            return domain_env_class(domain)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (no registered domain has that env class)")
