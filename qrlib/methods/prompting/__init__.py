"""Training-free prompting baselines that every RL row is measured against.

Not one of the five papers: the comparison a reader asks of each of them. Xu et al.,
"Rethinking On-policy Optimization for Query Augmentation" (TMLR; arXiv:2510.17139)
compared prompting and RL query augmentation at equal compute and found that a simple
pseudo-document expansion often matches or beats RL rewriting. Two baselines:

* ``spqe.py``: SPQE (their Simple Pseudo-document Query Expansion): the untrained policy
  writes a short passage :math:`d_H` for the query and :math:`(q, d_H)` is searched, with
  Query2doc's sparse reading (the query repeated, Wang et al. 2023, arXiv:2303.07678) and
  HyDE's (the passage alone, Gao et al. 2023, arXiv:2212.10496) beside it;
* the untrained policy with the best of its rewriting prompts (DMQR-RAG's four and the
  generic one of :mod:`qrlib.methods.sage.dmqr_prompts`, each as rewrite and as
  expansion), chosen on training queries, never on the test split.

Like the papers' folders, this ``__init__`` imports nothing (see :mod:`qrlib.methods`).
"""
