"""The bandit query-decomposition study: its registrations into the shared registries.

Named by the ``bandits`` entry point of the ``qrlib.methods`` group in ``pyproject.toml``;
:func:`qrlib.core.registry.load_methods` imports it.
"""
from qrlib.methods.bandits import prompts  # noqa: F401
