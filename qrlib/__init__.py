"""qrlib: a reproducibility workbook for RL-trained query optimisation in retrieval.

Layers by role (see README, "The qrlib package"): ``core`` (I/O, locks, errors), ``data``,
``retrieval``, ``generation`` (policy, engine, prompt and format registries, rewriting),
``rl`` (reward registry, environment, trainer), ``eval`` (metrics, statistics, published
numbers); one folder per paper under ``methods`` (``deepretrieval``, ``acqo``, ``sage``,
``rlqr``, ``bandits``); the notebook runner in ``workbook``, ``freshness``, ``publish``,
``results``, and ``plots``.
"""
from __future__ import annotations

from qrlib.core.errors import QrlibError

__version__ = "0.1.0"
__all__ = ["QrlibError", "__version__"]
