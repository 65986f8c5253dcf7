"""RL-QR: query rewriting trained on index-aligned synthetic queries.

Registering modules (imported by :mod:`qrlib.methods.registry`): ``prompts``
(``rlqr/rewrite``, ``rlqr/synthesis``), ``formats`` (``plain``), ``rewards`` (NDCG with the
group-normalised format penalty). Pipeline module: :mod:`~qrlib.methods.rlqr.pipeline` (the steps
notebook 14 calls: documents to synthesise from, synthesis, training rows, one rewriter per
retriever, evaluation); :mod:`~qrlib.methods.rlqr.synthesis` parses and filters the
synthesised questions.
Published numbers: ``published.yaml``.
"""
