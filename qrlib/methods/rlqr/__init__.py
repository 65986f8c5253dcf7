"""RL-QR: query rewriting trained on index-aligned synthetic queries.

Registering modules (imported by :mod:`qrlib.methods.registry`): ``prompts``
(``rlqr/rewrite``, ``rlqr/synthesis``), ``formats`` (``plain``), ``rewards`` (NDCG with the
group-normalised format penalty). Pipeline module: :mod:`~qrlib.methods.rlqr.synthesis`.
Published numbers: ``published.yaml``.
"""
