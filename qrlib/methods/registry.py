"""Every paper's registrations: importing this module fills the prompt, format and reward
registries (see :mod:`qrlib.methods` for why this is not the package ``__init__``).

The papers are the entry points of the ``qrlib.methods`` group (``pyproject.toml``; each
names ``qrlib/methods/<paper>/register.py``), loaded by
:func:`qrlib.core.registry.load_methods` in the order they are declared (DeepRetrieval,
ACQO, SAGE, RL-QR, the bandit study, the prompting baselines), which is the order of
:func:`qrlib.rl.rewards.list_rewards` and :func:`qrlib.generation.parsing.formats`.
:mod:`qrlib.workbook.freshness` counts those modules as imported by this one.
"""
from __future__ import annotations

from qrlib.core.registry import load_methods, paper_entries

load_methods()

#: The registered papers, in load order.
PAPERS = tuple(paper_entries())
