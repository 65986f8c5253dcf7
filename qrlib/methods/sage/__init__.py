"""SAGE: strategy-guided query rewriting (five rewriting strategies, strategy-aware rewards).

Importing the package registers the paper's prompts (``sage/*``), the DMQR-RAG baselines
and the generic rewrite prompt SAGE compares against (``dmqr/*``, ``generic/rewrite`` in
:mod:`~qrlib.methods.sage.dmqr_prompts`), its completion format (``sage``) and its rewards
(SCS, CRS, the direct reward). Pipeline module: :mod:`~qrlib.methods.sage.bestofn`.
"""
from __future__ import annotations

from qrlib.methods.sage import dmqr_prompts, formats, prompts, rewards  # noqa: F401  (registers)
