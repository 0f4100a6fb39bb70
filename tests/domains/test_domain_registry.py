"""Domains come from one registration line or a third-party entry point; the engine names none."""

import importlib.metadata
import sys
import textwrap

import pytest

import tau2_gym.core.domain as domain_mod
from tau2_gym import load_domain
from tau2_gym.core.messages import ToolCall


def test_third_party_domain_through_an_entry_point(tmp_path, monkeypatch):
    pkg = tmp_path / "my_tau2_domain.py"
    pkg.write_text(
        textwrap.dedent("""
        from dataclasses import replace
        from tau2_gym.domains.mock import DOMAIN as MOCK
        DOMAIN = replace(MOCK, name="my-mock", description="a third-party domain on the mock data")
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(name="my-mock", value="my_tau2_domain:DOMAIN", group="tau2_gym.domains")
    real = importlib.metadata.entry_points

    def fake(**kw):
        return [ep] if kw.get("group") == "tau2_gym.domains" else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.setattr(domain_mod, "_entry_points_loaded", False)
    monkeypatch.setattr(domain_mod, "_registry", dict(domain_mod._registry))
    assert "my-mock" in domain_mod.domain_names()
    dom = load_domain("my-mock")
    env = dom.make_environment()
    msg = env.get_response(ToolCall("create_task", {"user_id": "user_1", "title": "x"}, id="1"))
    assert not msg.error and env.domain_name == "my-mock"
    sys.modules.pop("my_tau2_domain", None)


def test_unknown_domain_lists_the_registered_ones():
    with pytest.raises(KeyError, match="registered domains are: mock"):
        load_domain("nope")


def _code_words(path):
    """Identifiers and non-docstring string literals of a module (comments and docstrings are prose)."""
    import ast

    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value.lower()
        elif isinstance(node, ast.Name):
            yield node.id.lower()
        elif isinstance(node, ast.Attribute):
            yield node.attr.lower()


def test_engine_never_names_a_domain():
    import pathlib

    engine = pathlib.Path(domain_mod.__file__).parents[1]
    names = ("airline", "retail", "telecom", "mock")
    core = (
        sorted((engine / "core").glob("*.py"))
        + sorted((engine / "scoring").glob("*.py"))
        + sorted((engine / "episodes").glob("*.py"))
        + [engine / "results" / "replay.py"]
    )
    for f in core:
        words = list(_code_words(f))
        hits = [w for w in words if any(n in w for n in names)]
        assert not hits, (f, hits)
