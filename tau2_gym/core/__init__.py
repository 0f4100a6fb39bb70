"""Core types and the orchestrator: messages, tasks, DBs, tools, the tool environment, domain loading,
upstream's half-duplex turn loop, prompts, action parsing and the results-file format. Imports only ``data``."""
