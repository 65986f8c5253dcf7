"""The five papers, one folder each: everything that belongs to one paper sits together.

Every folder holds the paper's prompt templates (``prompts.py``), its rewards
(``rewards.py``), its completion format (``formats.py``), its published numbers
(``published.yaml``, read by :mod:`qrlib.eval.published`) and its pipeline modules:

* :mod:`qrlib.methods.deepretrieval`: DeepRetrieval (Jiang et al. 2025); ``evidence.py``
  (evidence-seeking QA: answer-span qrels and scoring);
* :mod:`qrlib.methods.acqo`: ACQO; ``curriculum.py`` (Stage I decompositions, rejection
  sampling, the Stage II curriculum);
* :mod:`qrlib.methods.sage`: SAGE, with DMQR-RAG's rewriting prompts it compares against
  (``dmqr_prompts.py``); ``bestofn.py`` (the best-of-N curves);
* :mod:`qrlib.methods.rlqr`: RL-QR; ``synthesis.py`` (index-aligned query synthesis);
* :mod:`qrlib.methods.bandits`: the bandit query-decomposition study (Petcu et al. 2025);
  ``bandits.py`` (the policies and the simulator), ``decompose.py`` (sub-query splits).

Registration. The registries sit in the shared layers (prompts and formats in
:mod:`qrlib.generation`, rewards in :mod:`qrlib.rl.rewards`); a paper's ``__init__``
imports the modules that register into them (prompts, formats, rewards) and nothing else,
and this package imports every paper, so ``import qrlib.methods`` fills the registries
(the lookups do it themselves on a miss: :func:`qrlib.core.registry.load_methods`). The
papers are imported explicitly, not with ``pkgutil``, so that the static import reading of
:mod:`qrlib.freshness` sees each of them; the order is the order the rewards and formats
were always listed in (DeepRetrieval, ACQO, SAGE, RL-QR, then the bandit study).

Pipeline modules (``curriculum``, ``bandits``, ``decompose``, ``bestofn``, ``synthesis``,
``evidence``) are imported by the notebooks that use them, never by an ``__init__``: a
notebook's freshness then depends on a paper's pipeline only when it imports it, while
every paper's registrations (and ``published.yaml``) are inputs of whatever imports a paper.
"""
from __future__ import annotations

from qrlib.methods import deepretrieval, acqo, sage, rlqr, bandits  # noqa: F401  (registers)

PAPERS = ("deepretrieval", "acqo", "sage", "rlqr", "bandits")
