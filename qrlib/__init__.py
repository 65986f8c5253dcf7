"""qrlib: a reproducibility workbook for RL-trained query optimisation in retrieval.

Modules (see README): data, retrieval, metrics, fusion, parsing, prompts, rewards, env,
policy, train, bandits, decompose, workbook, plots.
"""
from __future__ import annotations

from qrlib.core.errors import QrlibError

__version__ = "0.1.0"
__all__ = ["QrlibError", "__version__"]
