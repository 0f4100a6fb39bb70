"""System prompts of the agent and of the user simulator, assembled from upstream's texts at run time.

Templates and instructions are the upstream string constants (parsed from the fetched sources with
``ast``); the user-simulator guidelines are data files. Without sources, short texts of our own stand
in (one warning each).
"""

from __future__ import annotations

import ast
from functools import cache, lru_cache
from pathlib import Path
from typing import Optional

from tau2_gym.core import upstream_text as prose
from tau2_gym.data import DataSource

AGENT_MODULE = "agent/llm_agent.py"
USER_MODULE = "user/user_simulator.py"
STOP_FUNCTION_NAME = "done"

# Our own stand-ins, used only when the upstream sources are not available.
_OWN_AGENT_INSTRUCTION = (
    "You are a customer-service agent bound by the <policy> below. Each turn, either write to the user or "
    "call one tool, not both. Follow the policy and produce valid JSON for tool arguments."
)
_OWN_SOLO_INSTRUCTION = (
    "You are a customer-service agent bound by the <policy> below, working alone on the <ticket>. You cannot "
    "talk to the user; only call tools. When the ticket is solved, send one message with a single call to "
    "`{stop_function_name}` and nothing else. Follow the policy and produce valid JSON."
)
_OWN_TEMPLATE = "<instructions>\n{agent_instruction}\n</instructions>\n<policy>\n{domain_policy}\n</policy>"
_OWN_SOLO_TEMPLATE = _OWN_TEMPLATE + "\n<ticket>\n{ticket}\n</ticket>"
_OWN_USER_TEMPLATE = "{global_user_sim_guidelines}\n\n<scenario>\n{instructions}\n</scenario>"
_OWN_DONE_DOC = "Call this when the task is finished."


def _constant(source: DataSource, module: str, name: str, fallback: str) -> str:
    mp = prose.load_module_prose(source.src, module)
    if mp is not None and name in mp.constants:
        return mp.constants[name]
    prose.warn_fallback(f"the constant {name} of {module}")
    return fallback


@lru_cache(maxsize=256)  # one string for the episodes that share it (every episode of a domain, a task's group)
def agent_system_prompt(source: DataSource, policy: str, solo: bool = False, ticket: Optional[str] = None) -> str:
    """The system message of tau2's LLM agent (or of its solo agent, with the ticket)."""
    if not solo:
        instruction = _constant(source, AGENT_MODULE, "AGENT_INSTRUCTION", _OWN_AGENT_INSTRUCTION)
        template = _constant(source, AGENT_MODULE, "SYSTEM_PROMPT", _OWN_TEMPLATE)
        return template.format(domain_policy=policy, agent_instruction=instruction)
    instruction = _constant(source, AGENT_MODULE, "AGENT_SOLO_INSTRUCTION", _OWN_SOLO_INSTRUCTION)
    instruction = instruction.format(stop_function_name=STOP_FUNCTION_NAME, stop_token="###STOP###")
    template = _constant(source, AGENT_MODULE, "SYSTEM_PROMPT_SOLO", _OWN_SOLO_TEMPLATE)
    return template.format(agent_instruction=instruction, domain_policy=policy, ticket=ticket)


@cache
def _nested_function_doc(src: Optional[Path], module: str, func: str) -> Optional[str]:
    if src is None or not (src / module).is_file():
        return None
    tree = ast.parse((src / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == func:
            return ast.get_docstring(node, clean=False)
    return None


def done_tool_schema(source: DataSource) -> dict:
    """The no-argument ``done`` tool that solo and gym agents call to end the episode."""
    doc = _nested_function_doc(source.src, AGENT_MODULE, STOP_FUNCTION_NAME)
    if doc is None:
        prose.warn_fallback("the 'done' tool")
        doc = _OWN_DONE_DOC
    parsed = prose.parse_docstring(doc)
    return {
        "type": "function",
        "function": {
            "name": STOP_FUNCTION_NAME,
            "description": parsed.description or STOP_FUNCTION_NAME,
            "parameters": {"properties": {}, "title": "parameters", "type": "object"},
        },
    }


@cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def user_guidelines(source: DataSource, use_tools: bool) -> str:
    """The global user-simulator guidelines (the tools variant when the simulated user has tools)."""
    name = "simulation_guidelines_tools.md" if use_tools else "simulation_guidelines.md"
    return _guidelines(source.user_simulator_dir / name)


@cache
def _guidelines(path: Path) -> str:
    """Read once per file (every episode's user prompt starts with them; a missing file is checked again)."""
    if not path.is_file():
        raise FileNotFoundError(f"user-simulator guidelines {str(path)!r} are missing from the data")
    return _read(path)


@lru_cache(maxsize=256)  # one string for the episodes of one task (a GRPO group)
def user_system_prompt(source: DataSource, instructions: str, use_tools: bool) -> str:
    """System prompt of tau2's user simulator: guidelines, then the scenario inside ``<scenario>`` tags."""
    guidelines = user_guidelines(source, use_tools).replace("<PERSONA_GUIDELINES>", "")
    template = _constant(source, USER_MODULE, "SYSTEM_PROMPT", _OWN_USER_TEMPLATE)
    return template.format(
        global_user_sim_guidelines=guidelines,
        global_user_sim_guidelines_with_persona=guidelines,
        instructions=instructions,
    )
