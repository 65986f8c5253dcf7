"""The bandit study of query decomposition (Petcu et al. 2025, "Query Decomposition for
RAG: Balancing Exploration-Exploitation"); its published numbers are filed as paper
``bandit`` (``published.yaml``).

Registering module (``register.py``, the ``bandits`` entry point): ``prompts``
(``bandit/*``, the decomposition prompts). No trained rewrite, hence no completion format or
reward. Pipeline modules: :mod:`~qrlib.methods.bandits.bandits` (policies, simulator,
metrics), :mod:`~qrlib.methods.bandits.decompose` (oracle, heuristic and model splits) and
:mod:`~qrlib.methods.bandits.study` (notebook 09's steps); ``results.py`` holds its
RESULTS.md section.
"""
