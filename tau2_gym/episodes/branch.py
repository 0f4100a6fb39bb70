"""Branching live episodes: independent copies of an episode for tree search, best-of-n and counterfactuals.

A copy owns its messages, views, counters, clock and tool state -- each DB as its copy-on-write changes over the
shared base -- and shares everything read-only (the loaded domain, the task, the episode setup). Given the same
actions and a deterministic customer, a copy and its original produce the same trajectory and reward.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from tau2_gym.core.db import DBState, copy_json
from tau2_gym.core.messages import Message, ParticipantMessage
from tau2_gym.core.tools import Toolkit
from tau2_gym.core.turn_loop import new_episode_id
from tau2_gym.episodes.driver import Episode

__all__ = ["copy_episode", "shallow_copy"]

_SHARED_TYPES = (type(None), str, int, float, bool, bytes)


def _copy_message(msg: Any, mapping: dict[int, Any], memo: dict[int, Any]) -> Any:
    """An independent copy of one stored message (and its tool calls), recorded in ``mapping`` by the id of
    the original so that everything else pointing at the message (the loop's last message, the tool-call
    log) points at the copy -- scoring relies on that identity (``Environment.replays_to``).

    A shallow copy shares the immutable fields (texts, flags, numbers); only the containers are copied."""
    if not isinstance(msg, Message):  # anything else a domain or a simulator put there
        new = copy.deepcopy(msg, memo)
        mapping[id(msg)] = new
        return new
    new = copy.copy(msg)
    if isinstance(msg, ParticipantMessage):
        if msg.tool_calls is not None:
            copies = []
            for tc in msg.tool_calls:
                twin = copy.copy(tc)
                twin.arguments = copy_json(tc.arguments)
                mapping[id(tc)] = twin
                copies.append(twin)
            new.tool_calls = copies
        new.usage = None if msg.usage is None else copy_json(msg.usage)
        new.raw_data = None if msg.raw_data is None else copy_json(msg.raw_data)
    mapping[id(msg)] = new
    return new


def _remapped(value: Any, mapping: dict[int, Any], memo: dict[int, Any]) -> Any:
    """``value`` with every copied message or call replaced by its copy; other objects deep-copied."""
    if isinstance(value, _SHARED_TYPES):
        return value
    hit = mapping.get(id(value))
    if hit is not None:
        return hit
    if type(value) is list:
        return [_remapped(v, mapping, memo) for v in value]
    if type(value) is tuple:
        return tuple(_remapped(v, mapping, memo) for v in value)
    return copy.deepcopy(value, memo)


def _copy_environment(env: Any, mapping: dict[int, Any], memo: dict[int, Any]) -> Any:
    """The episode's tool environment with private toolkits (copy-on-write DB views over the same base)."""
    new = shallow_copy(env)
    shared = ("domain", "semantics", "_sync_hook", "policy")
    for name, value in env.__dict__.items():
        if name in shared or isinstance(value, _SHARED_TYPES):
            continue
        if name == "_calls":  # (call, result) pairs: the very objects of the trajectory (replays_to)
            new._calls = [(_remapped(c, mapping, memo), _remapped(r, mapping, memo)) for c, r in value]
        elif isinstance(value, Toolkit):
            setattr(new, name, _copy_toolkit(value, memo))
        else:
            setattr(new, name, copy.deepcopy(value, memo))
    return new


def _copy_toolkit(kit: Any, memo: dict[int, Any]) -> Any:
    """A toolkit instance with its own state: each DB as a copy-on-write copy (one per DB object: the memo
    keeps a DB that two toolkits share shared), every other attribute deep-copied unless immutable."""
    hit = memo.get(id(kit))
    if hit is not None:
        return hit
    new = shallow_copy(kit)
    for name, value in kit.__dict__.items():
        if isinstance(value, _SHARED_TYPES):
            continue
        if isinstance(value, DBState):
            twin = memo.get(id(value))
            if twin is None:
                twin = memo[id(value)] = value.copy()  # the original episode keeps ``value`` (its id) alive
            setattr(new, name, twin)
        else:
            setattr(new, name, copy.deepcopy(value, memo))
    memo[id(kit)] = new
    return new


def copy_episode(episode: Episode, episode_id: Optional[str] = None) -> Episode:
    """An independent copy of a live episode: its own messages, views, counters, clock and tool environment (DB
    overlays copied, the domain's base data shared); the setup, the settings, the domain and the task are shared.
    Slots it does not know are deep-copied unless immutable, so state added to the episode later is copied too.
    The copy gets a new episode id (``episode_id`` to choose one)."""
    memo: dict[int, Any] = {id(episode.domain): episode.domain, id(episode.task): episode.task}
    env = episode.env
    for name in ("domain", "semantics", "_sync_hook"):
        value = getattr(env, name, None)
        if value is not None:
            memo[id(value)] = value
    mapping: dict[int, Any] = {}
    cls = type(episode)
    new = cls.__new__(cls)
    for name in _slots(cls):
        try:
            value = getattr(episode, name)
        except AttributeError:
            continue
        if name == "trajectory":
            value = [_copy_message(m, mapping, memo) for m in value]
        elif name in ("_agent_view", "_user_view"):
            value = list(value)  # entries are built once and never changed in place (handed out read only)
        elif name == "_clock":
            value = value.copy()
        elif name == "_pending":
            value = None  # rebuilt on demand from the copied views
        elif name in ("domain", "task", "env", "message", "setup", "settings"):
            pass  # shared, or set below once the messages are mapped
        elif not isinstance(value, _SHARED_TYPES):
            value = copy.deepcopy(value, memo)
        setattr(new, name, value)
    new.env = _copy_environment(env, mapping, memo)
    new.message = _remapped(episode.message, mapping, memo)
    new.episode_id = episode_id or new_episode_id()
    return new


def _slots(cls: type) -> list[str]:
    """Every slot of ``cls`` and its bases (the turn loop's and the episode's)."""
    return [name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())]


def shallow_copy(obj: Any) -> Any:
    """A new instance of ``obj``'s class holding the same attribute values."""
    new = type(obj).__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new
