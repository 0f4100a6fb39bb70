"""Upstream prose is parsed, never imported; docstrings split as upstream's tool builder does."""

import warnings

from tau2_gym.core.upstream_text import parse_docstring, parse_module


def test_google_docstring_parts():
    doc = """
        Short line.
        Longer text
          indented.

        Args:
            a: First
                continued.
            b (int): Second.

        Returns:
            Something.
        """
    p = parse_docstring(doc)
    assert p.short == "Short line."
    assert p.long == "Longer text\n  indented."
    assert p.params == {"a": "First\ncontinued.", "b": "Second."}
    assert p.description == "Short line.\n\nLonger text\n  indented."


def test_module_prose_via_ast(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        'raise SystemExit("never executed")\nX = """\n hi \n""".strip()\n'
        'class K:\n    """Doc."""\n    a: int = Field(1, description="A" + "!")\n'
        '    def f(self):\n        """F doc."""\n'
    )
    mp = parse_module(src)
    assert mp.constants["X"] == "hi"
    assert mp.class_docs["K"] == "Doc." and mp.field_descriptions["K"] == {"a": "A!"}
    assert mp.method_docs["K"]["f"] == "F doc."


def test_fallback_without_sources_warns_once(tmp_path):
    from tau2_gym.core.prompts import agent_system_prompt
    from tau2_gym.data import DataSource

    (tmp_path / "domains").mkdir()
    source = DataSource(root=tmp_path, src=None, origin="argument")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = agent_system_prompt(source, "POLICY")
    assert "POLICY" in text and "<policy>" in text
    assert any("not available" in str(w.message) for w in caught)
