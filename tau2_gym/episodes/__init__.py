"""Episodes without Gymnasium: the one episode driver, the task selection, branching, the exploit audit and its first
row, the do-nothing baseline.

The envs, the runner, the trainers, the generators and the framework adapters all play episodes through this layer.
"""

from tau2_gym.episodes.driver import Episode, EpisodeOutcome, EpisodeSetup

__all__ = ["Episode", "EpisodeOutcome", "EpisodeSetup"]
