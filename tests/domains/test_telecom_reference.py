"""Differential test (telecom): ours vs upstream tau2-bench, call by call, in one upstream subprocess.

Compared: the tool schemas and policies; for the 20 ``small`` tasks and 200 ``full`` tasks drawn with a
fixed seed, upstream's own plan of each task (init actions, gold calls, assertions) and, replaying it in
both, every init action's result, every tool message (content + error flag), both DB hashes after each
init action and each call (each call goes through get_response and is followed by a sync), and every env
assertion's value; plus hand-written perturbed episodes (wrong ids and types, invalid modes, missing and
extra arguments, wrong-typed values stored in the device, unknown phone numbers, solo routing).

Robustness to upstream's process-wide VPN leak (pitfall 6): the driver resets upstream's class-level
default VPN object before every episode, so each episode sees what a fresh upstream process would see --
which is what ours does per environment. Random bill ids (refuel without a Draft bill) come from a
deterministic ``uuid.uuid4`` installed on both sides and restarted per episode.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest
from refutil import ok, run_reference

from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall
from tau2_gym.core.tasks import EnvAssertion, EnvFunctionCall
from tau2_gym.core.tools import to_content

pytestmark = pytest.mark.reference

SEED = 20250225
N_FULL = 200

# ---------------------------------------------------------------------------------- our side


class _Uuid:
    """The driver's deterministic uuid4 sequence."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> uuid.UUID:
        self.n += 1
        return uuid.UUID(int=self.n * 0x1234567)


def _exc(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_ours(job: dict[str, Any], fake_uuid: _Uuid) -> dict[str, Any]:
    fake_uuid.n = 0
    dom = load_domain(job.get("domain", "telecom"))
    env = dom.make_environment(solo=job.get("solo", False))
    out: dict[str, Any] = {
        "start": [env.get_db_hash(), env.get_user_db_hash()],
        "init": [],
        "calls": [],
        "assertions": [],
    }
    for a in job.get("init") or []:
        rec: dict[str, Any] = {}
        try:
            rec["value"] = to_content(env.run_env_function_call(EnvFunctionCall.model_validate(a)))
        except Exception as exc:  # noqa: BLE001 - any exception is recorded and compared with upstream's
            rec["exception"] = _exc(exc)
        rec["hashes"] = [env.get_db_hash(), env.get_user_db_hash()]
        out["init"].append(rec)
    for c in job.get("calls") or []:
        rec = {}
        try:
            msg = env.get_response(
                ToolCall(
                    id=c.get("id", ""),
                    name=c["name"],
                    arguments=c.get("arguments", {}),
                    requestor=c.get("requestor", "assistant"),
                )
            )
            rec["content"] = msg.content
            rec["error"] = msg.error
        except Exception as exc:  # noqa: BLE001 - any exception is recorded and compared with upstream's
            rec["exception"] = _exc(exc)
        try:
            env.sync_tools()
        except Exception as exc:  # noqa: BLE001 - any exception is recorded and compared with upstream's
            rec["sync_exception"] = _exc(exc)
        rec["hashes"] = [env.get_db_hash(), env.get_user_db_hash()]
        out["calls"].append(rec)
    for a in job.get("assertions") or []:
        rec = {}
        try:
            value = env.run_env_function_call(EnvAssertion.model_validate(a))
            rec["value"] = value if isinstance(value, bool) else f"<{type(value).__name__}>"
        except Exception as exc:  # noqa: BLE001 - any exception is recorded and compared with upstream's
            rec["exception"] = _exc(exc)
        out["assertions"].append(rec)
    return out


def our_plan(task) -> dict[str, Any]:
    st, ev = task.initial_state, task.evaluation_criteria
    return {
        "init": [a.model_dump(mode="json") for a in (st.initialization_actions or [])],
        "calls": [
            {"id": a.action_id, "name": a.name, "arguments": a.arguments, "requestor": a.requestor}
            for a in (ev.actions or [])
        ],
        "assertions": [a.model_dump(mode="json") for a in (ev.env_assertions or [])],
    }


def _key(items: list[dict], fields: tuple[str, ...]) -> list[tuple]:
    return [tuple(json.dumps(i.get(f), sort_keys=True) for f in fields) for i in items]


# ------------------------------------------------------------------------------- perturbations

JOHN = {
    "env_type": "user",
    "func_name": "set_user_info",
    "arguments": {"name": "John Smith", "phone_number": "555-123-2002"},
}


def A(name: str, **arguments: Any) -> dict:
    return {"id": "a", "name": name, "arguments": arguments, "requestor": "assistant"}


def U(name: str, **arguments: Any) -> dict:
    return {"id": "u", "name": name, "arguments": arguments, "requestor": "user"}


def F(func: str, env_type: str = "user", **arguments: Any) -> dict:
    return {"env_type": env_type, "func_name": func, "arguments": arguments}


def ASSERT(func: str, env_type: str = "user", assert_value: bool = True, **arguments: Any) -> dict:
    return {"env_type": env_type, "func_name": func, "arguments": arguments, "assert_value": assert_value}


ALL_ASSERTIONS = [
    ASSERT("assert_airplane_mode_status", expected_status=True),
    ASSERT("assert_airplane_mode_status", expected_status=False),
    ASSERT("assert_service_status", expected_status="connected"),
    ASSERT("assert_service_status", expected_status="no_service"),
    ASSERT("assert_service_status", expected_status="bogus"),
    ASSERT("assert_mobile_data_status", expected_status=True),
    ASSERT("assert_mobile_roaming_status", expected_status=False),
    ASSERT("assert_mobile_data_saver_mode_status", expected_status=False),
    ASSERT("assert_internet_speed", expected_speed=200, expected_desc="excellent"),
    ASSERT("assert_internet_speed", expected_speed=200),
    ASSERT("assert_internet_speed", expected_speed=0.01, expected_desc="VERY POOR"),
    ASSERT("assert_internet_not_excellent"),
    ASSERT("assert_can_send_mms", expected_status=True),
    ASSERT("assert_mobile_data_usage_exceeded", expected_status=False),
    ASSERT("assert_data_refueling_amount", "assistant", customer_id="C1001", line_id="L1002", expected_amount=2.0),
    ASSERT("assert_line_status", "assistant", customer_id="C1001", line_id="L1002", expected_status="Active"),
    ASSERT("assert_overdue_bill_exists", "assistant", customer_id="C1001", overdue_bill_id="B1001"),
    ASSERT("assert_overdue_bill_exists", "assistant", customer_id="C1001", overdue_bill_id="B77"),
    ASSERT("assert_no_overdue_bill", "assistant", overdue_bill_id="B1001"),
    ASSERT("assert_no_overdue_bill", "assistant", overdue_bill_id="B77"),
    ASSERT("assert_no_overdue_bill", "assistant", overdue_bill_id="B999"),
]

AGENT_CALLS = [
    A("get_customer_by_phone", phone_number="555-123-2002"),
    A("get_customer_by_phone", phone_number="555-123-2001"),
    A("get_customer_by_phone", phone_number="555-123-1002"),
    A("get_customer_by_phone", phone_number="555-123-2005"),
    A("get_customer_by_phone", phone_number="000"),
    A("get_customer_by_phone", phone_number=5552),
    A("get_customer_by_phone", phone_number=None),
    A("get_customer_by_phone"),
    A("get_customer_by_phone", phone_number="555-123-2002", foo=1),
    A("get_customer_by_id", customer_id="C1001"),
    A("get_customer_by_id", customer_id="C1004"),
    A("get_customer_by_id", customer_id="C9999"),
    A("get_customer_by_id", customer_id=1001),
    A("get_customer_by_id", customer_id=["C1001"]),
    A("get_customer_by_name", full_name="john smith", dob="1985-06-15"),
    A("get_customer_by_name", full_name="John Smith", dob="1985-06-16"),
    A("get_customer_by_name", full_name=5, dob="x"),
    A("get_customer_by_name", full_name="Emma Wilson", dob=19950817),
    *[
        A("get_details_by_id", id=i)
        for i in ("L1002", "D1002", "B1002", "C1001", "P1003", "X1", "L9999", "D9", "B9", "C9", "P9", "", "l1002")
    ],
    A("get_details_by_id", id=12),
    A("get_details_by_id", id=None),
    A("get_bills_for_customer", customer_id="C1001"),
    A("get_bills_for_customer", customer_id="C1001", limit=1),
    A("get_bills_for_customer", customer_id="C1001", limit="2"),
    A("get_bills_for_customer", customer_id="C1001", limit=-1),
    A("get_bills_for_customer", customer_id="C1001", limit=None),
    A("get_bills_for_customer", customer_id="C1001", limit=True),
    A("get_bills_for_customer", customer_id="C1004"),
    A("get_bills_for_customer", customer_id="C1002"),
    A("get_bills_for_customer", customer_id="C1003"),
    A("get_bills_for_customer", customer_id="C9"),
    A("get_data_usage", customer_id="C1001", line_id="L1002"),
    A("get_data_usage", customer_id="C1002", line_id="L1004"),
    A("get_data_usage", customer_id="C1001", line_id="L1004"),
    A("get_data_usage", customer_id="C9", line_id="L1"),
    A("enable_roaming", customer_id="C1001", line_id="L1001"),
    A("enable_roaming", customer_id="C1001", line_id="L1001"),
    A("disable_roaming", customer_id="C1001", line_id="L1001"),
    A("disable_roaming", customer_id="C1001", line_id="L1001"),
    A("disable_roaming", customer_id="C1001", line_id="L1002"),
    U("check_network_status"),
    A("enable_roaming", customer_id="C1001", line_id="L1002"),
    A("suspend_line", customer_id="C1001", line_id="L1001", reason="r"),
    A("suspend_line", customer_id="C1001", line_id="L1001", reason="r"),
    A("suspend_line", customer_id="C1001", line_id="L1004", reason="r"),
    A("suspend_line", customer_id="C1001", line_id="L1001"),
    A("resume_line", customer_id="C1001", line_id="L1001"),
    A("resume_line", customer_id="C1001", line_id="L1001"),
    A("resume_line", customer_id="C1001", line_id="L1003"),
    A("resume_line", customer_id="C1003", line_id="L1009"),
    A("suspend_line", customer_id="C1001", line_id="L1002", reason="x"),
    U("check_status_bar"),
    U("toggle_airplane_mode"),
    U("toggle_airplane_mode"),
    U("run_speed_test"),
    A("resume_line", customer_id="C1001", line_id="L1002"),
    U("check_status_bar"),
    U("reboot_device"),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2.0),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=0),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=-1.5),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount="2"),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=True),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=0.1),
    A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=None),
    A("refuel_data", customer_id="C1002", line_id="L1004", gb_amount=1.5),
    A("refuel_data", customer_id="C1002", line_id="L1005", gb_amount=1),
    A("refuel_data", customer_id="C1003", line_id="L1009", gb_amount=3.3),
    A("refuel_data", customer_id="C1004", line_id="L1", gb_amount=1),
    A("get_bills_for_customer", customer_id="C1002"),
    A("get_details_by_id", id="L1004"),
    A("send_payment_request", customer_id="C1001", bill_id="B1001"),
    U("check_payment_request"),
    U("make_payment"),
    U("check_payment_request"),
    A("get_details_by_id", id="B1001"),
    A("send_payment_request", customer_id="C1001", bill_id="B1002"),
    A("send_payment_request", customer_id="C1001", bill_id="B1003"),
    A("send_payment_request", customer_id="C1002", bill_id="B1001"),
    A("send_payment_request", customer_id="C9", bill_id="B1"),
    U("make_payment"),
    U("make_payment"),
    A("get_bills_for_customer", customer_id="C1001"),
    A("transfer_to_human_agents", summary="x"),
    A("transfer_to_human_agents"),
    A("foo"),
    A("toggle_data"),
    U("get_customer_by_id", customer_id="C1001"),
    U("foo"),
]

USER_CALLS = [
    *[
        U("set_network_mode_preference", mode=m)
        for m in ("4g_only", "3g_only", "2g_only", "4g_5g_preferred", "5g", "4G_ONLY", "")
    ],
    U("set_network_mode_preference", mode=5),
    U("check_network_mode_preference"),
    U("check_status_bar"),
    U("run_speed_test"),
    U("set_network_mode_preference", mode=None),
    U("check_network_mode_preference"),
    U("set_network_mode_preference", mode=[1]),
    U("set_network_mode_preference", mode={}),
    U("set_network_mode_preference", mode=True),
    U("set_network_mode_preference", mode="4g_5g_preferred"),
    U("set_network_mode_preference"),
    U("check_network_mode_preference"),
    U("toggle_airplane_mode"),
    U("toggle_airplane_mode"),
    U("toggle_wifi"),
    U("toggle_airplane_mode"),
    U("toggle_wifi"),
    U("toggle_airplane_mode"),
    U("toggle_wifi"),
    U("check_wifi_status"),
    U("toggle_wifi"),
    U("check_wifi_status"),
    U("check_network_status"),
    U("toggle_wifi_calling"),
    U("check_wifi_calling_status"),
    U("toggle_wifi_calling"),
    U("toggle_data"),
    U("check_status_bar"),
    U("toggle_data"),
    U("toggle_roaming"),
    U("toggle_roaming"),
    U("toggle_data_saver_mode"),
    U("check_data_restriction_status"),
    U("run_speed_test"),
    U("toggle_data_saver_mode"),
    U("set_apn_settings", apn_settings={}),
    U("set_apn_settings", apn_settings={"apn_name": "broken"}),
    U("check_apn_settings"),
    U("run_speed_test"),
    U("reset_apn_settings"),
    U("reboot_device"),
    U("set_apn_settings", apn_settings={"apn_name": "internet", "mmsc_url": None}),
    U("can_send_mms"),
    U("check_apn_settings"),
    U("set_apn_settings", apn_settings={"mmsc_url": ""}),
    U("can_send_mms"),
    U("check_apn_settings"),
    U("set_apn_settings", apn_settings={"apn_name": "bad"}),
    U("set_apn_settings", apn_settings={"foo": 1}),
    U("set_apn_settings", apn_settings={"mms_port": "x"}),
    U("set_apn_settings", apn_settings={"mms_port": 8080, "mms_proxy": "p"}),
    U("set_apn_settings", apn_settings={"reset_at_reboot": True}),
    U("reboot_device"),
    U("check_apn_settings"),
    U("set_apn_settings", apn_settings="internet"),
    U("check_apn_settings"),
    U("reset_apn_settings"),
    U("reboot_device"),
    U("toggle_airplane_mode"),
    U("check_status_bar"),
    U("can_send_mms"),
    U("run_speed_test"),
    U("toggle_airplane_mode"),
    U("set_apn_settings", apn_settings=None),
    U("set_apn_settings", apn_settings=[1]),
    U("set_apn_settings", apn_settings=5),
    U("set_apn_settings"),
    U("set_apn_settings", apn_settings={}),
    U("connect_vpn"),
    U("connect_vpn"),
    U("check_vpn_status"),
    U("run_speed_test"),
    U("disconnect_vpn"),
    U("disconnect_vpn"),
    U("check_vpn_status"),
    *[U("check_app_status", app_name=a) for a in ("messaging", "browser", "camera", 5, ["x"], {"a": 1}, None)],
    *[U("check_app_permissions", app_name=a) for a in ("messaging", "browser", "camera", 5, ["x"], None)],
    U("check_installed_apps"),
    U("check_app_status"),
    U("grant_app_permission", app_name="messaging", permission="SMS"),
    U("grant_app_permission", app_name="browser", permission="sms"),
    U("grant_app_permission", app_name="messaging", permission="camera"),
    U("grant_app_permission", app_name="camera", permission="sms"),
    U("grant_app_permission", app_name="messaging", permission=5),
    U("grant_app_permission", app_name=["x"], permission="sms"),
    U("grant_app_permission", app_name="camera", permission=5),
    U("grant_app_permission", app_name="messaging"),
    U("check_app_status", app_name="browser"),
    U("make_payment"),
    U("check_payment_request"),
    U("reseat_sim_card"),
    U("check_sim_status"),
    U("toggle_data", x=1),
    U("refuel_data"),
]

INIT_HELPERS = [
    JOHN,
    F("set_user_location", abroad=True),
    F("turn_airplane_mode_on"),
    F("turn_airplane_mode_on"),
    F("turn_airplane_mode_off"),
    F("turn_airplane_mode_off"),
    F("unseat_sim_card"),
    F("lock_sim_card", mode="puk"),
    F("lock_sim_card", mode="xyz"),
    F("turn_data_off"),
    F("turn_data_on"),
    F("turn_roaming_on"),
    F("turn_roaming_on"),
    F("turn_roaming_off"),
    F("turn_data_saver_mode_on"),
    F("turn_data_saver_mode_off"),
    F("break_apn_settings"),
    F("break_apn_mms_setting"),
    F("set_wifi_calling", enabled=True),
    F("set_wifi_calling", enabled=False, mms_over_wifi=False),
    F("set_wifi_calling", enabled=True, mms_over_wifi=True),
    F("break_vpn"),
    F("break_vpn"),
    F("remove_app_permission", app_name="messaging", permission="SMS"),
    F("remove_app_permission", app_name="messaging", permission="camera"),
    F("remove_app_permission", app_name="camera", permission="sms"),
    F("simulate_network_search"),
    F("set_data_usage", "assistant", customer_id="C1001", line_id="L1002", data_used_gb=20),
    F(
        "suspend_line_for_overdue_bill",
        "assistant",
        customer_id="C1001",
        line_id="L1002",
        new_bill_id="B77",
        contract_ended=True,
    ),
    F(
        "suspend_line_for_overdue_bill",
        "assistant",
        customer_id="C1001",
        line_id="L1001",
        new_bill_id="B78",
        contract_ended=False,
    ),
    F("enable_roaming", "assistant", customer_id="C1001", line_id="L1002"),
    F("disable_roaming", "assistant", customer_id="C1001", line_id="L1002"),
    F("refuel_data", "assistant", customer_id="C1001", line_id="L1002", gb_amount=2.0),
    F("get_available_plan_ids", "assistant"),
    F("nonexistent_helper"),
]

PERTURBATIONS: dict[str, dict[str, Any]] = {
    "agent tools": {"init": [JOHN], "calls": AGENT_CALLS, "assertions": ALL_ASSERTIONS},
    "user tools": {"init": [JOHN], "calls": USER_CALLS, "assertions": ALL_ASSERTIONS},
    "init helpers": {
        "init": INIT_HELPERS,
        "calls": [
            U("check_status_bar"),
            U("check_sim_status"),
            U("check_vpn_status"),
            U("run_speed_test"),
            U("check_app_permissions", app_name="messaging"),
            U("toggle_roaming"),
            U("reseat_sim_card"),
            A("send_payment_request", customer_id="C1001", bill_id="B77"),
            U("check_payment_request"),
            U("make_payment"),
            A("resume_line", customer_id="C1001", line_id="L1002"),
            U("reboot_device"),
            U("disconnect_vpn"),
            U("connect_vpn"),
            U("check_vpn_status"),
            U("run_speed_test"),
        ],
        "assertions": ALL_ASSERTIONS,
    },
    "unknown phone": {
        "init": [F("set_user_info", name="X", phone_number="555-000-0000"), F("turn_data_off")],
        "calls": [U("toggle_data"), A("get_customer_by_id", customer_id="C1001"), U("check_status_bar"), A("foo")],
        "assertions": ALL_ASSERTIONS[:3],
    },
    "other customer's line": {
        "init": [
            F("set_user_info", name="Sarah", phone_number="555-123-2004"),
            F("set_data_usage", "assistant", customer_id="C1002", line_id="L1004", data_used_gb=999.0),
        ],
        "calls": [
            U("run_speed_test"),
            A("refuel_data", customer_id="C1002", line_id="L1004", gb_amount=0.5),
            U("run_speed_test"),
            A("send_payment_request", customer_id="C1002", bill_id="B1004"),
            U("check_payment_request"),
            U("make_payment"),
            A("get_bills_for_customer", customer_id="C1002"),
            U("check_payment_request"),
        ],
        "assertions": ALL_ASSERTIONS[:6],
    },
    "suspended line": {
        "init": [F("set_user_info", name="John", phone_number="555-123-2003"), F("simulate_network_search")],
        "calls": [
            U("check_status_bar"),
            A("resume_line", customer_id="C1001", line_id="L1003"),
            U("check_status_bar"),
            U("reboot_device"),
        ],
        "assertions": ALL_ASSERTIONS[:6],
    },
    "no phone number": {
        "init": [],
        "calls": [
            A("suspend_line", customer_id="C1001", line_id="L1002", reason="x"),
            U("toggle_airplane_mode"),
            U("toggle_airplane_mode"),
            A("send_payment_request", customer_id="C1001", bill_id="B1002"),
            U("check_payment_request"),
        ],
        "assertions": ALL_ASSERTIONS[:6],
    },
    "solo": {
        "solo": True,
        "init": [JOHN, F("set_user_location", abroad=True), F("turn_roaming_off")],
        "calls": [
            A("run_speed_test"),
            A("toggle_roaming"),
            A("run_speed_test"),
            U("run_speed_test"),
            A("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2.0),
            A("make_payment"),
            A("send_payment_request", customer_id="C1001", bill_id="B1002"),
            A("check_payment_request"),
            A("make_payment"),
            A("get_details_by_id", id="B1002"),
            A("foo"),
        ],
        "assertions": ALL_ASSERTIONS[:8],
    },
    "workflow domain": {
        "domain": "telecom-workflow",
        "init": [JOHN, F("break_apn_settings")],
        "calls": [U("check_apn_settings"), U("reset_apn_settings"), U("reboot_device")],
        "assertions": ALL_ASSERTIONS[:3],
    },
}


# ---------------------------------------------------------------------------------- the test


def _task_ids(telecom) -> tuple[list[str], list[str]]:
    small = [t.id for t in telecom.tasks("telecom_small")]
    rest = sorted(t.id for t in telecom.tasks("telecom_full") if t.id not in set(small))
    return small, random.Random(SEED).sample(rest, N_FULL)


@pytest.fixture(scope="module")
def reference():
    telecom = load_domain("telecom")
    small, sampled = _task_ids(telecom)
    jobs: list[dict[str, Any]] = [
        {"kind": "schemas", "domain": d, "solo": s} for d in ("telecom", "telecom-workflow") for s in (False, True)
    ]
    jobs += [{"kind": "task_episode", "task_id": tid} for tid in small + sampled]
    jobs += [{"kind": "episode", **job} for job in PERTURBATIONS.values()]
    results = [ok(r) for r in run_reference("driver_telecom", jobs)]
    return {
        "schemas": results[:4],
        "tasks": dict(zip(small + sampled, results[4 : 4 + len(small) + len(sampled)])),
        "perturbations": dict(zip(PERTURBATIONS, results[4 + len(small) + len(sampled) :])),
        "small": small,
        "sampled": sampled,
    }


def _compare(ours: dict, theirs: dict, where: str, counts: dict[str, int], mismatches: list[str]) -> None:
    if ours["start"] != theirs["start"]:
        mismatches.append(f"{where}: start hashes")
    for section, fields in (
        ("init", ("value", "exception", "hashes")),
        ("calls", ("content", "error", "exception", "sync_exception", "hashes")),
        ("assertions", ("value", "exception")),
    ):
        a, b = ours[section], theirs[section]
        if len(a) != len(b):
            mismatches.append(f"{where}: {section} count {len(a)} != {len(b)}")
            continue
        counts[section] += len(a)
        for i, (x, y) in enumerate(zip(a, b)):
            for f in fields:
                if x.get(f) != y.get(f):
                    mismatches.append(f"{where}: {section}[{i}].{f}: ours {x.get(f)!r} != upstream {y.get(f)!r}")


def test_schemas_and_policies_equal_upstream(reference):
    for (name, solo), up in zip(
        [(d, s) for d in ("telecom", "telecom-workflow") for s in (False, True)], reference["schemas"]
    ):
        dom = load_domain(name)
        env = dom.make_environment(solo=solo)
        assert list(dom.agent_tool_schemas()) == up["agent"], (name, solo)
        assert list(dom.user_tool_schemas()) == up["user"], (name, solo)
        assert env.tool_schemas() == up["agent"] + (up["user"] if solo else []), (name, solo)
        assert env.get_policy() == up["policy"], (name, solo)


def test_task_episodes_equal_upstream(reference, monkeypatch):
    fake = _Uuid()
    monkeypatch.setattr(uuid, "uuid4", fake)
    telecom = load_domain("telecom")
    counts = {"init": 0, "calls": 0, "assertions": 0}
    mismatches: list[str] = []
    for tid, up in reference["tasks"].items():
        task = telecom.task(tid, "telecom_full")
        plan = our_plan(task)
        assert _key(plan["init"], ("env_type", "func_name", "arguments")) == _key(
            up["plan"]["init"], ("env_type", "func_name", "arguments")
        ), tid
        assert plan["calls"] == up["plan"]["calls"], tid
        assert _key(plan["assertions"], ("env_type", "func_name", "arguments", "assert_value")) == _key(
            up["plan"]["assertions"], ("env_type", "func_name", "arguments", "assert_value")
        ), tid
        _compare(run_ours({"domain": "telecom", **up["plan"]}, fake), up["result"], tid, counts, mismatches)
    n_small, n_sampled = len(reference["small"]), len(reference["sampled"])
    print(
        f"\ntelecom differential, tasks: {n_small} small + {n_sampled} full = {n_small + n_sampled}; "
        f"init actions {counts['init']}, calls {counts['calls']}, assertions {counts['assertions']}; "
        f"mismatches {len(mismatches)}"
    )
    assert not mismatches, "\n".join(mismatches[:30])


def test_perturbed_episodes_equal_upstream(reference, monkeypatch):
    fake = _Uuid()
    monkeypatch.setattr(uuid, "uuid4", fake)
    counts = {"init": 0, "calls": 0, "assertions": 0}
    mismatches: list[str] = []
    for name, job in PERTURBATIONS.items():
        _compare(run_ours(job, fake), reference["perturbations"][name], name, counts, mismatches)
    errors = sum(1 for r in reference["perturbations"].values() for c in r["calls"] if c.get("error"))
    print(
        f"\ntelecom perturbations: {len(PERTURBATIONS)} episodes; init actions {counts['init']}, calls "
        f"{counts['calls']} ({errors} tool errors), assertions {counts['assertions']}; "
        f"mismatches {len(mismatches)}"
    )
    assert not mismatches, "\n".join(mismatches[:30])
