"""The five papers, one folder each: everything that belongs to one paper sits together.

Every folder holds the paper's prompt templates (``prompts.py``), its rewards
(``rewards.py``), its completion format (``formats.py``), its published numbers
(``published.yaml``, read by :mod:`qrlib.eval.published`), its checkable claims
(``claims.yaml``), its RESULTS.md sections (``results.py``), the steps of its notebooks
(``study.py`` and the like) and its pipeline modules:

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
:mod:`qrlib.generation`, rewards in :mod:`qrlib.rl.rewards`). Each paper's ``register.py``
imports its registering modules (``prompts``, ``formats``, ``rewards``) and is declared as
an entry point of the ``qrlib.methods`` group in ``pyproject.toml``;
:func:`qrlib.core.registry.load_methods` imports them all, so ``import
qrlib.methods.registry`` fills the registries; the lookups do it themselves on a miss, and
the modules that resolve names from a configuration (:mod:`qrlib.generation.rewrite`,
:mod:`qrlib.rl.env`, :mod:`qrlib.rl.train`, :mod:`qrlib.methods.acqo.curriculum`) import
:mod:`qrlib.methods.registry` with a plain statement.

Why not in this ``__init__`` (or in each paper's): :mod:`qrlib.freshness` counts every
parent ``__init__`` (and its package data) as loaded by an import. Were the registrations
imported here, importing any one module of any paper (``decompose`` for notebook 03, the
published numbers for notebook 02) would make that notebook depend on every prompt, format
and reward of all five papers. As it is, these ``__init__`` files import nothing: importing
``qrlib.methods.bandits.bandits`` loads that module, its paper's ``published.yaml`` (package
data of ``qrlib/methods/bandits/``) and what it imports itself, no more; and the pipeline
modules (``curriculum``, ``bandits``, ``decompose``, ``bestofn``, ``synthesis``,
``evidence``) are inputs only of the notebooks that import them.
"""
