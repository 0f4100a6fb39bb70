"""The tau2 reward (replay + assertions), NL-assertion judges, reward modes and run metrics (pass^k)."""
