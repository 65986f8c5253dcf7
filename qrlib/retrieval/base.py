"""What every retriever shares: the ranked-list type, the ``search`` protocol, the checks
of a query batch and the corpus fingerprint that keys an index cache.

Kept apart from :mod:`qrlib.retrieval.retrievers` so that the other back-ends
(:mod:`qrlib.retrieval.lucene`, :mod:`qrlib.retrieval.litsearch`) build on it without
importing the BM25/dense module that dispatches to them (which was an import cycle).
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from qrlib.core.errors import QrlibError
from qrlib.data.collection import Dataset, doc_text

Ranked = list[tuple[str, float]]


@runtime_checkable
class Retriever(Protocol):
    """Anything with a batched ``search``: one ranked ``(doc_id, score)`` list per text."""

    def search(self, texts: Sequence[str], k: int) -> list[Ranked]: ...


# --------------------------------------------------------------------------- helpers
def corpus_mapping(corpus: Any) -> Mapping[Any, Any]:
    """The ``{doc_id: doc}`` mapping of a Dataset or a mapping; one-line errors for
    anything else and for an empty corpus (every back-end indexes through this check)."""
    if isinstance(corpus, Dataset):
        corpus = corpus.corpus
    if not isinstance(corpus, Mapping):
        raise QrlibError(f"corpus must be a Dataset or a dict doc_id -> {{title, text}}, "
                         f"got {type(corpus).__name__}")
    if len(corpus) == 0:
        raise QrlibError("corpus is empty; a retriever needs at least one document")
    return corpus


def corpus_texts(corpus: Any) -> tuple[list[str], list[str]]:
    """(doc_ids, texts) from a Dataset, ``{id: {"title","text"}}`` or ``{id: str}``."""
    corpus = corpus_mapping(corpus)
    ids = [str(d) for d in corpus]
    return ids, [doc_text(v) for v in corpus.values()]


def check_query_batch(texts: Sequence[str], k: int) -> list[str]:
    """``texts`` as a list after the checks every ``search`` makes (a list, not a single
    string; not empty; str items; ``k`` a positive integer); one-line errors otherwise."""
    if isinstance(texts, str):
        raise QrlibError("search() takes a list of query texts, got a single string; "
                         "wrap it as [text]")
    texts = list(texts)
    if not texts:
        raise QrlibError("search() got an empty query list; pass at least one query text")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise QrlibError(f"k must be a positive integer, got {k!r}")
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise QrlibError(f"query texts must be str; got {bad[0]}")
    return texts


def corpus_fingerprint(doc_ids: Sequence[str], texts: Sequence[str]) -> str:
    """sha256 over doc ids and texts (order-sensitive): the cache key of an index."""
    h = hashlib.sha256()
    for d, t in zip(doc_ids, texts):
        h.update(d.encode("utf-8"))
        h.update(b"\x00")
        h.update(t.encode("utf-8"))
        h.update(b"\x01")
    return h.hexdigest()
