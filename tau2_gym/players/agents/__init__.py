"""Agent policies: the scripted agents (oracle, flawed ones, the exploit panel) and LLM agents behind OpenAI-compatible
servers."""
