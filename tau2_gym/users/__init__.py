"""User simulators: one small interface (:mod:`tau2_gym.users.base`), several implementations."""

from tau2_gym.users.base import UserSimulator, UserSimulatorError, UserTurnRequest

__all__ = ["UserSimulator", "UserSimulatorError", "UserTurnRequest"]
