"""Telecom domain: verified hashes, the phone simulation, user tools, sync, task sets, policies and solo.

Expected values come from the telecom reference (tau2-telecom.md §3-§14, numbers marked verified there)
and tau2-engine.md §3.6; the differential test (test_telecom_reference.py) compares everything else with
upstream run in the same test.
"""

from __future__ import annotations

import pytest

from tau2_gym import load_domain
from tau2_gym.core.environment import Environment
from tau2_gym.core.messages import ToolCall
from tau2_gym.core.tasks import EnvAssertion, EnvFunctionCall
from tau2_gym.core.tools import Toolkit, ToolType, tool
from tau2_gym.domains.telecom.tools import TelecomTools
from tau2_gym.domains.telecom.user_tools import TelecomUserTools
from tau2_gym.scoring.rebuild import gold_environment, initial_environment

AGENT_HASH = "304cf5ef059852e117ea801ab9a5efc24c9713ec887679dc2e30acceb4b6742d"
USER_HASH = "e1f3a8637388808221228ff3f87294444e6b64caf721f5eb243a85d0a9380b28"
DEFAULT_BAR = "Status Bar: 📶³ Good | 5G | 📱 Data Enabled | 🔋 80%"
SEARCHED_BAR = "Status Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔋 80%"
NO_SIGNAL_BAR = "Status Bar: 📵 No Signal | 📵 Data Disabled | 🔋 80%"
FAST = "Speed Test Result: 275.00 Mbps (Excellent). Connection is very fast."
DEFAULT_SPEED = "Speed Test Result: 220.00 Mbps (Excellent). Connection is very fast."
NO_CONNECTION = "Speed test failed: No Connection."
ROAMING_TASK = "[mobile_data_issue]user_abroad_roaming_enabled_off[PERSONA:None]"
OVERDUE_TASK = "[service_issue]overdue_bill_suspension[PERSONA:Easy]"


@pytest.fixture(scope="module")
def telecom():
    return load_domain("telecom")


@pytest.fixture()
def env(telecom):
    """A phone that belongs to John Smith (sync active), otherwise at the initial state."""
    e = telecom.make_environment()
    e.run_env_function_call(
        EnvFunctionCall(
            env_type="user", func_name="set_user_info", arguments={"name": "John Smith", "phone_number": "555-123-2002"}
        )
    )
    return e


def user(env: Environment, name: str, **arguments):
    msg = env.get_response(ToolCall(id="u", name=name, arguments=arguments, requestor="user"))
    return msg.content


def agent(env: Environment, name: str, **arguments):
    msg = env.get_response(ToolCall(id="a", name=name, arguments=arguments, requestor="assistant"))
    return msg.content


def helper(env: Environment, func: str, env_type: str = "user", **arguments):
    return env.run_env_function_call(EnvFunctionCall(env_type=env_type, func_name=func, arguments=arguments))


def check(env: Environment, func: str, env_type: str = "user", **arguments) -> bool:
    return env.run_env_assertion(
        EnvAssertion(env_type=env_type, func_name=func, arguments=arguments), raise_assertion_error=False
    )


def line(env: Environment, line_id: str) -> dict:
    return next(x for x in env.tools.db.lines if x["line_id"] == line_id)


def bill(env: Environment, bill_id: str) -> dict:
    return next(x for x in env.tools.db.bills if x["bill_id"] == bill_id)


# ------------------------------------------------------------------------------------ DB and hashes


@pytest.mark.parametrize("name", ["telecom", "telecom-workflow"])
def test_initial_hashes_equal_verified_values(name):
    env = load_domain(name).make_environment()
    assert env.get_db_hash() == AGENT_HASH
    assert env.get_user_db_hash() == USER_HASH


def test_seed_db_matches_reference_counts(telecom):
    db = telecom.base_db.data
    assert [len(db[k]) for k in ("plans", "customers", "lines", "bills", "devices")] == [5, 4, 9, 6, 9]
    # the hash prints datetimes with a space, as str(datetime) does
    assert '"created_at": "2025-01-15 10:30:00"' in telecom.make_environment().tools.db.canonical_json()


def test_named_small_task_user_hashes_after_init_and_gold(telecom):
    task = telecom.task(ROAMING_TASK, "telecom_small")
    init = initial_environment(telecom, task)
    assert init.get_user_db_hash().startswith("0225958c9329708d")
    assert init.get_db_hash() == AGENT_HASH
    gold = gold_environment(telecom, task)
    assert gold.get_user_db_hash().startswith("0246e41b80129883")
    assert gold.get_db_hash() == AGENT_HASH


def test_episode_writes_never_touch_the_shared_base(telecom):
    before = telecom.base_db.hash_from_scratch(), telecom.user_base_db.hash_from_scratch()
    env = initial_environment(telecom, telecom.task(OVERDUE_TASK, "telecom_small"))
    agent(env, "refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2.0)
    user(env, "toggle_airplane_mode")
    user(env, "grant_app_permission", app_name="browser", permission="sms")
    assert (telecom.base_db.hash_from_scratch(), telecom.user_base_db.hash_from_scratch()) == before
    assert telecom.make_environment().get_user_db_hash() == USER_HASH


# ------------------------------------------------------------------------------- §14 conformance


def test_default_phone_state(env):
    assert user(env, "check_status_bar") == DEFAULT_BAR
    assert user(env, "run_speed_test") == DEFAULT_SPEED
    assert user(env, "can_send_mms") == "Your messaging app can send MMS messages."


def _probe(env):
    return user(env, "check_status_bar"), user(env, "run_speed_test"), user(env, "can_send_mms")


# (task id, before: (bar or None, speed prefix), after: (bar or None, speed prefix)) -- tau2-telecom.md §14
CONFORMANCE = [
    (ROAMING_TASK, (None, NO_CONNECTION), (None, FAST)),
    ("[mobile_data_issue]user_abroad_roaming_disabled_on[PERSONA:Easy]", (None, NO_CONNECTION), (None, FAST)),
    ("[mobile_data_issue]user_abroad_roaming_disabled_off[PERSONA:Hard]", (None, NO_CONNECTION), (None, FAST)),
    (
        "[mobile_data_issue]data_saver_mode_on[PERSONA:Easy]",
        (None, "Speed Test Result: 44.00 Mbps (Good)"),
        (None, DEFAULT_SPEED),
    ),
    (
        "[mobile_data_issue]bad_network_preference[PERSONA:Hard]",
        ("Status Bar: 📶¹ Poor | 2G | 📱 Data Enabled | 🔋 80%", "Speed Test Result: 0.05 Mbps (Very Poor)"),
        (SEARCHED_BAR, FAST),
    ),
    (
        "[mobile_data_issue]bad_vpn[PERSONA:None]",
        (None, "Speed Test Result: 22.00 Mbps (Fair)"),
        (DEFAULT_BAR, DEFAULT_SPEED),
    ),
    ("[mobile_data_issue]data_usage_exceeded[PERSONA:Easy]", (None, NO_CONNECTION), (None, DEFAULT_SPEED)),
    (
        "[service_issue]airplane_mode_on[PERSONA:None]",
        ("Status Bar: ✈️ Airplane Mode | 🔋 80%", NO_CONNECTION),
        (SEARCHED_BAR, FAST),
    ),
    ("[service_issue]unseat_sim_card[PERSONA:Easy]", (NO_SIGNAL_BAR, NO_CONNECTION), (SEARCHED_BAR, FAST)),
    ("[service_issue]break_apn_settings[PERSONA:None]", (NO_SIGNAL_BAR, NO_CONNECTION), (SEARCHED_BAR, FAST)),
    (OVERDUE_TASK, (NO_SIGNAL_BAR, NO_CONNECTION), (SEARCHED_BAR, FAST)),
    ("[service_issue]lock_sim_card_pin[PERSONA:Hard]", (NO_SIGNAL_BAR, NO_CONNECTION), (NO_SIGNAL_BAR, NO_CONNECTION)),
    (
        "[service_issue]contract_end_suspension[PERSONA:Hard]",
        (NO_SIGNAL_BAR, NO_CONNECTION),
        (NO_SIGNAL_BAR, NO_CONNECTION),
    ),
]


@pytest.mark.parametrize("task_id,before,after", CONFORMANCE, ids=[c[0] for c in CONFORMANCE])
def test_small_task_phone_before_and_after_gold_plan(telecom, task_id, before, after):
    task = telecom.task(task_id, "telecom_small")
    env = initial_environment(telecom, task)
    bar, speed, _ = _probe(env)
    assert before[0] is None or bar == before[0]
    assert speed.startswith(before[1])
    for a in task.evaluation_criteria.actions:
        msg = env.get_response(ToolCall(id=a.action_id, name=a.name, arguments=a.arguments, requestor=a.requestor))
        assert not msg.error, msg.content
    bar, speed, _ = _probe(env)
    assert after[0] is None or bar == after[0]
    assert speed.startswith(after[1])
    for assertion in task.evaluation_criteria.env_assertions:
        assert env.run_env_assertion(assertion, raise_assertion_error=False), assertion


def test_every_small_task_fails_at_init_except_transfer_tasks_and_passes_after_gold(telecom):
    """Gold actions through get_response (sync after each); the ACTION tasks already pass at init."""
    for task in telecom.tasks("telecom_small"):
        crit = task.evaluation_criteria
        init_ok = all(
            initial_environment(telecom, task).run_env_assertion(a, raise_assertion_error=False)
            for a in crit.env_assertions
        )
        env = initial_environment(telecom, task)
        for a in crit.actions:  # as in a conversation: a sync after every call
            env.get_response(ToolCall(id=a.action_id, name=a.name, arguments=a.arguments, requestor=a.requestor))
        assert all(env.run_env_assertion(a, raise_assertion_error=False) for a in crit.env_assertions), task.id
        assert init_ok == ("ACTION" in [b.value for b in crit.reward_basis]), task.id


def test_two_g_phone_cannot_send_mms(telecom):
    env = initial_environment(telecom, telecom.task("[mms_issue]bad_network_preference[PERSONA:None]", "telecom_small"))
    assert user(env, "can_send_mms") == "Your messaging app cannot send MMS messages."
    assert user(env, "set_network_mode_preference", mode="4g_5g_preferred").startswith(
        "Preferred Network Mode set to: 4g_5g_preferred\n" + SEARCHED_BAR
    )
    assert user(env, "can_send_mms") == "Your messaging app can send MMS messages."


# ------------------------------------------------------------------------------ user tools: effects


def test_airplane_mode_drops_radio_wifi_and_vpn_and_search_restores_5g(env):
    user(env, "toggle_wifi")
    user(env, "connect_vpn")
    assert user(env, "toggle_airplane_mode") == "Airplane Mode is now ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 80%"
    d = env.user_tools.db.device
    assert (d["network_connection_status"], d["vpn_connected"], d["vpn_details"]) == ("no_service", False, None)
    assert user(env, "toggle_wifi") == (
        "Cannot change Wi-Fi settings while Airplane Mode is ON.\nStatus Bar: ✈️ Airplane Mode | 🔋 80%"
    )
    assert user(env, "toggle_airplane_mode") == "Airplane Mode is now OFF.\n" + SEARCHED_BAR
    assert user(env, "run_speed_test") == FAST
    assert check(env, "assert_airplane_mode_status", expected_status=False)


@pytest.mark.parametrize(
    "mode,bar,speed",
    [
        (
            "4g_only",
            "📶³ Good | 4G",
            "Speed Test Result: 44.00 Mbps (Good). Connection is good for most activities, including HD streaming.",
        ),
        (
            "3g_only",
            "📶² Fair | 3G",
            "Speed Test Result: 1.50 Mbps (Poor). Connection is slow. Web browsing may be "
            "sluggish, streaming difficult.",
        ),
        (
            "2g_only",
            "📶¹ Poor | 2G",
            "Speed Test Result: 0.05 Mbps (Very Poor). Connection is very slow. Basic web browsing might be difficult.",
        ),
        ("4g_5g_preferred", "📶⁴ Excellent | 5G", FAST),
    ],
)
def test_network_mode_preference_sets_technology_signal_and_speed(env, mode, bar, speed):
    out = user(env, "set_network_mode_preference", mode=mode)
    assert out == f"Preferred Network Mode set to: {mode}\nStatus Bar: {bar} | 📱 Data Enabled | 🔋 80%"
    assert user(env, "check_network_mode_preference") == f"Network Mode Preference: {mode}"
    assert user(env, "run_speed_test") == speed


def test_invalid_network_mode_is_a_normal_reply_without_search(env):
    out = user(env, "set_network_mode_preference", mode="5g_only")
    assert out == (
        "Failed to set network mode: '5g_only' is not a valid option. Please use one of: "
        "4g_5g_preferred, 4g_only, 3g_only, 2g_only\n" + DEFAULT_BAR
    )


def test_non_string_mode_is_stored_and_breaks_like_upstream(env):
    msg = env.get_response(
        ToolCall(id="x", name="set_network_mode_preference", arguments={"mode": 5}, requestor="user")
    )
    assert (msg.content, msg.error) == ("Error: 'int' object has no attribute 'value'", True)
    assert env.user_tools.db.device["network_mode_preference"] == 5  # stored as given; the search fell back to 4G
    assert user(env, "check_status_bar").startswith("Status Bar: 📶³ Good | 4G")
    assert user(env, "check_network_mode_preference") == "Error: 'int' object has no attribute 'value'"


def test_sim_reseat_fixes_missing_but_not_locked(env):
    helper(env, "unseat_sim_card")
    assert user(env, "check_sim_status") == "No SIM card detected in the phone."
    assert user(env, "reseat_sim_card") == "SIM card re-seated successfully.\n" + SEARCHED_BAR
    helper(env, "lock_sim_card", mode="pin")
    assert user(env, "check_sim_status") == "The SIM card is locked with a PIN code."
    assert user(env, "reseat_sim_card") == "SIM card re-seated successfully.\n" + NO_SIGNAL_BAR
    assert check(env, "assert_service_status", expected_status="no_service")


def test_network_status_lists_nine_facts(env):
    assert user(env, "check_network_status") == (
        "Airplane Mode: OFF\nSIM Card Status: active\nCellular Connection: connected\nCellular Signal: good\n"
        "Cellular Network Type: 5G\nMobile Data Enabled: Yes\nData Roaming Enabled: No\nWi-Fi Radio: OFF\n"
        "Wi-Fi Connected: No"
    )


def test_data_switch_and_saver(env):
    assert (
        user(env, "toggle_data")
        == "Mobile Data is now OFF.\nStatus Bar: 📶⁴ Excellent | 5G | 📵 Data Disabled | 🔋 80%"
    )
    assert user(env, "run_speed_test") == NO_CONNECTION
    assert not check(env, "assert_mobile_data_status", expected_status=True)
    user(env, "toggle_data")
    assert user(env, "toggle_data_saver_mode") == (
        "Data Saver Mode is now ON.\nStatus Bar: 📶⁴ Excellent | 5G | 📱 Data Enabled | 🔽 Data Saver | 🔋 80%"
    )
    assert user(env, "check_data_restriction_status") == "Data Saver mode is ON (limits data usage)."
    assert user(env, "run_speed_test").startswith("Speed Test Result: 55.00 Mbps (Good)")
    assert not check(env, "assert_internet_speed", expected_speed=200, expected_desc="excellent")
    assert check(env, "assert_internet_not_excellent")


def test_roaming_needs_phone_switch_and_line_permission_abroad(env):
    helper(env, "set_user_location", abroad=True)
    assert user(env, "run_speed_test") == NO_CONNECTION  # phone roaming off
    assert user(env, "toggle_roaming").startswith("Data Roaming is now ON.")
    assert user(env, "run_speed_test") == FAST  # L1002 allows roaming
    assert check(env, "assert_mobile_roaming_status", expected_status=True)
    assert agent(env, "disable_roaming", customer_id="C1001", line_id="L1002") == "Roaming disabled successfully"
    assert env.user_tools.db.surroundings["roaming_allowed"] is False  # mirrored by sync at once
    assert user(env, "run_speed_test") == NO_CONNECTION
    assert agent(env, "enable_roaming", customer_id="C1001", line_id="L1002") == "Roaming enabled successfully"
    assert agent(env, "enable_roaming", customer_id="C1001", line_id="L1002") == "Roaming was already enabled"
    assert user(env, "run_speed_test") == FAST


def test_apn_break_reset_reboot_and_direct_set(env):
    helper(env, "break_apn_settings")
    assert user(env, "check_apn_settings").startswith("Current APN Name: broken\n")
    assert user(env, "reset_apn_settings") == "APN settings will reset at reboot.\n" + NO_SIGNAL_BAR
    assert user(env, "reboot_device") == ("Resetting APN settings...\nRestarting network services...\n" + SEARCHED_BAR)
    helper(env, "break_apn_settings")
    assert user(env, "set_apn_settings", apn_settings={}) == "APN settings set to: internet\n" + SEARCHED_BAR
    assert user(env, "reboot_device") == "Restarting network services...\n" + SEARCHED_BAR


def test_apn_settings_are_validated_like_a_model(env):
    msg = env.get_response(
        ToolCall(id="x", name="set_apn_settings", arguments={"apn_settings": {"foo": 1}}, requestor="user")
    )
    assert msg.error and msg.content.startswith("Error: 1 validation error for APNSettings\nfoo\n")
    msg = env.get_response(
        ToolCall(id="x", name="set_apn_settings", arguments={"apn_settings": "internet"}, requestor="user")
    )
    assert (msg.content, msg.error) == ("Error: 'str' object has no attribute 'apn_name'", True)
    # the wrong-typed value is now the APN record; upstream then fails on every APN access
    assert user(env, "check_apn_settings") == "Error: 'str' object has no attribute 'model_copy'"
    assert user(env, "toggle_data") == "Error: 'str' object has no attribute 'apn_name'"
    assert user(env, "set_apn_settings", apn_settings={"apn_name": "internet"}).startswith("APN settings set to")


def test_set_apn_settings_called_with_a_model_as_upstreams_test_does(env):
    """Upstream's test_set_apn_settings: the toolkit method takes an APNSettings model or its dict alike."""
    from tau2_gym.domains.telecom.user_data_model import APNNames, APNSettings

    twin = load_domain("telecom").make_environment()
    twin.run_env_function_call(
        EnvFunctionCall(
            env_type="user", func_name="set_user_info", arguments={"name": "John Smith", "phone_number": "555-123-2002"}
        )
    )
    settings = APNSettings(
        apn_name=APNNames.INTERNET, mmsc_url="http://mms.new.com", mms_apn="mms", reset_at_reboot=False
    )
    result = env.user_tools.set_apn_settings(settings)
    assert result == "APN settings set to: internet\n" + SEARCHED_BAR
    device = env.user_tools.db.device
    assert device["active_apn_settings"]["apn_name"] == "internet"
    assert device["active_apn_settings"]["mmsc_url"] == "http://mms.new.com"
    assert device["network_connection_status"] == "connected"  # the network search ran
    assert settings.apn_name is APNNames.INTERNET  # the caller's model is not changed
    as_dict = twin.user_tools.set_apn_settings(
        {"apn_name": APNNames.INTERNET, "mmsc_url": "http://mms.new.com", "mms_apn": "mms", "reset_at_reboot": False}
    )
    assert as_dict == result and twin.get_user_db_hash() == env.get_user_db_hash()
    assert user(env, "check_apn_settings") == user(twin, "check_apn_settings")
    # through the tool dispatch too, keyword or positional
    assert env.user_tools.use_tool("set_apn_settings", apn_settings=settings) == result
    assert env.user_tools.set_apn_settings(apn_settings=settings) == result
    assert twin.get_user_db_hash() == env.get_user_db_hash()


def test_mms_needs_mmsc_wifi_calling_off_and_permissions(env):
    helper(env, "break_apn_mms_setting")
    assert user(env, "check_apn_settings") == (
        "Current APN Name: internet\nMMSC URL (for picture messages): "
        "Not Set\n(These are technical settings, usually best left "
        "unchanged.)"
    )
    assert not check(env, "assert_can_send_mms", expected_status=True)
    user(env, "set_apn_settings", apn_settings={})
    assert check(env, "assert_can_send_mms", expected_status=True)
    helper(env, "set_wifi_calling", enabled=True, mms_over_wifi=True)
    assert user(env, "check_wifi_calling_status") == "Wi-Fi Calling is currently turned ON."
    assert user(env, "can_send_mms") == "Your messaging app cannot send MMS messages."
    assert user(env, "toggle_wifi_calling") == "Wi-Fi Calling is now OFF.\n" + SEARCHED_BAR  # set_apn searched
    assert user(env, "can_send_mms") == "Your messaging app can send MMS messages."
    assert helper(env, "remove_app_permission", app_name="messaging", permission="storage") == (
        True,
        "Permission 'storage' removed from app 'messaging'.",
    )
    assert user(env, "check_app_permissions", app_name="messaging") == "App 'messaging' has permission for: sms, phone."
    assert user(env, "can_send_mms") == "Your messaging app cannot send MMS messages."
    assert user(env, "grant_app_permission", app_name="messaging", permission="STORAGE") == (
        "Success. Permission 'storage' granted to app 'messaging'.\n" + SEARCHED_BAR
    )
    assert user(env, "can_send_mms") == "Your messaging app can send MMS messages."


def test_app_tools_replies(env):
    assert user(env, "check_installed_apps") == "The following apps are installed on the phone: messaging, browser"
    assert user(env, "check_app_status", app_name="browser") == (
        "Status for App: browser\n - Permissions Granted:\n   - storage\n   - network"
    )
    assert user(env, "check_app_status", app_name="camera") == "App 'camera' not found on this phone."
    assert user(env, "grant_app_permission", app_name="messaging", permission="camera") == (
        "Error. Permission 'camera' not tracked for app 'messaging', available permissions: "
        "['sms', 'storage', 'phone', 'network']\n" + DEFAULT_BAR
    )
    assert user(env, "grant_app_permission", app_name="camera", permission="sms") == (
        "Error. App 'camera' not found. Cannot grant permission.\n" + DEFAULT_BAR
    )
    assert user(env, "check_app_status", app_name=["x"]) == "Error: unhashable type: 'list'"


def test_wifi_never_connects(env):
    assert user(env, "toggle_wifi") == "Wi-Fi is now ON.\n" + DEFAULT_BAR
    assert user(env, "check_wifi_status") == "Wi-Fi is ON but not connected to any network."
    assert user(env, "toggle_wifi") == "Wi-Fi is now OFF.\n" + DEFAULT_BAR
    assert user(env, "check_wifi_status") == "Wi-Fi is turned OFF."


def test_vpn_status_prints_the_enum_as_upstream_and_poor_vpn_slows_data(env):
    assert user(env, "check_vpn_status") == "VPN is turned OFF."
    assert user(env, "connect_vpn") == (
        "VPN connected successfully.\nStatus Bar: 📶³ Good | 5G | 📱 Data Enabled | 🔒 VPN Connected | 🔋 80%"
    )
    assert user(env, "connect_vpn") == "VPN already connected."
    assert user(env, "check_vpn_status") == (
        "VPN is ON and connected. Details: {'server_address': '192.168.1.1', 'protocol': 'OpenVPN', "
        "'server_performance': <PerformanceLevel.EXCELLENT: 'excellent'>}"
    )
    assert user(env, "disconnect_vpn") == "VPN disconnected successfully.\n" + DEFAULT_BAR
    assert user(env, "disconnect_vpn") == "No active VPN connection to disconnect.\n" + DEFAULT_BAR
    helper(env, "break_vpn")
    assert user(env, "run_speed_test").startswith("Speed Test Result: 22.00 Mbps (Fair)")


def test_vpn_default_is_per_environment_not_process_wide(telecom, env):
    """Pitfall 6 deviation: upstream leaks a degraded default across environments of one process."""
    helper(env, "break_vpn")
    user(env, "disconnect_vpn")
    user(env, "connect_vpn")  # same environment: the default object was degraded, as upstream
    assert "<PerformanceLevel.POOR: 'poor'>" in user(env, "check_vpn_status")
    fresh = telecom.make_environment()
    user(fresh, "connect_vpn")
    assert "<PerformanceLevel.EXCELLENT: 'excellent'>" in user(fresh, "check_vpn_status")


def test_user_tools_signature_errors_name_the_upstream_class(env):
    assert (
        user(env, "toggle_data", x=1) == "Error: TelecomUserTools.toggle_data() got an unexpected keyword argument 'x'"
    )
    assert agent(env, "get_customer_by_id") == (
        "Error: TelecomTools.get_customer_by_id() missing 1 required positional argument: 'customer_id'"
    )


def test_user_tools_are_not_agent_tools_outside_solo(env):
    msg = env.get_response(ToolCall(id="x", name="toggle_data", arguments={}, requestor="assistant"))
    assert (msg.content, msg.error) == ("Error: Tool 'toggle_data' not found.", True)


# -------------------------------------------------------------------------------- agent tools


def test_agent_lookup_tools(env):
    assert '"customer_id": "C1001"' in agent(env, "get_customer_by_phone", phone_number="555-123-2001")
    assert agent(env, "get_customer_by_phone", phone_number="1") == "Error: Customer with phone number 1 not found"
    assert agent(env, "get_customer_by_name", full_name="JOHN SMITH", dob="1985-06-15").startswith(
        '[{"customer_id": "C1001"'
    )
    assert agent(env, "get_customer_by_name", full_name="John Smith", dob="1985-06-16") == "[]"
    assert agent(env, "get_details_by_id", id="X1") == "Error: Unknown ID format or type: X1"
    assert agent(env, "get_details_by_id", id="L9") == "Error: Line with ID L9 not found"
    assert agent(env, "get_details_by_id", id="P1002") == (
        '{"plan_id": "P1002", "name": "Premium Plan", "data_limit_gb": 15.0, "price_per_month": 65.0, '
        '"data_refueling_price_per_gb": 2.0}'
    )
    assert agent(env, "get_data_usage", customer_id="C1001", line_id="L1002") == (
        '{"line_id": "L1002", "data_used_gb": "8.7", "data_limit_gb": "15.0", "data_refueling_gb": "0.0", '
        '"cycle_end_date": "2025-02-28"}'
    )
    assert agent(env, "get_data_usage", customer_id="C1001", line_id="L1004") == (
        "Error: Line L1004 not found for customer C1001"
    )
    bills = agent(env, "get_bills_for_customer", customer_id="C1001", limit=2)
    assert bills.startswith('[{"bill_id": "B1003"') and bills.count('"bill_id"') == 2


def test_suspend_and_resume_line(env):
    out = agent(env, "suspend_line", customer_id="C1001", line_id="L1002", reason="travel")
    assert out.startswith(
        '{"message": "Line suspended successfully. $5/month holding fee will apply.", "line": {"line_id": "L1002"'
    )
    assert '"suspension_start_date": "2025-02-25"' in out
    assert env.user_tools.db.surroundings["line_active"] is False
    assert user(env, "check_status_bar") == DEFAULT_BAR  # sync never searches
    assert agent(env, "suspend_line", customer_id="C1001", line_id="L1002", reason="x") == (
        "Error: Line must be active to suspend"
    )
    assert agent(env, "resume_line", customer_id="C1001", line_id="L1002").startswith(
        '{"message": "Line resumed successfully"'
    )
    assert agent(env, "resume_line", customer_id="C1001", line_id="L1002") == "Error: Line must be suspended to resume"


def test_refuel_charges_the_draft_bill_and_clears_the_cap_at_once(env):
    helper(env, "set_data_usage", env_type="assistant", customer_id="C1001", line_id="L1002", data_used_gb=15.1)
    assert env.user_tools.db.surroundings["mobile_data_usage_exceeded"] is True
    assert user(env, "run_speed_test") == NO_CONNECTION
    assert agent(env, "refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2) == (
        '{"message": "Successfully added 2 GB of data for line L1002 for $4.00", "new_data_refueling_gb": "2.0", '
        '"charge": "4.0"}'
    )
    assert user(env, "run_speed_test") == DEFAULT_SPEED
    draft = bill(env, "B1003")
    assert draft["line_items"][-1] == {
        "description": "Data refueling: 2 GB at $2.0/GB",
        "amount": 4.0,
        "date": draft["line_items"][-1]["date"],
        "item_type": "Charge",
    }
    assert draft["total_due"] == 4.0
    assert check(
        env,
        "assert_data_refueling_amount",
        env_type="assistant",
        customer_id="C1001",
        line_id="L1002",
        expected_amount=2.0,
    )
    assert agent(env, "refuel_data", customer_id="C1001", line_id="L1002", gb_amount=0) == (
        "Error: Refuel amount must be positive"
    )
    assert agent(env, "refuel_data", customer_id="C1001", line_id="L1002", gb_amount="2") == (
        "Error: '<=' not supported between instances of 'str' and 'int'"
    )


def test_refuel_without_draft_bill_creates_next_month_bill(env):
    n_bills = len(env.tools.db.bills)
    agent(env, "refuel_data", customer_id="C1003", line_id="L1009", gb_amount=1.5)
    new = env.tools.db.bills[-1]
    assert len(env.tools.db.bills) == n_bills + 1 and new["bill_id"].startswith("B") and len(new["bill_id"]) == 9
    assert (
        str(new["period_start"]),
        str(new["period_end"]),
        str(new["due_date"]),
        new["total_due"],
        new["status"],
    ) == ("2025-03-01", "2025-03-31", "2025-03-15", 3.0, "Draft")


# ------------------------------------------------------------------------------------- sync


def test_bill_payment_is_written_back_to_the_agent_db_through_sync(telecom):
    env = initial_environment(telecom, telecom.task(OVERDUE_TASK, "telecom_small"))
    assert bill(env, "B1234321")["status"] == "Overdue"
    assert user(env, "check_payment_request") == "No payment request has been made."
    assert user(env, "make_payment") == "You do not have a payment request."
    assert agent(env, "send_payment_request", customer_id="C1001", bill_id="B1234321") == (
        "Payment request sent to the customer for bill B1234321"
    )
    assert env.user_tools.db.surroundings["payment_request"] == {
        "bill_id": "B1234321",
        "amount_due": 65.0,
        "paid": False,
    }
    assert agent(env, "send_payment_request", customer_id="C1001", bill_id="B1002") == (
        "Error: A bill is already awaiting payment for this customer"
    )
    assert user(env, "check_payment_request") == "You have a payment request for bill B1234321 of 65.0 USD."
    assert user(env, "make_payment") == "Payment of 65.0 USD has been made for bill B1234321."
    assert bill(env, "B1234321")["status"] == "Paid"
    assert env.user_tools.db.surroundings["payment_request"] is None
    assert check(env, "assert_no_overdue_bill", env_type="assistant", overdue_bill_id="B1234321")
    agent(env, "resume_line", customer_id="C1001", line_id="L1002")
    assert user(env, "check_status_bar") == NO_SIGNAL_BAR  # the line is active, the phone has not searched
    assert user(env, "reboot_device") == "Restarting network services...\n" + SEARCHED_BAR
    assert check(env, "assert_service_status", expected_status="connected")


def test_sync_is_a_no_op_without_phone_number_and_fails_for_unknown_numbers(telecom):
    env = telecom.make_environment()
    agent(env, "suspend_line", customer_id="C1001", line_id="L1002", reason="x")
    assert env.user_tools.db.surroundings["line_active"] is True  # nobody to mirror to yet
    with pytest.raises(ValueError, match="Line with phone number 555-000-0000 not found"):
        helper(env, "set_user_info", name="X", phone_number="555-000-0000")
    msg = env.get_response(ToolCall(id="x", name="toggle_data", arguments={}, requestor="user"))
    assert (msg.content, msg.error) == ("Error: Line with phone number 555-000-0000 not found", True)
    assert env.user_tools.db.device["data_enabled"] is False  # the mutation stays, as upstream


def test_suspension_helper_adds_overdue_bill_and_checks(env):
    out = helper(
        env,
        "suspend_line_for_overdue_bill",
        env_type="assistant",
        customer_id="C1001",
        line_id="L1002",
        new_bill_id="B42",
        contract_ended=True,
    )
    assert out == "Line L1002 suspended for unpaid bill B42. Contract ended: True"
    b = bill(env, "B42")
    assert (str(b["period_start"]), str(b["due_date"]), b["total_due"], b["status"]) == (
        "2025-01-01",
        "2025-01-15",
        65.0,
        "Overdue",
    )
    assert str(line(env, "L1002")["contract_end_date"]) == "2025-01-31"
    assert check(env, "assert_overdue_bill_exists", env_type="assistant", customer_id="C1001", overdue_bill_id="B42")
    assert check(
        env,
        "assert_line_status",
        env_type="assistant",
        customer_id="C1001",
        line_id="L1002",
        expected_status="Suspended",
    )
    with pytest.raises(ValueError, match="Line must be active"):
        helper(
            env,
            "suspend_line_for_overdue_bill",
            env_type="assistant",
            customer_id="C1001",
            line_id="L1002",
            new_bill_id="B43",
            contract_ended=False,
        )


# ------------------------------------------------------------------------- task sets and policies


def test_task_sets_and_splits_have_documented_sizes(telecom):
    assert {s: len(telecom.tasks(split=s)) for s in ("base", "train", "test", "small", "full")} == {
        "base": 114,
        "train": 74,
        "test": 40,
        "small": 20,
        "full": 2285,
    }
    assert len(telecom.tasks()) == 114
    assert len(telecom.tasks("telecom_full")) == 2285
    small = telecom.tasks("telecom_small")
    assert len(small) == 20
    assert small == telecom.tasks(split="small")  # tasks_small.json holds the "small" split of tasks.json
    workflow = load_domain("telecom-workflow")
    assert [t.id for t in workflow.tasks()] == [t.id for t in telecom.tasks()]


def test_full_set_composition(telecom):
    tasks = telecom.tasks("telecom_full")
    intents = [t.id.split("]")[0][1:] for t in tasks]
    assert (intents.count("mms_issue"), intents.count("mobile_data_issue"), intents.count("service_issue")) == (
        1984,
        254,
        47,
    )
    assert sum("ACTION" in [b.value for b in t.evaluation_criteria.reward_basis] for t in tasks) == 32
    assert all(t.initial_state.initialization_actions[0].func_name == "set_user_info" for t in tasks)


def _read(telecom, name):
    return (telecom.source.domain_dir("telecom") / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name,solo,main,tech",
    [
        ("telecom", False, "main_policy.md", "tech_support_manual.md"),
        ("telecom", True, "main_policy_solo.md", "tech_support_manual.md"),
        ("telecom-workflow", False, "main_policy.md", "tech_support_workflow.md"),
        ("telecom-workflow", True, "main_policy_solo.md", "tech_support_workflow_solo.md"),
    ],
)
def test_policy_wraps_main_and_tech_documents(name, solo, main, tech):
    dom = load_domain(name)
    expected = (
        f"<main_policy>\n{_read(dom, main)}\n</main_policy>\n"
        f"<tech_support_policy>\n{_read(dom, tech)}\n</tech_support_policy>"
    )
    assert dom.policy(solo) == expected
    assert dom.make_environment(solo=solo).get_policy() == expected


# ---------------------------------------------------------------------------------------- solo


def test_solo_agent_gets_agent_and_user_tools_and_routes_user_names(telecom):
    env = initial_environment(telecom, telecom.task(ROAMING_TASK, "telecom_small"), solo=True)
    names = [s["function"]["name"] for s in env.tool_schemas()]
    assert len(names) == 43 and len(set(names)) == 43
    assert names[:13] == list(TelecomTools.tool_names) and names[13:] == list(TelecomUserTools.tool_names)
    msg = env.get_response(ToolCall(id="s", name="toggle_roaming", arguments={}, requestor="assistant"))
    assert msg.content.startswith("Data Roaming is now ON.") and not msg.error
    msg = env.get_response(ToolCall(id="s", name="run_speed_test", arguments={}, requestor="user"))
    assert (msg.content, msg.error) == ("Error: User tool calls are not allowed in solo mode", True)
    assert agent(env, "run_speed_test") == FAST


def test_solo_overlap_check_rejects_shared_tool_names(telecom):
    class Clashing(Toolkit):
        @tool(ToolType.READ)
        def refuel_data(self) -> str:
            return ""

    env = telecom.make_environment()
    env.user_tools = Clashing()
    with pytest.raises(ValueError, match="Tool names overlap: {'refuel_data'}"):
        env.set_solo_mode(True)


def test_tool_inventory_and_types():
    assert len(TelecomTools.tool_names) == 13 and len(TelecomUserTools.tool_names) == 30
    assert not set(TelecomTools.tool_names) & set(TelecomUserTools.tool_names)
    reads = [n for n in TelecomUserTools.tool_names if TelecomUserTools.tool_type(n) == ToolType.READ]
    assert len(reads) == 15
    assert not TelecomTools.mutates_state("transfer_to_human_agents")
    assert TelecomUserTools.mutates_state("make_payment") and not TelecomUserTools.mutates_state("can_send_mms")
