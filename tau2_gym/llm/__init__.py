"""One client for every LLM call (agent, customer, judge): HTTP transport, retries, the reply cache,
usage and cost, and upstream's request-parameter rules."""
