"""RL-QR: query rewriting trained on index-aligned synthetic queries.

Importing the package registers the paper's prompts (``rlqr/rewrite``, ``rlqr/synthesis``),
its completion format (``plain``) and its reward (NDCG with the group-normalised format
penalty). Pipeline module: :mod:`~qrlib.methods.rlqr.synthesis`.
"""
from __future__ import annotations

from qrlib.methods.rlqr import formats, prompts, rewards  # noqa: F401  (registers)
