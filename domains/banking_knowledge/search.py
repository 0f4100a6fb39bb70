"""Knowledge-base search: BM25 (``KB_search``) and regex (``grep``) over the documents, as upstream ranks them.

Ranks and scores are upstream's by construction: the same tokenisation (``text.lower().split()``), the same
BM25 implementation (``rank_bm25.BM25Okapi``, optional extra ``tau2-gym[knowledge]``), the same stable
descending sorts over the documents in knowledge-base order, the same fall-back to a literal pattern when a
regex does not compile. The result texts are the tools' formats. ``KB_search`` ends with upstream's
``[Timing: retrieval=..ms, reranking=..ms, total=..ms]`` line: 0 ms throughout by default (deterministic
observations), or measured as upstream measures it (retrieval option ``timing="measured"``).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Optional

from tau2_gym.domains.banking_knowledge.data_model import Document

INSTALL_HINT = "pip install 'tau2-gym[knowledge]'  (or: pip install rank-bm25)"


class MissingDependency(ImportError):
    """A retrieval configuration needs a package that is not installed."""


class KnowledgeIndex:
    """The documents in knowledge-base order, with a BM25 index built on first use (shared, read-only)."""

    def __init__(self, documents: dict[str, Document]) -> None:
        self.ids = list(documents)
        self.titles = {d.id: d.title for d in documents.values()}
        self.contents = {d.id: d.content for d in documents.values()}
        self._bm25: Any = None
        self._lock = threading.Lock()

    def title(self, doc_id: str) -> str:
        return self.titles.get(doc_id) or "Untitled"

    def content(self, doc_id: str) -> str:
        return self.contents.get(doc_id) or ""

    def bm25(self) -> Any:
        if self._bm25 is None:
            with self._lock:
                if self._bm25 is None:
                    try:
                        from rank_bm25 import BM25Okapi
                    except ImportError as exc:
                        raise MissingDependency(
                            f"BM25 retrieval (KB_search) needs the rank-bm25 package: {INSTALL_HINT}"
                        ) from exc
                    self._bm25 = BM25Okapi([self.contents[i].lower().split() for i in self.ids])
        return self._bm25

    # ------------------------------------------------------------------ retrievers

    def bm25_search(self, query: Any, top_k: int = 10) -> list[tuple[str, float]]:
        if not query or not query.strip():
            return []
        scores = self.bm25().get_scores(query.lower().split())
        order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)[: min(top_k, len(self.ids))]
        return [(self.ids[i], float(scores[i])) for i in order]

    def grep_search(self, pattern: Any, top_k: int = 10, case_sensitive: bool = False) -> list[tuple[str, float]]:
        if not pattern.strip():
            return []
        flags = 0 if case_sensitive else re.IGNORECASE
        try:
            regex = re.compile(pattern, flags)
        except re.error:
            regex = re.compile(re.escape(pattern), flags)
        hits = []
        for doc_id in self.ids:
            n = len(regex.findall(self.contents[doc_id]))
            if n:
                hits.append((doc_id, float(n)))
        hits.sort(key=lambda h: h[1], reverse=True)
        return hits[:top_k]


def merge(hits: list[tuple[str, float]], top_k: Optional[int] = None) -> list[tuple[str, float]]:
    """The pipeline's merge: best score per document, stable descending sort, optional cut."""
    best: dict[str, float] = {}
    for doc_id, score in hits:
        if doc_id not in best or score > best[doc_id]:
            best[doc_id] = score
    out = sorted(best.items(), key=lambda h: h[1], reverse=True)
    return out if top_k is None else out[:top_k]


def format_hits(index: KnowledgeIndex, hits: list[tuple[str, float]]) -> str:
    return "\n".join(
        f"{i}. {index.title(doc_id)}\n   ID: {doc_id}\n   Score: {score:.4f}\n   Content: {index.content(doc_id)}\n"
        for i, (doc_id, score) in enumerate(hits, 1)
    )


def kb_search_text(
    index: KnowledgeIndex, query: Any, top_k: int, cut: Optional[int] = None, measured: bool = False
) -> str:
    """``KB_search``'s output: ranked documents (or none) and upstream's timing line.

    ``measured``: the phases are timed as upstream times them (the line then differs from run to run);
    otherwise the line reads 0 ms throughout, so that the same actions give the same observations.
    """
    if not measured:
        hits = merge(index.bm25_search(query, top_k), cut)
        out = format_hits(index, hits) if hits else "No relevant documents found."
        return out + "\n\n[Timing: retrieval=0ms, reranking=0ms, total=0ms]"
    t0 = time.perf_counter()
    pre_ms = (time.perf_counter() - t0) * 1000  # no input preprocessors: an empty phase, still timed
    t1 = time.perf_counter()
    raw = index.bm25_search(query, top_k)
    retrieval_ms = (time.perf_counter() - t1) * 1000
    hits = merge(raw, cut)
    t2 = time.perf_counter()
    post_ms = (time.perf_counter() - t2) * 1000  # no postprocessors: an empty phase, still timed
    out = format_hits(index, hits) if hits else "No relevant documents found."
    out += f"\n\n[Timing: retrieval={retrieval_ms:.0f}ms"
    if post_ms > 0:
        out += f", reranking={post_ms:.0f}ms"
    return out + f", total={pre_ms + retrieval_ms + post_ms:.0f}ms]"


def grep_text(index: KnowledgeIndex, pattern: Any, top_k: int, case_sensitive: bool) -> str:
    hits = merge(index.grep_search(pattern, top_k, case_sensitive))
    if not hits:
        return f"No matches found for pattern: {pattern}"
    return format_hits(index, hits)


_TIMING = re.compile(r"\n\n\[Timing: [^\]]*\]$")


def strip_timing(text: str) -> str:
    """A ``KB_search`` output without its timing line (what two runs can be compared on)."""
    return _TIMING.sub("", text)
