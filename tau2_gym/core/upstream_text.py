"""Upstream prose read at run time: docstrings, model field descriptions and prompt constants.

The policy under training must see the benchmark's own texts (tool descriptions, prompts), but no upstream
sentence is committed here. So we parse the upstream ``.py`` sources of the fetched distribution with
``ast`` -- never importing them -- and fall back to our own short texts (with one warning) when a plain
data folder comes without sources.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Optional

from tau2_gym.core.warn import warn

# ------------------------------------------------------------------------------------ docstrings


@dataclass
class ParsedDoc:
    """The parts of a Google-style docstring that end up in a tool schema."""

    short: str = ""
    long: str = ""
    params: dict[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        """Tool description as upstream builds it: short, blank line, long (if any)."""
        if not self.long:
            return self.short
        return self.short + "\n\n" + self.long


_SECTION_TITLES = (
    "Arguments",
    "Args",
    "Parameters",
    "Params",
    "Raises",
    "Exceptions",
    "Except",
    "Attributes",
    "Example",
    "Examples",
    "Returns",
    "Yields",
)
_PARAM_SECTIONS = {"Arguments", "Args", "Parameters", "Params"}
_TITLE_RE = re.compile("^(" + "|".join(f"({t})" for t in _SECTION_TITLES) + "):[ \t\r\f\v]*$", flags=re.M)
_TYPED_ARG_RE = re.compile(r"\s*(.+?)\s*\(\s*(.*[^\s]+)\s*\)")


def parse_docstring(text: Optional[str]) -> ParsedDoc:
    """Split a Google-style docstring the way the upstream tool builder sees it.

    Description = text before the first section title, cut at the first newline into short and long
    parts; ``Args:`` items are split on lines with the section's indentation; an item's continuation
    lines are dedented and joined with newlines.
    """
    out = ParsedDoc()
    if not text:
        return out
    text = inspect.cleandoc(text)
    match = _TITLE_RE.search(text)
    desc_chunk, meta_chunk = (text[: match.start()], text[match.start() :]) if match else (text, "")
    parts = desc_chunk.split("\n", 1)
    out.short = parts[0] or ""
    if len(parts) > 1:
        out.long = (parts[1] or "").strip()
    titles = list(_TITLE_RE.finditer(meta_chunk))
    for j, m in enumerate(titles):
        title = m.group(1)
        end = titles[j + 1].start() if j + 1 < len(titles) else len(meta_chunk)
        details = meta_chunk[m.end() : end]
        unknown = re.search(r"\n\S", details)
        if unknown is not None:
            details = details[: unknown.start()]
        chunk = details.strip("\n")
        if title not in _PARAM_SECTIONS or not chunk:
            continue
        indent = chunk[: len(chunk) - len(chunk.lstrip())]  # the leading whitespace
        items = list(re.finditer("^" + indent + r"(?=\S)", chunk, flags=re.M))
        for i, im in enumerate(items):
            stop = items[i + 1].start() if i + 1 < len(items) else len(chunk)
            part = chunk[im.end() : stop].strip("\n")
            if ":" not in part:
                continue
            before, desc = part.split(":", 1)
            if before and "\n" in before:
                first, rest = before.split("\n", 1)
                before = first + inspect.cleandoc(rest)
            if desc:
                desc = desc[1:] if desc[0] == " " else desc
                if "\n" in desc:
                    first, rest = desc.split("\n", 1)
                    desc = first + "\n" + inspect.cleandoc(rest)
                desc = desc.strip("\n")
            typed = _TYPED_ARG_RE.match(before)
            name = typed.group(1) if typed else before
            out.params[name] = desc
    return out


# ------------------------------------------------------------------------------ source extraction


@dataclass
class ModuleProse:
    """What one upstream module says: docstrings per class/function and string constants."""

    class_docs: dict[str, str] = field(default_factory=dict)
    method_docs: dict[str, dict[str, str]] = field(default_factory=dict)  # class -> method -> docstring
    field_descriptions: dict[str, dict[str, str]] = field(default_factory=dict)  # class -> field -> text
    constants: dict[str, str] = field(default_factory=dict)


def _const_str(node: ast.AST) -> Optional[str]:
    """Evaluate the string-building expressions prompt constants use (literals, +, .strip(), implicit concat)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _const_str(node.left), _const_str(node.right)
        return None if left is None or right is None else left + right
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and not node.args
        and node.func.attr in {"strip", "lstrip", "rstrip"}
    ):
        inner = _const_str(node.func.value)
        return None if inner is None else getattr(inner, node.func.attr)()
    return None


def _field_description(value: Optional[ast.AST], annotation: Optional[ast.AST]) -> Optional[str]:
    """``Field(..., description="...")`` in the assigned value or inside ``Annotated[...]``."""
    for node in (value, annotation):
        if node is None:
            continue
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) == "Field":
                for kw in call.keywords:
                    if kw.arg == "description":
                        return _const_str(kw.value)
    return None


def parse_module(path: Path) -> ModuleProse:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = ModuleProse()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _const_str(node.value)
            if value is not None:
                prose.constants[node.targets[0].id] = value
        elif isinstance(node, ast.FunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                prose.method_docs.setdefault("", {})[node.name] = doc
        elif isinstance(node, ast.ClassDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                prose.class_docs[node.name] = doc
            methods: dict[str, str] = {}
            fields: dict[str, str] = {}
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    mdoc = ast.get_docstring(item, clean=False)
                    if mdoc is not None:
                        methods[item.name] = mdoc
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    desc = _field_description(item.value, item.annotation)
                    if desc is not None:
                        fields[item.target.id] = desc
            prose.method_docs[node.name] = methods
            prose.field_descriptions[node.name] = fields
    return prose


@cache
def load_module_prose(src: Optional[Path], relpath: str) -> Optional[ModuleProse]:
    """Prose of ``<src>/<relpath>`` or None when there are no sources (or not that file)."""
    if src is None:
        return None
    path = src / relpath
    if not path.is_file():
        return None
    return parse_module(path)


_warned: set[str] = set()


def warn_fallback(what: str, reason: Optional[str] = None) -> None:
    """Warn once per subject that our own short text replaces the upstream one."""
    if what in _warned:
        return
    _warned.add(what)
    if reason is None:
        reason = (
            "the data folder has no tau2 sources beside it. Point TAU2_DATA_DIR at a tau2-bench checkout's "
            "data/ folder or use the default fetched data to show the benchmark's own wording"
        )
    warn(f"upstream text for {what} is not available: {reason}; using tau2-gym's own short text instead.")


# ------------------------------------------------------------------------- strings inside functions


@dataclass(frozen=True)
class StringTemplate:
    """A string literal or f-string assigned to a local variable of an upstream function.

    ``parts`` holds literal text and ``(name, conversion, format_spec)`` holes; :meth:`render` fills the
    holes the way Python evaluates the f-string, so the result is byte-identical to what upstream builds.
    """

    parts: tuple

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p[0] for p in self.parts if isinstance(p, tuple))

    def render(self, **values: object) -> str:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            name, conversion, spec = part
            value = values[name]
            if conversion == ord("r"):
                value = repr(value)
            elif conversion == ord("s"):
                value = str(value)
            elif conversion == ord("a"):
                value = ascii(value)
            out.append(format(value, spec))
        return "".join(out)


def _template(node: ast.AST) -> Optional[StringTemplate]:
    literal = _const_str(node)
    if literal is not None:
        return StringTemplate((literal,))
    if not isinstance(node, ast.JoinedStr):
        return None
    parts: list = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(value.value)
        elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
            spec = ""
            if value.format_spec is not None:
                spec_t = _template(value.format_spec)
                if spec_t is None or spec_t.names:
                    return None
                spec = spec_t.render()
            parts.append((value.value.id, value.conversion, spec))
        else:
            return None  # an expression we do not evaluate
    return StringTemplate(tuple(parts))


@cache
def function_strings(
    src: Optional[Path], relpath: str, func_name: str, class_name: Optional[str] = None
) -> Optional[dict[str, StringTemplate]]:
    """String literals and simple f-strings assigned to local names inside ``class_name.func_name``.

    None when there are no sources or no such function (callers fall back to their own text).
    """
    if src is None or not (src / relpath).is_file():
        return None
    tree = ast.parse((src / relpath).read_text(encoding="utf-8"))
    scope: list[ast.stmt] = tree.body
    if class_name is not None:
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
        if not classes:
            return None
        scope = classes[0].body
    funcs = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func_name]
    if not funcs:
        return None
    out: dict[str, StringTemplate] = {}
    for node in ast.walk(funcs[0]):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            t = _template(node.value)
            if t is not None:
                out[node.targets[0].id] = t
    return out
