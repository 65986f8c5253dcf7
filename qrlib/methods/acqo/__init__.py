"""ACQO: adaptive complex-query optimisation (decompose into up to three sub-queries, fuse
their rankings, train in two stages with a curriculum).

Registering modules (imported by :mod:`qrlib.methods.registry`): ``prompts`` (``acqo/*``),
``formats`` (``acqo``), ``rewards`` (Stage I and II, ConvSearch-R1's rank reward). Pipeline
module: :mod:`~qrlib.methods.acqo.curriculum`. Published numbers: ``published.yaml``.
Rank-score fusion (RSF) is used beyond ACQO and lives in :mod:`qrlib.retrieval.fusion`.
"""
