"""Built-in domains, shipped as ``tau2_gym.domains``. One registration line per domain."""

from tau2_gym.domain import register_domain

register_domain("mock", "tau2_gym.domains.mock:DOMAIN")
