"""The one collection type: :class:`Dataset` (corpus, queries, qrels, metadata).

It lives apart from :mod:`qrlib.data.datasets` (BEIR folders, ir_datasets, lookup) and
:mod:`qrlib.data.loaders` (MultiHop-RAG, TopiOCQA) so that both build it without importing each
other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Dataset:
    """A retrieval test collection.

    ``queries`` holds only the queries with qrels in the loaded split; ``query_meta`` holds
    each query's metadata (HotpotQA type/level, 2Wiki type, answers, ...); ``meta`` holds
    collection-level facts (source folder, split, counts, notes on what was skipped).
    """

    name: str
    corpus: dict[str, dict]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    query_meta: dict[str, dict] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def doc_text(self, doc_id: str) -> str:
        """Title and body joined by one space (BEIR's convention for encoders and BM25)."""
        return doc_text(self.corpus[doc_id])

    def __repr__(self) -> str:
        notes = self.notes()
        return (f"Dataset({self.name!r}, docs={len(self.corpus)}, queries={len(self.queries)}, "
                f"qrels={sum(len(v) for v in self.qrels.values())}, "
                f"split={self.meta.get('split')!r}"
                + (f", notes={'; '.join(notes)!r}" if notes else "") + ")")

    def notes(self) -> list[str]:
        """What loading found questionable (empty queries, qrels pointing at documents
        missing from the corpus, duplicates dropped ...), from ``meta``; [] when clean."""
        m = self.meta
        out = []
        if m.get("empty_queries"):
            out.append(f"{m['empty_queries']} empty queries")
        if m.get("qrels_docs_missing_from_corpus"):
            out.append(f"{m['qrels_docs_missing_from_corpus']} qrels point at documents "
                       "missing from the corpus")
        if m.get("qrels_queries_without_text"):
            out.append(f"{m['qrels_queries_without_text']} qrels queries have no text "
                       "(dropped)")
        if m.get("duplicate_doc_ids_dropped"):
            out.append(f"{m['duplicate_doc_ids_dropped']} duplicated document ids "
                       "(first copy kept)")
        if m.get("duplicate_query_ids_dropped"):
            out.append(f"{m['duplicate_query_ids_dropped']} duplicated query ids "
                       "(first copy kept)")
        return out

    def summary(self) -> str:
        """One line: name, split, counts and :meth:`notes`."""
        notes = self.notes()
        return (f"{self.name} ({self.meta.get('split')}): {len(self.corpus)} docs, "
                f"{len(self.queries)} queries, {sum(len(v) for v in self.qrels.values())} "
                f"qrels" + (f"; {'; '.join(notes)}" if notes else ""))

    @property
    def doc_ids(self) -> list[str]:
        return list(self.corpus)

    def stats(self) -> dict[str, Any]:
        """Counts used in the data-analysis notebook (docs, queries, judged per query)."""
        judged = [len(v) for v in self.qrels.values()]
        rel = [sum(1 for r in v.values() if r > 0) for v in self.qrels.values()]
        return {"dataset": self.name, "split": self.meta.get("split"),
                "docs": len(self.corpus), "queries": len(self.queries),
                "qrels": sum(judged),
                "judged_per_query": sum(judged) / max(len(judged), 1),
                "relevant_per_query": sum(rel) / max(len(rel), 1)}


def doc_text(doc: dict | str) -> str:
    """``title + " " + text`` of a corpus entry (a bare string is returned unchanged)."""
    if isinstance(doc, str):
        return doc
    title = (doc.get("title") or "").strip()
    text = (doc.get("text") or "").strip()
    return f"{title} {text}".strip() if title else text
