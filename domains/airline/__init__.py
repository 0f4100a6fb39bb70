"""The airline domain: flight search, booking and reservation changes over a 7 MB flight DB."""

from tau2_gym.domains.airline.environment import DOMAIN

__all__ = ["DOMAIN"]
