"""User tools of the telecom domain (30): the simulated phone, plus init helpers and assertions.

The device and surroundings are the plain dump of :class:`TelecomUserDB` (enums as their values). Upstream
keeps enums as enum objects and reaches fields by attribute; where a tool can have stored a value of the
wrong type (``set_network_mode_preference`` with a non-string mode, ``set_apn_settings`` with a non-dict),
later attribute accesses fail upstream with ``'<type>' object has no attribute '<name>'`` -- the helpers
``_attr_of`` / ``_enum_value`` raise the same error here.

VPN deviation (documented on purpose): upstream's ``connect_vpn`` installs a *class-level* default
``VpnDetails`` object and ``break_vpn`` degrades that shared object, so after one ``bad_vpn`` episode every
later connect in the same process yields a poor VPN. Here each toolkit (one per environment) owns its
default object, which reproduces upstream in a fresh process -- including the in-episode aliasing: a
reconnect after ``break_vpn`` in the same environment still gets the degraded details.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Tuple, Union

from tau2_gym.core.db import plain
from tau2_gym.core.tools import Toolkit, ToolType, tool
from tau2_gym.domains.telecom.user_data_model import (
    APNNames,
    APNSettings,
    NetworkModePreference,
    NetworkStatus,
    NetworkTechnology,
    PaymentRequest,
    PerformanceLevel,
    SimStatus,
)

_SIGNAL_ICONS = {
    "none": "📵 No Signal",
    "poor": "📶¹ Poor",
    "fair": "📶² Fair",
    "good": "📶³ Good",
    "excellent": "📶⁴ Excellent",
}
_TECH_SPEED = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0), "none": (0.0, 0.0)}
_SIGNAL_FACTOR = {"poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0, "none": 0.0}
_SPEED_ADVICE = {
    "Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
    "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
    "Fair": "Connection is okay for web browsing and some standard definition streaming.",
    "Good": "Connection is good for most activities, including HD streaming.",
    "Excellent": "Connection is very fast.",
}
_SIM_TEXT = {
    "active": "Your SIM card is active and working.",
    "missing": "No SIM card detected in the phone.",
    "locked_pin": "The SIM card is locked with a PIN code.",
    "locked_puk": "The SIM card is locked with a PUK code.",
}
_MODES = ", ".join(m.value for m in NetworkModePreference)

_SEARCHING = NetworkStatus.SEARCHING.value
_CONNECTED = NetworkStatus.CONNECTED.value
_NO_SERVICE = NetworkStatus.NO_SERVICE.value
_NONE = "none"  # NetworkTechnology.NONE and SignalStrength.NONE
_BROKEN = APNNames.BROKEN.value


def _attr_of(obj: Any, name: str) -> Any:
    """A record standing in for an upstream model: anything else fails as attribute access would."""
    if type(obj) is not dict:
        raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")
    return obj


def _enum_value(value: Any) -> str:
    """Upstream's ``x.value`` on an enum field: our dump holds the value; a wrong-typed value has none."""
    if isinstance(value, str):
        return value
    raise AttributeError(f"'{type(value).__name__}' object has no attribute 'value'")


def _default_apn() -> dict:
    return plain(APNSettings().model_dump())


def _on_off(flag: Any) -> str:
    return "ON" if flag else "OFF"


class TelecomUserTools(Toolkit):
    """The user's phone. Class name and signatures are upstream's (they show in argument errors)."""

    def __init__(self, db: Any = None) -> None:
        super().__init__(db)
        # per-environment stand-in for upstream's class-level default (see the module docstring)
        self.default_vpn_details = {
            "server_address": "192.168.1.1",
            "protocol": "OpenVPN",
            "server_performance": PerformanceLevel.EXCELLENT.value,
        }

    @property
    def device(self) -> dict:
        return self.db.device

    @property
    def surroundings(self) -> dict:
        return self.db.surroundings

    # ------------------------------------------------------------------ user info (init helpers)

    def set_user_info(self, name: str, phone_number: str) -> None:
        """Init helper: who the user is; sync starts mirroring the line once the number is set."""
        s = self.db.surroundings
        s["name"] = name
        s["phone_number"] = phone_number

    def set_user_location(self, abroad: bool) -> None:
        """Init helper: put the user abroad (or home)."""
        self.db.surroundings["is_abroad"] = abroad

    # ------------------------------------------------------------------ status bar

    @tool(ToolType.READ)
    def check_status_bar(self) -> str:
        """What the phone's status bar shows."""
        return f"Status Bar: {self._check_status_bar()}"

    def _check_status_bar(self) -> str:
        d = self.db.device
        items = []
        if d["airplane_mode"]:
            items.append("✈️ Airplane Mode")
        else:
            items.append(_SIGNAL_ICONS.get(d["network_signal_strength"], "📵 No Signal"))
            tech = d["network_technology_connected"]
            if tech != _NONE:
                items.append(tech)
            if d["data_enabled"] and tech != _NONE:
                items.append("📱 Data Enabled")
                if d["data_saver_mode"]:
                    items.append("🔽 Data Saver")
            else:
                items.append("📵 Data Disabled")
        if d["wifi_enabled"] and d["wifi_connected"]:
            items.append(f"📡 Connected to {d['wifi_ssid']}" if d["wifi_ssid"] else "📡 Enabled")
        if d["vpn_connected"]:
            items.append("🔒 VPN Connected")
        items.append(f"🔋 {d['battery_level']}%")
        return " | ".join(items)

    def _bar(self) -> str:
        return f"\nStatus Bar: {self._check_status_bar()}"

    # ------------------------------------------------------------------ network

    @tool(ToolType.READ)
    def check_network_status(self) -> str:
        """Radio, SIM, cellular and Wi-Fi state, one fact per line."""
        d = self.db.device
        lines = [
            f"Airplane Mode: {_on_off(d['airplane_mode'])}",
            f"SIM Card Status: {self._check_sim_status()}",
            f"Cellular Connection: {d['network_connection_status']}",
            f"Cellular Signal: {d['network_signal_strength']}",
            f"Cellular Network Type: {d['network_technology_connected']}",
            f"Mobile Data Enabled: {'Yes' if d['data_enabled'] else 'No'}",
            f"Data Roaming Enabled: {'Yes' if d['roaming_enabled'] else 'No'}",
            f"Wi-Fi Radio: {_on_off(d['wifi_enabled'])}",
            f"Wi-Fi Connected: {'Yes' if d['wifi_connected'] else 'No'}",
        ]
        if d["wifi_connected"]:
            lines.append(f"Connected Wi-Fi Network: {d['wifi_ssid']}")
        return "\n".join(lines)

    @tool(ToolType.READ)
    def check_network_mode_preference(self) -> str:
        """The preferred network mode."""
        return f"Network Mode Preference: {_enum_value(self.db.device['network_mode_preference'])}"

    @tool(ToolType.WRITE)
    def set_network_mode_preference(self, mode: Union[NetworkModePreference, str]) -> str:
        """Set the preferred network mode, then search for a network.

        Args:
            mode: One of the mode values.
        """
        valid = self._set_network_mode_preference(mode)
        if valid is None:
            return (
                f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: {_MODES}{self._bar()}"
            )
        return f"Preferred Network Mode set to: {_enum_value(valid)}{self._bar()}"

    def _set_network_mode_preference(self, mode: Any) -> Any:
        # upstream: only strings are converted (and may be rejected); anything else is stored as is
        try:
            if isinstance(mode, str):
                mode = NetworkModePreference(mode).value
            self.db.device["network_mode_preference"] = mode
            self.simulate_network_search()
            return mode
        except ValueError:
            return None

    def _get_mobile_data_working(self) -> bool:
        d = self.db.device
        s = self.db.surroundings
        if d["airplane_mode"] or d["network_signal_strength"] == _NONE:
            return False
        if d["network_connection_status"] == _NO_SERVICE:
            return False
        if s["is_abroad"]:
            if not d["roaming_enabled"] or not s["roaming_allowed"]:
                return False
        if not d["data_enabled"]:
            return False
        if s["mobile_data_usage_exceeded"]:
            return False
        return True

    @tool(ToolType.READ)
    def run_speed_test(self) -> str:
        """Measure the mobile download speed."""
        speed, desc = self._run_speed_test()
        if speed is None:
            return f"Speed test failed: {desc or 'Could not determine speed'}."
        return f"Speed Test Result: {speed:.2f} Mbps ({desc}). {_SPEED_ADVICE.get(desc, '')}"

    def _run_speed_test(self) -> Tuple[Optional[float], Optional[str]]:
        if not self._get_mobile_data_working():
            return None, "No Connection"
        d = self.db.device
        vpn = d["vpn_details"]
        if d["vpn_connected"] and vpn and _attr_of(vpn, "server_performance")["server_performance"] == "poor":
            factor = 0.1
        else:
            factor = 1.0
        if d["data_saver_mode"]:
            factor *= 0.2
        lo, hi = _TECH_SPEED.get(d["network_technology_connected"], (0.0, 0.0))
        signal = _SIGNAL_FACTOR.get(d["network_signal_strength"], 0.0)
        speed = round((lo + hi) / 2.0 * signal * factor, 2)
        if speed < 1:
            desc = "Very Poor"
        elif speed < 5:
            desc = "Poor"
        elif speed < 25:
            desc = "Fair"
        elif speed < 100:
            desc = "Good"
        else:
            desc = "Excellent"
        return speed, desc

    # ------------------------------------------------------------------ airplane mode

    @tool(ToolType.WRITE)
    def toggle_airplane_mode(self) -> str:
        """Flip airplane mode (on: drops Wi-Fi and VPN); then search for a network."""
        new_state = self._toggle_airplane_mode()
        return f"Airplane Mode is now {_on_off(new_state)}.{self._bar()}"

    def _toggle_airplane_mode(self) -> bool:
        d = self.db.device
        was_on = d["airplane_mode"]
        d["airplane_mode"] = not was_on
        if was_on:
            d["network_connection_status"] = _SEARCHING
            if d["wifi_enabled"]:
                d["wifi_connected"] = False
                d["wifi_ssid"] = None
                d["wifi_signal_strength"] = _NONE
        else:
            d["wifi_connected"] = False
            d["wifi_ssid"] = None
            d["wifi_signal_strength"] = _NONE
            if d["vpn_connected"]:
                self._disconnect_vpn()
        self.simulate_network_search()
        return d["airplane_mode"]

    def turn_airplane_mode_on(self) -> str:
        """Init helper: airplane mode on (through the toggle, so it searches)."""
        if not self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now ON."

    def turn_airplane_mode_off(self) -> str:
        """Init helper: airplane mode off (through the toggle)."""
        if self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now OFF."

    # ------------------------------------------------------------------ SIM

    @tool(ToolType.READ)
    def check_sim_status(self) -> str:
        """Whether the SIM is active, missing or locked."""
        status = self._check_sim_status()
        text = _SIM_TEXT.get(status)
        return text if text is not None else f"Unknown SIM status: {_enum_value(status)}"

    def _check_sim_status(self) -> str:
        d = self.db.device
        if d["sim_card_missing"]:
            return SimStatus.MISSING.value
        return d["sim_card_status"]

    @tool(ToolType.WRITE)
    def reseat_sim_card(self) -> str:
        """Take the SIM out and put it back; then search for a network."""
        return f"{self._reseat_sim_card()}{self._bar()}"

    def _reseat_sim_card(self) -> str:
        self.db.device["sim_card_missing"] = False
        self.simulate_network_search()
        return "SIM card re-seated successfully."

    def unseat_sim_card(self) -> str:
        """Init helper: remove the SIM (searches)."""
        self.db.device["sim_card_missing"] = True
        self.simulate_network_search()
        return "SIM card un-seated successfully."

    def lock_sim_card(self, mode: Literal["pin", "puk"]) -> str:
        """Init helper: lock the SIM with a PIN or PUK (searches)."""
        d = self.db.device
        if mode == "pin":
            d["sim_card_status"] = SimStatus.LOCKED_PIN.value
        elif mode == "puk":
            d["sim_card_status"] = SimStatus.LOCKED_PUK.value
        self.simulate_network_search()
        return f"SIM card locked successfully in {mode} mode."

    # ------------------------------------------------------------------ mobile data and roaming

    @tool(ToolType.WRITE)
    def toggle_data(self) -> str:
        """Flip the mobile-data switch; then search for a network."""
        return f"Mobile Data is now {_on_off(self._toggle_data())}.{self._bar()}"

    def _toggle_data(self) -> bool:
        d = self.db.device
        new_state = not d["data_enabled"]
        d["data_enabled"] = new_state
        self.simulate_network_search()
        return new_state

    def turn_data_on(self) -> str:
        """Init helper: data on (no search)."""
        self.db.device["data_enabled"] = True
        return "Data connection restored."

    def turn_data_off(self) -> str:
        """Init helper: data off (through the toggle, so it searches)."""
        if self._toggle_data():
            self._toggle_data()
        return "Data connection broken."

    @tool(ToolType.WRITE)
    def toggle_roaming(self) -> str:
        """Flip the phone's data-roaming switch; then search for a network."""
        return f"Data Roaming is now {_on_off(self._toggle_roaming())}.{self._bar()}"

    def _toggle_roaming(self) -> bool:
        d = self.db.device
        new_state = not d["roaming_enabled"]
        d["roaming_enabled"] = new_state
        self.simulate_network_search()
        return new_state

    def turn_roaming_on(self) -> str:
        """Init helper: phone roaming switch on (searches)."""
        if not self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now ON."

    def turn_roaming_off(self) -> str:
        """Init helper: phone roaming switch off (searches)."""
        if self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now OFF."

    @tool(ToolType.READ)
    def check_data_restriction_status(self) -> str:
        """Whether data saver is on."""
        if self.db.device["data_saver_mode"]:
            return "Data Saver mode is ON (limits data usage)."
        return "Data Saver mode is OFF."

    @tool(ToolType.WRITE)
    def toggle_data_saver_mode(self) -> str:
        """Flip data saver (no network search)."""
        return f"Data Saver Mode is now {_on_off(self._toggle_data_saver_mode())}.{self._bar()}"

    def _toggle_data_saver_mode(self) -> bool:
        d = self.db.device
        new_state = not d["data_saver_mode"]
        d["data_saver_mode"] = new_state
        return new_state

    def turn_data_saver_mode_on(self) -> str:
        """Init helper: data saver on."""
        if not self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now ON."

    def turn_data_saver_mode_off(self) -> str:
        """Init helper: data saver off."""
        if self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now OFF."

    # ------------------------------------------------------------------ APN

    @tool(ToolType.READ)
    def check_apn_settings(self) -> str:
        """APN name and MMSC URL."""
        apn = _attr_of(self.db.device["active_apn_settings"], "model_copy")
        name = _enum_value(apn["apn_name"]) or "Not Set"
        mmsc = apn["mmsc_url"] or "Not Set"
        return (
            f"Current APN Name: {name}\nMMSC URL (for picture messages): {mmsc}\n"
            "(These are technical settings, usually best left unchanged.)"
        )

    @tool(ToolType.WRITE)
    def set_apn_settings(self, apn_settings: Union[APNSettings, dict]) -> str:
        """Replace the APN settings with a new, validated set; then search for a network.

        Args:
            apn_settings: The new settings (missing keys take defaults).
        """
        if isinstance(apn_settings, dict):
            apn_settings = plain(APNSettings(**apn_settings).model_dump())
        self.db.device["active_apn_settings"] = apn_settings
        status = f"APN settings set to: {_enum_value(_attr_of(apn_settings, 'apn_name')['apn_name'])}"
        self.simulate_network_search()
        return f"{status}{self._bar()}"

    @tool(ToolType.WRITE)
    def reset_apn_settings(self) -> str:
        """Flag the APN settings for reset at the next reboot; then search for a network."""
        _attr_of(self.db.device["active_apn_settings"], "reset_at_reboot")["reset_at_reboot"] = True
        self.simulate_network_search()
        return f"APN settings will reset at reboot.{self._bar()}"

    def break_apn_settings(self) -> str:
        """Init helper: broken APN (searches -> no service)."""
        _attr_of(self.db.device["active_apn_settings"], "apn_name")["apn_name"] = _BROKEN
        self.simulate_network_search()
        assert self.db.device["network_connection_status"] == _NO_SERVICE
        return "APN settings broken. Please call reset_apn_settings() to fix."

    def break_apn_mms_setting(self) -> str:
        """Init helper: clear the MMSC URL (no search)."""
        _attr_of(self.db.device["active_apn_settings"], "mmsc_url")["mmsc_url"] = None
        assert not self._can_send_mms()
        return "APN MMS setting broken. Please call reset_apn_settings() to fix."

    # ------------------------------------------------------------------ Wi-Fi and Wi-Fi calling

    @tool(ToolType.READ)
    def check_wifi_status(self) -> str:
        """Wi-Fi radio and connection."""
        d = self.db.device
        if not d["wifi_enabled"]:
            return "Wi-Fi is turned OFF."
        if d["wifi_connected"]:
            return (
                f"Wi-Fi is ON and connected to '{d['wifi_ssid']}'. "
                f"Signal strength: {_enum_value(d['wifi_signal_strength'])}."
            )
        return "Wi-Fi is ON but not connected to any network."

    @tool(ToolType.WRITE)
    def toggle_wifi(self) -> str:
        """Flip the Wi-Fi radio (refused in airplane mode); it never connects."""
        new_state = self._toggle_wifi()
        if new_state is None:
            return f"Cannot change Wi-Fi settings while Airplane Mode is ON.{self._bar()}"
        return f"Wi-Fi is now {_on_off(new_state)}.{self._bar()}"

    def _toggle_wifi(self) -> Optional[bool]:
        d = self.db.device
        if d["airplane_mode"]:
            return None
        new_state = not d["wifi_enabled"]
        d["wifi_enabled"] = new_state
        if not new_state:
            d["wifi_connected"] = False
            d["wifi_ssid"] = None
            d["wifi_signal_strength"] = _NONE
        return new_state

    @tool(ToolType.READ)
    def check_wifi_calling_status(self) -> str:
        """Whether Wi-Fi calling is on."""
        return f"Wi-Fi Calling is currently turned {_on_off(self.db.device['wifi_calling_enabled'])}."

    @tool(ToolType.WRITE)
    def toggle_wifi_calling(self) -> str:
        """Flip Wi-Fi calling (the MMS-over-Wi-Fi preference is untouched)."""
        return f"Wi-Fi Calling is now {_on_off(self._toggle_wifi_calling())}.{self._bar()}"

    def _toggle_wifi_calling(self) -> bool:
        d = self.db.device
        new_state = not d["wifi_calling_enabled"]
        d["wifi_calling_enabled"] = new_state
        return new_state

    def set_wifi_calling(self, enabled: bool, mms_over_wifi: Optional[bool] = None) -> str:
        """Init helper: Wi-Fi calling on/off, and the MMS-over-Wi-Fi preference if given."""
        d = self.db.device
        if d["wifi_calling_enabled"] != enabled:
            self._toggle_wifi_calling()
        msg = f"Wi-Fi Calling is now {_on_off(enabled)}."
        if mms_over_wifi is not None:
            d["wifi_calling_mms_over_wifi"] = mms_over_wifi
            msg += f"\nMMS over Wi-Fi is now {_on_off(mms_over_wifi)}."
        return msg

    # ------------------------------------------------------------------ VPN

    @tool(ToolType.READ)
    def check_vpn_status(self) -> str:
        """VPN setting, connection and details."""
        d = self.db.device
        if d["vpn_connected"]:
            vpn = d["vpn_details"]
            if vpn:
                _attr_of(vpn, "model_dump")
                # upstream prints the dumped model: a dict whose performance is the enum object
                shown = {
                    "server_address": vpn["server_address"],
                    "protocol": vpn["protocol"],
                    "server_performance": PerformanceLevel(vpn["server_performance"]),
                }
                return f"VPN is ON and connected. Details: {shown}"
            return "VPN is ON and connected (no specific details available)."
        if d["vpn_enabled_setting"]:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    @tool(ToolType.WRITE)
    def connect_vpn(self) -> str:
        """Connect the VPN with the default server."""
        d = self.db.device
        if d["vpn_connected"]:
            return "VPN already connected."
        d["vpn_connected"] = True
        d["vpn_details"] = self.default_vpn_details  # shared within the environment, as upstream's default
        return f"VPN connected successfully.{self._bar()}"

    @tool(ToolType.WRITE)
    def disconnect_vpn(self) -> str:
        """Disconnect the VPN if connected."""
        text = "VPN disconnected successfully." if self._disconnect_vpn() else "No active VPN connection to disconnect."
        return f"{text}{self._bar()}"

    def _disconnect_vpn(self) -> bool:
        d = self.db.device
        if not d["vpn_connected"]:
            return False
        d["vpn_connected"] = False
        d["vpn_details"] = None
        return True

    def break_vpn(self) -> str:
        """Init helper: connect the VPN and make its server poor (slow data)."""
        self.connect_vpn()
        _attr_of(self.db.device["vpn_details"], "server_performance")["server_performance"] = (
            PerformanceLevel.POOR.value
        )
        return "VPN connection broken."

    # ------------------------------------------------------------------ apps

    @tool(ToolType.READ)
    def check_installed_apps(self) -> str:
        """Names of the installed apps."""
        names = ", ".join(self.db.device["app_statuses"].keys())
        return f"The following apps are installed on the phone: {names}"

    @tool(ToolType.READ)
    def check_app_status(self, app_name: str) -> str:
        """An app's granted permissions.

        Args:
            app_name: App to inspect.
        """
        app = self.db.device["app_statuses"].get(app_name)
        if not app:
            return f"App '{app_name}' not found on this phone."
        lines = [f"Status for App: {app_name}"]
        granted = [name.replace("_", " ").lower() for name, ok in app["permissions"].items() if ok]
        if not granted:
            lines.append(" - Permissions: None granted.")
        else:
            lines.append(" - Permissions Granted:")
            lines.extend(f"   - {perm}" for perm in granted)
        return "\n".join(lines)

    @tool(ToolType.READ)
    def check_app_permissions(self, app_name: str) -> str:
        """An app's granted permissions, on one line.

        Args:
            app_name: App to inspect.
        """
        app = self.db.device["app_statuses"].get(app_name)
        if not app:
            return f"App '{app_name}' not found on this phone."
        granted = [name.replace("_", " ").lower() for name, ok in app["permissions"].items() if ok]
        if not granted:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(granted)}."

    @tool(ToolType.WRITE)
    def grant_app_permission(self, app_name: str, permission: str) -> str:
        """Grant a tracked permission to an app (replies with Success. / Error.).

        Args:
            app_name: App to change.
            permission: Permission name (lower-cased).
        """
        ok, message = self._grant_app_permission(app_name, permission)
        return f"{'Success. ' if ok else 'Error. '}{message}{self._bar()}"

    def _grant_app_permission(self, app_name: str, permission: str) -> Tuple[bool, str]:
        app = self.db.device["app_statuses"].get(app_name)
        permission = permission.lower()
        if app:
            available = list(app["permissions"].keys())
            if permission not in available:
                return False, (
                    f"Permission '{permission}' not tracked for app '{app_name}', available permissions: {available}"
                )
            app["permissions"][permission] = True
            return True, f"Permission '{permission}' granted to app '{app_name}'."
        return False, f"App '{app_name}' not found. Cannot grant permission."

    def remove_app_permission(self, app_name: str, permission: str) -> Tuple[bool, str]:
        """Init helper: revoke a permission; returns (done, message) as upstream."""
        app = self.db.device["app_statuses"].get(app_name)
        permission = permission.lower()
        if app:
            if permission not in app["permissions"]:
                return False, f"Permission '{permission}' not tracked for app '{app_name}'."
            app["permissions"][permission] = False
            return True, f"Permission '{permission}' removed from app '{app_name}'."
        return False, f"App '{app_name}' not found. Cannot remove permission."

    # ------------------------------------------------------------------ MMS

    @tool(ToolType.READ)
    def can_send_mms(self) -> str:
        """Whether the messaging app can send MMS."""
        if self._can_send_mms():
            return "Your messaging app can send MMS messages."
        return "Your messaging app cannot send MMS messages."

    def _can_send_mms(self) -> bool:
        if not self._get_mobile_data_working():
            return False
        d = self.db.device
        if d["network_technology_connected"] == NetworkTechnology.TWO_G.value:
            return False
        if d["wifi_calling_enabled"] and d["wifi_calling_mms_over_wifi"]:
            return False
        if _attr_of(d["active_apn_settings"], "mmsc_url")["mmsc_url"] is None:
            return False
        app = d["app_statuses"].get("messaging")
        if app is None:
            return False
        perms = app["permissions"]
        return perms["storage"] and perms["sms"]

    # ------------------------------------------------------------------ reboot and network search

    @tool(ToolType.WRITE)
    def reboot_device(self) -> str:
        """Restart the phone: apply a pending APN reset, then search for a network."""
        return f"{self._reboot_device()}{self._bar()}"

    def _reboot_device(self) -> str:
        d = self.db.device
        lines = []
        if _attr_of(d["active_apn_settings"], "reset_at_reboot")["reset_at_reboot"]:
            lines.append("Resetting APN settings...")
            d["active_apn_settings"] = _default_apn()
        lines.append("Restarting network services...")
        d["network_connection_status"] = _SEARCHING
        self.simulate_network_search()
        return "\n".join(lines)

    def simulate_network_search(self) -> None:
        """Recompute status, technology and signal from the SIM, mode, airplane, APN and line state."""
        d = self.db.device
        s = self.db.surroundings
        signal_map = s["signal_strength"]
        sim = self._check_sim_status()
        if sim == "active":
            d["network_connection_status"] = _CONNECTED
            pref = d["network_mode_preference"]
            if pref == "4g_5g_preferred":
                five_g = signal_map.get("5G", _NONE)
                if five_g == _NONE:
                    tech = "4G"
                    d["network_technology_connected"] = tech
                    d["network_signal_strength"] = signal_map.get(tech, _NONE)
                else:
                    d["network_technology_connected"] = "5G"
                    d["network_signal_strength"] = five_g
            else:
                tech = (
                    {"4g_only": "4G", "3g_only": "3G", "2g_only": "2G"}.get(pref, "4G")
                    if isinstance(pref, str)
                    else "4G"
                )
                d["network_technology_connected"] = tech
                d["network_signal_strength"] = signal_map.get(tech, _NONE)
        else:  # missing, locked (or anything else)
            d["network_connection_status"] = _NO_SERVICE
            d["network_technology_connected"] = _NONE
            d["network_signal_strength"] = _NONE
        # three separate checks applied in turn (a wrong-typed APN record fails even in airplane mode,
        # after the airplane override has been applied -- as upstream)
        if d["airplane_mode"]:
            self._no_service()
        if _attr_of(d["active_apn_settings"], "apn_name")["apn_name"] == _BROKEN:
            self._no_service()
        if not s["line_active"]:
            self._no_service()

    def _no_service(self) -> None:
        d = self.db.device
        d["network_connection_status"] = _NO_SERVICE
        d["network_technology_connected"] = _NONE
        d["network_signal_strength"] = _NONE

    # ------------------------------------------------------------------ payment

    @tool(ToolType.READ)
    def check_payment_request(self) -> str:
        """The agent's pending payment request, if any."""
        req = self.db.surroundings["payment_request"]
        if req is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {req['bill_id']} of {req['amount_due']} USD."

    @tool(ToolType.WRITE)
    def make_payment(self) -> str:
        """Pay the pending request (the bill turns Paid at the next sync)."""
        req = self.db.surroundings["payment_request"]
        if req is None:
            return "You do not have a payment request."
        req["paid"] = True
        return f"Payment of {req['amount_due']} USD has been made for bill {req['bill_id']}."

    # ------------------------------------------------------------------ assertions

    def assert_airplane_mode_status(self, expected_status: bool) -> bool:
        """Assertion: airplane mode flag."""
        return self.db.device["airplane_mode"] == expected_status

    def assert_service_status(self, expected_status: str) -> bool:
        """Assertion: network connection status (a NetworkStatus value)."""
        return self.db.device["network_connection_status"] == NetworkStatus(expected_status).value

    def assert_mobile_data_status(self, expected_status: bool) -> bool:
        """Assertion: whether mobile data works."""
        return self._get_mobile_data_working() == expected_status

    def assert_mobile_roaming_status(self, expected_status: bool) -> bool:
        """Assertion: the phone's roaming switch."""
        return self.db.device["roaming_enabled"] == expected_status

    def assert_mobile_data_saver_mode_status(self, expected_status: bool) -> bool:
        """Assertion: data saver flag."""
        return self.db.device["data_saver_mode"] == expected_status

    def assert_internet_speed(self, expected_speed: float, expected_desc: Optional[str] = None) -> bool:
        """Assertion: speed (no connection = 0) at least ``expected_speed``, band matched if given."""
        speed, desc = self._run_speed_test()
        speed = speed or 0.0
        if expected_desc is None:
            return speed >= expected_speed
        return speed >= expected_speed and desc.lower() == expected_desc.lower()  # ty: ignore[missing-union-attribute] - no service fails, as upstream's

    def assert_internet_not_excellent(self) -> bool:
        """Assertion: the speed band is not Excellent."""
        _, desc = self._run_speed_test()
        return desc.lower() != "excellent"  # ty: ignore[missing-union-attribute] - no service fails, as upstream's

    def assert_can_send_mms(self, expected_status: bool) -> bool:
        """Assertion: MMS ability."""
        return self._can_send_mms() == expected_status

    def assert_mobile_data_usage_exceeded(self, expected_status: bool) -> bool:
        """Assertion: the data-cap flag mirrored by sync."""
        return self.db.surroundings["mobile_data_usage_exceeded"] == expected_status


def new_payment_request(bill_id: str, amount_due: float) -> dict:
    """A validated payment request record (amount as float, paid False)."""
    return plain(PaymentRequest(bill_id=bill_id, amount_due=amount_due).model_dump())
