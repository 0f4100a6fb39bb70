"""The telecom domain: carrier tech support with a simulated phone that the user operates."""

from tau2_gym.domains.telecom.environment import DOMAIN, WORKFLOW_DOMAIN

__all__ = ["DOMAIN", "WORKFLOW_DOMAIN"]
