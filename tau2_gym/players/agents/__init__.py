"""Agent policies: the scripted agents (oracle and flawed ones) and LLM agents behind OpenAI-compatible servers."""
