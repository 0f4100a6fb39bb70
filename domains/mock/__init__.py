"""The mock domain: a tiny task tracker used to exercise every engine feature."""

from tau2_gym.domains.mock.environment import DOMAIN

__all__ = ["DOMAIN"]
