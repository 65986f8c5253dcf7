"""The bandit study of query decomposition (Petcu et al. 2025, "Query Decomposition for
RAG: Balancing Exploration-Exploitation"); its published numbers are filed as paper
``bandit``.

Importing the package registers the paper's decomposition prompts (``bandit/*``). It has no
trained rewrite, hence no completion format or reward. Pipeline modules:
:mod:`~qrlib.methods.bandits.bandits` (policies, simulator, metrics) and
:mod:`~qrlib.methods.bandits.decompose` (oracle, heuristic and model splits); neither is
imported here, so only the notebooks that use them depend on them.
"""
from __future__ import annotations

from qrlib.methods.bandits import prompts  # noqa: F401  (registers)
