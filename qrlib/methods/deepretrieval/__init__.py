"""DeepRetrieval (Jiang et al. 2025): RL query generation against a real search engine.

Importing the package registers the paper's prompts (literature, evidence, BM25, dense and
SQL tasks, each with and without reasoning), its completion formats (``deepretrieval``,
``deepretrieval-nothink``) and its rewards (recall and answer-rank tiers, nDCG, SQL
execution accuracy). Pipeline module: :mod:`~qrlib.methods.deepretrieval.evidence`. The
retrieval clients the paper searches with (Lucene through Pyserini, PubMed and
ClinicalTrials.gov) are shared retrieval back-ends in :mod:`qrlib.retrieval`, and the SQL
sandbox is the data layer's :mod:`qrlib.data.sql` (the Spider loader runs gold SQL with it).
"""
from __future__ import annotations

from qrlib.methods.deepretrieval import formats, prompts, rewards  # noqa: F401  (registers)
