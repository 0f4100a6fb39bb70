"""Retrieval configurations: which search tools the agent gets and which prompt template its policy comes from.

Upstream names 20 configurations (``tau2 run --retrieval-config``). The six that need no network run here and
are exact to upstream: ``bm25``, ``bm25_grep``, ``grep_only`` (search tools), ``full_kb`` (every document in
the prompt), ``golden_retrieval`` (the task's required documents in the prompt) and ``no_knowledge``. The
others need dense embeddings from a provider, an LLM reranker or a shell sandbox; asking for one raises an
error that names what it needs -- there is no silent substitute.

Upstream's own default is ``alltools`` (BM25 + dense + shell), which needs an embeddings API and a sandbox;
tau2-gym's default is ``bm25_grep``, the richest configuration that runs offline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from tau2_gym.core.tools import ToolType, tool
from tau2_gym.domains.banking_knowledge.data_model import Document
from tau2_gym.domains.banking_knowledge.search import KnowledgeIndex, grep_text, kb_search_text

DEFAULT_CONFIG = "bm25_grep"
GOLDEN_PLACEHOLDER = "(Policy is task-specific - see 'policy' field in each simulation)"
MIXINS_MODULE = "domains/banking_knowledge/retrieval_mixins.py"


@dataclass(frozen=True)
class RetrievalConfig:
    """One configuration: prompt template, prompt kind, search tools and their knobs."""

    name: str
    template: str  # file in the domain's prompts/ folder
    prompt: str = "standard"  # standard | full_kb | golden
    kb_search: Optional[str] = None  # "bm25" | "embedding"
    embedder: Optional[str] = None  # "openai:text-embedding-3-large" | "openrouter:qwen3-embedding-8b"
    reranker: bool = False
    grep: bool = False
    shell: Optional[str] = None  # "read" | "write"
    alltools: bool = False
    top_k: int = 10
    grep_top_k: int = 10
    case_sensitive: bool = False
    reranker_min_score: int = 5
    timing: str = "fixed"  # KB_search's timing line: "fixed" (0 ms, deterministic) or "measured" (upstream's)

    @property
    def needs(self) -> list[str]:
        """What this configuration needs beyond the data (empty: runs offline)."""
        out = []
        if self.kb_search == "embedding" or self.alltools:
            out.append(f"dense embeddings ({self.embedder or 'openai:text-embedding-3-large'}) from an embeddings API")
        if self.reranker:
            out.append("an LLM reranker (pointwise relevance scores from a chat model)")
        if self.shell:
            out.append("a shell sandbox over the exported documents")
        return out


_OPENAI = "openai:text-embedding-3-large"
_QWEN = "openrouter:qwen3-embedding-8b"


def _configs() -> dict[str, RetrievalConfig]:
    c = RetrievalConfig
    table = [
        c("no_knowledge", "no_knowledge.md"),
        c("full_kb", "full_kb.md", prompt="full_kb"),
        c("golden_retrieval", "required_docs.md", prompt="golden"),
        c("qwen_embeddings_grep", "classic_rag_qwen.md", kb_search="embedding", embedder=_QWEN, grep=True),
        c("openai_embeddings_grep", "classic_rag_openai.md", kb_search="embedding", embedder=_OPENAI, grep=True),
        c(
            "qwen_embeddings_reranker_grep",
            "classic_rag_qwen.md",
            kb_search="embedding",
            embedder=_QWEN,
            reranker=True,
            grep=True,
        ),
        c(
            "openai_embeddings_reranker_grep",
            "classic_rag_openai.md",
            kb_search="embedding",
            embedder=_OPENAI,
            reranker=True,
            grep=True,
        ),
        c("bm25_grep", "classic_rag_bm25.md", kb_search="bm25", grep=True),
        c("bm25_reranker_grep", "classic_rag_bm25.md", kb_search="bm25", reranker=True, grep=True),
        c("qwen_embeddings", "classic_rag_qwen_no_grep.md", kb_search="embedding", embedder=_QWEN),
        c("openai_embeddings", "classic_rag_openai_no_grep.md", kb_search="embedding", embedder=_OPENAI),
        c(
            "qwen_embeddings_reranker",
            "classic_rag_qwen_no_grep.md",
            kb_search="embedding",
            embedder=_QWEN,
            reranker=True,
        ),
        c(
            "openai_embeddings_reranker",
            "classic_rag_openai_no_grep.md",
            kb_search="embedding",
            embedder=_OPENAI,
            reranker=True,
        ),
        c("bm25", "classic_rag_bm25_no_grep.md", kb_search="bm25"),
        c("bm25_reranker", "classic_rag_bm25_no_grep.md", kb_search="bm25", reranker=True),
        c("grep_only", "grep_only.md", grep=True),
        c("terminal_use", "agentic_search.md", shell="read"),
        c("terminal_use_write", "agentic_search_write.md", shell="write"),
        c("alltools", "all_tools.md", alltools=True, embedder=_OPENAI, shell="read"),
        c("alltools-qwen", "all_tools.md", alltools=True, embedder=_QWEN, shell="read"),
    ]
    return {cfg.name: cfg for cfg in table}


CONFIGS = _configs()
ALIASES = {"AllTools": "alltools"}
OFFLINE = tuple(n for n, cfg in CONFIGS.items() if not cfg.needs)

_OVERRIDES = ("top_k", "grep_top_k", "case_sensitive", "reranker_min_score", "timing")


def resolve(name: str, **overrides: Any) -> RetrievalConfig:
    """The named configuration with upstream's optional overrides (top_k, grep_top_k, case_sensitive,
    reranker_min_score) and ours (timing); an unknown name or knob, or a configuration that cannot run here,
    raises ValueError."""
    canonical = ALIASES.get(name, name)
    if canonical not in CONFIGS:
        raise ValueError(f"Unknown retrieval variant: {name!r}. Available: {sorted(CONFIGS)}")
    unknown = sorted(set(overrides) - set(_OVERRIDES))
    if unknown:
        raise ValueError(f"unknown retrieval option(s) {unknown}; valid: {list(_OVERRIDES)}")
    cfg = CONFIGS[canonical]
    if overrides.get("timing", "fixed") not in ("fixed", "measured"):
        raise ValueError(f"timing={overrides['timing']!r}; choose 'fixed' (0 ms, deterministic) or 'measured'")
    if cfg.needs:
        raise ValueError(
            f"retrieval config {canonical!r} needs {' and '.join(cfg.needs)}, which tau2-gym does not provide; "
            f"it would not be upstream's configuration without them. Configurations that run offline (exact to "
            f"upstream): {', '.join(OFFLINE)}."
        )
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


# ------------------------------------------------------------------------------------------ prompts

_COMPONENT = re.compile(r"\{\{component:(\w+)\}\}")
_FULL_KB = re.compile(r"\{\{full_knowledge_base\}\}")


def _template(prompts: Path, name: str) -> str:
    path = prompts / name
    if not path.exists():
        raise FileNotFoundError(f"Prompt template not found: {path}")

    def component(m: re.Match) -> str:
        part = prompts / "components" / f"{m.group(1)}.md"
        if not part.exists():
            raise FileNotFoundError(f"Component not found: {part}")
        return part.read_text()

    return _COMPONENT.sub(component, path.read_text())


def _doc_block(doc: Document) -> str:
    return f"## {doc.title}\n\n{doc.content}"


def build_policy(cfg: RetrievalConfig, prompts: Path, documents: dict[str, Document], task: Any = None) -> str:
    """The agent policy of a configuration (and, for ``golden_retrieval``, of a task)."""
    text = _template(prompts, cfg.template)
    if cfg.prompt == "full_kb" and _FULL_KB.search(text):
        # re.sub with a string replacement, as upstream: backslash escapes in the documents are processed
        text = _FULL_KB.sub("\n\n---\n\n".join(_doc_block(d) for d in documents.values()), text)
    elif cfg.prompt == "golden":
        wanted = (task.required_documents or []) if task is not None else []
        by_title = {d.title: d for d in documents.values()}
        blocks = [_doc_block(doc) for ref in wanted if (doc := by_title.get(ref) or documents.get(ref)) is not None]
        text = text.replace(
            "{{required_documents}}", "\n\n---\n\n".join(blocks) if blocks else "(No documents provided)"
        )
    if not text or not text.strip():
        raise ValueError(
            f"Policy is empty for retrieval variant '{cfg.name}'. "
            "Ensure the prompt template exists and is properly configured."
        )
    return text


# ------------------------------------------------------------------------------------------ tools


class KBSearchMixin:
    """``KB_search`` (BM25); the composed toolkit carries ``_index`` and ``_retrieval``."""

    _index: KnowledgeIndex
    _retrieval: RetrievalConfig

    @tool(ToolType.READ)
    def KB_search(self, query: str) -> str:
        """Search the knowledge base.

        Args:
            query: Search text.
        """
        return kb_search_text(self._index, query, self._retrieval.top_k, measured=self._retrieval.timing == "measured")


class GrepMixin:
    """``grep`` over the documents."""

    _index: KnowledgeIndex
    _retrieval: RetrievalConfig

    @tool(ToolType.READ)
    def grep(self, pattern: str) -> str:
        """Regex search over the knowledge base.

        Args:
            pattern: Regular expression.
        """
        cfg = self._retrieval
        return grep_text(self._index, pattern, cfg.grep_top_k, cfg.case_sensitive)


def toolkit_for(base: type, cfg: RetrievalConfig, index: KnowledgeIndex, attrs: dict[str, Any]) -> type:
    """The agent toolkit of a configuration: the search tools first (upstream's order), then ``base``'s."""
    name, members = "KnowledgeToolsPlain", {}
    if cfg.kb_search and cfg.grep:
        name, members = (
            "KnowledgeToolsWithKBSearchAndGrep",
            {"KB_search": KBSearchMixin.KB_search, "grep": GrepMixin.grep},
        )
    elif cfg.kb_search:
        name, members = "KnowledgeToolsWithKBSearch", {"KB_search": KBSearchMixin.KB_search}
    elif cfg.grep:
        name, members = "KnowledgeToolsWithGrep", {"grep": GrepMixin.grep}
    body = {"__module__": base.__module__, "__qualname__": name, "_index": index, "_retrieval": cfg, **members, **attrs}
    return type(name, (base,), body)


def prose_classes(cfg: RetrievalConfig) -> tuple[tuple[str, str], ...]:
    """Upstream classes whose docstrings describe the configuration's search tools."""
    out = []
    if cfg.kb_search:
        out.append((MIXINS_MODULE, "KBSearchMixin"))
    if cfg.grep:
        out.append((MIXINS_MODULE, "GrepMixin"))
    return tuple(out)
