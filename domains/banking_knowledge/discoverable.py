"""Discoverable tools: how their docstrings become the tool card the agent sees after unlocking one.

A discoverable tool is callable but not in the agent's tool list; the knowledge base names it, the agent
unlocks it (``unlock_discoverable_agent_tool``) and calls it through ``call_discoverable_agent_tool``, or gives
a user-side one to the customer (``give_discoverable_user_tool``). Its docstring is the definition: first
paragraph = description, ``Args:`` lines ``name (type[, optional]): text`` = parameters, first ``Returns:``
line = success hint. The docstrings are upstream's, read from the fetched sources
(:func:`upstream_docstrings`); without sources our own short ones stand in.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Callable, Optional

from tau2_gym.core import upstream_text as _prose

TOOLS_MODULE = "domains/banking_knowledge/tools.py"

_ARGS_SPLIT = re.compile(r"\n\s*Args:\s*\n")
_RETURNS_SPLIT = re.compile(r"\n\s*Returns:\s*\n")
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\(([^)]+)\))?\s*:\s*(.+?)$", re.MULTILINE)
_OPTIONAL = re.compile(r",?\s*optional", re.IGNORECASE)


def parse_tool_card(name: str, doc: str) -> dict[str, Any]:
    """``{"name", "description", "parameters", "success_message"}`` from a (cleaned) docstring."""
    head, *rest = _ARGS_SPLIT.split(doc, maxsplit=1)
    params: dict[str, dict[str, Any]] = {}
    success = "Action completed successfully."
    if rest:
        args_part, *returns = _RETURNS_SPLIT.split(rest[0], maxsplit=1)
        if returns:
            success = returns[0].strip().split("\n")[0].strip()
        for m in _ARG_LINE.finditer(args_part):
            type_info = m.group(2) or "string"
            ptype = _OPTIONAL.sub("", type_info).strip() or "string"
            params[m.group(1)] = {
                "type": ptype,
                "description": m.group(3).strip(),
                "required": "optional" not in type_info.lower(),
            }
    return {"name": name, "description": head.strip(), "parameters": params, "success_message": success}


def format_tool_card(card: dict[str, Any]) -> str:
    """The ``Tool: / Description: / Parameters:`` block shown to the agent."""
    lines = []
    for pname, p in card.get("parameters", {}).items():
        req = " (required)" if p.get("required", True) else " (optional)"
        lines.append(f"  - {pname}: {p.get('type', 'string')}{req} - {p.get('description', '')}")
    params = "\n".join(lines) if lines else "  (no parameters)"
    return f"Tool: {card['name']}\nDescription: {card['description']}\nParameters:\n{params}"


def upstream_docstrings(src: Optional[Path], class_name: str) -> Optional[dict[str, str]]:
    """Cleaned docstrings of the upstream class's methods (None without sources)."""
    mp = _prose.load_module_prose(src, TOOLS_MODULE)
    if mp is None or class_name not in mp.method_docs:
        return None
    return {k: inspect.cleandoc(v) for k, v in mp.method_docs[class_name].items()}


def docstring_of(toolkit: Any, name: str, func: Callable) -> str:
    """The docstring that defines ``name``: upstream's when the toolkit was bound to sources, else ours."""
    docs = getattr(toolkit, "_discoverable_docs", None)
    if docs is not None and name in docs:
        return docs[name]
    if docs is None:
        _prose.warn_fallback(f"discoverable tool '{name}'")
    return inspect.getdoc(func) or ""
