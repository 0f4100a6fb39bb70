"""Built-in domains, shipped as ``tau2_gym.domains``. One registration line per domain."""

from tau2_gym.core.domain import register_domain

register_domain("mock", "tau2_gym.domains.mock:DOMAIN")
register_domain("airline", "tau2_gym.domains.airline:DOMAIN")
register_domain("retail", "tau2_gym.domains.retail:DOMAIN")
register_domain("telecom", "tau2_gym.domains.telecom:DOMAIN")
register_domain("telecom-workflow", "tau2_gym.domains.telecom:WORKFLOW_DOMAIN")
register_domain("banking_knowledge", "tau2_gym.domains.banking_knowledge:DOMAIN")
