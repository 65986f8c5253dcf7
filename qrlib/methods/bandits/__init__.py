"""The bandit study of query decomposition (Petcu et al. 2025, "Query Decomposition for
RAG: Balancing Exploration-Exploitation"); its published numbers are filed as paper
``bandit`` (``published.yaml``).

Registering module (imported by :mod:`qrlib.methods.registry`): ``prompts`` (``bandit/*``,
the decomposition prompts). No trained rewrite, hence no completion format or reward.
Pipeline modules: :mod:`~qrlib.methods.bandits.bandits` (policies, simulator, metrics) and
:mod:`~qrlib.methods.bandits.decompose` (oracle, heuristic and model splits).
"""
