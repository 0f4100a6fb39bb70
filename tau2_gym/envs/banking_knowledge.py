"""``tau2/banking_knowledge-v0``: upstream's tau-knowledge banking domain (retrieval + discoverable tools)."""

from __future__ import annotations

from typing import Any, Optional

from tau2_gym.envs.tau2_env import Tau2Env


class BankingKnowledgeEnv(Tau2Env):
    """Rho-Bank customer service: the policy lives in a 698-document knowledge base, many tools are hidden.

    ## Description
    Customers ask about cards and accounts, dispute charges, order or activate cards, want a human. The
    agent verifies identity and looks the customer up with its listed tools, but most actions are
    *discoverable* tools: a document names them, the agent unlocks one (``unlock_discoverable_agent_tool``)
    and calls it through ``call_discoverable_agent_tool`` with JSON arguments, or gives a customer-side tool to
    the customer (``give_discoverable_user_tool``), who then calls it. Which documents the agent can reach
    depends on the retrieval configuration. Shared rules are :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s.

    ## Action Space
    Text, or calls of the listed agent tools: the configuration's search tools (``KB_search`` = BM25 and/or
    ``grep``), ``transfer_to_human_agents``, ``get_current_time``, three user lookups, ``change_user_email``,
    ``get_referrals_by_user``, ``get_credit_card_transactions_by_user``, ``get_credit_card_accounts_by_user``,
    ``log_verification``, ``give_discoverable_user_tool``, ``unlock_discoverable_agent_tool``,
    ``call_discoverable_agent_tool``, ``list_discoverable_agent_tools``. The 44 discoverable agent tools (and
    the customer's 4) are not listed (as upstream, they also answer when called by name).

    ## Observation Space
    OpenAI chat messages (system prompt with the configuration's policy) or a transcript.

    ## Rewards
    0 until the end, then upstream's reward: DB (87 tasks: the DB hash -- including the discoverable-tool
    logs -- after replay equals the gold one), ACTION (9 tasks, e.g. the transfer reason), DB + NL_ASSERTION (1).

    ## Starting State
    A task from ``task_split``: ``base`` (all 97), or tau2-gym's own deterministic ``train`` (78) / ``test``
    (19) -- upstream has no split.

    ## Episode End
    As :class:`Tau2Env`. No solo mode.

    ## Arguments
    :class:`~tau2_gym.envs.config.Tau2EnvConfig`, plus ``retrieval_config`` (default ``"bm25_grep"``;
    offline and exact to upstream: ``bm25``, ``bm25_grep``, ``grep_only``, ``full_kb``, ``golden_retrieval``,
    ``no_knowledge``; the embedding, reranker and shell configurations raise, naming what they need) and
    ``retrieval_kwargs`` (upstream's ``top_k``, ``grep_top_k``, ``case_sensitive``). Both end up in
    ``domain_options``; upstream's own default configuration, ``alltools``, needs an embeddings API.

    ## Version History
    * v0: initial release (tau2-bench 1.0.1 data and grading rules).
    """

    domain_name = "banking_knowledge"

    def __init__(self, domain: Optional[str] = None, *, retrieval_config: Optional[str] = None,
                 retrieval_kwargs: Optional[dict] = None, **kwargs: Any) -> None:
        if retrieval_config is not None or retrieval_kwargs:
            options = dict(kwargs.pop("domain_options", None) or {})
            if retrieval_config is not None:
                options["retrieval_config"] = retrieval_config
            if retrieval_kwargs:
                options["retrieval_kwargs"] = dict(retrieval_kwargs)
            kwargs["domain_options"] = options
        super().__init__(domain, **kwargs)

    @property
    def retrieval_config(self) -> str:
        return self.domain.spec.extra["retrieval_config"]

    def results_info(self) -> dict[str, Any]:
        """Upstream's results ``info`` also records the retrieval configuration and its arguments."""
        return {**super().results_info(), **self.domain.spec.extra["results_info"]}
