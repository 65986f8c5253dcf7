"""bm25s over Lucene's own tokens: separates the tokenizer from the engine.

DeepRetrieval searches with Lucene (Pyserini); qrlib's default BM25 is bm25s with its own
tokenizer. Indexing the Anserini-analysed tokens (:func:`qrlib.retrieval.lucene.analyze`)
with bm25s (``method="lucene"``, the same idf) leaves only the engine between the two:
Lucene stores document lengths in one byte, so its length normalisation is slightly
coarser (notebook 11, ``11_engines``). Needs the Lucene extra (Pyserini and a JVM).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.retrieval import lucene
from qrlib.retrieval.base import Ranked, check_query_batch


class LuceneTokensBM25:
    """bm25s (Lucene idf) over Lucene-analysed ``title + title_sep + text``; the retriever
    protocol ``search(texts, k)``. Queries are analysed the same way; a query with no
    indexed token gets an empty list."""

    def __init__(self, corpus: Mapping[str, Any], k1: float = 0.9, b: float = 0.4,
                 title_sep: str = "\n"):
        import bm25s  # deferred: only this comparison needs a second index

        self.doc_ids = list(corpus)
        self.k1, self.b = float(k1), float(b)
        toks = [lucene.analyze(f"{v.get('title') or ''}{title_sep}{v.get('text') or ''}")
                for v in corpus.values()]
        self.model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        self.model.index([t if t else ["\u2400"] for t in toks], show_progress=False)
        self.vocab = set(self.model.vocab_dict)

    def __repr__(self) -> str:
        return f"LuceneTokensBM25(k1={self.k1}, b={self.b}, docs={len(self.doc_ids)})"

    def search(self, texts: Sequence[str], k: int = 10) -> list[Ranked]:
        texts = check_query_batch(texts, k)
        out: list[Ranked] = [[] for _ in texts]
        toks = [[t for t in lucene.analyze(x) if t in self.vocab] for x in texts]
        live = [i for i, t in enumerate(toks) if t]
        if live:
            res = self.model.retrieve([toks[i] for i in live], k=min(k, len(self.doc_ids)),
                                      show_progress=False, return_as="tuple")
            for row, i in enumerate(live):
                out[i] = [(self.doc_ids[int(d)], float(s))
                          for d, s in zip(res.documents[row], res.scores[row]) if s > 0]
        return out
