"""Who speaks in an episode: agent policies (``players.agents``) and customer simulators (``players.users``)."""
