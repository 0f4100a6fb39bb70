"""Retail domain: initial hash, task sets, gold-state conformance vectors, and every tool's outputs/errors.

Expected values are the reference spec's (shared/reference/tau2-domains.md §1.4, §3, §6): verified hashes,
verbatim error texts, the modify-items example. ``PERTURBATIONS`` (call sequences hitting every error path)
is also replayed against upstream by ``test_retail_reference.py``.
"""

import json

import pytest
from datautil import LEGACY

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.scoring.rebuild import gold_environment

INITIAL_HASH = "b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c"

# Reference §6: first 12 hex of the agent DB hash after each task's gold actions (upstream tasks.json);
# unlisted tasks keep the initial hash.
VECTORS_UPSTREAM = dict(
    x.split(":")
    for x in """
0:a109be174767 1:eab1dde2ca84 2:9b66e83dbc00 3:efb8b638945f 4:f333ec4241d5 5:9f1e45fc84a6
6:2053905d31cc 7:4759f292bd76 8:b9f3a1f4d12b 9:c0bf2b8ebfe4 11:05695f333e6a 13:21462ba8f4c9
14:6351938a2a69 15:fe6b690f4810 16:76488acd2c5a 17:582f5d9c8242 18:ae5647e96742 19:ef45b3de7b49
20:d43fdfd87998 21:079ef03ab35d 22:dc23fc9e7832 23:077542b3b671 26:232e66188bb8 27:08a9f35dd8ee
28:977b187e0993 29:d2d7dc99ebac 30:e714c87d9835 31:62c4403fbd95 32:aef31f614f8b 33:5fe996d49aef
34:bac92290376c 35:4f518424174e 36:c263b7ca5913 37:c263b7ca5913 38:e5c0722a1e6b 39:6cecf269871e
40:09f9be39b93d 41:c3bd28c10157 42:c3bd28c10157 43:a533bdac3eb6 44:7261dbb2b5fe 45:4c50624bd45b
46:9443e4a3f302 47:3e78643a7715 48:f97ba40e5b91 49:57802d7b797e 51:5198da6a906f 52:0a993bd7f702
53:75f2e3a64f60 54:ce6253776349 55:b8dc464a3c0c 56:aa54036bba8d 58:381a3546df6c 59:8cf194e4eca8
60:c64074b669a7 61:c4714fc4f113 63:26acf77e3aeb 64:2e9d92ee0d0c 66:a60e11827d3f 69:847ac0da2e85
70:d8d9d176cae3 71:c14be7c97f71 72:c14be7c97f71 73:3fda1284264c 74:49e0a1364ae7 75:4715bef725f0
76:790091ad9136 77:6b264a9871c7 78:4ceb2d12183f 79:08eab1c97f1c 80:2eb374bb67d5 81:3e6cf2f5d544
82:7ecde7bd7664 83:6d6c5796be53 84:6d6c5796be53 85:e60e8a961176 86:4d145d54e2a0 87:facad1bdef80
88:3ac42fbf475e 89:e6d35273c62b 90:c01984ba9743 91:513010e85e47 92:034b3692aa70 93:0c80a65bf8cd
94:b43bfc63042a 95:a0d1b0eab2e1 96:a99755655767 97:a99755655767 98:a38fddcc78eb 99:0d4c506b6ae1
100:1af6e2cc79b3 101:ecb59101f10d 102:0089a38140d5 103:da721a24a789 104:86fb873c6582 106:2d308b3a2193
107:8111ebca3910 108:7db01a0501bb 109:b7a36959054a 110:f45606e4dad4 111:1301e5413c38 112:6eb2be1662a3
113:4337c9b25955
""".split()
)
VECTORS_26_3 = {**VECTORS_UPSTREAM, "18": "31df0f86dbf9", "91": "138cc87a1384", "107": "5eb70a54dd4d"}
UNCHANGED = {"10", "12", "24", "25", "50", "57", "62", "65", "67", "68", "105"}

TOOL_ORDER = [
    "calculate",
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "find_user_id_by_name_zip",
    "find_user_id_by_email",
    "get_order_details",
    "get_product_details",
    "get_item_details",
    "get_user_details",
    "list_all_product_types",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
    "transfer_to_human_agents",
]
WRITE_TOOLS = {
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "modify_pending_order_address",
    "modify_pending_order_items",
    "modify_pending_order_payment",
    "modify_user_address",
    "return_delivered_order_items",
}
ORDER_FIELDS = [
    "order_id",
    "user_id",
    "address",
    "items",
    "status",
    "fulfillments",
    "payment_history",
    "cancel_reason",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
    "return_items",
    "return_payment_method_id",
]

# Records of the shipped db.json used below.
PENDING_PAYPAL = "#W2443586"  # aarav_nguyen_7344; items 9690244451 236.51, 1437889264 258.09, 3369928769 97.35
PENDING_GIFT = "#W6779827"  # ethan_lopez_6291, paid 4079.45 by gift_card_7219486 (balance 49.0)
DELIVERED_GIFT = "#W4817420"  # ava_moore_2033, gift_card_8168843 (69.0)
DELIVERED_CARD = "#W4250821"  # sophia_jackson_6355, credit_card_8041020; gift_card_6052478 (10.0), paypal_7425862
PROCESSED = "#W2611340"
CANCELLED = "#W3220387"
ADDRESS = {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"}


def C(name, **args):
    return (name, args)


# Call sequences, each on a fresh environment: every tool's success path and each error path, plus wrong
# types, missing/extra arguments and state transitions. Replayed against upstream by the reference test.
PERTURBATIONS = {
    "calculate": [
        C("calculate", expression="2+2"),
        C("calculate", expression="10/3"),
        C("calculate", expression="2.675*1"),
        C("calculate", expression="2**10 // 3"),
        C("calculate", expression="1/0"),
        C("calculate", expression="(1"),
        C("calculate", expression=""),
        C("calculate", expression="abs(1)"),
        C("calculate", expression=5),
        C("calculate", expression=["1", "+", "1"]),
        C("calculate"),
        C("calculate", expression="1", x=1),
    ],
    "cancel": [
        C("cancel_pending_order", order_id=PROCESSED, reason="no longer needed"),
        C("cancel_pending_order", order_id=CANCELLED, reason="no longer needed"),
        C("cancel_pending_order", order_id="W6779827", reason="no longer needed"),
        C("cancel_pending_order", order_id=["#W6779827"], reason="no longer needed"),
        C("cancel_pending_order", order_id=6779827, reason="no longer needed"),
        C("cancel_pending_order", order_id=PENDING_GIFT, reason="changed my mind"),
        C("cancel_pending_order", order_id=PENDING_GIFT, reason=["no longer needed"]),
        C("cancel_pending_order", order_id=PENDING_GIFT),
        C("cancel_pending_order", order_id=PENDING_GIFT, reason="ordered by mistake"),
        C("cancel_pending_order", order_id=PENDING_GIFT, reason="ordered by mistake"),
        C("get_user_details", user_id="ethan_lopez_6291"),
        C("cancel_pending_order", order_id=PENDING_PAYPAL, reason="no longer needed"),
    ],
    "exchange": [
        C(
            "exchange_delivered_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["7706410293"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926", "5222576926"],
            new_item_ids=["7706410293", "1421289881"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["7706410293", "1421289881"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["9690244451"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["4602305039"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["7706410293"],
            payment_method_id="gift_card_6052478",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["7706410293"],
            payment_method_id="gift_card_0000000",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids="abc",
            new_item_ids=["7706410293"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=None,
            new_item_ids=[],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=[["7706410293"]],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["7706410293"],
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926", "9970989750"],
            new_item_ids=["3616838507", "4602305039"],
            payment_method_id="gift_card_6052478",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["7706410293"],
            payment_method_id="credit_card_8041020",
        ),
    ],
    "exchange_empty_and_self": [
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_GIFT,
            item_ids=[],
            new_item_ids=[],
            payment_method_id="gift_card_8168843",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids="",
            new_item_ids={},
            payment_method_id="paypal_7425862",
        ),
        C("get_order_details", order_id=DELIVERED_CARD),
    ],
    "exchange_same_item": [
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_GIFT,
            item_ids=["6700049080", "3812493782"],
            new_item_ids=["6700049080", "3812493782"],
            payment_method_id="gift_card_8168843",
        )
    ],
    "find": [
        C("find_user_id_by_name_zip", first_name="Ethan", last_name="Lopez", zip="43275"),
        C("find_user_id_by_name_zip", first_name="ETHAN", last_name="lopez", zip="43275"),
        C("find_user_id_by_name_zip", first_name="Ethan", last_name="Lopez", zip="00000"),
        C("find_user_id_by_name_zip", first_name=1, last_name="Lopez", zip="43275"),
        C("find_user_id_by_name_zip", first_name="Nobody", last_name=2, zip="43275"),
        C("find_user_id_by_name_zip", first_name="Ethan", last_name=2, zip="43275"),
        C("find_user_id_by_name_zip", first_name="Ethan", last_name="Lopez", zip=43275),
        C("find_user_id_by_name_zip", first_name="Ethan", last_name="Lopez"),
        C("find_user_id_by_email", email="ethan.lopez8943@example.com"),
        C("find_user_id_by_email", email="Ethan.Lopez8943@EXAMPLE.com"),
        C("find_user_id_by_email", email="nobody@example.com"),
        C("find_user_id_by_email", email=None),
        C("find_user_id_by_email", email="x", zip="1"),
    ],
    "reads": [
        C("get_order_details", order_id=PENDING_PAYPAL),
        C("get_order_details", order_id="W2443586"),
        C("get_order_details", order_id=["#W2443586"]),
        C("get_order_details"),
        C("get_order_details", order_id=CANCELLED),
        C("get_product_details", product_id="1656367028"),
        C("get_product_details", product_id="7706410293"),
        C("get_product_details", product_id=1656367028),
        C("get_item_details", item_id="7706410293"),
        C("get_item_details", item_id="1656367028"),
        C("get_item_details", item_id=["7706410293"]),
        C("get_item_details", item_id=None),
        C("get_user_details", user_id="aarav_nguyen_7344"),
        C("get_user_details", user_id="nobody"),
        C("list_all_product_types"),
        C("list_all_product_types", x=1),
        C("transfer_to_human_agents", summary="needs help"),
        C("transfer_to_human_agents"),
        C("no_such_tool", x=1),
    ],
    "modify_address": [
        C("modify_pending_order_address", order_id=DELIVERED_GIFT, **ADDRESS),
        C("modify_pending_order_address", order_id="nope", **ADDRESS),
        C("modify_pending_order_address", order_id=PENDING_PAYPAL, **{**ADDRESS, "zip": 78701}),
        C("modify_pending_order_address", order_id=PENDING_PAYPAL, **{**ADDRESS, "address2": None}),
        C("modify_pending_order_address", order_id=PENDING_PAYPAL, address1="x"),
        C("modify_pending_order_address", order_id=PENDING_PAYPAL, **ADDRESS),
        C("modify_user_address", user_id="aarav_nguyen_7344", **ADDRESS),
        C("modify_user_address", user_id="nobody", **ADDRESS),
        C("modify_user_address", user_id="aarav_nguyen_7344", **{**ADDRESS, "city": 5}),
        C("modify_user_address", user_id="aarav_nguyen_7344", **ADDRESS, extra="x"),
    ],
    "modify_items": [
        C(
            "modify_pending_order_items",
            order_id=DELIVERED_GIFT,
            item_ids=["6700049080"],
            new_item_ids=["7706410293"],
            payment_method_id="gift_card_8168843",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451", "9690244451"],
            new_item_ids=["7706410293", "1421289881"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["7706410293", "1421289881"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["9690244451"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["1340995114"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["4602305039"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["7706410293"],
            payment_method_id="gift_card_2742113",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            new_item_ids=["7706410293"],
            payment_method_id="credit_card_0000000",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451", "1437889264"],
            new_item_ids=["7706410293", "1615379700"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "modify_pending_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["7706410293"],
            new_item_ids=["1421289881"],
            payment_method_id="paypal_7859314",
        ),
        C("modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="gift_card_2742113"),
        C("cancel_pending_order", order_id=PENDING_PAYPAL, reason="no longer needed"),
        C("modify_pending_order_address", order_id=PENDING_PAYPAL, **ADDRESS),
    ],
    "modify_items_gift_card_refund": [
        C(
            "modify_pending_order_items",
            order_id=PENDING_GIFT,
            item_ids=["7896397433"],
            new_item_ids=["6171242004"],
            payment_method_id="gift_card_7219486",
        ),
        C("get_user_details", user_id="ethan_lopez_6291"),
    ],
    "modify_items_empty": [
        C(
            "modify_pending_order_items",
            order_id=PENDING_GIFT,
            item_ids=[],
            new_item_ids=[],
            payment_method_id="gift_card_7219486",
        )
    ],
    "modify_payment": [
        C("modify_pending_order_payment", order_id=DELIVERED_GIFT, payment_method_id="gift_card_8168843"),
        C("modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="paypal_7859314"),
        C("modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="gift_card_2742113"),
        C("modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="gift_card_7219486"),
        C("modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id=["paypal_7859314"]),
        C("modify_pending_order_payment", order_id=PENDING_GIFT, payment_method_id="credit_card_9789590"),
        C("get_user_details", user_id="ethan_lopez_6291"),
        C("modify_pending_order_payment", order_id=PENDING_GIFT, payment_method_id="gift_card_7219486"),
        C("cancel_pending_order", order_id=PENDING_GIFT, reason="no longer needed"),
        C("get_user_details", user_id="ethan_lopez_6291"),
    ],
    "return": [
        C(
            "return_delivered_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=["9690244451"],
            payment_method_id="paypal_7859314",
        ),
        C(
            "return_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            payment_method_id="paypal_7425862",
        ),
        C(
            "return_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            payment_method_id="paypal_0000000",
        ),
        C(
            "return_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926", "5222576926"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "return_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["1"],
            payment_method_id="credit_card_8041020",
        ),
        C("return_delivered_order_items", order_id=DELIVERED_CARD, item_ids=5, payment_method_id="credit_card_8041020"),
        C(
            "return_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["9970989750", "5222576926"],
            payment_method_id="gift_card_6052478",
        ),
        C(
            "return_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            payment_method_id="credit_card_8041020",
        ),
        C(
            "exchange_delivered_order_items",
            order_id=DELIVERED_CARD,
            item_ids=["5222576926"],
            new_item_ids=["7706410293"],
            payment_method_id="credit_card_8041020",
        ),
    ],
    "repeated_item_ids": [  # orders holding the same item twice: lists may repeat it up to that count
        C(
            "modify_pending_order_items",
            order_id="#W9093821",
            item_ids=["3557711149", "3557711149", "3557711149"],
            new_item_ids=["3928046918", "7251508981", "3928046918"],
            payment_method_id="credit_card_7422485",
        ),
        C(
            "modify_pending_order_items",
            order_id="#W9093821",
            item_ids=["3557711149", "3557711149"],
            new_item_ids=["3928046918", "7251508981"],
            payment_method_id="credit_card_7422485",
        ),
        C(
            "exchange_delivered_order_items",
            order_id="#W1840144",
            item_ids=["8590708195", "8590708195"],
            new_item_ids=["9385662952", "5992316252"],
            payment_method_id="credit_card_3240550",
        ),
        C(
            "return_delivered_order_items",
            order_id="#W4316152",
            item_ids=["7292993796", "7292993796"],
            payment_method_id="gift_card_7245904",
        ),
    ],
    "return_empty": [
        C("return_delivered_order_items", order_id=DELIVERED_GIFT, item_ids="", payment_method_id="gift_card_8168843")
    ],
}


@pytest.fixture(scope="module")
def retail():
    return load_domain("retail")


def run(env, name, **args):
    return env.get_response(ToolCall(name=name, arguments=args, id="c"))


def content(env, name, **args):
    msg = run(env, name, **args)
    assert not msg.error, msg.content
    return msg.content


def error(env, name, **args):
    msg = run(env, name, **args)
    assert msg.error, msg.content
    return msg.content


# --------------------------------------------------------------------------------------- domain


def test_initial_hash_is_upstreams(retail):
    env = retail.make_environment()
    assert env.get_db_hash() == INITIAL_HASH
    assert retail.base_db.hash_from_scratch() == INITIAL_HASH


def _check_task_set(dom):
    assert {k: len(v) for k, v in dom.splits().items()} == {"train": 74, "test": 40, "base": 114}
    assert len(dom.tasks()) == 114  # default split: base
    assert len(dom.tasks(split="train")) == 74 and len(dom.tasks(split="test")) == 40
    tasks = dom.tasks(split=None)
    assert [t.id for t in tasks] == [str(i) for i in range(114)]
    assert all(t.initial_state is None for t in tasks)


def test_26_3_task_set_and_splits():
    legacy = load_domain("retail", data_version=LEGACY)
    _check_task_set(legacy)
    assert sum(len(t.evaluation_criteria.actions) for t in legacy.tasks(split=None)) == 553
    # the 26.3 sources define 15 tools: get_item_details is neither shown nor callable there
    assert [s["function"]["name"] for s in legacy.agent_tool_schemas()] == [
        n for n in TOOL_ORDER if n != "get_item_details"
    ]
    msg = legacy.make_environment().get_response(ToolCall("get_item_details", {"item_id": "1"}, id="c"))
    assert msg.error and msg.content == "Error: Tool 'get_item_details' not found."


def test_upstream_task_set_and_splits(upstream_data_dir):
    dom = load_domain("retail", upstream_data_dir)
    _check_task_set(dom)
    assert sum(len(t.evaluation_criteria.actions) for t in dom.tasks(split=None)) == 550


def test_solo_mode_is_refused_with_upstreams_message(retail):
    with pytest.raises(ValueError, match=r"^Retail domain does not support solo mode$"):
        retail.make_environment(solo=True)
    with pytest.raises(ValueError, match=r"^Retail domain does not support solo mode$"):
        retail.policy(solo=True)


def test_policy_is_the_domain_policy_file(retail):
    text = (retail.folder / "policy.md").read_text(encoding="utf-8")
    assert retail.make_environment().get_policy() == text


def test_tools_in_upstream_head_order_with_types(retail):
    kit = retail.spec.agent_toolkit
    assert type(retail.make_environment().tools).__name__ == "RetailTools"
    assert list(kit.tool_names) == TOOL_ORDER
    for name in TOOL_ORDER:
        expected = (
            "write"
            if name in WRITE_TOOLS
            else ("generic" if name in ("calculate", "transfer_to_human_agents") else "read")
        )
        assert kit.tool_type(name).value == expected
        assert kit.mutates_state(name) == (name in WRITE_TOOLS)
    assert [s["function"]["name"] for s in retail.agent_tool_schemas()] == TOOL_ORDER


def _gold_prefixes(dom):
    return {t.id: gold_environment(dom, t).get_db_hash()[:12] for t in dom.tasks(split=None)}


def _check_vectors(got, vectors):
    expected = {tid: vectors.get(tid, INITIAL_HASH[:12]) for tid in got}
    assert {tid for tid in got if tid not in vectors} == UNCHANGED
    assert got == expected


def test_conformance_vectors_26_3():
    legacy = load_domain("retail", data_version=LEGACY)
    _check_vectors(_gold_prefixes(legacy), VECTORS_26_3)
    assert legacy.base_db.hash_from_scratch() == INITIAL_HASH  # the shared base was never written


def test_conformance_vectors_upstream(upstream_data_dir):
    dom = load_domain("retail", upstream_data_dir)
    _check_vectors(_gold_prefixes(dom), VECTORS_UPSTREAM)
    assert dom.base_db.hash_from_scratch() == INITIAL_HASH


# --------------------------------------------------------------------------------------- reads


def test_order_dump_order_and_null_optionals(retail):
    text = content(retail.make_environment(), "get_order_details", order_id=PENDING_PAYPAL)
    assert list(json.loads(text)) == ORDER_FIELDS
    assert text.endswith(
        '"cancel_reason": null, "exchange_items": null, "exchange_new_items": null, '
        '"exchange_payment_method_id": null, "exchange_price_difference": null, '
        '"return_items": null, "return_payment_method_id": null}'
    )
    assert '"address": {"address1": ' in text and '"country": "USA", "state": ' in text  # country before state
    assert '"price": 236.51' in text


def test_lookup_errors_do_not_name_the_id(retail):
    env = retail.make_environment()
    assert error(env, "get_order_details", order_id="W2443586") == "Error: Order not found"
    assert error(env, "get_user_details", user_id="nobody") == "Error: User not found"
    assert error(env, "get_product_details", product_id="7706410293") == "Error: Product not found"
    assert error(env, "get_item_details", item_id="1656367028") == "Error: Item not found"
    assert error(env, "get_order_details", order_id=["#W2443586"]) == "Error: unhashable type: 'list'"


def test_product_item_and_user_reads(retail):
    env = retail.make_environment()
    product = json.loads(content(env, "get_product_details", product_id="1656367028"))
    assert list(product) == ["name", "product_id", "variants"] and product["name"] == "Mechanical Keyboard"
    assert content(env, "get_item_details", item_id="7706410293") == (
        '{"item_id": "7706410293", "options": {"switch type": "clicky", "backlight": "none", "size": "full size"}, '
        '"available": true, "price": 269.16}'
    )
    user = json.loads(content(env, "get_user_details", user_id="aarav_nguyen_7344"))
    assert list(user) == ["user_id", "name", "address", "email", "payment_methods", "orders"]
    assert user["payment_methods"]["gift_card_2742113"] == {
        "source": "gift_card",
        "id": "gift_card_2742113",
        "balance": 22.0,
    }


def test_find_user_ids(retail):
    env = retail.make_environment()
    assert content(env, "find_user_id_by_name_zip", first_name="ETHAN", last_name="lopez", zip="43275") == (
        "ethan_lopez_6291"
    )  # a raw string, not JSON-quoted
    assert error(env, "find_user_id_by_name_zip", first_name="Ethan", last_name="Lopez", zip="0") == (
        "Error: User not found"
    )
    # the last name is only lowered when a first name matches (upstream's short-circuit)
    assert error(env, "find_user_id_by_name_zip", first_name="Nobody", last_name=2, zip="1") == "Error: User not found"
    assert error(env, "find_user_id_by_name_zip", first_name="Ethan", last_name=2, zip="1") == (
        "Error: 'int' object has no attribute 'lower'"
    )
    assert content(env, "find_user_id_by_email", email="Ethan.Lopez8943@EXAMPLE.com") == "ethan_lopez_6291"
    assert error(env, "find_user_id_by_email", email="nobody@example.com") == "Error: User not found"


def test_list_all_product_types_is_a_sorted_json_string(retail):
    text = content(retail.make_environment(), "list_all_product_types")
    assert text.startswith('{"Action Camera": "3377618313", "Air Purifier": "3821016478", ')
    assert len(json.loads(text)) == 50


def test_calculate(retail):
    env = retail.make_environment()
    assert [content(env, "calculate", expression=e) for e in ("2+2", "10/3", "2.675*1")] == ["4.0", "3.33", "2.67"]
    assert error(env, "calculate", expression="abs(1)") == "Error: Invalid characters in expression"
    assert error(env, "calculate", expression="1/0") == "Error: division by zero"


def test_argument_errors_name_the_toolkit_class(retail):
    env = retail.make_environment()
    assert error(env, "get_order_details") == (
        "Error: RetailTools.get_order_details() missing 1 required positional argument: 'order_id'"
    )
    assert error(env, "list_all_product_types", x=1) == (
        "Error: RetailTools.list_all_product_types() got an unexpected keyword argument 'x'"
    )
    assert error(env, "no_such_tool") == "Error: Tool 'no_such_tool' not found."
    assert content(env, "transfer_to_human_agents", summary="s") == "Transfer successful"


# --------------------------------------------------------------------------------------- writes


def _order(env, order_id):
    return json.loads(content(env, "get_order_details", order_id=order_id))


def _balance(env, user_id, method_id):
    return json.loads(content(env, "get_user_details", user_id=user_id))["payment_methods"][method_id]["balance"]


def test_cancel_refunds_gift_card_immediately(retail):
    env = retail.make_environment()
    assert error(env, "cancel_pending_order", order_id=PROCESSED, reason="no longer needed") == (
        "Error: Non-pending order cannot be cancelled"
    )
    assert error(env, "cancel_pending_order", order_id=PENDING_GIFT, reason="changed my mind") == (
        "Error: Invalid reason"
    )
    assert env.get_db_hash() == INITIAL_HASH
    order = json.loads(content(env, "cancel_pending_order", order_id=PENDING_GIFT, reason="ordered by mistake"))
    assert order["status"] == "cancelled" and order["cancel_reason"] == "ordered by mistake"
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 4079.45,
        "payment_method_id": "gift_card_7219486",
    }
    assert _balance(env, "ethan_lopez_6291", "gift_card_7219486") == round(49.0 + 4079.45, 2)
    assert error(env, "cancel_pending_order", order_id=PENDING_GIFT, reason="ordered by mistake") == (
        "Error: Non-pending order cannot be cancelled"
    )


def test_modify_items_records_unrounded_difference_and_last_variant(retail):
    env = retail.make_environment()
    text = content(
        env,
        "modify_pending_order_items",
        order_id=PENDING_PAYPAL,
        item_ids=["9690244451", "1437889264"],
        new_item_ids=["7706410293", "1615379700"],
        payment_method_id="paypal_7859314",
    )
    assert '"amount": 28.450000000000045' in text  # (269.16 - 236.51) + (253.89 - 258.09), unrounded
    order = json.loads(text)
    assert order["status"] == "pending (item modified)"
    assert order["payment_history"][-1] == {
        "transaction_type": "payment",
        "amount": 28.450000000000045,
        "payment_method_id": "paypal_7859314",
    }
    changed = order["items"][:2]
    assert [i["item_id"] for i in changed] == ["7706410293", "1615379700"]
    last = {"size": "10", "material": "synthetic", "waterproof": "yes"}  # the second new variant's options
    assert all(i["price"] == 253.89 and i["options"] == last for i in changed)
    # lifecycle after an item change: no cancel, no payment change, no second change; address still works
    assert error(env, "cancel_pending_order", order_id=PENDING_PAYPAL, reason="no longer needed") == (
        "Error: Non-pending order cannot be cancelled"
    )
    assert error(
        env, "modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="gift_card_2742113"
    ) == ("Error: There should be exactly one payment for a pending order")
    assert error(
        env,
        "modify_pending_order_items",
        order_id=PENDING_PAYPAL,
        item_ids=["7706410293"],
        new_item_ids=["1421289881"],
        payment_method_id="paypal_7859314",
    ) == ("Error: Non-pending order cannot be modified")
    assert not run(env, "modify_pending_order_address", order_id=PENDING_PAYPAL, **ADDRESS).error


def test_modify_items_errors(retail):
    env = retail.make_environment()
    args = {"order_id": PENDING_PAYPAL, "payment_method_id": "paypal_7859314"}
    assert (
        error(
            env,
            "modify_pending_order_items",
            item_ids=["9690244451", "9690244451"],
            new_item_ids=["7706410293", "1421289881"],
            **args,
        )
        == "Error: 9690244451 not found"
    )
    assert (
        error(env, "modify_pending_order_items", item_ids=["9690244451"], new_item_ids=["7706410293", "1"], **args)
        == "Error: The number of items to be exchanged should match"
    )
    assert error(env, "modify_pending_order_items", item_ids=["9690244451"], new_item_ids=["9690244451"], **args) == (
        "Error: The new item id should be different from the old item id"
    )
    assert error(env, "modify_pending_order_items", item_ids=["9690244451"], new_item_ids=["1340995114"], **args) == (
        "Error: New item 1340995114 not found or available"
    )
    assert error(env, "modify_pending_order_items", item_ids=["9690244451"], new_item_ids=["4602305039"], **args) == (
        "Error: Variant not found"
    )
    assert error(
        env,
        "modify_pending_order_items",
        order_id=PENDING_PAYPAL,
        item_ids=["9690244451"],
        new_item_ids=["7706410293"],
        payment_method_id="gift_card_2742113",
    ) == ("Error: Insufficient gift card balance to pay for the new item")  # 32.65 > 22.0
    assert error(
        env,
        "modify_pending_order_items",
        order_id=PENDING_PAYPAL,
        item_ids=["9690244451"],
        new_item_ids=["7706410293"],
        payment_method_id="credit_card_0000000",
    ) == ("Error: Payment method not found")
    assert env.get_db_hash() == INITIAL_HASH


def test_modify_items_empty_lists_record_a_zero_refund(retail):
    env = retail.make_environment()
    order = json.loads(
        content(
            env,
            "modify_pending_order_items",
            order_id=PENDING_GIFT,
            item_ids=[],
            new_item_ids=[],
            payment_method_id="gift_card_7219486",
        )
    )
    assert order["status"] == "pending (item modified)"
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 0.0,
        "payment_method_id": "gift_card_7219486",
    }


def test_modify_payment(retail):
    env = retail.make_environment()
    assert error(env, "modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="paypal_7859314") == (
        "Error: The new payment method should be different from the current one"
    )
    assert (
        error(env, "modify_pending_order_payment", order_id=PENDING_PAYPAL, payment_method_id="gift_card_2742113")
        == "Error: Insufficient gift card balance to pay for the order"
    )
    assert (
        error(env, "modify_pending_order_payment", order_id=DELIVERED_GIFT, payment_method_id="gift_card_8168843")
        == "Error: Non-pending order cannot be modified"
    )
    order = json.loads(
        content(env, "modify_pending_order_payment", order_id=PENDING_GIFT, payment_method_id="credit_card_9789590")
    )
    assert order["status"] == "pending"
    assert order["payment_history"][1:] == [
        {"transaction_type": "payment", "amount": 4079.45, "payment_method_id": "credit_card_9789590"},
        {"transaction_type": "refund", "amount": 4079.45, "payment_method_id": "gift_card_7219486"},
    ]
    assert _balance(env, "ethan_lopez_6291", "gift_card_7219486") == round(49.0 + 4079.45, 2)


def test_modify_addresses(retail):
    env = retail.make_environment()
    assert error(env, "modify_pending_order_address", order_id=DELIVERED_GIFT, **ADDRESS) == (
        "Error: Non-pending order cannot be modified"
    )
    bad = error(env, "modify_pending_order_address", order_id=PENDING_PAYPAL, **{**ADDRESS, "zip": 78701})
    assert bad.startswith("Error: 1 validation error for UserAddress\nzip\n  Input should be a valid string")
    order = json.loads(content(env, "modify_pending_order_address", order_id=PENDING_PAYPAL, **ADDRESS))
    assert order["address"] == {k: ADDRESS[k] for k in ("address1", "address2", "city", "country", "state", "zip")}
    assert list(order["address"]) == ["address1", "address2", "city", "country", "state", "zip"]
    user = json.loads(content(env, "modify_user_address", user_id="aarav_nguyen_7344", **ADDRESS))
    assert user["address"]["city"] == "Austin"
    assert error(env, "modify_user_address", user_id="nobody", **ADDRESS) == "Error: User not found"


def test_address_fast_path_equals_the_model():
    from tau2_gym.domains.retail.data_model import UserAddress
    from tau2_gym.domains.retail.tools import _address

    fast = _address(**ADDRESS)
    assert fast == UserAddress(**ADDRESS).model_dump() and list(fast) == list(UserAddress.model_fields)
    with pytest.raises(Exception, match="1 validation error for UserAddress"):
        _address(**{**ADDRESS, "zip": 78701})


def test_exchange_records_intent_only(retail):
    env = retail.make_environment()
    args = {"order_id": DELIVERED_CARD, "payment_method_id": "credit_card_8041020"}
    assert (
        error(
            env,
            "exchange_delivered_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=[],
            new_item_ids=[],
            payment_method_id="paypal_7859314",
        )
        == "Error: Non-delivered order cannot be exchanged"
    )
    assert (
        error(
            env,
            "exchange_delivered_order_items",
            item_ids=["5222576926", "5222576926"],
            new_item_ids=["1", "2"],
            **args,
        )
        == "Error: Number of 5222576926 not found."
    )
    assert error(env, "exchange_delivered_order_items", item_ids=["5222576926"], new_item_ids=[], **args) == (
        "Error: The number of items to be exchanged should match."
    )
    assert (
        error(env, "exchange_delivered_order_items", item_ids=["5222576926"], new_item_ids=["9690244451"], **args)
        == "Error: New item 9690244451 not found or available"
    )
    assert (
        error(env, "exchange_delivered_order_items", item_ids=["5222576926"], new_item_ids=["4602305039"], **args)
        == "Error: Variant not found"
    )
    assert error(
        env,
        "exchange_delivered_order_items",
        order_id=DELIVERED_CARD,
        item_ids=["5222576926"],
        new_item_ids=["7706410293"],
        payment_method_id="gift_card_6052478",
    ) == ("Error: Insufficient gift card balance to pay for the price difference")  # 19.21 > 10.0
    assert env.get_db_hash() == INITIAL_HASH
    order = json.loads(
        content(
            env,
            "exchange_delivered_order_items",
            item_ids=["9970989750", "5222576926"],
            new_item_ids=["4602305039", "3616838507"],
            **args,
        )
    )
    assert order["status"] == "exchange requested"
    assert order["exchange_items"] == ["5222576926", "9970989750"]  # each list sorted on its own
    assert order["exchange_new_items"] == ["3616838507", "4602305039"]
    assert order["exchange_price_difference"] == round((561.05 - 569.43) + (226.11 - 249.95), 2)
    assert len(order["payment_history"]) == 1  # no payment record, items unchanged
    assert order["items"][0]["item_id"] == "5222576926"


def test_exchange_with_empty_lists_stores_int_zero(retail):
    env = retail.make_environment()
    text = content(
        env,
        "exchange_delivered_order_items",
        order_id=DELIVERED_GIFT,
        item_ids=[],
        new_item_ids=[],
        payment_method_id="gift_card_8168843",
    )
    assert '"exchange_price_difference": 0, ' in text


def test_return(retail):
    env = retail.make_environment()
    args = {"order_id": DELIVERED_CARD}
    assert (
        error(
            env,
            "return_delivered_order_items",
            order_id=PENDING_PAYPAL,
            item_ids=[],
            payment_method_id="paypal_7859314",
        )
        == "Error: Non-delivered order cannot be returned"
    )
    assert (
        error(env, "return_delivered_order_items", item_ids=["5222576926"], payment_method_id="paypal_7425862", **args)
        == "Error: Payment method should be the original payment method"
    )
    assert (
        error(
            env,
            "return_delivered_order_items",
            item_ids=["5222576926", "5222576926"],
            payment_method_id="credit_card_8041020",
            **args,
        )
        == "Error: Some item not found"
    )
    assert env.get_db_hash() == INITIAL_HASH
    order = json.loads(
        content(
            env,
            "return_delivered_order_items",
            item_ids=["9970989750", "5222576926"],
            payment_method_id="gift_card_6052478",
            **args,
        )
    )
    assert order["status"] == "return requested" and order["return_items"] == ["5222576926", "9970989750"]
    assert order["return_payment_method_id"] == "gift_card_6052478"
    assert _balance(env, "sophia_jackson_6355", "gift_card_6052478") == 10.0  # no refund yet


def test_read_content_tracks_changes(retail):
    from tau2_gym.core.tools import to_content

    env = retail.make_environment()
    first = content(env, "get_order_details", order_id=PENDING_GIFT)
    assert first == content(env, "get_order_details", order_id=PENDING_GIFT)
    content(env, "cancel_pending_order", order_id=PENDING_GIFT, reason="no longer needed")
    changed = env.make_tool_call("get_order_details", order_id=PENDING_GIFT)
    assert json.loads(to_content(changed))["status"] == "cancelled"
    user = json.loads(content(env, "get_user_details", user_id="ethan_lopez_6291"))
    assert user["payment_methods"]["gift_card_7219486"]["balance"] == round(49.0 + 4079.45, 2)
    assert content(retail.make_environment(), "get_order_details", order_id=PENDING_GIFT) == first


def test_episodes_are_isolated_and_base_untouched(retail):
    a, b = retail.make_environment(), retail.make_environment()
    content(a, "cancel_pending_order", order_id=PENDING_GIFT, reason="no longer needed")
    assert a.get_db_hash() != INITIAL_HASH and b.get_db_hash() == INITIAL_HASH
    assert retail.base_db.data["orders"][PENDING_GIFT]["status"] == "pending"
    assert retail.base_db.data["users"]["ethan_lopez_6291"]["payment_methods"]["gift_card_7219486"]["balance"] == 49.0


def test_every_perturbation_runs_without_escaping_get_response(retail):
    """Every scenario call yields a tool message (errors included); writes never touch the shared base."""
    for calls in PERTURBATIONS.values():
        env = retail.make_environment()
        for name, args in calls:
            assert run(env, name, **args).content is not None
    assert retail.base_db.hash_from_scratch() == INITIAL_HASH
