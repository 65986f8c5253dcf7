"""Search settings of DeepRetrieval's released code (pat-jj/DeepRetrieval), audited in notebook 11.

Not paper numbers: what the released scripts do. Each BEIR task's ``search.py`` sets the
Lucene BM25 parameters, and its evaluation script scores nDCG@10 with one of two protocols
(:func:`qrlib.retrieval.lucene.released_ndcg10`): ``"rows"`` scores one item per qrels row
(``code/src/eval/BM25/scifact.py``), ``"grouped"`` groups the rows per query
(``code/src/eval/BM25/nfcorpus.py``, ``hotpotqa.py``). Every released query also carries the
``contents:`` field prefix (``query_prefix`` of :class:`qrlib.retrieval.lucene.LuceneBM25Retriever`).
"""
from __future__ import annotations

from qrlib.core.errors import QrlibError

RELEASED_BM25 = {
    "scifact": {"k1": 1.2, "b": 0.75, "protocol": "rows"},
    "nfcorpus": {"k1": 0.9, "b": 0.4, "protocol": "grouped"},
    "hotpotqa": {"k1": 0.9, "b": 0.4, "protocol": "grouped"},
}
RELEASED_QUERY_PREFIX = "contents:"


def released_bm25(dataset: str) -> dict[str, object]:
    """The released scripts' BM25 setting for a BEIR task (``hotpotqa-*`` subsets map to
    ``hotpotqa``); a one-line error for a task the release has no script for."""
    key = "hotpotqa" if dataset.startswith("hotpotqa") else dataset
    if key not in RELEASED_BM25:
        raise QrlibError(f"DeepRetrieval's released code has no BM25 script for {dataset!r}; "
                         f"it has {', '.join(RELEASED_BM25)}")
    return dict(RELEASED_BM25[key])
