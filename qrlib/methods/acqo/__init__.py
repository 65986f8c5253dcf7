"""ACQO: adaptive complex-query optimisation (decompose into up to three sub-queries, fuse
their rankings, train in two stages with a curriculum).

Importing the package registers the paper's prompts (``acqo/*``), its completion format
(``acqo``) and its rewards (Stage I and II, ConvSearch-R1's rank reward). Pipeline module:
:mod:`~qrlib.methods.acqo.curriculum`. Rank-score fusion (RSF) is shared with other
notebooks and lives in :mod:`qrlib.retrieval.fusion`.
"""
from __future__ import annotations

from qrlib.methods.acqo import formats, prompts, rewards  # noqa: F401  (registers)
