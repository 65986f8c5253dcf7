"""DeepRetrieval (Jiang et al. 2025): RL query generation against a real search engine.

Registering modules (imported by :mod:`qrlib.methods.registry`): ``prompts`` (literature,
evidence, BM25, dense and SQL tasks, each with and without reasoning), ``formats``
(``deepretrieval``, ``deepretrieval-nothink``), ``rewards`` (recall and answer-rank tiers,
nDCG, SQL execution accuracy). Pipeline modules: :mod:`~qrlib.methods.deepretrieval.evidence`
(evidence seeking, notebook 11) and :mod:`~qrlib.methods.deepretrieval.sql_task` (database
search, notebook 13). :mod:`~qrlib.methods.deepretrieval.released` holds the search settings
of the released code (pat-jj/DeepRetrieval) that notebook 11 audits. Published numbers:
``published.yaml``.

The retrieval clients the paper searches with (Lucene through Pyserini, PubMed and
ClinicalTrials.gov) are shared back-ends of :mod:`qrlib.retrieval` that ``build_retriever``
dispatches to, and the SQL sandbox is the data layer's :mod:`qrlib.data.sql` (the Spider
loader runs gold SQL with it), so neither lives here.
"""
