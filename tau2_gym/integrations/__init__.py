"""Adapters to training libraries (each imports its library lazily): :mod:`tau2_gym.integrations.trl`."""
