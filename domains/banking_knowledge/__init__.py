"""The banking_knowledge domain (upstream's tau-knowledge): a bank's customer service over a knowledge base.

The agent must find policy in 698 documents (through the retrieval configuration's tools or its prompt), and
many of its tools are hidden: documents name them, the agent unlocks and calls them (or gives customer-side
ones to the customer). See :mod:`.environment` for what is loaded and :mod:`.retrieval` for the configurations.
"""

from tau2_gym.domains.banking_knowledge.environment import DOMAIN

__all__ = ["DOMAIN"]
