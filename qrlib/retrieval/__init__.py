"""Retrieval layer: retrievers behind one ``search(texts, k)`` protocol, and fusion.

* :mod:`~qrlib.retrieval.base`: the ranked-list type, the protocol, query-batch checks,
  the corpus fingerprint (shared by every back-end);
* :mod:`~qrlib.retrieval.retrievers`: BM25 (bm25s / rank_bm25) and dense (sentence
  transformers + FAISS) retrievers, ``build_retriever``, ``run_queries``, ``encode_corpus``;
* :mod:`~qrlib.retrieval.lucene`: Lucene BM25 through Pyserini (DeepRetrieval's engine);
* :mod:`~qrlib.retrieval.litsearch`: the PubMed and ClinicalTrials.gov search clients
  (live or replayed);
* :mod:`~qrlib.retrieval.fusion`: rank and score fusion (RRF, CombSUM, CombMNZ, ACQO's RSF);
* :mod:`~qrlib.retrieval.baseline`: raw-query baselines (``python -m qrlib baseline``).

Lucene and the literature-search clients came from DeepRetrieval's experiments but are
retrieval back-ends that ``build_retriever`` dispatches to and any method can search with,
so they live here rather than in :mod:`qrlib.methods.deepretrieval`. No re-exports:
import the module you need (``from qrlib.retrieval import retrievers as retrieval``).
"""
