"""The retail domain: an online shop's customers, catalogue and orders."""

from tau2_gym.domains.retail.environment import DOMAIN

__all__ = ["DOMAIN"]
