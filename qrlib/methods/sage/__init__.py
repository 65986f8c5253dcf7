"""SAGE: strategy-guided query rewriting (five rewriting strategies, strategy-aware rewards).

Registering modules (imported by :mod:`qrlib.methods.registry`): ``prompts`` (``sage/*``),
``dmqr_prompts`` (DMQR-RAG's four rewriting prompts and the generic rewrite prompt, the
baselines SAGE compares against: ``dmqr/*``, ``generic/rewrite``), ``formats`` (``sage``),
``rewards`` (SCS, CRS, the direct reward, the copy penalty of Eq. 3). Pipeline modules:
:mod:`~qrlib.methods.sage.pipeline` (the training variants of Tables 1-3, their data,
training and test rewriting: notebooks 08 and 15), :mod:`~qrlib.methods.sage.bestofn`
(best-of-N, Fig. 3) and :mod:`~qrlib.methods.sage.crs` (the CRS readings).
Published numbers: ``published.yaml``.
"""
