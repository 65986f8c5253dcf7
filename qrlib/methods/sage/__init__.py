"""SAGE: strategy-guided query rewriting (five rewriting strategies, strategy-aware rewards).

Registering modules (imported by :mod:`qrlib.methods.registry`): ``prompts`` (``sage/*``),
``dmqr_prompts`` (DMQR-RAG's four rewriting prompts and the generic rewrite prompt, the
baselines SAGE compares against: ``dmqr/*``, ``generic/rewrite``), ``formats`` (``sage``),
``rewards`` (SCS, CRS, the direct reward, the copy penalty of Eq. 3). Pipeline module:
:mod:`~qrlib.methods.sage.bestofn`. Published numbers: ``published.yaml``.
"""
